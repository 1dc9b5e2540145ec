"""Stage 12, tf32_mma_multistage: TF32 tensor cores fed by a cp.async pipeline and ``ldmatrix``.

From ``tf32_mma`` (same fragments and ``mma.sync.m16n8k8``): the block tile grows to 256x128
with 64x64 warp tiles of 4x8 fragments (32 mma per 8-deep step per warp, so each fragment loaded
from SMEM feeds 4 or 8 mma), and the GMEM -> SMEM copies become ``multistage``'s: an NBUF-deep
ring of tiles filled by ``cp.async`` (16 bytes per copy when rows are 16-byte aligned), NBUF - 1
tiles in flight while the warps compute. The copies of the next tile are issued between the first
two mma steps of the current one, so that their address arithmetic overlaps tensor-core work.
The A tile stays K-major in SMEM (``As[m, k]``, as A is in GMEM), so one ``ldmatrix.x4`` per
16x8 fragment loads all four A registers of every lane (TF32 is 32-bit: ``ldmatrix`` moves it as
pairs of 16-bit halves, untransposed); B fragments (``Bs[k, n]``, as B is) are read element by
element. Pitches: ``As`` BK + 4 floats (the 8 rows of an ``ldmatrix`` 8x8 matrix land 4 banks
apart: one wavefront), ``Bs`` BN + 8 (``8 q + g``: no conflict).

Arithmetic (``MODE``): ``"tf32"``, each operand rounded to TF32 (to nearest, ties away, by an
integer add on its bits: one instruction per register), one mma per fragment pair; ``"3xtf32"``
(stage 13), each operand split into ``big + small`` TF32 parts and three mma, ``small*big``,
``big*small``, ``big*big``, accumulated in FP32: about FP32 accuracy from tensor cores; or
``"fp16"`` (stage 14, ``hgemm_mma``): FP16 operands, ``mma.m16n8k16`` with FP32 accumulators,
both fragments by ``ldmatrix`` (B with ``.trans`` from the N-major tile, which 16-bit elements
allow), no conversion at all.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1`` (rows not 16-byte aligned: the scalar variant with 4-byte copies). Computes
``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``. Compute capability 8.0+.

Source: NVIDIA CUTLASS ``MmaMultistage`` and the sm_80 TF32 tensor-op GEMMs (128x128x32 tiles,
3 stages, ``ldmatrix``); PTX ISA, "ldmatrix", "mma.m16n8k8"; CUTLASS example 27 (3xTF32).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float16, float32, int32
from ..device import SMEM_OPTIN_LIMIT, WARP_SIZE, tile_grid
from ..ptx.cpasync import commit, copy_async, wait
from ..ptx.mma import (
    MMA_F16,
    MMA_TF32,
    float_bits,
    ldmatrix_x4,
    ldmatrix_x4_trans,
    mma_f16,
    mma_tf32,
    round_tf32_bits,
    split_tf32_bits,
)
from ..ptx.vecmem import SMEM_ALIGN, tile_view
from ._common import device_jit, kernel_jit, rolled, unroll
from .k11_tf32_mma import store_fragment
from .stage import Stage

MMA_M, MMA_N, _ = MMA_TF32  # the fragment's M and N; its K is the mode's
#: Per arithmetic mode: the SMEM/GMEM element type, its bytes, and the mma's K.
ELEMENT = {
    "tf32": (float32, 4, MMA_TF32[2]),
    "3xtf32": (float32, 4, MMA_TF32[2]),
    "fp16": (float16, 2, MMA_F16[2]),
}

#: 256x128x16 block tile, 8 warps (4x2) of 64x64: 8x8 fragments, 128 accumulators per thread;
#: four SMEM buffers (114 KB); 244 registers, no spills. The fastest of the 42 configurations of
#: ``space("tf32")`` timed on an H200 at 4096^3, within 1 % of 128x256 and 128x128x32 (64x64
#: warps); 64x32 warp tiles are 10-20 % slower (bench/results/nvidia-h200/2026-11-22-fp16).
DEFAULT_CONFIG = dict(BM=256, BN=128, BK=16, WM=64, WN=64, NBUF=4, MINB=1)
KEYS = tuple(DEFAULT_CONFIG)


def derived(cfg: Mapping[str, int], mode: str = "tf32") -> dict:
    """Constants that follow from a configuration and arithmetic mode. Pitches: ``As`` rows are
    padded by 16 bytes (the 8 rows of an ``ldmatrix`` matrix start 4 banks apart), ``Bs`` rows
    by 8 elements (FP32: lane (g, q) reads bank ``8 q + g``; FP16: 16 bytes, as for ``As``)."""
    BM, BN, BK, WM, WN = (cfg[k] for k in ("BM", "BN", "BK", "WM", "WN"))
    _, size, mma_k = ELEMENT[mode]
    warps = (BM // WM) * (BN // WN)
    as_pitch, bs_pitch = BK + 16 // size, BN + 8
    return dict(
        NUM_THREADS=warps * WARP_SIZE,
        WARPS_N=BN // WN,
        MITER=WM // MMA_M,
        NITER=WN // MMA_N,
        MMA_K=mma_k,
        VEC=16 // size,
        AS_PITCH=as_pitch,
        BS_PITCH=bs_pitch,
        A_ELEMS=cfg["NBUF"] * BM * as_pitch,
        SMEM_BYTES=size * cfg["NBUF"] * (BM * as_pitch + BK * bs_pitch),
    )


def check_config(cfg: Mapping[str, int], mode: str = "tf32") -> None:
    """Raise ``ValueError`` naming the violated constraint (for arithmetic ``mode``)."""
    if set(cfg) != set(KEYS):
        raise ValueError(f"invalid config {dict(cfg)}: need exactly the keys {KEYS}")
    if not all(isinstance(v, int) and v > 0 for v in cfg.values()):
        raise ValueError(f"invalid config {dict(cfg)}: values must be positive ints")
    BM, BN, BK, WM, WN = (cfg[k] for k in ("BM", "BN", "BK", "WM", "WN"))
    d = derived(cfg, mode)
    frag_n = 2 * MMA_N if mode == "fp16" else MMA_N  # FP16 B: ldmatrix.x4.trans, two at once
    if BM % WM or BN % WN or WM % MMA_M or WN % frag_n or BK % d["MMA_K"]:
        raise ValueError(
            f"invalid config {dict(cfg)}: warp tiles must tile the block, "
            f"{MMA_M}x{frag_n} fragments the warp tile, and BK be a multiple of "
            f"{d['MMA_K']}"
        )
    nt, vec = d["NUM_THREADS"], d["VEC"]
    if not 32 <= nt <= 1024 or (BM * BK) % (vec * nt) or (BK * BN) % (vec * nt) or BN % 32:
        raise ValueError(
            f"invalid config {dict(cfg)}: 32..1024 threads that split both tiles "
            "into 16-byte copies evenly, BN a multiple of 32"
        )
    if not 2 <= cfg["NBUF"] <= 6 or cfg["MINB"] > 4:
        raise ValueError(f"invalid config {dict(cfg)}: NBUF in 2..6, MINB <= 4")
    if d["SMEM_BYTES"] > SMEM_OPTIN_LIMIT:
        raise ValueError(
            f"invalid config {dict(cfg)}: {d['SMEM_BYTES']} B of SMEM > {SMEM_OPTIN_LIMIT}"
        )


def _valid(cfg: Mapping[str, int], mode: str) -> bool:
    try:
        check_config(cfg, mode)
    except ValueError:
        return False
    return True


@functools.cache
def space(mode: str = "tf32") -> tuple:
    """Candidate configurations for ``mode``: block/warp tile shapes x BK x NBUF (and two blocks
    per SM, i.e. at most 128 registers, for the 64x32 and 32x32 warp tiles), the valid ones."""
    bks = (32, 64) if mode == "fp16" else (16, 32, 64)
    return tuple(
        c
        for c in (
            dict(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, NBUF=nbuf, MINB=minb)
            for bm, bn, wm, wn, minbs in (
                (128, 128, 64, 32, (1, 2)),
                (256, 128, 64, 32, (1,)),
                (128, 256, 64, 32, (1,)),
                (128, 128, 64, 64, (1,)),
                (128, 256, 64, 64, (1,)),
                (256, 128, 64, 64, (1,)),
                (64, 128, 32, 32, (1, 2)),
                (128, 64, 32, 32, (1, 2)),
            )
            for bk in bks
            for nbuf in (3, 4)
            for minb in minbs
        )
        if _valid(c, mode)
    )


#: The TF32 candidates (``space("tf32")``).
SPACE = space("tf32")


def make_copier(rows: int, cols: int, threads: int, vec_elems: int = 4):
    """``copy(Xs, X, r0, c0, R, C, tid, zero_rows, vec)``: this thread's cp.async copies of the
    ``rows x cols`` tile of ``X`` (``R x C``) at ``(r0, c0)`` into ``Xs``, same orientation.
    The dimension that is K is zero-filled past its end (``zero_rows``: the rows, for B; else
    the columns, for A); the other is clamped into the matrix (those rows of A / columns of B
    feed only elements of C that are never stored). ``vec``: 16-byte copies of ``vec_elems``
    elements (rows 16-byte aligned, ``C % vec_elems == 0``); else 4-byte copies (FP32 only)."""
    V = vec_elems
    chunks = rows * cols // V // threads
    elems = rows * cols // threads

    @device_jit
    def _copy4(j, Xs, X, r0, c0, R, C, tid, zero_rows):
        i = tid + j * threads
        r, c = i // (cols // V), (i % (cols // V)) * V
        ok_r = r0 + r < R
        src_r = min(r0 + r, R - 1)
        if zero_rows:  # B: rows are K, zero past it; columns (N) clamped
            copy_async(Xs, r, c, X, src_r, min(c0 + c, C - V), 16, ok_r)
        else:  # A: rows are M, clamped; columns are K, zero past it
            copy_async(Xs, r, c, X, src_r, min(c0 + c, C - V), 16, c0 + c < C)

    @device_jit
    def _copy1(j, Xs, X, r0, c0, R, C, tid, zero_rows):
        i = tid + j * threads
        r, c = i // cols, i % cols
        src_r, src_c = min(r0 + r, R - 1), min(c0 + c, C - 1)
        ok = r0 + r < R if zero_rows else c0 + c < C
        copy_async(Xs, r, c, X, src_r, src_c, 4, ok)

    copy4 = unroll(chunks, _copy4)
    copy1 = rolled(elems, _copy1)

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
    d = derived(cfg, mode)
    BM, BN, BK, WM, WN, NBUF = (cfg[k] for k in ("BM", "BN", "BK", "WM", "WN", "NBUF"))
    NT, WARPS_N, MITER, NITER = d["NUM_THREADS"], d["WARPS_N"], d["MITER"], d["NITER"]
    FRAGS = MITER * NITER  # 16x8 accumulator fragments per warp
    AS_PITCH, BS_PITCH, A_ELEMS = d["AS_PITCH"], d["BS_PITCH"], d["A_ELEMS"]
    MMA_K = d["MMA_K"]
    ELEM = ELEMENT[mode][0]
    SPLIT, F16 = mode == "3xtf32", mode == "fp16"
    mma = mma_f16 if F16 else mma_tf32
    WAIT_PENDING = NBUF - 2  # groups allowed in flight when tile t must have landed
    copy_a = make_copier(BM, BK, NT, d["VEC"])
    copy_b = make_copier(BK, BN, NT, d["VEC"])

    # Every loop over fragments is unrolled by construction (``_common.unroll``): an index into
    # the register arrays that is not a constant would send them to local memory.
    @device_jit
    def _load_a(mi, As, kk, a_big, a_small, wm0, lane):
        # lane l gives row l % 16, k-half l // 16: matrices (rows 0-7 | 8-15) x (k-halves 0 | 1)
        r0, r1, r2, r3 = ldmatrix_x4(
            As, wm0 + mi * MMA_M + (lane & 15), kk + (lane >> 4) * (MMA_K // 2)
        )
        if F16:  # two halves per register, as the mma takes them
            a_big[mi, 0], a_big[mi, 1], a_big[mi, 2], a_big[mi, 3] = r0, r1, r2, r3
        elif SPLIT:
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
        if F16:
            if ni % 2 == 0:  # fragments ni, ni + 1: matrices (k 0-7 | 8-15) x (n 0-7 | 8-15)
                (b_big[ni, 0], b_big[ni, 1], b_big[ni + 1, 0], b_big[ni + 1, 1]) = (
                    ldmatrix_x4_trans(Bs, kk + (lane & 15), wn0 + ni * MMA_N + (lane >> 4) * MMA_N)
                )
            return
        n = wn0 + ni * MMA_N + (lane >> 2)
        k = kk + (lane & 3)
        if SPLIT:
            b_big[ni, 0], b_small[ni, 0] = split_tf32_bits(float_bits(Bs[k, n]))
            b_big[ni, 1], b_small[ni, 1] = split_tf32_bits(float_bits(Bs[k + 4, n]))
        else:
            b_big[ni, 0] = round_tf32_bits(float_bits(Bs[k, n]))
            b_big[ni, 1] = round_tf32_bits(float_bits(Bs[k + 4, n]))

    @device_jit
    def _mma(f, acc, a_big, a_small, b_big, b_small):
        mi, ni = f // NITER, f % NITER
        if SPLIT:
            # 3xTF32: the small products first, then big * big, into a fresh FP32 fragment
            # that is then added to the accumulator with FP32 (round-to-nearest) adds: the
            # tensor cores' own accumulation truncates (measured on an H200: chaining the
            # accumulator through the mma gave 2.9e-5 relative error at 4096^3, 25x FP32's)
            z = float32(0.0)
            c0, c1, c2, c3 = mma(
                a_small[mi, 0],
                a_small[mi, 1],
                a_small[mi, 2],
                a_small[mi, 3],
                b_big[ni, 0],
                b_big[ni, 1],
                z,
                z,
                z,
                z,
            )
            c0, c1, c2, c3 = mma(
                a_big[mi, 0],
                a_big[mi, 1],
                a_big[mi, 2],
                a_big[mi, 3],
                b_small[ni, 0],
                b_small[ni, 1],
                c0,
                c1,
                c2,
                c3,
            )
            c0, c1, c2, c3 = mma(
                a_big[mi, 0],
                a_big[mi, 1],
                a_big[mi, 2],
                a_big[mi, 3],
                b_big[ni, 0],
                b_big[ni, 1],
                c0,
                c1,
                c2,
                c3,
            )
            acc[f, 0] += c0
            acc[f, 1] += c1
            acc[f, 2] += c2
            acc[f, 3] += c3
        else:
            acc[f, 0], acc[f, 1], acc[f, 2], acc[f, 3] = mma(
                a_big[mi, 0],
                a_big[mi, 1],
                a_big[mi, 2],
                a_big[mi, 3],
                b_big[ni, 0],
                b_big[ni, 1],
                acc[f, 0],
                acc[f, 1],
                acc[f, 2],
                acc[f, 3],
            )

    load_a, load_b, mma_all = unroll(MITER, _load_a), unroll(NITER, _load_b), unroll(FRAGS, _mma)

    @device_jit
    def _k_step(s, As, Bs, acc, a_big, a_small, b_big, b_small, wm0, wn0, lane):
        # --- SMEM -> fragments: one ldmatrix.x4 per A fragment; per B fragment two LDS (FP32)
        # or half an ldmatrix.x4.trans (FP16)
        load_a(As, s * MMA_K, a_big, a_small, wm0, lane)
        load_b(Bs, s * MMA_K, b_big, b_small, wn0, lane)
        # --- mma on tensor cores
        mma_all(acc, a_big, a_small, b_big, b_small)

    STEPS = BK // MMA_K
    k_step, later_steps = unroll(1, _k_step), unroll(STEPS, _k_step, start=min(2, STEPS))
    second_step = unroll(min(2, STEPS), _k_step, start=1)  # nothing when STEPS == 1

    @device_jit
    def _store(f, C, acc, r0, c0, alpha, beta, M, N):
        store_fragment(
            C,
            r0 + (f // NITER) * MMA_M,
            c0 + (f % NITER) * MMA_N,
            acc[f, 0],
            acc[f, 1],
            acc[f, 2],
            acc[f, 3],
            alpha,
            beta,
            M,
            N,
        )

    store_all = unroll(FRAGS, _store)

    @device_jit
    def copy_tiles(As, Bs, A, B, k0, row0, col0, M, N, K, tid):
        copy_a(As, A, row0, k0, M, K, tid, False, vec)
        copy_b(Bs, B, k0, col0, K, N, tid, True, vec)

    @device_jit
    def tile(
        As,
        Bs,
        nAs,
        nBs,
        A,
        B,
        k_next,
        row0,
        col0,
        M,
        N,
        K,
        tid,
        acc,
        a_big,
        a_small,
        b_big,
        b_small,
        wm0,
        wn0,
        lane,
    ):
        # The copies of tile t + NBUF - 1 are issued between the first mma steps of tile t, with
        # no branch around them (past K they zero-fill a buffer nobody reads): ptxas can then
        # interleave their address arithmetic (~20 instructions per 16-byte copy) with the mma
        # instead of delaying the first ldmatrix after the barrier (sm_90 SASS: ~160
        # instructions between BAR.SYNC and the first LDSM when the copies came first).
        k_step(As, Bs, acc, a_big, a_small, b_big, b_small, wm0, wn0, lane)
        copy_a(nAs, A, row0, k_next, M, K, tid, False, vec)
        second_step(As, Bs, acc, a_big, a_small, b_big, b_small, wm0, wn0, lane)
        copy_b(nBs, B, k_next, col0, K, N, tid, True, vec)
        commit()
        later_steps(As, Bs, acc, a_big, a_small, b_big, b_small, wm0, wn0, lane)

    @kernel_jit(launch_bounds=(NT, cfg["MINB"]))
    def sgemm_tf32_mma_multistage(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        # dynamic SMEM: NBUF copies of the A tile (As[m, k]), then NBUF of the B tile (Bs[k, n])
        smem = cuda.shared.array(0, ELEM, alignment=SMEM_ALIGN)
        As = tile_view(smem, 0, (NBUF, BM, AS_PITCH))
        Bs = tile_view(smem, A_ELEMS, (NBUF, BK, BS_PITCH))
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
            # --- SMEM -> fragments, mma on tile t; among its first steps, GMEM -> SMEM copies of
            # tile t + NBUF - 1 into the buffer tile t - 1 used (one commit group)
            tile(
                As[cb],
                Bs[cb],
                As[nb],
                Bs[nb],
                A,
                B,
                k_next,
                row0,
                col0,
                M,
                N,
                K,
                tid,
                acc,
                a_big,
                a_small,
                b_big,
                b_small,
                wm0,
                wn0,
                lane,
            )
            k_next += BK
            cb = cb + 1 if cb + 1 < NBUF else 0
            nb = nb + 1 if nb + 1 < NBUF else 0
        wait(0)  # no copy may still be writing SMEM when the block exits

        # --- epilogue: write C
        store_all(C, acc, row0 + wm0 + (lane >> 2), col0 + wn0 + 2 * (lane & 3), alpha, beta, M, N)

    return sgemm_tf32_mma_multistage


#: Per mode: stage name, label, and the kernel's argument spec (``launch.numba_signature``:
#: ``A`` a 2-D C-contiguous float32 array, ``H`` float16).
MODES = {
    "tf32": ("tf32_mma_multistage", "12: TF32 mma + cp.async + ldmatrix", "AAAff"),
    "3xtf32": ("tf32x3_mma", "13: 3xTF32 (FP32-accurate tensor cores)", "AAAff"),
    "fp16": ("hgemm_mma", "14: FP16 mma, FP32 accumulate (HGEMM)", "HHAff"),
}


def make_stage(config: Mapping[str, int], mode: str = "tf32") -> Stage:
    """The stage for one configuration (validated by :func:`check_config`) and arithmetic
    ``mode`` (``"tf32"``, ``"3xtf32"`` or ``"fp16"``). The FP16 stage has no scalar-GMEM
    variant: its operands' rows must be 16-byte aligned (``api.hgemm`` checks)."""
    check_config(config, mode)
    cfg = {k: config[k] for k in KEYS}
    items = tuple(sorted(cfg.items()))
    d = derived(cfg, mode)
    name, label, args = MODES[mode]

    def launch_config(M, N, K):
        return tile_grid(M, N, cfg["BM"], cfg["BN"]), (d["NUM_THREADS"],)

    return Stage(
        name=name,
        label=label,
        kernel=_make_kernel(items, True, mode),
        scalar_kernel=None if mode == "fp16" else _make_kernel(items, False, mode),
        launch_config=launch_config,
        precision=mode,
        config=cfg,
        factory=functools.partial(make_stage, mode=mode),
        space=space(mode),
        check_config=functools.partial(check_config, mode=mode),
        dynamic_smem=d["SMEM_BYTES"],
        min_cc=(8, 0),
        tile=(cfg["BM"], cfg["BN"]),
        args=args,
    )


STAGE = make_stage(DEFAULT_CONFIG)
