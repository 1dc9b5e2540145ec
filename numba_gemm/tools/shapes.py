"""``python -m numba_gemm.tools.shapes``: the automatic pick against cuBLAS FP32 on the shape suite,
and, with ``--sweep``, against the fastest (stage, configuration) that an exhaustive sweep finds.

For each shape of ``numba_gemm.tools.bench.sizes.SUITE`` (``--groups`` picks groups, ``--shapes
MxNxK,...`` replaces it): cuBLAS FP32 (``torch.mm``, TF32 off) and the automatic pick, each checked
against a float64 product on the GPU (relative Frobenius error, NaN-poisoned output), then timed:
kernel time (CUDA events behind a hold kernel, median; ``check.time_kernel``) and end-to-end time
of the public call made back to back, its loops and cuBLAS's taken in turn
(``timing.time_calls_paired``). ``--sweep`` then times every candidate the selection could have
taken: every configuration of every FP32 stage in the tuning data (all classes, winners and
alternatives; the tiled stages' also as stream-K) and, where they take the shape, every
configuration of the regime stages' spaces (skinny, skinny_n); compiled first in parallel
processes (``numba_gemm.tools.precompile``).
Rows: ``race.csv`` (one per shape: cuBLAS, auto, best swept, ratios, GB/s of the operands) and
``sweep.csv`` (every candidate, with the variant that ran and its occupancy), under ``--out``;
``summary.txt`` (one line per shape, then the geometric mean of the end-to-end ratio).
``--layout NT`` races ``x @ W.T`` (B the transpose of a row-major ``(N, K)``, as
``torch.nn.Linear`` computes; cuBLAS gets the same views) and sweeps the candidates that serve it.
``--compute tf32`` (or ``3xtf32``) races ``sgemm(compute=...)``, cuBLAS in TF32 (for 3xTF32: in
FP32); ``--compute fp16`` (``bf16``) races ``hgemm`` on float16 (bfloat16) operands with a C of
that type against ``torch.mm`` in that type (FP32 accumulation both); ``--batch B`` races batches
of B products against ``torch.bmm``.
``--fold`` records a sweep's fastest candidates per shape in a tuning file as measured shapes
(``numba_gemm.plan.tuning.record_shape``), which the plan prices products near them from; it and
``--summarize`` need no GPU. The shape classes themselves are tuned by ``numba_gemm.tools.tune``.

    python -m numba_gemm.tools.shapes --out DIR [--groups skinny deep] [--sweep] [--jobs 16]
                                      [--layout NT]
    python -m numba_gemm.tools.shapes --out DIR --fold DIR/sweep.csv \
                                      --into numba_gemm/tuning/sm_90.json

Needs PyTorch with a CUDA GPU for the race and the sweep. Exit status: 0 on success.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import os
import sys
import time
from pathlib import Path

from .. import device
from ..api import explain, hgemm, sgemm
from ..kernels import STAGES, get_stage
from ..kernels._tunable import STREAM_K
from ..kernels.stage import variant_key
from ..launch.launcher import runner
from ..plan import autotune, tuning
from ..plan.choose import SIXTEEN, plan_for, ranked
from ..plan.cost import split_options
from ..plan.geometry import Alignment, Geometry
from . import precompile as pc
from .bench.sizes import (
    HELDOUT_SEED,
    SUITE,
    heldout_models,
    heldout_random,
    parse_sizes,
    suite_shapes,
)
from .check import time_kernel
from .timing import time_calls, time_calls_paired


def _write(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def summary(rows: list[dict]) -> str:
    """One line per shape (kernel and end-to-end % of cuBLAS, time, GB/s, the pick), then the
    geometric mean and minimum of the end-to-end ratio: ``summary.txt``."""
    lines, ratios = [], []
    for r in rows:
        pick = str(r.get("auto", "")).split(" ")[0]
        split = str(r.get("auto", "")).rpartition("split_k=")[2] or "?"
        if not r.get("pct_cublas_e2e"):
            lines.append(
                f"{r['group']:10s} {r['M']:>5}x{r['N']:>5}x{r['K']:>5} "
                f"{r.get('auto_note', 'no time')}"
            )
            continue
        ratios.append(float(r["pct_cublas_e2e"]) / 100)
        kern, e2e = float(r["pct_cublas_kernel"]), float(r["pct_cublas_e2e"])
        us, gbps = 1e3 * float(r["auto_kernel_ms"]), float(r["gbps_kernel"])
        lay = "" if r.get("layout", "NN") in ("NN", "", None) else f" {r['layout']}"
        if r.get("compute") not in (None, "", "fp32"):
            lay += f" {r['compute']}"
        if str(r.get("batch") or 1) != "1":
            lay += f" x{r['batch']}"
        lines.append(
            f"{r['group']:10s} {r['M']:>5}x{r['N']:>5}x{r['K']:>5}{lay} "
            f"kernel {kern:6.1f}% e2e {e2e:6.1f}% {us:9.1f} us {gbps:8.0f} GB/s  "
            f"{pick} S={split}"
        )
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"geomean e2e {geo:.3f} min {min(ratios):.3f} over {len(ratios)} shapes")
    return "\n".join(lines) + "\n"


def candidates(
    M: int,
    N: int,
    K: int,
    stream_k: bool = True,
    spaces: bool = True,
    stages: list[str] | None = None,
    extra: list[dict] | None = None,
    extra_only: bool = False,
    layout: str = "NN",
) -> list[tuple[str, dict]]:
    """Every ``(stage name, config)`` of the FP32 stages that the sweep times at this shape: the
    tuning data's (every class's winners and alternatives, each with the K splits the plan may
    give it here, ``plan.cost.split_options`` at the candidate's blocks per SM, and the tiled
    ones' stream-K twins; every measured shape's candidates) and the regime stages' whole spaces
    (without ``stream_k``: no stream-K twins; without ``spaces``: the regime stages' tuned
    candidates only; ``stages``: only these stages; ``extra``: more candidates, each a dict
    ``{"stage", "config", "blocks_per_sm"}`` as in the tuning data, swept like its own;
    ``extra_only``: those alone); of those, the ones that serve ``layout``."""
    dev = device.info(device.current_id())
    out: dict[str, tuple[str, dict]] = {}

    def add(name, cfg):
        try:
            serves = layout in get_stage(name).with_config(cfg).layouts
        except (TypeError, ValueError):  # a stale configuration: the sweep reports it failing
            serves = True
        if serves:
            out[f"{name} {sorted(cfg.items())}"] = (name, dict(cfg))

    tuned = [
        (name, c)
        for cls in tuning.CLASSES
        for name, res in tuning.winners(cls.name, dev).items()
        for c in tuning.candidates(res, name)
    ]
    tuned += [(c["stage"], c) for rec in tuning.measured_shapes(dev) for c in rec["candidates"]]
    if extra_only:
        tuned, spaces = [], False
    tuned += [(c["stage"], c) for c in extra or ()]
    for name, c in tuned:
        st = get_stage(name)
        if st.precision != "fp32" or not st.supports(M, N, K) or name not in (stages or [name]):
            continue
        cfg = dict(c["config"])
        add(name, cfg)
        if cfg.get("SPLITK") == STREAM_K:
            continue
        # the splits the plan prices (up to four waves of the candidate's resident blocks), and
        # for mostly empty tiles up to its occupancy, not one block a SM
        for s in split_options(c, M, N, K, dev.sm_count, c.get("blocks_per_sm", 1)):
            add(name, dict(cfg, SPLITK=s))
        if stream_k and "BM" in cfg:  # its stream-K twin (tiled stages)
            add(name, dict(cfg, SPLITK=STREAM_K))
    for st in STAGES:  # the regime stages' whole spaces, where they take the shape
        if (
            spaces
            and st.name in (stages or [st.name])
            and st.tunable
            and not st.general
            and st.precision == "fp32"
            and st.supports(M, N, K)
        ):
            for cfg in st.space:
                add(st.name, cfg)
    return list(out.values())


def fold(sweeps: list[Path], into: Path, within: float = 1.05, keep: int = 3) -> str:
    """Record each swept shape's fastest candidates (within ``within`` x the best, at most
    ``keep``) as a measured shape (``tuning.record_shape``) in the tuning file ``into``, in the
    entry of the GPU that ran the sweep (a new entry, measured shapes only, for a GPU the file
    has none for); no GPU.

    A sweep row without ``blocks_per_sm`` (sweeps before it was recorded) takes the occupancy the
    tuning data in ``into`` records for the same configuration and variant; a stream-K row gets 1
    (the plan prices stream-K only at its own shape). Rows with neither are skipped. Returns a
    report, one line per shape."""
    data = tuning.load(into)
    entries = list(data["gpus"].values())
    if not entries:
        raise ValueError(f"{into} has no entry to take the compute capability from")
    cc = tuple(entries[0]["compute_capability"])  # one file, one compute capability
    occ = {}  # (config, variant) -> blocks per SM, from the classes of every entry of the file
    for name, res in (nr for e in entries for cls in e["classes"].values() for nr in cls.items()):
        for c in tuning.candidates(res, name):
            key = str(sorted(c["config"].items()))
            occ[(key, "vector")] = c.get("blocks_per_sm")
            occ[(key, "scalar")] = c.get("blocks_per_sm_scalar", c.get("blocks_per_sm"))
    rows = []
    for path in sweeps:
        with open(path, newline="") as f:
            rows += [r for r in csv.DictReader(f) if r.get("kernel_ms")]
    report = []
    # each GPU's rows into its own entry (a new one holds measured shapes only: the main
    # entry's classes serve it, tuning._default_entries)
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        shapes: dict[tuple, list[dict]] = {}
        for r in rows:
            if r["gpu"] == gpu:
                M, N, K = int(r["M"]), int(r["N"]), int(r["K"])
                variant = r.get("variant") or ("scalar" if (N | K) & 3 else "vector")
                cfg = ast.literal_eval(r["config"])  # the sweep writes a dict literal
                bps = r.get("blocks_per_sm") or occ.get((str(sorted(cfg.items())), variant))
                if not bps and cfg.get("SPLITK") == STREAM_K:
                    bps = 1
                if not bps:
                    continue
                key = ((M, N, K), variant == "vector", r.get("layout") or "NN")
                shapes.setdefault(key, []).append(
                    dict(
                        stage=r["stage"],
                        config=cfg,
                        ms=float(r["kernel_ms"]),
                        blocks_per_sm=int(bps),
                    )
                )
        for (shape, aligned, layout), cands in sorted(shapes.items()):
            cands.sort(key=lambda c: c["ms"])
            kept = [c for c in cands if c["ms"] <= within * cands[0]["ms"]][:keep]
            tuning.record_shape(data, gpu, cc, shape, aligned, kept, layout)
            report.append(
                f"{gpu} {'x'.join(map(str, shape))} {layout} "
                f"{'aligned' if aligned else 'scalar'}"
                f": {len(kept)} of {len(cands)}, best {kept[0]['stage']} "
                f"{kept[0]['config']} {kept[0]['ms']:.4g} ms"
            )
    tuning.save(data, into)
    return "\n".join(report) + "\n"


def precompile(
    shapes: list[tuple[int, int, int]],
    jobs: int,
    sweep: bool,
    layout: str = "NN",
    compute: str = "fp32",
    **which,
) -> None:
    """Compile the automatic pick of every shape (for ``compute``) and, with ``sweep``, every
    candidate (both variants) into the kernel cache, for operands in ``layout``."""
    import torch  # optional: the race and the sweep need PyTorch on a GPU, the fold does not

    cc = torch.cuda.get_device_capability()
    todo = {}
    for M, N, K in shapes:
        g = Geometry.dense(M, N, K, layout)
        st = plan_for(M, N, K, geometry=g, compute=compute).stage
        picks = [(st.name, dict(st.config))]
        if tuning.autotune_enabled():  # what the first call will time (plan.autotune)
            aligned = g.alignment(Alignment.ALL) == Alignment.ALL
            tuned = ranked(g, aligned, device.info(device.current_id()))[: autotune.CANDIDATES]
            picks += [(s.name, dict(s.config)) for _, s, _ in tuned]
        for name, cfg in picks + (candidates(M, N, K, layout=layout, **which) if sweep else []):
            # the variant the sweep runs here (torch's allocations are 16-byte aligned; only C's
            # rows unaligned: vector_loads where the stage has it, plan.choose.plan_for)
            loads = g.loads_aligned() and get_stage(name).with_config(cfg).has_vector_loads(layout)
            run = "vector" if g.shape_aligned() else "vector_loads" if loads else "scalar"
            for variant in ("vector", "scalar", run) if (name, cfg) in picks else (run,):
                job = pc.Job(  # (fp16, bf16: the race's hgemm writes a 16-bit C)
                    name,
                    tuple(sorted(cfg.items())),
                    variant_key(variant, layout),
                    cc,
                    compute in SIXTEEN,
                )
                todo[str(job)] = job
    t = time.monotonic()
    res = pc.run(list(todo.values()), jobs)
    bad = [(str(j), err) for j, status, _, err in res if status == "failed"]
    print(
        f"precompiled {len(res)} kernels in {time.monotonic() - t:.0f} s; "
        f"{len(bad)} failed: {bad[:3]}",
        flush=True,
    )


def problems(args: argparse.Namespace) -> tuple[list, str]:
    """``([(group, (M, N, K))], layout)`` the race runs: ``args.heldout``'s set (``"models"``,
    ``"models2"``, ``"models3"``: layout NT; ``"random"``: the draws of ``args.count`` and
    ``args.seed`` in ``args.layout``), else ``args.shapes`` or the suite's ``args.groups``."""
    heldout, layout = args.heldout, args.layout
    if heldout in ("models", "models2", "models3"):
        return heldout_models(int(heldout[6:] or 1)), "NT"
    if heldout == "random":
        drawn = enumerate(heldout_random(args.count, args.seed))
        return [(f"heldout-{i}", (M, N, K)) for i, (M, N, K, lay) in drawn if lay == layout], layout
    if args.shapes:
        return [("given", s) for s in parse_sizes(args.shapes)], layout
    return suite_shapes(args.groups), layout


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.shapes",
        description="Race the automatic pick against cuBLAS FP32 on the shape suite (kernel and "
        "end-to-end time); --sweep: also every candidate; --fold: record a sweep's fastest "
        "candidates as measured shapes in a tuning file.",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--summarize",
        type=Path,
        default=None,
        metavar="RACE_CSV",
        help="only write OUT/summary.txt from a race.csv (no GPU)",
    )
    p.add_argument(
        "--fold",
        type=Path,
        nargs="+",
        default=None,
        metavar="SWEEP_CSV",
        help="only record these sweeps' fastest candidates per shape as measured "
        "shapes in the tuning file --into (no GPU); report in OUT/fold.txt",
    )
    p.add_argument("--into", type=Path, default=None, metavar="TUNING_JSON")
    p.add_argument("--groups", nargs="*", default=None, choices=list(SUITE))
    p.add_argument("--shapes", default=None, help="MxNxK,... instead of the suite")
    p.add_argument(
        "--heldout",
        choices=["random", "models", "models2", "models3"],
        default=None,
        help="race held-out problems instead of the suite (tools.bench.sizes: never tuned on): "
        "random, those of --layout among heldout_random(--count, --seed); models, models2, "
        "models3: the first, second, third held-out models' projections (layout NT)",
    )
    p.add_argument("--count", type=int, default=40, help="with --heldout random: problems drawn")
    p.add_argument("--seed", type=int, default=HELDOUT_SEED, help="with --heldout random")
    p.add_argument(
        "--layout",
        default="NN",
        choices=["NN", "NT", "TN", "TT"],
        help="how A and B are stored, as in BLAS: NT is B = W.T with W a row-major "
        "(N, K), as in x @ W.T (torch.nn.Linear); cuBLAS gets the same views",
    )
    p.add_argument(
        "--compute",
        default="fp32",
        choices=["fp32", "tf32", "3xtf32", "fp16", "bf16"],
        help="the arithmetic of sgemm(compute=...), or fp16 / bf16: hgemm with a 16-bit C; "
        "cuBLAS runs TF32 for tf32, FP16 for fp16 and BF16 for bf16 (same precision), else FP32 "
        "(TF32 off); --sweep and --fold are for fp32",
    )
    p.add_argument(
        "--batch",
        type=int,
        default=0,
        help="race batches of this many products (torch.bmm against sgemm on 3-D operands)",
    )
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument(
        "--no-stream-k",
        dest="stream_k",
        action="store_false",
        help="sweep without the tiled candidates' stream-K twins",
    )
    p.add_argument(
        "--no-spaces",
        dest="spaces",
        action="store_false",
        help="sweep the regime stages' tuned candidates, not their whole spaces",
    )
    p.add_argument(
        "--stages",
        nargs="+",
        default=None,
        help="sweep only these stages' candidates (default: every FP32 stage)",
    )
    p.add_argument(
        "--extra",
        type=Path,
        default=None,
        metavar="JSON",
        help="also sweep these candidates: a list of {stage, config, blocks_per_sm}",
    )
    p.add_argument("--extra-only", action="store_true", help="sweep the --extra candidates alone")
    p.add_argument(
        "--compile-only",
        action="store_true",
        help="only compile the sweep's candidates into the kernel cache",
    )
    p.add_argument(
        "--max-sweep-ms",
        type=float,
        default=1500.0,
        help="time budget per candidate and shape; slower candidates get fewer reps",
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.compute != "fp32" and (args.sweep or args.fold):
        p.error("--sweep and --fold are for --compute fp32")
    if args.compute in SIXTEEN and (args.batch or args.layout[0] == "T"):
        p.error(f"--compute {args.compute} races 2-D products with A row-major (hgemm: NN, NT)")
    if args.fold:
        if args.into is None:
            p.error("--fold needs --into TUNING_JSON")
        (args.out / "fold.txt").write_text(fold(args.fold, args.into))
        return 0
    if args.summarize:
        with open(args.summarize, newline="") as f:
            (args.out / "summary.txt").write_text(summary(list(csv.DictReader(f))))
        return 0
    shapes, args.layout = problems(args)

    import torch  # optional: see precompile

    extra = json.loads(args.extra.read_text()) if args.extra else None
    which = dict(
        stream_k=args.stream_k,
        spaces=args.spaces,
        stages=args.stages,
        extra=extra,
        extra_only=args.extra_only,
        layout=args.layout,
    )
    precompile(
        [s for _, s in shapes],
        args.jobs,
        args.sweep or args.compile_only,
        compute=args.compute,
        **which,
    )
    if args.compile_only:
        return 0
    torch.backends.cuda.matmul.allow_tf32 = args.compute == "tf32"  # cuBLAS in the same precision
    # FP16: FP32 accumulation throughout, as hgemm (no FP16 split-K sums)
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    batch = (args.batch,) if args.batch else ()
    gpu = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda").manual_seed(0)
    race, sweep = [], []

    dt = getattr(torch, SIXTEEN.get(args.compute, "float32"))

    def run_shape(group, M, N, K):
        # a transposed operand: the transpose (a view) of a row-major (K, M) or (N, K) tensor
        a = (
            torch.randn(*batch, M, K, device="cuda", generator=gen, dtype=dt)
            if args.layout[0] == "N"
            else torch.randn(*batch, K, M, device="cuda", generator=gen, dtype=dt).mT
        )
        b = (
            torch.randn(*batch, K, N, device="cuda", generator=gen, dtype=dt)
            if args.layout[1] == "N"
            else torch.randn(*batch, N, K, device="cuda", generator=gen, dtype=dt).mT
        )
        c = torch.empty(*batch, M, N, device="cuda", dtype=dt)
        ref = a.double() @ b.double()
        ref_norm = torch.linalg.norm(ref).item()
        flop = 2.0 * M * N * K * max(args.batch, 1)
        nbytes = float(a.element_size()) * (M * K + K * N + M * N) * max(args.batch, 1)
        compute = None if args.compute == "fp32" or args.compute in SIXTEEN else args.compute
        if args.compute in SIXTEEN:

            def call():
                hgemm(a, b, out=c)

            def plan_of_call():
                g = None if args.layout == "NN" else Geometry.dense(M, N, K, args.layout)
                return plan_for(
                    M, N, K, geometry=g, compute=args.compute, out_dtype=SIXTEEN[args.compute]
                )

        else:

            def call():
                sgemm(a, b, out=c, compute=compute)

            def plan_of_call():
                return explain(a, b, out=c, compute=compute)

        def err_of(run):
            c.fill_(float("nan"))
            run()
            return (torch.linalg.norm(c.double() - ref) / ref_norm).item()

        def reps_for(run):
            t0 = time.perf_counter()
            run()
            torch.cuda.synchronize()
            once = (time.perf_counter() - t0) * 1e3
            return max(3, min(args.reps, int(args.max_sweep_ms / max(once, 1e-3))))

        def mm():
            (torch.bmm if batch else torch.mm)(a, b, out=c)

        row = dict(gpu=gpu, group=group, M=M, N=N, K=K, layout=args.layout)
        if args.compute != "fp32" or batch:
            row.update(compute=args.compute, batch=args.batch or 1)
        row["cublas_err"] = err_of(mm)
        row["cublas_kernel_ms"] = time_kernel(mm, reps=args.reps).median
        row["cublas_e2e_ms"] = None  # below: in turn with the public call's loops
        t0 = time.perf_counter()  # the first call: plan (autotuning on: time the bucket), load
        try:
            call()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported below, where the plan runs
            row["auto_note"] = f"first call FAILED {type(e).__name__}: {e}"
        row["first_call_s"] = time.perf_counter() - t0
        plan = plan_of_call()
        row["auto"] = f"{plan.stage.name} {dict(plan.stage.config)} split_k={plan.split_k}"
        row["auto_predicted_ms"] = plan.predicted_ms
        try:
            run = lambda plan=plan: plan.launch(a, b, c)  # noqa: E731
            row["auto_err"] = err_of(run)
            row["auto_kernel_ms"] = time_kernel(run, reps=args.reps).median
            # end to end, cuBLAS's loops and the public call's in turn: the same host state for
            # both (a 10 us call's host time swings by 20-50 % from one second to the next)
            cub, ours = time_calls_paired([mm, call], reps=args.reps)
            row["cublas_e2e_ms"], row["auto_e2e_ms"] = cub.median, ours.median
        except Exception as e:  # noqa: BLE001 - a failing pick is reported
            row["auto_note"] = f"FAILED {type(e).__name__}: {e}"
        if row["cublas_e2e_ms"] is None:
            row["cublas_e2e_ms"] = time_calls(mm, reps=args.reps).median
        if args.sweep:
            best = None
            for name, cfg in candidates(M, N, K, **which):
                st = get_stage(name).with_config(cfg)
                entry = dict(
                    gpu=gpu,
                    group=group,
                    M=M,
                    N=N,
                    K=K,
                    layout=args.layout,
                    stage=name,
                    config=str(cfg),
                )
                try:
                    pl = explain(a, b, out=c, stage=st)
                    run = lambda pl=pl: pl.launch(a, b, c)  # noqa: E731
                    entry["err"] = err_of(run)
                    if not entry["err"] <= st.rtol:
                        raise ValueError(f"rel. error {entry['err']:.3g}")
                    entry["kernel_ms"] = time_kernel(run, reps=reps_for(run), warmup=1).median
                    entry["variant"] = pl.variant
                    entry["blocks_per_sm"] = runner(pl).kernel().blocks_per_sm(math.prod(pl.block))
                    if best is None or entry["kernel_ms"] < best["kernel_ms"]:
                        best = entry
                except Exception as e:  # noqa: BLE001
                    entry["note"] = f"FAILED {type(e).__name__}: {e}"
                sweep.append(entry)
            if best is not None:
                row["best"] = f"{best['stage']} {best['config']}"
                row["best_kernel_ms"] = best["kernel_ms"]
                if "auto_kernel_ms" in row:
                    row["auto_over_best"] = row["auto_kernel_ms"] / best["kernel_ms"]
            _write(args.out / "sweep.csv", sweep)
        for key in ("kernel", "e2e"):
            ms = row.get(f"auto_{key}_ms")
            if ms:
                row[f"pct_cublas_{key}"] = 100.0 * row[f"cublas_{key}_ms"] / ms
                row[f"gflops_{key}"] = flop / ms / 1e6
                row[f"gbps_{key}"] = nbytes / ms / 1e6
        row["cublas_gbps"] = nbytes / row["cublas_kernel_ms"] / 1e6
        race.append(row)
        print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()}, flush=True)

    for group, (M, N, K) in shapes:
        run_shape(group, M, N, K)
        _write(args.out / "race.csv", race)
        (args.out / "summary.txt").write_text(summary(race))
    return 0


if __name__ == "__main__":
    sys.exit(main())
