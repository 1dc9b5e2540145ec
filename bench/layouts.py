"""Transposed operands and batches on the GPU, against PyTorch (cuBLAS, TF32 off), same process.

For each operand layout (NN, NT, TN, TT: whether A and B are stored transposed) at M = N = K =
``--size``: the automatic plan's kernel time (CUDA events, ``check.time_kernel``) and the
end-to-end time of ``sgemm(a, b, out=c)`` called back to back (``timing.time_calls``), each
result checked against float64 first; the same for ``torch.matmul`` on the same views. Then a
batch (``--batch`` x ``--bsize``^3): ``sgemm`` on 3-D tensors vs ``torch.bmm``, end-to-end; and
that tensors give tensors, CuPy arrays give CuPy arrays. Writes ``layouts.csv`` and prints it.

    python bench/layouts.py --out DIR [--size 4096] [--batch 64] [--bsize 512]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bsize", type=int, default=512)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", action="store_true",
                   help="also time every tuned candidate (all stages and classes) on the batch")
    args = p.parse_args(argv)

    import torch

    import numba_gemm
    from numba_gemm.check import time_kernel
    from numba_gemm.reference import rel_error
    from numba_gemm.timing import time_calls

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name()
    rows = []
    n = args.size
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", generator=gen, dtype=torch.float32)

    def check(c, a, b):
        ref = a.double() @ b.double()
        return rel_error(c.double().cpu().numpy(), ref.cpu().numpy())

    for layout in ("NN", "NT", "TN", "TT"):
        a = rnd(n, n) if layout[0] == "N" else rnd(n, n).t()
        b = rnd(n, n) if layout[1] == "N" else rnd(n, n).t()
        c = torch.full((n, n), float("nan"), device="cuda")
        numba_gemm.sgemm(a, b, out=c)
        torch.cuda.synchronize()
        err = check(c, a, b)
        plan = numba_gemm.explain(a, b, out=c)
        flops = 2.0 * n**3
        k_ms = time_kernel(lambda a=a, b=b, c=c, plan=plan: plan.launch(a, b, c),
                           reps=args.reps).median
        e_ms = time_calls(lambda a=a, b=b, c=c: numba_gemm.sgemm(a, b, out=c),
                          reps=args.reps).median
        t_k = time_kernel(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), reps=args.reps).median
        t_e = time_calls(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), reps=args.reps).median
        rows.append(dict(case=f"{layout} {n}^3", impl="numba_gemm auto",
                         kernel_ms=k_ms, e2e_ms=e_ms, gflops_e2e=flops / e_ms / 1e6,
                         rel_error=err, plan=f"{plan.stage.name} {plan.variant}"
                         f" {dict(plan.stage.config)}"))
        rows.append(dict(case=f"{layout} {n}^3", impl="torch.matmul", kernel_ms=t_k,
                         e2e_ms=t_e, gflops_e2e=flops / t_e / 1e6, rel_error="", plan=""))
        print(rows[-2], rows[-1], flush=True)
        del a, b, c

    B, s = args.batch, args.bsize
    a, b = rnd(B, s, s), rnd(B, s, s)
    c = numba_gemm.sgemm(a, b)
    torch.cuda.synchronize()
    assert isinstance(c, torch.Tensor) and c.device == a.device, type(c)
    err = check(c, a, b)
    out = torch.empty_like(c)
    plan = numba_gemm.explain(a, b, out=out)
    flops = 2.0 * B * s**3
    k_ms = time_kernel(lambda: plan.launch(a, b, out), reps=args.reps).median
    e_ms = time_calls(lambda: numba_gemm.sgemm(a, b, out=out), reps=args.reps).median
    e_new = time_calls(lambda: numba_gemm.sgemm(a, b), reps=args.reps).median
    t_k = time_kernel(lambda: torch.bmm(a, b, out=out), reps=args.reps).median
    t_e = time_calls(lambda: torch.bmm(a, b, out=out), reps=args.reps).median
    t_new = time_calls(lambda: torch.bmm(a, b), reps=args.reps).median
    case = f"batch {B} x {s}^3"
    rows.append(dict(case=case, impl="numba_gemm auto (out=)", kernel_ms=k_ms, e2e_ms=e_ms,
                     gflops_e2e=flops / e_ms / 1e6, rel_error=err,
                     plan=f"{plan.stage.name} {plan.variant} {dict(plan.stage.config)}"))
    rows.append(dict(case=case, impl="numba_gemm auto (new tensor)", kernel_ms="",
                     e2e_ms=e_new, gflops_e2e=flops / e_new / 1e6, rel_error="", plan=""))
    rows.append(dict(case=case, impl="torch.bmm (out=)", kernel_ms=t_k, e2e_ms=t_e,
                     gflops_e2e=flops / t_e / 1e6, rel_error="", plan=""))
    rows.append(dict(case=case, impl="torch.bmm (new tensor)", kernel_ms="", e2e_ms=t_new,
                     gflops_e2e=flops / t_new / 1e6, rel_error="", plan=""))
    for r in rows[-4:]:
        print(r, flush=True)
    if args.sweep:  # is the automatic pick the fastest tuned candidate for the batch?
        from numba_gemm import STAGES, tuning

        seen = set()
        for cls in tuning.CLASSES:
            for name, res in tuning.winners(cls.name).items():
                for cand in tuning.candidates(res):
                    cfg = dict(cand["config"], SPLITK=1)
                    key = (name, tuple(sorted(cfg.items())))
                    if key in seen:
                        continue
                    seen.add(key)
                    st = next(s for s in STAGES if s.name == name).with_config(cfg)
                    pl = numba_gemm.explain(a, b, stage=st, out=out)
                    ms = time_kernel(lambda pl=pl: pl.launch(a, b, out), reps=args.reps).median
                    rows.append(dict(case=case, impl=f"sweep {name}", kernel_ms=ms, e2e_ms="",
                                     gflops_e2e=flops / ms / 1e6, rel_error="",
                                     plan=str(cfg)))
        best = min((r for r in rows if r["impl"].startswith("sweep")),
                   key=lambda r: r["kernel_ms"])
        print("fastest tuned candidate on the batch:", best, flush=True)

    kinds = ["torch in -> torch out: ok"]
    try:
        import cupy

        ca = cupy.asarray(np.ones((64, 32), np.float32))
        cc = numba_gemm.sgemm(ca, ca.T)
        assert isinstance(cc, cupy.ndarray) and float(cc[0, 0]) == 32.0
        kinds.append("cupy in -> cupy out: ok")
    except ImportError:
        kinds.append("cupy: not installed")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "layouts.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"GPU: {gpu}; " + "; ".join(kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
