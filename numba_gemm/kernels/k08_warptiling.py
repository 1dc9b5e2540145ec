"""Stage 8, warptiling: block tile -> warp tile -> thread tile, with tunable tile sizes.

From ``bank_conflict_free``: a level is added between the block and the thread. The block tile
(BM x BN) is split among warps as WM x WN warp tiles; a warp walks its tile as WMITER x WNITER
sub-tiles of (WSUBM x WSUBN), and in each sub-tile its 32 lanes hold a (WSUBM/TM) x (WSUBN/TN)
grid of TM x TN thread tiles. So:

- a warp's SMEM reads per k cover only WM + WN floats of the block tile (its own rows/columns),
  each read as float4 by the lanes that need it: with TM = TN = 4, the lanes of one sub-tile read
  contiguous 16-byte chunks (one wavefront per LDS.128, conflict-free, the rest broadcast);
- each thread still holds WMITER*TM x WNITER*TN accumulators (8x8 by default) and reuses every
  fragment register WNITER*TN (WMITER*TM) times;
- the tile sizes are parameters: ``make_stage(config)`` builds the stage for any configuration
  that passes ``check_config``; ``python -m numba_gemm.tune`` sweeps ``SPACE``.

A's tile is stored transposed (``As[k, m]``) with a pitch of BM + 4 floats (rows stay 16-byte
aligned; stores are at most 2-way conflicted, see bench/NOTES.md). GMEM accesses are 128-bit when
A, B and C have 16-byte aligned rows, scalar otherwise (``Stage.scalar_kernel``); rows/columns past
M/N are clamped (never stored), elements past K zero-filled, as in stage 6.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernel 10 (warptiling), after NVIDIA CUTLASS's hierarchical GEMM
("CUTLASS: Fast Linear Algebra in CUDA C++", NVIDIA blog, 2017: thread-block, warp and thread
tiles).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from numba import cuda, float32

from ..registry import Stage
from ..vecmem import SMEM_ALIGN, load4, store4
from . import _tunable as tun
from ._common import device_jit, kernel_jit, load_a4, load_b4, store_c4, unroll

#: Tile configuration used when no tuning result is available (one 128x128 block of 8 warps,
#: each warp 64x32 as 2x2 sub-tiles of 32x16, each thread 2x2 tiles of 4x4). See ``_tunable``
#: for the keys.
DEFAULT_CONFIG = dict(BM=128, BN=128, BK=16, WM=64, WN=32, WNITER=2, TM=4, TN=4, MINB=0, SPLITK=1)


def check_config(cfg: Mapping[str, int]) -> None:
    """Raise ``ValueError`` if ``cfg`` is not a valid warptiling configuration (48 KB static SMEM,
    one copy of each tile)."""
    tun.check_config(cfg)


SPACE = tun.make_space(check_config)


def make_parts(cfg: Mapping[str, int]):
    """Device functions shared by this stage and ``double_buffering`` for one configuration.

    Returns ``(d, thread_origin, load_tiles, store_tiles, mma_tile, store_results)`` where ``d``
    holds the derived constants and the functions are force-inlined device functions with every
    tile size a compile-time constant:

    - ``thread_origin(tid) -> (wm0, wn0)``: block -> warp -> lane, the first row and column of
      this thread's tiles inside the block tile;
    - ``load_tiles(A, B, ra, rb, k0, a_row, a_col, b_row, b_col, row0, col0, M, N, K, vec)``:
      GMEM -> registers ``ra``/``rb`` (A_LOADS and B_LOADS float4s per thread);
    - ``store_tiles(As, Bs, ra, rb, a_row, a_col, b_row, b_col)``: registers -> SMEM, A
      transposed;
    - ``mma_tile(As, Bs, reg_m, reg_n, thread_results, wm0, wn0)``: BK outer-product steps on
      the thread's WMITER x WNITER tiles, unrolled;
    - ``store_results(C, thread_results, r0, c0, alpha, beta, M, N, vec)``: the epilogue.
    """
    d = tun.derived(cfg)
    BK, BN, WM, WN = cfg["BK"], cfg["BN"], cfg["WM"], cfg["WN"]
    TM, TN, WNITER = cfg["TM"], cfg["TN"], cfg["WNITER"]
    WMITER, WSUBM, WSUBN = d["WMITER"], d["WSUBM"], d["WSUBN"]
    A_LOADS, B_LOADS = d["A_LOADS"], d["B_LOADS"]
    A_ROW_STRIDE = d["NUM_THREADS"] // (BK // 4)  # rows of the A tile covered per pass
    B_ROW_STRIDE = d["NUM_THREADS"] // (BN // 4)
    LANES_N = WSUBN // TN  # lanes along N in a warp sub-tile
    WARPS_N = BN // WN
    WARP_SIZE = tun.WARP_SIZE

    @device_jit
    def thread_origin(tid):
        warp, lane = tid // WARP_SIZE, tid % WARP_SIZE
        wm0 = (warp // WARPS_N) * WM + (lane // LANES_N) * TM
        wn0 = (warp % WARPS_N) * WN + (lane % LANES_N) * TN
        return wm0, wn0

    # --- GMEM -> registers: l-th float4 of this thread's share of each tile
    @device_jit
    def _load_a(l, A, ra, k0, a_row, a_col, row0, M, K, vec):
        r = min(row0 + a_row + l * A_ROW_STRIDE, M - 1)  # clamp: rows past M are never stored
        ra[4 * l], ra[4 * l + 1], ra[4 * l + 2], ra[4 * l + 3] = load_a4(A, r, k0 + a_col, K, vec)

    @device_jit
    def _load_b(l, B, rb, k0, b_row, b_col, col0, N, K, vec):
        k = k0 + b_row + l * B_ROW_STRIDE
        rb[4 * l], rb[4 * l + 1], rb[4 * l + 2], rb[4 * l + 3] = load_b4(
            B, k, col0 + b_col, K, N, vec
        )

    load_a_all = unroll(A_LOADS, _load_a)
    load_b_all = unroll(B_LOADS, _load_b)

    @device_jit
    def load_tiles(A, B, ra, rb, k0, a_row, a_col, b_row, b_col, row0, col0, M, N, K, vec):
        load_a_all(A, ra, k0, a_row, a_col, row0, M, K, vec)
        load_b_all(B, rb, k0, b_row, b_col, col0, N, K, vec)

    # --- registers -> SMEM: A transposed (As[k, m]), B as is
    @device_jit
    def _store_a(l, As, ra, a_row, a_col):
        m = a_row + l * A_ROW_STRIDE
        for i in range(4):
            As[a_col + i, m] = ra[4 * l + i]

    @device_jit
    def _store_b(l, Bs, rb, b_row, b_col):
        store4(Bs, b_row + l * B_ROW_STRIDE, b_col,
               rb[4 * l], rb[4 * l + 1], rb[4 * l + 2], rb[4 * l + 3])

    store_a_all = unroll(A_LOADS, _store_a)
    store_b_all = unroll(B_LOADS, _store_b)

    @device_jit
    def store_tiles(As, Bs, ra, rb, a_row, a_col, b_row, b_col):
        store_a_all(As, ra, a_row, a_col)
        store_b_all(Bs, rb, b_row, b_col)

    # --- SMEM -> registers, FMA: one k of the tile
    @device_jit
    def _mma_step(k, As, Bs, reg_m, reg_n, thread_results, wm0, wn0):
        # wm0/wn0: this thread's first row/column inside the block tile
        for wm in range(WMITER):
            for i in range(0, TM, 4):
                m = wm * TM + i
                reg_m[m], reg_m[m + 1], reg_m[m + 2], reg_m[m + 3] = load4(
                    As, k, wm0 + wm * WSUBM + i
                )
        for wn in range(WNITER):
            for j in range(0, TN, 4):
                n = wn * TN + j
                reg_n[n], reg_n[n + 1], reg_n[n + 2], reg_n[n + 3] = load4(
                    Bs, k, wn0 + wn * WSUBN + j
                )
        for m in range(WMITER * TM):
            for n in range(WNITER * TN):
                thread_results[m, n] += reg_m[m] * reg_n[n]

    mma_tile = unroll(BK, _mma_step)

    # --- epilogue: register row m -> C row r0 + (m // TM) * WSUBM + m % TM
    @device_jit
    def _store_row(m, C, thread_results, r0, c0, alpha, beta, M, N, vec):
        row = r0 + (m // TM) * WSUBM + m % TM
        for wn in range(WNITER):
            for j in range(0, TN, 4):
                n = wn * TN + j
                store_c4(
                    C, row, c0 + wn * WSUBN + j,
                    thread_results[m, n], thread_results[m, n + 1],
                    thread_results[m, n + 2], thread_results[m, n + 3],
                    alpha, beta, M, N, vec,
                )

    store_results = unroll(WMITER * TM, _store_row)
    return d, thread_origin, load_tiles, store_tiles, mma_tile, store_results


@functools.cache
def _make_kernel(items: tuple, vec: bool):
    cfg = dict(items)
    d, thread_origin, load_tiles, store_tiles, mma_tile, store_results = make_parts(cfg)
    BM, BN, BK, TM, TN = (cfg[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    WMITER, WNITER = d["WMITER"], cfg["WNITER"]
    AS_PITCH = d["AS_PITCH"]
    A_REGS, B_REGS = 4 * d["A_LOADS"], 4 * d["B_LOADS"]
    RES_M, RES_N = WMITER * TM, WNITER * TN

    @kernel_jit(launch_bounds=tun.launch_bounds(cfg))
    def sgemm_warptiling(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        k_begin, k_end = tun.split_k_range(K, BK)  # all of K unless SPLITK > 1
        c_row0 = cuda.blockIdx.z * M  # this slice's rows of C (the split-K workspace)
        As = cuda.shared.array((BK, AS_PITCH), float32, alignment=SMEM_ALIGN)  # [k, m]
        Bs = cuda.shared.array((BK, BN), float32, alignment=SMEM_ALIGN)
        tid = cuda.threadIdx.x
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        wm0, wn0 = thread_origin(tid)  # first row/column of this thread's tiles in the block
        # this thread's float4s of the GMEM tiles
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

        for k0 in range(k_begin, k_end, BK):
            # --- GMEM -> registers -> SMEM (zeros past k_end)
            load_tiles(A, B, ra, rb, k0, a_row, a_col, b_row, b_col, row0, col0, M, N, k_end,
                       vec)
            store_tiles(As, Bs, ra, rb, a_row, a_col, b_row, b_col)
            cuda.syncthreads()  # the tiles are complete before anyone reads them

            # --- SMEM -> registers, FMA (warp sub-tiles)
            mma_tile(As, Bs, reg_m, reg_n, thread_results, wm0, wn0)
            cuda.syncthreads()  # everyone is done reading before the next tiles overwrite SMEM

        # --- epilogue: write C (rows c_row0 + [0, M))
        store_results(C, thread_results, c_row0 + row0 + wm0, col0 + wn0, alpha, beta,
                      c_row0 + M, N, vec)

    return sgemm_warptiling


def make_stage(config: Mapping[str, int]) -> Stage:
    """The warptiling stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "warptiling", "8: warptiling", config, _make_kernel, make_stage, SPACE, check_config
    )


STAGE = make_stage(DEFAULT_CONFIG)
