"""Stage 12, tf32_mma_multistage: TF32 tensor cores fed by a cp.async pipeline and ``ldmatrix``.

From ``tf32_mma`` (same fragments and ``mma.sync.m16n8k8``): the block tile grows to 128x128x32
with warp tiles of 4x4 or more fragments (16+ mma per 8-deep step per warp, so each fragment
loaded from SMEM feeds several mma), and the GMEM -> SMEM copies become ``multistage``'s: an
NBUF-deep ring of tiles filled by ``cp.async`` (16 bytes per copy when rows are 16-byte aligned),
NBUF - 1 tiles in flight while the warps compute. The A tile stays K-major in SMEM (``As[m, k]``,
as A is in GMEM), so one ``ldmatrix.x4`` per 16x8 fragment loads all four A registers of every
lane (TF32 is 32-bit: ``ldmatrix`` moves it as pairs of 16-bit halves, untransposed); B fragments
(``Bs[k, n]``, as B is) are read element by element. Pitches: ``As`` BK + 4 floats (the 8 rows of
an ``ldmatrix`` 8x8 matrix land 4 banks apart: one wavefront), ``Bs`` BN + 8 (``8 q + g``: no
conflict).

Arithmetic (``MODE``): ``"tf32"``, each operand rounded to TF32 (round to nearest; what cuBLAS's
``CUBLAS_COMPUTE_32F_FAST_TF32`` does), one mma per fragment pair; or ``"3xtf32"`` (stage 13),
each operand split into ``big + small`` TF32 parts and three mma, ``small*big``, ``big*small``,
``big*big``, accumulated in FP32: about FP32 accuracy from tensor cores.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1`` (rows not 16-byte aligned: the scalar variant with 4-byte copies). Computes
``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``. Compute capability 8.0+.

Source: NVIDIA CUTLASS ``MmaMultistage`` and the sm_80 TF32 tensor-op GEMMs (128x128x32 tiles,
3 stages, ``ldmatrix``); PTX ISA, "ldmatrix", "mma.m16n8k8"; CUTLASS example 27 (3xTF32).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from numba import cuda, float32, int32

from ..cpasync import commit, copy_async, wait
from ..launch import tile_grid
from ..mma import (
    MMA_TF32,
    ldmatrix_x4,
    mma_tf32,
    round_tf32_bits,
    split_tf32,
    split_tf32_bits,
    to_tf32,
)
from ..registry import Stage
from ..vecmem import SMEM_ALIGN, tile_view
from ._common import device_jit, kernel_jit, unroll
from .k11_tf32_mma import store_fragment

MMA_M, MMA_N, MMA_K = MMA_TF32
WARP_SIZE = 32
SMEM_LIMIT = 227 * 1024  # opt-in dynamic SMEM per block, sm_80 / sm_90

#: 128x128x32 block tile, 8 warps (2x4) of 64x32: 4x4 fragments, 64 accumulators per thread;
#: three SMEM buffers (105 KB); 176 registers, no spills. (64x64 warp tiles measured 20 % faster
#: on an H200 at 4096^3 but spill: bench/results/nvidia-h200/2026-11-22-tensor-cores.)
DEFAULT_CONFIG = dict(BM=128, BN=128, BK=32, WM=64, WN=32, NBUF=3, MINB=1)
KEYS = tuple(DEFAULT_CONFIG)


def derived(cfg: Mapping[str, int]) -> dict:
    """Constants that follow from a configuration."""
    BM, BN, BK, WM, WN = (cfg[k] for k in ("BM", "BN", "BK", "WM", "WN"))
    warps = (BM // WM) * (BN // WN)
    as_pitch, bs_pitch = BK + 4, BN + 8
    return dict(
        NUM_THREADS=warps * WARP_SIZE, WARPS_N=BN // WN, MITER=WM // MMA_M, NITER=WN // MMA_N,
        AS_PITCH=as_pitch, BS_PITCH=bs_pitch, A_FLOATS=cfg["NBUF"] * BM * as_pitch,
        SMEM_BYTES=4 * cfg["NBUF"] * (BM * as_pitch + BK * bs_pitch),
    )


def check_config(cfg: Mapping[str, int]) -> None:
    """Raise ``ValueError`` naming the violated constraint."""
    if set(cfg) != set(KEYS):
        raise ValueError(f"invalid config {dict(cfg)}: need exactly the keys {KEYS}")
    if not all(isinstance(v, int) and v > 0 for v in cfg.values()):
        raise ValueError(f"invalid config {dict(cfg)}: values must be positive ints")
    BM, BN, BK, WM, WN = (cfg[k] for k in ("BM", "BN", "BK", "WM", "WN"))
    if BM % WM or BN % WN or WM % MMA_M or WN % MMA_N or BK % MMA_K:
        raise ValueError(f"invalid config {dict(cfg)}: warp tiles must tile the block, 16x8 "
                         "fragments the warp tile, and BK be a multiple of 8")
    d = derived(cfg)
    nt = d["NUM_THREADS"]
    if not 32 <= nt <= 1024 or (BM * BK) % (4 * nt) or (BK * BN) % (4 * nt) or BN % 32:
        raise ValueError(f"invalid config {dict(cfg)}: 32..1024 threads that split both tiles "
                         "into float4 copies evenly, BN a multiple of 32")
    if not 2 <= cfg["NBUF"] <= 6 or cfg["MINB"] > 4:
        raise ValueError(f"invalid config {dict(cfg)}: NBUF in 2..6, MINB <= 4")
    if d["SMEM_BYTES"] > SMEM_LIMIT:
        raise ValueError(f"invalid config {dict(cfg)}: {d['SMEM_BYTES']} B of SMEM > {SMEM_LIMIT}")


def _valid(cfg: Mapping[str, int]) -> bool:
    try:
        check_config(cfg)
    except ValueError:
        return False
    return True


#: Candidate configurations: block/warp tile shapes x BK x NBUF, the valid ones.
SPACE = tuple(
    c for c in (dict(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, NBUF=nbuf, MINB=1)
                for bm, bn, wm, wn in ((128, 128, 64, 32), (128, 128, 64, 64), (128, 256, 64, 64),
                                       (256, 128, 64, 64), (64, 128, 32, 32), (128, 64, 32, 32))
                for bk in (16, 32) for nbuf in (3, 4))
    if _valid(c)
)


def make_copier(rows: int, cols: int, threads: int):
    """``copy(Xs, X, r0, c0, R, C, tid, zero_rows, vec)``: this thread's cp.async copies of the
    ``rows x cols`` tile of ``X`` (``R x C``) at ``(r0, c0)`` into ``Xs``, same orientation.
    The dimension that is K is zero-filled past its end (``zero_rows``: the rows, for B; else
    the columns, for A); the other is clamped into the matrix (those rows of A / columns of B
    feed only elements of C that are never stored). ``vec``: 16-byte copies (rows 16-byte
    aligned, ``C % 4 == 0``); else 4-byte copies."""
    chunks = rows * cols // 4 // threads
    elems = rows * cols // threads

    @device_jit
    def _copy4(j, Xs, X, r0, c0, R, C, tid, zero_rows):
        i = tid + j * threads
        r, c = i // (cols // 4), (i % (cols // 4)) * 4
        ok_r = r0 + r < R
        src_r = min(r0 + r, R - 1)
        if zero_rows:  # B: rows are K, zero past it; columns (N) clamped
            copy_async(Xs, r, c, X, src_r, min(c0 + c, C - 4), 16, ok_r)
        else:  # A: rows are M, clamped; columns are K, zero past it
            copy_async(Xs, r, c, X, src_r, min(c0 + c, C - 4), 16, c0 + c < C)

    @device_jit
    def _copy1(j, Xs, X, r0, c0, R, C, tid, zero_rows):
        i = tid + j * threads
        r, c = i // cols, i % cols
        src_r, src_c = min(r0 + r, R - 1), min(c0 + c, C - 1)
        ok = r0 + r < R if zero_rows else c0 + c < C
        copy_async(Xs, r, c, X, src_r, src_c, 4, ok)

    copy4 = unroll(chunks, _copy4)
    copy1 = unroll(elems, _copy1)

    @device_jit
    def copy(Xs, X, r0, c0, R, C, tid, zero_rows, vec):
        if vec:
            copy4(Xs, X, r0, c0, R, C, tid, zero_rows)
        else:
            copy1(Xs, X, r0, c0, R, C, tid, zero_rows)

    return copy


@functools.cache
def _make_kernel(items: tuple, vec: bool, mode: str):
    cfg = dict(items)
    d = derived(cfg)
    BM, BN, BK, WM, WN, NBUF = (cfg[k] for k in ("BM", "BN", "BK", "WM", "WN", "NBUF"))
    NT, WARPS_N, MITER, NITER = d["NUM_THREADS"], d["WARPS_N"], d["MITER"], d["NITER"]
    FRAGS = MITER * NITER  # 16x8 accumulator fragments per warp
    AS_PITCH, BS_PITCH, A_FLOATS = d["AS_PITCH"], d["BS_PITCH"], d["A_FLOATS"]
    SPLIT = mode == "3xtf32"
    WAIT_PENDING = NBUF - 2  # groups allowed in flight when tile t must have landed
    copy_a = make_copier(BM, BK, NT)
    copy_b = make_copier(BK, BN, NT)

    # Every loop over fragments is unrolled by construction (``_common.unroll``): an index into
    # the register arrays that is not a constant would send them to local memory.
    @device_jit
    def _load_a(mi, As, kk, a_big, a_small, wm0, lane):
        # lane l gives row l % 16, k-half l // 16: matrices (rows 0-7 | 8-15) x (k 0-3 | 4-7)
        r0, r1, r2, r3 = ldmatrix_x4(As, wm0 + mi * MMA_M + (lane & 15), kk + (lane >> 4) * 4)
        if SPLIT:
            a_big[mi, 0], a_small[mi, 0] = split_tf32_bits(r0)
            a_big[mi, 1], a_small[mi, 1] = split_tf32_bits(r1)
            a_big[mi, 2], a_small[mi, 2] = split_tf32_bits(r2)
            a_big[mi, 3], a_small[mi, 3] = split_tf32_bits(r3)
        else:
            a_big[mi, 0] = round_tf32_bits(r0)
            a_big[mi, 1] = round_tf32_bits(r1)
            a_big[mi, 2] = round_tf32_bits(r2)
            a_big[mi, 3] = round_tf32_bits(r3)

    @device_jit
    def _load_b(ni, Bs, kk, b_big, b_small, wn0, lane):
        n = wn0 + ni * MMA_N + (lane >> 2)
        k = kk + (lane & 3)
        if SPLIT:
            b_big[ni, 0], b_small[ni, 0] = split_tf32(Bs[k, n])
            b_big[ni, 1], b_small[ni, 1] = split_tf32(Bs[k + 4, n])
        else:
            b_big[ni, 0] = to_tf32(Bs[k, n])
            b_big[ni, 1] = to_tf32(Bs[k + 4, n])

    @device_jit
    def _mma(f, acc, a_big, a_small, b_big, b_small):
        mi, ni = f // NITER, f % NITER
        if SPLIT:
            # 3xTF32: the small products first, then big * big, into a fresh FP32 fragment
            # that is then added to the accumulator with FP32 (round-to-nearest) adds: the
            # tensor cores' own accumulation truncates (measured on an H200: chaining the
            # accumulator through the mma gave 2.9e-5 relative error at 4096^3, 25x FP32's)
            z = float32(0.0)
            c0, c1, c2, c3 = mma_tf32(
                a_small[mi, 0], a_small[mi, 1], a_small[mi, 2], a_small[mi, 3],
                b_big[ni, 0], b_big[ni, 1], z, z, z, z)
            c0, c1, c2, c3 = mma_tf32(
                a_big[mi, 0], a_big[mi, 1], a_big[mi, 2], a_big[mi, 3],
                b_small[ni, 0], b_small[ni, 1], c0, c1, c2, c3)
            c0, c1, c2, c3 = mma_tf32(
                a_big[mi, 0], a_big[mi, 1], a_big[mi, 2], a_big[mi, 3],
                b_big[ni, 0], b_big[ni, 1], c0, c1, c2, c3)
            acc[f, 0] += c0
            acc[f, 1] += c1
            acc[f, 2] += c2
            acc[f, 3] += c3
        else:
            acc[f, 0], acc[f, 1], acc[f, 2], acc[f, 3] = mma_tf32(
                a_big[mi, 0], a_big[mi, 1], a_big[mi, 2], a_big[mi, 3],
                b_big[ni, 0], b_big[ni, 1], acc[f, 0], acc[f, 1], acc[f, 2], acc[f, 3])

    load_a, load_b, mma_all = unroll(MITER, _load_a), unroll(NITER, _load_b), unroll(FRAGS, _mma)

    @device_jit
    def _k_step(s, As, Bs, acc, a_big, a_small, b_big, b_small, wm0, wn0, lane):
        # --- SMEM -> fragments: one ldmatrix.x4 per A fragment, two LDS per B fragment
        load_a(As, s * MMA_K, a_big, a_small, wm0, lane)
        load_b(Bs, s * MMA_K, b_big, b_small, wn0, lane)
        # --- mma on tensor cores
        mma_all(acc, a_big, a_small, b_big, b_small)

    k_steps = unroll(BK // MMA_K, _k_step)

    @device_jit
    def _store(f, C, acc, r0, c0, alpha, beta, M, N):
        store_fragment(C, r0 + (f // NITER) * MMA_M, c0 + (f % NITER) * MMA_N,
                       acc[f, 0], acc[f, 1], acc[f, 2], acc[f, 3], alpha, beta, M, N)

    store_all = unroll(FRAGS, _store)

    @device_jit
    def copy_tiles(As, Bs, A, B, k0, row0, col0, M, N, K, tid):
        copy_a(As, A, row0, k0, M, K, tid, False, vec)
        copy_b(Bs, B, k0, col0, K, N, tid, True, vec)

    @kernel_jit(launch_bounds=(NT, cfg["MINB"]))
    def sgemm_tf32_mma_multistage(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        # dynamic SMEM: NBUF copies of the A tile (As[m, k]), then NBUF of the B tile (Bs[k, n])
        smem = cuda.shared.array(0, float32, alignment=SMEM_ALIGN)
        As = tile_view(smem, 0, (NBUF, BM, AS_PITCH))
        Bs = tile_view(smem, A_FLOATS, (NBUF, BK, BS_PITCH))
        tid = cuda.threadIdx.x
        warp, lane = tid // WARP_SIZE, tid % WARP_SIZE
        wm0 = (warp // WARPS_N) * WM
        wn0 = (warp % WARPS_N) * WN
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN

        acc = cuda.local.array((FRAGS, 4), float32)
        a_big = cuda.local.array((MITER, 4), int32)
        a_small = cuda.local.array((MITER, 4), int32)
        b_big = cuda.local.array((NITER, 2), int32)
        b_small = cuda.local.array((NITER, 2), int32)
        for f in range(FRAGS):
            for i in range(4):
                acc[f, i] = float32(0.0)

        # --- prologue: GMEM -> SMEM copies of tiles 0 .. NBUF-2 in flight, one group each
        for s in range(NBUF - 1):
            if s * BK < K:
                copy_tiles(As[s], Bs[s], A, B, s * BK, row0, col0, M, N, K, tid)
            commit()  # (possibly empty: keeps one group per tile)

        cb = 0  # buffer of tile t
        nb = NBUF - 1  # buffer of tile t + NBUF - 1 (the one tile t - 1 used)
        k_next = (NBUF - 1) * BK
        for _ in range(0, K, BK):
            wait(WAIT_PENDING)  # this thread's copies of tile t have landed
            cuda.syncthreads()  # ...everyone's; and every warp is done with tile t - 1's buffer
            # --- GMEM -> SMEM: tile t + NBUF - 1 into the buffer tile t - 1 used
            if k_next < K:
                copy_tiles(As[nb], Bs[nb], A, B, k_next, row0, col0, M, N, K, tid)
            commit()
            # --- SMEM -> fragments, mma on tile t
            k_steps(As[cb], Bs[cb], acc, a_big, a_small, b_big, b_small, wm0, wn0, lane)
            k_next += BK
            cb = cb + 1 if cb + 1 < NBUF else 0
            nb = nb + 1 if nb + 1 < NBUF else 0
        wait(0)  # no copy may still be writing SMEM when the block exits

        # --- epilogue: write C
        store_all(C, acc, row0 + wm0 + (lane >> 2), col0 + wn0 + 2 * (lane & 3), alpha, beta,
                  M, N)

    return sgemm_tf32_mma_multistage


def make_stage(config: Mapping[str, int], mode: str = "tf32") -> Stage:
    """The stage for one configuration (validated by :func:`check_config`) and arithmetic
    ``mode`` (``"tf32"`` or ``"3xtf32"``)."""
    check_config(config)
    cfg = {k: config[k] for k in KEYS}
    items = tuple(sorted(cfg.items()))
    d = derived(cfg)
    name, label = {"tf32": ("tf32_mma_multistage", "12: TF32 mma + cp.async + ldmatrix"),
                   "3xtf32": ("tf32x3_mma", "13: 3xTF32 (FP32-accurate tensor cores)")}[mode]

    def launch_config(M, N, K):
        return tile_grid(M, N, cfg["BM"], cfg["BN"]), (d["NUM_THREADS"],)

    return Stage(
        name=name,
        label=label,
        kernel=_make_kernel(items, True, mode),
        scalar_kernel=_make_kernel(items, False, mode),
        launch_config=launch_config,
        precision=mode,
        config=cfg,
        factory=functools.partial(make_stage, mode=mode),
        space=SPACE,
        check_config=check_config,
        dynamic_smem=d["SMEM_BYTES"],
        min_cc=(8, 0),
        tile=(cfg["BM"], cfg["BN"]),
    )


STAGE = make_stage(DEFAULT_CONFIG)
