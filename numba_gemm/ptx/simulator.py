"""Two repairs to numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), installed when the
package is imported under it: every test and notebook on a CPU-only machine runs through them.

The simulator runs a block's threads as Python threads, one block at a time
(``numba.cuda.simulator.kernel``; numba-cuda 0.30.x, the release line this package pins).

1. **Block barrier.** ``BlockManager.run`` starts the threads and then *polls* them in a loop
   until each is blocked in ``syncthreads`` or finished, releasing them when all live ones are.
   The poller never blocks: it holds the GIL for whole switch intervals (5 ms by default) while
   the threads it waits for cannot run, so a kernel's cost grows with its barriers rather than
   its work (skinny_n's simulated shuffle, two barriers per exchange: 136 s for a 36 x 44 x 20
   product, 18 s with this repair; a 0.1 ms switch interval gave 27 s but slowed a
   double_buffering test from 1.7 to 8.5 s). Here ``syncthreads`` is a condition variable: a
   thread waits until every live thread of its block has arrived, and the launching thread
   sleeps until the block is done. Same semantics as the poller: threads that have returned no
   longer count (so a kernel whose early-exiting threads skip a barrier still runs, as it did),
   and the first exception of any thread aborts the others' barriers and is raised at the
   launch.
2. **Atomic** ``cuda.shared.array``. ``FakeCUDAShared.array`` finds a block's array by the calling
   line with an unlocked check-then-create: two threads switched between the check and the
   create get different arrays for the same line, and the kernel reads SMEM nobody wrote. Seen
   in CI (a ``double_buffering`` run). Same lookup (the caller's file and line), under a lock.
   (An ``ldmatrix`` test that read garbage in CI, once blamed on this, had another cause: the
   warp exchange of ``numba_gemm.ptx.mma``'s simulator model; fixed there.)
"""

from __future__ import annotations

import sys
import threading
import time
import traceback

import numpy as np
from numba import types
from numba.cuda.simulator import kernel, kernelapi
from numba.cuda.simulator.kernel import BlockThread
from numba.np import numpy_support


class BlockBarrier:
    """``syncthreads`` for one simulated block of ``n`` threads.

    ``wait()`` returns once every live thread has called it (a generation count tells rounds
    apart); ``leave()`` is a thread's exit (a barrier then waits for one thread fewer);
    ``abort()`` makes every present and future ``wait()`` raise ``RuntimeError``."""

    def __init__(self, n: int):
        self._cond = threading.Condition()
        self.live = n
        self._arrived = 0
        self._round = 0
        self.aborted = False

    def _release(self) -> None:
        self._arrived = 0
        self._round += 1
        self._cond.notify_all()

    def wait(self) -> None:
        with self._cond:
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads call")
            self._arrived += 1
            if self._arrived >= self.live:
                self._release()
                return
            this = self._round
            while this == self._round and not self.aborted:
                self._cond.wait()
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads clear")

    def leave(self) -> None:
        with self._cond:
            self.live -= 1
            if self._arrived and self._arrived >= self.live:
                self._release()
            if self.live == 0:
                self._cond.notify_all()

    def abort(self) -> None:
        with self._cond:
            self.aborted = True
            self._cond.notify_all()

    def join(self) -> None:
        """Return when every thread has left or one has aborted the block."""
        with self._cond:
            while self.live and not self.aborted:
                self._cond.wait()


def _syncthreads(self) -> None:
    """``BlockThread.syncthreads``: this thread's block barrier."""
    self._manager._barrier.wait()


def _run_block(self, grid_point, *args) -> None:
    """``BlockManager.run``: the block's threads, started, then waited for (no polling)."""
    barrier = self._barrier = BlockBarrier(int(np.prod(self._block_dim)))

    def target():
        try:
            self._f(*args)
        except BaseException:
            barrier.abort()
            raise
        finally:
            barrier.leave()

    threads = [
        BlockThread(target, self, grid_point, p, self._debug) for p in np.ndindex(*self._block_dim)
    ]
    for t in threads:
        t.start()
    barrier.join()
    if barrier.aborted:  # the first exception, not the aborts it caused; the rest unwind alone
        deadline = time.monotonic() + 2.0  # time to record it; a thread stuck elsewhere is left
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        errors = [t.exception for t in threads if t.exception is not None]
        first = next((e for e in errors if "abort flag set" not in str(e[0])), None)
        if first is None:
            first = errors[0] if errors else (RuntimeError("simulated block aborted"), None)
        raise first[0].with_traceback(first[1])
    for t in threads:
        t.join()


def _lock_shared_allocation() -> None:
    cls = kernelapi.FakeCUDAShared
    unlocked = cls.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:  # an error, or the one dynamic buffer
            return unlocked(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = tuple(traceback.extract_stack(sys._getframe(1), limit=1)[0])[0:2]
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    cls.array = array


_installed = False


def install() -> None:
    """Install both repairs (once; a no-op when already installed)."""
    global _installed
    if _installed:
        return
    _lock_shared_allocation()
    kernel.BlockThread.syncthreads = _syncthreads
    kernel.BlockManager.run = _run_block
    _installed = True
