"""CUDA-event timing: kernel time (behind a hold kernel), end-to-end time of a call, host cost.

Three ways to time, each after a warm-up, each returning a :class:`Timing` of per-repeat
milliseconds (the bench reports the median):

- ``time_launches`` / ``time_stage``: **kernel time**. One CUDA event pair per repeat around the
  enqueued work, all repeats queued behind a "hold" kernel, so each pair brackets GPU time alone.
- ``time_calls``: **end-to-end time** of a call made back to back as a user makes it: no hold
  kernel; an event before and after a loop of ``calls`` calls; time per call = elapsed / calls.
  Host overhead that the GPU cannot hide (a call slower to issue than its kernel runs) shows here.
  ``time_calls_paired`` times several calls so, their loops taken in turn (for ratios).
- ``time_host``: **host time per call**: wall clock (``time.perf_counter``) of a loop of calls,
  read before the final synchronize, divided by the number of calls.

The bench, the tuner, ``numba_gemm.tools.check`` and the notebooks time through this module only.

Why the "hold" kernel: a Python launch costs microseconds of host time, often longer than a small
GEMM runs, so a naive event pair around each launch times the host, not the kernel. Before the timed
repeats we enqueue a kernel that sleeps on the GPU for longer than the host needs to enqueue all of
them; the repeats then run back to back and each event pair brackets kernel time alone (the method
of NVIDIA's nvbench "blocking kernel").
"""

from __future__ import annotations

import contextlib
import importlib
import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from numba import cuda

from ..device import SIMULATOR


@cuda.jit
def _hold_kernel(iterations):
    # One thread sleeping ~1 us per iteration keeps the stream busy while the host enqueues.
    for _ in range(iterations):
        cuda.nanosleep(1000)


def performance_warnings() -> tuple[type[Warning], ...]:
    """Numba's low-occupancy warning classes ("Grid size 1 will likely result in GPU
    under-utilization"): numba-cuda 0.30 raises its own
    ``numba.cuda.core.errors.NumbaPerformanceWarning``, not a subclass of numba's."""
    classes = []
    for mod in ("numba.core.errors", "numba.cuda.core.errors"):
        with contextlib.suppress(ImportError, AttributeError):
            classes.append(importlib.import_module(mod).NumbaPerformanceWarning)
    return tuple(classes)


@contextlib.contextmanager
def quiet_occupancy() -> Iterator[None]:
    """Numba's low-occupancy warnings ignored inside the block (the one-thread hold kernel, and
    small timed grids, are small on purpose)."""
    with warnings.catch_warnings():
        for cls in performance_warnings():
            warnings.simplefilter("ignore", cls)
        yield


@dataclass(frozen=True)
class Timing:
    """Per-repeat times in milliseconds, with the summary statistics the bench reports."""

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
    with quiet_occupancy():  # one thread on purpose
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
    """Kernel time of one stage on device arrays A ``(M, K)``, B ``(K, N)``, C ``(M, N)``
    (float32, C-contiguous; Numba, CuPy or PyTorch).

    ``stage`` is a ``Plan`` (launched as is), or a ``Stage`` or stage name (run through
    ``plan_for(M, N, K, stage=stage)``). The arrays are used as given (no validation: see
    ``numba_gemm.sgemm``); C is overwritten. Returns per-repeat milliseconds (see
    :func:`time_launches`).
    """
    if hasattr(stage, "launch"):
        plan = stage
    else:
        from ..plan.choose import plan_for

        plan = plan_for(A.shape[0], B.shape[1], A.shape[1], stage=stage)
    return time_launches(
        lambda: plan.launch(A, B, C, alpha, beta, stream), warmup=warmup, reps=reps, stream=stream
    )


#: ``time_calls`` picks the calls per loop so that a loop lasts at least this long ...
LOOP_MS = 2.0
#: ... and holds at least this many calls ...
MIN_CALLS = 20
#: ... and at most this many.
MAX_CALLS = 10_000


def calls_per_loop(per_call_ms: float, max_loop_ms: float | None = None) -> int:
    """Calls per timed loop of :func:`time_calls` for a call of about ``per_call_ms`` ms.

    At least :data:`MIN_CALLS` calls and a loop of at least :data:`LOOP_MS` ms (so that the
    loop's first call, which starts on an idle GPU, weighs little), at most :data:`MAX_CALLS`;
    then, given ``max_loop_ms``, no more calls than fit in it (at least one).
    """
    n = MAX_CALLS if not per_call_ms > 0 else math.ceil(LOOP_MS / per_call_ms)
    n = min(MAX_CALLS, max(MIN_CALLS, n))
    if max_loop_ms is not None and per_call_ms > 0:
        n = min(n, max(1, int(max_loop_ms / per_call_ms)))
    return int(n)


