"""Stage 8, warptiling: block tile -> warp tile -> thread tile, with tunable tile sizes.

From ``bank_conflict_free``: a level is added between the block and the thread. The block tile
(BM x BN) is split among warps as WM x WN warp tiles; a warp walks its tile as WMITER x WNITER
sub-tiles of (WSUBM x WSUBN), and in each sub-tile its 32 lanes hold a (WSUBM/TM) x (WSUBN/TN)
grid of TM x TN thread tiles. So:

- a warp's SMEM reads per k cover only WM + WN floats of the block tile (its own rows/columns),
  each read as float4 by the lanes that need it: with TM = TN = 4, the lanes of one sub-tile read
  contiguous 16-byte chunks (one wavefront per LDS.128, conflict-free, the rest broadcast);
- each thread still holds WMITER*TM x WNITER*TN accumulators (8x8 by default) and reuses every
  fragment register WNITER*TN (WMITER*TM) times, walking its outer product row by row in
  serpentine order (so that consecutive FMAs share an operand: ptxas's register reuse cache);
- the tile sizes are parameters: ``make_stage(config)`` builds the stage for any configuration
  that passes ``check_config``; ``python -m numba_gemm.tools.tune`` sweeps ``SPACE``.

A's tile is stored transposed (``As[k, m]``) with a pitch of BM + 4 floats (rows stay 16-byte
aligned; stores are at most 2-way conflicted, see docs/design.md). GMEM accesses are 128-bit when
every operand's rows are 16-byte aligned (``devarray``'s alignment rule), scalar otherwise
(``Stage.scalar_kernel``); rows/columns past M/N are clamped (never stored), elements past K
zero-filled, as in stage 6. The scalar variant spreads a thread's TN columns of C a row of lanes
apart, so that its 32-bit stores (and loads of B) cover whole sectors (``make_column_order``).
When only C's rows are unaligned, a third variant loads A and B 128 bits at a time and stores C
as the scalar one does (``registry.VECTOR_LOADS``; B read along K: ``x @ W.T`` with an odd N).

From here on the kernels also leave the teaching form's single row-major layout: A, B and C are
batches of strided matrices (``A: (batch, M, K)``, ``B: (batch, K, N)``, ``C: (batch, M, N)``,
3-D arrays of any strides with a unit stride in one of the last two dimensions; batch stride 0
broadcasts), A and B each row- or column-major (layouts NN, NT, TN, TT, see ``_tunable``), any
row pitch; grid z runs over the batch. A transposed operand only changes which way its GMEM tile
is read (``make_mover``); SMEM holds ``As[k, m]`` and ``Bs[k, n]`` whatever the layout.

Shapes: as above, float32; any ``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C`` for
each matrix of the batch; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernel 10 (warptiling), after NVIDIA CUTLASS's hierarchical GEMM
("CUTLASS: Fast Linear Algebra in CUDA C++", NVIDIA blog, 2017: thread-block, warp and thread
tiles).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..backend import cuda, float32
from ..device import WARP_SIZE as _WARP
from ..ptx.vecmem import SMEM_ALIGN, cols_view, load4, rows_view, store4
from . import _tunable as tun
from ._common import device_jit, load_a4, load_b4, load_b_cols, unroll
from .stage import Stage

#: Tile configuration used when no tuning result is available (one 128x128 block of 8 warps,
#: each warp 64x32 as 2x2 sub-tiles of 32x16, each thread 2x2 tiles of 4x4). See ``_tunable``
#: for the keys.
DEFAULT_CONFIG = dict(BM=128, BN=128, BK=16, WM=64, WN=32, WNITER=2, TM=4, TN=4, MINB=0, SPLITK=1)


def check_config(cfg: Mapping[str, int]) -> None:
    """Raise ``ValueError`` if ``cfg`` is not a valid warptiling configuration (48 KB static SMEM,
    one copy of each tile)."""
    tun.check_config(cfg)


SPACE = tun.make_space(check_config)


class Parts(NamedTuple):
    """The device functions of one configuration and layout (see :func:`make_parts`)."""

    d: dict
    a_view: Any
    b_view: Any
    thread_origin: Any
    a_coords: Any
    b_coords: Any
    load_tiles: Any
    store_tiles: Any
    mma_tile: Any
    store_with: Any
    b_slot: Any


def make_column_order(WSUBN: int, TN: int):
    """``(column, slot)``: ``column(s)`` is the column of the block tile that SMEM column ``s`` of
    the B tile holds in the *scalar* variant (in the vector variant, column ``s`` itself);
    ``slot(o)``, the SMEM column of tile column ``o`` (the inverse).

    The scalar variant's stores are 32-bit (rows of C not 16-byte aligned). With a thread's TN
    columns consecutive, the LANES_N lanes along a row of a warp sub-tile sit TN floats apart, so
    each store instruction writes 4 of every 4 * TN bytes: with TN = 4 a quarter of each 32-byte
    sector it touches, four times the L2 write traffic of the vector epilogue (ncu at 256 x 50260
    x 768: 230 against 58 MB through the L1 -> L2 crossbar, 0.524 against 0.462 ms;
    docs/design.md).
    Instead, in each WSUBN-wide sub-tile, lane ``l`` of a row holds columns ``l, l + LANES_N,
    ..., l + (TN - 1) * LANES_N``: the row's lanes store LANES_N consecutive floats per
    instruction. SMEM keeps the order the FMA core reads (a thread's TN floats contiguous, one
    LDS.128 per 4), so only the GMEM side changes: SMEM column ``g + TN * l + i`` (``g`` the
    sub-tile's first) holds tile column ``g + l + LANES_N * i``, and a thread's loads of 4
    consecutive SMEM columns read columns LANES_N apart, a warp's 32 loads whole sectors too.
    """
    LANES_N = WSUBN // TN

    @device_jit
    def column(s):
        c = s % WSUBN
        return s - c + c // TN + (c % TN) * LANES_N

    @device_jit
    def slot(o):
        c = o % WSUBN
        return o - c + (c % LANES_N) * TN + c // LANES_N

    return column, slot


@device_jit
def same_column(s):
    """The identity column order (A's, and B's in the vector variant)."""
    return s


def make_mover(
    extent: int, BK: int, threads: int, k_contiguous: bool, column=same_column, step: int = 1
):
    """GMEM -> registers -> SMEM for one operand's ``BK x extent`` tile (extent BM for A, BN for
    B), from its 2-D storage view (``vecmem.rows_view``/``cols_view``).

    ``k_contiguous``: storage rows are M (N) and K runs along them (A in layout N, B in T): a
    thread reads float4s along K of one row and stores them transposed, ``Xs[k, o]``; rows past
    the matrix are clamped (they only feed outputs never stored), K past ``k_end`` zero-filled.
    Else storage rows are K (A in T, B in N): float4s along M (N), stored as they are.

    ``column``, ``step`` (B, :func:`make_column_order`): in the scalar variant, SMEM column
    ``o`` of the tile holds tile column ``column(o)``, and SMEM columns ``o .. o+3`` (``o % 4 ==
    0``) hold columns ``step`` apart. The vector variant keeps the identity order. The
    ``VECTOR_LOADS`` variant (``vec == 2``; C stored as the scalar variant stores it) keeps the
    scalar order with 128-bit loads where they run along K; along M (N) a reordered tile's loads
    stay scalar (its four SMEM columns are not consecutive in GMEM).

    Returns ``(coords, load_all, store_all)``: ``coords(tid) -> (p, q)``, this thread's first
    float4 (storage row, column) in the tile; ``load_all(X, regs, k0, p, q, o0, olim, k_end,
    vec)`` and ``store_all(Xs, regs, p, q)``, unrolled over the thread's share of float4s.
    """
    loads = (extent * BK // 4) // threads
    IDENTITY = column is same_column  # (A) no reordering: 128-bit loads whenever vec
    run = BK if k_contiguous else extent  # floats along a storage row of the tile
    stride = threads // (run // 4)  # storage rows covered per pass

    @device_jit
    def coords(tid):
        return tid // (run // 4), (tid % (run // 4)) * 4

    if k_contiguous:

        @device_jit
        def _load(l, X, regs, k0, p, q, o0, olim, k_end, vec):
            o = p + l * stride
            if vec != 1:
                o = column(o)  # the scalar C stores' order (make_column_order)
            r = min(o0 + o, olim - 1)  # clamp: rows past M (N) are never stored
            regs[4 * l], regs[4 * l + 1], regs[4 * l + 2], regs[4 * l + 3] = load_a4(
                X, r, k0 + q, k_end, vec
            )

        @device_jit
        def _store(l, Xs, regs, p, q):
            o = p + l * stride
            for i in range(4):  # transposing: Xs[k, o]
                Xs[q + i, o] = regs[4 * l + i]
    else:

        @device_jit
        def _load(l, X, regs, k0, p, q, o0, olim, k_end, vec):
            k = k0 + p + l * stride
            if vec == 1 or (vec and IDENTITY):
                regs[4 * l], regs[4 * l + 1], regs[4 * l + 2], regs[4 * l + 3] = load_b4(
                    X, k, o0 + q, k_end, olim, True
                )
            else:  # the scalar variant's order: columns ``step`` apart
                regs[4 * l], regs[4 * l + 1], regs[4 * l + 2], regs[4 * l + 3] = load_b_cols(
                    X, k, o0 + column(q), step, k_end, olim, False
                )

        @device_jit
        def _store(l, Xs, regs, p, q):
            store4(
                Xs,
                p + l * stride,
                q,
                regs[4 * l],
                regs[4 * l + 1],
                regs[4 * l + 2],
                regs[4 * l + 3],
            )

    return coords, unroll(loads, _load), unroll(loads, _store)


def make_parts(cfg: Mapping[str, int], layout: str = "NN") -> Parts:
    """Device functions shared by this stage, ``double_buffering`` and ``multistage`` for one
    configuration and operand layout, every tile size a compile-time constant (force-inlined):

    - ``a_view(A, b)``, ``b_view(B, b)``: matrix ``b`` of the A (B) batch as its 2-D storage
      view (``vecmem.rows_view`` for a row-major operand, ``cols_view`` for a transposed one);
    - ``thread_origin(tid) -> (wm0, wn0)``: block -> warp -> lane, the first row and column of
      this thread's tiles inside the block tile;
    - ``a_coords(tid)``, ``b_coords(tid)``: this thread's first float4 of each GMEM tile;
    - ``load_tiles(Ag, Bg, ra, rb, k0, ap, aq, bp, bq, row0, col0, M, N, k_end, vec)``: GMEM ->
      registers ``ra``/``rb`` (A_LOADS and B_LOADS float4s per thread);
    - ``store_tiles(As, Bs, ra, rb, ap, aq, bp, bq)``: registers -> SMEM ``As[k, m]``,
      ``Bs[k, n]``;
    - ``mma_tile(As, Bs, reg_m, reg_n, thread_results, wm0, wn0)``: BK outer-product steps on
      the thread's WMITER x WNITER tiles, unrolled;
    - ``store_with(stores)``: the epilogue ``store_results(C, thread_results, r0, c0, alpha,
      beta, M, N, vec, E)`` through C-writing helpers ``stores`` (``_common.make_stores``);
    - ``b_slot(o)``: the SMEM column of B's tile column ``o`` in the scalar variant
      (:func:`make_column_order`; a stage that fills SMEM its own way follows it).
    """
    d = tun.derived(cfg, layout)
    BK, BM, BN, WM, WN = cfg["BK"], cfg["BM"], cfg["BN"], cfg["WM"], cfg["WN"]
    TM, TN, WNITER = cfg["TM"], cfg["TN"], cfg["WNITER"]
    WMITER, WSUBM, WSUBN = d["WMITER"], d["WSUBM"], d["WSUBN"]
    NT = d["NUM_THREADS"]
    LANES_N = WSUBN // TN  # lanes along N in a warp sub-tile
    WARPS_N = BN // WN
    WARP_SIZE = _WARP
    a_k_contiguous, b_k_contiguous = layout[0] == "N", layout[1] == "T"

    @device_jit
    def thread_origin(tid):
        warp, lane = tid // WARP_SIZE, tid % WARP_SIZE
        wm0 = (warp // WARPS_N) * WM + (lane // LANES_N) * TM
        wn0 = (warp % WARPS_N) * WN + (lane % LANES_N) * TN
        return wm0, wn0

    # --- GMEM -> registers -> SMEM, per operand in its layout
    a_coords, load_a_all, store_a_all = make_mover(BM, BK, NT, a_k_contiguous)
    b_column, b_slot = make_column_order(WSUBN, TN)
    b_coords, load_b_all, store_b_all = make_mover(BN, BK, NT, b_k_contiguous, b_column, LANES_N)

    @device_jit
    def load_tiles(Ag, Bg, ra, rb, k0, ap, aq, bp, bq, row0, col0, M, N, k_end, vec):
        load_a_all(Ag, ra, k0, ap, aq, row0, M, k_end, vec)
        load_b_all(Bg, rb, k0, bp, bq, col0, N, k_end, vec)

    @device_jit
    def store_tiles(As, Bs, ra, rb, ap, aq, bp, bq):
        store_a_all(As, ra, ap, aq)
        store_b_all(Bs, rb, bp, bq)

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
        # serpentine order (odd rows right to left, as CUTLASS's warp-level MMAs walk theirs):
        # a row's last FMA and the next row's first share reg_n[n], so ptxas can keep it in its
        # operand reuse cache. SASS of the 128x128 tile: reuse flags on 1765 -> 2043 of 2176
        # FFMAs, 247 -> 245 registers; 1-4 % faster on both GPUs (docs/design.md).
        for m in range(WMITER * TM):
            for j in range(WNITER * TN):
                n = j if m % 2 == 0 else WNITER * TN - 1 - j
                thread_results[m, n] += reg_m[m] * reg_n[n]

    mma_tile = unroll(BK, _mma_step)

    # --- epilogue: register row m -> C row r0 + (m // TM) * WSUBM + m % TM; register column
    # wn * TN + j -> C column c0 + wn * WSUBN + j (vector), column(c0 + j) + wn * WSUBN (scalar:
    # make_column_order; c0 - c0 % WSUBN is a sub-tile's first column)
    def store_with(stores):
        store_c4, store_c_cols = stores.store_c4, stores.store_c_cols

        @device_jit
        def _store_row(m, C, thread_results, r0, c0, alpha, beta, M, N, vec, E):
            row = r0 + (m // TM) * WSUBM + m % TM
            for wn in range(WNITER):
                for j in range(0, TN, 4):
                    n = wn * TN + j
                    if vec:
                        store_c4(
                            C,
                            row,
                            c0 + wn * WSUBN + j,
                            thread_results[m, n],
                            thread_results[m, n + 1],
                            thread_results[m, n + 2],
                            thread_results[m, n + 3],
                            alpha,
                            beta,
                            M,
                            N,
                            True,
                            E,
                        )
                    else:
                        store_c_cols(
                            C,
                            row,
                            b_column(c0 + j) + wn * WSUBN,
                            LANES_N,
                            thread_results[m, n],
                            thread_results[m, n + 1],
                            thread_results[m, n + 2],
                            thread_results[m, n + 3],
                            alpha,
                            beta,
                            M,
                            N,
                            E,
                        )

        return unroll(WMITER * TM, _store_row)

    return Parts(
        d=d,
        a_view=rows_view if a_k_contiguous else cols_view,
        b_view=cols_view if b_k_contiguous else rows_view,
        thread_origin=thread_origin,
        a_coords=a_coords,
        b_coords=b_coords,
        load_tiles=load_tiles,
        store_tiles=store_tiles,
        mma_tile=mma_tile,
        store_with=store_with,
        b_slot=b_slot,
    )


@functools.cache
def _make_kernel(items: tuple, vec: int, layout: str = "NN", epilogue=None):
    cfg = dict(items)
    pt = make_parts(cfg, layout)
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
    work = tun.make_work(BM, BN, BK, SPLITK)
    epilogue_store = tun.make_epilogue(store_with, BM, BN, pt.d["NUM_THREADS"], SPLITK, epilogue)
    CVEC = vec == 1  # 128-bit stores of C (not in the VECTOR_LOADS variant)

    @device_jit
    def sgemm_warptiling_unit(u, A, B, C, W, L, alpha, beta, E):
        # The kernel's body for its u-th unit of work: one C tile's K range (one per block,
        # more with stream-K: tun.unit_kernel). A (batch, M, K), B (batch, K, N), C (batch, M, N):
        # strided batches; W, L: split-K's or stream-K's workspace and tile counters.
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        As = cuda.shared.array((BK, AS_PITCH), float32, alignment=SMEM_ALIGN)  # [k, m]
        Bs = cuda.shared.array((BK, BS_PITCH), float32, alignment=SMEM_ALIGN)  # [k, n]
        tid = cuda.threadIdx.x
        wm0, wn0 = thread_origin(tid)  # first row/column of this thread's tiles in the block
        ap, aq = a_coords(tid)  # this thread's float4s of the GMEM tiles
        bp, bq = b_coords(tid)

        ra = cuda.local.array(A_REGS, float32)
        rb = cuda.local.array(B_REGS, float32)
        reg_m = cuda.local.array(RES_M, float32)
        reg_n = cuda.local.array(RES_N, float32)
        thread_results = cuda.local.array((RES_M, RES_N), float32)
        job = work(u, M, N, K, L)  # (batch, tile origin, K range; how the epilogue ends it)
        bz, row0, col0, k_begin, k_end = job[0], job[1], job[2], job[3], job[4]
        Ag, Bg = a_view(A, bz), b_view(B, bz)  # 2-D storage views (C's: in the epilogue)
        for m in range(RES_M):
            for n in range(RES_N):
                thread_results[m, n] = float32(0.0)

        for k0 in range(k_begin, k_end, BK):
            # --- GMEM -> registers -> SMEM (zeros past k_end)
            load_tiles(Ag, Bg, ra, rb, k0, ap, aq, bp, bq, row0, col0, M, N, k_end, vec)
            store_tiles(As, Bs, ra, rb, ap, aq, bp, bq)
            cuda.syncthreads()  # the tiles are complete before anyone reads them

            # --- SMEM -> registers, FMA (warp sub-tiles)
            mma_tile(As, Bs, reg_m, reg_n, thread_results, wm0, wn0)
            cuda.syncthreads()  # everyone is done reading before the next tiles overwrite SMEM

        # --- epilogue: write C (split-K / stream-K: the workspace; the tile's last sums)
        epilogue_store(
            C, W, L, job, thread_results, row0 + wm0, col0 + wn0, M, N, alpha, beta, CVEC, E
        )

    return tun.unit_kernel("sgemm_warptiling", sgemm_warptiling_unit, cfg, epilogue)


def make_stage(config: Mapping[str, int]) -> Stage:
    """The warptiling stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "warptiling", "8: warptiling", config, _make_kernel, make_stage, SPACE, check_config
    )


STAGE = make_stage(DEFAULT_CONFIG)
