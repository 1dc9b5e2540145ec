"""The plan: which kernel runs an ``(M, K) @ (K, N)`` product on a GPU, and why.

``plan_for(M, N, K, stage=..., alignment=..., device=...)`` is the one place that chooses the
stage, its tile configuration, the vector, ``vector_loads`` or scalar-GMEM variant, the split-K
factor and whether to stage unaligned rows, and says why (``Plan.reason``, ``repr(plan)``). It
returns a frozen :class:`Plan` record and runs nothing: ``launch.launcher.runner(plan)`` loads its
kernel (through the on-disk cache) on the first call and launches it; the API keeps one runner
per request (``dispatch.PLANS``), so after the first call of a shape ``sgemm`` is validate -> a
dictionary hit -> launch.

The automatic choice (``stage=None``) prices candidates of every FP32 stage usable on the device
(the user's tuning cache, else the committed defaults for its compute capability:
``numba_gemm.plan.tuning``) with a per-SM wave model (:func:`estimate_ms`) and takes the
cheapest: the candidates an exhaustive sweep measured at the nearest measured shape, if one lies
closer than ``tuning.NEAR`` to the product; else, for at most ``tuning.SKINNY_ROWS`` rows, the
skinny stage's candidates of the measured shape of nearby rows nearest to it, priced by the bytes
of B they read (:func:`stream_ms`); else every tuned candidate of the product's shape class; with
no tuning data, the top FP32 stage of the ladder with its default tiles.

The models: CUTLASS's Python ``Gemm`` plan (choose and compile once, ``run()`` many times),
cuBLASLt's heuristic -> algo, Triton's ``autotune(key=...)``.

A ``compute`` mode *allows* an arithmetic, as cuBLAS's ``CUBLAS_COMPUTE_32F_FAST_TF32`` allows
tensor cores: the automatic choice for ``"tf32"`` or ``"3xtf32"`` weighs the FP32 stages too
(:data:`ALLOWED`: at least as accurate) and takes an FP32 kernel where it is predicted faster (a
few rows: the bandwidth-bound skinny stages, which no tensor core speeds up).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import backend
from .. import device as _device
from ..device import DeviceInfo, cdiv, check_grid
from ..kernels import STAGES, get_stage
from ..kernels._tunable import STREAM_K
from ..kernels.stage import Stage
from ..launch.launcher import runner
from . import staging, tuning
from .cost import (
    SCALAR_FACTOR,
    estimate_ms,
    pinned_occupancy,
    split_config,
    split_options,
    stream_k_grid,
    stream_k_ms,
    stream_ms,
    stream_splits,
)
from .geometry import Alignment, Geometry, serves
from .staging import Staging, copied, staging_for

#: The stages numba-cuda-mlir builds (docs/numba-cuda-mlir.md): with it, a plan must name one.
MLIR_STAGES = (
    "naive",
    "gmem_coalesce",
    "smem_tiling",
    "blocktiling_1d",
    "blocktiling_2d",
    "vectorize",
    "bank_conflict_free",
)

#: The arithmetic the automatic choice may run for each ``compute`` mode: its own, and FP32
#: where that mode rounds more (``"tf32"``) or as much (``"3xtf32"``). A named stage runs as named.
ALLOWED = {
    "fp32": ("fp32",),
    "tf32": ("tf32", "fp32"),
    "3xtf32": ("3xtf32", "fp32"),
    "fp16": ("fp16",),
    "bf16": ("bf16",),
}
#: The 16-bit arithmetics (``hgemm``) and their operands' dtype names.
SIXTEEN = {"fp16": "float16", "bf16": "bfloat16"}


def _usable(compute: str, dev: DeviceInfo) -> list[Stage]:
    """The stages the automatic choice weighs for ``compute`` on ``dev`` (:data:`ALLOWED`), the
    ladder's order.

    Raises:
        ValueError: no stage of ``compute``'s own arithmetic runs on ``dev`` (FP32 alone does
            not make a ``"tf32"`` request servable).
    """
    if not any(s.precision == compute and s.runs_on(dev.cc) for s in STAGES):
        need = min((s.min_cc for s in STAGES if s.precision == compute), default=None)
        raise ValueError(
            f"compute={compute!r} needs compute capability {need[0]}.{need[1]}+; "
            f"{dev.name} is {dev.cc[0]}.{dev.cc[1]}"
            if need
            else f"no stage computes {compute!r}"
        )
    allowed = ALLOWED.get(compute, (compute,))
    return [s for s in STAGES if s.precision in allowed and s.runs_on(dev.cc)]


def pairs_ok(st: Stage) -> bool:
    """Whether ``st`` can write a C whose rows are not 16-byte aligned: every stage but the
    16-bit ones without an element-store (scalar) variant, whose pair stores would fault."""
    return st.precision not in SIXTEEN or st.scalar_kernel is not None


def vector_rows(st: Stage, g: Geometry, aligned: bool, pointers: Alignment | None) -> bool:
    """Whether ``st`` runs its vector kernel on ``g``: the rows are aligned (``aligned``), or
    the only unaligned ones are those of operands ``st`` copies element by element in every
    variant (``Stage.free_rows``) and the base pointers (``pointers``; None: unknown) are all
    16-byte aligned. (Multistage's A in layout N: at 3036 x 1192 x 166 NN the scalar kernel
    stored C 4 bytes at a time and copied B element by element for K's sake alone, 51.4 us
    against the vector kernel's 40.7 on an H200: docs/design.md §4.7.)"""
    if aligned or pointers is None:
        return aligned
    free = st.free_rows(g.layout)
    return bool(free) and g.alignment(pointers, free) == Alignment.ALL


def _weighed(picks: list[tuple], compute: str) -> list[tuple]:
    """``picks`` (``(ms, stage name, ...)``), or none when no pick is of ``compute``'s own
    arithmetic: another arithmetic (:data:`ALLOWED`) is weighed only against priced candidates
    of the one asked for (without them, its top stage with default tiles runs)."""
    if any(get_stage(p[1]).precision == compute for p in picks):
        return picks
    return []


def _priced(
    name: str,
    g: Geometry,
    aligned: bool,
    dev: DeviceInfo,
    pointers: Alignment | None = None,
    fitted: bool = True,
) -> list[tuple[float, dict, str]]:
    """``[(predicted ms, config, class)]`` of every tuned candidate of stage ``name`` for this
    product's class on ``dev`` (:func:`tuning.shape_class`; a product without data of its own
    class is priced in its area class, a batch as ``batch * M`` rows; a batch takes no split-K),
    each with the K slices of :func:`split_options` and, where :func:`~.cost.stream_k_ms` offers
    it (a measured twin, tiles that fill its grid), its stream-K twin, cheapest first; empty
    without tuning data. A stage without data of its own takes its ``tuned_as`` stage's.
    ``aligned``, ``pointers``: as :func:`vector_rows` takes them (the variant priced). With B
    stored transposed, the vector kernel and no batch, each price is multiplied by the fit of
    the configuration that runs (``tuning.FIT_NT``; without ``fitted``: not, as
    ``tools.calibrate`` records the model's own price)."""
    M, N, K = g.M, g.N, g.K
    aligned = vector_rows(get_stage(name), g, aligned, pointers)
    res = None
    for cls in dict.fromkeys(
        (tuning.shape_class(M, N, K, g.batch), tuning.fallback_class(M, N, K, g.batch))
    ):
        won = tuning.class_view(cls, dev)
        res = won.get(name)
        if res is None and get_stage(name).tuned_as is not None:
            res = won.get(get_stage(name).tuned_as)  # the same kernel on other 16-bit values
        if isinstance(res, Mapping):
            break
    if not isinstance(res, Mapping):
        return []
    cands = [
        c for c in tuning.candidates(res, name) if g.batch == 1 or c["config"].get("SPLITK", 1) == 1
    ]  # no split-K of a batch
    if not cands:
        return []
    transposed = fitted and aligned and g.layout[1] == "T" and g.batch == 1
    fits = tuning.fit_table(res) if transposed else {}
    main = cands[0]
    factor = main["ms_scalar"] / main["ms"] if "ms_scalar" in main else SCALAR_FACTOR
    priced = []
    for c in cands:
        for s in split_options(c, M, N, K, dev.sm_count) if g.batch == 1 else (1,):
            pin = pinned_occupancy(c, s, aligned)
            cfg = split_config(c, s, pin)
            ms = estimate_ms(c, M, N, K, dev.sm_count, aligned, factor, g.batch, s, g.layout, pin)
            priced.append((ms * fits.get(tuning.fit_key(cfg), 1.0), cfg, cls))
        sk = (
            stream_k_ms(c, M, N, K, dev.sm_count, aligned, factor, g.layout)
            if g.batch == 1
            else None
        )
        if sk is not None:  # its stream-K twin, where its tiles fill the grid
            priced.append((sk, dict(c["config"], SPLITK=STREAM_K), cls))
    return sorted(priced, key=lambda p: p[0])


def _measured(
    g: Geometry,
    aligned: bool,
    dev: DeviceInfo,
    names: set[str],
    pointers: Alignment | None = None,
) -> list[tuple[float, str, dict, str]]:
    """``[(predicted ms, stage name, config, where)]`` of the candidates of stages ``names``
    measured at the nearest measured shape (:func:`tuning.nearest_shape`: an exhaustive sweep's
    fastest there, same alignment, closer than ``tuning.NEAR``), each scaled to this shape by the
    wave model from its own time there, at every K split :func:`split_options` offers it away from
    that shape (a stream-K candidate only at that very shape: the wave model cannot scale it);
    cheapest first. With none near and at most ``tuning.SKINNY_ROWS`` rows: the
    skinny stage's candidates of the measured shape of nearby rows nearest in N and K
    (:func:`tuning.nearest_rows_shape`), priced by :func:`stream_ms`, if the skinny stage won
    there. Both searches take the measurements of the product's layout first, then those of B
    stored alike, then any (``tuning.layout_rank``): the skinny stage's configurations for B
    stored transposed are others than for row-major B. A product with B stored transposed is
    not priced from a measured shape of row-major B (the classes hold its layout's times and
    fits, ``tuning.FIT_NT``; such a sweep neither: its picks ran 1.02-1.30x their price there,
    docs/design.md §4.19), except by the few-rows search; the measured shape of nearby rows is
    one of the rows the skinny stage's vector kernel takes here (:func:`vector_rows`). Empty
    for a batch or with no measured shape near."""
    if g.batch != 1:
        return []
    streams = [get_stage(n) for n in names if get_stage(n).cost == "stream"]
    rows_aligned = any(vector_rows(st, g, aligned, pointers) for st in streams)

    def named(rec):
        lay = tuning.layout_of(rec)
        return (
            "the measured shape "
            + "x".join(map(str, rec["shape"]))
            + ("" if lay == "NN" else f" ({lay})")
        )

    for rank in range(3):  # the product's layout, then B stored alike, then any
        # (B stored transposed is not priced from a sweep of row-major B: the classes hold
        # its own times and fits, such a sweep neither)
        rec = (
            None
            if rank == 2 and g.layout[1] == "T"
            else tuning.nearest_shape(g.M, g.N, g.K, aligned, dev, g.layout, rank)
        )
        if rec is not None:
            break
        rows = (
            tuning.nearest_rows_shape(g.M, g.N, g.K, rows_aligned, dev, g.layout, rank)
            if streams
            else None
        )
        if rows is not None:  # a few rows: the bandwidth-bound stage, priced by the bytes of B
            winner = min(rows["candidates"], key=lambda c: c["ms"], default=None)
            if (
                winner is None
                or winner["stage"] not in names
                or (get_stage(winner["stage"]).cost != "stream")
            ):
                return []  # (16 x 50257 x 768, odd N: the tiled stages won there)
            where = named(rows) + " (rows near)"
            out = []
            for c in rows["candidates"]:
                if c["stage"] != winner["stage"]:
                    continue
                c = dict(c, shape=rows["shape"])
                for s in stream_splits(c, g.M, g.N, g.K, dev.sm_count):
                    ms = stream_ms(c, g.M, g.N, g.K, dev.sm_count, s)
                    out.append((ms, c["stage"], dict(c["config"], SPLITK=s), where))
            return sorted(out, key=lambda p: p[:2])
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
            out.append((ms, c["stage"], dict(c["config"]), where))
            continue
        # c["ms"] and c["blocks_per_sm"] are of the variant that ran there; away from the
        # measured shape, with the K splits the launch layer may give it (at it: as measured)
        c, own = dict(c, shape=rec["shape"]), c["config"].get("SPLITK")
        for s in split_options(c, g.M, g.N, g.K, dev.sm_count) if rec["distance"] else (own,):
            pin = pinned_occupancy(c, s)
            ms = estimate_ms(c, g.M, g.N, g.K, dev.sm_count, splits=s, per_sm=pin)
            out.append((ms, c["stage"], split_config(c, s, pin), where))
    return sorted(out, key=lambda p: p[:2])


def _configured(st: Stage, cfg: dict | None) -> Stage | None:
    """``st`` built with ``cfg``; None (with a warning) if the tuned ``cfg`` is stale."""
    if cfg is None or dict(st.config) == cfg:
        return st
    try:
        return st.with_config(cfg)
    except (TypeError, ValueError) as e:
        warnings.warn(
            f"ignoring tuned config of {st.name!r} ({e}); using its default", stacklevel=4
        )
        return None


def _classed(
    usable: list[Stage],
    g: Geometry,
    aligned: bool,
    dev: DeviceInfo,
    pointers: Alignment | None = None,
    fitted: bool = True,
) -> list[tuple[float, str, dict, str]]:
    """``[(predicted ms, stage name, config, where)]``: every usable stage's tuned candidates for
    this product's class (:func:`_priced`, ``fitted`` as it takes it), cheapest first."""
    picks = []
    for s in usable:
        picks += [
            (ms, s.name, cfg, f"the {cls} class")
            for ms, cfg, cls in _priced(s.name, g, aligned, dev, pointers, fitted)
        ]
    return sorted(picks, key=lambda p: p[:2])


def ranked(
    g: Geometry,
    aligned: bool,
    dev: DeviceInfo,
    compute: str = "fp32",
    pointers: Alignment | None = None,
    fitted: bool = True,
) -> list[tuple[float | None, Stage, str]]:
    """Every candidate the automatic choice weighs for this product, in the order it weighs
    them, built and able to run it: ``[(predicted ms, configured stage, where)]``, the
    measurements near this shape first (:func:`_measured`), then the classes' tuned candidates
    (:func:`_classed`), each (stage, configuration) once; the top general stage with its
    default tiles last. What ``autotune`` times. ``pointers``: as :func:`vector_rows` takes it;
    ``fitted``: as :func:`_priced` takes it."""
    usable = _usable(compute, dev)
    out, seen = [], set()
    picks = _weighed(
        _measured(g, aligned, dev, {s.name for s in usable}, pointers)
        + _classed(usable, g, aligned, dev, pointers, fitted),
        compute,
    )
    for ms, name, cfg, where in picks:
        key = (name, tuple(sorted(cfg.items())))
        if key in seen:
            continue
        seen.add(key)
        built = _configured(get_stage(name), cfg)
        if (
            built is not None
            and built.supports(g.M, g.N, g.K)
            and serves(built, g) is None
            and (aligned or built.tensor_maps is None)
        ):
            out.append((ms, built, where))
    for s in reversed(usable):
        key = (s.name, tuple(sorted(dict(s.config).items())))
        if (
            s.precision == compute
            and s.general
            and key not in seen
            and s.supports(g.M, g.N, g.K)
            and serves(s, g) is None
            and (aligned or s.tensor_maps is None)
        ):
            out.append((None, s, "its default tiles"))
            break
    return out


def _choose(
    g: Geometry,
    stage: str | Stage | None,
    aligned: bool,
    dev: DeviceInfo,
    compute: str = "fp32",
    tma_ok: bool = True,
    pointers: Alignment | None = None,
) -> tuple[Stage, float | None, str]:
    """(configured stage, predicted ms or None, reason); ``tma_ok``: whether A's and B's rows
    are 16-byte aligned, as the TMA stages' tensor maps need; ``pointers``: the base pointers'
    :class:`Alignment` (:func:`vector_rows`)."""
    M, N, K = g.M, g.N, g.K
    src = tuning.source(dev) or "no tuning file"

    def ok(st: Stage) -> bool:
        return (
            st.supports(M, N, K)
            and serves(st, g) is None
            and (tma_ok or st.tensor_maps is None)
            and (aligned or pairs_ok(st))
        )

    if isinstance(stage, Stage):
        return stage, None, "the Stage object passed by the caller"
    if isinstance(stage, str):
        st = get_stage(stage)
        if st.tunable:
            for ms, _, cfg, where in _measured(g, aligned, dev, {st.name}, pointers):
                built = _configured(st, cfg)
                if built is not None and ok(built):
                    return (
                        built,
                        ms,
                        (
                            f"stage {stage!r} by name; its candidate predicted "
                            f"fastest from {where} ({src})"
                        ),
                    )
            for ms, cfg, cls in _priced(st.name, g, aligned, dev, pointers):
                built = _configured(st, cfg)
                if built is not None and ok(built):
                    return (
                        built,
                        ms,
                        (
                            f"stage {stage!r} by name; its tuned candidate predicted "
                            f"fastest for the {cls} class ({src})"
                        ),
                    )
            return st, None, f"stage {stage!r} by name; its default tiles (no tuning data)"
        return st, None, f"stage {stage!r} by name (fixed tiles)"
    usable = _usable(compute, dev)
    if not any(s.precision == compute and ok(s) for s in usable):
        raise ValueError(
            f"no {compute} stage serves this product ({g}) on {dev.name}: the mma.sync "
            "tensor-core stages (compute capability 8.x) take the teaching form only (2-D, "
            "row-major, C-contiguous A and B); the TF32 wgmma stages (9.0) take every layout "
            "and batch"
        )

    # a sweep's measurements near this shape, else the classes' tuned candidates (mixing the
    # two would let a class's extrapolation, often optimistic, win over a measurement); the
    # classes also when no measured candidate serves this geometry (B stored transposed, where
    # the measured skinny configurations all stream B through a ring, which reads it row-major)
    for picks in (_measured(g, aligned, dev, {s.name for s in usable}, pointers), None):
        if picks is None:
            picks = _classed(usable, g, aligned, dev, pointers)
        picks = _weighed(picks, compute)
        for ms, name, cfg, where in picks:
            built = _configured(get_stage(name), cfg)
            if built is not None and ok(built):
                others = [f"{n} {m:.3g} ms" for m, n, _, _ in picks if n != name][:2]
                return (
                    built,
                    ms,
                    (
                        f"auto: cheapest of {len(picks)} candidates from {where} on "
                        f"{dev.name} ({src}), priced by "
                        + (
                            "the bytes of B they read"
                            if where.endswith("(rows near)")
                            else "the wave model"
                        )
                        + " at this shape"
                        + (f"; next: {', '.join(others)}" if others else "")
                    ),
                )
    for s in reversed(usable):
        if s.precision == compute and s.general and ok(s):
            return (
                s,
                None,
                (
                    f"auto: no tuning data for {dev.name} that serves this product: the "
                    f"top general {compute} stage of the ladder with its default tiles"
                ),
            )
    raise ValueError(f"no general {compute} stage serves this product ({g}) on {dev.name}")


@dataclass(frozen=True, eq=False)
class Plan:
    """What runs one product on one GPU, and why: the record ``plan_for`` returns (decided once;
    ``launch.launcher.runner(plan)`` runs it).

    Attributes:
        geometry: the :class:`Geometry` (batch, layout, pitches, batch strides); ``M``, ``N``,
            ``K`` the shape: A ``(M, K)``, B ``(K, N)``, C ``(M, N)`` (per matrix of a batch).
        stage: the configured :class:`~numba_gemm.kernels.stage.Stage`.
        variant: ``"vector"`` (128-bit GMEM accesses), ``"scalar"`` (rows not 16-byte aligned)
            or ``"vector_loads"`` (only C's rows not aligned; ``Alignment.AB``).
        device: the GPU (``numba_gemm.device.DeviceInfo``).
        predicted_ms: the cost model's time, or None when no tuning data priced it.
        reason: why this kernel, in words.
        grid, block: 3-D launch geometry of the main kernel (stream-K: the runner clamps the grid
            to the loaded kernel's occupancy); ``smem``: its dynamic SMEM, bytes.
        staging: for a staged plan (``plan.staging``), what goes through aligned copies; then
            ``inner`` is the aligned plan of the padded shape that runs between them and
            ``copy_ms`` the copies' predicted time.
    """

    geometry: Geometry
    stage: Stage
    variant: str
    device: DeviceInfo
    predicted_ms: float | None
    reason: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    staging: Staging | None = None
    inner: Plan | None = None
    copy_ms: float = 0.0

    M = property(lambda self: self.geometry.M)
    N = property(lambda self: self.geometry.N)
    K = property(lambda self: self.geometry.K)

    @property
    def split_k(self) -> int:
        """K slices (>1: partial products into a workspace, summed by the last slice of each tile
        in the same kernel); ``STREAM_K`` (0): stream-K on ``grid[0]`` blocks."""
        return self.stage.split_k

    @property
    def tiles(self) -> int:
        """C tiles: split-K's and stream-K's counters."""
        bm, bn = self.stage.tile if self.stage.tile else (1, 1)
        if self.split_k == STREAM_K:
            return cdiv(self.M, bm) * cdiv(self.N, bn)
        return self.grid[0] * self.grid[1]

    def launch(
        self, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0, stream: Any = 0
    ) -> None:
        """Enqueue ``c = alpha * a @ b + beta * c`` for device arrays laid out as ``geometry``
        says, without validation, through this plan's runner (``launch.launcher.runner``): for
        timing loops; ``sgemm`` is the checked entry point."""
        runner(self).launch(a, b, c, alpha, beta, stream)

    def __repr__(self) -> str:
        if self.staging is not None:
            return (
                f"StagedPlan({self.M}x{self.N}x{self.K} on {self.device.name} (device "
                f"{self.device.id}): {copied(self.staging)} through aligned copies "
                f"({self.copy_ms:.4g} ms predicted), then {self.inner!r})"
            )
        g = self.geometry
        cfg = f" {dict(self.stage.config)}" if self.stage.config else ""
        pred = f", predicted {self.predicted_ms:.4g} ms" if self.predicted_ms is not None else ""
        shape = (
            f"{self.M}x{self.N}x{self.K}"
            if g.batch == 1
            else (f"{g.batch} x {self.M}x{self.N}x{self.K}")
        )
        lay = (
            ""
            if g.is_plain
            else (
                f", layout {g.layout}, ld=({g.lda}, {g.ldb}, {g.ldc}), "
                f"batch strides ({g.stride_a}, {g.stride_b}, {g.stride_c})"
            )
        )
        return (
            f"Plan({shape} on {self.device.name} (device {self.device.id}){lay}:"
            f" {self.stage.name}{cfg}, {self.variant} variant, split_k={self.split_k}, "
            f"grid={self.grid}, block={self.block}, smem={self.smem} B{pred}; "
            f"why: {self.reason})"
        )


def make_plan(
    g: Geometry, st: Stage, variant: str, dev: DeviceInfo, predicted_ms: float | None, reason: str
) -> Plan:
    """The :class:`Plan` of stage ``st`` for geometry ``g``: its launch geometry from the stage's
    ``launch_config`` (grid z times the batch; stream-K: one block per resident slot, assuming
    :data:`~numba_gemm.plan.cost.STREAM_K_WARPS_PER_SM` warps an SM).

    Raises:
        ValueError: the grid exceeds CUDA's limits.
    """
    M, N, K = g.M, g.N, g.K
    if st.split_k == STREAM_K:
        threads = st.launch_config(M, N, K)[1][0]
        grid, block = st.launch_config(M, N, K, stream_k_grid(threads, None, dev.sm_count))
    else:
        grid, block = st.launch_config(M, N, K)
    grid = (tuple(grid) + (1, 1))[:3]
    grid = (grid[0], grid[1], grid[2] * g.batch)
    check_grid(grid, f"{st.name} at {g.batch}x{M}x{N}x{K}")
    return Plan(
        g,
        st,
        variant,
        dev,
        predicted_ms,
        reason,
        grid,
        (tuple(block) + (1, 1))[:3],
        st.smem_for(g.layout),
    )


def _device_info(device: DeviceInfo | int | None) -> DeviceInfo:
    if isinstance(device, DeviceInfo):
        return device
    return _device.info(_device.current_id() if device is None else int(device))


def plan_for(
    M: int,
    N: int,
    K: int,
    *,
    stage: str | Stage | None = None,
    alignment: Alignment = Alignment.ALL,
    device: DeviceInfo | int | None = None,
    geometry: Geometry | None = None,
    compute: str | None = None,
    out_dtype: str = "float32",
) -> Plan:
    """The plan ``sgemm`` (or ``hgemm``) runs for an ``(M, K) @ (K, N)`` product. Not memoized:
    the API keeps one runner per (operands' geometry, alignment, request), ``dispatch.PLANS``.

    Args:
        M, N, K: the shape, each >= 1.
        stage: None (automatic choice), a stage name (that stage with its tuned configuration
            for this shape's class) or a ``Stage`` (as given).
        alignment: which operands start on 16-byte boundaries (:class:`Alignment`:
            ``cudaMalloc`` and the array libraries' allocators give that; a sliced view may not).
            Rows are aligned only if the pitches, batch strides and contiguous extents allow it
            too (:meth:`Geometry.alignment`). ``ALL``: the vector kernels. ``AB`` with B stored
            transposed (``x @ W.T``, layouts NT and TT): the stage chosen as for unaligned rows
            runs its ``"vector_loads"`` variant where it has one (128-bit loads, 32-bit stores
            of C). Otherwise an unaligned dense FP32 product (``Geometry.dense``, A row-major)
            with ``stage=None`` may be staged (``plan.staging``): the aligned plan of the shape
            padded to multiples of 4, between copies, when predicted faster than the scalar-GMEM
            kernel.
        device: a CUDA device ordinal or ``DeviceInfo`` (default: the current device).
        geometry: batch, layout, pitches and batch strides (default: one row-major,
            C-contiguous product, ``Geometry.plain(M, N, K)``); its M, N, K must be these.
        compute: the arithmetic, a stage ``precision`` (``checks.COMPUTE``): the automatic choice
            is among stages of that precision. None: ``"fp32"``, or a named stage's own.
            ``"fp16"`` / ``"bf16"`` (``hgemm``: float16 / bfloat16 A and B) and the stages of
            that precision go only together.
        out_dtype: C's dtype, ``"float32"`` or (16-bit stages) the operands' ``"float16"`` or
            ``"bfloat16"``.

    Raises:
        ValueError: a dimension < 1; an unknown stage name (valid names listed); a stage that
            does not support the shape (its limits stated), the geometry (layout, batch, pitch:
            the ladder's teaching stages take 2-D row-major contiguous operands only) or needs a
            higher compute capability than the device's; a named stage of another precision
            than ``compute``; no stage of that precision for this device or geometry; an FP16
            stage without ``compute="fp16"`` or the reverse (BF16 alike); an ``out_dtype`` of
            16 bits that is not the stage's operands' type.
        TypeError: ``stage`` of another type.
    """
    if stage is not None and not isinstance(stage, (str, Stage)):
        raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")
    if backend.MLIR:
        name = stage if isinstance(stage, str) or stage is None else stage.name
        known = name is None or name in {st.name for st in STAGES}  # (a typo: ValueError below)
        if known and name not in MLIR_STAGES:
            what = "the automatic choice" if name is None else repr(name)
            raise NotImplementedError(
                f"{backend.NAME} builds only the stages {', '.join(MLIR_STAGES)} "
                f"(docs/numba-cuda-mlir.md), not {what}: name one of them (stage=...), or "
                "build with numba-cuda (NUMBA_GEMM_BACKEND=numba-cuda)"
            )
    if min(M, N, K) < 1:
        raise ValueError(f"a plan needs M, N, K >= 1, got {M}, {N}, {K}")
    dev = _device_info(device)
    g = Geometry.plain(M, N, K) if geometry is None else geometry
    if (g.M, g.N, g.K) != (M, N, K):
        raise ValueError(f"geometry {g} is not for M={M}, N={N}, K={K}")
    pointers = Alignment(alignment)
    rows = g.alignment(pointers)
    aligned = rows == Alignment.ALL
    # only C unaligned: never staged (the stage's vector_loads variant, where it has one)
    loads = rows == Alignment.AB
    tma_ok = rows in (Alignment.ALL, Alignment.AB)  # A's and B's rows: tensor maps' strides
    if stage is None:
        st, predicted, reason = _choose(g, None, aligned, dev, compute or "fp32", tma_ok, pointers)
    else:
        st, predicted, reason = _choose(g, stage, aligned, dev, tma_ok=tma_ok, pointers=pointers)
        if compute is not None and st.precision != compute:
            raise ValueError(
                f"stage {st.name!r} computes {st.precision!r}, not compute="
                f"{compute!r}: name a {compute} stage or leave stage=None"
            )
    half = SIXTEEN.get(st.precision)  # its operands' dtype, for a 16-bit stage
    if (half is None) != (compute not in SIXTEEN):
        raise ValueError(
            f"stage {st.name!r} takes {half} operands: call numba_gemm.hgemm"
            if half
            else f"stage {st.name!r} takes float32 operands: call numba_gemm.sgemm"
        )
    if out_dtype != "float32":
        if out_dtype != half:
            raise ValueError(
                f"out_dtype {out_dtype!r}: stage {st.name!r} writes float32"
                + (f" or {half}" if half else "")
            )
        # C of the operands' type: float16, or bfloat16 as its bits (uint16)
        st = dataclasses.replace(st, args=st.args[:2] + st.args[0] + st.args[3:])
    if not st.supports(M, N, K):
        raise ValueError(
            f"stage {st.name!r} does not support M={M}, N={N}, K={K}: it takes {st.limits}"
        )
    why_not = serves(st, g)
    if why_not is not None:
        raise ValueError(why_not)
    if st.tensor_maps is not None and not tma_ok:
        raise ValueError(
            f"stage {st.name!r} reads A and B through TMA tensor maps, whose rows must be "
            "16-byte aligned (K, and N for row-major B, multiples of 16 bytes of elements; "
            "base pointers 16-byte aligned): use stage=None (the plan copies unaligned rows)"
        )
    if not (aligned or pairs_ok(st)):
        raise ValueError(
            f"stage {st.name!r} stores C's column pairs together: out's rows must be 16-byte "
            "aligned (a fresh allocation's are); pass such an out, or stage=None"
        )
    if not st.runs_on(dev.cc):
        raise ValueError(
            f"stage {st.name!r} needs {st.needs()}, this GPU ({dev.name}) is "
            f"{dev.cc[0]}.{dev.cc[1]}"
        )
    if (
        stage is None
        and not aligned
        and not loads
        and g == Geometry.dense(M, N, K, g.layout)
        and compute not in SIXTEEN
    ):
        # staged in the scalar pick's arithmetic, and (a TF32 mode that picked FP32) in the
        # asked one: the cheaper that beats the scalar pick
        options = [
            _staged(M, N, K, dev, predicted, g.layout, p)
            for p in dict.fromkeys((st.precision, compute or "fp32"))
        ]
        options = [o for o in options if o is not None]
        if options:
            return min(options, key=lambda o: o.predicted_ms)
    if (
        stage is None
        and g.layout[0] == "T"
        and st.arch is not None
        and st.precision in ("tf32", "3xtf32")
        and g == Geometry.dense(M, N, K, g.layout)
    ):
        return _transposed(M, N, K, dev, g.layout, st.precision)
    # the rows as this stage reads them: those it copies element by element left out
    free = st.free_rows(g.layout)
    own = g.alignment(pointers, free)
    variant = "vector" if own == Alignment.ALL or st.scalar_kernel is None else "scalar"
    if own == Alignment.ALL and not aligned:
        reason += (
            f"; vector variant: the unaligned rows are of {free}, which the stage copies "
            "element by element"
        )
    if variant == "scalar" and own == Alignment.AB and st.has_vector_loads(g.layout):
        variant = "vector_loads"
        reason += (
            "; vector_loads variant: 128-bit loads of A and B, 32-bit stores of C "
            "(rows of C are not 16-byte aligned)"
        )
    elif variant == "scalar":
        reason += "; scalar-GMEM variant: rows of A, B or C are not 16-byte aligned"
    return make_plan(g, st, variant, dev, predicted, reason)


def _staged(
    M: int,
    N: int,
    K: int,
    dev: DeviceInfo,
    scalar_ms: float | None,
    layout: str,
    precision: str = "fp32",
) -> Plan | None:
    """The staged plan of an unaligned dense product (``plan.staging``): the aligned plan of the
    padded shape between copies (in the scalar plan's arithmetic, ``precision``), when
    ``staging.worth`` says it beats the scalar plan's ``scalar_ms``; else None."""
    s = staging.feasible(M, N, K, dev, scalar_ms, layout, measured=precision == "fp32")
    if s is None:
        return None
    inner = plan_for(
        M,
        s.N4,
        s.K4,
        device=dev,
        geometry=Geometry.dense(M, s.N4, s.K4, layout),
        compute=None if precision == "fp32" else precision,
    )
    if staging.worth(M, N, K, s, inner.predicted_ms, scalar_ms) is None:
        return None
    return staged_plan(M, N, K, s, inner, scalar_ms)


def _transposed(M: int, N: int, K: int, dev: DeviceInfo, layout: str, precision: str) -> Plan:
    """A TF32 wgmma product with A stored transposed (TN, TT): A copied row-major (padded to
    rows of K4 floats; B and C as ``plan.staging`` says), then the aligned plan of layout N?.
    Always: the kernel's own element-wise transposing copies ran 4096^3 TN at 15 % of cuBLAS
    TF32 (docs/design.md §5.1), against which one copy of A was predicted at a few percent (not
    yet timed on a GPU)."""
    s = staging_for(M, N, K, transpose_a=True)
    why = f"A stored transposed, which the {precision} wgmma kernels need K-major"
    return _on_copies(M, N, K, s, layout, dev, why, compute=precision)


def _on_copies(
    M: int, N: int, K: int, s: Staging, layout: str, dev: DeviceInfo, why: str, **kw: Any
) -> Plan:
    """The staged plan running the aligned plan of the padded ``M x N4 x K4`` (``plan_for``
    with ``kw``; A row-major: layout N?) on the copies ``s`` says (:func:`staged_plan`)."""
    geometry = Geometry.dense(M, s.N4, s.K4, "N" + layout[1])
    inner = plan_for(M, s.N4, s.K4, device=dev, geometry=geometry, **kw)
    return staged_plan(M, N, K, s, inner, why=why)


def half_staged(
    M: int,
    N: int,
    K: int,
    layout: str,
    device: int | DeviceInfo | None,
    compute: str,
    out_dtype: str,
    stage: str | Stage | None = None,
) -> Plan:
    """``hgemm``'s plan for a dense 16-bit product its TMA stages cannot read in place: rows of
    A or B not a whole number of 16 bytes (K, or N for row-major B, not a multiple of 8) or A
    stored transposed (TN, TT; the stages read A K-major). A (copied row-major for TN/TT) and B
    go through aligned copies (``plan.staging``, rows of K and N rounded up to 8 elements,
    zero-filled: the product is unchanged), and so does C when N is padded; then the aligned
    plan of ``M x N8 x K8`` (``stage`` as named, else the automatic one) in layout N? runs on
    them. Always, when called: there is no 16-bit kernel that reads such rows in place.

    Raises:
        ValueError: as :func:`plan_for` for the padded product.
    """
    s = staging_for(M, N, K, layout[0] == "T", SIXTEEN[compute], out_dtype, layout)
    c_rows = s.N4 * staging.ITEMSIZE[out_dtype] % 16 == 0  # C' rows (C's own when not copied)
    why = (
        "A stored transposed, which the 16-bit stages read K-major"
        if s.at
        else "rows of A or B not 16-byte aligned (16-bit rows: multiples of 8 elements)"
    )
    return _on_copies(
        M,
        N,
        K,
        s,
        layout,
        _device_info(device),
        why,
        stage=stage,
        compute=compute,
        out_dtype=out_dtype,
        alignment=Alignment.ALL if c_rows else Alignment.AB,
    )


def staged_plan(
    M: int,
    N: int,
    K: int,
    s: Staging,
    inner: Plan,
    scalar_ms: float | None = None,
    why: str = "rows not 16-byte aligned",
) -> Plan:
    """The plan that runs the dense ``M x N x K`` product on ``inner`` (the aligned plan of the
    padded ``M x N4 x K4``, of the same layout, or with ``s.at`` of layout N? for A stored
    transposed) between the copies ``s`` says; ``why`` and the scalar plan's ``scalar_ms`` (if
    any) go into its reason."""
    copy = staging.copy_ms(M, N, K, s)
    inner_ms = inner.predicted_ms
    reason = (
        f"auto: {why}; staged: {copied(s)} copied to rows of "
        f"{s.K4} / {s.N4} {'floats' if s.ab_type == 'float32' else 'elements'} "
        f"({copy:.3g} ms predicted), then the aligned plan of "
        f"{M}x{s.N4}x{s.K4}"
        + (f" ({inner_ms:.3g} ms)" if inner_ms is not None else "")
        + f": {inner.reason}"
        + (f"; the scalar-GMEM plan was predicted at {scalar_ms:.3g} ms" if scalar_ms else "")
    )
    layout = ("T" if s.at else "N") + inner.geometry.layout[1]  # the operands' own layout
    return dataclasses.replace(
        inner,
        geometry=Geometry.dense(M, N, K, layout),
        predicted_ms=None if inner_ms is None else inner_ms + copy,
        reason=reason,
        staging=s,
        inner=inner,
        copy_ms=copy,
    )


__all__ = ["Alignment", "Geometry", "Plan", "make_plan", "plan_for"]
