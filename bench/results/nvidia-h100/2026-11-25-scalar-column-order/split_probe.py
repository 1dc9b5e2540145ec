"""Time one double_buffering configuration at several SPLITK values, against cuBLAS FP32 in the
same process (issue 9, deep K: do splits other than the plan's powers of two fill the GPU better?).

Run from the repository root with the package importable; prints one line per (shape, split):
kernel time (``check.time_kernel``, median of 20), cuBLAS's, the ratio and the relative error
against float64. Output of the committed run: ``splits.txt``.
"""

from __future__ import annotations

import torch

import numba_gemm
from numba_gemm.check import time_kernel
from numba_gemm.kernels import k09_double_buffering as db

JOBS = (
    ((256, 256, 65536),
     dict(BK=16, BM=64, BN=128, MINB=2, TM=8, TN=4, WM=32, WN=64, WNITER=2), (32, 40, 48, 24)),
    ((1024, 1024, 16384),
     dict(BK=16, BM=128, BN=128, MINB=1, TM=8, TN=4, WM=64, WN=64, WNITER=2), (4, 6, 8)),
)


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(2):
        for (M, N, K), cfg, splits in JOBS:
            a = torch.randn(M, K, device="cuda", generator=gen)
            b = torch.randn(K, N, device="cuda", generator=gen)
            c = torch.empty(M, N, device="cuda")
            ref = a.double() @ b.double()
            cub = time_kernel(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), reps=20).median
            for s in splits:
                p = numba_gemm.plan_for(M, N, K, stage=db.make_stage(dict(cfg, SPLITK=s)))
                c.fill_(float("nan"))
                p.launch(a, b, c)
                err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
                ms = time_kernel(lambda p=p, a=a, b=b, c=c: p.launch(a, b, c), reps=20).median
                print(f"{M}x{N}x{K} S={s} split_k={p.split_k} {ms:.4f} ms cublas {cub:.4f} "
                      f"pct {100 * cub / ms:.1f} err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
