"""The plan: which kernel runs an ``(M, K) @ (K, N)`` product on a GPU, chosen once.

``plan_for(M, N, K, stage=..., aligned=..., device=...)`` is the one place that chooses the stage,
its tile configuration, the vector or scalar-GMEM variant and the split-K factor, and says why
(``Plan.reason``, ``repr(plan)``). Plans are memoized per (device, M, N, K, alignment, stage
request), so after the first call of a shape ``sgemm`` is: validate -> a dictionary hit -> launch.
The kernels of a plan are compiled (through the on-disk cache) and loaded on its GPU the first
time it runs, then launched directly (``numba_gemm.launch``).

The automatic choice (``stage=None``) prices every tuned candidate of every FP32 stage usable on
the device (the user's tuning cache, else the committed defaults for its compute capability:
``numba_gemm.tuning``) with a wave-quantization model (:func:`estimate_ms`) and takes the
cheapest; with no tuning data, the top FP32 stage of the ladder with its default tiles.

The models: CUTLASS's Python ``Gemm`` plan (choose and compile once, ``run()`` many times),
cuBLASLt's heuristic -> algo, Triton's ``autotune(key=...)``.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from typing import Any

from . import device as _device
from . import tuning
from .devarray import Operand, operand, rows_aligned
from .device import DeviceInfo, cdiv
from .kernels import STAGES, _splitk, get_stage
from .launch import Kernel, gemm_launcher, load_kernel, stream_handle
from .registry import Stage

#: Split-K's reduction pass, priced by the model: a second kernel launch (~4 us of host time:
#: cuLaunchKernel measured 3.9 us on the H200 host, bench/results/nvidia-h200/2026-11-22-call-path;
#: and a kernel boundary on the GPU, ~2 us assumed) plus the partial products' extra traffic,
#: written once and read once (2 * SPLITK * M * N floats) at an assumed effective 2.5 TB/s.
REDUCE_FIXED_MS = 0.006
REDUCE_BYTES_PER_MS = 2.5e9


def reduce_ms(splits: int, M: int, N: int) -> float:
    """Predicted cost (ms) of split-K's partial-product traffic and reduction kernel."""
    if splits <= 1:
        return 0.0
    return REDUCE_FIXED_MS + 2 * splits * M * N * 4 / REDUCE_BYTES_PER_MS


def estimate_ms(
    cand: Mapping[str, Any], M: int, N: int, K: int, sms: int, aligned: bool = True,
    scalar_factor: float = 1.0,
) -> float:
    """Predicted time (ms) of a tuned candidate at ``(M, N, K)`` from its time at the tuned shape.

    Wave-quantization model: a kernel runs in ``ceil(blocks / (SMs * blocks_per_sm))`` waves of
    blocks that each walk ``ceil(K_slice / BK)`` K tiles, so time scales with waves x K tiles.
    It is what makes a ragged size (4097: one more row and column of mostly empty tiles, maybe one
    more wave) pick a finer tile than 4096 does. A split-K candidate's reduction
    (:func:`reduce_ms`) does not scale that way: it is taken out of the tuned time and priced
    at the new shape, so a small product does not pay for a reduction it cannot amortize.

    ``aligned=False`` (rows of A, B or C not 16-byte aligned: the scalar-GMEM kernel runs) scales
    from ``ms_scalar``, the scalar kernel's time at the tuned shape less one in each dimension
    (same tile counts), with its own occupancy ``blocks_per_sm_scalar``; a candidate without
    ``ms_scalar`` uses ``ms * scalar_factor`` (the class winner's ratio).
    """
    cfg = cand["config"]
    Mr, Nr, Kr = cand["shape"]
    s = cfg.get("SPLITK", 1)
    if aligned:
        ms, bps = cand["ms"], cand.get("blocks_per_sm", 1)
    else:
        ms = cand.get("ms_scalar", cand["ms"] * scalar_factor)
        bps = cand.get("blocks_per_sm_scalar", cand.get("blocks_per_sm", 1))
    slots = max(1, sms * int(bps))

    def work(m, n, k):
        waves = cdiv(cdiv(m, cfg["BM"]) * cdiv(n, cfg["BN"]) * s, slots)
        return waves * cdiv(cdiv(k, s), cfg["BK"])

    main = max(float(ms) - reduce_ms(s, Mr, Nr), 0.1 * float(ms))
    return main * work(M, N, K) / work(Mr, Nr, Kr) + reduce_ms(s, M, N)


def _priced(name: str, M: int, N: int, K: int, aligned: bool, dev: DeviceInfo
            ) -> list[tuple[float, dict]]:
    """``[(predicted ms, config)]`` of every tuned candidate of stage ``name`` for this shape's
    class on ``dev``, cheapest first; empty without tuning data."""
    res = tuning.winners(tuning.shape_class(M, N, K), dev).get(name)
    if not isinstance(res, Mapping):
        return []
    cands = tuning.candidates(res)
    if not cands:
        return []
    main = cands[0]
    factor = main["ms_scalar"] / main["ms"] if "ms_scalar" in main else 1.0
    priced = [(estimate_ms(c, M, N, K, dev.sm_count, aligned, factor), dict(c["config"]))
              for c in cands]
    return sorted(priced, key=lambda p: p[0])


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


