"""Stage 22, tf32_tma_rs: TF32 for row-major B on the TMA-fed, warp-specialized pipeline.

Stage 21 (``tf32_tma``) needs both operands K-major, as TF32 wgmma reads them from SMEM; a
row-major B (``K x N``, the ``NN`` product ``sgemm(a, b)`` computes) is N-major. Stage 18's way
out, on stage 20's pipeline: compute the transposed product ``C^T = B^T A^T`` with the
instruction's "A" operand (``64 x 8``) taken from *registers*, which the threads may load from
any SMEM layout, and its "B" operand the A tile exactly as stage 21 lands it (``BM`` rows of 32
floats of K, 128-byte swizzled, read through a descriptor; the tensor cores truncate it to
TF32). Consumer warpgroup ``j`` owns columns ``64 j .. 64 j + 63`` of the block tile and all its
BM rows: per 8-deep step one ``64 x BM x 8`` product, ``BM / 2`` accumulators per thread
holding C transposed. The producer warpgroup, after the consumers, hands its registers to them
(``setmaxnreg``: 40 for the producer; a block never gets more registers than its launch
allocated, so two consumer warpgroups may take 232 each of the 3 x 168 that one warp of each of
the three warpgroups holds; asking for more would wait forever).

B's tile lands as ``BN / 32`` boxes of 32 columns x BK rows of K, each row 128 bytes with its
16-byte chunk ``c`` at ``c ^ (k % 8)`` (the 128-byte swizzle). Which C column each row of the
register operand stands for is the kernel's choice. Rows ``g`` and ``g + 8`` of warp ``w``'s 16
are the column pair ``n, n + 1``. That makes each lane's fragment (rows g, g + 8 at k = q and
q + 4) two 64-bit SMEM loads and its accumulators 64-bit stores of C. The pairs of warp ``w``
sit in chunks ``h, h + 4`` (lanes g < 4) and ``h + 2, h + 6`` (g >= 4) of its box (``h = w %
2``), so that a half-warp's loads (lanes g = 0..3 or 4..7, q = 0..3) hit 8 different chunks
after the swizzle's ``^ q``: no bank conflict. The values are rounded to TF32 in registers.

Pipeline: unlike stage 20, a consumer waits for all of a tile's products (``wgmma.wait_group
0``) before it loads the next tile's fragments and releases the buffer: a register operand is
read until its product is done, and the simulator, whose products are synchronous, cannot show
a violation (docs/design.md §5.3). The other consumer warpgroups' products keep the tensor
cores busy meanwhile.

``3xtf32`` mode (stage 23, ``tf32x3_tma``): FP32-accurate products, stage 19's arithmetic on
this pipeline. B's fragments are split into TF32 ``big + small`` in registers; the consumer
threads write A's small parts (``tf32(a - trunc_tf32(a))``) of each landed tile to one of three
SMEM tiles and meet on an mbarrier before the products read them; per step three products
(``b_small * a_big``, ``b_big * a_small``, ``b_big * a_big``) into fresh accumulators, added to
the FP32 sums once the tile's products are done. Where the sums and a whole tile's fresh
accumulators would not fit the registers, the tile's products are made in slices of the A
tile's rows (:func:`derived`'s ``SLICES``), each slice's into the same fresh registers and added
before the next. The small parts of tile t + 1 are made while tile t's products run (three
small-part tiles: a warpgroup may still read tile t - 1's while another writes tile t + 1's).

Launch: with programmatic dependent launch (``Stage.dependent_launch``, as stage 20): every
thread waits for the kernel ahead in the stream (``griddepcontrol.wait``) before any GMEM
access.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``, float32, row-major; A's and B's rows 16-byte
aligned (``K % 4 == 0``, ``N % 4 == 0``: the tensor maps' strides); rows and columns past the
matrix are zero-filled by the TMA. C's column pairs are stored together when C's rows are
16-byte aligned (the vector variant), element by element otherwise (scalar). Computes
``C = alpha * A @ B + beta * C`` with TF32 products (FP32-accurate in ``3xtf32``) and FP32 sums;
C is not read when ``beta == 0``. Compute capability 9.0 exactly (``sm_90a``).

Source: PTX ISA 8.x, "wgmma.mma_async" (the register fragment of A; ``.tf32`` K-major SMEM
operands), "cp.async.bulk.tensor", "mbarrier"; NVIDIA CUTLASS sm_90
``KernelTmaWarpSpecializedCooperative``; 3xTF32 from CUTLASS example 27 and Ootomo and Yokota
(IJHPCA 2022), as stage 13.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float32, int32, int64
from ..device import SMEM_OPTIN_LIMIT, tile_grid
from ..ptx import tma
from ..ptx.mma import float_bits, round_tf32_bits, split_tf32_bits
from ..ptx.vecmem import load2, tile_view
from ..ptx.wgmma import (
    CORE_BYTES,
    SW_ATOM,
    SW_ROW,
    SWIZZLE_128B,
    WARPGROUP,
    commit,
    fence,
    fence_proxy_async,
    mma_tf32_rs,
    smem_desc,
    wait,
)
from . import k18_tf32_wgmma as k18
from . import k20_hgemm_tma as k20
from ._common import device_jit, unroll, zero_at
from ._tunable import check_keys, check_rules, entry_kernel, valid_configs
from .k18_tf32_wgmma import MMA_K, STEPS_PER_ROW, SW_ALIGN, WG_N, T
from .stage import Stage

W = SW_ROW // 4  # floats per 128-byte swizzled row: the columns of one B box, K of one A box
ROW_CHUNKS = SW_ROW // CORE_BYTES  # 16-byte chunks per swizzled row (8)
STEP_CHUNKS = MMA_K * ROW_CHUNKS  # chunks of a B box per 8-deep step (8 rows of K)
#: Threads of the producer: a warpgroup (``setmaxnreg`` acts on whole warpgroups), after the
#: consumers; one of its threads issues the copies.
PRODUCER_THREADS = WARPGROUP
#: Per arithmetic mode: accumulator sets (3xTF32: the FP32 sums and one tile's products),
#: register fragments per step (rounded, or big and small), SMEM tiles of A's small parts.
SETS = {"tf32": 1, "3xtf32": 2}
FRAGS = {"tf32": 4, "3xtf32": 8}
LO_BUFS = {"tf32": 0, "3xtf32": 3}
#: Registers per thread besides accumulators and fragments (addresses, descriptors, loop state).
REG_OVERHEAD = 40

#: 256x128x32: two consumer warpgroups of 64 columns x 256 rows (128 accumulators per
#: thread), four buffers of 48 KB: stage 21's tile, transposed.
DEFAULT_CONFIG = dict(BM=256, BN=128, BK=32, NBUF=4)
KEYS = tuple(DEFAULT_CONFIG)


#: 3xTF32: the numbers of slices a tile's products may be cut into, fewest first (each slice
#: a ``64 x BM / slices x 8`` product, its N a multiple of 8).
SLICE_COUNTS = (1, 2, 4)


def registers(BM: int, BK: int, mode: str, slices: int = 1) -> int:
    """Registers per consumer thread: the FP32 sums (``BM / 2``), 3xTF32's per-tile products of
    one slice of the tile (``BM / 2 / slices``), one tile's register fragments, overhead."""
    parts = BM // 2 // slices if SETS[mode] == 2 else 0
    return BM // 2 + parts + FRAGS[mode] * (BK // MMA_K) + REG_OVERHEAD


