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

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any ``M, N,
K >= 1`` (rows not 16-byte aligned: the scalar variant, with 4-byte copies). Rows of A past M
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

from numba import cuda, float32

from ..device import SIMULATOR, SMEM_OPTIN_LIMIT, tile_grid
from ..ptx import cpasync
from ..ptx.mma import bits_float, float_bits, round_tf32_bits, split_tf32_bits
from ..ptx.vecmem import load2, load4, store4, tile_view
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
from ._common import device_jit, kernel_jit, store_c2, unroll, zero_at
from ._tunable import check_keys, check_rules, valid_configs
from .k12_tf32_mma_multistage import make_copier
from .k17_hgemm_wgmma import make_swizzled_copier
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
DEFAULT_CONFIG = dict(BM=256, BN=128, BK=32, NBUF=4)
KEYS = tuple(DEFAULT_CONFIG)
#: Accumulator sets per arithmetic mode (3xTF32: the FP32 sums and one tile's products).
SETS = {"tf32": 1, "3xtf32": 2}


def derived(cfg: Mapping[str, int], mode: str = "tf32") -> dict:
    """Constants that follow from a configuration: threads, 16-byte chunks of the A tile, the B
    tile's pitch (BN + 8 floats), accumulators per thread and the SMEM footprint (3xTF32: two
    more A-sized tiles for the small parts)."""
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    a_elems, b_elems = BM * BK, BK * (BN + 8)
    lo_bufs = 2 if mode == "3xtf32" else 0
    return dict(
        NUM_THREADS=BN // WG_N * WARPGROUP,
        A_CHUNKS=BM * BK // T,
        BS_PITCH=BN + 8,
        REGS=SETS[mode] * BM // 2,
        LO_BUFS=lo_bufs,
        SMEM_BYTES=4 * (NBUF * (a_elems + b_elems) + lo_bufs * a_elems),
    )


def check_config(cfg: Mapping[str, int], mode: str = "tf32") -> None:
    """Raise ``ValueError`` naming the violated constraint (for arithmetic ``mode``)."""
    check_keys(cfg, KEYS)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
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
            dict(BM=bm, BN=bn, BK=bk, NBUF=nbuf)
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


