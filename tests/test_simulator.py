"""The repaired CUDA simulator (``numba_gemm._simulator``): block barriers with the simulator's
semantics (early-exiting threads no longer counted, the first exception raised at the launch,
no hang), and one SMEM array per ``cuda.shared.array`` line for the whole block."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda, int32

from numba_gemm.device import SIMULATOR

pytestmark = pytest.mark.skipif(not SIMULATOR, reason="repairs of the CUDA simulator")

N = 64


@cuda.jit
def _rotate(out, live):
    """Threads >= live return at once; the others pass values around through SMEM over
    several barriers."""
    s = cuda.shared.array(N, int32)
    t = cuda.threadIdx.x
    if t >= live:
        return
    s[t] = t
    for _ in range(3):
        cuda.syncthreads()
        v = s[(t + 1) % live]
        cuda.syncthreads()
        s[t] = v
    out[cuda.blockIdx.x, t] = s[t]


@cuda.jit
def _count(out):
    t = cuda.threadIdx.x
    out[cuda.blockIdx.x, t] = cuda.syncthreads_count(t % 3 == 0)


@cuda.jit
def _raises_in_one_thread(out, bad):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == bad:
        out[N + 5, 0] = 1  # out of bounds: IndexError in this thread only
    cuda.syncthreads()  # the others wait here for a thread that never comes
    out[0, t] = t


def _launch(kernel, grid, args, timeout=60.0):
    """Run ``kernel[grid, N](*args)`` on another thread; fail (not hang) past ``timeout``."""
    err = []

    def go():
        try:
            kernel[grid, N](*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            err.append(e)

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), f"{kernel} did not finish in {timeout} s (a barrier hung)"
    return err[0] if err else None


def test_installed():
    from numba.cuda.simulator import kernel, kernelapi

    from numba_gemm import _simulator

    assert kernel.BlockManager.run is _simulator._run_block
    assert kernel.BlockThread.syncthreads is _simulator._syncthreads
    assert kernelapi.FakeCUDAShared.array.__module__ == _simulator.__name__


@pytest.mark.parametrize("live", [N, 40, 1])
def test_barriers_count_only_live_threads(live):
    out = np.full((2, N), -1, np.int32)
    assert _launch(_rotate, 2, (out, live)) is None
    want = (np.arange(live) + 3) % live
    for b in range(2):
        np.testing.assert_array_equal(out[b, :live], want)
        assert (out[b, live:] == -1).all()


def test_syncthreads_count():
    out = np.zeros((2, N), np.int32)
    assert _launch(_count, 2, (out,)) is None
    assert (out == len(range(0, N, 3))).all()


def test_exception_in_one_thread_is_raised_not_hung():
    out = np.zeros((N, N), np.int32)
    err = _launch(_raises_in_one_thread, 1, (out, 17))
    assert isinstance(err, IndexError), f"{type(err).__name__}: {err}"
    assert "tid=[17, 0, 0]" in str(err)
