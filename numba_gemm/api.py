"""``sgemm()``: validation, output allocation, stage choice, launch."""

from __future__ import annotations

import functools
import numbers
import warnings
from typing import Any

import numpy as np
from numba import cuda

from . import tuning
from .devarray import as_device_array, overlaps
from .kernels import STAGES
from .registry import Stage
from .tuning import select, shape_class, tuned_config, winners
from .vecmem import SIMULATOR


def get_stage(name: str) -> Stage:
    """The registered stage called ``name`` (see ``STAGES``).

    Raises:
        ValueError: no stage has that name; the message lists the valid names.
    """
    for s in STAGES:
        if s.name == name:
            return s
    valid = ", ".join(s.name for s in STAGES)
    raise ValueError(f"unknown stage {name!r}; valid stages: {valid}")


@functools.lru_cache(maxsize=256)
def _configured(name: str, items: tuple) -> Stage:
    return get_stage(name).with_config(dict(items))


def stage_for(stage: str | Stage, M: int, N: int, K: int) -> Stage:
    """The stage to run for this shape: a ``Stage`` as given; a name resolved with
    :func:`get_stage` and, for a tunable stage, built with its tuned configuration for the
    shape's class (``numba_gemm.tuning``) when there is one.

    Raises:
        ValueError: unknown stage name.
    """
    if isinstance(stage, Stage):
        return stage
    st = get_stage(stage)
    return _with_tuned(st, tuned_config(st.name, M, N, K) if st.tunable else None)


def _with_tuned(st: Stage, cfg: dict | None) -> Stage:
    """``st`` built with the tuned ``cfg``; ``st`` itself (with a warning) if ``cfg`` is stale."""
    if cfg is None:
        return st
    try:
        return _configured(st.name, tuple(sorted(cfg.items())))
    except (TypeError, ValueError) as e:
        warnings.warn(f"ignoring tuned config of {st.name!r} ({e}); using its default",
                      stacklevel=3)
        return st


def best_stage(M: int, N: int, K: int) -> Stage:
    """The stage ``sgemm(stage=None)`` runs for an ``(M, K) @ (K, N)`` product.

    The FP32 stage predicted fastest for this shape from the tuning cache or the committed
    defaults for this GPU (``numba_gemm.tuning.select``: tuned time at the class's shape, scaled
    by a wave-quantization model), with that configuration; without tuning data (or on the
    simulator), the last FP32 stage of the ladder that supports the shape.
    """
    device = tuning.current_device()
    cc = device[1] if device else (99, 99)  # the simulator runs every stage
    usable = {s.name for s in STAGES if s.precision == "fp32" and tuple(s.min_cc) <= cc}
    picks = [(sel[1], name, sel[0]) for name in winners(shape_class(M, N, K), device)
             if name in usable for sel in [select(name, M, N, K)] if sel]
    for _, name, cfg in sorted(picks, key=lambda p: p[:2]):
        st = _with_tuned(get_stage(name), cfg)
        if st.supports(M, N, K):
            return st
    for s in reversed(STAGES):
        if s.name in usable and s.supports(M, N, K):
            return s
    raise ValueError(f"no FP32 stage supports M={M}, N={N}, K={K}")  # pragma: no cover


@cuda.jit
def _scale_kernel(C, beta):
    # C = beta * C for the K == 0 case; beta == 0 writes exact zeros (C is not read).
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        C[i, j] = beta * C[i, j] if beta != 0 else np.float32(0.0)


def _check_matrix(label: str, x: Any, *, error: type[Exception] = TypeError) -> None:
    if np.dtype(x.dtype) != np.float32:
        raise error(f"{label} must be float32, got dtype {np.dtype(x.dtype)}")
    if x.ndim != 2:
        raise ValueError(f"{label} must be 2-D (rows, cols), got shape {tuple(x.shape)}")
    if not x.is_c_contiguous():
        raise ValueError(
            f"{label} must be C-contiguous (row-major), got strides {tuple(x.strides)}; "
            "copy it first (cupy.ascontiguousarray, or .copy_to_device on a contiguous array)"
        )


def _check_scalar(label: str, v: Any) -> np.float32:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{label} must be a real number, got {type(v).__name__}")
    with np.errstate(over="ignore"):
        try:
            x = np.float32(float(v))
        except OverflowError:
            x = np.float32(np.inf)
    if not np.isfinite(x):
        raise ValueError(f"{label} must be finite in float32, got {v!r}")
    return x


