"""The split-K fixup's items per round (issue 9): the suite's split-K picks of the tiled stages
with ``_splitk.items_per_round`` forced to ``--ipr N`` (``0``: the package's own rule), against
cuBLAS FP32 in the same process.

Each ``--ipr`` value must run in its own process with its own kernel cache directory
(``NUMBA_GEMM_CACHE_DIR``): the cache key does not see the patch. Printed per job: the loaded
kernel's registers and blocks per SM, kernel time (``check.time_kernel``, median of 20, two
rounds), the cuBLAS ratio and the relative error against float64.
"""

from __future__ import annotations

import argparse
import ctypes

import torch

import numba_gemm
from numba_gemm import _driver
from numba_gemm.check import time_kernel
from numba_gemm.kernels import _splitk
from numba_gemm.kernels import k09_double_buffering as db

T64 = dict(BK=16, BM=64, BN=128, TM=8, TN=4, WM=32, WN=64, WNITER=2)
T128 = dict(BK=16, BM=128, BN=128, TM=8, TN=4, WM=64, WN=64, WNITER=2)
JOBS = (
    ((256, 256, 65536), dict(T64, MINB=2, SPLITK=32)),
    ((64, 4096, 4096), dict(T64, MINB=2, SPLITK=8)),
    ((128, 4096, 4096), dict(T64, MINB=2, SPLITK=4)),
    ((256, 4096, 4096), dict(T64, MINB=1, SPLITK=2)),
    ((4096, 128, 4096), dict(T64, MINB=1, SPLITK=4)),
    ((1024, 1024, 16384), dict(T128, MINB=1, SPLITK=4)),
    ((512, 512, 512), dict(T64, MINB=1, SPLITK=4)),
)


def registers(fn: int) -> int:
    n = ctypes.c_int()
    _driver.check(_driver.lib().cuFuncGetAttribute(ctypes.byref(n), 4, ctypes.c_void_p(fn)),
                  "cuFuncGetAttribute(NUM_REGS)")
    return n.value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ipr", type=int, default=0)
    p.add_argument("--compile-only", action="store_true",
                   help="only compile and load the kernels (into the cache), time nothing")
    args = p.parse_args()
    ipr = args.ipr
    if ipr:
        _splitk.items_per_round = lambda BM, BN, NT, depth: ipr
    if args.compile_only:
        for (M, N, K), cfg in JOBS:
            numba_gemm.plan_for(M, N, K, stage=db.make_stage(cfg)).kernels()
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(2):
        for (M, N, K), cfg in JOBS:
            a = torch.randn(M, K, device="cuda", generator=gen)
            b = torch.randn(K, N, device="cuda", generator=gen)
            c = torch.empty(M, N, device="cuda")
            ref = a.double() @ b.double()
            cub = time_kernel(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), reps=20).median
            pl = numba_gemm.plan_for(M, N, K, stage=db.make_stage(cfg))
            k = pl.kernels()
            c.fill_(float("nan"))
            pl.launch(a, b, c)
            err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
            ms = time_kernel(lambda pl=pl, a=a, b=b, c=c: pl.launch(a, b, c), reps=20).median
            print(f"ipr={ipr} {M}x{N}x{K} MINB={cfg['MINB']} S={cfg['SPLITK']} "
                  f"regs={registers(k.fn)} bps={k.blocks_per_sm(pl.block[0])} {ms:.4f} ms "
                  f"cublas {cub:.4f} pct {100 * cub / ms:.1f} err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