def _choose(M: int, N: int, K: int, stage: str | Stage | None, aligned: bool, dev: DeviceInfo
            ) -> tuple[Stage, float | None, str]:
    """(configured stage, predicted ms or None, reason)."""
    cls = tuning.shape_class(M, N, K)
    src = tuning.source(dev) or "no tuning file"
    if isinstance(stage, Stage):
        return stage, None, "the Stage object passed by the caller"
    if isinstance(stage, str):
        st = get_stage(stage)
        if st.tunable:
            for ms, cfg in _priced(st.name, M, N, K, aligned, dev):
                built = _configured(st, cfg)
                if built is not None and built.supports(M, N, K):
                    return built, ms, (f"stage {stage!r} by name; its tuned candidate predicted "
                                       f"fastest for the {cls} class ({src})")
            return st, None, f"stage {stage!r} by name; its default tiles (no tuning data)"
        return st, None, f"stage {stage!r} by name (fixed tiles)"
    usable = [s for s in STAGES if s.precision == "fp32" and tuple(s.min_cc) <= tuple(dev.cc)]
    picks = []
    for s in usable:
        picks += [(ms, s.name, cfg) for ms, cfg in _priced(s.name, M, N, K, aligned, dev)]
    picks.sort(key=lambda p: p[:2])
    for ms, name, cfg in picks:
        built = _configured(get_stage(name), cfg)
        if built is not None and built.supports(M, N, K):
            others = [f"{n} {m:.3g} ms" for m, n, _ in picks if n != name][:2]
            return built, ms, (
                f"auto: cheapest of {len(picks)} tuned candidates for the {cls} class on "
                f"{dev.name} ({src}), priced by the wave model at this shape"
                + (f"; next: {', '.join(others)}" if others else ""))
    for s in reversed(usable):
        if s.supports(M, N, K):
            return s, None, (f"auto: no tuning data for {dev.name}: the top FP32 stage of the "
                             "ladder with its default tiles")
    raise ValueError(f"no FP32 stage supports M={M}, N={N}, K={K}")  # pragma: no cover


