"""Aligned staging against the scalar-GMEM kernel, on the GPU (``numba_gemm.staging``).

Usage: ``python bench/staging_probe.py --out DIR [--shapes 4095x4095x4095,...]``. For each
unaligned shape, in one process, kernel time (CUDA events behind a hold kernel, median;
``check.time_kernel``) of: cuBLAS FP32 (``torch.mm``, TF32 off), the automatic plan with
staging switched off (the scalar-GMEM kernel), the staged plan (copies + the aligned plan of the
padded shape), that aligned plan alone on padded operands, and one ``copy_padded`` of A and of C;
the copy kernel's rate (bytes read + written per ms) calibrates ``staging.BYTES_PER_MS``. Writes
``staging.csv`` and prints a table. Relative errors against float64 are checked (rtol 1e-4).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

import numba_gemm
from numba_gemm import plan as plan_mod
from numba_gemm import staging
from numba_gemm.check import time_kernel
from numba_gemm.devarray import operand
from numba_gemm.kernels import _pad

SHAPES = "4095x4095x4095,4097x4097x4097,4097x1023x4095,3000x3001x3000,2047x2047x2047"


def _plan(M, N, K, staged: bool):
    """The automatic plan of an unaligned product, with staging allowed or not."""
    keep = staging.MAX_BYTES
    plan_mod._plans.clear()
    try:
        if not staged:
            staging.MAX_BYTES = 0
        return numba_gemm.plan_for(M, N, K, aligned=False)
    finally:
        staging.MAX_BYTES = keep
        plan_mod._plans.clear()


def probe(M: int, N: int, K: int, gpu: str, gen, reps: int) -> dict:
    """One shape's row (module docstring)."""
    a = torch.randn(M, K, device="cuda", generator=gen)
    b = torch.randn(K, N, device="cuda", generator=gen)
    c = torch.empty(M, N, device="cuda")
    ref = a.double() @ b.double()

    def err():
        return (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()

    row = dict(gpu=gpu, M=M, N=N, K=K)
    row["cublas_ms"] = time_kernel(lambda: torch.mm(a, b, out=c), reps=reps).median
    scalar, staged = _plan(M, N, K, False), _plan(M, N, K, True)
    row["chosen"] = type(staged).__name__
    if not isinstance(staged, staging.StagedPlan):  # not chosen: time it anyway
        st = staging.staging_for(M, N, K)
        staged = staging.StagedPlan(M, N, K, numba_gemm.plan_for(M, st.N4, st.K4),
                                    st, scalar.predicted_ms or float("nan"))
    for name, p in (("scalar", scalar), ("staged", staged)):
        row[f"{name}_plan"] = (f"{p.stage.name} {dict(p.stage.config)} "
                               f"{type(p).__name__} split_k={p.split_k}")
        row[f"{name}_predicted_ms"] = p.predicted_ms
        c.fill_(float("nan"))
        p.launch(a, b, c)
        row[f"{name}_err"] = err()
        assert row[f"{name}_err"] < 1e-4, (name, row)
        row[f"{name}_ms"] = time_kernel(lambda p=p: p.launch(a, b, c), reps=reps).median
    s = staged.staging
    a4 = torch.zeros(M, s.K4, device="cuda")
    b4 = torch.zeros(s.K4, s.N4, device="cuda")
    c4 = torch.empty(M, s.N4, device="cuda")
    row["inner_ms"] = time_kernel(lambda: staged.inner.launch(a4, b4, c4),
                                  reps=reps).median
    staged.kernels()
    copy = staged._copy
    for what, dst, src in (("copy_a", a4, a), ("copy_c", c, c4)):
        d, s_ = operand(dst), operand(src)
        row[f"{what}_ms"] = time_kernel(lambda d=d, s_=s_: copy.launch(
            staging._grid(d), (_pad.BLOCK, 1, 1), 0,
            (staging._as3(d), staging._as3(s_)), ()), reps=reps).median
        nbytes = 4 * (dst.numel() + min(dst.numel(), src.numel()))
        row[f"{what}_bytes_per_ms"] = nbytes / row[f"{what}_ms"]
    row["copy_ms_predicted"] = staged.copy_ms
    row["pct_cublas_scalar"] = 100 * row["cublas_ms"] / row["scalar_ms"]
    row["pct_cublas_staged"] = 100 * row["cublas_ms"] / row["staged_ms"]
    print(f"{M}x{N}x{K}: cuBLAS {row['cublas_ms']:.4f} ms | scalar {row['scalar_ms']:.4f} "
          f"({row['pct_cublas_scalar']:.1f} %, pred {row['scalar_predicted_ms']:.4g}) | "
          f"staged {row['staged_ms']:.4f} ({row['pct_cublas_staged']:.1f} %, pred "
          f"{row['staged_predicted_ms']:.4g}) | inner {row.get('inner_ms', float('nan')):.4f}"
          f" | copy A {row.get('copy_a_ms', float('nan')):.4f} ms "
          f"{row.get('copy_a_bytes_per_ms', float('nan')) / 1e9:.2f} TB/s, copy C "
          f"{row.get('copy_c_ms', float('nan')):.4f} ms", flush=True)
    print(f"    scalar: {row['scalar_plan']}\n    staged: {row['staged_plan']}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for text in args.shapes.split(","):
        M, N, K = (int(v) for v in text.lower().split("x"))
        rows.append(probe(M, N, K, gpu, gen, args.reps))
    args.out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(args.out / "staging.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
