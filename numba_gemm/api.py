"""``sgemm()``: validate -> plan -> launch.

A call reads its operands (``devarray.operand``: pointer, shape, strides, GPU, a few hundred ns
each), checks them, finds its plan in a dictionary (``plan.plan_for`` on the first call of a
shape) and launches the plan's kernel on the caller's stream. Nothing is synchronized on the host.
"""

from __future__ import annotations

import math
import numbers
import struct
from typing import Any

import numpy as np

from . import tuning
from .devarray import F32, Operand, all_rows_aligned, operand, rows_aligned
from .device import SIMULATOR
from .launch import DEFAULT_STREAM, SHARED_STREAMS, stream_handle
from .plan import MAX_PLANS, Plan, check_grid, plan_for
from .registry import Stage

_F32 = struct.Struct("f")


def _check_matrix(label: str, x: Operand, *, error: type[Exception] = TypeError) -> None:
    if x.dtype is not F32 and x.dtype != F32:
        raise error(f"{label} must be float32, got dtype {x.dtype}")
    shape = x.shape
    if len(shape) != 2:
        raise ValueError(f"{label} must be 2-D (rows, cols), got shape {tuple(shape)}")
    rows, cols = shape
    s0, s1 = x.strides
    if ((s1 != 4 and cols > 1) or (s0 != 4 * cols and rows > 1)) and rows and cols:
        raise ValueError(
            f"{label} must be C-contiguous (row-major), got strides {tuple(x.strides)}; "
            "copy it first (cupy.ascontiguousarray, tensor.contiguous(), or .copy_to_device on a "
            "contiguous array)"
        )


#: nonzero value -> its float32 rounding, for the values a program uses (zeros are not cached:
#: 0.0 == -0.0 as keys, but alpha = -0.0 must stay -0.0)
_SCALARS: dict = {1.0: 1.0}


def _check_scalar(label: str, v: Any) -> float:
    """``v`` rounded to float32 (returned as a Python float, what the kernel will use)."""
    x = _SCALARS.get(v) if type(v) is float or type(v) is int else None
    if x is not None:
        return x
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{label} must be a real number, got {type(v).__name__}")
    try:
        x = _F32.unpack(_F32.pack(float(v)))[0]  # OverflowError past the float32 range
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        raise ValueError(f"{label} must be finite in float32, got {v!r}")
    if len(_SCALARS) < 64 and (type(v) is float or type(v) is int) and v != 0:
        _SCALARS[v] = x
    return x


_plans: dict = {}
tuning.on_reload(_plans.clear)


def _stage_key(stage: Any) -> Any:
    if stage is None or isinstance(stage, str):
        return str(stage) if stage is not None else None
    if isinstance(stage, Stage):
        return id(stage)
    raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")


def _new_output(A: Operand, M: int, N: int) -> Any:
    """A new ``(M, N)`` float32 array of the same kind as ``a``, on its GPU."""
    obj = A.obj
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        import torch

        return torch.empty((M, N), dtype=torch.float32, device=obj.device)
    if mod == "cupy":
        import cupy

        with cupy.cuda.Device(A.device):
            return cupy.empty((M, N), dtype=cupy.float32)
    from numba import cuda

    if SIMULATOR:
        return cuda.device_array((M, N), dtype=np.float32)
    with cuda.gpus[A.device]:
        return cuda.device_array((M, N), dtype=np.float32)


def _validate(a: Any, b: Any, out: Any) -> tuple[Operand, Operand, Operand | None]:
    A = operand(a)
    B = operand(b)
    sa, sb = A.shape, B.shape
    # the common case in one test per operand: float32, 2-D, C-contiguous
    if not (A.dtype is F32 and len(sa) == 2 and A.strides == (4 * sa[1], 4)):
        _check_matrix("a", A)
    if not (B.dtype is F32 and len(sb) == 2 and B.strides == (4 * sb[1], 4)):
        _check_matrix("b", B)
    M, K = sa
    N = sb[1]
    if K != sb[0]:
        raise ValueError(
            f"inner dimensions differ: a has shape {tuple(sa)} and b has shape "
            f"{tuple(sb)}; need a (M, K) and b (K, N)"
        )
    if B.device != A.device:
        raise ValueError(f"a is on GPU {A.device} and b on GPU {B.device}: put them on one GPU")
    if out is None:
        return A, B, None
    C = operand(out)
    sc = C.shape
    if not (C.dtype is F32 and len(sc) == 2 and C.strides == (4 * N, 4)):
        _check_matrix("out", C, error=ValueError)
    if sc[0] != M or sc[1] != N:
        raise ValueError(
            f"out has shape {tuple(sc)}, expected (M, N) = ({M}, {N}) for a "
            f"{tuple(sa)} @ {tuple(sb)} product"
        )
    if C.device != A.device:
        raise ValueError(f"out is on GPU {C.device} and a, b on GPU {A.device}: use one GPU")
    # contiguous float32 arrays span [ptr, ptr + 4 * size): out must not intersect a or b
    c0, c1, a0, b0 = C.ptr, C.ptr + 4 * M * N, A.ptr, B.ptr
    if c1 > c0 and ((a0 < c1 and c0 < a0 + 4 * M * K) or (b0 < c1 and c0 < b0 + 4 * K * N)):
        label = "a" if a0 < c1 and c0 < a0 + 4 * M * K else "b"
        raise ValueError(f"out overlaps {label}: the output must not alias an input")
    return A, B, C


