"""Stage 9, double_buffering: warptiling with the next K tile loaded during the current one's math.

From ``warptiling`` (same tiles, same warp/thread map, same device functions): SMEM holds two
copies of the A and B tiles. While the warps run the BK outer-product steps on copy ``buf``, each
thread's loads of the *next* K tile are already in flight into registers (``ra``, ``rb``); after
the math they are stored into copy ``1 - buf``. That copy was last read in the previous step,
which every thread finished before the previous barrier, so one ``syncthreads`` per K step is
enough (``warptiling`` needs two), and the GMEM latency hides behind BK * 64 FFMAs per thread.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernels 11-12 (double buffering); NVIDIA CUTLASS, "Efficient GEMM
in CUDA" (software pipelining: GMEM -> registers -> SMEM double buffer); Y. Li, "How to optimize
SGEMM on NVIDIA GPUs" (2022).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from numba import cuda, float32

from ..registry import Stage
from ..vecmem import SMEM_ALIGN
from . import _tunable as tun
from . import k08_warptiling as wt
from ._common import kernel_jit

#: SMEM copies of each tile.
SMEM_COPIES = 2

#: Default: warptiling's. (The fastest configuration measured at 4096^3 on an H200, in
#: numba_gemm/tuning/sm_90.json, has 8x16 accumulators per thread and its scalar-GMEM variant
#: spills: fine where tuning picks it, not as the untuned default.)
DEFAULT_CONFIG = dict(wt.DEFAULT_CONFIG)


def check_config(cfg: Mapping[str, int]) -> None:
    """``warptiling``'s constraints with two SMEM copies of each tile (48 KB static SMEM)."""
    tun.check_config(cfg, smem_copies=SMEM_COPIES)


SPACE = tun.make_space(check_config)


@functools.cache
def _make_kernel(items: tuple, vec: bool):
    cfg = dict(items)
    d, thread_origin, load_tiles, store_tiles, mma_tile, store_results = wt.make_parts(cfg)
    BM, BN, BK, TM, TN = (cfg[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    WMITER, WNITER = d["WMITER"], cfg["WNITER"]
    AS_PITCH = d["AS_PITCH"]
    A_REGS, B_REGS = 4 * d["A_LOADS"], 4 * d["B_LOADS"]
    RES_M, RES_N = WMITER * TM, WNITER * TN

    @kernel_jit(launch_bounds=tun.launch_bounds(cfg))
    def sgemm_double_buffering(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        k_begin, k_end = tun.split_k_range(K, BK)  # all of K unless SPLITK > 1
        c_row0 = cuda.blockIdx.z * M  # this slice's rows of C (the split-K workspace)
        As = cuda.shared.array((SMEM_COPIES, BK, AS_PITCH), float32, alignment=SMEM_ALIGN)
        Bs = cuda.shared.array((SMEM_COPIES, BK, BN), float32, alignment=SMEM_ALIGN)
        tid = cuda.threadIdx.x
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        wm0, wn0 = thread_origin(tid)
        a_row, a_col = tid // (BK // 4), (tid % (BK // 4)) * 4
        b_row, b_col = tid // (BN // 4), (tid % (BN // 4)) * 4

        ra = cuda.local.array(A_REGS, float32)
        rb = cuda.local.array(B_REGS, float32)
        reg_m = cuda.local.array(RES_M, float32)
        reg_n = cuda.local.array(RES_N, float32)
        thread_results = cuda.local.array((RES_M, RES_N), float32)
        for m in range(RES_M):
            for n in range(RES_N):
                thread_results[m, n] = float32(0.0)

        # --- prologue: first K tile GMEM -> registers -> SMEM copy 0
        load_tiles(A, B, ra, rb, k_begin, a_row, a_col, b_row, b_col, row0, col0, M, N, k_end,
                   vec)
        store_tiles(As[0], Bs[0], ra, rb, a_row, a_col, b_row, b_col)
        cuda.syncthreads()  # copy 0 is complete before anyone reads it

        buf = 0
        for k0 in range(k_begin, k_end, BK):
            # --- GMEM -> registers for the next tile: in flight during the math below.
            # Unconditional (past k_end it loads zeros, and the store below is harmless): a load
            # under "if there is a next tile" got sunk by the compiler into the store's identical
            # "if", after the math, exposing its latency (-25% at 4096^3; bench/NOTES.md).
            load_tiles(A, B, ra, rb, k0 + BK, a_row, a_col, b_row, b_col, row0, col0, M, N,
                       k_end, vec)
            # --- SMEM (copy buf) -> registers, FMA
            mma_tile(As[buf], Bs[buf], reg_m, reg_n, thread_results, wm0, wn0)
            # --- registers -> SMEM copy 1 - buf (last read in the previous step, before the
            # previous barrier)
            store_tiles(As[1 - buf], Bs[1 - buf], ra, rb, a_row, a_col, b_row, b_col)
            cuda.syncthreads()  # copy 1 - buf is complete, and everyone is done with copy buf
            buf = 1 - buf

        # --- epilogue: write C (rows c_row0 + [0, M))
        store_results(C, thread_results, c_row0 + row0 + wm0, col0 + wn0, alpha, beta,
                      c_row0 + M, N, vec)

    return sgemm_double_buffering


def make_stage(config: Mapping[str, int]) -> Stage:
    """The double-buffering stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "double_buffering", "9: double buffering", config, _make_kernel, make_stage, SPACE,
        check_config,
    )


STAGE = make_stage(DEFAULT_CONFIG)
