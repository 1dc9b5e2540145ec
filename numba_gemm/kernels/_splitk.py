"""Split-K in one kernel: partial products over slices of K, summed by the last block to finish.

Shapes whose M x N holds fewer block tiles than the GPU has SMs (1024^2 in 128x128 tiles is 64
blocks for 132 SMs) leave most of the GPU idle. With ``SPLITK = S`` the grid gets a z dimension
of S; block z computes ``A[:, Kz] @ B[Kz, :]`` for its slice Kz of K and writes it, unscaled, to
rows ``[z*M, (z+1)*M)`` of a workspace W of shape ``(S*M, N4)`` (N4: N rounded up to a multiple
of 4, so W's rows are 16-byte aligned whatever C's are). Then it counts itself in: every
C tile has an arrival counter in L (int32). The block that brings a tile's count to S is the last
of its S slices; it sums the tile's S partials in slice order (z = 0, 1, ..., S-1: the same
rounding whichever block arrives last, so results are deterministic), writes
``C = alpha * sum + beta * C`` and sets the counter back to 0 for the next call. Past 16 slices
the sum has two levels (:func:`groups`): groups of ~sqrt(S) consecutive slices, each summed by
its own last arrival, then the group sums, by the last group to finish; still a fixed order.
The sums are bound by L2 latency (one block per tile or group), so the tiled stages' threads load
the partials of several items before they add any (:func:`items_per_round`). When the whole grid
is resident at once (the launcher checks the loaded kernel's occupancy), no block need be last:
each waits for its tile's partials, then they take chunks of the tile to sum (the *spread sum*,
:func:`make_fixup`), so a tile's sum runs on all of its slices' SMs.
No second kernel: one launch per product, so no second ``cuLaunchKernel`` on the host
(~4-5 us of Python and driver per launch on the H200 host) and no kernel boundary on the GPU.

Memory order (CUDA C++ Programming Guide, "Memory Fence Functions", the sum-of-array example):
each thread fences its partial writes (``threadfence``), a barrier, then the block's one thread
takes the count with an atomic add; the last block fences again before it reads the other blocks'
partials.

The workspace and the counters are kept per (GPU, CUDA stream, and host thread for the default
streams) by ``launch.workspace``: calls on one stream run in order, so they can share them, and a
call leaves every counter at 0.

Source: CUTLASS's split-K ("sliced-K") GEMM (``GemmSplitKParallel``: partials then a reduction)
and its serial split-K (a semaphore per output tile); this is the second's one-launch shape with
the first's fixed summation order.
"""

from __future__ import annotations

import math

from ..backend import cuda, float32, int32
from ..ptx.fence import threadfence
from ._common import PLAIN_STORES, device_jit, load_b4, unroll

#: Partial sums one thread loads before it adds them (in slice order): the sum is bound by the
#: latency of L2, not its bandwidth (one block per tile does it), so the loads must overlap. One
#: at a time, the last block of a 64-slice 64 x 128 tile took ~260 us on an H200; 8 at a time
#: ~90 us. The registers are free by then (the accumulators are dead).
FIXUP_DEPTH = 16


@device_jit
def _fetch(u, part, Wg, z_first, z_step, u0, n, zrows, prow, pcol, wrows, wcols):
    # the (u0 + u)-th summed partial (zeros past the n-th): slice z's element at row
    # z * zrows + prow, column pcol of the workspace (wrows x wcols)
    z = z_first + (u0 + u) * z_step if u0 + u < n else wrows  # wrows: past the workspace
    part[u, 0], part[u, 1], part[u, 2], part[u, 3] = load_b4(
        Wg, z * zrows + prow, pcol, wrows, wcols, True
    )


@device_jit
def _add(u, part, acc):
    acc[0] += part[u, 0]
    acc[1] += part[u, 1]
    acc[2] += part[u, 2]
    acc[3] += part[u, 3]