def explain(a: Any, b: Any, *, stage: str | Stage | None = None, out: Any = None) -> Plan:
    """The plan ``sgemm(a, b, stage=stage, out=out)`` would run, from the operands themselves
    (their GPU and alignment). Nothing is launched; ``repr`` of the result says why.

    Raises:
        TypeError, ValueError: as ``sgemm`` for bad operands or stage.
    """
    A, B, C = _validate(a, b, out)
    M, K = A.shape
    N = B.shape[1]
    aligned = all_rows_aligned(A.ptr, B.ptr, A.ptr if C is None else C.ptr, K, N)
    return plan_for(max(M, 1), max(N, 1), max(K, 1), stage=stage, aligned=aligned,
                    device=A.device)


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
            array, a CuPy array, a PyTorch CUDA tensor or any object with
            ``__cuda_array_interface__``, used zero-copy.
        b: B, shape ``(K, N)``, same requirements, on the same GPU.
        stage: a stage name from ``STAGES`` (e.g. ``"smem_tiling"``; tunable stages then use
            their tuned configuration for the shape) or a ``Stage``; ``None`` picks the fastest
            FP32 kernel for this GPU and shape. ``numba_gemm.explain(a, b)`` says what runs and
            why.
        out: C, shape ``(M, N)``, float32, C-contiguous, on the same GPU, not overlapping A or
            B. Written in place and returned. When ``None``, a new array of the same kind as
            ``a`` (Numba, CuPy or PyTorch) is returned (``beta`` is then irrelevant).
        alpha, beta: real scalars, applied in float32. With ``beta == 0``, C is not read.
        stream: 0 (the default stream), a Numba stream, a CuPy/PyTorch stream or a raw handle.
            The call is asynchronous on that stream. An operand whose producer stream is known
            (CUDA Array Interface v3, CuPy's current stream) is ordered before the launch with an
            event wait on the device, never a host synchronization.

    Returns:
        ``out`` if given, else the new array.

    Degenerate sizes follow NumPy: ``M == 0`` or ``N == 0`` gives an empty C; ``K == 0`` gives
    ``beta * C`` (zeros for a new output).

    Cost: the first call of a shape chooses its plan and loads its kernel (from the on-disk
    cache, or compiled: seconds); later calls are a few microseconds of host time.

    Raises:
        TypeError: a host (NumPy) array, CPU tensor or other non-device object (the message
            names ``numba.cuda.to_device``); ``a`` or ``b`` not float32; alpha/beta not real
            numbers; ``stage`` or ``stream`` of another type.
        ValueError: alpha/beta not finite in float32; an operand not 2-D or not C-contiguous;
            inner dimensions that differ; ``out`` of the wrong shape or dtype, non-contiguous, or
            overlapping ``a`` or ``b``; operands on different GPUs; an unknown stage name (valid
            names listed); a stage that does not support the shape or this GPU's compute
            capability (``Stage.min_cc``). Nothing is launched or written when an error is
            raised.
    """
    A, B, C = _validate(a, b, out)
    M, K = A.shape
    N = B.shape[1]
    alpha32 = _SCALARS.get(alpha) if type(alpha) is float else None
    if alpha32 is None:
        alpha32 = _check_scalar("alpha", alpha)
    if type(beta) is float and beta == 0.0:
        beta32 = 0.0  # C is not read (-0.0 alike)
    else:
        beta32 = _SCALARS.get(beta) if type(beta) is float else None
        if beta32 is None:
            beta32 = _check_scalar("beta", beta)
        if C is None:
            beta32 = 0.0  # a new output: C starts as nothing, beta is irrelevant
    strm = DEFAULT_STREAM if type(stream) is int and stream == 0 else stream_handle(stream)

    aligned = all_rows_aligned(A.ptr, B.ptr, A.ptr if C is None else C.ptr, K, N)
    key = (A.device, M, N, K, aligned, stage if stage is None or type(stage) is str
           else _stage_key(stage))
    p = _plans.get(key)
    if p is None:
        p = plan_for(max(M, 1), max(N, 1), max(K, 1), stage=stage, aligned=aligned,
                     device=A.device)
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        _plans[key] = p
    if C is None:
        out = _new_output(A, M, N)
        C = operand(out)
        if not rows_aligned(C.ptr, N) and aligned:  # a fresh allocation is 256-byte aligned
            p = plan_for(max(M, 1), max(N, 1), max(K, 1), stage=stage, aligned=False,
                         device=A.device)
    if M == 0 or N == 0:
        return out
    if (A.stream is not None or B.stream is not None or C.stream is not None) and not SIMULATOR:
        _order_after_producers(strm, p, A, B, C)
    if K == 0:
        _scale(C, beta32, strm, p)
        return out
    p.run(A, B, C, alpha32, beta32, strm)
    return out


def _order_after_producers(strm: int, p: Plan, *ops: Operand) -> None:
    """Make ``strm`` wait on the device for each operand's producer stream, if it has one that is
    neither ``strm`` nor a default stream ordered with it (in the operands' GPU's context)."""
    for x in ops:
        s = x.stream
        if s is not None and s != strm and not (s in SHARED_STREAMS and strm in SHARED_STREAMS):
            from . import _driver

            _driver.wait_for(s, strm, p.kernels()[0].ctx)


def _scale(C: Operand, beta: float, strm: Any, p: Plan) -> None:
    """``C = beta * C`` (the K == 0 product); beta == 0 writes exact zeros."""
    from .device import cdiv
    from .kernels._scale import BLOCK
    from .plan import scale_kernel

    M, N = C.shape
    grid = (cdiv(N, BLOCK[0]), cdiv(M, BLOCK[1]), 1)
    check_grid(grid, "C = beta * C (K = 0)")
    scale_kernel(p.device).launch(grid, (*BLOCK, 1), strm, (C,), (beta,))