@functools.cache
def _make_kernel(items: tuple, vec: bool, mode: str):
    cfg = dict(items)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    d = derived(cfg, mode)
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
    copy_a = make_swizzled_copier(BM, BK, NT, True, T, vec)
    copy_b = make_copier(BK, BN, NT, T)

    @device_jit
    def _product(s, acc, As, da, Ls, dl, Bs, n, q):
        # the register operand, B^T: its rows 16 w + g and 16 w + g + 8 are columns n and n + 1
        # of the block tile (one 64-bit load), k = 8 s + q (+4) of the tile
        k = s * MMA_K + q
        x0, x1 = load2(Bs, k, n)
        x0, x1 = float_bits(x0), float_bits(x1)
        x2, x3 = load2(Bs, k + 4, n)
        x2, x3 = float_bits(x2), float_bits(x3)
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

    @device_jit
    def _split(j, As, Ls, tid):
        # small part of 4 floats of the A tile (same swizzled place in Ls): a - trunc_tf32(a),
        # rounded to TF32 (exact: the low 13 bits of a)
        c = tid + j * NT
        x0, x1, x2, x3 = load4(As, c, 0)
        store4(Ls, c, 0, _small(x0), _small(x1), _small(x2), _small(x3))

    split_all = unroll(LO_PER_THREAD, _split)

    zero_all = unroll(ACC, zero_at)

    @device_jit
    def _add(i, acc, part):
        acc[i] += part[i]

    add_all = unroll(ACC, _add)

    @device_jit
    def _store(i, C, acc, m, n, alpha, beta, M, N):
        # fragment i holds C^T rows (C columns) n, n + 1 x C rows m + 8 i (+1)
        r = m + 8 * i
        store_c2(C, r, n, acc[4 * i], acc[4 * i + 2], alpha, beta, M, N, vec)
        store_c2(C, r + 1, n, acc[4 * i + 1], acc[4 * i + 3], alpha, beta, M, N, vec)

    store_all = unroll(BM // 8, _store)

    @device_jit
    def copy_tiles(As, Bs, A, B, k0, row0, col0, M, N, K, tid):
        copy_a(As, A, row0, k0, M, K, tid)
        copy_b(Bs, B, k0, col0, K, N, tid, True, vec)

    @device_jit
    def tile(As, Bs, nAs, nBs, A, B, k_next, row0, col0, M, N, K, tid, acc, n, q):
        cpasync.wait(PENDING)  # this thread's copies of tile t have landed...
        fence_proxy_async()  # ...and are visible to the tensor cores' reads
        cuda.syncthreads()  # everyone's; and every warpgroup has waited for tile t - 2
        # --- registers (B) and SMEM (A) -> tensor cores: BK / 8 products of 64 x BM x 8
        fence()
        da = smem_desc(As, 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B
        products(acc, As, da, As, da, Bs, n, q)
        commit()
        # --- GMEM -> SMEM: tile t + DIST into tile t - 2's buffer, while the products run
        copy_tiles(nAs, nBs, A, B, k_next, row0, col0, M, N, K, tid)
        cpasync.commit()
        wait(1, acc, BM)  # tile t - 1's products are done (tile t's may still run)

    @device_jit
    def tile_3x(
        As, Ls, Bs, nAs, nBs, As1, Ls1, A, B, k_next, row0, col0, M, N, K, tid, acc, part, n, q
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
        products(part, As, da, Ls, dl, Bs, n, q)
        commit()
        # --- GMEM -> SMEM: tile t + DIST into tile t - 1's buffer
        copy_tiles(nAs, nBs, A, B, k_next, row0, col0, M, N, K, tid)
        cpasync.commit()
        # --- SMEM -> SMEM: tile t + 1's small parts (Ls1 was read by tile t - 1's products)
        split_all(As1, Ls1, tid)
        # --- this tile's products into the FP32 sums (ptxas serializes every product if an
        # accumulator is read before ``wait_group 0``)
        wait(0, part, BM)
        add_all(acc, part)

    @kernel_jit(launch_bounds=(NT, 1))
    def sgemm_tf32_wgmma(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        # dynamic SMEM: NBUF A tiles (16-byte chunks, swizzled), 3xTF32's two tiles of A's
        # small parts (same layout), then NBUF B tiles (Bs[k, n], pitch BN + 8)
        smem = cuda.shared.array(0, float32, alignment=SW_ALIGN)
        As = tile_view(smem, 0, (NBUF, A_CHUNKS, T))
        Ls = tile_view(smem, LS_START, (LS_N, A_CHUNKS, T))  # (TF32: As[0], never read)
        Bs = tile_view(smem, (NBUF + LO_BUFS) * A_CHUNKS * T, (NBUF, BK, BS_PITCH))
        tid = cuda.threadIdx.x
        lane = tid % 32
        n = (tid // 32) * 16 + 2 * (lane >> 2)  # warp w of warpgroup j: columns 64 j + 16 w + 2 g
        q = lane & 3
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN

        acc = cuda.local.array(ACC, float32)
        part = cuda.local.array(ACC, float32)  # 3xTF32: one tile's products (else unused)
        zero_all(acc)

        # --- prologue: GMEM -> SMEM copies of tiles 0 .. DIST-1 in flight, one group each
        for s in range(DIST):
            if s * BK < K:
                copy_tiles(As[s], Bs[s], A, B, s * BK, row0, col0, M, N, K, tid)
            cpasync.commit()  # (possibly empty: keeps one group per tile)

        cb = 0  # buffer of tile t
        nb = DIST  # buffer of tile t + DIST
        k_next = DIST * BK
        if SPLIT:
            cpasync.wait(FIRST_PENDING)  # tile 0 has landed...
            cuda.syncthreads()  # ...everyone's copies of it
            split_all(As[0], Ls[0], tid)
            lb = 0  # small-part buffer of tile t
            for _ in range(0, K, BK):
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
                    K,
                    tid,
                    acc,
                    part,
                    n,
                    q,
                )
                k_next += BK
                cb = c1
                nb = nb + 1 if nb + 1 < NBUF else 0
                lb = 1 - lb
        else:
            for _ in range(0, K, BK):
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
                    n,
                    q,
                )
                k_next += BK
                cb = cb + 1 if cb + 1 < NBUF else 0
                nb = nb + 1 if nb + 1 < NBUF else 0
            wait(0, acc, BM)
        cpasync.wait(0)  # no copy may still be writing SMEM when the block exits

        # --- epilogue: write C (transposed fragments: C rows 8 i + 2 q (+1), columns n (+1))
        store_all(C, acc, row0 + 2 * q, col0 + n, alpha, beta, M, N)

    return sgemm_tf32_wgmma


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
        space=space(mode),
        check_config=functools.partial(check_config, mode=mode),
        dynamic_smem=d["SMEM_BYTES"],
        min_cc=(9, 0),
        arch=(9, 0),
        tile=(cfg["BM"], cfg["BN"]),
    )


STAGE = make_stage(DEFAULT_CONFIG)
