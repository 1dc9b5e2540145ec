"""Stage 9, double_buffering: warptiling with the next K tile loaded during the current one's math.

From ``warptiling`` (same tiles, same warp/thread map, same device functions): SMEM holds two
copies of the A and B tiles. While the warps run the BK outer-product steps on copy ``buf``, each
thread's loads of the *next* K tile are already in flight into registers (``ra``, ``rb``); after
the math they are stored into copy ``1 - buf``. That copy was last read in the previous step,
which every thread finished before the previous barrier, so one ``syncthreads`` per K step is
enough (``warptiling`` needs two), and the GMEM latency hides behind BK * 64 FFMAs per thread.

Shapes and layouts: as ``warptiling`` (batches of strided matrices, layouts NN/NT/TN/TT); any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernels 11-12 (double buffering); NVIDIA CUTLASS, "Efficient GEMM
in CUDA" (software pipelining: GMEM -> registers -> SMEM double buffer); Y. Li, "How to optimize
SGEMM on NVIDIA GPUs" (2022).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float32
from ..ptx.vecmem import SMEM_ALIGN
from . import _tunable as tun
from . import k08_warptiling as wt
from ._common import device_jit
from .stage import Stage

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
def _make_kernel(items: tuple, vec: int, layout: str = "NN", epilogue=None, grouped=False):
    cfg = dict(items)
    pt = wt.make_parts(cfg, layout)
    a_view, b_view, thread_origin, a_coords, b_coords = (
        pt.a_view,
        pt.b_view,
        pt.thread_origin,
        pt.a_coords,
        pt.b_coords,
    )
    load_tiles, store_tiles, mma_tile, store_with = (
        pt.load_tiles,
        pt.store_tiles,
        pt.mma_tile,
        pt.store_with,
    )
    BM, BN, BK, TM, TN, SPLITK = (cfg[k] for k in ("BM", "BN", "BK", "TM", "TN", "SPLITK"))
    AS_PITCH, BS_PITCH = pt.d["AS_PITCH"], pt.d["BS_PITCH"]
    A_REGS, B_REGS = 4 * pt.d["A_LOADS"], 4 * pt.d["B_LOADS"]
    RES_M, RES_N = pt.d["WMITER"] * TM, cfg["WNITER"] * TN
    work = tun.make_work(BM, BN, BK, SPLITK, grouped)
    epilogue_store = tun.make_epilogue(store_with, BM, BN, pt.d["NUM_THREADS"], SPLITK, epilogue)
    CVEC = vec == 1  # 128-bit stores of C (not in the VECTOR_LOADS variant)

    @device_jit
    def sgemm_double_buffering_unit(u, A, B, C, W, L, alpha, beta, E):
        # The kernel's body for its u-th unit of work: one C tile's K range (one per block,
        # more with stream-K: tun.unit_kernel). A (batch, M, K), B (batch, K, N), C (batch, M, N):
        # strided batches; W, L: split-K's or stream-K's workspace and tile counters.
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        As = cuda.shared.array((SMEM_COPIES, BK, AS_PITCH), float32, alignment=SMEM_ALIGN)
        Bs = cuda.shared.array((SMEM_COPIES, BK, BS_PITCH), float32, alignment=SMEM_ALIGN)
        tid = cuda.threadIdx.x
        wm0, wn0 = thread_origin(tid)
        ap, aq = a_coords(tid)
        bp, bq = b_coords(tid)

        ra = cuda.local.array(A_REGS, float32)
        rb = cuda.local.array(B_REGS, float32)
        reg_m = cuda.local.array(RES_M, float32)
        reg_n = cuda.local.array(RES_N, float32)
        thread_results = cuda.local.array((RES_M, RES_N), float32)
        job = work(u, M, N, K, L)  # (batch, tile origin, K range; how the epilogue ends it)
        bz, row0, col0, k_begin, k_end, M = job[0], job[1], job[2], job[3], job[4], job[9]
        Ag, Bg = a_view(A, bz), b_view(B, bz)  # 2-D storage views (C's: in the epilogue)
        for m in range(RES_M):
            for n in range(RES_N):
                thread_results[m, n] = float32(0.0)

        # --- prologue: first K tile GMEM -> registers -> SMEM copy 0 (a unit before this
        # one last read copy 0 before its last barrier)
        load_tiles(Ag, Bg, ra, rb, k_begin, ap, aq, bp, bq, row0, col0, M, N, k_end, vec)
        store_tiles(As[0], Bs[0], ra, rb, ap, aq, bp, bq)
        cuda.syncthreads()  # copy 0 is complete before anyone reads it

        buf = 0
        for k0 in range(k_begin, k_end, BK):
            # --- GMEM -> registers for the next tile: in flight during the math below.
            # Unconditional (past k_end it loads zeros, and the store below is harmless): a
            # load under "if there is a next tile" got sunk by the compiler into the store's
            # identical "if", after the math, exposing its latency (-25% at 4096^3;
            # docs/design.md).
            load_tiles(Ag, Bg, ra, rb, k0 + BK, ap, aq, bp, bq, row0, col0, M, N, k_end, vec)
            # --- SMEM (copy buf) -> registers, FMA
            mma_tile(As[buf], Bs[buf], reg_m, reg_n, thread_results, wm0, wn0)
            # --- registers -> SMEM copy 1 - buf (last read in the previous step, before the
            # previous barrier)
            store_tiles(As[1 - buf], Bs[1 - buf], ra, rb, ap, aq, bp, bq)
            cuda.syncthreads()  # copy 1 - buf is complete, and everyone is done with copy buf
            buf = 1 - buf

        # --- epilogue: write C (split-K / stream-K: the workspace; the tile's last sums)
        epilogue_store(
            C, W, L, job, thread_results, row0 + wm0, col0 + wn0, M, N, alpha, beta, CVEC, E
        )

    name = "sgemm_double_buffering_grouped" if grouped else "sgemm_double_buffering"
    return tun.unit_kernel(name, sgemm_double_buffering_unit, cfg, epilogue, grouped)


def make_stage(config: Mapping[str, int]) -> Stage:
    """The double-buffering stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "double_buffering",
        "9: double buffering",
        config,
        _make_kernel,
        make_stage,
        SPACE,
        check_config,
    )


STAGE = make_stage(DEFAULT_CONFIG)
