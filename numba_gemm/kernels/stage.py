"""The Stage record: one rung of the SGEMM optimisation ladder.

Every stage module ends with ``STAGE = Stage(...)``; ``numba_gemm.kernels.STAGES`` is the one
ordered tuple of them that the API, the bench, the tuner, the tests and the resource report read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..device import SIMULATED_CC, WARP_SIZE

Dims = tuple[int, ...]
LaunchConfig = tuple[Dims, Dims]

#: Relative-error bound (Frobenius norm, against a float64 reference) per arithmetic precision.
#: FP32 accumulation over K terms stays far below 1e-5 for the sizes we test; TF32 inputs carry a
#: 10-bit mantissa (~5e-4 relative); FP16 inputs an 11-bit one, BF16 an 8-bit one (the bound
#: then covers the once-rounded 16-bit C, ~2e-3 for BF16; the stages are checked against the
#: product of the rounded inputs). 3xTF32 (``big + small`` TF32 parts, three products) carries
#: ~21 mantissa bits: FP32's bound.
TOLERANCE = MappingProxyType(
    {"fp32": 1e-5, "3xtf32": 1e-5, "tf32": 5e-3, "fp16": 1e-2, "bf16": 1e-2}
)


#: A tunable stage's ``layout_kernel(vec, layout)`` with ``vec`` this value builds the
#: ``"vector_loads"`` variant: 128-bit loads of A and B, 32-bit stores of C (in the scalar
#: variant's column order), for products whose A and B rows are 16-byte aligned and C's are not:
#: ``x @ W.T`` with an odd N, where W ``(N, K)`` has aligned rows and the ``(M, N)`` output does
#: not. (``vec`` True is the vector variant, False the scalar one.)
VECTOR_LOADS = 2


def variant_key(variant: str, layout: str = "NN") -> str:
    """The name of a kernel variant in the cache and the precompile list (``"vector"``,
    ``"scalar"`` or ``"vector_loads"``), with ``-<layout>`` appended for layouts other than NN
    (``"vector-TN"``)."""
    return variant if layout == "NN" else f"{variant}-{layout}"


def parse_variant_key(key: str) -> tuple[str, str]:
    """``(variant, layout)`` of a :func:`variant_key`."""
    variant, _, layout = key.partition("-")
    return variant, layout or "NN"


def supports_any(M: int, N: int, K: int) -> bool:
    """Shape predicate of stages that handle any ``M, N, K >= 1``."""
    return M >= 1 and N >= 1 and K >= 1


@dataclass(frozen=True)
class Stage:
    """One SGEMM kernel stage: ``C = alpha * A @ B + beta * C``.

    Attributes:
        name: registry key (``"smem_tiling"``); stable, used on the command line.
        label: human-readable title for tables and plots.
        kernel: the ``@cuda.jit`` kernel ``kernel(A, B, C, alpha, beta)`` with A ``(M, K)``,
            B ``(K, N)``, C ``(M, N)``, all float32 C-contiguous device arrays, and float32
            scalars. When ``beta == 0`` the kernel does not read C (BLAS convention).
        launch_config: ``(M, N, K) -> (grid, block)``, from the stage's tile constants.
        supports: ``(M, N, K) -> bool``, the shapes the stage handles; ``limits`` says which,
            in words (for error messages).
        precision: ``"fp32"``, ``"tf32"``, ``"3xtf32"``, ``"fp16"`` or ``"bf16"``: the
            arithmetic of the inner product (``checks.COMPUTE`` maps it to cuBLAS's compute types),
            which sets the accuracy bound in :data:`TOLERANCE`.
        scalar_kernel: for stages that use 128-bit GMEM accesses: the same algorithm with scalar
            GMEM accesses, launched when A, B or C is not 16-byte aligned per row
            (``devarray.rows_aligned``; the plan decides).
        config: the tile configuration (``BM, BN, ...``) of a tunable stage, else empty.
        factory: for tunable stages, ``config -> Stage`` (see :meth:`with_config`).
        space: for tunable stages, the candidate configurations the tuner sweeps.
        check_config: for tunable stages, ``config -> None`` raising ``ValueError`` with the
            violated constraint when a configuration is invalid.
        dynamic_smem: bytes of dynamic SMEM per block the kernel needs (0: static only). Above
            48 KB the launcher opts the kernel in.
        split_k: K slices (``launch_config``'s grid z). With more than one, the kernel writes
            per-slice partial products into a workspace and the last slice of each C tile to
            finish sums them into C (``kernels._splitk``; one kernel, the plan passes the
            workspace and the tile counters).
        min_cc: the lowest compute capability the kernel compiles for (``cp.async``: (8, 0)).
        arch: for kernels with architecture-specific instructions (``wgmma``: ``sm_90a``), the
            one compute capability they run on; None: any from ``min_cc`` up (see
            :meth:`runs_on`).
        tile: ``(BM, BN)``, the rows and columns of C one block computes (``launch_config``'s
            grid is ``(cdiv(N, BN), cdiv(M, BM), split_k)``).
        args: the kernel's argument spec (``launch.numba_signature``): ``"AAAff"``, 2-D
            C-contiguous A, B, C (the ladder's teaching form), or ``"SSSff"``, batches of strided
            matrices ``(batch, rows, cols)`` in any of ``layouts`` (the tunable stages; grid z
            is then the batch index).
        layouts: the operand layouts the kernel serves (``"NN"``, ``"NT"``, ``"TN"``, ``"TT"``:
            whether A and B are stored transposed, as in BLAS; ``kernels._tunable``).
        layout_kernel: ``(vec, layout) -> kernel`` for stages with several layouts.
        layout_smem: dynamic SMEM per layout, when it differs from ``dynamic_smem``.
        general: whether the automatic choice may fall back to this stage without tuning data
            (False for a stage built for one regime of shapes, e.g. few rows).
        vector_loads: whether ``layout_kernel`` builds the ``"vector_loads"`` variant
            (:data:`VECTOR_LOADS`).
        block_of: the planner's view of a configuration of a tunable stage: ``cfg -> (rows,
            columns, K step)`` of one block's work (default ``(BM, BN, BK)``); see
            :meth:`block`.
        threads_of: ``cfg -> threads per block`` (default one warp per ``WM x WN`` warp tile of
            the ``BM x BN`` block tile); see :meth:`threads`.
        cost: the model that prices a tuned configuration at a new shape (``plan.cost``):
            ``"waves"`` (wave quantization of compute-bound tiles, ``estimate_ms``) or
            ``"stream"`` (the bytes of B a bandwidth-bound stage reads, ``stream_ms``; with a
            measured shape of nearby rows the plan prices it from there).
        wide_fixup: whether split-K's sum loads several items' partials per round
            (``_splitk.items_per_round``; the tiled stages' epilogue) and spreads over the
            slices where the grid is resident (``_splitk.make_fixup``), priced by
            ``plan.cost.reduce_ms``.
        tensor_maps: for the TMA stages (args ``...MMff``: A's and B's tensor maps after C),
            ``layout -> (element type, A's box, B's box)``, boxes ``(cols, rows)`` of the
            operands as stored (``launch.tensormap.matrix_spec``); the runner builds the maps
            per operand and keeps them.
        persistent: whether the kernel walks the C tiles itself: ``launch_config``'s grid is
            ``(blocks,)``, at most one block per SM of the current GPU and no more than the
            tiles, each block taking tiles ``gridDim.x`` apart.
        tuned_as: the stage whose tuning data prices this one's configurations where it has
            none of its own (the same kernel on operands of another type of the same size and
            product rate: BF16's stage 24 takes stage 20's FP16 classes).
        dependent_launch: whether the kernel waits for the kernel ahead of it in the stream
            (``griddepcontrol.wait``, ``ptx.tma.pdl_wait``) before its first GMEM access and lets
            the next start early: the launcher then launches it with programmatic dependent
            launch (``launch.driver.dependent_launch``), so back-to-back calls overlap one's
            launch and set-up with the tail of the one before.
        epilogue: whether the stage fuses epilogues (``kernel_for``'s ``epilogue``).
        element_copied: ``layout -> operands`` (``"A"``, ``"B"``, ``"AB"`` or ``""``) that the
            kernel copies from GMEM 4 bytes at a time, in the same SMEM order, in every
            variant (multistage's A in layout N, transposed on the way into SMEM; the skinny
            stage's A), so that their rows need no alignment (:meth:`free_rows`); None: none.
    """

    name: str
    label: str
    kernel: Any
    launch_config: Callable[[int, int, int], LaunchConfig]
    supports: Callable[[int, int, int], bool] = supports_any
    limits: str = "any M, N, K >= 1"
    precision: str = "fp32"
    scalar_kernel: Any = None
    config: Mapping[str, int] = field(default_factory=dict)
    factory: Callable[[Mapping[str, int]], Stage] | None = None
    space: tuple[Mapping[str, int], ...] = ()
    check_config: Callable[[Mapping[str, int]], None] | None = None
    dynamic_smem: int = 0
    split_k: int = 1
    min_cc: tuple[int, int] = (0, 0)
    arch: tuple[int, int] | None = None
    tile: tuple[int, int] | None = None
    args: str = "AAAff"
    layouts: tuple[str, ...] = ("NN",)
    layout_kernel: Callable[[int, str], Any] | None = None
    layout_smem: Mapping[str, int] = field(default_factory=dict)
    general: bool = True
    vector_loads: bool = False
    block_of: Callable[[Mapping[str, int]], tuple[int, int, int]] | None = None
    threads_of: Callable[[Mapping[str, int]], int] | None = None
    cost: str = "waves"
    wide_fixup: bool = False
    tensor_maps: Callable[[str], tuple[str, tuple[int, int], tuple[int, int]]] | None = None
    persistent: bool = False
    tuned_as: str | None = None
    dependent_launch: bool = False
    epilogue: bool = False
    element_copied: Callable[[str], str] | None = None

    def block(self, cfg: Mapping[str, int] | None = None) -> tuple[int, int, int]:
        """``(rows, columns, K step)`` of one block of configuration ``cfg`` (default: the
        stage's own), what the cost model counts tiles and waves in."""
        cfg = self.config if cfg is None else cfg
        if self.block_of is not None:
            return self.block_of(cfg)
        return cfg["BM"], cfg["BN"], cfg["BK"]

    def threads(self, cfg: Mapping[str, int] | None = None) -> int:
        """Threads per block of configuration ``cfg`` (default: the stage's own)."""
        cfg = self.config if cfg is None else cfg
        if self.threads_of is not None:
            return self.threads_of(cfg)
        return (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"]) * WARP_SIZE

    @property
    def rtol(self) -> float:
        """Relative-error bound of this stage against a float64 reference."""
        return TOLERANCE[self.precision]

    @property
    def tunable(self) -> bool:
        return self.factory is not None

    def with_config(self, config: Mapping[str, int]) -> Stage:
        """The same stage built with another tile configuration.

        Raises:
            TypeError: the stage takes no configuration.
            ValueError: the configuration breaks one of the stage's constraints.
        """
        if self.factory is None:
            raise TypeError(f"stage {self.name!r} has fixed tiles; it takes no configuration")
        if self.check_config is not None:
            self.check_config(config)
        return self.factory(config)

    def runs_on(self, cc: tuple[int, ...]) -> bool:
        """Whether the kernel runs on a device of compute capability ``cc`` (the simulator's
        pretend ``(99, 99)`` runs every stage)."""
        cc = tuple(cc)[:2]
        if cc == SIMULATED_CC:
            return True
        return cc >= tuple(self.min_cc) and (self.arch is None or cc == tuple(self.arch))

    def needs(self) -> str:
        """The compute capability the kernel needs, in words (``"compute capability 8.0+"``, or
        ``"... 9.0 exactly (sm_90a instructions)"`` for an architecture-specific stage)."""
        if self.arch is not None:
            return (
                f"compute capability {self.arch[0]}.{self.arch[1]} exactly "
                f"(sm_{self.arch[0]}{self.arch[1]}a instructions)"
            )
        return f"compute capability {self.min_cc[0]}.{self.min_cc[1]}+"

    @property
    def batched(self) -> bool:
        """Whether the kernel takes batches of strided matrices (any layout, grid z = batch)."""
        return self.args.startswith("S")

    def kernel_for(self, variant: str, layout: str = "NN", epilogue: Any = None) -> Any:
        """The ``"vector"`` kernel, or the ``"scalar"`` one (the vector kernel when the stage has
        no scalar variant: it then uses no 128-bit GMEM access), or the ``"vector_loads"`` one
        (:data:`VECTOR_LOADS`), for operand ``layout``; with a fused ``epilogue``
        (``kernels._epilogue.Epilogue``) the kernel built with it.

        Raises:
            ValueError: the stage does not serve ``layout``, has no ``"vector_loads"``
                variant, or fuses no epilogue.
        """
        if layout not in self.layouts:
            raise ValueError(f"stage {self.name!r} serves layouts {self.layouts}, not {layout!r}")
        if epilogue is not None and not self.epilogue:
            raise ValueError(f"stage {self.name!r} fuses no epilogue")
        if variant == "vector_loads":
            if not self.vector_loads or self.layout_kernel is None:
                raise ValueError(f"stage {self.name!r} has no vector_loads variant")
            return self._built(VECTOR_LOADS, layout, epilogue)
        if layout != "NN" or epilogue is not None:
            if self.layout_kernel is None:
                raise ValueError(
                    f"stage {self.name!r} serves layouts {self.layouts}, not {layout!r}"
                )
            return self._built(variant == "vector" or self.scalar_kernel is None, layout, epilogue)
        if variant == "scalar" and self.scalar_kernel is not None:
            return self.scalar_kernel
        return self.kernel

    def _built(self, vec: Any, layout: str, epilogue: Any) -> Any:
        if epilogue is None:
            return self.layout_kernel(vec, layout)
        return self.layout_kernel(vec, layout, epilogue)

    def args_for(self, epilogue: Any = None) -> str:
        """The kernel's argument spec (:attr:`args`), with a fused ``epilogue``'s operands
        (``Epilogue.spec``, a tuple) inserted before the scalars."""
        if epilogue is None:
            return self.args
        arrays = self.args.rstrip("f")
        return arrays + epilogue.spec + self.args[len(arrays) :]

    def has_vector_loads(self, layout: str = "NN") -> bool:
        """Whether the plan may run the ``"vector_loads"`` variant for operand ``layout``: the
        stage builds it and serves the layout, and B is stored transposed (read along K; read
        along N, its tile in the scalar C stores' column order cannot be loaded 128 bits at a
        time: ``kernels.k08_warptiling.make_mover``)."""
        return self.vector_loads and layout[1] == "T" and layout in self.layouts

    def free_rows(self, layout: str = "NN") -> str:
        """The operands (``"A"``, ``"B"``, both or neither) whose rows the vector kernel for
        ``layout`` needs no 16-byte alignment of: those it copies into SMEM element by element
        in every variant (:attr:`element_copied`); the plan then runs the vector kernel where
        only their rows are unaligned (``Geometry.alignment``'s ``free``)."""
        return "" if self.element_copied is None else self.element_copied(layout)

    def smem_for(self, layout: str = "NN") -> int:
        """Dynamic SMEM per block (bytes) of the kernel for ``layout``."""
        return self.layout_smem.get(layout, self.dynamic_smem)

    def __repr__(self) -> str:
        cfg = f", config={dict(self.config)}" if self.config else ""
        return f"Stage({self.name!r}{cfg})"
