"""Launch geometry and CUDA-event timing.

``cdiv`` and ``tile_grid`` turn a stage's tile constants into a grid; ``time_launches`` and
``time_stage`` time GPU work with CUDA events (``cuda.event``), one event pair per repeat, after a
warm-up, and return per-repeat milliseconds. The bench, the tuner and the notebooks time through
these two functions only.

Why the "hold" kernel: a Python launch costs tens of microseconds of host time, longer than a
small GEMM runs, so a naive event pair around each launch times the host, not the kernel. Before
the timed repeats we enqueue a kernel that sleeps on the GPU for longer than the host needs to
enqueue all of them; the repeats then run back to back and each event pair brackets kernel time
alone (the method of NVIDIA's nvbench "blocking kernel").
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from numba import cuda

from .vecmem import SIMULATOR


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative ints: the number of ``b``-tiles covering ``a``."""
    return -(-a // b)


def tile_grid(M: int, N: int, BM: int, BN: int) -> tuple[int, int]:
    """Grid of ``(BM x BN)`` C tiles: ``x`` walks the N (column) tiles, ``y`` the M (row) tiles."""
    return cdiv(N, BN), cdiv(M, BM)


_SMEM_OPT_IN = 48 * 1024
_smem_opted_in: set = set()


def allow_dynamic_smem(kernel: Any, args: tuple, nbytes: int) -> None:
    """Let ``kernel`` (for the types of ``args``) launch with ``nbytes`` of dynamic SMEM.

    A block gets more than 48 KB of SMEM only after the driver attribute
    ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` is raised for the compiled function
    (CUDA C Programming Guide, "Shared Memory", compute capability 7.x+); up to 227 KB on sm_90.
    Compiles the kernel for these argument types if needed, sets the attribute once per
    (kernel, signature, device). No-op up to 48 KB and on the simulator.

    Raises:
        numba.cuda.cudadrv.driver.CudaAPIError: ``nbytes`` exceeds the device's limit.
    """
    if SIMULATOR or nbytes <= _SMEM_OPT_IN:
        return
    from numba.cuda.cudadrv import driver

    sig = tuple(kernel.typeof_pyval(a) for a in args)
    device = cuda.get_current_device()
    key = (id(kernel), sig, device.id, nbytes)
    if key in _smem_opted_in:
        return
    compiled = kernel.compile(sig)
    handle = compiled._codelibrary.get_cufunc().handle
    attr = driver.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.driver.cuKernelSetAttribute(attr, nbytes, handle, device.id)
    _smem_opted_in.add(key)


def blocks_per_sm(kernel: Any, threads: int, dynamic_smem: int = 0) -> int:
    """Resident blocks per SM of a compiled kernel (CUDA occupancy API, first compiled signature).

    Raises:
        ValueError: the kernel has not been compiled yet (launch it once first).
    """
    if SIMULATOR:
        return 1
    if not kernel.overloads:
        raise ValueError("kernel not compiled yet: launch it once before asking its occupancy")
    compiled = next(iter(kernel.overloads.values()))
    cufunc = compiled._codelibrary.get_cufunc()
    return int(cuda.current_context().get_active_blocks_per_multiprocessor(
        cufunc, threads, dynamic_smem))


def sm_count() -> int:
    """Multiprocessors of the current GPU (1 on the simulator)."""
    if SIMULATOR:
        return 1
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


@cuda.jit
def _hold_kernel(iterations):
    # One thread sleeping ~1 us per iteration keeps the stream busy while the host enqueues.
    for _ in range(iterations):
        cuda.nanosleep(1000)


@dataclass(frozen=True)
class Timing:
    """Per-repeat kernel times in milliseconds, with the summary statistics the bench reports."""

    ms: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def min(self) -> float:
        return min(self.ms)

    @property
    def max(self) -> float:
        return max(self.ms)

    def gflops(self, M: int, N: int, K: int) -> float:
        """GFLOP/s at the median time: ``2*M*N*K / t``."""
        return 2.0 * M * N * K / (self.median * 1e-3) / 1e9


def _as_numba_stream(stream: Any) -> Any:
    if stream in (0, None):
        return cuda.default_stream()
    return stream


def time_launches(
    enqueue: Callable[[], None],
    *,
    warmup: int = 3,
    reps: int = 20,
    stream: Any = 0,
) -> Timing:
    """Time ``enqueue()`` (which launches GPU work on ``stream``) with CUDA events.

    Args:
        enqueue: launches the work to time, asynchronously, on ``stream``.
        warmup: untimed calls first (compilation, module load, cuBLAS handle creation).
        reps: timed calls, each between its own pair of events.
        stream: the stream ``enqueue`` uses: 0 for the default stream or a Numba stream.

    Returns:
        ``Timing`` with ``reps`` values in milliseconds. On the simulator, events hold no timing
        and the values are host wall-clock times (not comparable with a GPU).

    Raises:
        ValueError: ``reps < 1`` or ``warmup < 0``.
    """
    if reps < 1 or warmup < 0:
        raise ValueError(f"need reps >= 1 and warmup >= 0, got reps={reps}, warmup={warmup}")
    s = _as_numba_stream(stream)
    if SIMULATOR:
        for _ in range(warmup):
            enqueue()
        walls = []
        for _ in range(reps):
            t0 = time.perf_counter()
            enqueue()
            walls.append((time.perf_counter() - t0) * 1e3)
        return Timing(tuple(walls))

    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        enqueue()
    s.synchronize()
    per_call_s = (time.perf_counter() - t0) / max(warmup, 1)
    # Host time to enqueue all repeats (events included), with margin, capped at 2 s.
    hold_us = int(min(2e6, 1000 + 3e6 * per_call_s * reps))
    starts = [cuda.event(timing=True) for _ in range(reps)]
    ends = [cuda.event(timing=True) for _ in range(reps)]
    _hold_kernel[1, 1, s](hold_us)
    for start, end in zip(starts, ends, strict=True):
        start.record(s)
        enqueue()
        end.record(s)
    ends[-1].synchronize()
    return Timing(tuple(cuda.event_elapsed_time(a, b) for a, b in zip(starts, ends, strict=True)))


def time_stage(
    stage: Any,
    A: Any,
    B: Any,
    C: Any,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    warmup: int = 3,
    reps: int = 20,
    stream: Any = 0,
) -> Timing:
    """Time ``stage`` on Numba device arrays A ``(M, K)``, B ``(K, N)``, C ``(M, N)`` (float32).

    The arrays are used as given (no validation: see ``numba_gemm.sgemm``); C is overwritten.
    Returns per-repeat milliseconds (see :func:`time_launches`).
    """
    import numpy as np

    a, b = np.float32(alpha), np.float32(beta)
    return time_launches(
        lambda: stage.launch(A, B, C, a, b, stream), warmup=warmup, reps=reps, stream=stream
    )
