"""``python -m numba_gemm.tools.tune``: sweep tile configurations of the tunable stages on this GPU.

For each shape class (``numba_gemm.plan.tuning.CLASSES``: small 1024^3, medium 2048^3, large 4096^3,
batched 64 x 512^3, and the regimes skinny 16 x 4096 x 4096, narrow 128 x 4096 x 4096, their
transposes gemv_n 4096 x 1 x 4096, skinny_n 4096 x 16 x 4096 and narrow_n 4096 x 128 x 4096,
deep 1024 x 1024 x 16384, shallow 4096 x 4096 x 16) and each tunable FP32 stage that takes the
class's shape (warptiling, double_buffering, multistage; skinny and skinny_n in the classes of
few rows or columns; by name, ``--stages tf32_wgmma tf32x3_wgmma``, the TF32 wgmma stages, whose
class winners the plan weighs for ``compute="tf32"``/``"3xtf32"``: largest tiles first, then
split-K 2 and 4 in the split-K classes; ``tf32_tma`` (tuned on ``x @ W.T``, the layout it takes)
and ``hgemm_tma`` (on float16 copies of the operands), the TMA stages):

1. tiles: the stage's ``SPACE`` (every configuration of a grid of BM, BN, BK, WM, WN, WNITER, TM,
   TN that passes the stage's own ``check_config``), most register reuse first, timed until the
   (class, stage) share of ``--budget`` is spent;
2. knobs: for the ``--top`` fastest, ``MINB`` (launch bounds) 1 and 2 and, in the classes of
   ``SPLIT_K_CLASSES`` (all but large and batched), ``SPLITK`` 2 and 4; there also the fastest
   unsplit configuration of every block tile at the power-of-two splits the plan would offer it
   at the class's shape (:func:`split_variants`).

Kept per class and stage: the fastest unsplit and the fastest split configuration of each block
tile (:data:`ALTERNATIVES`), which the plan prices at other shapes and splits.

With ``--jobs N`` (N > 1) the candidates of each (class, stage) are first compiled into the
kernel cache by N worker processes (``numba_gemm.tools.precompile``; NVVM and ptxas are CPU-bound:
16 cores compile a few hundred in minutes, and a re-run finds them cached), so the budget goes
to timing, not to compiling one candidate at a time.

Every configuration is validated before it is timed (``numba_gemm.tools.check``: relative error
against cuBLAS FP32 with TF32 forced off, through CuPy or PyTorch, or a float64 NumPy product
without either; NaN-poisoned output); one that fails or does not compile is reported and skipped.
Timing: kernel time, CUDA events, median of ``--reps`` after warm-up (``timing.time_launches``).
The winners go to the tuning cache (``tuning.user_cache_path()``, or ``--out``), keyed by GPU name,
stage and class; ``sgemm(stage=None)`` and the bench read it. Single shapes rather than classes
(an exhaustive sweep at one product's shape, folded into a tuning file as a measured shape):
``python -m numba_gemm.tools.shapes --sweep`` then ``--fold``.

``--retime NT`` sweeps nothing: it times the class candidates already stored for this GPU once
more with B stored transposed (``x @ W.T``) and adds those times to them
(``tuning.TRANSPOSED_B_KEYS``), which the plan prices such products from (docs/design.md §4.12).
``--retime NN`` times them again as they were swept and replaces the sweep's times
(:data:`ROW_MAJOR_KEYS`): after a change to a kernel, without sweeping again.
``--retime SK`` times their stream-K twins at :data:`STREAM_K_SHAPE` (``tuning.STREAM_K_KEYS``),
which the plan prices stream-K from (docs/design.md §4.6).

Exit status: 0 on success, 1 when no configuration could be timed, 2 when no GPU is available.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from numba import cuda

from ..device import current_id
from ..device import info as device_info
from ..kernels import get_stage
from ..kernels.stage import variant_key
from ..launch.launcher import runner
from ..plan import tuning
from ..plan.choose import SIXTEEN
from ..plan.cost import split_options
from ..plan.geometry import Alignment
from . import check


def _order(space: Sequence[dict]) -> list[dict]:
    """Most promising first, round-robin over block-tile shapes (so that every (BM, BN) is timed
    early: the finer ones are what ``plan_for`` picks for ragged sizes). Within a shape:
    more accumulators per thread, deeper BK, 256 threads, square-ish warp sub-tiles, fewer
    SMEM buffers; the wgmma stages (no warp tiles): four or five buffers, BK 32 first."""
    from ..kernels._tunable import derived

    if not space or "BM" not in space[0]:
        return list(space)  # the skinny stage: its space is already in order of preference

    def key(cfg):
        if "WM" not in cfg:  # a wgmma stage: its default's ring depth first
            return (abs(cfg["NBUF"] - 4.5), cfg["BK"], str(cfg))
        d = derived(cfg)
        acc = d["WMITER"] * cfg["TM"] * cfg["WNITER"] * cfg["TN"]
        return (
            -acc,
            -cfg["BK"],
            -d["NUM_THREADS"],
            abs(cfg["WNITER"] - 2),
            cfg.get("NBUF", 0),
            str(cfg),
        )

    groups: dict[tuple, list[dict]] = {}
    for cfg in sorted(space, key=key):
        groups.setdefault((cfg["BM"], cfg["BN"]), []).append(cfg)
    shapes = sorted(groups, key=lambda bn: -bn[0] * bn[1])
    out = []
    for i in range(max(map(len, groups.values()), default=0)):
        out += [groups[bn][i] for bn in shapes if i < len(groups[bn])]
    return out


def _valid_for(stage, cfg) -> bool:
    """Whether ``cfg`` is a valid configuration of ``stage`` (stale cache entries, or another
    stage's configurations in ``--configs``, are skipped)."""
    try:
        stage.check_config(cfg)
    except (ValueError, KeyError, TypeError):
        return False
    return True


def known_configs(gpu: str, cc: tuple[int, int], cls: str, stage: str, *datas: dict) -> list[dict]:
    """Configurations already recorded for this GPU (or its compute capability's defaults), class
    and stage, winner first: timed before the rest of the space (a warm start)."""
    out = []
    for data in datas:
        entries = (
            [data["gpus"][gpu]]
            if gpu in data["gpus"]
            else [e for e in data["gpus"].values() if tuple(e["compute_capability"]) == tuple(cc)]
        )
        for entry in entries:
            res = entry.get("classes", {}).get(cls, {}).get(stage)
            if res:
                out += [dict(c["config"]) for c in tuning.candidates(res, stage)]
    return list({str(c): c for c in out}.values())


def knob_variants(cfg: dict, cls: str) -> list[dict]:
    """Phase-2 variants of a configuration: launch bounds, and split-K in the small and medium
    classes (not the large one, whose model mispriced it, nor a batch, which takes none).

    MINB = 2 (at most 65536 / (2 * threads) registers) is skipped for 128 accumulators per
    thread: it always spilled there (docs/design.md)."""
    from ..kernels._tunable import derived

    if "MINB" not in cfg:  # the wgmma stages: split-K only
        return [dict(cfg, SPLITK=s) for s in (2, 4)] if cls in SPLIT_K_CLASSES else []
    if "BM" not in cfg:  # the skinny stage: its space sweeps split-K; here launch bounds only
        return [dict(cfg, MINB=2)] if cfg["MINB"] == 0 else []
    d = derived(cfg)
    acc = d["WMITER"] * cfg["TM"] * cfg["WNITER"] * cfg["TN"]
    out = [dict(cfg, MINB=m) for m in ((1, 2) if acc < 128 else (1,)) if m != cfg["MINB"]]
    if cls in SPLIT_K_CLASSES:
        out += [dict(cfg, SPLITK=s) for s in (2, 4)]
    return out


def split_variants(
    name: str, results: Sequence[tuple[dict, dict]], cls: str, shape: tuple, sms: int
) -> list[dict]:
    """Phase-2 split-K variants of the fastest unsplit configuration of each block tile (BM, BN)
    in ``results`` (fastest first), in the split-K classes: the powers of two that
    ``plan.cost.split_options`` offers that tile at the class's ``shape`` on ``sms`` SMs at one
    block an SM, less those already timed. A tile kept unsplit (:data:`ALTERNATIVES`) is timed
    where its few blocks leave most SMs idle and run alone on theirs, so the wave model,
    scaling from that time, mispriced its splits elsewhere: on an H200 the skinny class's
    32 x 128 and 32 x 256 tiles, kept at one slice (16 x 4096 x 4096: 32 or 16 blocks), ran
    16-62 % longer than predicted at 5-32 slices on 24-row ``x @ W.T`` products
    (docs/design.md §4.14). The top configurations' ``knob_variants`` already try 2 and 4."""
    if cls not in SPLIT_K_CLASSES:
        return []
    M, N, K = shape
    timed = {str(c) for c, _ in results}
    stage = get_stage(name)
    out, tiles = [], set()
    for cfg, _ in results:
        if "BM" not in cfg or cfg.get("SPLITK", 1) != 1:
            continue
        tile = stage.block(cfg)[:2]
        if tile in tiles:
            continue
        tiles.add(tile)
        cand = dict(stage=name, config=cfg, blocks_per_sm=1)
        for sk in split_options(cand, M, N, K, sms, per_sm=1):
            var = dict(cfg, SPLITK=sk)
            if sk > 1 and sk & (sk - 1) == 0 and str(var) not in timed:
                out.append(var)
    return out


def _time_for(
    stage,
    configs: Sequence[dict],
    prob: check.Problem,
    seconds: float,
    args: argparse.Namespace,
    log_rows: list[dict],
    cls: str,
) -> list[tuple[dict, dict]]:
    """``[(config, result)]`` of the ``configs`` of ``stage`` that ran correctly, timed in order
    at ``prob`` until ``seconds`` have passed; every attempt is appended to ``log_rows``."""
    from tqdm import tqdm  # the bench/test extras, as the tuner's CLI needs

    out: list[tuple[dict, dict]] = []
    t_end = time.monotonic() + seconds
    bar = tqdm(configs, desc=f"{cls} {stage.name}", unit="cfg", leave=False)
    for cfg in bar:
        if time.monotonic() > t_end:
            break
        res = evaluate(stage.with_config(cfg), prob, args.reps, args.warmup)
        log_rows.append(dict(cls=cls, stage=stage.name, **cfg, **res))
        if res["ok"]:
            out.append((cfg, res))
            bar.set_postfix(best=f"{max(r['gflops'] for _, r in out):.0f}")
    bar.close()
    return out


def Problem(
    M: int, N: int, K: int, rng: np.random.Generator, cp: Any = None, batch: int = 1
) -> check.Problem:
    """Random float32 operands of one shape (``batch`` > 1: a batch of them, 3-D) on the GPU and
    the reference product (``check.make_problem``); with a cuBLAS library (``cp``: a
    ``check.blas_library`` kind or object, or the ``cupy`` module), the reference is cuBLAS FP32
    with TF32 forced off and ``problem.cublas`` its kernel time (for % of cuBLAS); with
    ``cp=None``, float64 NumPy."""
    blas = check.CupyBlas(cp) if getattr(cp, "__name__", None) == "cupy" else cp
    prob = check.make_problem(M, N, K, rng=rng, blas=blas, batch=batch)
    if prob.blas is not None:
        check.time_cublas(prob)
    return prob


def _cublas_gflops(prob: check.Problem) -> float | None:
    """cuBLAS FP32 (TF32 off) GFLOP/s at the problem's shape (kernel time, measured by
    ``Problem``), None without a cuBLAS library."""
    return prob.cublas.gflops(*_flop_shape(prob)) if prob.cublas is not None else None


def _flop_shape(prob: check.Problem) -> tuple[int, int, int]:
    """``(batch * M, N, K)``: what ``Timing.gflops`` needs for the problem's FLOP count."""
    M, N, K = prob.shape
    return prob.batch * M, N, K


def layout_of(stage) -> str:
    """The layout a stage is tuned in: row-major ``NN``, or for a stage that does not take it
    (``tf32_tma``: both operands K-major) its first layout (``NT``: ``x @ W.T``)."""
    return "NN" if "NN" in stage.layouts else stage.layouts[0]


def _numpy_half(name: str) -> Any:
    """NumPy's type of 16-bit operands ``name`` (bfloat16: ``ml_dtypes``', needed to tune BF16)."""
    if name == "bfloat16":
        import ml_dtypes  # optional: NumPy's only bfloat16

        return ml_dtypes.bfloat16
    return np.float16


def plan_of(stage, prob: check.Problem, aligned: bool = True, layout: str | None = None):
    """The plan running ``stage`` on the problem's operands (a batch: C-contiguous 3-D; B
    stored transposed for a stage tuned in ``NT``, or with ``layout`` ``"NT"``:
    :func:`operands`)."""
    from ..plan.choose import plan_for
    from ..plan.geometry import Geometry

    M, N, K = prob.shape
    b = prob.batch
    layout = layout or layout_of(stage)
    if b > 1:
        g = Geometry(b, M, N, K, "NN", K, N, N, M * K, K * N, M * N)
    else:
        g = Geometry.dense(M, N, K, layout) if layout != "NN" else None
    return plan_for(
        M,
        N,
        K,
        stage=stage,
        geometry=g,
        # (a TMA stage's scalar variant is for a C whose rows are not 16-byte aligned: A's and
        # B's must be, for its tensor maps)
        alignment=Alignment.ALL
        if aligned
        else Alignment.AB
        if stage.tensor_maps is not None
        else Alignment.NONE,
        compute=stage.precision if stage.precision in SIXTEEN else None,
    )


def operands(prob: check.Problem, stage, layout: str | None = None) -> tuple[Any, Any]:
    """The problem's A and B as ``stage`` takes them: float16 (bfloat16) copies for an FP16
    (BF16) stage (the reference stays the FP32 product: the inputs' rounding is within the
    16-bit tolerance), and B stored transposed for a stage tuned in ``NT`` or when ``layout``
    says so (the transpose, a zero-copy view, of a row-major ``(N, K)`` copy); made once per
    problem and kind."""
    f16 = SIXTEEN.get(stage.precision)
    nt = (layout or layout_of(stage))[1] == "T" and prob.batch == 1
    if not (f16 or nt):
        return prob.A, prob.B
    memo = prob.__dict__.setdefault("_operands", {})
    got = memo.get((stage.precision, nt))
    if got is None:
        dt = _numpy_half(f16) if f16 else np.float32
        a = cuda.to_device(prob.a.astype(dt)) if f16 else prob.A
        if nt:
            b = check.stored_transposed(prob.b.astype(dt))
        else:
            b = cuda.to_device(prob.b.astype(dt))
        got = memo[(stage.precision, nt)] = (a, b)
    return got


def evaluate(stage, prob: check.Problem, reps: int, warmup: int, layout: str | None = None) -> dict:
    """Validate then time one configured stage (``check.evaluate`` on the ``launch`` of
    :func:`plan_of`; ``layout``: the operands' layout, default the stage's tuning layout);
    ``{"ok": False, "error": ...}`` on failure."""
    try:
        plan = plan_of(stage, prob, layout=layout)
    except Exception as e:  # noqa: BLE001 - a config that does not fit the shape is skipped
        return dict(ok=False, error=check.error_note(e))
    (A, B), C = operands(prob, stage, layout), prob.C
    res = check.evaluate(lambda: plan.launch(A, B, C), prob, stage.rtol, reps=reps, warmup=warmup)
    if not res.ok:
        return dict(ok=False, error=res.note)
    g = res.timing.gflops(*_flop_shape(prob))
    out = dict(ok=True, ms=res.timing.median, gflops=g, err=res.rel_error, shape=list(prob.shape))
    if prob.batch > 1:
        out["batch"] = prob.batch
    base = _cublas_gflops(prob)
    if base:
        out["pct_cublas"] = g / base
    return out


#: Share of the budget per class: the large class decides the headline numbers and compiles
#: most kernels, which the smaller classes then reuse.
CLASS_WEIGHT = {
    "large": 0.4,
    "medium": 0.2,
    "small": 0.2,
    "batched": 0.2,
    "skinny": 0.2,
    "narrow": 0.2,
    "deep": 0.2,
    "gemv_n": 0.2,
    "skinny_n": 0.2,
    "narrow_n": 0.2,
    "shallow": 0.2,
}
#: Classes whose phase 2 tries split-K (docs/design.md: the large class's model mispriced it).
SPLIT_K_CLASSES = ("small", "medium", "skinny", "narrow", "deep", "gemv_n", "skinny_n", "narrow_n")
#: The order classes are tuned in: large first, its compiled kernels are reused by the others.
CLASS_ORDER = (
    "large",
    "medium",
    "small",
    "batched",
    "narrow",
    "narrow_n",
    "shallow",
    "deep",
    "skinny",
    "skinny_n",
    "gemv_n",
)
#: Candidates kept per (class, stage): of each block tile (BM, BN), the fastest unsplit
#: configuration and the fastest split one, fastest first. The plan prices a candidate at the
#: splits ``plan.cost.split_options`` offers at the product's shape, which start from the
#: candidate's own (a split one is not priced unsplit where its tiles fill the SMs), so one of
#: each is needed, and a third split of one tile would add nothing but crowd out another tile:
#: on an H200 the skinny class (16 x 4096 x 4096) kept three splits of 64 x 128 and two of
#: 128 x 128 in double_buffering, and no 32-row tile, whose splits ran 24-32-row ``x @ W.T``
#: products 1.35-1.5x faster than the plan's pick (docs/design.md §4.14).
ALTERNATIVES = 6


def _alternatives(
    results: list[tuple[dict, dict]],
    stage,
    prob: check.Problem,
    cls: str,
    twin: check.Problem | None = None,
    reps: int = 10,
    warmup: int = 2,
    jobs: int = 1,
) -> list[dict]:
    """Best unsplit and best split result per block tile (:data:`ALTERNATIVES`), fastest first,
    with the occupancy of its vector and scalar kernels and, given the unaligned ``twin`` problem
    (each dimension one less: the scalar kernel, same tile counts), its time there
    (``ms_scalar``): the candidates that ``plan_for`` chooses among for other shapes of the
    class (wave quantization).
    Split-K results are kept only in the classes that tried them (``SPLIT_K_CLASSES``).
    Occupancy comes from the kernels the plans load (CUDA occupancy API); a configuration whose
    vector or scalar kernel cannot launch (0 blocks per SM: too many registers for its threads)
    is dropped (the plan would reject it; an H200 tuning of skinny_n had such a winner, 512
    threads whose scalar kernel took 163 registers). With ``jobs`` > 1
    the kept configurations' scalar kernels are compiled first, in parallel."""
    best: dict[tuple, tuple[dict, dict]] = {}
    for cfg, res in results:
        if cls not in SPLIT_K_CLASSES and cfg.get("SPLITK", 1) > 1:
            continue
        key = (*stage.block(cfg)[:2], cfg.get("SPLITK", 1) != 1)
        if key not in best or res["ms"] < best[key][1]["ms"]:
            best[key] = (cfg, res)
    kept = sorted(best.values(), key=lambda cr: cr[1]["ms"])[:ALTERNATIVES]
    if jobs > 1 and stage.scalar_kernel is not None:
        cc = tuning.current_device()[1]
        compile_ahead(stage.name, [cfg for cfg, _ in kept], cc, jobs, "scalar")
    out = []
    for cfg, res in kept:
        st = stage.with_config(cfg)
        occ = {
            key: occupancy(st, prob, aligned)
            for key, aligned in (("blocks_per_sm", True), ("blocks_per_sm_scalar", False))
        }
        if min(occ.values()) < 1:  # a variant that cannot launch (registers): unusable
            print(f"{cls} {stage.name}: {cfg} dropped, occupancy {occ}", file=sys.stderr)
            continue
        alt = dict(config=cfg, ms=res["ms"], shape=res["shape"], **occ, **{tuning.SPREAD_SUM: True})
        if "batch" in res:
            alt["batch"] = res["batch"]
        if twin is not None and stage.tensor_maps is None:
            # the scalar kernel on the unaligned twin shape (same tile counts; a TMA stage
            # never runs one: the plan copies such rows)
            t = evaluate(st, twin, reps, warmup)
            if t["ok"]:
                alt["ms_scalar"] = t["ms"]
        out.append(alt)
    return out


def occupancy(stage, prob: check.Problem, aligned: bool, layout: str | None = None) -> int:
    """Resident blocks per SM of the kernel :func:`plan_of` loads (CUDA occupancy API)."""
    plan = plan_of(stage, prob, aligned, layout)
    return runner(plan).kernel().blocks_per_sm(int(np.prod(plan.block)))


def compile_ahead(
    name: str, configs: Sequence[dict], cc: tuple[int, int], jobs: int, variant: str = "vector"
) -> None:
    """Compile the ``variant`` kernels of ``configs`` of stage ``name`` into the kernel cache in
    ``jobs`` processes (``numba_gemm.tools.precompile``)."""
    from . import precompile

    todo = [precompile.Job(name, tuple(sorted(c.items())), variant, tuple(cc)) for c in configs]
    t0 = time.monotonic()
    res = precompile.run(todo, jobs)
    failed = sum(status == "failed" for _, status, _, _ in res)
    print(
        f"{name}: {len(res)} {variant} kernels compiled ahead in {time.monotonic() - t0:.0f} s "
        f"({failed} failed)",
        file=sys.stderr,
    )


def _class_records(
    data: dict, gpu: str, classes: Sequence[str], stages: Sequence[str], wanted: Any
) -> list[tuple[str, str, dict]]:
    """``[(class, stage, record)]``: every stored candidate (winner and alternatives) of the
    single-matrix ``classes`` of ``gpu`` in ``data``, for the ``stages`` that ``wanted(stage)``
    accepts; the records are ``data``'s own dicts, to extend in place."""
    entry = data.get("gpus", {}).get(gpu, {})
    spec_of = {c.name: c for c in tuning.CLASSES}
    out = []
    for cls in classes:
        if spec_of[cls].batch != 1:
            continue
        for name in stages:
            res = entry.get("classes", {}).get(cls, {}).get(name)
            if not isinstance(res, dict) or not wanted(get_stage(name)):
                continue
            alts = res.get("alternatives", [])
            out += [(cls, name, rec) for rec in [res, *alts] if isinstance(rec, dict)]
    return out


#: What ``--retime NN`` (:func:`retime` in layout NN) replaces in a stored candidate: the times
#: and occupancies of the class sweep, which the plan prices row-major products from.
ROW_MAJOR_KEYS = ("ms", "blocks_per_sm", "ms_scalar", "blocks_per_sm_scalar")


def retime(
    data: dict,
    gpu: str,
    cc: tuple[int, int],
    classes: Sequence[str],
    stages: Sequence[str],
    rng: np.random.Generator,
    blas: Any,
    reps: int = 10,
    warmup: int = 2,
    jobs: int = 1,
    layout: str = "NT",
) -> list[tuple[str, str, dict, dict]]:
    """Time the stored class candidates of ``stages`` (each winner and its alternatives, as
    ``data`` holds them for ``gpu``) in ``layout``, at the class's shape, in place: the vector
    kernel's time and occupancy, and the scalar kernel's on the unaligned twin (each dimension
    one less). Returns ``[(class, stage, candidate, keys set)]``.

    ``"NT"`` (B stored transposed, ``x @ W.T``) adds what ``cost.estimate_ms`` prices such
    products from (``tuning.TRANSPOSED_B_KEYS``): classes are swept with row-major B, and this
    re-times their candidates so that the plan need not assume a transposed tile costs every
    stage what it costs none, and drops the result's fit (``tuning.FIT_NT``, made from the old
    times). A candidate that fails in that layout gets no keys (it stays priced from ``ms``).
    ``"NN"`` replaces the sweep's own times (:data:`ROW_MAJOR_KEYS`, and the winner's
    ``gflops``, ``err``, ``pct_cublas``) after a kernel change, without sweeping again; a
    candidate that fails keeps its old times, with a message."""
    if layout not in ("NN", "NT"):
        raise ValueError(f"retime: layout must be 'NN' or 'NT', got {layout!r}")
    spec_of = {c.name: c for c in tuning.CLASSES}
    # (a batch of x @ W.T: not a layout the plan prices apart; the bandwidth-bound stages are
    # priced by the bytes of B)
    todo = _class_records(
        data, gpu, classes, stages, lambda st: layout in st.layouts and st.cost == "waves"
    )
    if jobs > 1:
        for name in dict.fromkeys(n for _, n, _ in todo):
            configs = {str(r["config"]): r["config"] for _, n, r in todo if n == name}
            configs = list(configs.values())
            for variant in ("vector", "scalar"):
                compile_ahead(name, configs, cc, jobs, variant_key(variant, layout))
    probs: dict[str, tuple[check.Problem, check.Problem]] = {}
    keys = tuning.TRANSPOSED_B_KEYS if layout == "NT" else ROW_MAJOR_KEYS
    out = []
    for cls, name, rec in todo:
        spec = spec_of[cls]
        if cls not in probs:
            M, N, K = spec.shape
            twin = (max(M - 1, 1), max(N - 1, 1), max(K - 1, 1))
            probs[cls] = (Problem(M, N, K, rng, blas), Problem(*twin, rng, blas))
        prob, twin = probs[cls]
        st = get_stage(name).with_config(rec["config"])
        added = {}
        t = evaluate(st, prob, reps, warmup, layout=layout)
        if t["ok"]:
            added[keys[0]] = t["ms"]
            added[keys[1]] = occupancy(st, prob, True, layout)
            if layout == "NN" and "gflops" in rec:  # the winner's record carries the sweep's
                added.update({k: t[k] for k in ("gflops", "err", "pct_cublas") if k in t})
            if layout == "NN":  # this tree's kernels: split-K's spread sum
                added[tuning.SPREAD_SUM] = True
            # the scalar kernel on the unaligned twin (a TMA stage never runs one, as in the sweep)
            tw = evaluate(st, twin, reps, warmup, layout=layout) if st.tensor_maps is None else {}
            if tw.get("ok"):
                added[keys[2]] = tw["ms"]
                added[keys[3]] = occupancy(st, twin, False, layout)
            elif tw:
                print(f"{cls} {name} {rec['config']}: {layout} twin {tw['error']}", file=sys.stderr)
            for k in keys[2:] if layout == "NN" else ():  # no old kernel's time beside the new
                rec.pop(k, None)
        else:
            print(f"{cls} {name} {rec['config']}: {layout} {t['error']}", file=sys.stderr)
        if layout == "NT":  # (and the fit made from the old times: tools.calibrate)
            for k in (*keys, tuning.FIT_NT):
                rec.pop(k, None)
        rec.update(added)
        out.append((cls, name, rec, added))
    return out


#: Where ``--retime SK`` times every stream-K twin: its tiles fill every tuned tile's grid at
#: least twice on 132 SMs (128 x 256: 289 tiles), rows 16-byte aligned (the vector kernels).
STREAM_K_SHAPE = (2049, 4100, 1024)


def retime_stream_k(
    data: dict,
    gpu: str,
    cc: tuple[int, int],
    classes: Sequence[str],
    stages: Sequence[str],
    rng: np.random.Generator,
    blas: Any,
    reps: int = 10,
    warmup: int = 2,
    jobs: int = 1,
    shape: tuple[int, int, int] = STREAM_K_SHAPE,
) -> list[tuple[str, str, dict, dict]]:
    """Time the stream-K twin (``SPLITK = STREAM_K``) of every stored class candidate of the
    tiled FP32 ``stages`` (each distinct tile configuration once) at ``shape``, NN, aligned, and
    add what ``cost.stream_k_ms`` prices the twin from to each candidate in place
    (``tuning.STREAM_K_KEYS``: ``ms_sk``, ``blocks_per_sm_sk``, ``shape_sk``). A twin that fails
    gets no keys (the plan never offers it). Returns ``[(class, stage, candidate, added keys)]``."""
    from ..kernels._tunable import STREAM_K

    # (a batch takes no stream-K; the tiled stages have a stream-K body, skinny_n has none)
    todo = [
        (cls, name, rec)
        for cls, name, rec in _class_records(
            data, gpu, classes, stages, lambda st: st.cost == "waves" and st.precision == "fp32"
        )
        if {"SPLITK", "BM"} <= set(rec.get("config", {}))
    ]

    def twin(cfg: dict, splits: int) -> dict:
        return dict(cfg, SPLITK=splits)

    distinct: dict[tuple, tuple[str, dict]] = {}
    for _, name, rec in todo:
        cfg = twin(rec["config"], STREAM_K)
        distinct.setdefault((name, tuple(sorted(cfg.items()))), (name, cfg))
    if jobs > 1:
        for name in dict.fromkeys(n for n, _ in distinct.values()):
            cfgs = [c for n, c in distinct.values() if n == name]
            compile_ahead(name, cfgs, cc, jobs)
    prob = Problem(*shape, rng, blas)
    timed: dict[tuple, dict] = {}
    validated: set[str] = set()
    for key, (name, cfg) in distinct.items():
        # the first twin of each stage validated against the reference (the twins share their
        # body; tests/test_streamk.py checks the decomposition), the others timed on the same
        # operands with a NaN-poisoned C
        try:
            sk = get_stage(name).with_config(cfg)
            t = (_time_only if name in validated else evaluate)(sk, prob, reps, warmup)
            bps = occupancy(sk, prob, True, "NN") if t["ok"] else 0
        except Exception as e:  # noqa: BLE001 - one twin that cannot run must not lose the rest
            t = dict(ok=False, error=check.error_note(e))
        if not t["ok"]:
            print(f"{name} {cfg}: stream-K {t['error']}", file=sys.stderr)
            timed[key] = {}
            continue
        validated.add(name)
        timed[key] = {"ms_sk": t["ms"], "blocks_per_sm_sk": bps, "shape_sk": list(shape)}
        print(f"{name} {cfg}: stream-K {t['ms']:.4f} ms", file=sys.stderr)
    out = []
    for cls, name, rec in todo:
        got = timed[(name, tuple(sorted(twin(rec["config"], STREAM_K).items())))]
        for k in tuning.STREAM_K_KEYS:
            rec.pop(k, None)
        rec.update({k: got[k] for k in tuning.STREAM_K_KEYS if k in got})
        out.append((cls, name, rec, dict(got)))
    return out


def _time_only(stage, prob: check.Problem, reps: int, warmup: int) -> dict:
    """Kernel time of ``stage`` at ``prob`` (NN), without the full validation: C is NaN-poisoned
    first and must come back finite. ``{"ok": False, "error": ...}`` on failure."""
    try:
        plan = plan_of(stage, prob, layout="NN")
        prob.poison()
        plan.launch(prob.A, prob.B, prob.C)
        if not np.isfinite(prob.C.copy_to_host()).all():
            return dict(ok=False, error="C not written (NaN left)")
        t = check.time_kernel(lambda: plan.launch(prob.A, prob.B, prob.C), reps=reps, warmup=warmup)
    except Exception as e:  # noqa: BLE001 - a config that cannot run is skipped
        return dict(ok=False, error=check.error_note(e))
    return dict(ok=True, ms=t.median)


def autotune_shapes(spec: str, layout: str, force: bool) -> int:
    """``--shapes``: autotune each product (``plan.autotune.tune``) and print its winner, its
    speedup over the cost model's own pick and the seconds it took. Exit status 0, or 1 when a
    product had no candidate that ran."""
    from ..device import info
    from ..plan import autotune
    from ..plan.geometry import Alignment, Geometry
    from .bench.sizes import read_sizes

    dev, status = info(), 0
    print("M,N,K,layout,aligned,winner,config,ms,model_pick_ms,seconds")
    for M, N, K in read_sizes(spec):
        g = Geometry.dense(M, N, K, layout)
        aligned = g.alignment(Alignment.ALL) == Alignment.ALL
        rec = autotune.tune(g, aligned, dev, force=force, pointers=Alignment.ALL)
        if rec is None:
            print(f"{M},{N},{K},{layout},{aligned},none,,,,", flush=True)
            status = 1
            continue
        best = rec["candidates"][0]
        first = min(rec["candidates"], key=lambda c: c.get("rank", 0))  # the model's own pick
        cfg = " ".join(f"{k}={v}" for k, v in best["config"].items())
        print(
            f"{M},{N},{K},{layout},{aligned},{best['stage']},{cfg},{best['ms']:.4g},"
            f"{first['ms']:.4g},{rec.get('seconds', 0)}",
            flush=True,
        )
    return status


def main(argv: Sequence[str] | None = None) -> int:
    from ..kernels import STAGES

    # the FP32 stages by default; by name also the TF32 wgmma stages, whose classes the plan
    # weighs for compute="tf32"/"3xtf32" beside the FP32 ones, and the TMA stages (FP16: the
    # classes hgemm picks from); every stage is checked against cuBLAS FP32 within its own
    # precision's tolerance (FP16 stages on float16 copies of the inputs)
    tunable = [s.name for s in STAGES if s.tunable and s.precision == "fp32"]
    tensor = [
        s.name
        for s in STAGES
        if s.tunable
        and s.arch is not None
        and (s.precision not in SIXTEEN or s.tensor_maps is not None)
    ]
    classes = [c.name for c in tuning.CLASSES]
    ap = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.tune",
        description="Sweep tile configurations of the tunable stages on this GPU and store the "
        "fastest valid ones per stage and shape class in the tuning cache.",
    )
    ap.add_argument(
        "--stages",
        nargs="+",
        default=tunable,
        choices=tunable + tensor,
        help="stages to tune (default: every tunable FP32 stage; also " + ", ".join(tensor) + ")",
    )
    ap.add_argument(
        "--classes",
        nargs="+",
        default=classes,
        choices=classes,
        help="shape classes to tune (default: all)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=480.0,
        help="seconds for the whole sweep, compilation included (default 480; with --jobs, "
        "compiling ahead comes on top); the large class gets 40 %%, the others 20 %% each, "
        "split among the stages",
    )
    ap.add_argument("--top", type=int, default=3, help="configs refined in phase 2 (default 3)")
    ap.add_argument("--reps", type=int, default=10, help="timed repeats per config (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up runs per config (default 2)")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"tuning file to update (default {tuning.user_cache_path()})",
    )
    ap.add_argument(
        "--log",
        type=Path,
        default=None,
        help="also write every evaluation (config, time, error) to this CSV file",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the random operands")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="compile each (class, stage)'s candidates first in this many processes (default 1: "
        "each is compiled when it is first timed)",
    )
    ap.add_argument(
        "--max-compile",
        type=int,
        default=400,
        help="with --jobs: compile at most this many candidates per (class, stage) ahead "
        "(default 400)",
    )
    ap.add_argument(
        "--configs",
        type=Path,
        default=None,
        help="JSON file: a list of configurations (dicts) to time first in every "
        "class, before the known winners and the stage's space",
    )
    ap.add_argument(
        "--shapes",
        default=None,
        help="autotune these products ahead of time instead of sweeping classes: MxNxK,... "
        "(or a file with one per line, e.g. a model's projections); each is timed as "
        "numba_gemm.autotune() times the first call of its bucket and stored where it looks "
        f"({tuning.autotune_path()}); --force tunes a stored bucket again",
    )
    ap.add_argument(
        "--layout",
        default="NN",
        choices=tuning.LAYOUTS,
        help="with --shapes: how A and B are stored (NT: x @ W.T, as torch.nn.Linear computes)",
    )
    ap.add_argument("--force", action="store_true", help="with --shapes: re-time tuned buckets")
    ap.add_argument(
        "--retime",
        choices=("NN", "NT", "SK"),
        default=None,
        help="instead of sweeping: time the class candidates already stored in --out (default: "
        "a copy of the committed defaults) once more and add their times there. NN: again as "
        "swept, replacing ms and ms_scalar (after a kernel change); NT: with B "
        "stored transposed, x @ W.T (ms_nt, ms_scalar_nt); SK: their stream-K twins at "
        + "x".join(map(str, STREAM_K_SHAPE))
        + " (ms_sk, blocks_per_sm_sk, shape_sk); the plan prices such products from them",
    )
    args = ap.parse_args(argv)

    device = tuning.current_device()
    if device is None:
        print(
            "numba_gemm.tools.tune: no CUDA GPU available (tuning needs a real GPU)",
            file=sys.stderr,
        )
        return 2
    if args.shapes is not None:
        return autotune_shapes(args.shapes, args.layout, args.force)
    gpu, cc = device
    if args.retime:
        return retime_main(args, gpu, cc)
    out = args.out or tuning.user_cache_path()
    data = tuning.load(out)
    defaults = tuning.load(tuning.defaults_path(cc))
    blas = check.blas_library("auto")  # cuBLAS FP32, TF32 forced off, whatever CUPY_TF32 says
    rng = np.random.default_rng(args.seed)

    sm_count = device_info(current_id()).sm_count
    weight = {c: CLASS_WEIGHT[c] for c in args.classes}
    total_w = sum(weight.values())
    log_rows: list[dict] = []
    rows = []
    tried: dict[str, list[dict]] = {name: [] for name in args.stages}  # best-first, all classes
    for cls in sorted(args.classes, key=CLASS_ORDER.index):
        spec = next(c for c in tuning.CLASSES if c.name == cls)
        M, N, K = spec.shape
        prob = Problem(M, N, K, rng, blas, spec.batch)
        twin = Problem(max(M - 1, 1), max(N - 1, 1), max(K - 1, 1), rng, blas, spec.batch)
        # the kernels the class's shape runs: 128-bit ones only if its rows are 16-byte aligned
        variant = "vector" if N % 4 == 0 and K % 4 == 0 else "scalar"
        share = args.budget * weight[cls] / total_w / len(args.stages)
        for name in args.stages:
            base = get_stage(name)
            if not base.supports(M, N, K):
                continue  # the skinny stage outside the few-rows classes
            extra = json.loads(args.configs.read_text()) if args.configs else []
            # known winners, then configs compiled for a larger class, then the rest of the space
            first = extra + known_configs(gpu, cc, cls, name, data, defaults) + tried[name]
            first = [c for c in {str(c): c for c in first}.values() if _valid_for(base, c)]
            seen = set(map(str, first))
            cands = first + [c for c in _order(base.space) if str(c) not in seen]
            key = variant_key(variant, layout_of(base))
            if args.jobs > 1:
                compile_ahead(name, cands[: args.max_compile], cc, args.jobs, key)
            results = _time_for(base, cands, prob, 0.7 * share, args, log_rows, cls)
            timed = len(results)
            results.sort(key=lambda cr: -cr[1]["gflops"])
            # phase 2: launch bounds and split-K of the top configurations, then the splits of
            # every tile's fastest unsplit one (a tile keeps its best split: ALTERNATIVES)
            variants = [v for cfg, _ in results[: args.top] for v in knob_variants(cfg, cls)]
            variants += split_variants(name, results, cls, spec.shape, sm_count)
            done = {str(c) for c, _ in results}
            variants = [
                v
                for v in {str(v): v for v in variants}.values()
                if str(v) not in done and _valid_for(base, v)
            ]
            if args.jobs > 1:
                compile_ahead(name, variants, cc, args.jobs, key)
            results += _time_for(base, variants, prob, 0.3 * share, args, log_rows, cls)
            if not results:
                print(f"{cls} {name}: no valid configuration timed", file=sys.stderr)
                continue
            results.sort(key=lambda cr: -cr[1]["gflops"])
            tile_only = [
                dict(c, MINB=0, SPLITK=1) if "MINB" in c else dict(c, SPLITK=1) for c, _ in results
            ]
            tried[name] = list({str(c): c for c in tile_only + tried[name]}.values())[:24]
            alts = _alternatives(results, base, prob, cls, twin, args.reps, args.warmup, args.jobs)
            if not alts:
                print(
                    f"{cls} {name}: no configuration kept (only split-K ones timed for a "
                    "class without split-K, or none could launch)",
                    file=sys.stderr,
                )
                continue
            best_cfg, best = next((c, r) for c, r in results if c == alts[0]["config"])
            best = dict(
                best,
                config=best_cfg,
                blocks_per_sm=alts[0]["blocks_per_sm"],
                blocks_per_sm_scalar=alts[0]["blocks_per_sm_scalar"],
                **{k: alts[0][k] for k in ("ms_scalar", tuning.SPREAD_SUM) if k in alts[0]},
                alternatives=alts[1:],
                candidates_timed=timed,
                candidates_total=len(cands),
                date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )
            best.pop("ok", None)
            tuning.record(data, gpu, cc, cls, name, best)
            tuning.save(data, out)
            rows.append((cls, name, best))

    if args.log:
        import csv

        keys = sorted({k for r in log_rows for k in r})
        with open(args.log, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(log_rows)
    print(f"\nGPU: {gpu} (sm_{cc[0]}{cc[1]}); cache: {out}")
    print(f"{'class':<7} {'stage':<17} {'GFLOP/s':>9} {'% cuBLAS':>9} {'timed':>9}  config")
    for cls, name, r in rows:
        pct = f"{r['pct_cublas']:.1%}" if "pct_cublas" in r else "-"
        cfg = " ".join(f"{k}={v}" for k, v in r["config"].items())
        print(
            f"{cls:<7} {name:<17} {r['gflops']:>9.0f} {pct:>9} "
            f"{r['candidates_timed']:>4}/{r['candidates_total']:<4}  {cfg}"
        )
    return 0 if rows else 1


def retime_main(args: argparse.Namespace, gpu: str, cc: tuple[int, int]) -> int:
    """``--retime NT`` (:func:`retime`) or ``SK`` (:func:`retime_stream_k`) over ``--out`` (seeded
    from the committed defaults when it does not exist), a table of the new times per candidate
    (NT: against NN), 1 when nothing was timed."""
    out = args.out or tuning.user_cache_path()
    data = tuning.load(out if out.exists() else tuning.defaults_path(cc))
    if not data.get("gpus", {}).get(gpu, {}).get("classes"):
        # (another GPU's row-major times beside this one's transposed ones would not compare)
        print(
            f"numba_gemm.tools.tune --retime: {out} holds no class candidates for {gpu}; sweep "
            "the classes on this GPU first (python -m numba_gemm.tools.tune --out ...)",
            file=sys.stderr,
        )
        return 1
    blas = check.blas_library("auto")
    rng = np.random.default_rng(args.seed)
    if args.retime == "SK":
        done = retime_stream_k(
            data, gpu, cc, args.classes, args.stages, rng, blas, args.reps, args.warmup, args.jobs
        )
        tuning.save(data, out)
        print(f"stream-K twins at {'x'.join(map(str, STREAM_K_SHAPE))}, NN, kernel time")
        print(f"{'class':<9} {'stage':<17} {'SK ms':>8} {'bps':>3}  config")
        for cls, name, rec, got in done:
            cfg = " ".join(f"{k}={v}" for k, v in rec["config"].items())
            sk, bps = got.get("ms_sk", float("nan")), got.get("blocks_per_sm_sk", 0)
            print(f"{cls:<9} {name:<17} {sk:8.4f} {bps:3d}  {cfg}")
        print(f"written: {out}")
        return 0 if any(got.get("ms_sk") for *_, got in done) else 1
    before = {}  # (NN: the times it replaces)
    for *_, rec in _class_records(data, gpu, args.classes, args.stages, lambda st: True):
        before[id(rec)] = rec["ms"]
    done = retime(
        data,
        gpu,
        cc,
        args.classes,
        args.stages,
        rng,
        blas,
        args.reps,
        args.warmup,
        args.jobs,
        layout=args.retime,
    )
    tuning.save(data, out)
    new, head = ("ms", "NN was") if args.retime == "NN" else ("ms_nt", "NN")
    print(f"{'class':<9} {'stage':<17} {head:>8} {args.retime + ' ms':>8} {'ratio':>6}  config")
    for cls, name, rec, added in done:
        was = before.get(id(rec), rec["ms"]) if args.retime == "NN" else rec["ms"]
        got = added.get(new)
        ratio = f"{got / was:6.2f}" if got else "     -"
        cfg = " ".join(f"{k}={v}" for k, v in rec["config"].items())
        print(f"{cls:<9} {name:<17} {was:8.4f} {got or float('nan'):8.4f} {ratio}  {cfg}")
    print(f"written: {out}")
    return 0 if any(a for *_, a in done) else 1


if __name__ == "__main__":
    sys.exit(main())
