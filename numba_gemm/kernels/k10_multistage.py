"""Stage 10, multistage: an NBUF-deep ring of SMEM tiles filled by asynchronous copies (cp.async).

From ``double_buffering`` (same warp/thread map and FMA core, ``warptiling.make_parts``): GMEM
tiles no longer pass through registers. Each thread issues ``cp.async`` copies straight into SMEM
(``numba_gemm.cpasync``) for the tile NBUF - 1 steps ahead, so NBUF - 1 K tiles are in flight
while the warps compute on the current one:

    prologue: issue tiles 0 .. NBUF-2, one commit group each
    for t in tiles:
        wait until tile t's group has landed; syncthreads    # all copies of tile t visible, and
                                                             # everyone done with buffer t-1
        issue tile t + NBUF - 1 into buffer (t - 1) % NBUF; commit
        BK outer-product steps on buffer t % NBUF

One barrier per K tile; no registers spent on staging (more for accumulators); more latency
hidden than with two buffers. A's tile is still stored transposed (``As[k, m]``): its copies are
4-byte ``cp.async.ca``, one per element, which can land anywhere in SMEM; B's rows are copied 16
bytes at a time (``cp.async.cg``) when B has 16-byte aligned rows, else 4 bytes at a time. Past K
the copies zero-fill (``src-size`` 0); rows/columns past M/N are clamped as in stage 6. The NBUF
copies of the tiles live in dynamic SMEM, over 48 KB when the configuration asks
(``launch.allow_dynamic_smem``).

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: NVIDIA CUTLASS ``MmaMultistage`` (sm_80 multistage mainloop with cp.async); CUDA C++
Programming Guide, "Asynchronous Data Copies using cuda::pipeline"; PTX ISA, ``cp.async``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from numba import cuda, float32

from ..cpasync import commit, copy_async, wait
from ..registry import Stage
from ..vecmem import SMEM_ALIGN, tile_view
from . import _tunable as tun
from . import k08_warptiling as wt
from ._common import device_jit, kernel_jit, unroll

#: Default: the fastest configuration measured at 4096^3 on an H200 (numba_gemm/tuning/sm_90.json):
#: 128x256x16 block tile, 8 warps of 64x64 (2x2 sub-tiles of 32x32), 8x4 thread tiles (16x8
#: accumulators per thread), two SMEM buffers (49.7 KB: dynamic SMEM past the 48 KB opt-in).
DEFAULT_CONFIG = dict(
    BM=128, BN=256, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1, NBUF=2
)


def check_config(cfg: Mapping[str, int]) -> None:
    """Tile constraints of ``warptiling`` with NBUF (2-6) copies of the tiles in dynamic SMEM,
    and element-wise 4-byte copies that split evenly over the threads."""
    nbuf = cfg.get("NBUF")
    if not (isinstance(nbuf, int) and 2 <= nbuf <= 6):
        raise ValueError(f"invalid config {dict(cfg)}: NBUF must be an int in 2..6")
    tun.check_config(
        cfg, extra_keys=("NBUF",), smem_copies=nbuf, smem_limit=tun.SMEM_DYNAMIC_LIMIT
    )
    warps = tun.derived(cfg)["NUM_THREADS"] // tun.WARP_SIZE
    if cfg["BK"] % warps or cfg["BN"] % tun.WARP_SIZE:
        raise ValueError(f"invalid config {dict(cfg)}: element-wise copies of B need BK to be a "
                         "multiple of the warp count and BN of 32")


SPACE = tun.make_space(check_config, extra={"NBUF": (2, 3, 4)})


def smem_bytes(cfg: Mapping[str, int]) -> int:
    """Dynamic SMEM per block: NBUF copies of the (padded, transposed) A tile and the B tile."""
    return cfg["NBUF"] * tun.derived(cfg)["TILE_SMEM_BYTES"]


def make_copy_tile(cfg: Mapping[str, int]):
    """``copy_tile(As, Bs, A, B, k0, tid, row0, col0, M, N, K, k_end, vec, full)``: issue this
    thread's cp.async copies of the K tile at ``k0`` into one SMEM buffer.

    A is transposed on the way, so its copies are 4-byte ones: a thread takes A_LOADS chunks of 4
    consecutive k of one row (few distinct rows per thread: few address registers). B goes float4
    by float4 (16-byte copies) when its rows are 16-byte aligned; otherwise element by element:
    warp ``w`` copies rows ``w * BK/NW ...`` of the tile, lane ``l`` columns ``l, l + 32, ...``,
    so that a warp's 4-byte copies read 128 contiguous bytes and a thread's copies of one row
    are one address plus constant offsets.
    ``full`` (a literal at the call site): the tile lies before ``k_end`` and the block's columns
    before N, so no copy needs a bounds check or a clamp; else copies past ``k_end`` zero-fill and
    every address is clamped into the matrices.
    """
    d = tun.derived(cfg)
    BN, BK = cfg["BN"], cfg["BK"]
    NT = d["NUM_THREADS"]
    B_ELEMS = BK * BN // NT  # 4-byte copies of B per thread (scalar path)
    B_ROWS_PER_WARP = BK // (NT // tun.WARP_SIZE)
    B_COL_GROUPS = BN // tun.WARP_SIZE
    A_ROW_STRIDE = NT // (BK // 4)  # rows of the A tile per pass
    B_ROW_STRIDE = NT // (BN // 4)  # float4 path: rows of the B tile per pass

    @device_jit
    def _copy_a(j, As, A, k0, tid, row0, M, K, k_end, full):
        m = tid // (BK // 4) + j * A_ROW_STRIDE
        kk = (tid % (BK // 4)) * 4
        src_row = min(row0 + m, M - 1)  # clamp: rows past M are never stored
        for i in range(4):  # transposing: As[k, m] = A[row, k], one element per copy
            k = k0 + kk + i
            if full:
                copy_async(As, kk + i, m, A, src_row, k, 4, True)
            else:
                copy_async(As, kk + i, m, A, src_row, min(k, K - 1), 4, k < k_end)

    @device_jit
    def _copy_b4(j, Bs, B, k0, tid, col0, N, K, k_end, full):
        r = tid // (BN // 4) + j * B_ROW_STRIDE
        c = (tid % (BN // 4)) * 4
        k = k0 + r
        src_k = k if full else min(k, K - 1)
        copy_async(Bs, r, c, B, src_k, min(col0 + c, N - 4), 16, full or k < k_end)

    @device_jit
    def _copy_b1(j, Bs, B, k0, tid, col0, N, K, k_end, full):
        r = (tid // tun.WARP_SIZE) * B_ROWS_PER_WARP + j // B_COL_GROUPS
        c = tid % tun.WARP_SIZE + (j % B_COL_GROUPS) * tun.WARP_SIZE
        k = k0 + r
        if full:
            copy_async(Bs, r, c, B, k, col0 + c, 4, True)
        else:
            copy_async(Bs, r, c, B, min(k, K - 1), min(col0 + c, N - 1), 4, k < k_end)

    copy_a_all = unroll(d["A_LOADS"], _copy_a)
    copy_b4_all = unroll(d["B_LOADS"], _copy_b4)
    copy_b1_all = unroll(B_ELEMS, _copy_b1)

    @device_jit
    def copy_tile(As, Bs, A, B, k0, tid, row0, col0, M, N, K, k_end, vec, full):
        copy_a_all(As, A, k0, tid, row0, M, K, k_end, full)
        if vec:
            copy_b4_all(Bs, B, k0, tid, col0, N, K, k_end, full)
        else:
            copy_b1_all(Bs, B, k0, tid, col0, N, K, k_end, full)

    return copy_tile


@functools.cache
def _make_kernel(items: tuple, vec: bool):
    cfg = dict(items)
    d, thread_origin, _, _, mma_tile, store_results = wt.make_parts(cfg)
    copy_tile = make_copy_tile(cfg)
    BM, BN, BK, TM, TN = (cfg[k] for k in ("BM", "BN", "BK", "TM", "TN"))
    NBUF = cfg["NBUF"]
    WAIT_PENDING = NBUF - 2  # groups allowed in flight when tile t must have landed
    AS_PITCH = d["AS_PITCH"]
    A_FLOATS = NBUF * BK * AS_PITCH
    RES_M, RES_N = d["WMITER"] * TM, cfg["WNITER"] * TN

    @kernel_jit(launch_bounds=tun.launch_bounds(cfg))
    def sgemm_multistage(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        k_begin, k_end = tun.split_k_range(K, BK)  # all of K unless SPLITK > 1
        c_row0 = cuda.blockIdx.z * M  # this slice's rows of C (the split-K workspace)
        # dynamic SMEM: NBUF copies of the A tile (transposed, padded), then NBUF of the B tile
        smem = cuda.shared.array(0, float32, alignment=SMEM_ALIGN)
        As = tile_view(smem, 0, (NBUF, BK, AS_PITCH))
        Bs = tile_view(smem, A_FLOATS, (NBUF, BK, BN))
        tid = cuda.threadIdx.x
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        wm0, wn0 = thread_origin(tid)

        reg_m = cuda.local.array(RES_M, float32)
        reg_n = cuda.local.array(RES_N, float32)
        thread_results = cuda.local.array((RES_M, RES_N), float32)
        for m in range(RES_M):
            for n in range(RES_N):
                thread_results[m, n] = float32(0.0)

        # --- prologue: GMEM -> SMEM copies of tiles 0 .. NBUF-2 in flight, one group each
        for s in range(NBUF - 1):
            k0 = k_begin + s * BK
            if k0 < k_end:
                copy_tile(As[s], Bs[s], A, B, k0, tid, row0, col0, M, N, K, k_end, vec, False)
            commit()  # (possibly empty: keeps one group per tile)

        interior = col0 + BN <= N  # no column of this block's B tiles needs a clamp
        cb = 0  # buffer of tile t
        nb = NBUF - 1  # buffer of tile t + NBUF - 1 (the one tile t - 1 used)
        k_next = k_begin + (NBUF - 1) * BK
        for _ in range(k_begin, k_end, BK):
            wait(WAIT_PENDING)  # this thread's copies of tile t have landed
            cuda.syncthreads()  # ...everyone's; and everyone is done computing on tile t - 1
            # --- GMEM -> SMEM: tile t + NBUF - 1 into the buffer tile t - 1 used
            if k_next + BK <= k_end and interior:
                copy_tile(As[nb], Bs[nb], A, B, k_next, tid, row0, col0, M, N, K, k_end, vec, True)
            elif k_next < k_end:
                copy_tile(As[nb], Bs[nb], A, B, k_next, tid, row0, col0, M, N, K, k_end, vec,
                          False)
            commit()
            # --- SMEM -> registers, FMA on tile t
            mma_tile(As[cb], Bs[cb], reg_m, reg_n, thread_results, wm0, wn0)
            k_next += BK
            cb = cb + 1 if cb + 1 < NBUF else 0
            nb = nb + 1 if nb + 1 < NBUF else 0
        wait(0)  # no copy may still be writing SMEM when the block exits

        # --- epilogue: write C (rows c_row0 + [0, M))
        store_results(C, thread_results, c_row0 + row0 + wm0, col0 + wn0, alpha, beta,
                      c_row0 + M, N, vec)

    return sgemm_multistage


def make_stage(config: Mapping[str, int]) -> Stage:
    """The multistage stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "multistage", "10: cp.async multistage", config, _make_kernel, make_stage, SPACE,
        check_config, dynamic_smem=smem_bytes(config), min_cc=(8, 0),
    )


STAGE = make_stage(DEFAULT_CONFIG)
