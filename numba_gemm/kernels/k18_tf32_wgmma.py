"""Stage 18, tf32_wgmma: TF32 on Hopper's warpgroup tensor cores (``wgmma``), FP32 in and out.

From ``hgemm_wgmma`` (stage 17: a cp.async ring of 128-byte-swizzled tiles, asynchronous
warpgroup products, ``wgmma.wait_group 1``) for FP32 operands rounded to TF32. The obstacle: a
TF32 operand read from SMEM must be K-major, and B (``K x N``, row-major) is N-major; FP16 had
``trans-b``, TF32 has none. So the kernel computes the transposed product ``C^T = B^T A^T``:
the instruction's "A" (``64 x 8`` per warpgroup, which may come from *registers* in any
layout the threads load) is a 64-column slice of B, read from a row-major B tile and rounded to
TF32 (``(bits + 0x1000) & ~0x1FFF``, one integer add); its "B" (``8 x BM``, K-major) is the A
tile exactly as A lies, 128-byte swizzled (rows of 32 floats of K, 16-byte chunk ``kc`` of row
``r`` at ``kc ^ (r % 8)``), read by the tensor cores through a descriptor, which truncate it to
TF32. Each warpgroup owns 64 columns of the block tile and all its BM rows: per 8-deep step one
``64 x BM x 8`` product, ``BM / 2`` accumulators per thread, which hold C *transposed*.

Which column of C each row of the register operand stands for is the kernel's choice: row
``16 w + g`` (warp w, lane group g) is column ``16 w + 2 g`` and row ``16 w + g + 8`` column
``16 w + 2 g + 1``, so a lane's fragment (rows g, g + 8 at k = q and q + 4) is two 64-bit SMEM
loads, ``Bs[k, n : n + 2]`` (a half-warp reads banks ``8 q + 2 g (+1)``, pitch BN + 8: no
conflict), and its accumulators pair up into 64-bit stores of C (lane ``(g, q)``: rows
``8 i + 2 q (+1)``, columns ``n, n + 1``). Pipeline as stage 17: the products of tile t are left
running while tile t + 1's are issued, so copies go into the buffer of tile t - 2 (NBUF - 2
tiles of copies in flight).

``3xtf32`` mode (stage 19, ``tf32x3_wgmma``): FP32-accurate products, as stage 13 but on wgmma.
B's registers are split into TF32 ``big + small`` parts; A's small parts,
``tf32(a - trunc_tf32(a))``, are written to a second SMEM tile by a pass over each A tile
(the tensor cores truncate ``a`` itself to its big part); per step three products, ``b_small *
a_big``, ``b_big * a_small``, ``b_big * a_big``. The tensor cores' accumulation truncates, so the
products of each BK tile go into fresh accumulators (``scale-d = 0`` at its first step) that
are then added to the FP32 accumulators with FP32 adds. ptxas serializes every product of a
kernel that reads accumulators before ``wgmma.wait_group 0``, so each tile waits for all its
products; the small parts of tile t + 1 are made while tile t's run.

Layouts, batches, split-K (the tunable FP32 stages' contract, ``kernels._tunable``): A, B and C
are strided batches ``(batch, rows, cols)``, grid z the batch index, each of A and B row- or
column-major. B stored transposed (``x @ W.T``: NT, TT) is copied as ``Bs[n, k]`` (pitch BK + 4)
and its fragments come by one ``ldmatrix.x4`` of four 8 x 4 FP32 matrices, register rows 16 w + g
and 16 w + g + 8 standing for columns n and n + 8 (its rows 144 bytes apart: no bank conflict),
so C is stored in scalars. A stored transposed (TN, TT) must still land K-major: one 4-byte copy
per element (``k17.make_swizzled_transposer``), which makes those layouts copy-bound (design.md
§5). ``SPLITK`` > 1 splits K into slices (grid z), summed through a workspace by the last slice
of each tile (``kernels._splitk``): the few-rows products.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)`` per matrix; float32; any ``M, N, K >= 1``
(rows not 16-byte aligned: the scalar variant, with 4-byte copies in a rolled loop,
``_common.rolled``; the plan stages such products instead, ``plan.staging``). Rows of A past M
are clamped, K past its end zero-filled, columns of B past N clamped. Computes ``C = alpha *
A @ B + beta * C``; C is not read when ``beta == 0``. Compute capability 9.0 exactly (``sm_90a``).

Source: PTX ISA 8.x, "wgmma.mma_async" (``.tf32`` needs K-major SMEM operands; the register
fragment of A; D fragments); the transposed product is the usual BLAS identity (cuBLAS calls
row-major GEMMs this way); 3xTF32 from NVIDIA CUTLASS example 27 and Ootomo and Yokota (IJHPCA
2022), as stage 13.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float32
from ..device import SIMULATOR, SMEM_OPTIN_LIMIT, tile_grid
from ..ptx import cpasync
from ..ptx.mma import bits_float, float_bits, ldmatrix_x4, round_tf32_bits, split_tf32_bits
from ..ptx.vecmem import cols_view, load2, load4, rows_view, store4, tile_view
from ..ptx.wgmma import (
    CORE_BYTES,
    SW_ATOM,
    SW_ROW,
    SWIZZLE_128B,
    WARPGROUP,
    WGMMA_TF32,
    commit,
    fence,
    fence_proxy_async,
    mma_tf32_rs,
    smem_desc,
    wait,
)
from . import _splitk
from ._common import device_jit, unroll, zero_at
from ._epilogue import stores_for
from ._tunable import (
    LAYOUTS,
    SPLIT_ARGS,
    block_work,
    check_keys,
    check_rules,
    entry_kernel,
    valid_configs,
)
from .k12_tf32_mma_multistage import make_copier
from .k17_hgemm_wgmma import make_swizzled_copier, make_swizzled_transposer
from .stage import Stage

WG_N, MMA_K = WGMMA_TF32  # columns of C per warpgroup (the product's M: 64), K per product (8)
T = CORE_BYTES // 4  # floats per 16-byte chunk
STEPS_PER_ROW = SW_ROW // (4 * MMA_K)  # 8-deep steps per 128-byte row of the A tile (4)
#: Registers per thread besides the accumulators (B fragments of the products in flight,
#: addresses, descriptors, loop state).
REG_OVERHEAD = 40
SW_ALIGN = None if SIMULATOR else SW_ATOM  # the swizzle repeats every 1024 bytes

#: 256x128x32: two warpgroups of 64 columns x 256 rows (128 accumulators per thread), four
#: buffers (two tiles of copies in flight).
DEFAULT_CONFIG = dict(BM=256, BN=128, BK=32, NBUF=4, SPLITK=1)
KEYS = tuple(DEFAULT_CONFIG)
#: Accumulator sets per arithmetic mode (3xTF32: the FP32 sums and one tile's products).
SETS = {"tf32": 1, "3xtf32": 2}


def derived(cfg: Mapping[str, int], mode: str = "tf32", layout: str = "NN") -> dict:
    """Constants that follow from a configuration: threads, 16-byte chunks of the A tile, the B
    tile's pitch (``Bs[k, n]``: BN + 8 floats; B stored transposed, ``Bs[n, k]``: BK + 4),
    accumulators per thread and the SMEM footprint for operand ``layout`` (3xTF32: two more
    A-sized tiles for the small parts)."""
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS[:4])
    bs_pitch = BK + 4 if layout[1] == "T" else BN + 8
    a_elems, b_elems = BM * BK, (BN if layout[1] == "T" else BK) * bs_pitch
    lo_bufs = 2 if mode == "3xtf32" else 0
    return dict(
        NUM_THREADS=BN // WG_N * WARPGROUP,
        A_CHUNKS=BM * BK // T,
        BS_PITCH=bs_pitch,
        REGS=SETS[mode] * BM // 2,
        LO_BUFS=lo_bufs,
        SMEM_BYTES=4 * (NBUF * (a_elems + b_elems) + lo_bufs * a_elems),
    )


def check_config(cfg: Mapping[str, int], mode: str = "tf32") -> None:
    """Raise ``ValueError`` naming the violated constraint (for arithmetic ``mode``)."""
    check_keys(cfg, KEYS)
    BM, BN, BK, NBUF, SPLITK = (cfg[k] for k in KEYS)
    check_rules(
        cfg,
        [
            (
                BN > 0 and BN % WG_N == 0 and BN // WG_N <= 4,
                "BN must be 64, 128, 192 or 256 (one warpgroup per 64 columns)",
            ),
            (
                BM % 64 == 0 and 64 <= BM <= 256 and BK > 0 and BK % 32 == 0,
                "BM in 64..256 by 64 (the product's N) and BK a multiple of 32 (whole 128-byte "
                "swizzled rows)",
            ),
            (3 <= NBUF <= 8, "NBUF in 3..8 (two buffers are held by the running products)"),
            (1 <= SPLITK <= 64, "SPLITK (K slices, kernels._splitk) in 1..64"),
        ],
    )
    d = derived(cfg, mode)
    nt, limit = d["NUM_THREADS"], min(255, 65536 // d["NUM_THREADS"])
    check_rules(
        cfg,
        [
            (
                d["REGS"] + REG_OVERHEAD <= limit,
                f"{d['REGS']} accumulators per thread do not fit the {limit} registers a block of "
                f"{nt} threads may use",
            ),
            (
                d["A_CHUNKS"] % nt == 0 and (BK * BN // T) % nt == 0,
                f"the {nt} threads must split both tiles into 16-byte copies evenly",
            ),
            (
                d["SMEM_BYTES"] <= SMEM_OPTIN_LIMIT,
                f"{d['SMEM_BYTES']} B of SMEM > {SMEM_OPTIN_LIMIT}",
            ),
        ],
    )


@functools.cache
def space(mode: str = "tf32") -> tuple:
    """Candidate configurations for ``mode``: BM x 1-4 warpgroups x BK x NBUF, the valid ones."""
    return valid_configs(
        functools.partial(check_config, mode=mode),
        (
            dict(BM=bm, BN=bn, BK=bk, NBUF=nbuf, SPLITK=1)
            for bm in (64, 128, 192, 256)
            for bn in (64, 128, 192, 256)
            for bk in (32, 64)
            for nbuf in (3, 4, 5, 6)
        ),
    )


SPACE = space("tf32")


@device_jit
def _small(x):
    """``tf32(x - trunc_tf32(x))``: what the tensor cores' truncation of ``x`` drops, rounded to
    TF32 (as a float32)."""
    big = bits_float(float_bits(x) & -0x2000)
    return bits_float(round_tf32_bits(float_bits(x - big)))


def make_small_parts(per_thread: int, threads: int):
    """Device function ``split_all(As, Ls, tid)``: thread ``tid``'s ``per_thread`` 16-byte
    chunks (``tid + j * threads``) of an A tile's small parts, :func:`_small` of each float,
    written to the same (swizzled) place in ``Ls`` (3xTF32's second A operand)."""

    @device_jit
    def _split(j, As, Ls, tid):
        c = tid + j * threads
        x0, x1, x2, x3 = load4(As, c, 0)
        store4(Ls, c, 0, _small(x0), _small(x1), _small(x2), _small(x3))

    return unroll(per_thread, _split)


@device_jit
def _add(i, acc, part, base):
    acc[base + i] += part[i]


def make_add(count: int):
    """Device function ``add_all(acc, part, base)``: ``acc[base + i] += part[i]`` for ``i <
    count`` (a tile's 3xTF32 products, or a slice of them, into the FP32 sums; ``base`` a
    constant after inlining)."""
    return unroll(count, _add)


def make_rs_store(BM: int, epilogue=None):
    """Device function ``store_all(C, acc, m, n, alpha, beta, M, N, vec, E)``: the epilogue of a
    ``C^T = B^T A^T`` product whose register rows g, g + 8 stand for C columns n, n + 1 (row-major
    B): fragment i holds C rows ``m + 8 i`` and ``m + 8 i + 1`` of those two columns, stored as
    pairs (``store_c2``; ``vec``: 64 bits at a time) for ``i < BM / 8``; with a fused
    ``epilogue`` (``kernels._epilogue``, operands ``E``) applied to each."""
    store_c2 = stores_for(epilogue).store_c2

    @device_jit
    def _store(i, C, acc, m, n, alpha, beta, M, N, vec, E):
        r = m + 8 * i
        store_c2(C, r, n, acc[4 * i], acc[4 * i + 2], alpha, beta, M, N, vec, E)
        store_c2(C, r + 1, n, acc[4 * i + 1], acc[4 * i + 3], alpha, beta, M, N, vec, E)

    return unroll(BM // 8, _store)


@functools.cache
def _make_kernel(items: tuple, vec: bool, mode: str, layout: str = "NN", epilogue=None):
    cfg = dict(items)
    BM, BN, BK, NBUF, SPLITK = (cfg[k] for k in KEYS)
    d = derived(cfg, mode, layout)
    NT, A_CHUNKS, BS_PITCH, LO_BUFS = (
        d[k] for k in ("NUM_THREADS", "A_CHUNKS", "BS_PITCH", "LO_BUFS")
    )
    SPLIT = mode == "3xtf32"
    # Copies run DIST tiles ahead. TF32: into the buffer of tile t - 2 (tile t - 1's products
    # may still run); tile t must have landed at its top. 3xTF32: into tile t - 1's (done at
    # the end of tile t - 1), and tile t + 1 must have landed too (its small parts are made
    # during tile t).
    DIST = NBUF - 1 if SPLIT else NBUF - 2
    PENDING = DIST - 2 if SPLIT else DIST - 1  # copy groups allowed in flight at tile t's top
    FIRST_PENDING = DIST - 1  # ... when tile 0 must have landed
    STEPS = BK // MMA_K
    ACC = BM // 2  # FP32 accumulators per thread: the 64 x BM product in BM / 8 fragments
    LO_PER_THREAD = A_CHUNKS // NT
    LS_START, LS_N = (NBUF * A_CHUNKS * T, LO_BUFS) if SPLIT else (0, 1)
    A_T, B_T = layout[0] == "T", layout[1] == "T"  # A stored (K, M); B stored (N, K)
    BS_ROWS = BN if B_T else BK
    # A: 16-byte copies along K into the swizzled K-major tile, or (A stored column-major) one
    # 4-byte copy per element, transposed on the way
    copy_a = (
        make_swizzled_transposer(BM, BK, NT, T)
        if A_T
        else make_swizzled_copier(BM, BK, NT, True, T, vec)
    )
    copy_b_rows = make_copier(BS_ROWS, BN if not B_T else BK, NT, T)

    if B_T:

        @device_jit
        def copy_b(Bs, B, k0, col0, K, N, tid):  # Bs[n, k] from B stored (N, K)
            copy_b_rows(Bs, B, col0, k0, N, K, tid, False, vec)

        @device_jit
        def b_fragment(Bs, k, n):
            # four 8 x 4 matrices of Bs[n, k] (rows n .. n + 15, k .. k + 7), one ldmatrix: lane
            # (g, q) gets rows g and g + 8 at k = q and q + 4, the TF32 A fragment; its rows
            # 144 bytes apart hit 8 different 16-byte bank groups (the values' bits, as int32)
            return ldmatrix_x4(Bs, n, k)

        def make_store(epi):
            store_c = stores_for(epi).store_c

            @device_jit
            def _store(i, C, acc, m, n, alpha, beta, M, N, vec, E):
                # fragment i holds C^T rows (C columns) n, n + 8 x C rows m + 8 i (+1), stored
                # as scalars (``vec`` unused)
                r = m + 8 * i
                if r < M:
                    if n < N:
                        store_c(C, r, n, acc[4 * i], alpha, beta, E)
                    if n + 8 < N:
                        store_c(C, r, n + 8, acc[4 * i + 2], alpha, beta, E)
                if r + 1 < M:
                    if n < N:
                        store_c(C, r + 1, n, acc[4 * i + 1], alpha, beta, E)
                    if n + 8 < N:
                        store_c(C, r + 1, n + 8, acc[4 * i + 3], alpha, beta, E)

            return unroll(BM // 8, _store)

    else:

        @device_jit
        def copy_b(Bs, B, k0, col0, K, N, tid):  # Bs[k, n] from B stored (K, N)
            copy_b_rows(Bs, B, k0, col0, K, N, tid, True, vec)

        @device_jit
        def b_fragment(Bs, k, n):
            x0, x1 = load2(Bs, k, n)  # one 64-bit load per k; the values' bits, as int32
            x2, x3 = load2(Bs, k + 4, n)
            return float_bits(x0), float_bits(x1), float_bits(x2), float_bits(x3)

        def make_store(epi):
            return make_rs_store(BM, epi)  # C^T rows (C columns) n, n + 1

    store_all = make_store(epilogue)  # into C
    store_parts = store_all if epilogue is None else make_store(None)  # into the workspace

    @device_jit
    def _product(s, acc, As, da, Ls, dl, Bs, fn, fk):
        # the register operand, B^T, at k = 8 s of the tile: this lane's fragment from row fn,
        # column 8 s + fk of the B tile (B^T's rows 16 w + g, 16 w + g + 8: columns n, n + 1 of
        # the block tile, or n, n + 8 with B stored transposed)
        x0, x1, x2, x3 = b_fragment(Bs, s * MMA_K + fk, fn)
        # the SMEM operand, the A tile: column block s // 4 of BM rows of 128 bytes, 32 bytes
        # per step within its rows (descriptor starts in units of 16 bytes)
        off = ((s // STEPS_PER_ROW) * BM * SW_ROW + (s % STEPS_PER_ROW) * 4 * MMA_K) // 16
        if SPLIT:
            b0, s0 = split_tf32_bits(x0)
            b1, s1 = split_tf32_bits(x1)
            b2, s2 = split_tf32_bits(x2)
            b3, s3 = split_tf32_bits(x3)
            # this tile's products start from zero (the tensor cores' sums truncate): small
            # products first, then big * big
            mma_tf32_rs(acc, BM, s0, s1, s2, s3, As, da + off, 0 if s == 0 else 1)
            mma_tf32_rs(acc, BM, b0, b1, b2, b3, Ls, dl + off, 1)
            mma_tf32_rs(acc, BM, b0, b1, b2, b3, As, da + off, 1)
        else:
            mma_tf32_rs(
                acc,
                BM,
                round_tf32_bits(x0),
                round_tf32_bits(x1),
                round_tf32_bits(x2),
                round_tf32_bits(x3),
                As,
                da + off,
                1,
            )

    products = unroll(STEPS, _product)
    stores = stores_for(epilogue)
    fixup = _splitk.make_fixup(BM, BN, NT, SPLITK, False, stores)

    split_all = make_small_parts(LO_PER_THREAD, NT)
    zero_all = unroll(ACC, zero_at)
    add_all = make_add(ACC)

    @device_jit
    def copy_tiles(As, Bs, A, B, k0, row0, col0, M, N, K, tid):
        copy_a(As, A, row0, k0, M, K, tid)
        copy_b(Bs, B, k0, col0, K, N, tid)

    @device_jit
    def tile(As, Bs, nAs, nBs, A, B, k_next, row0, col0, M, N, K, tid, acc, fn, fk):
        cpasync.wait(PENDING)  # this thread's copies of tile t have landed...
        fence_proxy_async()  # ...and are visible to the tensor cores' reads
        cuda.syncthreads()  # everyone's; and every warpgroup has waited for tile t - 2
        # --- registers (B) and SMEM (A) -> tensor cores: BK / 8 products of 64 x BM x 8
        fence()
        da = smem_desc(As, 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B
        products(acc, As, da, As, da, Bs, fn, fk)
        commit()
        # --- GMEM -> SMEM: tile t + DIST into tile t - 2's buffer, while the products run
        copy_tiles(nAs, nBs, A, B, k_next, row0, col0, M, N, K, tid)
        cpasync.commit()
        wait(1, acc, BM)  # tile t - 1's products are done (tile t's may still run)

    @device_jit
    def tile_3x(
        As, Ls, Bs, nAs, nBs, As1, Ls1, A, B, k_next, row0, col0, M, N, K, tid, acc, part, fn, fk
    ):
        # 3xTF32: tile t's small parts (Ls) were made during tile t - 1; tile t + 1's (As1 ->
        # Ls1) are made here, while tile t's products run
        cpasync.wait(PENDING)  # this thread's copies of tiles t and t + 1 have landed...
        fence_proxy_async()  # ...and, with the small parts, are visible to the tensor cores
        cuda.syncthreads()  # everyone's; and every warpgroup is done with tile t - 1
        # --- registers (B) and SMEM (A, its small parts) -> tensor cores: three products of
        # 64 x BM x 8 per 8-deep step, into fresh accumulators
        fence()
        da = smem_desc(As, 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B
        dl = smem_desc(Ls, 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B
        products(part, As, da, Ls, dl, Bs, fn, fk)
        commit()
        # --- GMEM -> SMEM: tile t + DIST into tile t - 1's buffer
        copy_tiles(nAs, nBs, A, B, k_next, row0, col0, M, N, K, tid)
        cpasync.commit()
        # --- SMEM -> SMEM: tile t + 1's small parts (Ls1 was read by tile t - 1's products)
        split_all(As1, Ls1, tid)
        # --- this tile's products into the FP32 sums (ptxas serializes every product if an
        # accumulator is read before ``wait_group 0``)
        wait(0, part, BM)
        add_all(acc, part, 0)

    @device_jit
    def sgemm_tf32_wgmma(A3, B3, C3, W, L, alpha, beta, E):
        # A3 (batch, M, K), B3 (batch, K, N), C3 (batch, M, N): strided batches (grid z is the
        # batch index, or with SPLITK > 1 the K slice); A and B as stored, 2-D: rows of M or K,
        # rows of K or N. W, L: split-K's workspace and tile counters (untouched without it).
        M, K, N = A3.shape[1], A3.shape[2], B3.shape[2]
        bz, k_begin, k_end = block_work(K, BK, SPLITK)
        A = cols_view(A3, bz) if A_T else rows_view(A3, bz)
        B = cols_view(B3, bz) if B_T else rows_view(B3, bz)
        C = rows_view(C3, bz)
        # dynamic SMEM: NBUF A tiles (16-byte chunks, swizzled), 3xTF32's two tiles of A's
        # small parts (same layout), then NBUF B tiles (Bs[k, n], pitch BN + 8; B stored
        # transposed: Bs[n, k], pitch BK + 4)
        smem = cuda.shared.array(0, float32, alignment=SW_ALIGN)
        As = tile_view(smem, 0, (NBUF, A_CHUNKS, T))
        Ls = tile_view(smem, LS_START, (LS_N, A_CHUNKS, T))  # (TF32: As[0], never read)
        Bs = tile_view(smem, (NBUF + LO_BUFS) * A_CHUNKS * T, (NBUF, BS_ROWS, BS_PITCH))
        tid = cuda.threadIdx.x
        lane = tid % 32
        q = lane & 3
        w16 = (tid // 32) * 16  # warp w of warpgroup j: columns 64 j + 16 w .. + 15
        if B_T:  # lane (g, q): C columns n, n + 8; its ldmatrix row of Bs[n, k] and column
            n = w16 + (lane >> 2)
            fn, fk = w16 + (lane & 15), (lane >> 4) * 4
        else:  # C columns n, n + 1; Bs[k, n] at k = q (+4)
            n = w16 + 2 * (lane >> 2)
            fn, fk = n, q
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN

        acc = cuda.local.array(ACC, float32)
        part = cuda.local.array(ACC, float32)  # 3xTF32: one tile's products (else unused)
        zero_all(acc)

        # --- prologue: GMEM -> SMEM copies of tiles 0 .. DIST-1 in flight, one group each (K:
        # this block's slice k_begin .. k_end; everything past k_end reads as zeros)
        for s in range(DIST):
            if k_begin + s * BK < k_end:
                copy_tiles(As[s], Bs[s], A, B, k_begin + s * BK, row0, col0, M, N, k_end, tid)
            cpasync.commit()  # (possibly empty: keeps one group per tile)

        cb = 0  # buffer of tile t
        nb = DIST  # buffer of tile t + DIST
        k_next = k_begin + DIST * BK
        if SPLIT:
            cpasync.wait(FIRST_PENDING)  # tile 0 has landed...
            cuda.syncthreads()  # ...everyone's copies of it
            split_all(As[0], Ls[0], tid)
            lb = 0  # small-part buffer of tile t
            for _ in range(k_begin, k_end, BK):
                c1 = cb + 1 if cb + 1 < NBUF else 0
                tile_3x(
                    As[cb],
                    Ls[lb],
                    Bs[cb],
                    As[nb],
                    Bs[nb],
                    As[c1],
                    Ls[1 - lb],
                    A,
                    B,
                    k_next,
                    row0,
                    col0,
                    M,
                    N,
                    k_end,
                    tid,
                    acc,
                    part,
                    fn,
                    fk,
                )
                k_next += BK
                cb = c1
                nb = nb + 1 if nb + 1 < NBUF else 0
                lb = 1 - lb
        else:
            for _ in range(k_begin, k_end, BK):
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
                    k_end,
                    tid,
                    acc,
                    fn,
                    fk,
                )
                k_next += BK
                cb = cb + 1 if cb + 1 < NBUF else 0
                nb = nb + 1 if nb + 1 < NBUF else 0
            wait(0, acc, BM)
        cpasync.wait(0)  # no copy may still be writing SMEM when the block exits

        # --- epilogue: write C (transposed fragments: C rows 8 i + 2 q (+1), columns n (+1) or
        # n (+8)); split-K: the slice's partial sums to its rows of the workspace, then the last
        # slice of the tile to arrive sums them into C (kernels._splitk)
        if SPLITK == 1:
            store_all(C, acc, row0 + 2 * q, col0 + n, alpha, beta, M, N, vec, E)
        else:
            Wg = rows_view(W, 0)
            z0 = cuda.blockIdx.z * M
            one, zero = float32(1.0), float32(0.0)
            store_parts(Wg, acc, z0 + row0 + 2 * q, col0 + n, one, zero, z0 + M, N, vec, ())
            fixup(Wg, L, C, row0, col0, M, N, alpha, beta, vec, E)

    return entry_kernel("sgemm_tf32_wgmma", sgemm_tf32_wgmma, epilogue, launch_bounds=(NT, 1))


#: Per mode: stage name and label.
MODES = {
    "tf32": ("tf32_wgmma", "18: TF32 wgmma (C^T = B^T A^T, B from registers)"),
    "3xtf32": ("tf32x3_wgmma", "19: 3xTF32 on wgmma (FP32-accurate)"),
}


def make_stage(config: Mapping[str, int], mode: str = "tf32") -> Stage:
    """The stage for one configuration (validated by :func:`check_config`) and arithmetic
    ``mode`` (``"tf32"`` or ``"3xtf32"``)."""
    check_config(config, mode)
    cfg = {k: config[k] for k in KEYS}
    items = tuple(sorted(cfg.items()))
    d = derived(cfg, mode)
    name, label = MODES[mode]
    # every layout whose tiles fit SMEM (B stored transposed has its own tile: BN x (BK + 4))
    smem = {lay: derived(cfg, mode, lay)["SMEM_BYTES"] for lay in LAYOUTS}
    layouts = tuple(lay for lay in LAYOUTS if smem[lay] <= SMEM_OPTIN_LIMIT)

    def launch_config(M, N, K):
        return (*tile_grid(M, N, cfg["BM"], cfg["BN"]), cfg["SPLITK"]), (d["NUM_THREADS"],)

    def layout_kernel(vec, layout, epilogue=None):
        return _make_kernel(items, bool(vec), mode, layout, epilogue)

    return Stage(
        name=name,
        label=label,
        kernel=_make_kernel(items, True, mode),
        scalar_kernel=_make_kernel(items, False, mode),
        launch_config=launch_config,
        precision=mode,
        config=cfg,
        factory=functools.partial(make_stage, mode=mode),
        space=space(mode),
        check_config=functools.partial(check_config, mode=mode),
        dynamic_smem=d["SMEM_BYTES"],
        args=SPLIT_ARGS,
        split_k=cfg["SPLITK"],
        layouts=layouts,
        layout_kernel=layout_kernel,
        layout_smem={lay: smem[lay] for lay in layouts},
        threads_of=lambda c: c["BN"] // WG_N * WARPGROUP,
        min_cc=(9, 0),
        arch=(9, 0),
        tile=(cfg["BM"], cfg["BN"]),
        epilogue=True,
    )


STAGE = make_stage(DEFAULT_CONFIG)