def _resolve_stream(stream: Any) -> Any:
    """0/None: default stream; a Numba stream as is; CuPy/PyTorch streams, raw handles wrapped."""
    if stream is None or (isinstance(stream, int) and not isinstance(stream, bool) and stream == 0):
        return 0
    if SIMULATOR:
        if isinstance(stream, type(cuda.default_stream())):
            return stream
        raise TypeError(f"stream must be 0 or a Numba stream, got {type(stream).__name__}")
    from numba.cuda.cudadrv.driver import Stream

    if isinstance(stream, Stream):
        return stream
    for attr in ("ptr", "cuda_stream"):  # CuPy, PyTorch
        if hasattr(stream, attr):
            return cuda.external_stream(int(getattr(stream, attr)))
    if isinstance(stream, int):
        return cuda.external_stream(stream)
    raise TypeError(
        f"stream must be 0, a Numba stream, a CuPy/PyTorch stream or a raw cudaStream_t int, "
        f"got {type(stream).__name__}"
    )


def sgemm(
    a: Any,
    b: Any,
    *,
    stage: str | Stage | None = None,
    out: Any = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    stream: Any = 0,
) -> Any:
    """``C = alpha * A @ B + beta * C`` in FP32 on the GPU, with one of the ladder's kernels.

    Args:
        a: A, shape ``(M, K)``, float32, C-contiguous (row-major), on the GPU: a Numba device
            array or any object with ``__cuda_array_interface__`` (CuPy array, PyTorch CUDA
            tensor), used zero-copy.
        b: B, shape ``(K, N)``, same requirements.
        stage: a stage name from ``STAGES`` (e.g. ``"smem_tiling"``; tunable stages then use
            their tuned configuration for the shape, see ``stage_for``) or a ``Stage``; ``None``
            picks the fastest FP32 stage for this GPU and shape (see ``best_stage``).
        out: C, shape ``(M, N)``, float32, C-contiguous, on the GPU, not overlapping A or B.
            Written in place and returned. When ``None``, a new Numba device array is returned
            (``beta`` is then irrelevant: C starts as zeros).
        alpha, beta: real scalars, applied in float32. With ``beta == 0``, C is not read.
        stream: 0 (default stream), a Numba stream, a CuPy/PyTorch stream or a raw handle.
            The call is asynchronous on that stream.

    Returns:
        ``out`` if given, else a new ``numba.cuda`` device array of shape ``(M, N)``.

    Degenerate sizes follow NumPy: ``M == 0`` or ``N == 0`` gives an empty C; ``K == 0`` gives
    ``beta * C`` (zeros for a new output).

    Raises:
        TypeError: a host (NumPy) array or other non-device object (the message names
            ``numba.cuda.to_device``); ``a`` or ``b`` not float32; alpha/beta not real numbers;
            ``stage`` or ``stream`` of another type.
        ValueError: alpha/beta not finite in float32; an operand not 2-D or not
            C-contiguous; inner dimensions that differ (both shapes given); ``out`` of the
            wrong shape or dtype, non-contiguous, or overlapping ``a`` or ``b``; an unknown
            stage name (valid names listed); a stage that does not
            support the shape or this GPU's compute capability (``Stage.min_cc``). Nothing is
            launched or written when an error is raised.
    """
    A = as_device_array(a)
    B = as_device_array(b)
    _check_matrix("a", A)
    _check_matrix("b", B)
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"inner dimensions differ: a has shape {tuple(A.shape)} and b has shape "
            f"{tuple(B.shape)}; need a (M, K) and b (K, N)"
        )
    M, K = A.shape
    N = B.shape[1]
    alpha32 = _check_scalar("alpha", alpha)
    beta32 = _check_scalar("beta", beta)

    if out is not None:
        C = as_device_array(out)
        _check_matrix("out", C, error=ValueError)
        if tuple(C.shape) != (M, N):
            raise ValueError(
                f"out has shape {tuple(C.shape)}, expected (M, N) = ({M}, {N}) for a "
                f"{tuple(A.shape)} @ {tuple(B.shape)} product"
            )
        for label, x in (("a", A), ("b", B)):
            if overlaps(C, x):
                raise ValueError(f"out overlaps {label}: the output must not alias an input")
    else:
        C = None
        beta32 = np.float32(0.0)

    if stage is None:
        st = best_stage(max(M, 1), max(N, 1), max(K, 1))
    elif isinstance(stage, (str, Stage)):
        st = stage_for(stage, max(M, 1), max(N, 1), max(K, 1))
    else:
        raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")
    if M and N and K and not st.supports(M, N, K):
        raise ValueError(f"stage {st.name!r} does not support M={M}, N={N}, K={K}")
    device = tuning.current_device()
    if device is not None and tuple(device[1]) < tuple(st.min_cc):
        raise ValueError(
            f"stage {st.name!r} needs compute capability {st.min_cc[0]}.{st.min_cc[1]}+, this GPU "
            f"({device[0]}) is {device[1][0]}.{device[1][1]}"
        )

    strm = _resolve_stream(stream)
    if C is None:
        C = cuda.device_array((M, N), dtype=np.float32, stream=strm)
    if M and N:
        if K == 0:
            grid = ((M + 15) // 16, (N + 15) // 16)
            _scale_kernel[grid, (16, 16), strm](C, beta32)
        else:
            st.launch(A, B, C, alpha32, beta32, strm)
    return out if out is not None else C
