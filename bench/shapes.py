"""The shape race (issue 9): ``sgemm(stage=None)`` against cuBLAS FP32 on every shape of the suite,
and, with ``--sweep``, against the fastest (stage, configuration) that an exhaustive sweep finds.

For each shape of ``numba_gemm.bench.sizes.SUITE`` (``--groups`` picks groups, ``--shapes MxNxK``
adds or replaces): cuBLAS FP32 (``torch.mm``, TF32 off) and the automatic pick, each checked
against a float64 product on the GPU (relative Frobenius error, NaN-poisoned output), then timed:
kernel time (CUDA events behind a hold kernel, median; ``check.time_kernel``) and end-to-end time
of the public call made back to back (``timing.time_calls``). ``--sweep`` then times every
candidate the selection could have taken: every configuration of every FP32 stage in the tuning
data (all classes, winners and alternatives; the tiled stages' also as stream-K) and, where they
take the shape, every configuration of the regime stages' spaces (skinny, skinny_n); compiled
first in parallel processes (``numba_gemm.precompile``).
Rows: ``race.csv`` (one per shape: cuBLAS, auto, best swept, ratios, GB/s of the operands) and
``sweep.csv`` (every candidate), under ``--out``.

    python bench/shapes.py --out DIR [--groups skinny deep] [--sweep] [--jobs 16]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path


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
            lines.append(f"{r['group']:10s} {r['M']:>5}x{r['N']:>5}x{r['K']:>5} "
                         f"{r.get('auto_note', 'no time')}")
            continue
        ratios.append(float(r["pct_cublas_e2e"]) / 100)
        kern, e2e = float(r["pct_cublas_kernel"]), float(r["pct_cublas_e2e"])
        us, gbps = 1e3 * float(r["auto_kernel_ms"]), float(r["gbps_kernel"])
        lines.append(f"{r['group']:10s} {r['M']:>5}x{r['N']:>5}x{r['K']:>5} kernel {kern:6.1f}% "
                     f"e2e {e2e:6.1f}% {us:9.1f} us {gbps:8.0f} GB/s  {pick} S={split}")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"geomean e2e {geo:.3f} min {min(ratios):.3f} over {len(ratios)} shapes")
    return "\n".join(lines) + "\n"


def candidates(M: int, N: int, K: int) -> list[tuple[str, dict]]:
    """Every ``(stage name, config)`` of the FP32 stages that the sweep times at this shape."""
    import numba_gemm
    from numba_gemm import device, tuning
    from numba_gemm.kernels._tunable import STREAM_K

    dev = device.info(device.current_id())
    out: dict[str, tuple[str, dict]] = {}
    for cls in tuning.CLASSES:
        for name, res in tuning.winners(cls.name, dev).items():
            st = numba_gemm.get_stage(name)
            if st.precision != "fp32" or not st.supports(M, N, K):
                continue
            for c in tuning.candidates(res):
                cfg = dict(c["config"])
                out[f"{name} {sorted(cfg.items())}"] = (name, cfg)
                if cfg.get("SPLITK") == 1 and "BM" in cfg:  # its stream-K twin (tiled stages)
                    sk = dict(cfg, SPLITK=STREAM_K)
                    out[f"{name} {sorted(sk.items())}"] = (name, sk)
    for st in numba_gemm.STAGES:  # the regime stages' whole spaces, where they take the shape
        if st.tunable and not st.general and st.precision == "fp32" and st.supports(M, N, K):
            for cfg in st.space:
                out[f"{st.name} {sorted(cfg.items())}"] = (st.name, dict(cfg))
    return list(out.values())


def precompile(shapes: list[tuple[int, int, int]], jobs: int, sweep: bool) -> None:
    """Compile the automatic pick of every shape and, with ``sweep``, every candidate (both
    variants) into the kernel cache."""
    import torch

    import numba_gemm
    from numba_gemm import precompile as pc

    cc = torch.cuda.get_device_capability()
    todo = {}
    for M, N, K in shapes:
        st = numba_gemm.plan_for(M, N, K).stage
        picks = [(st.name, dict(st.config))]
        for name, cfg in picks + (candidates(M, N, K) if sweep else []):
            for variant in ("vector", "scalar"):
                job = pc.Job(name, tuple(sorted(cfg.items())), variant, cc)
                todo[str(job)] = job
    t = time.monotonic()
    res = pc.run(list(todo.values()), jobs)
    bad = [(str(j), err) for j, status, _, err in res if status == "failed"]
    print(f"precompiled {len(res)} kernels in {time.monotonic() - t:.0f} s; "
          f"{len(bad)} failed: {bad[:3]}", flush=True)


def main(argv=None) -> int:
    from numba_gemm.bench.sizes import SUITE, parse_sizes, suite_shapes

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--summarize", type=Path, default=None, metavar="RACE_CSV",
                   help="only write OUT/summary.txt from a race.csv (no GPU)")
    p.add_argument("--groups", nargs="*", default=None, choices=list(SUITE))
    p.add_argument("--shapes", default=None, help="MxNxK,... instead of the suite")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--compile-only", action="store_true",
                   help="only compile the sweep's candidates into the kernel cache")
    p.add_argument("--max-sweep-ms", type=float, default=1500.0,
                   help="time budget per candidate and shape; slower candidates get fewer reps")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        with open(args.summarize, newline="") as f:
            (args.out / "summary.txt").write_text(summary(list(csv.DictReader(f))))
        return 0
    shapes = ([("given", s) for s in parse_sizes(args.shapes)] if args.shapes
              else suite_shapes(args.groups))

    import torch

    import numba_gemm
    from numba_gemm.check import time_kernel
    from numba_gemm.timing import time_calls

    precompile([s for _, s in shapes], args.jobs, args.sweep or args.compile_only)
    if args.compile_only:
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda").manual_seed(0)
    race, sweep = [], []

    def run_shape(group, M, N, K):
        a = torch.randn(M, K, device="cuda", generator=gen)
        b = torch.randn(K, N, device="cuda", generator=gen)
        c = torch.empty(M, N, device="cuda")
        ref = a.double() @ b.double()
        ref_norm = torch.linalg.norm(ref).item()
        flop = 2.0 * M * N * K
        nbytes = 4.0 * (M * K + K * N + M * N)

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
            torch.mm(a, b, out=c)

        row = dict(gpu=gpu, group=group, M=M, N=N, K=K)
        row["cublas_err"] = err_of(mm)
        row["cublas_kernel_ms"] = time_kernel(mm, reps=args.reps).median
        row["cublas_e2e_ms"] = time_calls(mm, reps=args.reps).median
        plan = numba_gemm.explain(a, b, out=c)
        row["auto"] = f"{plan.stage.name} {dict(plan.stage.config)} split_k={plan.split_k}"
        row["auto_predicted_ms"] = plan.predicted_ms
        try:
            run = lambda plan=plan: plan.launch(a, b, c)  # noqa: E731
            row["auto_err"] = err_of(run)
            row["auto_kernel_ms"] = time_kernel(run, reps=args.reps).median
            row["auto_e2e_ms"] = time_calls(lambda: numba_gemm.sgemm(a, b, out=c),
                                            reps=args.reps).median
        except Exception as e:  # noqa: BLE001 - a failing pick is reported
            row["auto_note"] = f"FAILED {type(e).__name__}: {e}"
        if args.sweep:
            best = None
            for name, cfg in candidates(M, N, K):
                st = numba_gemm.get_stage(name).with_config(cfg)
                entry = dict(gpu=gpu, group=group, M=M, N=N, K=K, stage=name, config=str(cfg))
                try:
                    pl = numba_gemm.plan_for(M, N, K, stage=st)
                    run = lambda pl=pl: pl.launch(a, b, c)  # noqa: E731
                    entry["err"] = err_of(run)
                    if not entry["err"] <= st.rtol:
                        raise ValueError(f"rel. error {entry['err']:.3g}")
                    entry["kernel_ms"] = time_kernel(run, reps=reps_for(run), warmup=1).median
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
        print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()},
              flush=True)
    for group, (M, N, K) in shapes:
        run_shape(group, M, N, K)
        _write(args.out / "race.csv", race)
        (args.out / "summary.txt").write_text(summary(race))
    return 0


if __name__ == "__main__":
    sys.exit(main())
