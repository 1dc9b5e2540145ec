"""Autotuning that persists: the first call of a shape nobody measured times the cost model's top
candidates on this GPU and keeps the fastest on disk, so that this process and every later one
runs the measured winner.

Off by default (the cost model's pick costs nothing to choose); on with ``NUMBA_GEMM_AUTOTUNE=1``
or ``numba_gemm.autotune(True)``, as Triton's ``@autotune`` and cuBLASLt's
``cublasLtMatmulAlgoGetHeuristic`` + timing loop are opted into. A *bucket* is every FP32 product
closer to a tuned shape than ``tuning.NEAR`` (one dimension less than 2x away), of the same
operand layout and row alignment: the first call in a bucket times :data:`CANDIDATES` candidates
(:func:`choose.ranked`: the measurements near this shape, then the shape classes' tuned
candidates, then the top general stage's default tiles), at most :data:`BUDGET_S` seconds of
timing after the first two, and records them as a measured shape (``tuning.record_shape``) in
``autotune.json`` beside the kernel cache (``tuning.autotune_path``). The plan then prices the
product from those measurements, as it prices the committed sweeps' (``_measured``): at this very
shape the measured winner, nearby the wave model scaled from it.

Cost (the first call of a bucket only): loading each candidate's kernel (from the on-disk kernel
cache when warm; compiling one takes seconds: ``python -m numba_gemm.tools.precompile`` or
``tools.tune --shapes`` ahead of time) and ``TIMED_LOOPS`` event-timed loops of each. The store
is keyed by the package version and its kernels' sources (``tuning.autotune_key``): results of
other kernels are discarded with a warning and tuned again. Batches and the tensor-core modes are
not autotuned (the cost model picks them as without autotuning).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from numba import cuda

from .. import device as _device
from ..device import DeviceInfo
from ..kernels.stage import variant_key
from ..launch.launcher import DEFAULT_STREAM, runner
from . import tuning
from .choose import make_plan, ranked, vector_rows
from .geometry import Alignment, Geometry

#: Candidates timed per bucket, the cost model's order (the committed sweeps' winner was among the
#: model's first six at most measured shapes: docs/design.md).
CANDIDATES = 6
#: Seconds of timing per bucket after which no further candidate is timed (two always are).
BUDGET_S = 1.5
#: Event-timed loops per candidate (the minimum is kept) and the GPU time each loop aims at.
TIMED_LOOPS = 3
LOOP_MS = 0.5

_lock = threading.Lock()  # one bucket tuned at a time (they share the GPU and the store)


def _variant(stage: Any, g: Geometry, aligned: bool, pointers: Alignment | None) -> str:
    own = vector_rows(stage, g, aligned, pointers)
    return "vector" if own or stage.scalar_kernel is None else "scalar"


def time_plan(plan: Any) -> tuple[float, int]:
    """``(ms per launch, resident blocks per SM)`` of ``plan`` on fresh operands of its geometry
    (uninitialised: the time of an FP32 product does not depend on the values): one warm-up
    launch (which loads the kernel), then :data:`TIMED_LOOPS` loops between CUDA events on the
    default stream, each of enough launches for :data:`LOOP_MS`; the fastest loop."""
    g = plan.geometry
    r = runner(plan)
    ka, kb = g.batch * max(g.stride_a, g.M * g.K), g.batch * max(g.stride_b, g.K * g.N)
    with cuda.gpus[plan.device.id]:
        bufs = [cuda.device_array(n, "float32") for n in (ka, kb, g.batch * g.M * g.N)]
        a, b, c = (x.device_ctypes_pointer.value for x in bufs)
        stream = cuda.default_stream()
        r.run_plain(a, b, c, 1.0, 0.0, DEFAULT_STREAM)
        stream.synchronize()
        t0, t1 = cuda.event(), cuda.event()
        calls, best = 1, float("inf")
        for _ in range(TIMED_LOOPS + 1):
            t0.record(stream)
            for _ in range(calls):
                r.run_plain(a, b, c, 1.0, 0.0, DEFAULT_STREAM)
            t1.record(stream)
            t1.synchronize()
            ms = cuda.event_elapsed_time(t0, t1) / calls
            if calls > 1 or ms >= LOOP_MS:
                best = min(best, ms)
            calls = max(1, min(1000, int(LOOP_MS / max(ms, 1e-4))))
        if best == float("inf"):  # every loop one launch: each already past LOOP_MS
            best = ms
        # (inside the device's context: a process that made none current before has none after)
        return best, r.kernel().blocks_per_sm(plan.block[0] * plan.block[1] * plan.block[2])


#: Timings of this process (tests and the tools read it): ``(shape, layout, aligned)`` -> the
#: candidates timed, as recorded.
timed: dict = {}


def tuned(g: Geometry, aligned: bool, dev: DeviceInfo) -> dict | None:
    """The autotuned record whose bucket holds this product (same layout and alignment, closer
    than ``tuning.NEAR``), or None."""
    data = tuning.load_autotuned()
    entry = data["gpus"].get(dev.name) or {}
    for rec in entry.get("shapes", []):
        if (
            bool(rec.get("aligned")) == bool(aligned)
            and tuning.layout_of(rec) == g.layout
            and tuning.shape_distance((g.M, g.N, g.K), tuple(rec["shape"])) < tuning.NEAR
        ):
            return rec
    return None


def tune(
    g: Geometry,
    aligned: bool,
    dev: DeviceInfo,
    *,
    timer: Callable[[Any], tuple[float, int]] | None = None,
    force: bool = False,
    pointers: Alignment | None = None,
) -> dict | None:
    """Time this product's candidates (unless its bucket is tuned already, or ``force``) and
    record them in the autotune store; the record, or None for a product autotuning leaves to the
    cost model (a batch, no candidate). ``timer(plan) -> (ms, blocks per SM)``, default
    :func:`time_plan`. ``pointers``: the base pointers' ``Alignment``, for the candidates that
    run their vector kernel on rows of other operands unaligned (``choose.vector_rows``).

    A candidate that fails to load or launch (a kernel too large for this GPU, say) is skipped
    with its error in the record's ``"failed"`` list."""
    if g.batch != 1:
        return None
    timer = timer or time_plan
    with _lock:
        if not force:
            rec = tuned(g, aligned, dev)
            if rec is not None:
                return rec
        cands = ranked(g, aligned, dev, "fp32", pointers)[:CANDIDATES]
        if not cands:
            return None
        out, failed, start = [], [], time.perf_counter()
        for i, (ms, st, where) in enumerate(cands):
            if i >= 2 and time.perf_counter() - start > BUDGET_S:
                break
            plan = make_plan(
                g, st, _variant(st, g, aligned, pointers), dev, ms, f"autotune candidate ({where})"
            )
            try:
                t, bps = timer(plan)
            except Exception as e:  # noqa: BLE001 - a candidate that cannot run is not a winner
                failed.append(f"{st.name} {dict(st.config)}: {type(e).__name__}: {e}")
                continue
            out.append(
                {
                    "stage": st.name,
                    "config": dict(st.config),
                    "ms": t,
                    "blocks_per_sm": bps,
                    "variant": variant_key(plan.variant, g.layout),
                    "predicted_ms": ms,
                    "rank": i,  # the cost model's order: 0 is what it picks without timing
                    tuning.SPREAD_SUM: True,  # timed by this tree's kernels (split-K's spread sum)
                }
            )
        if not out:
            return None
        out.sort(key=lambda c: c["ms"])
        data = tuning.load_autotuned()
        shape = (g.M, g.N, g.K)
        tuning.record_shape(data, dev.name, dev.cc, shape, aligned, out, g.layout)
        rec = next(
            r
            for r in data["gpus"][dev.name]["shapes"]
            if tuple(r["shape"]) == shape
            and r["aligned"] == bool(aligned)
            and tuning.layout_of(r) == g.layout
        )
        rec["seconds"] = round(time.perf_counter() - start, 3)
        if failed:
            rec["failed"] = failed
        tuning.save(data, tuning.autotune_path(), replan=False)
        timed[(shape, g.layout, bool(aligned))] = out
        return rec


def before_plan(
    M: int, N: int, K: int, geometry: Geometry | None, alignment: int, device: int
) -> None:
    """What a call does before planning an automatic FP32 product: with autotuning on, tune the
    product's bucket unless it is tuned (:func:`tune`); nothing on the simulator, for a batch or
    an empty product. ``alignment``: the pointers' ``Alignment``."""
    if not tuning.autotune_enabled() or min(M, N, K) < 1:
        return
    dev = _device.info(device)
    g = Geometry.plain(M, N, K) if geometry is None else geometry
    if dev.simulated or g.batch != 1:
        return
    ptrs = Alignment(alignment)
    tune(g, g.alignment(ptrs) == Alignment.ALL, dev, pointers=ptrs)
