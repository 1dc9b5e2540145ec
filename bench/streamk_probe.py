"""Stream-K against the candidates' own grids, shape by shape: the model's price and the time.

For each shape, the ``--top`` cheapest tuned configurations per tiled FP32 stage (warptiling,
double_buffering, multistage) that the plan prices (``plan._priced``: the shape's class, with
the launch layer's K splits), each split and the configuration's stream-K twin (not priced), are
checked against a float64 product and timed (kernel time, CUDA events, median), with cuBLAS FP32
(``torch.mm``, TF32 off) in the same process. Stream-K runs one block per resident slot of the
loaded kernel (``plan.Plan``). Rows: ``streamk.csv`` under ``--out``.

    python bench/streamk_probe.py --out DIR [--shapes 4097x4097x4097,...] [--top 3]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

DEFAULT_SHAPES = ("4096x4096x4096,4097x4097x4097,4095x4095x4095,256x2304x768,128x4096x4096,"
                  "64x4096x4096,256x4096x4096,1024x1024x16384,4096x128x4096,256x50257x768,"
                  "256x6144x4096,4096x50257x768,3000x3000x3000,2048x2048x2048")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shapes", default=DEFAULT_SHAPES)
    p.add_argument("--top", type=int, default=3)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    import numba_gemm
    from numba_gemm import device, plan
    from numba_gemm import precompile as pc
    from numba_gemm.bench.sizes import parse_sizes
    from numba_gemm.check import time_kernel
    from numba_gemm.kernels._tunable import STREAM_K

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = device.info(device.current_id())
    stages = ("warptiling", "double_buffering", "multistage")

    def todo_of(M, N, K):
        # [(predicted ms or None, config, class, slots, stage, variant)] for this shape
        aligned = not (K % 4 or N % 4)
        g = plan.Geometry.plain(M, N, K)
        out = []
        for name in stages:
            priced = plan._priced(name, g, aligned, dev)
            bases = list(dict.fromkeys(
                tuple(sorted((k, v) for k, v in cfg.items() if k != "SPLITK"))
                for _, cfg, _ in priced))[: args.top]
            var = "vector" if aligned else "scalar"
            for ms, cfg, cls in priced:  # every priced split of the top configurations
                if tuple(sorted((k, v) for k, v in cfg.items() if k != "SPLITK")) in bases:
                    out.append((ms, cfg, cls, name, var))
            for base in bases:  # and their stream-K twins (not priced: the plan never picks it)
                cls = next(c for _, cfg, c in priced if tuple(
                    sorted((k, v) for k, v in cfg.items() if k != "SPLITK")) == base)
                out.append((None, dict(base, SPLITK=STREAM_K), cls, name, var))
        return out

    shapes = parse_sizes(args.shapes)
    todo = {s: todo_of(*s) for s in shapes}
    jobs = {}
    for items in todo.values():
        for _, cfg, _, name, var in items:
            job = pc.Job(name, tuple(sorted(cfg.items())), var, dev.cc)
            jobs[str(job)] = job
    t0 = time.monotonic()
    res = pc.run(list(jobs.values()), args.jobs)
    print(f"precompiled {len(res)} kernels in {time.monotonic() - t0:.0f} s", flush=True)

    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []

    def probe(M, N, K):
        a = torch.randn(M, K, device="cuda", generator=gen)
        b = torch.randn(K, N, device="cuda", generator=gen)
        c = torch.empty(M, N, device="cuda")
        ref = a.double() @ b.double()
        norm = torch.linalg.norm(ref).item()
        cublas = time_kernel(lambda: torch.mm(a, b, out=c), reps=args.reps).median
        auto = numba_gemm.explain(a, b, out=c)
        g = plan.Geometry.plain(M, N, K)
        for ms, cfg, cls, name, var in todo[M, N, K]:
            row = dict(gpu=dev.name, M=M, N=N, K=K, stage=name, cls=cls, config=str(cfg),
                       splitk=cfg["SPLITK"], predicted_ms=ms, cublas_ms=cublas,
                       auto=f"{auto.stage.name} {dict(auto.stage.config)}",
                       auto_split=auto.split_k)
            try:
                st = numba_gemm.get_stage(name).with_config(cfg)
                pl = plan.Plan(g, st, var, dev, ms, "probe")

                def run(pl=pl):
                    pl.launch(a, b, c)
                c.fill_(float("nan"))
                run()
                row["err"] = (torch.linalg.norm(c.double() - ref) / norm).item()
                if not row["err"] <= 1e-5:
                    raise ValueError(f"rel. error {row['err']:.3g}")
                row["grid"] = str(pl.grid)
                row["kernel_ms"] = time_kernel(run, reps=args.reps).median
                row["pct_cublas"] = 100 * cublas / row["kernel_ms"]
            except Exception as e:  # noqa: BLE001 - reported in the row
                row["note"] = f"FAILED {type(e).__name__}: {e}"
            rows.append(row)
            print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()
                   if k not in ("gpu", "auto")}, flush=True)

    for M, N, K in shapes:
        probe(M, N, K)
        with open(args.out / "streamk.csv", "w", newline="") as f:
            keys = list(dict.fromkeys(k for r in rows for k in r))
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
