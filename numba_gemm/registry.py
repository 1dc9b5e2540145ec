"""The Stage record: one rung of the SGEMM optimisation ladder.

Every stage module ends with ``STAGE = Stage(...)``; ``numba_gemm.kernels.STAGES`` is the one
ordered tuple of them that the API, the bench, the tuner, the tests and the resource report read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .devarray import data_ptr

Dims = tuple[int, ...]
LaunchConfig = tuple[Dims, Dims]

#: Relative-error bound (Frobenius norm, against a float64 reference) per arithmetic precision.
#: FP32 accumulation over K terms stays far below 1e-5 for the sizes we test; TF32 inputs carry a
#: 10-bit mantissa (~5e-4 relative); FP16 inputs an 11-bit one.
TOLERANCE = MappingProxyType({"fp32": 1e-5, "tf32": 5e-3, "fp16": 1e-2})


def supports_any(M: int, N: int, K: int) -> bool:
    """Shape predicate of stages that handle any ``M, N, K >= 1``."""
    return M >= 1 and N >= 1 and K >= 1


def aligned16(arr: Any) -> bool:
    """True if a 2D float32 device array allows 128-bit row accesses.

    That is: its base address is a multiple of 16 bytes and its row pitch (``shape[1]``) a
    multiple of 4 elements, so that ``arr[r, c]`` with ``c % 4 == 0`` is 16-byte aligned.
    """
    return data_ptr(arr) % 16 == 0 and arr.shape[1] % 4 == 0


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
        supports: ``(M, N, K) -> bool``, the shapes the stage handles.
        precision: ``"fp32"``, ``"tf32"`` or ``"fp16"``: the arithmetic of the inner product,
            which sets the accuracy bound in :data:`TOLERANCE`.
        scalar_kernel: for stages that use 128-bit GMEM accesses: the same algorithm with scalar
            GMEM accesses, launched when A, B or C is not 16-byte aligned per row
            (see :func:`aligned16`).
        config: the tile configuration (``BM, BN, ...``) of a tunable stage, else empty.
        factory: for tunable stages, ``config -> Stage`` (see :meth:`with_config`).
        space: for tunable stages, the candidate configurations the tuner sweeps.
        check_config: for tunable stages, ``config -> None`` raising ``ValueError`` with the
            violated constraint when a configuration is invalid.
        dynamic_smem: bytes of dynamic SMEM per block the kernel needs (0: static only). Above
            48 KB the launcher opts the kernel in (``launch.allow_dynamic_smem``).
        split_k: K slices (``launch_config``'s grid z). With more than one, the kernel writes
            per-slice partial products into a workspace and ``_splitk`` sums them into C.
        min_cc: the lowest compute capability the kernel compiles for (``cp.async``: (8, 0)).
    """

    name: str
    label: str
    kernel: Any
    launch_config: Callable[[int, int, int], LaunchConfig]
    supports: Callable[[int, int, int], bool] = supports_any
    precision: str = "fp32"
    scalar_kernel: Any = None
    config: Mapping[str, int] = field(default_factory=dict)
    factory: Callable[[Mapping[str, int]], Stage] | None = None
    space: tuple[Mapping[str, int], ...] = ()
    check_config: Callable[[Mapping[str, int]], None] | None = None
    dynamic_smem: int = 0
    split_k: int = 1
    min_cc: tuple[int, int] = (0, 0)

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

    def select_kernel(self, A: Any, B: Any, C: Any) -> Any:
        """The kernel to launch on these arrays: the vector one when every array is aligned."""
        if self.scalar_kernel is None or all(aligned16(x) for x in (A, B, C)):
            return self.kernel
        return self.scalar_kernel

    def launch(self, A: Any, B: Any, C: Any, alpha: Any, beta: Any, stream: Any = 0) -> None:
        """Enqueue the kernel on ``stream``; no validation (``numba_gemm.sgemm`` validates).

        ``alpha`` and ``beta`` should be ``numpy.float32`` (a Python float would compile a
        float64 variant of the kernel).
        """
        M, K = A.shape
        N = B.shape[1]
        grid, block = self.launch_config(M, N, K)
        if self.split_k > 1:
            from .kernels._splitk import launch_split_k

            launch_split_k(self, grid, block, A, B, C, alpha, beta, stream)
            return
        self.launch_kernel(grid, block, A, B, C, alpha, beta, stream)

    def launch_kernel(self, grid, block, A, B, C, alpha, beta, stream) -> None:
        """One launch of the kernel variant for these arrays (``select_kernel``) with its
        dynamic SMEM, opted in above 48 KB. ``Stage.launch`` and split-K's partial products
        (C = the workspace) both go through here."""
        from .launch import allow_dynamic_smem

        kernel = self.select_kernel(A, B, C)
        if self.dynamic_smem:
            allow_dynamic_smem(kernel, (A, B, C, alpha, beta), self.dynamic_smem)
        kernel[grid, block, stream, self.dynamic_smem](A, B, C, alpha, beta)

    def __repr__(self) -> str:
        cfg = f", config={dict(self.config)}" if self.config else ""
        return f"Stage({self.name!r}{cfg})"