def derived(cfg: Mapping[str, int], mode: str = "tf32") -> dict:
    """Constants that follow from a configuration: consumer warpgroups, threads, 16-byte
    chunks per tile, bytes a stage's copies land, registers per thread, SMEM, and (3xTF32) the
    slices a tile's products are made in: the fewest whose registers fit the consumers'."""
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    consumers = BN // WG_N
    threads = consumers * WARPGROUP + PRODUCER_THREADS
    budget = k20.consumer_registers(consumers)
    fits = [n for n in SLICE_COUNTS if registers(BM, BK, mode, n) <= budget and BM % (8 * n) == 0]
    slices = fits[0] if fits and mode == "3xtf32" else 1
    return dict(
        CONSUMERS=consumers,
        NUM_THREADS=threads,
        A_CHUNKS=BM * BK // T,
        B_CHUNKS=BK * BN // T,
        STAGE_BYTES=(BM + BN) * BK * 4,
        SLICES=slices,
        REGS=registers(BM, BK, mode, slices),
        CONSUMER_REGS=budget,
        SMEM_BYTES=4 * (NBUF * (BM + BN) * BK + LO_BUFS[mode] * BM * BK),
    )


def check_config(cfg: Mapping[str, int], mode: str = "tf32") -> None:
    """Raise ``ValueError`` naming the violated constraint (for arithmetic ``mode``)."""
    check_keys(cfg, KEYS)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    check_rules(
        cfg,
        [
            (
                BN in (64, 128, 192, 256),
                "BN must be 64, 128, 192 or 256 (one consumer warpgroup per 64 columns)",
            ),
            (BM in (64, 128, 192, 256), "BM must be 64, 128, 192 or 256 (the product's N)"),
            (BK > 0 and BK % W == 0, f"BK a multiple of {W} (whole 128-byte swizzled rows)"),
            (2 <= NBUF <= 8, "NBUF in 2..8"),
        ],
    )
    d = derived(cfg, mode)
    check_rules(
        cfg,
        [
            (
                d["REGS"] <= d["CONSUMER_REGS"],
                f"{d['REGS']} registers per consumer thread (accumulators, fragments, overhead) "
                f"do not fit the {d['CONSUMER_REGS']} that {d['CONSUMERS']} consumer warpgroups "
                "may take",
            ),
            (
                d["A_CHUNKS"] % (d["CONSUMERS"] * WARPGROUP) == 0,
                "the consumer threads must split the A tile into 16-byte chunks evenly",
            ),
            (
                d["SMEM_BYTES"] + 16 * NBUF + 8 * LO_BUFS[mode] <= SMEM_OPTIN_LIMIT,
                f"{d['SMEM_BYTES']} B of SMEM > {SMEM_OPTIN_LIMIT}",
            ),
        ],
    )


