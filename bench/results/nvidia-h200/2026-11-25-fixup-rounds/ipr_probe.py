"""The H200's deep-K pick (multistage 128 x 256 x 16, 8 warps, 64 slices) with the split-K sum's
items per round forced to each of ``--ipr`` (one process each, its own kernel cache), against
cuBLAS FP32 in the same process: registers and blocks per SM as loaded, kernel time
(``check.time_kernel``, median of 20), the cuBLAS ratio and the error (issue 9)."""

from __future__ import annotations

import ctypes
import sys

import torch

import numba_gemm
from numba_gemm import _driver
from numba_gemm.check import time_kernel
from numba_gemm.kernels import _splitk

CFG = dict(BK=16, BM=128, BN=256, MINB=0, NBUF=2, SPLITK=64, TM=8, TN=4, WM=64, WN=64, WNITER=2)
M, N, K = 256, 256, 65536


def main() -> None:
    ipr = int(sys.argv[1])
    if ipr:
        _splitk.items_per_round = lambda BM, BN, NT, SPLITK, wide: ipr if wide else 1
    st = numba_gemm.get_stage("multistage").with_config(CFG)
    pl = numba_gemm.plan_for(M, N, K, stage=st)
    k = pl.kernels()
    n = ctypes.c_int()
    _driver.check(_driver.lib().cuFuncGetAttribute(ctypes.byref(n), 4, ctypes.c_void_p(k.fn)),
                  "cuFuncGetAttribute")
    if "--compile-only" in sys.argv:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=gen)
    b = torch.randn(K, N, device="cuda", generator=gen)
    c = torch.full((M, N), float("nan"), device="cuda")
    ref = a.double() @ b.double()
    pl.launch(a, b, c)
    err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
    for _ in range(2):
        cub = time_kernel(lambda: torch.mm(a, b, out=c), reps=20).median
        ms = time_kernel(lambda: pl.launch(a, b, c), reps=20).median
        print(f"ipr={ipr or 'rule'} regs={n.value} bps={k.blocks_per_sm(pl.block[0])} "
              f"{ms:.4f} ms cublas {cub:.4f} pct {100 * cub / ms:.1f} err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
