"""``python -m numba_gemm.tools.calibrate``: fit the cost model's class prices for ``x @ W.T``
to timings of training products.

The classes' candidates are each timed at one shape (``tools.tune``; with B stored transposed by
``--retime NT``) and priced elsewhere by the per-SM wave model (``plan.cost.estimate_ms``). For
some configurations that scaling is off by a factor of their own: on aligned NT products of
24-3072 rows, multistage's 32 x 256 tiles ran 1.5-2.2x their price and double_buffering's
32 x 128 tiles 0.74x (H200; docs/design.md §4.19). One factor per stage does not fit them.

``--probe`` (GPU, PyTorch for the cuBLAS column) times the cost model's first ``--top``
candidates (``plan.choose.ranked``, their kernels compiled first by ``--jobs`` processes) at
the training products of ``--seeds`` (``tools.bench.sizes.training_projections``: made-up
projection-like shapes, no held-out set; ``--rows LO HI`` narrows their rows, 24-3072 by
default), kernel time by CUDA events (``plan.autotune.time_plan``), and writes one JSON line
per candidate to ``OUT/probe.jsonl``: the model's price without any fit (``model_ms``) and with
the stored one (``predicted_ms``).

``--fit PROBE.jsonl ... --into TUNING_JSON`` (no GPU) writes, for each (class, stage,
configuration as it ran, at any K split) timed there from a class, the geometric mean of
measured over ``model_ms``, shrunk toward 1 by one timing (``exp(sum(log r) / (n + 1))``), into
the ``fit_nt`` list of that (class, stage) result of the GPU's entry (``plan.tuning.FIT_NT``);
every fit the entry held before is removed (a fit is of one probe's data). The plan multiplies a
class candidate's price by the fit of the configuration that runs, for products with B stored
transposed, rows aligned, no batch. A candidate priced from a measured shape keeps its price.
On the H200 the committed fit is made from seeds 101 and 102 (``probe/`` of
``bench/results/nvidia-h200/2026-11-30-nt-fit``)::

    python -m numba_gemm.tools.calibrate --probe --seeds 101 102 --out DIR
    python -m numba_gemm.tools.calibrate --fit DIR/probe.jsonl --into numba_gemm/tuning/sm_90.json

Exit status: 0 on success, 1 when nothing was timed or fitted, 2 when no GPU is available.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from numba import cuda

from ..device import info
from ..kernels.stage import variant_key
from ..plan import tuning
from ..plan.autotune import _variant, time_plan
from ..plan.choose import make_plan, ranked
from ..plan.geometry import Alignment, Geometry
from . import precompile
from .bench.sizes import TRAINING_ROWS, training_projections, training_rows
from .check import time_kernel

#: Candidates timed a product (the cost model's first).
TOP = 12
_CLASS = re.compile(r"^the (\w+) class$")


def class_of(where: str) -> str | None:
    """The class a ``plan.choose.ranked`` candidate was priced from (``"the medium class"`` ->
    ``"medium"``), or None for a measured shape or default tiles."""
    m = _CLASS.match(where)
    return m.group(1) if m else None


def factors(rows: Sequence[dict]) -> dict[tuple[str, str, str, tuple], tuple[float, int]]:
    """``{(gpu, class, stage, tuning.fit_key(config)): (fit, timings)}`` from probe rows of B
    stored transposed whose candidate came from a class, the configuration as it ran: the
    geometric mean of ``ms`` over ``model_ms``, shrunk toward 1 by one timing.

    Raises:
        ValueError: a row lacks ``gpu``, ``layout``, ``where``, ``stage``, ``config``, ``ms`` or
            ``model_ms``, or a time is not positive.
    """
    logs: dict[tuple, list[float]] = {}
    for i, r in enumerate(rows):
        try:
            gpu, layout, where = r["gpu"], r["layout"], r["where"]
            key = (gpu, class_of(where), r["stage"], tuning.fit_key(r["config"]))
            ms, model = float(r["ms"]), float(r["model_ms"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(
                f"probe row {i}: needs gpu, layout, where, stage, config, ms and model_ms ({e!r})"
            ) from None
        if not (0 < ms < math.inf and 0 < model < math.inf):
            raise ValueError(f"probe row {i}: ms and model_ms must be positive, got {ms}, {model}")
        if key[1] is None or layout[1] != "T" or r.get("variant", "vector") != "vector":
            continue
        logs.setdefault(key, []).append(math.log(ms / model))
    return {k: (math.exp(sum(v) / (len(v) + 1)), len(v)) for k, v in logs.items()}


def fit(probes: Sequence[Path], into: Path) -> str:
    """Write the fits of the probe files ``probes`` (JSON lines of ``--probe``) into the tuning
    file ``into`` (:func:`factors`, as ``tuning.FIT_NT`` lists of the (class, stage) results of
    each probe's GPU, replacing every fit that entry held); no GPU. Returns a report, one line
    per fitted configuration.

    Raises:
        ValueError: a probe row is malformed (:func:`factors`), or ``into`` has no classes for a
            probe's GPU.
    """
    rows = [json.loads(line) for p in probes for line in Path(p).read_text().splitlines() if line]
    fits = factors(rows)
    data = tuning.load(into)
    report = []
    for gpu in dict.fromkeys(k[0] for k in fits):
        entry = data["gpus"].get(gpu)
        if entry is None or not entry.get("classes"):
            raise ValueError(f"{into} has no classes for {gpu!r} to fit")
        for cls, stages in entry["classes"].items():
            for stage, res in stages.items():
                res.pop(tuning.FIT_NT, None)
                mine = sorted((k[3], f) for k, f in fits.items() if k[:3] == (gpu, cls, stage))
                if mine:
                    res[tuning.FIT_NT] = [
                        {"config": dict(key), "fit": round(f, 4), "n": n} for key, (f, n) in mine
                    ]
                report += [
                    f"{gpu} {cls} {stage} {dict(key)}: {f:.3f} ({n})" for key, (f, n) in mine
                ]
    tuning.save(data, into)
    return "\n".join(report) + "\n"


def probe(
    out: Path,
    seeds: Sequence[int],
    count: int,
    top: int,
    jobs: int,
    rows: tuple[int, int] = TRAINING_ROWS,
) -> int:
    """Time the cost model's first ``top`` candidates at ``training_projections(count, seed,
    rows)`` for each of ``seeds`` (layout NT) and cuBLAS (``torch.mm``, TF32 off); append JSON
    lines to ``out``. Returns the number of candidates timed."""
    import torch  # optional (the bench extra): only the probe's cuBLAS column needs it

    def ident(st):
        return st.name, tuple(sorted(dict(st.config).items()))

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = info(0)
    todo = []
    for seed in seeds:
        for M, N, K in training_projections(count, seed, rows):
            g = Geometry.dense(M, N, K, "NT")
            model = {
                ident(st): ms
                for ms, st, _ in ranked(g, True, dev, "fp32", Alignment.ALL, fitted=False)
            }
            for rank, (ms, st, where) in enumerate(
                ranked(g, True, dev, "fp32", Alignment.ALL)[:top]
            ):
                variant = _variant(st, g, True, Alignment.ALL)
                todo.append((seed, g, rank, ms, model.get(ident(st), ms), st, variant, where))
    compile_jobs = {
        (*ident(st), variant_key(v, g.layout)): None for _, g, _, _, _, st, v, _ in todo
    }
    t0 = time.monotonic()
    precompile.run([precompile.Job(*k, dev.cc) for k in compile_jobs], jobs)
    print(f"compiled {len(compile_jobs)} kernels in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    cublas: dict[tuple, float] = {}
    timed = 0
    with open(out, "a") as f:
        for seed, g, rank, ms, model_ms, st, variant, where in todo:
            shape = (g.M, g.N, g.K)
            if shape not in cublas:
                a = torch.randn(g.M, g.K, device="cuda")
                b = torch.randn(g.N, g.K, device="cuda").t()
                c = torch.empty(g.M, g.N, device="cuda")
                # kernel time as the shape race takes it (tools.shapes: median, hold kernel)
                mm = lambda a=a, b=b, c=c: torch.mm(a, b, out=c)  # noqa: E731
                cublas[shape] = time_kernel(mm, reps=10).median
                del a, b, c, mm
            plan = make_plan(g, st, variant, dev, ms, "calibrate")
            try:
                t_ms, bps = time_plan(plan)
            except Exception as e:  # a candidate that fails to launch is reported, not fitted
                print(f"{shape} {st.name} {dict(st.config)}: {e}", file=sys.stderr)
                continue
            row = dict(
                gpu=dev.name, seed=seed, shape=list(shape), layout=g.layout, rank=rank,
                stage=st.name, config=dict(st.config), variant=variant, where=where,
                predicted_ms=ms, model_ms=model_ms, ms=t_ms, blocks_per_sm=bps,
                cublas_ms=cublas[shape], split=plan.split_k,
            )  # fmt: skip
            print(json.dumps(row), file=f, flush=True)
            timed += 1
    return timed


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.calibrate",
        description="Fit the cost model's class prices for x @ W.T to timings of training "
        "products: --probe times them (GPU), --fit writes the fits into a tuning file.",
    )
    p.add_argument("--probe", action="store_true", help="time the training products (GPU)")
    p.add_argument("--out", type=Path, help="with --probe: folder for probe.jsonl")
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102])
    p.add_argument("--count", type=int, default=40, help="training products a seed")
    p.add_argument(
        "--rows",
        type=int,
        nargs=2,
        default=TRAINING_ROWS,
        metavar=("LO", "HI"),
        help="with --probe: the training products' rows, log-uniform in [LO, HI] (8 <= LO <= HI)",
    )
    p.add_argument("--top", type=int, default=TOP, help="candidates timed a product")
    p.add_argument("--jobs", type=int, default=16, help="compile processes")
    p.add_argument("--fit", type=Path, nargs="+", metavar="PROBE_JSONL")
    p.add_argument("--into", type=Path, help="with --fit: the tuning file to write")
    args = p.parse_args(argv)
    if args.probe == bool(args.fit):
        p.error("give --probe or --fit")
    if args.fit:
        if args.into is None:
            p.error("--fit needs --into")
        try:
            report = fit(args.fit, args.into)
        except (OSError, ValueError) as e:  # (json.JSONDecodeError is a ValueError)
            p.error(str(e))
        print(report, end="")
        return 0 if report.strip() else 1
    if args.out is None:
        p.error("--probe needs --out")
    try:
        rows = training_rows(args.rows)
    except ValueError as e:
        p.error(f"--rows: {e}")
    if not cuda.is_available():
        print("no CUDA GPU available", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    n = probe(args.out / "probe.jsonl", args.seeds, args.count, args.top, args.jobs, rows)
    print(f"{n} candidates timed into {args.out / 'probe.jsonl'}")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
