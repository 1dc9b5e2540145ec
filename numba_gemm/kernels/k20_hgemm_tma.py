"""Stage 20, hgemm_tma: FP16 wgmma fed by the Tensor Memory Accelerator, warp-specialized.

From ``hgemm_wgmma`` (stage 17: the same 128-byte-swizzled SMEM tiles and ``wgmma`` products):
the copies no longer cost the multiplying warps anything. In stage 17 every thread issues
16-byte ``cp.async`` copies and waits for its own, and every warpgroup stops at a block barrier
each K tile. Here the block is *warp-specialized*: one **producer** warpgroup, of which a single
thread asks the TMA (``numba_gemm.ptx.tma``) for each K tile's A and B boxes, and ``BM / 64``
**consumer** warpgroups that only wait for a tile and multiply. The TMA writes each box already
in the 128-byte swizzle the wgmma descriptors read, zero-filling rows and columns past the
matrix (no clamps, no predicates). Two mbarriers per ring buffer carry the hand-off, as in
CUTLASS's ``PipelineTmaAsync``: *full* (one arrival, the producer's ``expect_tx`` of the tile's
bytes; its phase completes when the bytes have landed) and *empty* (one arrival per consumer
warp once the products that read the buffer are done). No ``cuda.syncthreads`` after the
barriers are made.

Persistent blocks: at most one block per SM, each taking C tiles ``gridDim.x`` apart in the
grouped order (``GROUP_M`` rows of tiles column by column, Triton's and CUTLASS's raster: the
tiles in flight together share their A and B tiles in L2). The ring's buffers and phases run on
from tile to tile, so while the consumers write one tile's C the producer already loads the
next tile's first K tiles. The producer warpgroup hands its registers to the consumers
(``setmaxnreg``, :func:`consumer_registers`). Launched with programmatic dependent launch
(``Stage.dependent_launch``): every thread waits for the kernel ahead in the stream
(``griddepcontrol.wait``) before any GMEM access, and the next launch may start as these blocks
exit (its launch and set-up overlap this kernel's tail; docs/design.md §5.5).

Pipeline: ``NBUF`` buffers. The producer fills buffer ``s`` once its *empty* phase completes
(immediately in the first pass); a consumer waits for *full*, issues tile t's ``BK / 16``
products, leaves them running and, once tile t - 1's are done (``wgmma.wait_group 1``), releases
tile t - 1's buffer. So up to ``NBUF - 2`` tiles are in flight while two are multiplied.

Shapes: A ``(M, K)`` float16 (bfloat16: stage 24) row-major; B ``(K, N)`` row-major (``NN``, read
with the product's ``trans-b``) or stored ``(N, K)`` (``NT``: ``x @ W.T``, K-major like A); C
``(M, N)`` float32 or of the operands' type, row-major. A's and B's rows 16-byte aligned
(``K % 8 == 0``, ``N % 8 == 0``: the tensor maps' strides); C's column pairs are stored
together when N is even and C's rows are 16-byte aligned (the vector variant), element by
element otherwise (the scalar variant, which the plan runs for a C whose rows or base are not).
Computes ``C = alpha * A @ B + beta * C`` with FP32 products and sums; C is not read when
``beta == 0``. The kernel takes the operands' tensor maps after C (``launch.tensormap``: A's box
``(64, BM)``, B's ``(64, BN)`` for NT or ``(64, BK)`` for NN, 128-byte swizzle). Compute capability
9.0 exactly (``sm_90a``).

Source: PTX ISA 8.x, "cp.async.bulk.tensor", "mbarrier", "wgmma.mma_async"; NVIDIA CUTLASS sm_90
``KernelTmaWarpSpecializedCooperative`` (one producer warp issuing TMA, two consumer
warpgroups sharing a 128 x 256 tile) and ``PipelineTmaAsync``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float16, float32, int64
from ..device import SIMULATOR, SMEM_OPTIN_LIMIT, cdiv, gpu_available, sm_count
from ..ptx import tma
from ..ptx.bf16 import c_bytes, pack_c
from ..ptx.mma import quad_transpose
from ..ptx.vecmem import store_words4, tile_view
from ..ptx.wgmma import (
    CORE_BYTES,
    SW_ATOM,
    SW_ROW,
    SWIZZLE_128B,
    WARPGROUP,
    commit,
    fence,
    mma_bf16,
    mma_f16,
    mma_tf32,
    smem_desc,
    wait,
)
from ._common import device_jit, unroll, zero_at
from ._epilogue import stores_for
from ._tunable import check_keys, check_rules, entry_kernel, valid_configs
from .k17_hgemm_wgmma import accumulators_fit
from .stage import Stage

WG_M = 64  # rows of C per warpgroup product
ROW_CHUNKS = SW_ROW // CORE_BYTES  # 16-byte chunks per 128-byte swizzled row (8)
STEP_BYTES = 32  # bytes of K per product step: 16 halves or 8 TF32 values
#: The swizzle repeats every 1024 bytes of SMEM address: the tiles start on such a boundary.
SW_ALIGN = None if SIMULATOR else SW_ATOM
#: Threads of the producer warpgroup (one of which issues the copies).
PRODUCER_THREADS = WARPGROUP
#: Registers the producer warpgroup keeps (``setmaxnreg.dec``; CUTLASS's sm_90 producers: 40).
PRODUCER_REGS = 40
#: Most registers ``setmaxnreg.inc`` asks for per consumer thread (below the 255 an instruction
#: can name).
MAX_CONSUMER_REGS = 240
#: Element type of the operands, per kind: (bytes, product K, the product, SMEM element type).
KINDS = {
    "f16": (2, 16, mma_f16, float16),
    "bf16": (2, 16, mma_bf16, float16),  # SMEM holds the bits; the product reads them as bf16
    "tf32": (4, 8, mma_tf32, float32),
}
#: The tensor-map element type of each kind's operands.
MAP_DTYPE = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32"}
#: Tile rows a group of blocks walks column by column (the launch order of the C tiles): at
#: 8192^3 on an H200 FP16 0.88 -> 0.95 and TF32 0.80 -> 0.96 of cuBLAS, 4096^3 within 1.5 %
#: (docs/design.md §5.2).
GROUP_M = 8

#: 128x256x64: two consumer warpgroups of 64 x 256 (128 FP32 accumulators per thread) and a
#: producer warpgroup; four buffers (192 KB of SMEM). CUTLASS's sm_90 FP16 cooperative tile.
DEFAULT_CONFIG = dict(BM=128, BN=256, BK=64, NBUF=4)
KEYS = tuple(DEFAULT_CONFIG)


def consumer_registers(consumers: int) -> int:
    """Registers per thread ``setmaxnreg.inc`` may give each of ``consumers`` consumer
    warpgroups beside a producer warpgroup keeping :data:`PRODUCER_REGS`. A block never gets
    more registers than its launch allocated (the launch bounds' share of the 65536, 8 at a
    time), and each SM sub-partition holds one warp of every warpgroup: the consumers share
    that warp-slice's allocation less the producer's; asking for more waits forever
    (docs/design.md §5.3)."""
    launch = min(255, 65536 // ((consumers + 1) * WARPGROUP)) // 8 * 8
    pool = (consumers + 1) * launch - PRODUCER_REGS
    return min(MAX_CONSUMER_REGS, pool // consumers // 8 * 8)


def derived(cfg: Mapping[str, int], kind: str = "f16") -> dict:
    """Constants that follow from a configuration: consumer warpgroups, threads, elements per
    128-byte row (``W``), 16-byte chunks per tile, bytes a stage's copies land, SMEM."""
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    item = KINDS[kind][0]
    t = CORE_BYTES // item
    return dict(
        CONSUMERS=BM // WG_M,
        CONSUMER_REGS=consumer_registers(BM // WG_M),
        NUM_THREADS=PRODUCER_THREADS + BM // WG_M * WARPGROUP,
        W=SW_ROW // item,
        T=t,
        A_CHUNKS=BM * BK // t,
        B_CHUNKS=BK * BN // t,
        STAGE_BYTES=(BM + BN) * BK * item,
        SMEM_BYTES=NBUF * (BM + BN) * BK * item,
    )


def check_config(cfg: Mapping[str, int], kind: str = "f16") -> None:
    """Raise ``ValueError`` naming the violated constraint."""
    check_keys(cfg, KEYS)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    item = KINDS[kind][0]
    check_rules(
        cfg,
        [
            (
                BM in (64, 128, 192, 256),
                "BM must be 64, 128, 192 or 256 (one consumer warpgroup per 64 rows)",
            ),
            (
                BN % 64 == 0 and 64 <= BN <= 256,
                "BN in 64..256 by 64 (whole 128-byte rows of a column block; N of one product)",
            ),
            (
                BK > 0 and BK * item % SW_ROW == 0,
                f"BK a multiple of {SW_ROW // item} (whole 128-byte swizzled rows of K)",
            ),
            (2 <= NBUF <= 8, "NBUF in 2..8"),
        ],
    )
    d = derived(cfg, kind)
    check_rules(
        cfg,
        [
            accumulators_fit(BN // 2, d["NUM_THREADS"]),
            (
                d["SMEM_BYTES"] + 16 * NBUF <= SMEM_OPTIN_LIMIT,
                f"{d['SMEM_BYTES']} B of SMEM > {SMEM_OPTIN_LIMIT}",
            ),
        ],
    )


def space(kind: str) -> tuple[dict, ...]:
    """Candidates: 1-4 consumer warpgroups x BN x BK x NBUF, the valid ones."""
    bks = (64, 128) if KINDS[kind][0] == 2 else (32, 64)
    return valid_configs(
        lambda c: check_config(c, kind),
        (
            dict(BM=bm, BN=bn, BK=bk, NBUF=nbuf)
            for bm in (64, 128, 192, 256)
            for bn in (64, 128, 192, 256)
            for bk in bks
            for nbuf in (3, 4, 5, 6)
        ),
    )


def boxes(cfg: Mapping[str, int], layout: str, kind: str = "f16") -> tuple[tuple, tuple]:
    """``(A's box, B's box)`` of the tensor maps, ``(cols, rows)`` of the stored matrices:
    A ``(W, BM)``; B stored ``(N, K)`` (NT): ``(W, BN)``; B ``(K, N)`` (NN): ``(W, BK)``."""
    w = derived(cfg, kind)["W"]
    b = (w, cfg["BN"]) if layout[1] == "T" else (w, cfg["BK"])
    return (w, cfg["BM"]), b


def make_tile_order(BM: int, BN: int):
    """Device function ``tile_at(t, tiles_m, tiles_n) -> (row0, col0)``: the first row and
    column of C tile ``t`` of ``tiles_m x tiles_n`` in the grouped order (tiles in order walk
    ``GROUP_M`` tile rows column by column, so the tiles in flight together share their A and B
    tiles in L2; one tile row: the same order without the divisions)."""

    @device_jit
    def tile_at(t, tiles_m, tiles_n):
        if tiles_m == 1:
            return 0, t * BN
        group = GROUP_M * tiles_n
        first = (t // group) * GROUP_M
        rows = min(tiles_m - first, GROUP_M)
        return (first + (t % group) % rows) * BM, ((t % group) // rows) * BN

    return tile_at


def make_producer(cfg: Mapping[str, int], layout: str, kind: str):
    """Device function ``produce(As, Bs, TA, A, TB, B, full, empty, k_tiles, row0, col0, s,
    phase) -> (s, phase)``: the producer thread's loop over one C tile's K tiles, from ring
    buffer ``s`` in ``phase``. For each it waits until the consumers have released buffer ``s``
    (its *empty* phase), announces the tile's bytes on *full* and asks the TMA for A's boxes
    (``W`` values of K x BM rows each) and B's (stored ``(N, K)``: ``W`` of K x BN rows;
    ``(K, N)``: ``W`` columns x BK rows of K)."""
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    d = derived(cfg, kind)
    W, STAGE_BYTES = d["W"], d["STAGE_BYTES"]
    B_T = layout[1] == "T"
    B_ROWS = BN if B_T else BK  # rows of one B box in SMEM

    @device_jit
    def _load_a(j, As, TA, A, full, s, k0, row0):
        tma.tma_load(As, j * BM * ROW_CHUNKS, TA, A, full, s, k0 + j * W, row0)

    @device_jit
    def _load_b(j, Bs, TB, B, full, s, k0, col0):
        if B_T:  # boxes of W values of K x BN rows
            tma.tma_load(Bs, j * B_ROWS * ROW_CHUNKS, TB, B, full, s, k0 + j * W, col0)
        else:  # boxes of W columns x BK rows of K
            tma.tma_load(Bs, j * B_ROWS * ROW_CHUNKS, TB, B, full, s, col0 + j * W, k0)

    load_a = unroll(BK // W, _load_a)
    load_b = unroll(BK // W if B_T else BN // W, _load_b)

    @device_jit
    def produce(As, Bs, TA, A, TB, B, full, empty, k_tiles, row0, col0, s, phase):
        for kt in range(k_tiles):
            tma.mbar_wait(empty, s, phase ^ 1)  # the consumers are done with buffer s
            tma.mbar_expect_tx(full, s, STAGE_BYTES)
            load_a(As[s], TA, A, full, s, kt * BK, row0)
            load_b(Bs[s], TB, B, full, s, kt * BK, col0)
            s += 1
            if s == NBUF:
                s = 0
                phase ^= 1
        return s, phase

    return produce


@functools.cache
def make_kernel(
    items: tuple, layout: str = "NN", kind: str = "f16", pairs: bool = True, epilogue=None
):
    """The kernel for one configuration, layout (``"NN"`` or ``"NT"``) and operand kind
    (``"f16"``, ``"bf16"``, ``"tf32"``: TF32 operands must both be K-major, so NT only).
    ``pairs``: C's column pairs stored together when N is even (the ``"vector"`` variant, for C
    rows 16-byte aligned); else element by element (``"scalar"``: any C). ``epilogue``: a fused
    epilogue (``kernels._epilogue``; the kernel then takes its operands before ``alpha``), whose
    C is written in column pairs (a 16-bit C's 16-byte stores take none)."""
    cfg = dict(items)
    BM, BN, BK, NBUF = (cfg[k] for k in KEYS)
    d = derived(cfg, kind)
    CONSUMERS, NUM_THREADS, W, T = (d[k] for k in ("CONSUMERS", "NUM_THREADS", "W", "T"))
    CONSUMER_REGS = d["CONSUMER_REGS"]
    A_CHUNKS, B_CHUNKS = d["A_CHUNKS"], d["B_CHUNKS"]
    item, MMA_K, product, smem_type = KINDS[kind]
    B_T = layout == "NT"  # B stored (N, K): K-major like A
    PAIRS = pairs
    if not B_T and kind == "tf32":
        raise ValueError("TF32 wgmma reads both operands K-major from SMEM: layout NT only")
    STEPS = BK // MMA_K
    STEPS_PER_ROW = SW_ROW // STEP_BYTES  # product steps per 128-byte row (4)
    ACC = BN // 2  # FP32 accumulators per thread: the 64 x BN product in BN / 8 fragments
    LBO_B = CORE_BYTES if B_T else BK * SW_ROW  # N-major: bytes between 64-column blocks
    CONSUMER_ARRIVALS = CONSUMERS * 4  # lane 0 of every consumer warp releases a buffer
    produce = make_producer(cfg, layout, kind)
    tile_at = make_tile_order(BM, BN)

    if kind == "tf32":  # (no trans-b operand)

        @device_jit
        def mma(acc, As, da, Bs, db):
            product(acc, BN, As, da, Bs, db, 1)

    else:
        TRANS_B = 0 if B_T else 1  # N-major B: the product's trans-b

        @device_jit
        def mma(acc, As, da, Bs, db):
            product(acc, BN, As, da, Bs, db, 1, TRANS_B)

    @device_jit
    def _product(s, acc, As, da, Bs, db):
        # step s: 32 bytes along the 128-byte rows, the next column block every 4 steps
        a_off = ((s // STEPS_PER_ROW) * BM * SW_ROW + (s % STEPS_PER_ROW) * STEP_BYTES) // 16
        if B_T:
            b_off = ((s // STEPS_PER_ROW) * BN * SW_ROW + (s % STEPS_PER_ROW) * STEP_BYTES) // 16
        else:  # B N-major: 16 rows of K (128 bytes each) per step
            b_off = s * MMA_K * SW_ROW // 16
        mma(acc, As, da + a_off, Bs, db + b_off)

    products = unroll(STEPS, _product)
    zero_all = unroll(ACC, zero_at)

    store_c2 = stores_for(epilogue).store_c2
    QUADS = epilogue is None  # a 16-bit C's 16-byte stores (no epilogue in them)

    @device_jit
    def _store(i, C, acc, r, c0, alpha, beta, M, N, vec, E):
        # columns c, c + 1 of rows r and r + 8 (the wgmma D fragment, once per 8 columns)
        c = c0 + 8 * i
        store_c2(C, r, c, acc[4 * i], acc[4 * i + 1], alpha, beta, M, N, vec, E)
        store_c2(C, r + 8, c, acc[4 * i + 2], acc[4 * i + 3], alpha, beta, M, N, vec, E)

    store_all = unroll(BN // 8, _store)

    @device_jit
    def _row_words(C, acc, b, alpha):
        # one row of fragments 4j .. 4j + 3 (acc[b + 4i], acc[b + 4i + 1] of fragment 4j + i,
        # b = 16j for row r, 16j + 2 for row r + 8), each lane's column pair packed into a word,
        # the quad's words transposed: lane q then holds fragment 4j + q's 8 columns
        return quad_transpose(
            pack_c(C, alpha * acc[b], alpha * acc[b + 1]),
            pack_c(C, alpha * acc[b + 4], alpha * acc[b + 5]),
            pack_c(C, alpha * acc[b + 8], alpha * acc[b + 9]),
            pack_c(C, alpha * acc[b + 12], alpha * acc[b + 13]),
        )

    @device_jit
    def _store_quad(j, C, acc, r, col0, q, alpha, M, N):
        # a 16-bit C, 16 bytes per lane: rows r and r + 8 of fragments 4j .. 4j + 3
        x0, x1, x2, x3 = _row_words(C, acc, 16 * j, alpha)
        y0, y1, y2, y3 = _row_words(C, acc, 16 * j + 2, alpha)
        c = col0 + 8 * (4 * j + q)
        if c < N:
            if r < M:
                store_words4(C, r, c, x0, x1, x2, x3)
            if r + 8 < M:
                store_words4(C, r + 8, c, y0, y1, y2, y3)

    store_quads = unroll(BN // 32, _store_quad)

    @device_jit
    def hgemm_tma(A, B, C, TA, TB, alpha, beta, E):
        M, K = A.shape
        N = B.shape[0] if B_T else B.shape[1]
        # dynamic SMEM: NBUF A tiles, then NBUF B tiles, 16-byte chunks in the 128-byte swizzle
        smem = cuda.shared.array(0, smem_type, alignment=SW_ALIGN)
        As = tile_view(smem, 0, (NBUF, A_CHUNKS, T))
        Bs = tile_view(smem, NBUF * A_CHUNKS * T, (NBUF, B_CHUNKS, T))
        full = cuda.shared.array(NBUF, int64)  # phase done: the buffer's tiles have landed
        empty = cuda.shared.array(NBUF, int64)  # phase done: its products have read it
        tid = cuda.threadIdx.x
        wg = tid // WARPGROUP
        tiles_m = (M + BM - 1) // BM
        tiles_n = (N + BN - 1) // BN
        k_tiles = (K + BK - 1) // BK
        if tid == 0:
            for s in range(NBUF):
                tma.mbar_init(full, s, 1)
                tma.mbar_init(empty, s, CONSUMER_ARRIVALS)
            tma.mbar_fence_init()
        cuda.syncthreads()  # every barrier is initialised before anyone arrives or waits
        # programmatic dependent launch: the kernel ahead in the stream has completed before
        # anything here touches GMEM, and the next launch may start as this one's blocks exit
        tma.pdl_wait()
        tma.pdl_launch_dependents()

        if wg == 0:
            # --- producer: one thread asks the TMA for each tile (GMEM -> SMEM); the
            # warpgroup's registers go to the consumers
            tma.setmaxnreg_dec(PRODUCER_REGS)
            if tid == 0:
                s = 0
                phase = 0
                for t in range(cuda.blockIdx.x, tiles_m * tiles_n, cuda.gridDim.x):
                    row0, col0 = tile_at(t, tiles_m, tiles_n)
                    s, phase = produce(
                        As, Bs, TA, A, TB, B, full, empty, k_tiles, row0, col0, s, phase
                    )
        else:
            # --- consumers: SMEM -> tensor cores, BK / MMA_K products of 64 x BN per tile
            tma.setmaxnreg_inc(CONSUMER_REGS)
            lane = tid % 32
            acc = cuda.local.array(ACC, float32)
            a_chunk = (wg - 1) * WG_M * ROW_CHUNKS  # this warpgroup's 64 rows of the A tile
            s = 0
            phase = 0
            for t in range(cuda.blockIdx.x, tiles_m * tiles_n, cuda.gridDim.x):
                row0, col0 = tile_at(t, tiles_m, tiles_n)
                zero_all(acc)
                prev = 0
                for kt in range(k_tiles):
                    tma.mbar_wait(full, s, phase)  # K tile kt has landed in buffer s
                    fence()
                    # (A's lbo is unused by a K-major swizzled operand; 16, the smallest)
                    products(
                        acc,
                        As[s],
                        smem_desc(As[s], a_chunk, 0, CORE_BYTES, SW_ATOM) | SWIZZLE_128B,
                        Bs[s],
                        smem_desc(Bs[s], 0, 0, LBO_B, SW_ATOM) | SWIZZLE_128B,
                    )
                    commit()
                    wait(1, acc, BN)  # K tile kt - 1's products are done: release its buffer
                    if kt > 0 and lane == 0:
                        tma.mbar_arrive(empty, prev)
                    prev = s
                    s += 1
                    if s == NBUF:
                        s = 0
                        phase ^= 1
                wait(0, acc, BN)
                if lane == 0:  # the tile's last buffer: the producer fills it for the next tile
                    tma.mbar_arrive(empty, prev)

                # --- epilogue: write C (lane (g, q) of warp w: rows 16 w + g (+ 8), columns
                # 2 q (+ 1) of each 8-column fragment), while the producer loads the next tile
                r = row0 + (wg - 1) * WG_M + ((tid // 32) % 4) * 16 + (lane >> 2)
                if QUADS and c_bytes(C) == 2 and PAIRS and N % 8 == 0 and beta == 0:
                    # a 16-bit C (its type's constant: the other branch is dead code), rows
                    # 16-byte aligned: 16-byte stores (docs/design.md §5.4)
                    store_quads(C, acc, r, col0, lane & 3, alpha, M, N)
                else:
                    c = col0 + 2 * (lane & 3)
                    store_all(C, acc, r, c, alpha, beta, M, N, PAIRS and N % 2 == 0, E)

    return entry_kernel("hgemm_tma", hgemm_tma, epilogue, launch_bounds=(NUM_THREADS, 1))


#: Per kind: stage name, ladder label, precision, layouts, kernel argument spec.
STAGE_OF = {
    "f16": (
        "hgemm_tma",
        "20: FP16 wgmma fed by TMA, warp-specialized",
        "fp16",
        ("NN", "NT"),
        "HHAMMff",
    ),
    "tf32": (
        "tf32_tma",
        "21: TF32 wgmma fed by TMA, warp-specialized (x @ W.T)",
        "tf32",
        ("NT",),
        "AAAMMff",
    ),
    "bf16": (  # stage 24: A and B (and a bfloat16 C) as their bits, uint16
        "bf16_tma",
        "24: BF16 wgmma fed by TMA, warp-specialized",
        "bf16",
        ("NN", "NT"),
        "UUAMMff",
    ),
}


def make_stage(config: Mapping[str, int], kind: str = "f16") -> Stage:
    """The stage for one configuration (validated by :func:`check_config`) and operand kind."""
    check_config(config, kind)
    cfg = {k: config[k] for k in KEYS}
    d = derived(cfg, kind)
    name, label, precision, layouts, args = STAGE_OF[kind]

    def launch_config(M, N, K):
        # persistent: at most one block per SM, each walking C tiles gridDim.x apart (with no
        # GPU, for the offline tools: one block per tile)
        tiles = cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"])
        sms = sm_count() if SIMULATOR or gpu_available() else tiles
        return (min(tiles, sms),), (d["NUM_THREADS"],)

    items = tuple(sorted(cfg.items()))
    return Stage(
        name=name,
        label=label,
        kernel=make_kernel(items, layouts[0], kind),
        scalar_kernel=make_kernel(items, layouts[0], kind, False),
        layouts=layouts,
        layout_kernel=lambda vec, layout, epilogue=None: make_kernel(
            items, layout, kind, bool(vec), epilogue
        ),
        launch_config=launch_config,
        precision=precision,
        config=cfg,
        factory=functools.partial(make_stage, kind=kind),
        space=space(kind),
        check_config=functools.partial(check_config, kind=kind),
        dynamic_smem=d["SMEM_BYTES"],
        min_cc=(9, 0),
        arch=(9, 0),
        tile=(cfg["BM"], cfg["BN"]),
        args=args,
        threads_of=lambda c: derived(c, kind)["NUM_THREADS"],
        tensor_maps=lambda layout: (MAP_DTYPE[kind], *boxes(cfg, layout, kind)),
        persistent=True,
        dependent_launch=True,
        epilogue=True,
        tuned_as="hgemm_tma" if kind == "bf16" else None,
    )


STAGE = make_stage(DEFAULT_CONFIG)
