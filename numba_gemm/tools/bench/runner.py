"""The bench's run loop: per size, validate everything, then time everything.

For each size ``(M, N, K)``:

1. a problem (``numba_gemm.tools.check.make_problem``): random standard-normal float32 operands on
   the GPU, drawn from ``numpy.random.default_rng(--seed)`` (one generator for the whole run),
   and the reference: cuBLAS FP32 with TF32 forced off (CuPy or PyTorch, ``--baseline``), or a
   float64 NumPy product without either and on the simulator;
2. the implementations (:mod:`numba_gemm.tools.bench.baselines`): cuBLAS FP32, cuBLAS TF32
   (with ``--tf32`` or a TF32 stage that runs here), cuBLAS FP16 (with an FP16 stage that runs
   here), Triton (optional peer), ``sgemm``'s automatic choice (``auto``), every selected stage;
3. validation of every implementation before any is timed (``check.validate``: NaN-poisoned C,
   relative Frobenius error against the implementation's bound); a FAILED one is not timed;
4. timing: ``kernel`` rows for all (CUDA events behind a hold kernel, ``timing.time_launches``),
   plus ``end_to_end`` rows for the calls users make (``auto``: ``sgemm(a, b, out=c)``; the
   peers: ``cupy.matmul``/``torch.mm``/Triton with ``out=``; ``timing.time_calls``). Slow
   implementations are timed with fewer repeats or SKIPPED (``--max-ms``).

``pct_cublas`` of a row is relative to the cuBLAS row of its precision at that size
(``report.BASELINE_OF``: FP32 and 3xTF32 against cuBLAS FP32, TF32 against cuBLAS TF32, FP16
against cuBLAS FP16), a ``kernel`` row to its ``kernel`` row, an ``end_to_end`` row to its
``end_to_end`` row; empty when that row was not measured. ``baseline`` names it.

On the simulator the options left out default to a run that shows the pipeline in about a minute
on two CPU cores (:func:`resolve`): one small ragged size, one stage or two per precision, one
repeat and no warm-up.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from numba import cuda

from ... import plan_for, sgemm
from ...device import SIMULATOR
from ...device import info as device_info
from ...kernels import STAGES, get_stage
from ..check import FAILED, OK, SKIPPED, Problem, error_note, make_problem, validate
from ..timing import Timing, quiet_occupancy, time_calls, time_launches
from .baselines import (
    Impl,
    auto_impl,
    cublas_impls,
    half_operands,
    make_baseline,
    stage_impl,
    triton_impl,
    triton_module,
)
from .report import BASELINE_OF, CUBLAS, CUBLAS_FP32, END_TO_END, FP32_LABEL, KERNEL, make_row
from .sizes import parse_sizes, size_label

#: The simulator runs every GPU thread as a Python thread: larger sizes take hours.
SIM_MAX_DIM = 128
#: An implementation estimated above ``--max-ms`` per call is timed with this many repeats ...
SLOW_REPS = 3
#: ... and SKIPPED above this many times ``--max-ms``.
SKIP_FACTOR = 5

#: Defaults of the options left out, on a GPU: ``--sizes``, ``--reps``, ``--warmup`` (``--stages``:
#: every stage).
GPU_SIZES, GPU_REPS, GPU_WARMUP = "128..4096", 20, 3
#: ... and on the simulator, which runs each GPU thread as a Python thread: one call of a stage
#: at 20x24x16 takes 0.3-9 s on a 2-core CPU (skinny_n 33 s; all 19 stages about 100 s) and the
#: bench calls each twice (validate, time). So: one ragged size (M and N not multiples of 16,
#: N and K multiples of 8 as the FP16 stages need), one repeat, no warm-up, and the cheapest
#: stage or two of each precision (FP32: the first rung and warptiling, beside auto's pick;
#: TF32; 3xTF32; FP16; BF16): every step, table, file and plot panel of the pipeline in about
#: a minute. Timings there mean nothing.
SIM_SIZES, SIM_REPS, SIM_WARMUP = "20x24x16", 1, 0
SIM_STAGES = ("naive", "warptiling", "tf32_mma", "tf32x3_wgmma", "hgemm_wgmma", "bf16_tma")


def resolve(args: argparse.Namespace, simulator: bool = SIMULATOR) -> argparse.Namespace:
    """Fill the options left out (None) with the defaults of the mode, GPU or ``simulator``
    (see :data:`SIM_STAGES`); given ones stay. Returns ``args``, changed in place; idempotent."""
    if args.sizes is None:
        args.sizes = parse_sizes(SIM_SIZES if simulator else GPU_SIZES)
    if args.stages is None:
        names = [s.name for s in STAGES]
        args.stages = [n for n in SIM_STAGES if n in names] if simulator else names
    if args.reps is None:
        args.reps = SIM_REPS if simulator else GPU_REPS
    if args.warmup is None:
        args.warmup = SIM_WARMUP if simulator else GPU_WARMUP
    return args


def run(args: argparse.Namespace) -> list[dict]:
    """Benchmark ``args.sizes``: one row per (size, implementation, timing).

    Each row has the keys of ``report.CSV_COLUMNS`` (``config`` a dict), ``note`` (why it FAILED
    or was SKIPPED) and, for ``auto`` and the stages, ``plan``. ``args`` is what
    ``cli.build_parser`` returns.
    """
    resolve(args)
    with quiet_occupancy():  # small sizes launch small grids: noise here
        return _run(args)


def _stage_precisions(names: list[str]) -> set[str]:
    """The precisions of the stages among ``names`` that run on this device (all of them on the
    simulator): the cuBLAS baselines the run needs."""
    cc = tuple(device_info().cc)
    return {s.precision for s in map(get_stage, names) if s.runs_on(cc)}


def _run(args: argparse.Namespace) -> list[dict]:
    mode = "simulator" if SIMULATOR else "gpu"
    blas = make_baseline(args.baseline)
    precisions = _stage_precisions(args.stages)
    # Each stage is rated against cuBLAS in its own precision, so a TF32, FP16 or BF16 stage brings
    # that cuBLAS line along; --tf32 asks for the TF32 line without a TF32 stage.
    tf32 = (args.tf32 or "tf32" in precisions) and blas is not None
    halves = [p for p in ("fp16", "bf16") if p in precisions]  # 16-bit stages: their copies
    if args.tf32 and blas is None:
        print(
            "numba_gemm.bench: --tf32 needs a cuBLAS baseline (CuPy or PyTorch on a GPU); "
            "no TF32 line",
            file=sys.stderr,
        )
    if tf32 and not SIMULATOR and tuple(device_info().cc) < (8, 0):
        if args.tf32:
            print(
                "numba_gemm.bench: TF32 needs compute capability >= 8.0; no TF32 line",
                file=sys.stderr,
            )
        tf32 = False
    triton = triton_module(required=args.peers == "triton") if args.peers != "none" else None
    rng = np.random.default_rng(args.seed)
    steps_per_size = 2 + len(args.stages)
    bar = _progress(len(args.sizes) * steps_per_size)
    rows: list[dict] = []
    for M, N, K in args.sizes:
        name = size_label(M, N, K)
        _describe(bar, f"{name} reference")
        try:
            problem = make_problem(M, N, K, rng=rng, blas=blas)
        except Exception as e:  # cuBLAS broke: the rest still runs, against float64 NumPy
            rows.append(
                make_row(M, N, K, CUBLAS_FP32, FP32_LABEL, FAILED, mode, note=error_note(e))
            )
            problem = make_problem(M, N, K, rng=rng, blas=None)
        half = {p: half_operands(problem, p) for p in halves}
        impls = cublas_impls(problem, tf32=tf32, half=half if blas is not None else None)
        if triton is not None:
            impls.append(triton_impl(problem, triton))
        impls.append(auto_impl(problem, plan_for, sgemm))
        impls += [stage_impl(problem, s, plan_for, half) for s in args.stages]

        checked = []  # validate every implementation before timing any
        for impl in impls:
            _describe(bar, f"{name} validate {impl.stage}")
            checked.append((impl, *_validate(impl, problem)))
        _advance(bar)
        # GFLOP/s of each cuBLAS row per timing kind: the cuBLAS rows come first in ``impls``
        base: dict[tuple[str, str], float] = {}
        for impl, status, err, note in checked:
            _describe(bar, f"{name} time {impl.stage}")
            ref = BASELINE_OF[impl.precision]
            for kind, t, st, nt in _time(impl, status, note, problem, args):
                g = t.gflops(M, N, K) if t is not None else None
                if impl.stage in CUBLAS and g:
                    base[impl.stage, kind] = g
                pct = g / base[ref, kind] if g and base.get((ref, kind)) else None
                rows.append(
                    make_row(
                        M,
                        N,
                        K,
                        impl.stage,
                        impl.label,
                        st,
                        mode,
                        timing_kind=kind,
                        timing=t,
                        pct=pct,
                        err=err,
                        config=impl.config,
                        note=nt,
                        plan=impl.plan,
                        precision=impl.precision,
                        baseline=ref,
                    )
                )
            if impl.stage not in CUBLAS and impl.stage in args.stages:
                _advance(bar)
        _advance(bar)
        del problem, impls, checked
    if bar is not None:
        bar.close()
    return rows


def _validate(impl: Impl, problem: Problem) -> tuple[str, float | None, str]:
    """(status, rel. error, note) of the implementation's run (and public call, when it has
    one) into a NaN-poisoned C, inside its mode."""
    if impl.error:
        return FAILED, None, impl.error
    if impl.skip:
        return SKIPPED, None, impl.skip
    try:
        with impl.mode():
            status, err, note = validate(impl.check or impl.run, problem, impl.rtol)
            if status == OK and impl.call is not None and impl.call is not impl.run:
                status, err2, note = validate(impl.call, problem, impl.rtol)
                if note:
                    note = f"public call: {note}"
                err = err2 if err2 is not None and status != OK else err
    except Exception as e:  # entering the mode failed (e.g. no FP32 switch in this CuPy)
        return FAILED, None, error_note(e)
    return status, err, note or impl.note


def _estimate_ms(fn: Any) -> float:
    """Wall-clock ms of one synchronized call (GPU only): for the ``--max-ms`` rule."""
    t0 = time.perf_counter()
    fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def _time(
    impl: Impl, status: str, note: str, problem: Problem, args: argparse.Namespace
) -> list[tuple[str, Timing | None, str, str]]:
    """``[(timing kind, Timing or None, status, note)]``: the kernel row and, for an
    implementation with a public call, the end-to-end row."""
    kinds = [KERNEL] + ([END_TO_END] if impl.call is not None else [])
    if status != OK:
        return [(k, None, status, note) for k in kinds]
    out = []
    try:
        with impl.mode():
            reps, warmup = args.reps, args.warmup
            if not SIMULATOR:
                est = _estimate_ms(impl.run)
                if est > SKIP_FACTOR * args.max_ms:
                    why = f"~{est:.0f} ms per call > {SKIP_FACTOR} x --max-ms {args.max_ms:g}"
                    return [(k, None, SKIPPED, why) for k in kinds]
                if est > args.max_ms:
                    reps, warmup = min(reps, SLOW_REPS), 0
                    note = f"~{est:.0f} ms per call > --max-ms {args.max_ms:g}: {reps} repeats"
            for kind in kinds:
                if kind == KERNEL:
                    t = time_launches(impl.run, warmup=warmup, reps=reps)
                else:
                    t = time_calls(
                        impl.call,
                        reps=reps,
                        warmup=warmup,
                        max_loop_ms=args.max_ms,
                    )
                out.append((kind, t, OK, note))
    except Exception as e:  # noqa: BLE001 - reported in the row
        done = {k for k, *_ in out}
        out += [(k, None, FAILED, f"timing: {error_note(e)}") for k in kinds if k not in done]
    return out


def _progress(total: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="step", leave=False, file=sys.stderr)


def _describe(bar: Any, text: str) -> None:
    if bar is not None:
        bar.set_description(text)


def _advance(bar: Any) -> None:
    if bar is not None:
        bar.update(1)
