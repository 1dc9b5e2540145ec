"""Stage 17, hgemm_wgmma: FP16 on Hopper's warpgroup tensor cores (``wgmma``), FP32 accumulate.

From ``hgemm_mma`` (stage 14: the same cp.async ring of FP16 tiles, FP32 accumulators): the
product is no longer a warp's ``mma.sync`` fed fragment by fragment from registers, but
``wgmma.mma_async`` (``numba_gemm.ptx.wgmma``): each *warpgroup* (4 warps, 128 threads) owns 64 rows
of the block tile and, per 16-deep step, issues one ``64 x BN x 16`` product whose operands the
tensor cores read straight from SMEM through two 64-bit matrix descriptors. No ``ldmatrix``, no
fragment registers: the warps only copy tiles and issue products, and the products run
asynchronously while the next tiles' copies are issued. This is what lifts the ``mma.sync``
ceiling (~61 % of the dense tensor peak on an H200).

SMEM layout: the 128-byte swizzle the descriptors understand. The A tile (``BM x BK``, K-major
as A lies) is stored as rows of 128 bytes (64 halves of K; BK = 128 is two such column blocks,
one after the other), 16-byte chunk ``kc`` of row ``r`` at chunk ``kc ^ (r % 8)`` of the row;
the B tile (``BK x BN``, N-major as B lies, read with the instruction's ``trans-b``) as rows of
128 bytes of N, one per k, in 64-column blocks ``BK * 128`` bytes apart (the descriptor's
``lbo``), chunk ``nc`` of row ``k`` at ``nc ^ (k % 8)``. A warp's 32 copies read four whole
128-byte lines of GMEM and write four whole rows of SMEM: 32 banks, no conflict. (The
no-swizzle core-matrix layout, whose warps copy half lines of 8 rows, ran 2.3x slower on an H200,
194 against 440 TFLOP/s at 4096^3, its warps stalled on the copies; from SMEM alone both layouts
issue 970 TFLOP/s: docs/design.md.) A 16-deep step moves A's
descriptor 32 bytes along its rows and B's 16 rows down.

Pipeline: an NBUF-deep ring; the products of tile t are left running (``wgmma.wait_group 1``)
while tile t + 1's are issued, so the copies issued at tile t go into the buffer of tile t - 2
(the block barrier at the top of each tile orders every warpgroup's wait for tile t - 2 before
any copy into its buffer): NBUF - 2 tiles of copies in flight. Each thread fences its landed
copies for the tensor cores (``fence.proxy.async``) before the barrier.

Shapes: A ``(M, K)``, B ``(K, N)`` float16; C ``(M, N)`` float32 (or float16 through
``api.hgemm(out_dtype=...)``); row-major, C-contiguous, rows 16-byte aligned (``K % 8 == 0``,
``N % 8 == 0``; there is no scalar variant). Rows of A past M are clamped, K past its end
zero-filled, columns of B past N clamped. Computes ``C = alpha * A @ B + beta * C`` with FP32
products and sums; C is not read when ``beta == 0``. Compute capability 9.0 exactly (``sm_90a``:
wgmma exists on Hopper only).

Source: PTX ISA 8.x, "wgmma.mma_async" (matrix descriptors, shared memory matrix layouts, D
fragments); NVIDIA CUTLASS sm_90 GEMMs (``KernelCpAsyncWarpSpecialized`` mainloops: cp.async
feeding GMMA, 128x256x64 tiles of two consumer warpgroups) and CuTe's canonical GMMA layouts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float16, float32
from ..device import SIMULATOR, SMEM_OPTIN_LIMIT, tile_grid
from ..ptx import cpasync
from ..ptx.vecmem import tile_view
from ..ptx.wgmma import (
    CORE_BYTES,
    SW_ATOM,
    SW_ROW,
    SWIZZLE_128B,
    WARPGROUP,
    WGMMA_F16,
    commit,
    fence,
    fence_proxy_async,
    mma_f16,
    smem_desc,
    wait,
)
from ._common import device_jit, kernel_jit, rolled, store_c2, unroll, zero_at
from ._tunable import check_keys, check_rules, valid_configs
from .stage import Stage

WG_M, MMA_K = WGMMA_F16  # rows of C per warpgroup (64), K per product (16)
T = CORE_BYTES // 2  # FP16 elements per 16-byte chunk
#: Registers per thread besides the accumulators (addresses, descriptors, loop state): ptxas
#: needs 154 for 128 accumulators (a 256x256 tile of 512 threads, which cannot have them).
REG_OVERHEAD = 32
ROW_CHUNKS = SW_ROW // CORE_BYTES  # 16-byte chunks per 128-byte swizzled row (8)
#: The swizzle pattern repeats every 1024 bytes of address: the tiles start on such a boundary.
SW_ALIGN = None if SIMULATOR else SW_ATOM

#: 128x256x64: two warpgroups of 64 x 256 (128 FP32 accumulators per thread), four buffers
#: (192 KB of SMEM, two tiles of copies in flight). CUTLASS's sm_90 FP16 default tile shape.
DEFAULT_CONFIG = dict(BM=128, BN=256, BK=64, NBUF=4)
KEYS = tuple(DEFAULT_CONFIG)


def derived(cfg: Mapping[str, int]) -> dict:
    """Constants that follow from a configuration: threads, 16-byte chunks per tile, B's
    descriptor ``lbo`` (bytes between its 64-column blocks) and the SMEM footprint. (Both
    descriptors' ``sbo`` is one 1024-byte swizzle atom: 8 rows of 128 bytes.)"""
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    return dict(
        NUM_THREADS=BM // WG_M * WARPGROUP,
        A_CHUNKS=BM * BK // T,
        B_CHUNKS=BK * BN // T,
        LBO_B=BK * SW_ROW,
        SMEM_BYTES=2 * NBUF * (BM * BK + BK * BN),
    )


def accumulators_fit(acc: int, threads: int) -> tuple[bool, str]:
    """The ``check_rules`` rule that ``acc`` FP32 accumulators per thread (plus
    :data:`REG_OVERHEAD`) fit the registers a block of ``threads`` may use."""
    return (
        acc + REG_OVERHEAD <= min(255, 65536 // threads),
        f"{acc} accumulators per thread do not fit the {65536 // threads} registers a "
        f"block of {threads} threads may use",
    )


def check_config(cfg: Mapping[str, int]) -> None:
    """Raise ``ValueError`` naming the violated constraint."""
    check_keys(cfg, KEYS)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    check_rules(
        cfg,
        [
            (
                BM > 0 and BM % WG_M == 0 and BM // WG_M <= 4,
                "BM must be 64, 128, 192 or 256 (one warpgroup per 64 rows)",
            ),
            (
                BN % 64 == 0 and 64 <= BN <= 256 and BK > 0 and BK % 64 == 0,
                "BN in 64..256 and BK multiples of 64 (whole 128-byte swizzled rows; the "
                "product's N is at most 256)",
            ),
            (3 <= NBUF <= 8, "NBUF in 3..8 (two buffers are held by the running products)"),
        ],
    )
    d = derived(cfg)
    nt = d["NUM_THREADS"]
    check_rules(
        cfg,
        [
            accumulators_fit(BN // 2, nt),
            (
                d["A_CHUNKS"] % nt == 0 and d["B_CHUNKS"] % nt == 0,
                f"the {nt} threads must split both tiles into 16-byte copies evenly",
            ),
            (
                d["SMEM_BYTES"] <= SMEM_OPTIN_LIMIT,
                f"{d['SMEM_BYTES']} B of SMEM > {SMEM_OPTIN_LIMIT}",
            ),
        ],
    )


#: Candidates: block tiles of 1-4 warpgroups x BN x BK x NBUF, the valid ones.
SPACE = valid_configs(
    check_config,
    (
        dict(BM=bm, BN=bn, BK=bk, NBUF=nbuf)
        for bm in (64, 128, 192, 256)
        for bn in (64, 128, 192, 256)
        for bk in (64, 128)
        for nbuf in (3, 4, 5, 6)
    ),
)


def swizzled_chunk(rows: int):
    """``chunk(r, c)``: where chunk ``c`` of row ``r`` of a ``rows``-row tile lies in the 128-byte
    swizzled layout: column block ``c // 8`` of ``rows`` rows of 8 chunks, chunk ``(c % 8) ^ (r %
    8)`` of its row."""

    def _dst(r, c):
        return (c // ROW_CHUNKS) * rows * ROW_CHUNKS + r * ROW_CHUNKS + ((c % ROW_CHUNKS) ^ (r % 8))

    return device_jit(_dst)


def make_swizzled_copier(
    rows: int, cols: int, threads: int, k_major: bool, t: int = T, vec: bool = True
):
    """``copy(Xs, X, r0, c0, R, C, tid)``: this thread's cp.async copies of the ``rows x cols``
    tile of ``X`` (``R x C``) at ``(r0, c0)`` into ``Xs`` (``(chunks, t)``: 16-byte chunks of
    ``t`` elements) in the 128-byte swizzled layout: chunk ``c`` of tile row ``r`` goes to chunk
    ``(c // 8) * rows * 8 + r * 8 + ((c % 8) ^ (r % 8))``. Consecutive threads copy
    consecutive chunks of a row (``vec``: 16 bytes each; else 4-byte copies of single FP32
    elements, for rows not 16-byte aligned). ``k_major`` (A): the columns are K, zero-filled
    past its end, rows (M) clamped into X; else (B) the rows are K, zero-filled, columns (N)
    clamped."""
    cpr = cols // t
    dst_chunk = swizzled_chunk(rows)

    @device_jit
    def _copy(j, Xs, X, r0, c0, R, C, tid):
        i = tid + j * threads
        r, c = i // cpr, i % cpr
        src_r, src_c = r0 + r, c0 + c * t
        ok = src_c < C if k_major else src_r < R
        cpasync.copy_async(Xs, dst_chunk(r, c), 0, X, min(src_r, R - 1), min(src_c, C - t), 16, ok)

    @device_jit
    def _copy1(j, Xs, X, r0, c0, R, C, tid):
        i = tid + j * threads
        r, e = i // cols, i % cols
        src_r, src_c = r0 + r, c0 + e
        ok = src_c < C if k_major else src_r < R
        cpasync.copy_async(
            Xs, dst_chunk(r, e // t), e % t, X, min(src_r, R - 1), min(src_c, C - 1), 4, ok
        )

    if vec:
        return unroll(rows * cols // t // threads, _copy)
    return rolled(rows * cols // threads, _copy1)


def make_swizzled_transposer(rows: int, cols: int, threads: int, t: int):
    """``copy(Xs, Xt, r0, c0, R, C, tid)``: as :func:`make_swizzled_copier` with ``k_major``
    (the tile's columns are K, zero-filled past ``C``; rows clamped into ``R``), but from a
    source stored *transposed*: element ``(r, c)`` of the tile is ``Xt[c0 + c, r0 + r]`` (A
    stored column-major, ``(K, M)``, for a K-major SMEM operand). One 4-byte copy per element:
    each warp copies 8 consecutive tile rows x 4 consecutive columns (four 32-byte GMEM
    sectors), which land in 8 different swizzled chunks x 4 positions: 32 banks, no
    conflict. ``t``: elements per 16-byte chunk (4: FP32 only)."""
    per_warp_rows = 8  # 8 rows x 4 columns per warp
    row_groups = rows // per_warp_rows
    dst_chunk = swizzled_chunk(rows)

    @device_jit
    def _copy1(j, Xs, Xt, r0, c0, R, C, tid):
        i = tid + j * threads
        lane, w = i % 32, i // 32
        r = (w % row_groups) * per_warp_rows + lane % per_warp_rows
        c = (w // row_groups) * 4 + lane // per_warp_rows
        src_r, src_c = c0 + c, r0 + r  # Xt is (C, R): its rows are the tile's columns
        cpasync.copy_async(
            Xs, dst_chunk(r, c // t), c % t, Xt, min(src_r, C - 1), min(src_c, R - 1), 4, src_r < C
        )

    return rolled(rows * cols // threads, _copy1)


@functools.cache
def _make_kernel(items: tuple, layout: str = "NN"):
    cfg = dict(items)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    d = derived(cfg)
    NT, A_CHUNKS, B_CHUNKS, LBO_B = (d[k] for k in ("NUM_THREADS", "A_CHUNKS", "B_CHUNKS", "LBO_B"))
    DIST = NBUF - 2  # tiles of copies in flight
    PENDING = DIST - 1  # copy groups allowed in flight when tile t must have landed
    STEPS = BK // MMA_K
    ACC = BN // 2  # FP32 accumulators per thread: the 64 x BN product in BN / 8 fragments
    STEPS_PER_ROW = SW_ROW // (2 * MMA_K)  # 16-deep steps per 128-byte row of A (4)
    copy_a = make_swizzled_copier(BM, BK, NT, True)
    B_T = layout == "NT"  # B stored (N, K): K-major like A, no trans-b
    if B_T:
        copy_bt = make_swizzled_copier(BN, BK, NT, True)

        @device_jit
        def copy_b(Bs, B, k0, col0, K, N, tid):  # rows of N, 128-byte rows of K
            copy_bt(Bs, B, col0, k0, N, K, tid)

    else:
        copy_b = make_swizzled_copier(BK, BN, NT, False)

    @device_jit
    def _product(s, acc, As, da, Bs, db):
        # step s (descriptor starts in 16 bytes): A's column block s // 4, 32 bytes per step
        # within its rows; B 16 rows of 128 bytes down
        a_off = ((s // STEPS_PER_ROW) * BM * SW_ROW + (s % STEPS_PER_ROW) * 2 * MMA_K) // 16
        if B_T:  # B K-major as A: BN rows of 128 bytes, 32 bytes per step
            b_off = ((s // STEPS_PER_ROW) * BN * SW_ROW + (s % STEPS_PER_ROW) * 2 * MMA_K) // 16
            mma_f16(acc, BN, As, da + a_off, Bs, db + b_off, 1, 0)
        else:
            mma_f16(acc, BN, As, da + a_off, Bs, db + s * MMA_K * SW_ROW // 16, 1, 1)

    products = unroll(STEPS, _product)

    zero_all = unroll(ACC, zero_at)

    @device_jit
    def _store(i, C, acc, r, c0, alpha, beta, M, N):
        # columns c, c + 1 of rows r and r + 8: one 64-bit (FP16 C: 32-bit) store each
        c = c0 + 8 * i
        store_c2(C, r, c, acc[4 * i], acc[4 * i + 1], alpha, beta, M, N, True)
        store_c2(C, r + 8, c, acc[4 * i + 2], acc[4 * i + 3], alpha, beta, M, N, True)

    store_all = unroll(BN // 8, _store)

    @device_jit
    def copy_tiles(As, Bs, A, B, k0, row0, col0, M, N, K, tid):
        copy_a(As, A, row0, k0, M, K, tid)
        copy_b(Bs, B, k0, col0, K, N, tid)

    @kernel_jit(launch_bounds=(NT, 1))
    def hgemm_wgmma(A, B, C, alpha, beta):
        # B as stored: (K, N), or (N, K) for B stored transposed (x @ W.T)
        M, K = A.shape
        N = B.shape[0] if B_T else B.shape[1]
        # dynamic SMEM: NBUF A tiles, then NBUF B tiles, each as 16-byte chunks, swizzled
        smem = cuda.shared.array(0, float16, alignment=SW_ALIGN)
        As = tile_view(smem, 0, (NBUF, A_CHUNKS, T))
        Bs = tile_view(smem, NBUF * A_CHUNKS * T, (NBUF, B_CHUNKS, T))
        tid = cuda.threadIdx.x
        wg = tid // WARPGROUP
        a_chunk = wg * WG_M * ROW_CHUNKS  # this warpgroup's 64 rows start at this chunk
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN

        acc = cuda.local.array(ACC, float32)
        zero_all(acc)

        # --- prologue: GMEM -> SMEM copies of tiles 0 .. DIST-1 in flight, one group each
        for s in range(DIST):
            if s * BK < K:
                copy_tiles(As[s], Bs[s], A, B, s * BK, row0, col0, M, N, K, tid)
            cpasync.commit()  # (possibly empty: keeps one group per tile)

        cb = 0  # buffer of tile t
        nb = DIST  # buffer of tile t + DIST (= the one tile t - 2 used)
        k_next = DIST * BK
        for _ in range(0, K, BK):
            cpasync.wait(PENDING)  # this thread's copies of tile t have landed...
            fence_proxy_async()  # ...and are visible to the tensor cores' reads
            cuda.syncthreads()  # everyone's; and every warpgroup has waited for tile t - 2
            # --- SMEM -> tensor cores: BK / 16 products of 64 x BN x 16, left running
            fence()
            # (A's lbo is unused by a K-major swizzled operand; 16, the smallest, is passed)
            products(
                acc,
                As[cb],
                smem_desc(As[cb], a_chunk, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B,
                Bs[cb],
                smem_desc(Bs[cb], 0, 0, CORE_BYTES if B_T else LBO_B, SW_ATOM) | SWIZZLE_128B,
            )
            commit()
            # --- GMEM -> SMEM: tile t + DIST into tile t - 2's buffer (past K: zero-filled,
            # never read), while the products run
            copy_tiles(As[nb], Bs[nb], A, B, k_next, row0, col0, M, N, K, tid)
            cpasync.commit()
            wait(1, acc, BN)  # tile t - 1's products are done (tile t's may still run)
            k_next += BK
            cb = cb + 1 if cb + 1 < NBUF else 0
            nb = nb + 1 if nb + 1 < NBUF else 0
        wait(0, acc, BN)
        cpasync.wait(0)  # no copy may still be writing SMEM when the block exits

        # --- epilogue: write C (lane (g, q) of warp w: rows 16 w + g (+ 8), columns 2 q (+ 1)
        # of each 8-column fragment)
        lane = tid % 32
        r = row0 + wg * WG_M + ((tid // 32) % 4) * 16 + (lane >> 2)
        store_all(C, acc, r, col0 + 2 * (lane & 3), alpha, beta, M, N)

    return hgemm_wgmma


def make_stage(config: Mapping[str, int]) -> Stage:
    """The stage for one configuration (validated by :func:`check_config`)."""
    check_config(config)
    cfg = {k: config[k] for k in KEYS}
    d = derived(cfg)

    def launch_config(M, N, K):
        return tile_grid(M, N, cfg["BM"], cfg["BN"]), (d["NUM_THREADS"],)

    return Stage(
        name="hgemm_wgmma",
        label="17: FP16 wgmma (Hopper warpgroup MMA from SMEM)",
        kernel=_make_kernel(tuple(sorted(cfg.items()))),
        layouts=("NN", "NT"),
        layout_kernel=lambda vec, layout: _make_kernel(tuple(sorted(cfg.items())), layout),
        launch_config=launch_config,
        precision="fp16",
        config=cfg,
        factory=make_stage,
        space=SPACE,
        check_config=check_config,
        dynamic_smem=d["SMEM_BYTES"],
        min_cc=(9, 0),
        arch=(9, 0),
        tile=(cfg["BM"], cfg["BN"]),
        args="HHAff",
    )


STAGE = make_stage(DEFAULT_CONFIG)
