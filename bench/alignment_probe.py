"""What an unaligned product loses, by kernel variant, on the GPU (issue 9).

Usage: ``python bench/alignment_probe.py --out DIR [--label L]``. One double_buffering
configuration (the H100's pick at 256 x 50257 x 768) on the vocabulary projection at its odd N
(50257) and at the aligned N = 50260: kernel time (``check.time_kernel``, median) of the
``vector`` and ``scalar`` variants where the shape allows each, against cuBLAS FP32 (``torch.mm``,
TF32 off) in the same process; relative error against float64 checked (rtol 1e-5). Writes
``DIR/alignment.csv``.

Run also on copies of the package whose ``k09_double_buffering`` passes ``False`` for ``vec`` to
its epilogue only (vector loads, scalar C stores) or to its two ``load_tiles`` calls only
(scalar loads, vector C stores), each with its own ``NUMBA_GEMM_CACHE_DIR`` and ``--label``:
their "vector" rows split the scalar variant's loss between the GMEM loads and the C stores
(bench/NOTES.md, sixth session of issue 9).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

import numba_gemm
from numba_gemm.check import time_kernel
from numba_gemm.kernels import k09_double_buffering as db

CONFIG = dict(BK=8, BM=128, BN=256, MINB=0, SPLITK=1, TM=8, TN=4, WM=64, WN=64, WNITER=2)
SHAPES = ((256, 50260, 768), (256, 50257, 768), (4096, 50260, 768), (4096, 50257, 768))


def probe(M: int, N: int, K: int, st, gen, reps: int, label: str) -> list[dict]:
    """One shape's rows: each variant the shape allows, against cuBLAS (module docstring)."""
    a = torch.randn(M, K, device="cuda", generator=gen)
    b = torch.randn(K, N, device="cuda", generator=gen)
    c = torch.empty(M, N, device="cuda")
    ref = a.double() @ b.double()
    cublas = time_kernel(lambda: torch.mm(a, b, out=c), reps=reps).median
    rows = []
    for aligned in (True, False):
        p = numba_gemm.plan_for(M, N, K, stage=st, aligned=aligned)
        if aligned and p.variant != "vector":
            continue  # odd N: no vector variant
        c.fill_(float("nan"))
        p.launch(a, b, c)
        err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
        assert err < 1e-5, (M, N, K, p.variant, err)
        ms = time_kernel(lambda p=p: p.launch(a, b, c), reps=reps).median
        rows.append(dict(gpu=torch.cuda.get_device_name(), label=label, M=M, N=N, K=K,
                         variant=p.variant, ms=ms, cublas_ms=cublas,
                         pct_cublas=100 * cublas / ms, err=err))
        print(f"{label:>12} {M}x{N}x{K} {p.variant:>6}: {ms:.4f} ms "
              f"({100 * cublas / ms:.1f} % of cuBLAS {cublas:.4f})", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--label", default="as-is")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    st = db.make_stage(CONFIG)
    rows = []
    for M, N, K in SHAPES:
        rows += probe(M, N, K, st, gen, args.reps, args.label)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "alignment.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