class Plan:
    """What ``sgemm`` runs for one (device, M, N, K, alignment, stage request), decided once.

    Attributes:
        M, N, K: the shape: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``.
        stage: the configured :class:`~numba_gemm.registry.Stage`.
        variant: ``"vector"`` (128-bit GMEM accesses) or ``"scalar"`` (rows not 16-byte aligned).
        split_k: K slices (>1: partial products into a workspace, then a reduction kernel).
        device: the GPU (``numba_gemm.device.DeviceInfo``).
        grid, block: 3-D launch geometry of the main kernel; ``smem``: its dynamic SMEM, bytes.
        predicted_ms: the cost model's time, or None when no tuning data priced it.
        reason: why this kernel, in words.
    """

    def __init__(self, M: int, N: int, K: int, stage: Stage, variant: str, device: DeviceInfo,
                 predicted_ms: float | None, reason: str) -> None:
        self.M, self.N, self.K = M, N, K
        self.stage, self.variant, self.device = stage, variant, device
        self.predicted_ms, self.reason = predicted_ms, reason
        grid, block = stage.launch_config(M, N, K)
        self.grid = (tuple(grid) + (1, 1))[:3]
        self.block = (tuple(block) + (1, 1))[:3]
        self.smem = stage.dynamic_smem
        self.split_k = stage.split_k
        self.reduce_grid = (cdiv(N, _splitk.REDUCE_BLOCK[0]), cdiv(M, _splitk.REDUCE_BLOCK[1]), 1)
        check_grid(self.grid, f"{stage.name} at {M}x{N}x{K}")
        if self.split_k > 1:
            check_grid(self.reduce_grid, f"split-K's reduction at {M}x{N}")
        self._kernels: tuple | None = None
        self._lock = threading.Lock()

    def kernels(self) -> tuple:
        """``(main kernel, reduction kernel or None)``, compiled and loaded on the first call."""
        k = self._kernels
        if k is None:
            with self._lock:
                if self._kernels is None:
                    st = self.stage
                    main = load_kernel(st.kernel_for(self.variant), name=st.name,
                                       config=dict(st.config), variant=self.variant,
                                       smem=self.smem, device=self.device)
                    red = reduce_kernel(self.device) if self.split_k > 1 else None
                    if red is None and isinstance(main, Kernel):
                        # from now on ``plan.run`` is the bound fast launcher (instance
                        # attribute over the method): pointers, scalars, stream, one call
                        self.run = gemm_launcher(main, self.M, self.N, self.K, self.grid,
                                                 self.block)
                    self._kernels = (main, red)
                k = self._kernels
        return k

    def run(self, A: Operand, B: Operand, C: Operand, alpha: float, beta: float,
            stream: Any) -> None:
        """Enqueue the product on ``stream`` (a handle on a GPU; a Numba stream or 0 on the
        simulator). No validation: ``sgemm`` does it. After the first call, on a GPU, a
        single-kernel plan replaces this method by its bound launcher (``gemm_launcher``)."""
        main, red = self._kernels or self.kernels()
        if red is None:
            if "run" in self.__dict__:
                self.run(A, B, C, alpha, beta, stream)
            else:
                main.launch(self.grid, self.block, stream, (A, B, C), (alpha, beta))
            return
        W = workspace_operand(self.split_k * self.M, self.N, stream, self.device.id)
        main.launch(self.grid, self.block, stream, (A, B, W), (1.0, 0.0))
        red.launch(self.reduce_grid, (*_splitk.REDUCE_BLOCK, 1), stream, (W, C), (alpha, beta))

    def launch(self, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0,
               stream: Any = 0) -> None:
        """Enqueue ``c = alpha * a @ b + beta * c`` for device arrays of any supported kind,
        without validation (for timing loops: ``sgemm`` is the checked entry point)."""
        self.run(operand(a), operand(b), operand(c), float(alpha), float(beta),
                 stream_handle(stream))

    def __repr__(self) -> str:
        cfg = f" {dict(self.stage.config)}" if self.stage.config else ""
        pred = f", predicted {self.predicted_ms:.4g} ms" if self.predicted_ms is not None else ""
        return (f"Plan({self.M}x{self.N}x{self.K} on {self.device.name} (device {self.device.id}):"
                f" {self.stage.name}{cfg}, {self.variant} variant, split_k={self.split_k}, "
                f"grid={self.grid}, block={self.block}, smem={self.smem} B{pred}; "
                f"why: {self.reason})")


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
             device: DeviceInfo | int | None = None) -> Plan:
    """The plan ``sgemm`` runs for an ``(M, K) @ (K, N)`` float32 product (memoized).

    Args:
        M, N, K: the shape, each >= 1.
        stage: None (automatic choice), a stage name (that stage with its tuned configuration
            for this shape's class) or a ``Stage`` (as given).
        aligned: whether A, B and C start on 16-byte boundaries (``cudaMalloc`` and the array
            libraries' allocators give that; a sliced view may not). Rows are aligned only if
            also ``K`` and ``N`` are multiples of 4 (``devarray.rows_aligned``).
        device: a CUDA device ordinal or ``DeviceInfo`` (default: the current device).

    Raises:
        ValueError: a dimension < 1; an unknown stage name (valid names listed); a stage that
            does not support the shape or needs a higher compute capability than the device's.
        TypeError: ``stage`` of another type.
    """
    if stage is not None and not isinstance(stage, (str, Stage)):
        raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")
    dev = _device_info(device)
    aligned = bool(aligned) and rows_aligned(0, K) and rows_aligned(0, N)
    key = (dev, M, N, K, aligned, stage if not isinstance(stage, Stage) else id(stage))
    p = _plans.get(key)
    if p is not None:
        return p
    if min(M, N, K) < 1:
        raise ValueError(f"a plan needs M, N, K >= 1, got {M}, {N}, {K}")
    st, predicted, reason = _choose(M, N, K, stage, aligned, dev)
    if not st.supports(M, N, K):
        raise ValueError(f"stage {st.name!r} does not support M={M}, N={N}, K={K}")
    if tuple(dev.cc) < tuple(st.min_cc):
        raise ValueError(
            f"stage {st.name!r} needs compute capability {st.min_cc[0]}.{st.min_cc[1]}+, this GPU "
            f"({dev.name}) is {dev.cc[0]}.{dev.cc[1]}"
        )
    variant = "vector" if aligned or st.scalar_kernel is None else "scalar"
    if not aligned and st.scalar_kernel is not None:
        reason += "; scalar-GMEM variant: rows of A, B or C are not 16-byte aligned"
    p = Plan(M, N, K, st, variant, dev, predicted, reason)
    with _plans_lock:
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        # a Stage object is keyed by id: the plan keeps it alive, so the id stays its own
        return _plans.setdefault(key, p)


# --- kernels and buffers beside the stage kernel --------------------------------------------------

_aux: dict = {}


def reduce_kernel(dev: DeviceInfo) -> Any:
    """Split-K's reduction kernel loaded on ``dev`` (once per device)."""
    key = ("reduce", dev.id)
    k = _aux.get(key)
    if k is None:
        k = _aux[key] = load_kernel(_splitk.reduce_splits, name="splitk_reduce", spec="AAff",
                                    device=dev)
    return k


def scale_kernel(dev: DeviceInfo) -> Any:
    """The ``C = beta * C`` kernel (products with K == 0) loaded on ``dev`` (once per device)."""
    key = ("scale", dev.id)
    k = _aux.get(key)
    if k is None:
        from .kernels._scale import scale_c

        k = _aux[key] = load_kernel(scale_c, name="scale_c", spec="Af", device=dev)
    return k


def workspace_operand(rows: int, cols: int, stream: Any, device_id: int) -> Operand:
    """The split-K workspace of this stream as an :class:`Operand` (memoized with the view, and
    dropped with it when the buffer grows)."""
    return _splitk.workspace(rows, cols, stream, device_id, wrap=operand)


__all__ = ["Plan", "plan_for", "estimate_ms", "check_grid"]
