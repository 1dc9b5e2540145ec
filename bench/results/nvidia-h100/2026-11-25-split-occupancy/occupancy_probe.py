"""Split-K kernels and their occupancy: one double_buffering tile (64 x 128 x 16, 4 warps, 8 x 4
thread tiles) at several (MINB, SPLITK), against cuBLAS FP32 in the same process (issue 9).

Offline, ptxas gives this tile 164 registers without split-K (3 blocks per SM) but 199 with it at
MINB 1 or 2 (2 blocks per SM); MINB 0 or 3 keeps 167. Printed per job: the loaded kernel's
registers and blocks per SM, kernel time (``check.time_kernel``, median of 20, two rounds), the
cuBLAS ratio and the relative error against float64. ``--nofix``: the split-K blocks write their
partial tiles and arrive at the counters but sum nothing (a lower bound on the kernel without
the fixup's sum; its results are wrong, the error says so). Use a cache directory of its own.
"""

from __future__ import annotations

import ctypes
import sys

import torch

import numba_gemm
from numba_gemm import _driver
from numba_gemm.check import time_kernel
from numba_gemm.kernels import k09_double_buffering as db

TILE = dict(BK=16, BM=64, BN=128, TM=8, TN=4, WM=32, WN=64, WNITER=2)
JOBS = (
    ((256, 256, 65536), ((2, 32), (3, 32), (0, 32), (2, 48), (3, 48), (3, 64))),
    ((64, 4096, 4096), ((2, 8), (3, 8))),
    ((128, 4096, 4096), ((2, 4), (3, 4))),
    ((256, 4096, 4096), ((1, 2), (3, 2))),
    ((4096, 128, 4096), ((1, 4), (3, 4))),
    ((256, 6144, 4096), ((1, 4), (3, 4))),
)
NOFIX_JOBS = (((256, 256, 65536), ((2, 32), (3, 32), (3, 48))),)


def registers(fn: int) -> int:
    n = ctypes.c_int()
    _driver.check(_driver.lib().cuFuncGetAttribute(ctypes.byref(n), 4, ctypes.c_void_p(fn)),
                  "cuFuncGetAttribute(NUM_REGS)")
    return n.value


def no_sum() -> None:
    from numba import cuda

    from numba_gemm.kernels import _splitk
    from numba_gemm.kernels._common import device_jit

    def make_fixup(BM, BN, NT, SPLITK):
        @device_jit
        def fixup(Wg, L, Cg, row0, col0, M, N, alpha, beta, vec):
            _splitk.arrive(L, cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x, SPLITK)

        return fixup

    _splitk.make_fixup = make_fixup


def main() -> None:
    nofix = "--nofix" in sys.argv
    jobs = NOFIX_JOBS if nofix else JOBS
    if nofix:
        no_sum()
    else:
        from numba_gemm import precompile as pc

        cc = torch.cuda.get_device_capability()
        todo = [pc.Job("double_buffering", tuple(sorted(dict(TILE, MINB=m, SPLITK=s).items())),
                       "vector", cc) for _, opts in jobs for m, s in opts]
        pc.run(todo, 16)
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    tag = "nofix " if nofix else ""
    for _ in range(2):
        for (M, N, K), opts in jobs:
            a = torch.randn(M, K, device="cuda", generator=gen)
            b = torch.randn(K, N, device="cuda", generator=gen)
            c = torch.empty(M, N, device="cuda")
            ref = a.double() @ b.double()
            cub = time_kernel(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), reps=20).median
            for m, s in opts:
                p = numba_gemm.plan_for(M, N, K, stage=db.make_stage(dict(TILE, MINB=m, SPLITK=s)))
                k = p.kernels()
                c.fill_(float("nan"))
                p.launch(a, b, c)
                err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
                ms = time_kernel(lambda p=p, a=a, b=b, c=c: p.launch(a, b, c), reps=20).median
                print(f"{tag}{M}x{N}x{K} MINB={m} S={s} regs={registers(k.fn)} "
                      f"bps={k.blocks_per_sm(p.block[0])} grid={p.grid} {ms:.4f} ms "
                      f"cublas {cub:.4f} pct {100 * cub / ms:.1f} err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