@device_jit
def arrive(L, c, count):
    """1 in every thread of the block if the block is the last of ``count`` to arrive at counter
    ``L[c]`` (which it then sets back to 0), else 0. Every thread calls it after its partial
    writes; the writes of every block that arrived before are visible to the last one after."""
    threadfence()  # this thread's writes are visible GPU-wide...
    cuda.syncthreads()  # ...every thread's, before...
    last = int32(0)
    if cuda.threadIdx.x == 0:  # ...the block counts itself in
        if cuda.atomic.add(L, c, int32(1)) == count - 1:
            last = int32(1)
            L[c] = int32(0)  # the next call (stream-ordered after this one) counts from 0
    last = cuda.syncthreads_or(last)
    threadfence()  # the others' writes are visible to this block's reads
    return last


#: Atomic reads of its tile's arrival count a block of the spread sum makes before it stops
#: waiting for the other slices and leaves the tile's chunks to the blocks that saw it complete
#: (:func:`spread_arrive`): on an H200 an atomic round trip is well under 1 us, so this is a
#: few milliseconds, far past the skew between slices of one resident grid.
SPIN_LIMIT = 1 << 14


@device_jit
def spread_arrive(L, c, count):
    """The spread sum's arrival at a tile's counters ``L[c:c + 3]`` (:func:`make_fixup`): 1 in
    every thread of the block once all ``count`` slices of the tile have arrived at ``L[c]``
    (their partials are then visible to it), 0 if it stopped waiting. The last to arrive never
    waits; any other waits for at most :data:`SPIN_LIMIT` atomic reads. A bounded wait: a block
    never waits for good on one that may not be running (two such grids on two streams could
    each hold the SMs the other needs); it leaves its chunks to the others, and the last block
    always takes what is left (:func:`spread_take`). Every thread calls it after its partial
    writes."""
    threadfence()  # this thread's writes are visible GPU-wide...
    cuda.syncthreads()  # ...every thread's, before the block counts itself in
    go = int32(0)
    if cuda.threadIdx.x == 0:
        if cuda.atomic.add(L, c, int32(1)) == count - 1:
            go = int32(1)
        else:
            for _ in range(SPIN_LIMIT):
                if cuda.atomic.add(L, c, int32(0)) >= count:  # an atomic read: not hoisted
                    go = int32(1)
                    break
    go = cuda.syncthreads_or(go)
    threadfence()  # the others' writes are visible to this block's reads
    return go


@device_jit
def spread_take(L, c, slot):
    """The next chunk of the tile for this block (at least ``count``: none left), taken at
    ``L[c + 1]`` by one thread and handed to the others through ``slot`` (SMEM, one int32)."""
    cuda.syncthreads()  # every thread has read the last one
    if cuda.threadIdx.x == 0:
        slot[0] = cuda.atomic.add(L, c + 1, int32(1))
    cuda.syncthreads()
    return slot[0]


@device_jit
def spread_leave(L, c, count):
    """The block is done with its tile's spread sum; the last of its ``count`` blocks to leave
    (``L[c + 2]``) sets the tile's three counters back to 0 for the next call (the others no
    longer touch them)."""
    if cuda.threadIdx.x == 0:
        if cuda.atomic.add(L, c + 2, int32(1)) == count - 1:
            L[c] = int32(0)
            L[c + 1] = int32(0)
            L[c + 2] = int32(0)