@functools.cache
def space(mode: str = "tf32") -> tuple:
    """Candidates: BM x 1-4 consumer warpgroups x BK x NBUF, the valid ones."""
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


def lane_chunk(w: int, g: int) -> int:
    """The 16-byte chunk (0..7) of its 32-column box that holds the column pair of lane group
    ``g`` of warp ``w`` (before the swizzle): ``h, h + 4`` for g < 4, ``h + 2, h + 6`` for g >=
    4, ``h = w % 2``; two groups share a chunk (``g % 2`` picks its half)."""
    return (w & 1) + 2 * (g >> 2) + 4 * ((g >> 1) & 1)


_lane_chunk = device_jit(lane_chunk)


@functools.cache
def make_kernel(
    items: tuple, mode: str = "tf32", pairs: bool = True, slices: int = 0, epilogue=None
):
    """The kernel for one configuration and arithmetic ``mode`` (``"tf32"`` or ``"3xtf32"``);
    ``pairs``: C's column pairs stored together when N is even (the ``"vector"`` variant);
    ``slices``: 3xTF32's slices of a tile's products (0: :func:`derived`'s, the fewest that
    fit; the tests ask for more on the simulator's small tiles); ``epilogue``: a fused epilogue
    (``kernels._epilogue``; its operands before ``alpha``)."""
    cfg = dict(items)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    d = derived(cfg, mode)
    SLICES = slices or d["SLICES"]
    BMS = BM // SLICES  # the A tile's rows per slice: the N of a slice's products
    SLICE_DESC = BMS * SW_ROW // 16  # a descriptor's start, one slice on (16-byte units)
    CONSUMERS, NUM_THREADS, A_CHUNKS, B_CHUNKS = (
        d[k] for k in ("CONSUMERS", "NUM_THREADS", "A_CHUNKS", "B_CHUNKS")
    )
    SPLIT = mode == "3xtf32"
    LO = LO_BUFS[mode]
    PAIRS = pairs
    STEPS = BK // MMA_K
    ACC = BM // 2  # FP32 accumulators per thread: the 64 x BM product in BM / 8 fragments
    PART = BMS // 2  # 3xTF32: one slice's per-tile products per thread
    NFRAG = FRAGS[mode] * STEPS
    CONSUMER_REGS, PRODUCER_REGS = d["CONSUMER_REGS"], k20.PRODUCER_REGS  # (literals)
    CONSUMER_THREADS = CONSUMERS * WARPGROUP
    CONSUMER_ARRIVALS = CONSUMERS * 4  # lane 0 of every consumer warp releases a buffer
    LO_PER_THREAD = A_CHUNKS // CONSUMER_THREADS
    LS_START, LS_N = (NBUF * (A_CHUNKS + B_CHUNKS) * T, LO) if SPLIT else (0, 1)
    produce = k20.make_producer(cfg, "NN", "tf32")
    tile_at = k20.make_tile_order(BM, BN)

    @device_jit
    def _fragment(s, frag, Bs, c0, c1, p2):
        # step s: rows k = 8 s + q (chunk c0) and 8 s + q + 4 (c1) of this lane's box, its
        # columns n, n + 1 (register rows g, g + 8); the values' bits, as int32
        x0, x1 = load2(Bs, c0 + s * STEP_CHUNKS, p2)
        x2, x3 = load2(Bs, c1 + s * STEP_CHUNKS, p2)
        if SPLIT:  # big parts at 8 s .. 8 s + 3, small at 8 s + 4 ..
            frag[8 * s], frag[8 * s + 4] = split_tf32_bits(float_bits(x0))
            frag[8 * s + 1], frag[8 * s + 5] = split_tf32_bits(float_bits(x1))
            frag[8 * s + 2], frag[8 * s + 6] = split_tf32_bits(float_bits(x2))
            frag[8 * s + 3], frag[8 * s + 7] = split_tf32_bits(float_bits(x3))
        else:
            frag[4 * s] = round_tf32_bits(float_bits(x0))
            frag[4 * s + 1] = round_tf32_bits(float_bits(x1))
            frag[4 * s + 2] = round_tf32_bits(float_bits(x2))
            frag[4 * s + 3] = round_tf32_bits(float_bits(x3))

    fragments = unroll(STEPS, _fragment)

    @device_jit
    def _product(s, acc, frag, As, da, Ls, dl):
        # the SMEM operand, the A tile: column block s // 4 of BM rows of 128 bytes, 32 bytes
        # per step within its rows (descriptor starts in units of 16 bytes)
        off = ((s // STEPS_PER_ROW) * BM * SW_ROW + (s % STEPS_PER_ROW) * 4 * MMA_K) // 16
        if SPLIT:
            # fresh accumulators per tile (the tensor cores' sums truncate): small products
            # first, then big * big
            f = 8 * s
            first = 0 if s == 0 else 1
            mma_tf32_rs(
                acc, BMS, frag[f + 4], frag[f + 5], frag[f + 6], frag[f + 7], As, da + off, first
            )
            mma_tf32_rs(acc, BMS, frag[f], frag[f + 1], frag[f + 2], frag[f + 3], Ls, dl + off, 1)
            mma_tf32_rs(acc, BMS, frag[f], frag[f + 1], frag[f + 2], frag[f + 3], As, da + off, 1)
        else:
            f = 4 * s
            mma_tf32_rs(acc, BM, frag[f], frag[f + 1], frag[f + 2], frag[f + 3], As, da + off, 1)

    products = unroll(STEPS, _product)
    zero_all = unroll(ACC, zero_at)

    add_part = k18.make_add(PART)
    split_all = k18.make_small_parts(LO_PER_THREAD, CONSUMER_THREADS)

    @device_jit
    def make_small(As, Ls, lo_ready, ls, tid):
        # this thread's share of a landed A tile's small parts, visible to the tensor cores,
        # then its arrival on the small-part tile's barrier
        split_all(As, Ls, tid)
        fence_proxy_async()
        tma.mbar_arrive(lo_ready, ls)

    @device_jit
    def _slice(
        p, acc, part, frag, As, da, Ls, dl, more, full, s1, phase1, As1, Ls1, lo_ready, ls1, tid
    ):
        # 3xTF32: slice p of tile kt's products (A rows p BMS .. of the tile: accumulators
        # p PART ..) into fresh registers, then into the FP32 sums; while the first slice's
        # products run, tile kt + 1 (``more``: there is one; buffer s1, its small parts' tile
        # ls1) is waited for and its small parts made
        fence()
        products(part, frag, As, da + p * SLICE_DESC, Ls, dl + p * SLICE_DESC)
        commit()
        if p == 0 and more:
            tma.mbar_wait(full, s1, phase1)  # tile kt + 1 has landed
            make_small(As1, Ls1, lo_ready, ls1, tid)
        wait(0, part, BMS)
        add_part(acc, part, p * PART)

    sliced_products = unroll(SLICES, _slice)

    store_all = k18.make_rs_store(BM, epilogue)  # C^T rows (C columns) n, n + 1

    @device_jit
    def tf32_tma_rs(A, B, C, TA, TB, alpha, beta, E):
        M, K = A.shape
        N = B.shape[1]
        # dynamic SMEM: NBUF A tiles, NBUF B tiles (16-byte chunks, 128-byte swizzle), then
        # 3xTF32's three tiles of A's small parts
        smem = cuda.shared.array(0, float32, alignment=SW_ALIGN)
        As = tile_view(smem, 0, (NBUF, A_CHUNKS, T))
        Bs = tile_view(smem, NBUF * A_CHUNKS * T, (NBUF, B_CHUNKS, T))
        Ls = tile_view(smem, LS_START, (LS_N, A_CHUNKS, T))  # (TF32: As[0], never read)
        full = cuda.shared.array(NBUF, int64)  # phase done: the buffer's tiles have landed
        empty = cuda.shared.array(NBUF, int64)  # phase done: its products have read it
        lo_ready = cuda.shared.array(LS_N, int64)  # phase done: every small part is written
        tid = cuda.threadIdx.x
        wg = tid // WARPGROUP
        gx = cuda.gridDim.x  # the grouped tile order
        row0, col0 = tile_at(cuda.blockIdx.y * gx + cuda.blockIdx.x, cuda.gridDim.y, gx)
        k_tiles = (K + BK - 1) // BK
        if tid == 0:
            for s in range(NBUF):
                tma.mbar_init(full, s, 1)
                tma.mbar_init(empty, s, CONSUMER_ARRIVALS)
            for s in range(LO):
                tma.mbar_init(lo_ready, s, CONSUMER_THREADS)
            tma.mbar_fence_init()
        cuda.syncthreads()  # every barrier is initialised before anyone arrives or waits
        # programmatic dependent launch: the kernel ahead in the stream has completed before
        # anything here touches GMEM, and the next launch may start as this one's blocks exit
        tma.pdl_wait()
        tma.pdl_launch_dependents()

        if wg == CONSUMERS:
            # --- producer warpgroup: one thread asks the TMA for each tile (GMEM -> SMEM)
            tma.setmaxnreg_dec(PRODUCER_REGS)
            if tid == CONSUMER_THREADS:
                produce(As, Bs, TA, A, TB, B, full, empty, k_tiles, row0, col0, 0, 0)
        else:
            # --- consumers: B's fragments (registers) and the A tile (SMEM) -> tensor cores
            tma.setmaxnreg_inc(CONSUMER_REGS)
            lane = tid % 32
            g = lane >> 2
            q = lane & 3
            w = (tid // 32) % 4
            bx = 2 * wg + (w >> 1)  # this warp's box of 32 columns
            ch = _lane_chunk(w, g)
            p2 = 2 * (g & 1)  # first column of the pair in its chunk
            c0 = (bx * BK + q) * ROW_CHUNKS + (ch ^ q)  # row k = q of the box, swizzled
            c1 = (bx * BK + q + 4) * ROW_CHUNKS + (ch ^ (q + 4))  # row k = q + 4
            n = col0 + bx * W + ch * T + p2  # this lane's C columns n, n + 1
            acc = cuda.local.array(ACC, float32)
            part = cuda.local.array(PART, float32)  # 3xTF32: one slice of a tile's products
            frag = cuda.local.array(NFRAG, int32)
            zero_all(acc)
            s = 0
            phase = 0
            if SPLIT:
                ls = 0  # small-part tile of tile kt
                lphase = 0
                tma.mbar_wait(full, 0, 0)
                make_small(As[0], Ls[0], lo_ready, 0, tid)
                for kt in range(k_tiles):
                    tma.mbar_wait(lo_ready, ls, lphase)  # all of tile kt's small parts
                    fragments(frag, Bs[s], c0, c1, p2)
                    s1 = s + 1 if s + 1 < NBUF else 0
                    phase1 = phase ^ 1 if s1 == 0 else phase
                    ls1 = ls + 1 if ls + 1 < LO else 0
                    lphase1 = lphase ^ 1 if ls1 == 0 else lphase
                    sliced_products(
                        acc,
                        part,
                        frag,
                        As[s],
                        smem_desc(As[s], 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B,
                        Ls[ls],
                        smem_desc(Ls[ls], 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B,
                        kt + 1 < k_tiles,
                        full,
                        s1,
                        phase1,
                        As[s1],
                        Ls[ls1],
                        lo_ready,
                        ls1,
                        tid,
                    )
                    if lane == 0:
                        tma.mbar_arrive(empty, s)
                    s = s1
                    phase = phase1
                    ls = ls1
                    lphase = lphase1
            else:
                for _ in range(k_tiles):
                    tma.mbar_wait(full, s, phase)  # tile kt has landed in buffer s
                    fragments(frag, Bs[s], c0, c1, p2)
                    fence()
                    da = smem_desc(As[s], 0, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B
                    products(acc, frag, As[s], da, As[s], da)
                    commit()
                    # the products read the fragments' registers until they are done: the
                    # next tile's may not be loaded before (the other warpgroups' products
                    # keep the tensor cores busy meanwhile)
                    wait(0, acc, BM)
                    if lane == 0:
                        tma.mbar_arrive(empty, s)
                    s += 1
                    if s == NBUF:
                        s = 0
                        phase ^= 1

            # --- epilogue: write C (transposed fragments: C rows 8 i + 2 q (+ 1), columns
            # n, n + 1)
            store_all(C, acc, row0 + 2 * q, n, alpha, beta, M, N, PAIRS and N % 2 == 0, E)

    return entry_kernel("tf32_tma_rs", tf32_tma_rs, epilogue, launch_bounds=(NUM_THREADS, 1))


#: Per mode: stage name and ladder label.
MODES = {
    "tf32": ("tf32_tma_rs", "22: TF32 wgmma fed by TMA, B from registers (row-major B)"),
    "3xtf32": ("tf32x3_tma", "23: 3xTF32 on the TMA pipeline (FP32-accurate)"),
}


def make_stage(config: Mapping[str, int], mode: str = "tf32") -> Stage:
    """The stage for one configuration (validated by :func:`check_config`) and arithmetic
    ``mode`` (``"tf32"`` or ``"3xtf32"``)."""
    check_config(config, mode)
    cfg = {k: config[k] for k in KEYS}
    d = derived(cfg, mode)
    name, label = MODES[mode]
    items = tuple(sorted(cfg.items()))

    def launch_config(M, N, K):
        return tile_grid(M, N, cfg["BM"], cfg["BN"]), (d["NUM_THREADS"],)

    return Stage(
        name=name,
        label=label,
        kernel=make_kernel(items, mode),
        scalar_kernel=make_kernel(items, mode, False),
        layouts=("NN",),
        layout_kernel=lambda vec, layout, epilogue=None: make_kernel(
            items, mode, bool(vec), 0, epilogue
        ),
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
        args="AAAMMff",
        threads_of=lambda c: derived(c, mode)["NUM_THREADS"],
        tensor_maps=lambda layout: ("float32", *k20.boxes(cfg, "NN", "tf32")),
        dependent_launch=True,
        epilogue=True,
    )


STAGE = make_stage(DEFAULT_CONFIG)
