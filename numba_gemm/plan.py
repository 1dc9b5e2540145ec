"""The plan: which kernel runs an ``(M, K) @ (K, N)`` product on a GPU, chosen once.

``plan_for(M, N, K, stage=..., aligned=..., device=...)`` is the one place that chooses the stage,
its tile configuration, the vector or scalar-GMEM variant and the split-K factor, and says why
(``Plan.reason``, ``repr(plan)``). Plans are memoized per (device, M, N, K, alignment, stage
request), so after the first call of a shape ``sgemm`` is: validate -> a dictionary hit -> launch.
The kernels of a plan are compiled (through the on-disk cache) and loaded on its GPU the first
time it runs, then launched directly (``numba_gemm.launch``).

The automatic choice (``stage=None``) prices candidates of every FP32 stage usable on the device
(the user's tuning cache, else the committed defaults for its compute capability:
``numba_gemm.tuning``) with a wave-quantization model (:func:`estimate_ms`) and takes the
cheapest: the candidates an exhaustive sweep measured at the nearest measured shape, if one lies
closer than ``tuning.NEAR`` to the product; else, for at most ``tuning.SKINNY_ROWS`` rows, the
skinny stage's candidates of the measured shape of nearby rows nearest to it, priced by the bytes
of B they read (:func:`stream_ms`); else every tuned candidate of the product's shape class; with
no tuning data, the top FP32 stage of the ladder with its default tiles.

The models: CUTLASS's Python ``Gemm`` plan (choose and compile once, ``run()`` many times),
cuBLASLt's heuristic -> algo, Triton's ``autotune(key=...)``.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

from . import device as _device
from . import tuning
from .devarray import F32, Operand, operand
from .device import DeviceInfo, cdiv
from .kernels import STAGES, _splitk, _streamk, get_stage
from .kernels._tunable import SPLIT_ARGS, STREAM_K
from .launch import Kernel, gemm_launcher, load_kernel, stream_handle
from .registry import Stage, variant_key


class Geometry(NamedTuple):
    """How the operands of a (batched) product lie in memory, in elements (float32).

    ``C[b] = A[b] @ B[b]`` for ``b < batch``, A ``(M, K)``, B ``(K, N)``, C ``(M, N)`` each.
    ``layout`` says, as in BLAS, whether A and B are stored transposed: ``"NN"`` (both
    row-major), ``"NT"`` (B stored as a row-major ``(N, K)``, i.e. column-major), ``"TN"``,
    ``"TT"``; C is row-major. ``lda``, ``ldb``, ``ldc``: the row pitch of each operand's storage
    (``>=`` its storage row length); ``stride_a``, ``stride_b``, ``stride_c``: elements between
    consecutive matrices of the batch (0: one matrix broadcast to the whole batch).
    """

    batch: int
    M: int
    N: int
    K: int
    layout: str = "NN"
    lda: int = 0
    ldb: int = 0
    ldc: int = 0
    stride_a: int = 0
    stride_b: int = 0
    stride_c: int = 0

    @classmethod
    def plain(cls, M: int, N: int, K: int) -> Geometry:
        """One row-major, C-contiguous product (the ladder's teaching form)."""
        return cls(1, M, N, K, "NN", K, N, N, 0, 0, 0)

    @classmethod
    def dense(cls, M: int, N: int, K: int, layout: str = "NN") -> Geometry:
        """One contiguous product with A and B stored as ``layout`` says (A as a row-major
        ``(K, M)`` when transposed, B as a row-major ``(N, K)``: ``x @ W.T``)."""
        return cls(1, M, N, K, layout, K if layout[0] == "N" else M,
                   N if layout[1] == "N" else K, N, 0, 0, 0)

    @property
    def is_plain(self) -> bool:
        return self == Geometry.plain(self.M, self.N, self.K)

    def shape_aligned(self) -> bool:
        """The alignment rule (``devarray.rows_aligned``) on everything but the base pointers:
        every pitch and batch stride, and the length of each operand's contiguous dimension
        (the vector kernels clamp a float4 inside it), are multiples of 4 floats."""
        return self.loads_aligned() and not ((self.ldc | self.stride_c | self.N) & 3)

    def loads_aligned(self) -> bool:
        """:meth:`shape_aligned` for A and B alone: whether, with their base pointers 16-byte
        aligned, every row of A and B allows 128-bit loads (the ``"vector_loads"`` variant,
        whatever C's pitch; ``registry.VECTOR_LOADS``)."""
        ea = self.K if self.layout[0] == "N" else self.M
        eb = self.N if self.layout[1] == "N" else self.K
        return not ((self.lda | self.ldb | self.stride_a | self.stride_b | ea | eb) & 3)

    def arrays(self, A: Any, B: Any, C: Any) -> tuple[Operand, Operand, Operand]:
        """The kernel arguments of a strided-batch stage (spec ``S``): A ``(batch, M, K)``,
        B ``(batch, K, N)``, C ``(batch, M, N)`` with byte strides, over the operands' memory
        (``A``, ``B``, ``C``: objects with ``ptr`` and ``obj``)."""
        b, M, N, K = self.batch, self.M, self.N, self.K
        sa = (4 * self.stride_a, 4 * self.lda, 4) if self.layout[0] == "N" else (
            4 * self.stride_a, 4, 4 * self.lda)
        sb = (4 * self.stride_b, 4 * self.ldb, 4) if self.layout[1] == "N" else (
            4 * self.stride_b, 4, 4 * self.ldb)
        return (Operand(A.obj, A.ptr, (b, M, K), sa, F32, 0),
                Operand(B.obj, B.ptr, (b, K, N), sb, F32, 0),
                Operand(C.obj, C.ptr, (b, M, N), (4 * self.stride_c, 4 * self.ldc, 4), F32, 0))


def serves(st: Stage, g: Geometry) -> str | None:
    """Why stage ``st`` cannot run geometry ``g`` (None: it can)."""
    if g.is_plain:
        return None
    if not st.batched:
        return (f"stage {st.name!r} takes the ladder's teaching form only (2-D, row-major, "
                f"C-contiguous A and B); this product has layout {g.layout}, batch {g.batch} and "
                f"row pitches ({g.lda}, {g.ldb}, {g.ldc}): use stage=None or one of "
                + ", ".join(repr(s.name) for s in STAGES if s.batched))
    if g.layout not in st.layouts:
        return f"stage {st.name!r} with config {dict(st.config)} serves layouts {st.layouts}"
    if st.split_k != 1 and g.batch > 1:
        return "split-K and stream-K are for one matrix, not a batch"
    return None


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


def block_threads(cfg: Mapping[str, int]) -> int:
    """Threads per block of a tuned FP32 configuration: ``NT`` (skinny, skinny_n), else one warp per
    ``WM x WN`` warp tile of the ``BM x BN`` block tile."""
    if "NT" in cfg:
        return int(cfg["NT"])
    return (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"]) * 32


def reduce_ms(splits: int, M: int, N: int, cfg: Mapping[str, int]) -> float:
    """Predicted cost (ms) of split-K with ``splits`` slices for configuration ``cfg`` at
    ``M x N``: the partial products' traffic and the last blocks' sums."""
    if splits <= 1:
        return 0.0
    gs, g = _splitk.groups(splits)
    bm, bn, _ = tuning.tile_of(cfg)
    nt = block_threads(cfg)
    wide = "WM" in cfg  # the tiled stages' fixup (``_tunable.make_epilogue``)
    items = cdiv(cdiv(bm * bn // 4, nt), _splitk.items_per_round(bm, bn, nt, splits, wide))
    rounds = cdiv(gs, _splitk.FIXUP_DEPTH) + (cdiv(g, _splitk.FIXUP_DEPTH) if g > 1 else 0)
    return ((1 if g == 1 else 2) * REDUCE_LEVEL_MS + rounds * items * REDUCE_ROUND_MS
            + 2 * splits * M * N * 4 / REDUCE_BYTES_PER_MS)


#: Warps per SM a stream-K grid first assumes (``Plan``): the kernel's loop over units keeps the
#: tile's bookkeeping live, and the tuned tiles' kernels grow to 255 registers with it (8 warps of
#: 255 registers fill the 64 K register file). The grid is then clamped to the loaded kernel's
#: occupancy: a grid past the resident blocks would run a second wave.
STREAM_K_WARPS_PER_SM = 8


def estimate_ms(
    cand: Mapping[str, Any], M: int, N: int, K: int, sms: int, aligned: bool = True,
    scalar_factor: float = 1.0, batch: int = 1, splits: int | None = None,
) -> float:
    """Predicted time (ms) of a tuned candidate at ``batch`` x ``(M, N, K)`` from its time at the
    tuned shape (``cand["batch"]`` x ``cand["shape"]``; batch 1 when not recorded).

    Wave-quantization model: a kernel runs in ``ceil(blocks / (SMs * blocks_per_sm))`` waves of
    blocks that each walk ``ceil(K_slice / BK)`` K tiles, so time scales with waves x K tiles.
    It is what makes a ragged size (4097: one more row and column of mostly empty tiles, maybe one
    more wave) pick a finer tile than 4096 does. A split-K candidate's reduction
    (:func:`reduce_ms`) does not scale that way: it is taken out of the tuned time and priced
    at the new shape, so a small product does not pay for a reduction it cannot amortize.

    ``splits``: the K slices to price at this shape (the launch layer's split-K: the same tiles
    with another ``SPLITK``; default: the candidate's own).

    ``aligned=False`` (rows of A, B or C not 16-byte aligned: the scalar-GMEM kernel runs) scales
    from ``ms_scalar``, the scalar kernel's time at the tuned shape less one in each dimension
    (same tile counts), with its own occupancy ``blocks_per_sm_scalar``; a candidate without
    ``ms_scalar`` uses ``ms * scalar_factor`` (the class winner's ratio).
    """
    cfg = cand["config"]
    Mr, Nr, Kr = cand["shape"]
    Br = cand.get("batch", 1)
    s = cfg.get("SPLITK", 1)
    s_new = s if splits is None else splits
    if aligned:
        ms, bps = cand["ms"], cand.get("blocks_per_sm", 1)
    else:
        ms = cand.get("ms_scalar", cand["ms"] * scalar_factor)
        bps = cand.get("blocks_per_sm_scalar", cand.get("blocks_per_sm", 1))
    slots = max(1, sms * int(bps))

    bm, bn, bk = tuning.tile_of(cfg)

    def work(m, n, k, b, s):
        waves = cdiv(cdiv(m, bm) * cdiv(n, bn) * s * b, slots)
        return waves * cdiv(cdiv(k, s), bk)

    main = max(float(ms) - reduce_ms(s, Mr, Nr, cfg), 0.1 * float(ms))
    return (main * work(M, N, K, batch, s_new) / work(Mr, Nr, Kr, Br, s)
            + reduce_ms(s_new, M, N, cfg))


def stream_ms(cand: Mapping[str, Any], M: int, N: int, K: int, sms: int) -> float:
    """Predicted time (ms) of a skinny-stage candidate at ``(M, N, K)`` from its time at the shape
    it was measured at (``cand["shape"]``), by the bytes of B it reads: the stage streams B once
    per ``MT`` rows of C, at a rate that grows with its blocks up to one per SM and is flat past
    it (on an H100 the 4096^2 picks of 1 and 8 rows, 256 blocks each at 4 and 2 a SM, streamed
    B at 2.2-2.3 TB/s alike); split-K's sum is priced apart (:func:`reduce_ms`).

    The wave model (:func:`estimate_ms`) counts a second wave of blocks as a second block time,
    but in a stream the blocks share the DRAM: on an H100 the 8 x 4096^2 pick ran 8 x 8192^2
    (twice its blocks, four times the bytes) in 3.2x its time, where the wave model said 4x and
    priced the skinny class's 16-row tiles ahead of it (53 % slower there: bench/NOTES.md)."""
    cfg = cand["config"]
    Mr, Nr, Kr = cand["shape"]
    mt, bn, s = cfg["MT"], cfg["BN"], cfg.get("SPLITK", 1)

    def cost(m, n, k):  # B's bytes read over the share of the SMs the grid fills
        reads = cdiv(m, mt)
        return reads * n * k / min(1.0, reads * cdiv(n, bn) * s / sms)

    main = max(float(cand["ms"]) - reduce_ms(s, Mr, Nr, cfg), 0.1 * float(cand["ms"]))
    return main * cost(M, N, K) / cost(Mr, Nr, Kr) + reduce_ms(s, M, N, cfg)


#: K slices the launch layer may give any tuned candidate of one product (split-K): tried only
#: when the candidate's blocks, with its own split, would leave more than half of the SMs without
#: a block, up to one block per SM, each slice at least ``MIN_SLICE_TILES`` K steps deep; priced
#: by :func:`estimate_ms` with the reduction. Wider than that, the wave model (which counts
#: ``blocks_per_sm`` blocks of one SM as one slot each) mispriced them on an H200: a 4-way split
#: predicted at 0.32 ms ran 1.37 ms at 1024 x 1024 x 16384, and a 16-way one predicted below the
#: skinny stage ran 2.4x slower at 16 x 4096 x 4096 (bench/results/nvidia-h200/2026-11-22-shapes).
SPLITS = (1, 2, 4, 8, 16, 32, 64)
MIN_SLICE_TILES = 8


def split_options(cand: Mapping[str, Any], M: int, N: int, K: int, sms: int, per_sm: int = 1
                  ) -> tuple[int, ...]:
    """The ``SPLITK`` values to price for candidate ``cand`` at ``(M, N, K)``: its own, and when
    its blocks occupy fewer than half of the ``sms`` SMs, every one of :data:`SPLITS` that keeps
    each K slice ``MIN_SLICE_TILES`` steps deep and at most ``per_sm`` blocks per SM (the plan
    prices 1; an exhaustive sweep, ``bench/shapes.py``, times up to the candidate's occupancy).

    Not stream-K (``STREAM_K``, run by naming a configuration with it): this wave model prices
    each K tile of a block at its cost in the tuned full waves, so it takes a part-filled wave of
    blocks (each alone on its SM, running faster) for a full one, and on an H200 it picked
    stream-K where it lost 5-25 % (1000^3, 1024^3, 4097^3: bench/NOTES.md)."""
    cfg = cand["config"]
    own = cfg.get("SPLITK", 1)
    bm, bn, bk = tuning.tile_of(cfg)
    tiles = cdiv(M, bm) * cdiv(N, bn)
    if 2 * tiles * own >= sms:
        return (own,)
    return tuple(sorted({own, *(s for s in SPLITS if s == 1 or (
        cdiv(K, s) >= MIN_SLICE_TILES * bk and tiles * s <= sms * per_sm))}))


#: The scalar-GMEM kernel's time over its vector twin's, for a class whose data has no
#: ``ms_scalar``. Measured on an H100 (bench/results/nvidia-h100/2026-11-25-staging): 1.03 at
#: 4097 x 1023 x 4095, 1.12 at 4095^3, 1.22 at 4097^3, 1.32 at 2047^3, 1.35 at 3000 x 3001 x
#: 3000. With 1.0 (before), an unaligned product priced from such a class was predicted at the
#: aligned kernel's time, up to 35 % too fast: it could not lose to staging (``staging.consider``).
SCALAR_FACTOR = 1.2


def _priced(name: str, g: Geometry, aligned: bool, dev: DeviceInfo
            ) -> list[tuple[float, dict, str]]:
    """``[(predicted ms, config, class)]`` of every tuned candidate of stage ``name`` for this
    product's class on ``dev`` (:func:`tuning.shape_class`; a product without data of its own
    class is priced in its area class, a batch as ``batch * M`` rows; a batch takes no split-K),
    each with the K slices of :func:`split_options`, cheapest first; empty without tuning
    data."""
    M, N, K = g.M, g.N, g.K
    res = None
    for cls in dict.fromkeys((tuning.shape_class(M, N, K, g.batch),
                              tuning.fallback_class(M, N, K, g.batch))):
        res = tuning.winners(cls, dev).get(name)
        if isinstance(res, Mapping):
            break
    if not isinstance(res, Mapping):
        return []
    cands = [c for c in tuning.candidates(res)
             if g.batch == 1 or c["config"].get("SPLITK", 1) == 1]  # no split-K of a batch
    if not cands:
        return []
    main = cands[0]
    factor = main["ms_scalar"] / main["ms"] if "ms_scalar" in main else SCALAR_FACTOR
    priced = []
    for c in cands:
        for s in split_options(c, M, N, K, dev.sm_count) if g.batch == 1 else (1,):
            priced.append((estimate_ms(c, M, N, K, dev.sm_count, aligned, factor, g.batch, s),
                           dict(c["config"], SPLITK=s), cls))
    return sorted(priced, key=lambda p: p[0])


def _measured(g: Geometry, aligned: bool, dev: DeviceInfo, names: set[str]
              ) -> list[tuple[float, str, dict, str]]:
    """``[(predicted ms, stage name, config, where)]`` of the candidates of stages ``names``
    measured at the nearest measured shape (:func:`tuning.nearest_shape`: an exhaustive sweep's
    fastest there, same alignment, closer than ``tuning.NEAR``), each scaled to this shape by the
    wave model from its own time there (a stream-K candidate only at that very shape: the wave model
    cannot scale it); cheapest first. With none near and at most ``tuning.SKINNY_ROWS`` rows: the
    skinny stage's candidates of the measured shape of nearby rows nearest in N and K
    (:func:`tuning.nearest_rows_shape`), priced by :func:`stream_ms`, if the skinny stage won
    there. Both searches take the measurements of the product's layout first, then those of B
    stored alike, then any (``tuning.layout_rank``): the skinny stage's configurations for B
    stored transposed are others than for row-major B. Empty for a batch or with no measured
    shape near."""
    if g.batch != 1:
        return []

    def named(rec):
        lay = tuning.layout_of(rec)
        return ("the measured shape " + "x".join(map(str, rec["shape"]))
                + ("" if lay == "NN" else f" ({lay})"))

    for rank in range(3):  # the product's layout, then B stored alike, then any
        rec = tuning.nearest_shape(g.M, g.N, g.K, aligned, dev, g.layout, rank)
        if rec is not None:
            break
        rows = (tuning.nearest_rows_shape(g.M, g.N, g.K, aligned, dev, g.layout, rank)
                if "skinny" in names else None)
        if rows is not None:  # a few rows: the skinny stage, priced by the bytes of B
            winner = min(rows["candidates"], key=lambda c: c["ms"], default=None)
            if winner is None or winner["stage"] != "skinny":
                return []  # (16 x 50257 x 768, odd N: the tiled stages won there)
            where = named(rows) + " (rows near)"
            return sorted((stream_ms(dict(c, shape=rows["shape"]), g.M, g.N, g.K, dev.sm_count),
                           c["stage"], dict(c["config"]), where)
                          for c in rows["candidates"] if c["stage"] == "skinny")
    if rec is None:
        return []
    where = named(rec)
    out = []
    for c in rec["candidates"]:
        if c["stage"] not in names:
            continue
        if c["config"].get("SPLITK", 1) == STREAM_K:
            if rec["distance"] > 0:
                continue
            ms = float(c["ms"])
        else:  # c["ms"] and c["blocks_per_sm"] are of the variant that ran there
            ms = estimate_ms(dict(c, shape=rec["shape"]), g.M, g.N, g.K, dev.sm_count)
        out.append((ms, c["stage"], dict(c["config"]), where))
    return sorted(out, key=lambda p: p[:2])


def _configured(st: Stage, cfg: dict | None) -> Stage | None:
    """``st`` built with ``cfg``; None (with a warning) if the tuned ``cfg`` is stale."""
    if cfg is None or dict(st.config) == cfg:
        return st
    try:
        return st.with_config(cfg)
    except (TypeError, ValueError) as e:
        warnings.warn(f"ignoring tuned config of {st.name!r} ({e}); using its default",
                      stacklevel=4)
        return None


def _choose(g: Geometry, stage: str | Stage | None, aligned: bool, dev: DeviceInfo,
            compute: str = "fp32") -> tuple[Stage, float | None, str]:
    """(configured stage, predicted ms or None, reason)."""
    M, N, K = g.M, g.N, g.K
    src = tuning.source(dev) or "no tuning file"

    def ok(st: Stage) -> bool:
        return st.supports(M, N, K) and serves(st, g) is None

    if isinstance(stage, Stage):
        return stage, None, "the Stage object passed by the caller"
    if isinstance(stage, str):
        st = get_stage(stage)
        if st.tunable:
            for ms, _, cfg, where in _measured(g, aligned, dev, {st.name}):
                built = _configured(st, cfg)
                if built is not None and ok(built):
                    return built, ms, (f"stage {stage!r} by name; its candidate predicted "
                                       f"fastest from {where} ({src})")
            for ms, cfg, cls in _priced(st.name, g, aligned, dev):
                built = _configured(st, cfg)
                if built is not None and ok(built):
                    return built, ms, (f"stage {stage!r} by name; its tuned candidate predicted "
                                       f"fastest for the {cls} class ({src})")
            return st, None, f"stage {stage!r} by name; its default tiles (no tuning data)"
        return st, None, f"stage {stage!r} by name (fixed tiles)"
    usable = [s for s in STAGES if s.precision == compute and s.runs_on(dev.cc)]
    if not usable:
        need = min((s.min_cc for s in STAGES if s.precision == compute), default=None)
        raise ValueError(f"compute={compute!r} needs compute capability {need[0]}.{need[1]}+; "
                         f"{dev.name} is {dev.cc[0]}.{dev.cc[1]}" if need else
                         f"no stage computes {compute!r}")

    def classed():  # every usable stage's tuned candidates for this product's class, priced
        picks = []
        for s in usable:
            picks += [(ms, s.name, cfg, f"the {cls} class")
                      for ms, cfg, cls in _priced(s.name, g, aligned, dev)]
        return sorted(picks, key=lambda p: p[:2])

    # a sweep's measurements near this shape, else the classes' tuned candidates (mixing the
    # two would let a class's extrapolation, often optimistic, win over a measurement); the
    # classes also when no measured candidate serves this geometry (B stored transposed, where
    # the measured skinny configurations all stream B through a ring, which reads it row-major)
    for picks in (_measured(g, aligned, dev, {s.name for s in usable}), None):
        picks = classed() if picks is None else picks
        for ms, name, cfg, where in picks:
            built = _configured(get_stage(name), cfg)
            if built is not None and ok(built):
                others = [f"{n} {m:.3g} ms" for m, n, _, _ in picks if n != name][:2]
                return built, ms, (
                    f"auto: cheapest of {len(picks)} candidates from {where} on "
                    f"{dev.name} ({src}), priced by "
                    + ("the bytes of B they read" if where.endswith("(rows near)") else
                       "the wave model") + " at this shape"
                    + (f"; next: {', '.join(others)}" if others else ""))
    for s in reversed(usable):
        if s.general and ok(s):
            return s, None, (f"auto: no tuning data for {dev.name} that serves this product: the "
                             f"top general {compute} stage of the ladder with its default tiles")
    raise ValueError(f"no {compute} stage serves this product ({g}): the tensor-core stages take "
                     "2-D row-major C-contiguous operands only")


class Plan:
    """What ``sgemm`` runs for one (device, geometry, alignment, stage request), decided once.

    Attributes:
        M, N, K: the shape: A ``(M, K)``, B ``(K, N)``, C ``(M, N)`` (per matrix of a batch).
        geometry: the :class:`Geometry` (batch, layout, pitches, batch strides).
        stage: the configured :class:`~numba_gemm.registry.Stage`.
        variant: ``"vector"`` (128-bit GMEM accesses), ``"scalar"`` (rows not 16-byte aligned)
            or ``"vector_loads"`` (only C's rows not aligned; ``registry.VECTOR_LOADS``).
        split_k: K slices (>1: partial products into a workspace, summed by the last slice of
            each tile in the same kernel); ``STREAM_K`` (0): stream-K on ``grid[0]`` blocks.
        device: the GPU (``numba_gemm.device.DeviceInfo``).
        grid, block: 3-D launch geometry of the main kernel; ``smem``: its dynamic SMEM, bytes.
        predicted_ms: the cost model's time, or None when no tuning data priced it.
        reason: why this kernel, in words.
    """

    def __init__(self, geometry: Geometry, stage: Stage, variant: str, device: DeviceInfo,
                 predicted_ms: float | None, reason: str, slots: int | None = None) -> None:
        g = self.geometry = geometry
        M, N, K = self.M, self.N, self.K = g.M, g.N, g.K
        self.stage, self.variant, self.device = stage, variant, device
        self.predicted_ms, self.reason = predicted_ms, reason
        if stage.split_k == STREAM_K:  # one block per resident slot (clamped when loaded)
            bps = STREAM_K_WARPS_PER_SM * 32 // max(32, stage.launch_config(M, N, K)[1][0])
            grid, block = stage.launch_config(M, N, K, slots or device.sm_count * max(1, bps))
        else:
            grid, block = stage.launch_config(M, N, K)
        grid = (tuple(grid) + (1, 1))[:3]
        self.grid = (grid[0], grid[1], grid[2] * g.batch)
        self.block = (tuple(block) + (1, 1))[:3]
        self.smem = stage.smem_for(g.layout)
        self.split_k = stage.split_k
        self.strided = stage.batched  # kernel arguments: strided batches (spec S), else 2-D
        #: the kernel takes split-K's workspace and tile counters after C (spec SSSSIff)
        self.split_args = stage.args == SPLIT_ARGS
        #: C tiles: split-K's and stream-K's counters
        bm, bn = stage.tile if stage.tile else (1, 1)
        self.tiles = (cdiv(M, bm) * cdiv(N, bn) if self.split_k == STREAM_K
                      else self.grid[0] * self.grid[1])
        check_grid(self.grid, f"{stage.name} at {g.batch}x{M}x{N}x{K}")
        self._kernels: tuple | None = None
        self._lock = threading.Lock()
        self._split_memo: dict = {}

    def kernels(self) -> Any:
        """The main kernel, compiled and loaded on the first call."""
        k = self._kernels
        if k is None:
            with self._lock:
                if self._kernels is None:
                    st, layout = self.stage, self.geometry.layout
                    main = load_kernel(st.kernel_for(self.variant, layout), name=st.name,
                                       config=dict(st.config),
                                       variant=variant_key(self.variant, layout), spec=st.args,
                                       smem=self.smem, device=self.device)
                    if self.split_k == STREAM_K:  # no more blocks than can be resident
                        fit = self.device.sm_count * main.blocks_per_sm(self.block[0])
                        self.grid = (max(1, min(self.grid[0], fit)), 1, 1)
                    if isinstance(main, Kernel):
                        # from now on ``plan.run_plain`` is the bound fast launcher and
                        # ``plan.run`` hands it the operands' pointers (instance attributes
                        # over the methods): pointers, scalars, stream, one foreign call
                        M, N, K = self.M, self.N, self.K
                        shapes = (list(self.geometry.arrays(_NOWHERE, _NOWHERE, _NOWHERE))
                                  if self.strided else
                                  [Operand(None, 0, s, None, F32, 0) for s in
                                   ((M, K), (K, N), (M, N))])
                        if self.split_args:
                            W, L = self._buffers(0)
                            shapes += [W, L]
                        launch = gemm_launcher(main, st.args, shapes, self.grid, self.block,
                                               self._buffers if self.split_k != 1 else None)
                        self.run_plain = launch
                        self.run = lambda A, B, C, alpha, beta, stream: launch(
                            A.ptr, B.ptr, C.ptr, alpha, beta, stream)
                    self._kernels = main
                k = self._kernels
        return k

    def _buffers(self, stream: Any) -> tuple[Operand, Operand]:
        """Split-K's workspace (3-D ``(1, SPLITK*M, N)``) and tile counters on ``stream``; for
        stream-K, ``(1, slots*BM, BN)`` (``_streamk.partial_slots``) and a counter per tile;
        without either, the smallest such pair (the kernel does not touch them). Memoized per
        (stream, host thread) until a workspace grows (``_splitk.generation``): this runs in
        every split-K launch, and the lookup through ``split_buffers`` cost ~2.8 us."""
        key = (stream, threading.get_ident())
        got = self._split_memo.get(key)
        if got is not None and got[0] == _splitk.generation:
            return got[1]
        gen = _splitk.generation
        res = self._find_buffers(stream)
        if len(self._split_memo) >= 64:
            self._split_memo.clear()
        self._split_memo[key] = (gen, res)
        return res

    def _find_buffers(self, stream: Any) -> tuple[Operand, Operand]:
        s, M, N = self.split_k, self.M, self.N
        if s == STREAM_K:
            bm, bn = self.stage.tile
            return split_buffers(_streamk.partial_slots(self.tiles, self.grid[0]) * bm, bn,
                                 self.tiles, stream, self.device.id)
        if s == 1:
            M = N = 1
        counters = self.tiles * _splitk.counters_per_tile(s) if s > 1 else 1
        return split_buffers(s * M, N, counters, stream, self.device.id)

    def _args(self, A: Any, B: Any, C: Any) -> tuple:
        """The main kernel's array arguments for operands ``A``, ``B``, ``C``."""
        return self.geometry.arrays(A, B, C) if self.strided else (A, B, C)

    def run(self, A: Operand, B: Operand, C: Operand, alpha: float, beta: float,
            stream: Any) -> None:
        """Enqueue the product on ``stream`` (a handle on a GPU; a Numba stream or 0 on the
        simulator) for operands laid out as ``geometry`` says (their data pointers are what
        counts). No validation: ``sgemm`` does it. After the first call, on a GPU, this method
        is replaced by a call of the plan's bound launcher (``gemm_launcher``)."""
        main = self._kernels or self.kernels()
        if "run" in self.__dict__:
            self.run(A, B, C, alpha, beta, stream)
            return
        args = self._args(A, B, C)
        if self.split_args:
            args = (*args, *self._buffers(stream))
        main.launch(self.grid, self.block, stream, args, (alpha, beta))

    def run_plain(self, a: int, b: int, c: int, alpha: float, beta: float, stream: Any) -> None:
        """:meth:`run` for 2-D C-contiguous operands given by their data pointers ``a``, ``b``,
        ``c`` (``sgemm``'s fast lane, for a plan of the plain geometry). After the first call,
        on a GPU, replaced by the plan's bound launcher itself."""
        M, N, K, d = self.M, self.N, self.K, self.device.id
        self.run(Operand(None, a, (M, K), (4 * K, 4), F32, d),
                 Operand(None, b, (K, N), (4 * N, 4), F32, d),
                 Operand(None, c, (M, N), (4 * N, 4), F32, d), alpha, beta, stream)

    def launch(self, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0,
               stream: Any = 0) -> None:
        """Enqueue ``c = alpha * a @ b + beta * c`` for device arrays of any supported kind laid
        out as ``geometry`` says, without validation (for timing loops: ``sgemm`` is the
        checked entry point)."""
        self.run(operand(a), operand(b), operand(c), float(alpha), float(beta),
                 stream_handle(stream))

    def __repr__(self) -> str:
        g = self.geometry
        cfg = f" {dict(self.stage.config)}" if self.stage.config else ""
        pred = f", predicted {self.predicted_ms:.4g} ms" if self.predicted_ms is not None else ""
        shape = f"{self.M}x{self.N}x{self.K}" if g.batch == 1 else (
            f"{g.batch} x {self.M}x{self.N}x{self.K}")
        lay = "" if g.is_plain else (f", layout {g.layout}, ld=({g.lda}, {g.ldb}, {g.ldc}), "
                                     f"batch strides ({g.stride_a}, {g.stride_b}, {g.stride_c})")
        return (f"Plan({shape} on {self.device.name} (device {self.device.id}){lay}:"
                f" {self.stage.name}{cfg}, {self.variant} variant, split_k={self.split_k}, "
                f"grid={self.grid}, block={self.block}, smem={self.smem} B{pred}; "
                f"why: {self.reason})")


#: An operand with a null pointer: what the launcher's buffer holds before a call's pointers.
_NOWHERE = Operand(None, 0, (), (), F32, 0)


#: CUDA's grid limits (x, y, z) for compute capability 3.0 and up.
MAX_GRID = (2**31 - 1, 65535, 65535)


def check_grid(grid: tuple, what: str) -> None:
    """Raise ``ValueError`` (before anything is launched) when ``grid`` exceeds CUDA's limits."""
    if any(g > lim for g, lim in zip(grid, MAX_GRID, strict=False)):
        raise ValueError(f"{what}: grid {tuple(grid)} exceeds CUDA's limits {MAX_GRID}; the "
                         "product is too large for this kernel (split it)")


_plans: dict = {}
_plans_lock = threading.Lock()
MAX_PLANS = 4096
tuning.on_reload(_plans.clear)


def _device_info(device: DeviceInfo | int | None) -> DeviceInfo:
    if isinstance(device, DeviceInfo):
        return device
    return _device.info(_device.current_id() if device is None else int(device))


def plan_for(M: int, N: int, K: int, *, stage: str | Stage | None = None, aligned: bool = True,
             device: DeviceInfo | int | None = None, geometry: Geometry | None = None,
             compute: str | None = None, out_dtype: str = "float32",
             ab_aligned: bool = False) -> Plan:
    """The plan ``sgemm`` (or ``hgemm``) runs for an ``(M, K) @ (K, N)`` product (memoized).

    Args:
        M, N, K: the shape, each >= 1.
        stage: None (automatic choice), a stage name (that stage with its tuned configuration
            for this shape's class) or a ``Stage`` (as given).
        aligned: whether A, B and C start on 16-byte boundaries (``cudaMalloc`` and the array
            libraries' allocators give that; a sliced view may not). Rows are aligned only if
            also the pitches, batch strides and contiguous extents are multiples of 4
            (``Geometry.shape_aligned``; ``devarray.rows_aligned``). An unaligned dense FP32
            product (``Geometry.dense``, A row-major, B either way) with ``stage=None`` may get
            a ``staging.StagedPlan``: the aligned plan of the shape padded to multiples of 4,
            between copies, when that is predicted faster than the scalar-GMEM kernel.
        device: a CUDA device ordinal or ``DeviceInfo`` (default: the current device).
        geometry: batch, layout, pitches and batch strides (default: one row-major,
            C-contiguous product, ``Geometry.plain(M, N, K)``); its M, N, K must be these.
        compute: the arithmetic, a stage ``precision`` (``api.COMPUTE``): the automatic choice
            is among stages of that precision. None: ``"fp32"``, or a named stage's own.
            ``"fp16"`` (``hgemm``: float16 A and B) and the FP16 stages go only together.
        out_dtype: C's dtype, ``"float32"`` or (FP16 stages only) ``"float16"``.
        ab_aligned: with ``aligned`` False, whether A and B (not C) start on 16-byte
            boundaries. If their rows are then aligned (``Geometry.loads_aligned``) and B is
            stored transposed (``x @ W.T``, layouts NT and TT), the stage chosen as for
            unaligned rows (the scalar kernels' measurements and prices: an upper bound) runs
            its ``"vector_loads"`` variant where it has one (``registry.VECTOR_LOADS``: 128-bit
            loads, 32-bit stores of C), and nothing is staged.

    Raises:
        ValueError: a dimension < 1; an unknown stage name (valid names listed); a stage that
            does not support the shape, the geometry (layout, batch, pitch: the ladder's
            teaching stages take 2-D row-major contiguous operands only) or needs a higher
            compute capability than the device's; a named stage of another precision than
            ``compute``; no stage of that precision for this device or geometry; an FP16 stage
            without ``compute="fp16"`` or the reverse; ``out_dtype="float16"`` for a stage
            that writes float32.
        TypeError: ``stage`` of another type.
    """
    if stage is not None and not isinstance(stage, (str, Stage)):
        raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")
    dev = _device_info(device)
    g = Geometry.plain(M, N, K) if geometry is None else geometry
    if (g.M, g.N, g.K) != (M, N, K):
        raise ValueError(f"geometry {g} is not for M={M}, N={N}, K={K}")
    aligned = bool(aligned) and g.shape_aligned()
    # only C unaligned: the vector_loads variant, where the stage has it for this layout
    loads = (not aligned and bool(ab_aligned) and g.loads_aligned()
             and compute in (None, "fp32"))
    key = (dev, g, aligned, stage if not isinstance(stage, Stage) else id(stage), compute,
           out_dtype, loads)
    p = _plans.get(key)
    if p is not None:
        return p
    if min(M, N, K) < 1:
        raise ValueError(f"a plan needs M, N, K >= 1, got {M}, {N}, {K}")
    if stage is None:
        st, predicted, reason = _choose(g, None, aligned, dev, compute or "fp32")
    else:
        st, predicted, reason = _choose(g, stage, aligned, dev)
        if compute is not None and st.precision != compute:
            raise ValueError(f"stage {st.name!r} computes {st.precision!r}, not compute="
                             f"{compute!r}: name a {compute} stage or leave stage=None")
    if (st.precision == "fp16") != (compute == "fp16"):
        raise ValueError(f"stage {st.name!r} takes float16 operands: call numba_gemm.hgemm"
                         if st.precision == "fp16" else
                         f"stage {st.name!r} takes float32 operands: call numba_gemm.sgemm")
    if out_dtype != "float32":
        if out_dtype != "float16" or st.precision != "fp16":
            raise ValueError(f"out_dtype {out_dtype!r}: stage {st.name!r} writes float32"
                             + (" or float16" if st.precision == "fp16" else ""))
        st = dataclasses.replace(st, args=st.args[:2] + "H" + st.args[3:])  # C in float16
    if not st.supports(M, N, K):
        raise ValueError(f"stage {st.name!r} does not support M={M}, N={N}, K={K}")
    why_not = serves(st, g)
    if why_not is not None:
        raise ValueError(why_not)
    if not st.runs_on(dev.cc):
        raise ValueError(
            f"stage {st.name!r} needs {st.needs()}, this GPU ({dev.name}) is "
            f"{dev.cc[0]}.{dev.cc[1]}"
        )
    if (stage is None and not aligned and not loads and g == Geometry.dense(M, N, K, g.layout)
            and compute in (None, "fp32")):
        from .staging import consider  # the aligned plan of the padded shape, between copies

        staged = consider(M, N, K, dev, predicted, g.layout)
        if staged is not None:
            with _plans_lock:
                return _plans.setdefault(key, staged)
    variant = "vector" if aligned or st.scalar_kernel is None else "scalar"
    if variant == "scalar" and loads and st.has_vector_loads(g.layout):
        variant = "vector_loads"
        reason += ("; vector_loads variant: 128-bit loads of A and B, 32-bit stores of C "
                   "(rows of C are not 16-byte aligned)")
    elif variant == "scalar":
        reason += "; scalar-GMEM variant: rows of A, B or C are not 16-byte aligned"
    p = Plan(g, st, variant, dev, predicted, reason)
    with _plans_lock:
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        # a Stage object is keyed by id: the plan keeps it alive, so the id stays its own
        return _plans.setdefault(key, p)


# --- kernels and buffers beside the stage kernel --------------------------------------------------

_aux: dict = {}


def scale_kernel(dev: DeviceInfo) -> Any:
    """The ``C = beta * C`` kernel (products with K == 0) loaded on ``dev`` (once per device)."""
    key = ("scale", dev.id)
    k = _aux.get(key)
    if k is None:
        from .kernels._scale import scale_c

        k = _aux[key] = load_kernel(scale_c, name="scale_c", spec="Sf", device=dev)
    return k


def split_buffers(rows: int, cols: int, counters: int, stream: Any, device_id: int
                  ) -> tuple[Operand, Operand]:
    """Split-K's workspace, as a 3-D ``(1, rows, cols)`` :class:`Operand`, and ``counters`` tile
    counters of this stream (``kernels._splitk.buffers``; memoized with the views, dropped with
    them when a buffer grows)."""
    return _splitk.buffers(rows, cols, counters, stream, device_id, wrap=_split_operand)


def _split_operand(x: Any) -> Operand:
    o = operand(x)
    if len(o.shape) == 2:  # the workspace: one strided matrix, as the kernels' spec S takes it
        rows, cols = o.shape
        return Operand(o.obj, o.ptr, (1, rows, cols), (0, 4 * cols, 4), F32, o.device)
    return o


__all__ = ["Geometry", "Plan", "plan_for", "estimate_ms", "check_grid", "serves"]
