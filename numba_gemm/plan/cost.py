"""The cost model: a tuned candidate's predicted time at a new shape.

Four terms, each scaled from measurements (docs/design.md, "The planner"): the per-SM wave
model of the tiled stages (:func:`estimate_ms`), the bytes-of-B model of the bandwidth-bound
stages (:func:`stream_ms`), split-K's reduction (:func:`reduce_ms`) and a stream-K twin's
even share of the K steps (:func:`stream_k_ms`); :func:`split_options` says which K splits are
worth pricing. A candidate is ``{"config": ..., "ms": ..., "shape": ...}``
with the name of its stage (``"stage"``) as the tuning data records it (``plan.tuning``); the
stage contract (``Stage.block``, ``Stage.threads``, ``Stage.cost``) says what the model counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import gcd
from typing import Any

from ..device import cdiv
from ..kernels import _splitk, _streamk, get_stage
from ..kernels.stage import Stage
from .tuning import SPREAD_SUM

#: Split-K's reduction, priced by the model. The last slice of each tile sums the partials in the
#: same kernel (``kernels._splitk``): a tail after the main loop of ``REDUCE_LEVEL_MS`` per level
#: of the sum (a fence, an atomic and a barrier) plus ``REDUCE_ROUND_MS`` per round of loads and
#: item of a thread (each thread loads up to ``FIXUP_DEPTH`` partials of four columns at once and
#: waits one L2 latency; a two-level sum of the tiled stages loads several items' partials per
#: round, ``_splitk.items_per_round``), and the partial products' extra traffic, written once and
#: read once (2 * SPLITK * M * N floats) at an assumed effective 2.5 TB/s. Fitted on an H200:
#: one-level sums of 64 partials of a 128 x 256 tile (256 threads, 32 items each, 8 rounds at
#: depth 8) took ~65 us more than two-level ones (2 rounds): 0.35 us per round and item. On an
#: H100 at 256 x 256 x 65536 (32 slices of 64 x 128 tiles) the model gives 20.9 us with one item
#: a round and 12.5 us with four; the kernel less one that sums nothing measured 25 and 12.4 us.
#: (The two-kernel form this replaced cost a second launch: cuLaunchKernel measured 3.9 us on the
#: H200 host, bench/results/nvidia-h200/2026-11-22-call-path.)
REDUCE_LEVEL_MS = 0.0015
REDUCE_ROUND_MS = 0.00035
REDUCE_BYTES_PER_MS = 2.5e9


def stage_of(cand: Mapping[str, Any]) -> Stage:
    """The stage a candidate configures (``cand["stage"]``, a name in ``STAGES``): its contract
    (``Stage.block``, ``Stage.threads``, ``Stage.cost``) is what the model counts."""
    return get_stage(cand["stage"])


def reduce_ms(
    splits: int, M: int, N: int, cfg: Mapping[str, int], stage: Stage, spread: bool = False
) -> float:
    """Predicted cost (ms) of split-K with ``splits`` slices for configuration ``cfg`` of
    ``stage`` at ``M x N``: the partial products' traffic and the last blocks' sums, or with
    ``spread`` (the grid is resident at once) and a stage whose sums spread
    (``Stage.wide_fixup``: ``kernels._splitk.make_fixup``'s spread sum) one level whose blocks
    each sum a share of the tile (``_splitk.share_of``) over all slices.
    The committed tuning data's split times were measured before the spread sum existed, so the
    model takes their sums out as last-block sums (``spread=False``)."""
    if splits <= 1:
        return 0.0
    gs, g = _splitk.groups(splits)
    bm, bn, _ = stage.block(cfg)
    nt = stage.threads(cfg)
    traffic = 2 * splits * M * N * 4 / REDUCE_BYTES_PER_MS
    if spread and stage.wide_fixup:
        rounds = cdiv(splits, _splitk.FIXUP_DEPTH) * cdiv(_splitk.share_of(bm, bn, splits), nt)
        return REDUCE_LEVEL_MS + rounds * REDUCE_ROUND_MS + traffic
    items = cdiv(
        cdiv(bm * bn // 4, nt), _splitk.items_per_round(bm, bn, nt, splits, stage.wide_fixup)
    )
    rounds = cdiv(gs, _splitk.FIXUP_DEPTH) + (cdiv(g, _splitk.FIXUP_DEPTH) if g > 1 else 0)
    return (1 if g == 1 else 2) * REDUCE_LEVEL_MS + rounds * items * REDUCE_ROUND_MS + traffic


#: Co-residency at which an SM runs at half the rate of many blocks (:func:`sm_rate`): fitted on
#: the H200's measured shapes, each configuration's time at one predicted from another
#: (docs/design.md §4.3, guarded by ``tests/test_tuning.py``).
SM_HALF_RATE_BLOCKS = 0.5


def sm_rate(blocks: int) -> float:
    """Relative throughput of an SM running ``blocks`` blocks of one kernel at once:
    ``n / (n + SM_HALF_RATE_BLOCKS)``, so 1 block gets 0.67 of the rate 3 blocks reach (0.86)
    and more blocks add little: co-resident blocks share the SM's issue slots, and only hide
    each other's latency."""
    return blocks / (blocks + SM_HALF_RATE_BLOCKS)


#: Warps per SM a stream-K grid first assumes (``Plan``): the kernel's loop over units keeps the
#: tile's bookkeeping live, and the tuned tiles' kernels grow to 255 registers with it (8 warps of
#: 255 registers fill the 64 K register file). The grid is then clamped to the loaded kernel's
#: occupancy: a grid past the resident blocks would run a second wave.
STREAM_K_WARPS_PER_SM = 8


def estimate_ms(
    cand: Mapping[str, Any],
    M: int,
    N: int,
    K: int,
    sms: int,
    aligned: bool = True,
    scalar_factor: float = 1.0,
    batch: int = 1,
    splits: int | None = None,
    layout: str = "NN",
    per_sm: int | None = None,
) -> float:
    """Predicted time (ms) of a tuned candidate at ``batch`` x ``(M, N, K)`` from its time at the
    tuned shape (``cand["batch"]`` x ``cand["shape"]``; batch 1 when not recorded).

    Per-SM wave model: a launch of at most one wave (``blocks <= SMs * blocks_per_sm``) is dealt
    out breadth first, so the busiest SM runs ``ceil(blocks / SMs)`` blocks side by side; a longer
    one runs ``ceil(blocks / (SMs * blocks_per_sm))`` full waves (its last one refilled as whole
    SMs free up, not spread). Time scales with that SM's block-K-tiles (``ceil(K_slice / BK)``
    each) over its throughput at that co-residency (:func:`sm_rate`). So a tile timed where its
    blocks ran one an SM is not priced at that speed where three share an SM, and a ragged size
    (4097: one more row and column of mostly empty tiles, maybe one more wave) picks a finer tile
    than 4096 does. A split-K candidate's reduction (:func:`reduce_ms`) does not scale that way:
    it is taken out of the tuned time and priced at the new shape, so a small product does not
    pay for a reduction it cannot amortize; where the new grid is resident at once (at
    ``per_sm`` or the measured occupancy) the sum is priced spread over the slices. The sum taken
    out is a last-block one, or the spread one where the candidate was measured with it
    (``tuning.SPREAD_SUM``) on a resident grid.

    ``splits``: the K slices to price at this shape (the launch layer's split-K: the same tiles
    with another ``SPLITK``; default: the candidate's own).

    ``aligned=False`` (rows of A, B or C not 16-byte aligned: the scalar-GMEM kernel runs) scales
    from ``ms_scalar``, the scalar kernel's time at the tuned shape less one in each dimension
    (same tile counts), with its own occupancy ``blocks_per_sm_scalar``; a candidate without
    ``ms_scalar`` uses ``ms * scalar_factor`` (the class winner's ratio).

    ``per_sm``: the blocks an SM of the kernel that runs here, where it is pinned to another
    occupancy than the measured one (:func:`pinned_occupancy`); the tuned time is still scaled
    from the occupancy it was measured at.
    """
    st, cfg = stage_of(cand), cand["config"]
    Mr, Nr, Kr = cand["shape"]
    Br = cand.get("batch", 1)
    s = cfg.get("SPLITK", 1)
    s_new = s if splits is None else splits
    ms, bps = _variant(cand, aligned, scalar_factor, layout)
    bm, bn, bk = st.block(cfg)

    def work(m, n, k, b, s, bps):
        blocks = cdiv(m, bm) * cdiv(n, bn) * s * b
        if blocks < sms * bps:  # one part-filled wave, dealt out breadth first
            side = cdiv(blocks, sms)
            return side * cdiv(cdiv(k, s), bk) / sm_rate(side)
        return cdiv(blocks, sms * bps) * bps * cdiv(cdiv(k, s), bk) / sm_rate(bps)

    # the sum in the tuned time: spread where that grid was resident, if it ran the spread sum
    spread_r = bool(cand.get(SPREAD_SUM)) and cdiv(Mr, bm) * cdiv(Nr, bn) * s * Br <= sms * bps
    main = max(float(ms) - reduce_ms(s, Mr, Nr, cfg, st, spread_r), 0.1 * float(ms))
    run_bps = bps if per_sm is None else per_sm
    resident = batch == 1 and cdiv(M, bm) * cdiv(N, bn) * s_new <= sms * run_bps
    return main * work(M, N, K, batch, s_new, run_bps) / work(Mr, Nr, Kr, Br, s, bps) + reduce_ms(
        s_new, M, N, cfg, st, resident
    )


def _variant(
    cand: Mapping[str, Any], aligned: bool, scalar_factor: float, layout: str
) -> tuple[float, int]:
    """``(ms, blocks per SM)`` of a candidate at its tuned shape in the variant and layout that
    will run: the vector kernel's, or without aligned rows the scalar kernel's (``ms_scalar``, else
    ``ms * scalar_factor``), each with B stored transposed from its NT times when it has them
    (``ms_nt``; a scalar kernel without ``ms_scalar_nt`` at its own time scaled by NT over NN)."""
    if aligned:
        ms, bps = cand["ms"], cand.get("blocks_per_sm", 1)
    else:
        ms = cand.get("ms_scalar", cand["ms"] * scalar_factor)
        bps = cand.get("blocks_per_sm_scalar", cand.get("blocks_per_sm", 1))
    if layout[1] == "T" and "ms_nt" in cand:
        if aligned:
            ms, bps = cand["ms_nt"], cand.get("blocks_per_sm_nt", bps)
        else:
            ms = cand.get("ms_scalar_nt", float(ms) * cand["ms_nt"] / cand["ms"])
            bps = cand.get("blocks_per_sm_scalar_nt", bps)
    return float(ms), max(1, int(bps))


def stream_k_grid(threads: int, blocks_per_sm: int | None, sms: int) -> int:
    """Blocks of a stream-K grid (``G``) as the launch layer sizes it: the plan assumes
    :data:`STREAM_K_WARPS_PER_SM` warps an SM (``blocks_per_sm`` None), and the runner clamps that
    to the loaded kernel's occupancy (``blocks_per_sm``)."""
    per_sm = STREAM_K_WARPS_PER_SM * 32 // max(32, threads)
    return sms * max(1, per_sm if blocks_per_sm is None else min(per_sm, blocks_per_sm))


def stream_k_fixup_ms(bm: int, bn: int, threads: int, G: int) -> float:
    """Predicted fixed cost (ms) of a stream-K grid of ``G`` blocks over ``bm x bn`` tiles, the
    same at any shape whose tiles fill the grid: a block's range ends inside a tile once or twice,
    so about one partial tile a block is written and read back (at ``REDUCE_BYTES_PER_MS``), and
    the last arrival at a shared tile sums its two or three partials one item (four columns) a
    round (``REDUCE_ROUND_MS`` an item of a thread, ``_streamk.make_fixup``) after one level's
    arrival (``REDUCE_LEVEL_MS``)."""
    items = cdiv(bm * bn // 4, threads)
    return REDUCE_LEVEL_MS + items * REDUCE_ROUND_MS + 2 * G * bm * bn * 4 / REDUCE_BYTES_PER_MS


#: What one unit of a stream-K block (a whole tile, or its share of one) costs beyond its K steps,
#: in K steps of the main loop: the first loads before the pipeline fills and the writing of C or
#: of a partial tile. Read off the H200's class data (tuning/sm_90.json): one configuration timed
#: at two K depths (2048^3 and 4096^3, or a K split of each) takes a time per tile and wave that
#: extrapolates to 0.5-4 K steps at K = 0, e.g. multistage 128 x 256, 0.253 ms at 128 steps and
#: 0.500 ms at 256 (about 3). It matters where tiles are shallow: at K = 21 (2 steps a tile) a
#: block's units cost more than its steps.
STREAM_K_UNIT_STEPS = 3


def stream_k_ms(
    cand: Mapping[str, Any],
    M: int,
    N: int,
    K: int,
    sms: int,
    aligned: bool = True,
    scalar_factor: float = 1.0,
    layout: str = "NN",
) -> float | None:
    """Predicted time (ms) of candidate ``cand``'s stream-K twin (the same tiles with ``SPLITK =
    STREAM_K``) at ``(M, N, K)``, or None where it is not offered.

    Priced from the twin's own time ``ms_sk`` at ``shape_sk`` with its kernel's occupancy
    ``blocks_per_sm_sk`` (``tuning.STREAM_K_KEYS``, measured by ``tools.tune --retime SK`` at one
    shape whose tiles fill every stage's grid twice on 132 SMs). Every block of the grid (``G``,
    :func:`stream_k_grid`) does the same share of the K steps: ``dp / G`` whole tiles of ``I``
    steps (``_streamk.dp_tiles``), then ``ceil((T - dp) I / G)`` steps of the shared tiles. The
    main loop's time scales with the busiest block's steps plus :data:`STREAM_K_UNIT_STEPS` for
    each of its units (its whole tiles, and the most shared tiles one block's range touches,
    :func:`_touched`); the fixup (:func:`stream_k_fixup_ms`) is the same at both shapes. Only
    the NN vector twin is timed: the scalar variant (rows not aligned) costs it what it costs the
    data-parallel tiles at the twin's shape (:func:`estimate_ms` in that variant over the vector
    one, which counts their own occupancy), and its grid is clamped to the lower of the twin's
    and that variant's occupancy (the runner clamps to the kernel it loads), at that
    occupancy's rate (:func:`sm_rate`).

    Offered for A and B stored as they are multiplied (layout NN), the layout its time was
    measured in: priced the same way from the NT data-parallel times, NT twins ran 1.53-1.59x
    their price on an H200 where NN twins ran 0.99-1.36x (docs/design.md §4.6). Offered where
    its tiles fill the grid (``T >= G``; below that, split-K's slices serve, and
    a tile shared by many blocks is summed serially), are not mostly empty (``2 M >= BM``,
    ``2 N >= BN``) and are at least :data:`MIN_SLICE_TILES` K steps deep (a shallow product's
    time is its C stores, which no sharing of K steps shortens). Stream-K pays where whole-tile
    waves leave the last one part-filled: on an H200 (an older build, docs/design.md §4.6)
    warptiling's 128 x 256 twin ran 4097^3 in 0.84x its data-parallel time and multistage's
    128 x 256 twin 4096^3 (3.9 waves) in 1.03x; multistage's 64 x 128 twin ran 4097^3 in 1.82x
    (its occupancy: what the measured twin's time now carries)."""
    if layout != "NN" or "ms_sk" not in cand or "blocks_per_sm_sk" not in cand:
        return None
    st, cfg = stage_of(cand), cand["config"]
    bm, bn, bk = st.block(cfg)
    nt = st.threads(cfg)
    bps_ref = max(1, int(cand["blocks_per_sm_sk"]))
    # the variant's twin is not timed: its occupancy at most the twin's and the variant's own
    bps = min(bps_ref, _variant(cand, aligned, scalar_factor, "NN")[1])
    G = stream_k_grid(nt, bps, sms)
    T = cdiv(M, bm) * cdiv(N, bn)
    if T < G or 2 * M < bm or 2 * N < bn or cdiv(K, bk) < MIN_SLICE_TILES:
        return None

    def work(m, n, k, g):  # K steps of the busiest block of a grid of g, and its units' cost
        t, i = cdiv(m, bm) * cdiv(n, bn), cdiv(k, bk)
        dp = _streamk.dp_tiles(t, g)
        q = cdiv((t - dp) * i, g)  # each block's share of the shared tiles' steps
        return dp // g * i + q + STREAM_K_UNIT_STEPS * (dp // g + _touched(q, i, g, t - dp))

    G_ref = stream_k_grid(nt, bps_ref, sms)
    sk = float(cand["ms_sk"])
    main = max(sk - stream_k_fixup_ms(bm, bn, nt, G_ref), 0.1 * sk)
    # the variant's cost: what it costs the data-parallel tiles at the twin's shape
    ratio = 1.0
    if not aligned:
        shape = cand["shape_sk"]
        nn = estimate_ms(cand, *shape, sms, splits=1)
        ratio = estimate_ms(cand, *shape, sms, aligned, scalar_factor, splits=1) / nn
    scale = work(M, N, K, G) / work(*cand["shape_sk"], G_ref)
    rate = sm_rate(G_ref // sms) / sm_rate(G // sms)
    return stream_k_fixup_ms(bm, bn, nt, G) + ratio * main * scale * rate


def _touched(q: int, i: int, g: int, shared: int) -> int:
    """Most tiles of ``i`` K steps one block's range of ``q`` steps touches, of ``shared`` tiles
    dealt out to ``g`` blocks (block c starts at step ``c q``; ``_streamk.unit``): a range that
    starts ``r`` steps into a tile touches ``(r + q - 1) // i + 1``. The starts' offsets ``c q
    mod i`` are the multiples of ``gcd(q, i)``, all of them once ``g`` blocks reach
    ``i / gcd``."""
    if not q:
        return 0
    step = gcd(q, i)
    if g * step >= i:
        r = i - step
    else:
        r = max(c * q % i for c in range(g))
    return min((r + q - 1) // i + 1, shared)


def stream_ms(
    cand: Mapping[str, Any], M: int, N: int, K: int, sms: int, splits: int | None = None
) -> float:
    """Predicted time (ms) of a candidate of a bandwidth-bound stage (``Stage.cost == "stream"``)
    at ``(M, N, K)`` from its time at the shape it was measured at (``cand["shape"]``), by the
    bytes of B it reads: the stage streams B once per block row of C, at a rate that grows with
    its blocks up to one per SM and is flat past it (on an H100 the 4096^2 picks of 1 and 8 rows,
    256 blocks each at 4 and 2 a SM, streamed B at 2.2-2.3 TB/s alike); split-K's sum is priced
    apart (:func:`reduce_ms`). ``splits``: the K slices at ``(M, N, K)`` (default: the
    candidate's own, :func:`stream_splits`).

    The wave model (:func:`estimate_ms`) counts a second wave of blocks as a second block time,
    but in a stream the blocks share the DRAM: on an H100 the 8 x 4096^2 pick ran 8 x 8192^2
    (twice its blocks, four times the bytes) in 3.2x its time, where the wave model said 4x and
    priced the skinny class's 16-row tiles ahead of it (53 % slower there: docs/design.md)."""
    st, cfg = stage_of(cand), cand["config"]
    Mr, Nr, Kr = cand["shape"]
    (mt, bn, _), s = st.block(cfg), cfg.get("SPLITK", 1)
    at = s if splits is None else splits

    def cost(m, n, k, s):  # B's bytes read over the share of the SMs the grid fills
        reads = cdiv(m, mt)
        return reads * n * k / min(1.0, reads * cdiv(n, bn) * s / sms)

    main = max(float(cand["ms"]) - reduce_ms(s, Mr, Nr, cfg, st), 0.1 * float(cand["ms"]))
    return main * cost(M, N, K, at) / cost(Mr, Nr, Kr, s) + reduce_ms(at, M, N, cfg, st)


def stream_splits(cand: Mapping[str, Any], M: int, N: int, K: int, sms: int) -> tuple[int, ...]:
    """The ``SPLITK`` values to price for candidate ``cand`` of a bandwidth-bound stage, measured
    at another shape, at ``(M, N, K)`` (:func:`stream_ms`): its own; where its grid would leave
    at least half of the SMs without a block (as :func:`split_options` splits mostly empty
    tiles), each of :data:`SPLITS` above it up to the one that gives every SM one;
    where its slices would hold less than one chunk (``KC`` rows of K), the widest split below
    it whose slices hold one. The split a sweep chose at its shape stands where it fills the
    GPU there too: past one block a SM the model is flat and would take the fewest slices.
    (1 x 252 x 3531 took the 4 slices of 1 x 50257 x 768, 197 tiles there and 1 here: 4 blocks
    streamed B in 31 us, against cuBLAS's 7.6.)"""
    cfg = cand["config"]
    own = cfg.get("SPLITK", 1)
    (mt, bn, kc) = stage_of(cand).block(cfg)
    tiles = cdiv(M, mt) * cdiv(N, bn)
    out = {own}
    if 2 * tiles * own <= sms:
        for s in SPLITS:
            if s > own and cdiv(K, s) >= kc:
                out.add(s)
                if tiles * s >= sms:
                    break
    if own > 1 and cdiv(K, own) < kc:
        out.add(max((s for s in SPLITS if s < own and cdiv(K, s) >= kc), default=1))
    return tuple(sorted(out))


#: K slices the launch layer may give any tuned candidate of one product (split-K), priced by
#: :func:`estimate_ms` with the reduction: offered when the candidate's tiles fill less than one
#: wave of its resident blocks (``blocks_per_sm`` a SM), up to ``MAX_SPLIT_WAVES`` waves of them,
#: each slice at least ``MIN_SLICE_TILES`` K steps deep. Not only powers of two: 72 tiles of
#: 128 x 128 (128 x 9216) at two blocks a SM on 132 SMs fill one wave in 3 slices (216 blocks),
#: where 4 slices (288) run a second wave of 24 blocks. Before the per-SM model (the plain wave
#: model counted ``blocks_per_sm`` blocks of one SM as one slot each) splits were held to one block
#: a SM: a 4-way split predicted at 0.32 ms had run 1.37 ms at 1024 x 1024 x 16384, and a 16-way
#: one predicted below the skinny stage 2.4x slower at 16 x 4096 x 4096, on an H200
#: (docs/design.md §4.5, §4.13).
SPLITS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64)
MIN_SLICE_TILES = 8
MAX_SPLIT_WAVES = 4


def split_options(
    cand: Mapping[str, Any], M: int, N: int, K: int, sms: int, per_sm: int | None = None
) -> tuple[int, ...]:
    """The ``SPLITK`` values to price for candidate ``cand`` at ``(M, N, K)``: its own, and when
    its unsplit tiles fill less than one wave of ``per_sm`` blocks on each of the ``sms`` SMs
    (default: the candidate's ``blocks_per_sm``), every one of :data:`SPLITS` that keeps each K
    slice ``MIN_SLICE_TILES`` steps deep and the blocks within ``MAX_SPLIT_WAVES`` such waves.
    A candidate whose tiles are more than half empty here (``2 M < BM`` or ``2 N < BN``) keeps the
    narrower trigger and cap the plain wave model had: split only while its blocks leave more
    than half of the SMs idle, up to ``per_sm`` blocks a SM (default 1: the plan; a sweep passes
    the candidate's occupancy), in any of :data:`SPLITS`; a candidate of a tensor-core stage keeps
    that rule in powers of two (the wider splits were measured on the FP32 stages only). The
    occupancy is the row-major-B kernel's (``blocks_per_sm``) for every layout.

    Not stream-K (``STREAM_K``, run by naming a configuration with it): this wave model prices
    each K tile of a block at its cost in the tuned full waves, so it takes a part-filled wave of
    blocks (each alone on its SM, running faster) for a full one, and on an H200 it picked
    stream-K where it lost 5-25 % (1000^3, 1024^3, 4097^3: docs/design.md)."""
    cfg = cand["config"]
    if "SPLITK" not in cfg:  # a stage without split-K (hgemm_wgmma)
        return (1,)
    own = cfg["SPLITK"]
    st = stage_of(cand)
    bm, bn, bk = st.block(cfg)
    tiles = cdiv(M, bm) * cdiv(N, bn)
    tensor_core = st.precision != "fp32"  # the wider splits were measured on FP32 stages only
    offered = tuple(s for s in SPLITS if not tensor_core or s & (s - 1) == 0)
    if tensor_core or 2 * M < bm or 2 * N < bn:
        # tiles mostly empty: each block streams B (A) more than it multiplies, which the count of
        # block-K-tiles does not see; split only while under half of the SMs have a block, up to
        # one a SM (where a 16-way split was priced below the skinny stage and ran 2.4x slower)
        if 2 * tiles * own >= sms:
            return (own,)
        cap = sms * max(1, int(per_sm or 1))
    else:
        slots = sms * max(1, int(per_sm if per_sm is not None else cand.get("blocks_per_sm", 1)))
        if tiles >= slots:
            return (own,)
        cap = MAX_SPLIT_WAVES * slots
    return tuple(
        sorted(
            {
                own,
                *(
                    s
                    for s in offered
                    if s == 1 or (cdiv(K, s) >= MIN_SLICE_TILES * bk and tiles * s <= cap)
                ),
            }
        )
    )


#: Registers of an SM and the most one thread may hold (compute capability 9.0: CUDA C++
#: Programming Guide, "Technical Specifications per Compute Capability"): a launch bound of
#: ``MINB`` blocks of T threads caps a thread at ``REGISTERS_PER_SM // (MINB * T)``.
REGISTERS_PER_SM = 65536
MAX_THREAD_REGISTERS = 255
#: The launch bounds the tiled stages take (``kernels._tunable.check_config``): ``MINB`` at most
#: 4 blocks, and at most 2048 threads an SM; checked here without building the stage (the plan
#: asks of every candidate at every split).
MAX_MINB = 4
MAX_SM_THREADS = 2048


def pinned_occupancy(cand: Mapping[str, Any], splits: int, aligned: bool = True) -> int | None:
    """The blocks an SM to which candidate ``cand``, run with ``splits`` K slices, is pinned
    (launch bounds, ``MINB``), or None where it runs as measured: its own split, or a
    configuration with launch bounds of its own that cap registers.

    At a split other than the one it was measured with, a tiled FP32 stage's configuration
    without launch bounds, or with bounds that cap no register (``MINB`` 1 or 2 of 128 threads
    allow 512 or 256 a thread: ptxas is as free as without), is pinned to the most blocks an SM
    any stored kernel of its variant reached (``aligned``: the vector kernel's
    ``blocks_per_sm`` and ``blocks_per_sm_nt``, else the scalar one's), and
    :func:`estimate_ms` prices it there (``per_sm``). Unbounded, ptxas gives a kernel with
    another ``SPLITK`` other registers: on an H200 (driver 580)
    multistage's 64 x 128 tile with B stored transposed runs 3 blocks an SM unsplit and 2 split
    (211-228 registers against 167-173); pinned to 3 (168 registers, no spill) it ran
    1.28-1.31x faster where its blocks filled more than two an SM and at most three, within
    1.5 % elsewhere; double_buffering's 64 x 128 tile (4 an SM unsplit, 3 split) 1.46-1.62x
    faster pinned to 4, 5 % slower at 336 blocks (docs/design.md §4.5). Where the unbounded
    kernel already reaches the pin, the bound only moves ptxas's schedule (and may spill:
    double_buffering's 128 x 128 scalar kernel of 256 threads pinned to 2, 0.82x twice).
    A loose bound of its own is no bound: narrow_n's multistage 64 x 128 tile (NBUF 3, ``MINB``
    1) loads 3 blocks an SM unsplit and 2 at 4 and 12 slices (207 registers offline; 166 pinned
    to 3, no spill), and priced at 3 its 12-slice re-split ran 1.6x its price (docs/design.md
    §4.5, UAR).

    Not pinned: a bound that caps no register (``REGISTERS_PER_SM // (MINB * threads)`` at
    least :data:`MAX_THREAD_REGISTERS`: every kernel reaches that occupancy), one the stage
    refuses (``MINB`` times its threads past 2048), and the stages other than warptiling,
    double_buffering and multistage (not timed pinned)."""
    cfg, st = cand["config"], stage_of(cand)
    if "SPLITK" not in cfg or splits == cfg["SPLITK"]:
        return None
    if not (st.wide_fixup and st.precision == "fp32"):  # the tiled FP32 stages only
        return None
    threads, own = st.threads(cfg), cfg.get("MINB", 0)
    if own and REGISTERS_PER_SM // (own * threads) < MAX_THREAD_REGISTERS:
        return None  # a bound of its own that caps registers: it runs as measured
    keys = ("blocks_per_sm", "blocks_per_sm_nt")
    if not aligned:
        keys = ("blocks_per_sm_scalar", "blocks_per_sm_scalar_nt")
    bps = max(int(cand.get(k, 0)) for k in keys)
    if not 1 <= bps <= MAX_MINB or bps * threads > MAX_SM_THREADS:
        return None  # a bound the stages refuse (kernels._tunable.check_config)
    if REGISTERS_PER_SM // (bps * threads) >= MAX_THREAD_REGISTERS:
        return None  # a bound that caps no register raises no occupancy, only moves code
    return bps


def split_config(cand: Mapping[str, Any], splits: int, pin: int | None = None) -> dict:
    """The configuration that runs tuned candidate ``cand`` with ``splits`` K slices (a
    :func:`split_options` value): its own with ``SPLITK = splits`` and, given a ``pin``
    (:func:`pinned_occupancy`'s, which the caller also prices with), ``MINB = pin``."""
    cfg = dict(cand["config"])
    if "SPLITK" not in cfg:  # a stage without split-K (hgemm_wgmma)
        return cfg
    cfg["SPLITK"] = splits
    return cfg if pin is None else dict(cfg, MINB=pin)


#: The scalar-GMEM kernel's time over its vector twin's, for a class whose data has no
#: ``ms_scalar``. Measured on an H100 (docs/design.md): 1.03 at
#: 4097 x 1023 x 4095, 1.12 at 4095^3, 1.22 at 4097^3, 1.32 at 2047^3, 1.35 at 3000 x 3001 x
#: 3000. With 1.0 (before), an unaligned product priced from such a class was predicted at the
#: aligned kernel's time, up to 35 % too fast: it could not lose to staging (``staging.consider``).
SCALAR_FACTOR = 1.2