def share_of(BM: int, BN: int, SPLITK: int) -> int:
    """Items (four columns of one row) in a chunk of a ``BM x BN`` tile's spread sum over
    ``SPLITK`` slices (:func:`make_fixup`): chunk j is items ``[j * share, (j + 1) * share)``
    (row-major over the tile), so the ``SPLITK`` chunks cover the tile once (the last ones may
    be empty), one chunk for each of the tile's blocks when all take part."""
    return -(-(BM * BN // 4) // SPLITK)


def make_tile_sum(BM: int, BN: int, NT: int, depth: int, ipr: int = 1, stores=PLAIN_STORES):
    """``sum_tile(Wg, Dg, z_first, z_step, n, zrows, wr0, wc0, wrows, wcols, d_row0, row0, col0,
    M, N, alpha, beta, vec, E)``: over a ``BM x BN`` C tile at ``(row0, col0)``, rows
    ``d_row0 + [0, M)`` of ``Dg`` = ``alpha * (sum of n partials) + beta * Dg`` (Dg not read when
    ``beta == 0``), the partials of slices ``z_first, z_first + z_step, ...`` summed in that
    order. Slice z's value of element ``(row, col)`` is at ``Wg[z * zrows + row - wr0, col -
    wc0]`` (``Wg``: ``wrows x wcols``, rows 16-byte aligned: the partials are read 128 bits at a
    time whatever ``vec``, which says how ``Dg`` is written): split-K keeps whole ``M x N``
    slices (``zrows = M``, ``wr0 = wc0 = 0``), stream-K one ``BM x BN`` tile per slot (``zrows =
    BM``, ``wr0, wc0 = row0, col0``). ``NT`` threads; an *item* is four columns of one row; each
    round a thread loads ``depth`` partials of each of ``ipr`` items (items ``o, o + NT, ...``)
    before it adds them, item by item in slice order (:func:`items_per_round`).

    ``ipr == 1`` keeps a form of its own, one item per round with the item's bounds checked
    once: with the several-item form at one item, ptxas gave the 64 x 128 tile's whole kernel
    167 registers instead of 199 and the kernel ran 2-5 % slower (docs/design.md).

    ``stores``: the C-writing helpers (``_common.make_stores``): a fused epilogue's for a sum
    that writes C (``d_row0 == 0``), :data:`PLAIN_STORES` for one into the workspace.
    """
    if ipr == 1:
        return _item_sum(BM, BN, NT, depth, stores.store_c4)
    return _round_sum(BM, BN, NT, depth, ipr, stores.store_c4)


def _item_sum(BM: int, BN: int, NT: int, depth: int, store_c4, share: bool = False):
    """:func:`make_tile_sum` with one item per round; ``share``: the sum of a share of the
    tile's items only, ``sum_share(..., vec, E, first, end)`` over items ``[first, end)``
    (:func:`make_fixup`'s spread sum)."""
    CG = BN // 4  # threads per row of the tile: four columns each
    ITEMS = BM * CG
    fetch, add = unroll(depth, _fetch), unroll(depth, _add)

    @device_jit
    def sum_share(
        Wg,
        Dg,
        z_first,
        z_step,
        n,
        zrows,
        wr0,
        wc0,
        wrows,
        wcols,
        d_row0,
        row0,
        col0,
        M,
        N,
        alpha,
        beta,
        vec,
        E,
        first,
        end,
    ):
        part = cuda.local.array((depth, 4), float32)  # registers: every index is a constant
        acc = cuda.local.array(4, float32)
        for o in range(first + cuda.threadIdx.x, end, NT):
            r = o // CG
            row = row0 + r
            col = col0 + 4 * (o - r * CG)
            if row < M and col < N:
                acc[0] = acc[1] = acc[2] = acc[3] = float32(0.0)
                for u0 in range(0, n, depth):
                    fetch(
                        part,
                        Wg,
                        z_first,
                        z_step,
                        u0,
                        n,
                        zrows,
                        row - wr0,
                        col - wc0,
                        wrows,
                        wcols,
                    )
                    add(part, acc)
                store_c4(
                    Dg,
                    d_row0 + row,
                    col,
                    acc[0],
                    acc[1],
                    acc[2],
                    acc[3],
                    alpha,
                    beta,
                    d_row0 + M,
                    N,
                    vec,
                    E,
                )

    if share:
        return sum_share

    @device_jit
    def sum_tile(
        Wg,
        Dg,
        z_first,
        z_step,
        n,
        zrows,
        wr0,
        wc0,
        wrows,
        wcols,
        d_row0,
        row0,
        col0,
        M,
        N,
        alpha,
        beta,
        vec,
        E,
    ):
        sum_share(
            Wg,
            Dg,
            z_first,
            z_step,
            n,
            zrows,
            wr0,
            wc0,
            wrows,
            wcols,
            d_row0,
            row0,
            col0,
            M,
            N,
            alpha,
            beta,
            vec,
            E,
            0,
            ITEMS,
        )

    return sum_tile


def _round_sum(BM: int, BN: int, NT: int, depth: int, ipr: int, store_c4):
    """:func:`make_tile_sum` with ``ipr`` items per round."""
    CG = BN // 4  # items per row of the tile
    ITEMS = BM * CG
    LOADS = ipr * depth

    @device_jit
    def place(o, row0, col0, M, N):
        # (valid, row, col) of item o of the tile
        r = o // CG
        row = row0 + r
        col = col0 + 4 * (o - r * CG)
        return o < ITEMS and row < M and col < N, row, col

    @device_jit
    def fetch_one(
        v,
        part,
        Wg,
        z_first,
        z_step,
        u0,
        n,
        zrows,
        wr0,
        wc0,
        wrows,
        wcols,
        o0,
        row0,
        col0,
        M,
        N,
    ):
        # load v: the (u0 + v % depth)-th partial of item o0 + (v // depth) * NT (zeros past
        # the n-th partial or outside the tile): slice z's element at workspace row
        # z * zrows + row - wr0, column col - wc0
        u = u0 + v % depth
        ok, row, col = place(o0 + (v // depth) * NT, row0, col0, M, N)
        z = z_first + u * z_step if u < n and ok else wrows  # wrows: past the workspace
        part[v, 0], part[v, 1], part[v, 2], part[v, 3] = load_b4(
            Wg, z * zrows + row - wr0, col - wc0, wrows, wcols, True
        )

    @device_jit
    def add_one(v, part, acc):
        j = v // depth
        acc[j, 0] += part[v, 0]
        acc[j, 1] += part[v, 1]
        acc[j, 2] += part[v, 2]
        acc[j, 3] += part[v, 3]

    @device_jit
    def zero_one(j, acc):
        acc[j, 0] = acc[j, 1] = acc[j, 2] = acc[j, 3] = float32(0.0)

    @device_jit
    def store_one(j, acc, Dg, o0, d_row0, row0, col0, M, N, alpha, beta, vec, E):
        ok, row, col = place(o0 + j * NT, row0, col0, M, N)
        if ok:
            store_c4(
                Dg,
                d_row0 + row,
                col,
                acc[j, 0],
                acc[j, 1],
                acc[j, 2],
                acc[j, 3],
                alpha,
                beta,
                d_row0 + M,
                N,
                vec,
                E,
            )

    fetch, add = unroll(LOADS, fetch_one), unroll(LOADS, add_one)
    zero, store = unroll(ipr, zero_one), unroll(ipr, store_one)

    @device_jit
    def sum_tile(
        Wg,
        Dg,
        z_first,
        z_step,
        n,
        zrows,
        wr0,
        wc0,
        wrows,
        wcols,
        d_row0,
        row0,
        col0,
        M,
        N,
        alpha,
        beta,
        vec,
        E,
    ):
        part = cuda.local.array((LOADS, 4), float32)  # registers: every index is a constant
        acc = cuda.local.array((ipr, 4), float32)
        for o0 in range(cuda.threadIdx.x, ITEMS, NT * ipr):
            zero(acc)
            for u0 in range(0, n, depth):
                fetch(
                    part,
                    Wg,
                    z_first,
                    z_step,
                    u0,
                    n,
                    zrows,
                    wr0,
                    wc0,
                    wrows,
                    wcols,
                    o0,
                    row0,
                    col0,
                    M,
                    N,
                )
                add(part, acc)
            store(acc, Dg, o0, d_row0, row0, col0, M, N, alpha, beta, vec, E)

    return sum_tile


def groups(SPLITK: int) -> tuple[int, int]:
    """``(GS, G)``: the slices of a tile are summed in G groups of GS consecutive slices (the last
    group may be smaller), then the G group sums. One level (``(SPLITK, 1)``) up to
    :data:`FIXUP_DEPTH` slices (one round of loads); beyond, GS ~ sqrt(SPLITK), so the last block
    of a tile reads GS + G partial tiles, not SPLITK (16 instead of 64 for 64 slices), and the G
    group sums run on G SMs at once. (On an H200, two levels at 16 slices cost ~2 us more than
    one, at 64 slices saved ~65 us: docs/design.md.)"""
    if SPLITK <= FIXUP_DEPTH:
        return SPLITK, 1
    gs = math.isqrt(SPLITK - 1) + 1
    return gs, -(-SPLITK // gs)


def counters_per_tile(SPLITK: int) -> int:
    """Arrival counters per C tile: one per group, and one for the groups when G > 1; at least
    three (the spread sum's arrivals, chunks taken and departures, :func:`spread_arrive`)."""
    g = groups(SPLITK)[1]
    return max(3, 1 if g == 1 else g + 1)


#: Partials a thread of a two-level tile sum loads per round, over several items
#: (:func:`items_per_round`): 24 float4s, 96 registers. 4 items of groups of 6 partials:
#: measured in docs/design.md.
ROUND_LOADS = 24
#: Accumulators a thread may have (``BM * BN / NT``) for several items per round: with 64 the
#: tiled kernels run at 167-199 registers, so the dead accumulators and the spare registers hold
#: the loads; with 128 (233 registers) 3 items per round made the H200's deep-K kernel 3.5 %
#: slower and 2 items gained nothing.
ROUND_MAX_ACCUMULATORS = 64


def items_per_round(BM: int, BN: int, NT: int, SPLITK: int, wide: bool) -> int:
    """Items (four columns of one row each) a thread of a ``BM x BN`` tile's sum takes per round
    of loads, for ``SPLITK`` slices: with ``wide`` (the tiled stages, whose threads hold
    ``BM * BN / NT`` accumulators, at most :data:`ROUND_MAX_ACCUMULATORS`) and two levels
    (:func:`groups`), as many as keep :data:`ROUND_LOADS` partials in flight (at most the
    thread's items); else 1. Each round waits one L2 latency: a 64 x 128 tile of 128 threads at
    32 slices (groups of 6) takes 4 rounds per level, not 16 (its kernel 0.229 -> 0.215 ms on an
    H100 at 256 x 256 x 65536). One-level sums keep one item: there the several-item form
    changed ptxas's register choice for the whole kernel and lost more than it gained
    (docs/design.md)."""
    GS, G = groups(SPLITK)
    if not wide or G == 1 or BM * BN // NT > ROUND_MAX_ACCUMULATORS:
        return 1
    items = -(-(BM * BN // 4) // NT)
    return max(1, min(items, ROUND_LOADS // min(max(GS, G), FIXUP_DEPTH)))


def make_fixup(BM: int, BN: int, NT: int, SPLITK: int, wide: bool = False, stores=PLAIN_STORES):
    """The device function that ends a split-K block of a ``BM x BN`` C tile and ``NT`` threads:
    ``fixup(Wg, L, Cg, row0, col0, M, N, alpha, beta, vec, E)`` (``stores``, ``E``: C's writes
    and a fused epilogue's operands, ``_common.make_stores``). ``wide``: the threads have
    registers to spare for several items per round of a two-level sum (:func:`items_per_round`).

    Every thread of the block calls it after the block has written its slice's partial sums of
    the tile at ``(row0, col0)`` to rows ``z*M + [0, M)`` of ``Wg`` (the workspace, 2-D
    ``(S*M, N4)``, N4 >= N a multiple of 4). The block that arrives last at its group's counter
    (t: the tile's index in the grid's x-y plane; :func:`groups`) sums the group's partials in
    slice order; with one group it writes ``Cg`` (2-D ``(M, N)``) with ``alpha`` and ``beta`` (C
    not read when ``beta == 0``), else it writes the group's sum over its first slice's partials
    and arrives at the tile's counter, whose last arrival sums the groups in order and writes C.
    Four columns per thread and step: 128-bit loads and group sums in W always, 128-bit stores
    of C when ``vec`` (C's rows 16-byte aligned; docs/design.md §4.5 says what 4-byte loads of W
    cost). Each counter is set back to 0 by its last arrival. ``L`` holds
    :func:`counters_per_tile` counters per tile.

    *Spread sum* (the tiled stages, ``wide``): when ``L`` holds one element more than that,
    the launcher has checked that every block of the grid is resident at once
    (``launch.launcher.grid_resident``). Then every block of the tile waits, a bounded time,
    for the tile's ``SPLITK`` partials (:func:`spread_arrive`), and the blocks that saw them all
    take chunks of the tile (:func:`share_of`, :func:`spread_take`) until none is left, each
    summed over all slices in slice order (the one-level sum's rounding): ``SPLITK`` blocks
    share what one block does otherwise, and the last to arrive, which never waits, takes what
    the others left.
    """
    GS, G = groups(SPLITK)
    PER_TILE = counters_per_tile(SPLITK)
    ITEMS, SHARE = BM * BN // 4, share_of(BM, BN, SPLITK)
    # the spread sum in the tiled stages (``wide``): the few-tile splits it speeds up are theirs,
    # and in the skinny stages its code cost registers (skinny_n's 8-slice kernel 128 -> 130,
    # 2 -> 1 blocks an SM, offline ptxas)
    SPREAD = wide
    sum_share = _item_sum(BM, BN, NT, min(SPLITK, FIXUP_DEPTH), stores.store_c4, True)
    depth = min(max(GS, G), FIXUP_DEPTH)
    ipr = items_per_round(BM, BN, NT, SPLITK, wide)
    sum_tile = make_tile_sum(BM, BN, NT, depth, ipr)  # into the workspace: no epilogue
    sum_tile_c = (
        sum_tile if stores is PLAIN_STORES else make_tile_sum(BM, BN, NT, depth, ipr, stores)
    )

    @device_jit
    def sum_group(Wg, z_first, n, row0, col0, M, N):
        # the partials of slices z_first .. z_first + n - 1 over the tile, summed in that
        # order, replace slice z_first's (128-bit stores: the workspace's rows are aligned)
        sum_tile(
            Wg,
            Wg,
            z_first,
            1,
            n,
            M,
            0,
            0,
            Wg.shape[0],
            Wg.shape[1],
            z_first * M,
            row0,
            col0,
            M,
            N,
            float32(1.0),
            float32(0.0),
            True,
            (),
        )

    @device_jit
    def sum_into_c(Wg, Cg, z_step, n, row0, col0, M, N, alpha, beta, vec, E):
        # C over the tile = finish(alpha * (sum of n partials, slices 0, z_step, ...) + beta * C)
        sum_tile_c(
            Wg,
            Cg,
            0,
            z_step,
            n,
            M,
            0,
            0,
            Wg.shape[0],
            Wg.shape[1],
            0,
            row0,
            col0,
            M,
            N,
            alpha,
            beta,
            vec,
            E,
        )

    @device_jit
    def sum_items(Wg, Cg, row0, col0, M, N, alpha, beta, vec, E, first, end):
        # one level: items [first, end) of the tile over every slice in order
        sum_share(
            Wg,
            Cg,
            0,
            1,
            SPLITK,
            M,
            0,
            0,
            Wg.shape[0],
            Wg.shape[1],
            0,
            row0,
            col0,
            M,
            N,
            alpha,
            beta,
            vec,
            E,
            first,
            end,
        )

    @device_jit
    def fixup(Wg, L, Cg, row0, col0, M, N, alpha, beta, vec, E):
        tiles = cuda.gridDim.y * cuda.gridDim.x
        t = (cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x) * PER_TILE
        spread = SPREAD and L.shape[0] > tiles * PER_TILE  # the launcher's licence
        if spread:
            go = spread_arrive(L, t, SPLITK)
            size = SHARE
        elif G == 1:
            go = arrive(L, t, SPLITK)
            size = ITEMS  # the last block sums the whole tile: one chunk
        else:
            g = cuda.blockIdx.z // GS
            z_first = g * GS
            n = min(GS, SPLITK - z_first)
            if arrive(L, t + g, n) == 0:
                return  # another slice of this group is still running
            # the group's sum replaces its first slice's partials (only this block reads them)
            sum_group(Wg, z_first, n, row0, col0, M, N)
            if arrive(L, t + G, G):
                sum_into_c(Wg, Cg, GS, G, row0, col0, M, N, alpha, beta, vec, E)
            return
        # one level, chunk by chunk of the tile's items, each over every slice in order: the
        # spread sum's blocks take chunks until none is left, else the one chunk
        slot = cuda.shared.array(1, int32)
        j = 0
        while go:
            if spread:
                j = spread_take(L, t, slot)
            if j >= SPLITK:
                break
            first = j * size
            sum_items(
                Wg, Cg, row0, col0, M, N, alpha, beta, vec, E, first, min(first + size, ITEMS)
            )
            j = SPLITK  # without the spread sum: the one chunk
        if spread:
            spread_leave(L, t, SPLITK)

    return fixup
