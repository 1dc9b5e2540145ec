"""The repaired CUDA simulator (``numba_gemm.ptx.simulator``): block barriers with the simulator's
semantics (early-exiting threads no longer counted, the first exception raised at the launch,
no hang), and one SMEM array per ``cuda.shared.array`` line for the whole block; and the
package's simulator models of 128-bit accesses, which check alignment as a GPU does."""

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

    from numba_gemm.ptx import simulator as _simulator

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


def test_vector_accesses_check_alignment_on_gmem():
    """A 128-bit load, store or 16-byte cp.async of device memory at an address that is not a
    multiple of 16 bytes fails as on a GPU (a plan that runs a vector variant on unaligned rows
    must not pass on the CPU); SMEM tiles are not checked."""
    from numba_gemm.ptx.cpasync import copy_async
    from numba_gemm.ptx.vecmem import load4, store4

    pitched = cuda.to_device(np.zeros((3, 70), np.float32))  # rows 280 bytes apart
    assert load4(pitched, 0, 4) == (0, 0, 0, 0)
    store4(pitched, 2, 8, 1, 2, 3, 4)  # row 2 starts at 560 = 35 * 16
    with pytest.raises(ValueError, match="misaligned"):
        load4(pitched, 1, 4)
    with pytest.raises(ValueError, match="misaligned"):
        store4(pitched, 0, 2, 1, 2, 3, 4)
    with pytest.raises(ValueError, match="misaligned"):
        copy_async(np.zeros((1, 4), np.float32), 0, 0, pitched, 1, 0, 16, True)
    copy_async(np.zeros((1, 4), np.float32), 0, 0, pitched, 1, 1, 4, True)  # 4 bytes: any
    assert load4(np.zeros((2, 6), np.float32), 1, 1) == (0, 0, 0, 0)  # SMEM: not checked

    @cuda.jit
    def copy_row(x, r, out):  # a kernel sees its device arrays through another wrapper
        out[0], out[1], out[2], out[3] = load4(x, r, 0)

    out = cuda.to_device(np.zeros(4, np.float32))
    copy_row[1, 1](pitched, 2, out)
    with pytest.raises(ValueError, match="misaligned"):
        copy_row[1, 1](pitched, 1, out)