def _calibrate(fn: Callable[[], Any], s: Any) -> float:
    """Milliseconds per call of back-to-back calls of ``fn``: loops of 1, 2, 4, ... calls, each
    synchronized, until one lasts :data:`LOOP_MS` (or :data:`MAX_CALLS` calls)."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        s.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        if ms >= LOOP_MS or n >= MAX_CALLS:
            return ms / n
        n *= 2


def _warm_up(fn: Callable[[], Any], reps: int, warmup: int, calls: int | None, stream: Any) -> Any:
    """Check the loop arguments, make ``warmup`` untimed calls and synchronize; the stream."""
    if reps < 1 or warmup < 0 or (calls is not None and calls < 1):
        raise ValueError(
            f"need reps >= 1, warmup >= 0 and calls >= 1, got reps={reps}, warmup={warmup}, "
            f"calls={calls}"
        )
    s = _as_numba_stream(stream)
    for _ in range(warmup):
        fn()
    s.synchronize()
    return s


def time_calls(
    fn: Callable[[], Any],
    *,
    calls: int | None = None,
    reps: int = 20,
    warmup: int = 3,
    stream: Any = 0,
    max_loop_ms: float | None = None,
) -> Timing:
    """End-to-end time per call of ``fn()`` made back to back, with CUDA events.

    After ``warmup`` calls and a synchronize, each repeat records an event on ``stream``, calls
    ``fn()`` ``calls`` times with nothing in between (no hold kernel: the GPU waits for the host
    whenever a call costs more host time than its kernel runs), records a second event and
    waits for it; the repeat's value is elapsed / ``calls``. This is what a user who calls
    ``fn`` in a loop sees; compare :func:`time_launches`, the kernel time.

    Args:
        fn: the call to time, e.g. ``lambda: numba_gemm.sgemm(a, b, out=c)``; its GPU work must
            go to ``stream``.
        calls: calls per timed loop; ``None`` measures the time per call first (synchronized
            loops of 1, 2, 4, ... calls up to 2 ms) and picks :func:`calls_per_loop`: at least
            20 calls and at least 2 ms, at most ``max_loop_ms`` ms (on the simulator: 1).
        reps: timed loops.
        warmup: untimed calls first.
        stream: the stream ``fn`` uses: 0 for the default stream or a Numba stream.
        max_loop_ms: with ``calls=None``, the longest loop wanted (keeps slow calls short).

    Returns:
        ``Timing`` with ``reps`` values, each the milliseconds per call of one loop. On the
        simulator, host wall-clock times (not comparable with a GPU).

    Raises:
        ValueError: ``reps < 1``, ``warmup < 0`` or ``calls < 1``.
    """
    s = _warm_up(fn, reps, warmup, calls, stream)
    if calls is None:  # the simulator's times mean nothing: one call per loop there
        calls = 1 if SIMULATOR else calls_per_loop(_calibrate(fn, s), max_loop_ms)
    return Timing(tuple(_call_loop(fn, calls, s) for _ in range(reps)))


def time_calls_paired(
    fns: Sequence[Callable[[], Any]],
    *,
    reps: int = 20,
    warmup: int = 3,
    stream: Any = 0,
) -> list[Timing]:
    """:func:`time_calls` of several calls, their timed loops taken in turn (A, B, ..., A, B,
    ...), so that every call is timed under the same host conditions.

    The host time of a 10 us call can move by 20 % to 2x from one second of a process to the
    next (at the bench's 1-token GPT-2 layers the same call took 8.2-8.6 us in some runs and
    10.5 or 17 us in others, with the same kernel: ``docs/design.md``). Timed one after the
    other, two calls' ratio takes that swing for a difference between them; in turn, every loop
    of one call has a loop of the other beside it.

    Args:
        fns: the calls to compare, e.g. ``[lambda: torch.mm(a, b, out=c), lambda:
            numba_gemm.sgemm(a, b, out=c)]``; their GPU work must go to ``stream``.
        reps: timed loops of each.
        warmup: untimed calls of each first.
        stream: the stream the calls use: 0 for the default stream or a Numba stream.

    Returns:
        One ``Timing`` per call, in the order of ``fns``, each with ``reps`` values (milliseconds
        per call of one loop; each call's loop length is its own :func:`calls_per_loop`).

    Raises:
        ValueError: no calls, ``reps < 1`` or ``warmup < 0``.
    """
    if not fns:
        raise ValueError("need at least one call to time")
    s = None
    for fn in fns:
        s = _warm_up(fn, reps, warmup, None, stream)
    calls = [1 if SIMULATOR else calls_per_loop(_calibrate(fn, s)) for fn in fns]
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, n, values in zip(fns, calls, out, strict=True):
            values.append(_call_loop(fn, n, s))
    return [Timing(tuple(v)) for v in out]


def _call_loop(fn: Callable[[], Any], calls: int, s: Any) -> float:
    """Milliseconds per call of one loop of ``calls`` back-to-back calls of ``fn`` on stream
    ``s``: CUDA events around the loop (on the simulator, the host's clock)."""
    if SIMULATOR:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        s.synchronize()
        return (time.perf_counter() - t0) * 1e3 / calls
    start, end = cuda.event(timing=True), cuda.event(timing=True)
    start.record(s)
    for _ in range(calls):
        fn()
    end.record(s)
    end.synchronize()
    return cuda.event_elapsed_time(start, end) / calls


def time_host(
    fn: Callable[[], Any],
    *,
    calls: int = 500,
    reps: int = 5,
    warmup: int = 20,
    stream: Any = 0,
) -> Timing:
    """Host time per call of ``fn()``: the cost of issuing it, not of running it.

    After ``warmup`` calls and a synchronize, each repeat times a loop of ``calls`` back-to-back
    calls with ``time.perf_counter``, stopping the clock *before* the synchronize that follows
    the loop; the repeat's value is that wall time / ``calls``. While the GPU keeps up, this is
    what one call costs the calling thread (argument checks, plan lookup, launch).

    Args:
        fn: the call, e.g. ``lambda: torch.mm(a, b, out=c)``.
        calls: calls per loop (500 in the bench's overhead table).
        reps: loops; the bench reports the median.
        warmup: untimed calls first.
        stream: the stream ``fn`` uses, synchronized after each loop.

    Returns:
        ``Timing`` with ``reps`` values in **milliseconds** per call (``Timing.median * 1e3``
        is microseconds).

    Raises:
        ValueError: ``reps < 1``, ``warmup < 0`` or ``calls < 1``.
    """
    s = _warm_up(fn, reps, warmup, calls, stream)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        s.synchronize()
        out.append((t1 - t0) * 1e3 / calls)
    return Timing(tuple(out))
