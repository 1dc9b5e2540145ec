"""``sgemm()``: validate -> plan -> launch.

A call reads its operands (``arrays.operand``: pointer, shape, strides, GPU, a few hundred ns
each), checks them (dtypes first: a, b and out), finds its plan's runner in a dictionary
(``plan.choose.plan_for`` and ``launch.launcher.runner`` on the first call of a shape) and
launches the kernel on the caller's stream. Nothing is synchronized on the host.

The call nearly everyone makes again and again (2-D C-contiguous float32 operands on one GPU, the
default stream, a shape already planned) takes a fast lane first (:func:`_plain_call`): the same
checks and plan in one pass over the operands, without ``Operand`` objects, ~2 us less host time
per call on an H100 machine's host (docs/design.md, "The call path"). Anything else, errors
included, goes the general way. ``matmul`` of two 2-D operands is this same call (alpha 1,
beta 0), fast lane included.
"""

from __future__ import annotations

import functools
import math
import numbers
import struct
import threading
from typing import Any

import numpy as np
from numba import cuda

from .arrays import F32, PLAIN, PLAIN_T, Operand, all_rows_aligned, operand, overlaps
from .device import SIMULATOR, cdiv, check_grid
from .kernels._scale import BLOCK as SCALE_BLOCK
from .kernels.stage import Stage
from .launch import driver
from .launch.launcher import (
    DEFAULT_STREAM,
    SHARED_STREAMS,
    Runner,
    runner,
    scale_kernel,
    stream_handle,
)
from .plan import tuning
from .plan.choose import Plan, plan_for
from .plan.geometry import Alignment, Geometry

#: Runners kept by ``_plans`` (one per operands' geometry, alignment and request) before the
#: dictionary is emptied: a program that makes more distinct products re-plans them.
MAX_PLANS = 4096

_F32 = struct.Struct("f")
F16 = np.dtype(np.float16)

#: The ``compute`` argument of :func:`sgemm`: the arithmetic of the inner product, as cuBLAS names
#: its compute types (``cublasComputeType_t``) where it has one. "fp32" (the default): IEEE FP32
#: on the FMA pipe. "tf32": inputs rounded to TF32 (10-bit mantissa), FP32 accumulate, on tensor
#: cores (relative error ~1e-3). "3xtf32": each input split into two TF32 parts, three tensor-core
#: products accumulated in FP32 (FP32-level accuracy; CUTLASS's ``OpMultiplyAddFastF32``; cuBLAS
#: has no such compute type). The TF32 modes need compute capability 8.0+ and take 2-D row-major
#: C-contiguous operands.
COMPUTE = {"fp32": "CUBLAS_COMPUTE_32F", "tf32": "CUBLAS_COMPUTE_32F_FAST_TF32", "3xtf32": None}


def _check_compute(compute: Any) -> None:
    if compute is not None and compute not in COMPUTE:
        raise ValueError(f"compute must be one of {sorted(COMPUTE)} (or None), got {compute!r}")


def _check_float32(label: str, x: Operand, *, error: type[Exception] = TypeError) -> None:
    if x.dtype is not F32 and x.dtype != F32:
        hint = ""
        if x.dtype == F16 and label != "out":
            hint = (
                ": for float16 operands call numba_gemm.hgemm (FP16 tensor cores, FP32 "
                "accumulation)"
            )
        raise error(f"{label} must be float32, got dtype {x.dtype}{hint}")


def _check_dtypes(A: Operand, B: Operand, C: Operand | None) -> None:
    """The dtypes of an FP32 call (sgemm, matmul, explain), checked before any shape, stride or
    layout is read: a wrong dtype is then reported as one (not as the strides it has in float32
    units), and no float32 view is ever made of memory that holds something else.

    Raises:
        TypeError: ``a`` or ``b`` not float32 (float16: the message names ``hgemm``).
        ValueError: ``out`` not float32.
    """
    _check_float32("a", A)
    _check_float32("b", B)
    if C is not None:
        _check_float32("out", C, error=ValueError)


def _matrix(label: str, x: Operand) -> tuple[int, int, int, bool, int, int]:
    """``(batch, rows, cols, transposed, ld, batch_stride)`` of a 2-D or 3-D float32 operand,
    strides in elements: row-major (``transposed`` False: unit stride along the columns, ``ld``
    the row pitch) or column-major (True: unit stride along the rows, ``ld`` the column pitch).

    Raises:
        ValueError: not 2-D or 3-D; no unit stride in either of the last two dimensions (e.g. a
            strided slice ``x[:, ::2]``), negative strides, or rows (columns) that overlap.
    """
    shape, strides = tuple(x.shape), tuple(x.strides)
    if len(shape) not in (2, 3):
        raise ValueError(
            f"{label} must be 2-D (rows, cols) or 3-D (batch, rows, cols), got shape {shape}"
        )
    if 0 in shape:
        strides = tuple(abs(s) for s in strides)
    fix = (
        "make it contiguous first (tensor.contiguous(), cupy.ascontiguousarray(x), or copy a "
        "Numba array): that copy costs one read and one write of the operand"
    )
    if any(s % 4 or s < 0 for s in strides):
        raise ValueError(
            f"{label} has strides {strides} (bytes): negative or not a multiple of 4 bytes; {fix}"
        )
    rows, cols = shape[-2:]
    sr, sc = strides[-2] // 4, strides[-1] // 4
    batch, bs = (shape[0], strides[0] // 4) if len(shape) == 3 else (1, 0)
    if rows == 0 or cols == 0 or batch == 0:  # nothing is read or written: any strides
        return batch, rows, cols, False, cols, 0
    if sc == 1 or cols == 1:
        transposed, ld, need = False, sr if rows > 1 else cols, cols
    elif sr == 1 or rows == 1:
        transposed, ld, need = True, sc if cols > 1 else rows, rows
    else:
        raise ValueError(
            f"{label} has no unit stride in its last two dimensions (strides "
            f"{strides} bytes, shape {shape}); the kernels read row-major or "
            f"column-major matrices with any pitch: {fix}"
        )
    if ld < need:
        raise ValueError(
            f"{label} has overlapping {'columns' if transposed else 'rows'} "
            f"(strides {strides} bytes, shape {shape}); {fix}"
        )
    return batch, rows, cols, transposed, ld, bs if batch > 1 else 0


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


#: The one cache of the call path: (GPU, shape or geometry, alignment, stage request, compute)
#: -> the runner of its plan. The fast lane looks plain calls up in it with the same keys.
_plans: dict = {}
_plans_lock = threading.Lock()
tuning.on_reload(_plans.clear)


def _kept(key: tuple, make: Any) -> Runner:
    """The runner kept for ``key``; on a miss ``make()``'s, kept unless another thread kept one
    first (then that one: one runner per key)."""
    p = _plans.get(key)
    if p is None:
        p = make()
        with _plans_lock:
            if len(_plans) >= MAX_PLANS:
                _plans.clear()
            p = _plans.setdefault(key, p)
    return p


def _stage_key(stage: Any) -> Any:
    if stage is None or isinstance(stage, str):
        return str(stage) if stage is not None else None
    if isinstance(stage, Stage):
        return id(stage)
    raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")


def _new_output(obj: Any, device: int, shape: tuple, dtype: str = "float32") -> Any:
    """A new array of ``shape`` and ``dtype`` (``"float32"`` or ``"float16"``), C-contiguous, of
    the same kind as ``obj`` (a PyTorch tensor, a CuPy array, else a Numba device array),
    allocated by that library on GPU ``device`` (``obj``'s)."""
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        import torch  # optional dependency: only for PyTorch operands

        return torch.empty(shape, dtype=getattr(torch, dtype), device=obj.device)
    if mod == "cupy":
        import cupy  # optional dependency: only for CuPy operands

        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype=dtype)
    if SIMULATOR:
        return cuda.device_array(shape, dtype=dtype)
    with cuda.gpus[device]:
        return cuda.device_array(shape, dtype=dtype)


def _validate(
    a: Any, b: Any, out: Any
) -> tuple[Operand, Operand, Operand | None, Geometry | None, tuple]:
    """``(A, B, C or None, geometry, result shape)`` of ``sgemm(a, b, out=out)``; geometry None:
    the common case, 2-D C-contiguous operands (``Geometry.plain``)."""
    return _validate_operands(operand(a), operand(b), None if out is None else operand(out))


def _validate_operands(
    A: Operand, B: Operand, C: Operand | None
) -> tuple[Operand, Operand, Operand | None, Geometry | None, tuple]:
    """:func:`_validate` of operands already read."""
    if A.dtype is not F32 or B.dtype is not F32 or (C is not None and C.dtype is not F32):
        _check_dtypes(A, B, C)
    sa, sb = A.shape, B.shape
    # the common case in one test per operand: 2-D, C-contiguous
    if (
        len(sa) == 2
        and A.strides == (4 * sa[1], 4)
        and len(sb) == 2
        and B.strides == (4 * sb[1], 4)
    ):
        M, K = sa
        N = sb[1]
        if K != sb[0]:
            _inner_mismatch(sa, sb)
        if B.device != A.device:
            raise ValueError(f"a is on GPU {A.device} and b on GPU {B.device}: put them on one GPU")
        if C is None:
            return A, B, None, None, (M, N)
        sc = C.shape
        if len(sc) == 2 and C.strides == (4 * N, 4) and sc == (M, N):
            if C.device != A.device:
                raise ValueError(
                    f"out is on GPU {C.device} and a, b on GPU {A.device}: use one GPU"
                )
            label = _plain_overlap(A.ptr, B.ptr, C.ptr, M, N, K)
            if label:
                raise ValueError(f"out overlaps {label}: the output must not alias an input")
            return A, B, C, None, (M, N)
    return _validate_general(A, B, C)


def _plain_overlap(a0: int, b0: int, c0: int, M: int, N: int, K: int) -> str | None:
    """Which of C-contiguous float32 ``a`` (M, K) at ``a0`` and ``b`` (K, N) at ``b0`` the
    C-contiguous ``out`` (M, N) at ``c0`` overlaps (``"a"``, ``"b"``), or None. Each spans
    ``[ptr, ptr + 4 * size)``."""
    c1 = c0 + 4 * M * N
    if c1 > c0:
        if a0 < c1 and c0 < a0 + 4 * M * K:
            return "a"
        if b0 < c1 and c0 < b0 + 4 * K * N:
            return "b"
    return None


def _inner_mismatch(sa: tuple, sb: tuple) -> None:
    raise ValueError(
        f"inner dimensions differ: a has shape {tuple(sa)} and b has shape {tuple(sb)}; need a "
        "(M, K) and b (K, N), or batches (batch, M, K) and (batch, K, N)"
    )


def _validate_general(
    A: Operand, B: Operand, C: Operand | None
) -> tuple[Operand, Operand, Operand | None, Geometry, tuple]:
    """Any layout, pitch and batch (see ``sgemm``), of operands whose dtypes were checked
    (:func:`_check_dtypes`)."""
    ba, M, K, ta, lda, sa = _matrix("a", A)
    bb, kb, N, tb, ldb, sb = _matrix("b", B)
    if K != kb:
        _inner_mismatch(A.shape, B.shape)
    if ba != bb and 1 not in (ba, bb):
        raise ValueError(
            f"batch sizes differ: a has {ba} matrices and b has {bb}; they must be "
            "equal, or one of them 1 (broadcast)"
        )
    if B.device != A.device:
        raise ValueError(f"a is on GPU {A.device} and b on GPU {B.device}: put them on one GPU")
    batch = max(ba, bb)
    shape = (batch, M, N) if len(A.shape) == 3 or len(B.shape) == 3 else (M, N)
    layout = ("T" if ta else "N") + ("T" if tb else "N")
    if C is None:
        g = Geometry(batch, M, N, K, layout, lda, ldb, N, sa, sb, M * N if batch > 1 else 0)
        return A, B, None, g, shape
    if tuple(C.shape) != shape:
        raise ValueError(
            f"out has shape {tuple(C.shape)}, expected {shape} for a "
            f"{tuple(A.shape)} @ {tuple(B.shape)} product"
        )
    if C.device != A.device:
        raise ValueError(f"out is on GPU {C.device} and a, b on GPU {A.device}: use one GPU")
    _, _, _, tc, ldc, stc = _matrix("out", C)
    if tc and N > 1:
        raise ValueError(
            f"out must be row-major (unit stride along its last dimension), got strides "
            f"{tuple(C.strides)} bytes; for a column-major C compute its transpose instead: "
            "sgemm(b.T, a.T, out=out.T) (C.T = B.T @ A.T), or pass a row-major out"
        )
    if tc:  # N == 1: a column vector, any pitch
        ldc = 1
    if batch > 1 and stc < ldc * (M - 1) + N:
        raise ValueError(
            f"out's matrices overlap (batch stride {stc} elements < one matrix's "
            f"span {ldc * (M - 1) + N}): each result needs its own memory"
        )
    for label, X in (("a", A), ("b", B)):
        if overlaps(C, X):
            raise ValueError(f"out overlaps {label}: the output must not alias an input")
    return A, B, C, Geometry(batch, M, N, K, layout, lda, ldb, ldc, sa, sb, stc), shape


def explain(
    a: Any, b: Any, *, stage: str | Stage | None = None, out: Any = None, compute: str | None = None
) -> Plan:
    """The plan ``sgemm(a, b, stage=stage, out=out, compute=compute)`` would run, from the
    operands themselves (their GPU, layout, batch and alignment). Nothing is launched; ``repr``
    of the result says why.

    Raises:
        TypeError, ValueError: as ``sgemm`` for bad operands or stage.
    """
    _check_compute(compute)
    A, B, C, g, _ = _validate(a, b, out)
    M, K = A.shape[-2], A.shape[-1]
    N = B.shape[-1]
    if g is not None:
        M, N, K = g.M, g.N, g.K
    c_ptr = A.ptr if C is None else C.ptr
    if g is None:
        alignment = (
            Alignment.ALL if all_rows_aligned(A.ptr, B.ptr, c_ptr, K, N) else (Alignment.NONE)
        )
    else:  # the pointers (plan_for checks the rows)
        alignment = Alignment.of_pointers(A.ptr, B.ptr, c_ptr)
        if min(M, N, K) < 1:
            g = None
    return plan_for(
        max(M, 1),
        max(N, 1),
        max(K, 1),
        stage=stage,
        alignment=alignment,
        device=A.device,
        geometry=g,
        compute=compute,
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
    compute: str | None = None,
) -> Any:
    """``C = alpha * A @ B + beta * C`` in FP32 on the GPU, with one of the ladder's kernels.

    Args:
        a: A, shape ``(M, K)``, or a batch ``(batch, M, K)``; float32, on the GPU: a Numba
            device array, a CuPy array, a PyTorch CUDA tensor or any object with
            ``__cuda_array_interface__``, used zero-copy. Row-major or column-major (a
            transposed view: ``x.T``, ``tensor.t()``, a Fortran-ordered array), any row pitch
            (leading dimension), any batch stride (0 broadcasts one matrix).
        b: B, shape ``(K, N)`` or ``(batch, K, N)``, same rules, on the same GPU. A 2-D operand,
            or a batch of 1, is broadcast over the other's batch (as ``numpy.matmul``).
        stage: a stage name from ``STAGES`` (e.g. ``"smem_tiling"``; tunable stages then use
            their tuned configuration for the shape) or a ``Stage``; ``None`` picks the fastest
            FP32 kernel for this GPU, shape and layout. The teaching stages (1-7) take 2-D
            row-major C-contiguous operands only; the tunable ones (warptiling and later) take
            every layout, pitch and batch. ``numba_gemm.explain(a, b)`` says what runs and why.
        out: C, shape ``(M, N)`` (``(batch, M, N)`` when a or b is 3-D), float32, row-major
            (unit stride along N; any row pitch and batch stride that keeps the results apart),
            on the same GPU, not overlapping A or B. Written in place and returned. When
            ``None``, a new C-contiguous array of the same kind as ``a`` (a PyTorch tensor, a
            CuPy array, else a Numba device array; its library allocates it) is returned
            (``beta`` is then irrelevant).
        alpha, beta: real scalars, applied in float32. With ``beta == 0``, C is not read.
        stream: 0 (the default stream), a Numba stream, a CuPy/PyTorch stream or a raw handle.
            The call is asynchronous on that stream. An operand whose producer stream is known
            (CUDA Array Interface v3, CuPy's current stream) is ordered before the launch with an
            event wait on the device, never a host synchronization.
        compute: the arithmetic (:data:`COMPUTE`): ``"fp32"`` (IEEE FP32, the default),
            ``"tf32"`` (TF32 tensor cores, cuBLAS's ``CUBLAS_COMPUTE_32F_FAST_TF32``: ~1e-3
            relative error, several times faster) or ``"3xtf32"`` (three TF32 products per
            multiply: FP32-level accuracy from tensor cores). None: ``"fp32"``, or the named
            stage's own arithmetic. The TF32 modes need compute capability 8.0+ and 2-D
            row-major C-contiguous operands.

    Returns:
        ``out`` if given, else the new array.

    Layouts (as BLAS names them, by whether A and B are stored transposed): NN, NT, TN and TT
    each run one kernel with no copy; so does a batch (grid z over it). Operands with no unit
    stride in their last two dimensions (``x[:, ::2]``) are rejected, not copied: the message
    says how to make them contiguous, and what that costs.

    Degenerate sizes follow NumPy: ``M == 0`` or ``N == 0`` gives an empty C; ``K == 0`` gives
    ``beta * C`` (zeros for a new output).

    Cost: the first call of a shape and layout chooses its plan and loads its kernel (from the
    on-disk cache, or compiled: seconds); later calls are a few microseconds of host time. A
    large product whose rows are not 16-byte aligned (K or N not a multiple of 4) may be staged
    (``numba_gemm.plan.staging``): A, B and/or C go through zero-padded copies with aligned pitches
    so the 128-bit kernels run; the copies use a workspace per stream of up to the padded
    operands' size (kept for later calls, at most ``staging.MAX_BYTES``).

    Raises:
        TypeError: a host (NumPy) array, CPU tensor or other non-device object (the message
            names ``numba.cuda.to_device``); ``a`` or ``b`` not float32 (float16: the message
            names ``hgemm``); alpha/beta not real numbers; ``stage`` or ``stream`` of another
            type. The dtypes of ``a``, ``b`` and ``out`` are checked before anything else.
        ValueError: alpha/beta not finite in float32; an operand not 2-D or 3-D, or with no unit
            stride, negative strides or overlapping rows; inner dimensions or batch sizes that
            differ; ``out`` of the wrong shape or dtype, column-major, with overlapping
            matrices, or overlapping ``a`` or ``b``; operands on different GPUs; an unknown stage
            name (valid names listed); a stage that does not support the shape, layout or batch,
            or this GPU's compute capability (``Stage.min_cc``); an unknown ``compute``, one
            that the named stage does not compute, or that no stage serves for this GPU or
            layout. Nothing is launched or written when an error is raised.
    """
    if compute is None and type(stream) is int and stream == 0:
        done = _plain_call(a, b, out, stage, alpha, beta)
        if done is not None:
            return done
    A, B, C, g, shape = _validate(a, b, out)
    if compute is not None:
        _check_compute(compute)
    return _run(A, B, C, g, shape, out, alpha, beta, stage, stream, compute)


@functools.lru_cache(maxsize=MAX_PLANS)
def _dense(M: int, N: int, K: int, layout: str) -> Geometry:
    """``Geometry.dense``, memoized (the fast lane keys transposed operands' plans by it)."""
    return Geometry.dense(M, N, K, layout)


def _plain_call(a: Any, b: Any, out: Any, stage: Any, alpha: Any, beta: Any) -> Any:
    """``sgemm``'s fast lane, for the call nearly every caller makes: plain operands
    (``arrays.PLAIN``: 2-D, float32, C-contiguous, on the one visible GPU, no producer stream;
    A or B may be the transpose of one, ``arrays.PLAIN_T``, as ``x @ w.T`` passes it), float
    scalars the call path has met before, the default stream, and a plan already made for the
    shape (and layout: ``Geometry.dense``). One pass over the operands, no ``Operand`` objects,
    the plan's pointer launcher (``Plan.run_plain``; a staged plan's inherited one wraps the
    pointers for its copies). Returns
    the result, or None with nothing done for any other call (a first call, an error to raise):
    the general path then decides, and it keys its plans as this lane does, so both launch the
    same plan for the same operands."""
    ra, rb = PLAIN.get(type(a)), PLAIN.get(type(b))
    if ra is None or rb is None:
        return None
    # each operand plain, else the transpose of one (x @ w.T: its layout's plans), else no lane;
    # a is decided before b is read (a batch, as matmul passes, costs one operand's readers)
    layout = None  # both plain: the plain geometry's plans
    pa = ra(a)
    if pa is None:
        pa = PLAIN_T[type(a)](a)
        if pa is None:
            return None
        layout = "TN"
    pb = rb(b)
    if pb is None:
        pb = PLAIN_T[type(b)](b)
        if pb is None:
            return None
        layout = "TT" if layout else "NT"
    a0, M, K = pa
    b0, kb, N = pb
    alpha32 = _SCALARS.get(alpha) if type(alpha) is float else None
    if kb != K or not (M and N and K) or alpha32 is None:
        return None
    if out is None:
        c0, beta32 = a0, 0.0  # the general path's stand-in for the new C's pointer
    else:
        rc = PLAIN.get(type(out))
        pc = rc(out) if rc is not None else None
        if pc is None or pc[1] != M or pc[2] != N:
            return None
        c0 = pc[0]
        if _plain_overlap(a0, b0, c0, M, N, K):
            return None  # the general path raises
        if type(beta) is float and beta == 0.0:
            beta32 = 0.0
        else:
            beta32 = _SCALARS.get(beta) if type(beta) is float else None
            if beta32 is None:
                return None
    skey = stage if stage is None or type(stage) is str else _stage_key(stage)
    if layout is None:
        p = _plans.get((0, M, N, K, all_rows_aligned(a0, b0, c0, K, N), skey, None))
    else:  # keyed as the general path keys a geometry (its alignment: the pointers')
        p = _plans.get(
            (
                0,
                _dense(M, N, K, layout),
                (not ((a0 | b0) & 15)) + (not ((a0 | b0 | c0) & 15)),
                skey,
                None,
            )
        )
    if p is None:
        return None
    if out is None:
        out = _new_output(a, 0, (M, N))
        rc = PLAIN.get(type(out))
        pc = rc(out) if rc is not None else None
        if pc is None or pc[0] & 15:  # not seen so far: allocators align to 256 bytes
            return sgemm(a, b, stage=stage, out=out, alpha=alpha)
        c0 = pc[0]
    p.run_plain(a0, b0, c0, alpha32, beta32, DEFAULT_STREAM)
    return out


def _run(
    A: Operand,
    B: Operand,
    C: Operand | None,
    g: Geometry | None,
    shape: tuple,
    out: Any,
    alpha: Any,
    beta: Any,
    stage: Any,
    stream: Any,
    compute: str | None = None,
) -> Any:
    """The call after validation: scalars, plan (a dictionary hit), output, launch."""
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
    if g is None:  # the common case: 2-D, C-contiguous
        M, K = A.shape
        N = B.shape[1]
        aligned = all_rows_aligned(A.ptr, B.ptr, A.ptr if C is None else C.ptr, K, N)
        key = (
            A.device,
            M,
            N,
            K,
            aligned,
            stage if stage is None or type(stage) is str else _stage_key(stage),
            compute,
        )
    else:
        M, N, K = g.M, g.N, g.K
        # the pointers' alignment: 2 all three, 1 A and B (C not: the vector_loads variant), 0
        ab = A.ptr | B.ptr
        aligned = (not (ab & 15)) + (not ((ab | (A.ptr if C is None else C.ptr)) & 15))
        key = (
            A.device,
            g,
            aligned,
            stage if stage is None or type(stage) is str else _stage_key(stage),
            compute,
        )
    p = _plans.get(key)
    if p is None:
        p = _kept(key, lambda: _plan(M, N, K, g, stage, aligned, A.device, compute))
    if C is None:
        out = _new_output(A.obj, A.device, shape)
        C = operand(out)
        if C.ptr & 15 and aligned:  # a fresh allocation is 256-byte aligned
            p = _plan(M, N, K, g, stage, False if g is None else 1, A.device, compute)
    if M == 0 or N == 0 or (g is not None and g.batch == 0):
        return out
    if (A.stream is not None or B.stream is not None or C.stream is not None) and not SIMULATOR:
        _order_after_producers(strm, p, A, B, C)
    if K == 0:
        _scale(C, g, beta32, strm, p)
        return out
    p.run(A, B, C, alpha32, beta32, strm)
    return out


#: hgemm's output dtypes (the ``out_dtype`` argument), by name.
HGEMM_OUT = {"float32": F32, "float16": F16}


def hgemm(
    a: Any,
    b: Any,
    *,
    out: Any = None,
    out_dtype: str | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    stream: Any = 0,
    stage: str | Stage | None = None,
) -> Any:
    """``C = alpha * A @ B + beta * C`` with FP16 operands on tensor cores, FP32 accumulation
    (BLAS's HGEMM; cuBLAS ``cublasGemmEx`` with ``CUDA_R_16F`` inputs and
    ``CUBLAS_COMPUTE_32F``).

    Args:
        a: A, shape ``(M, K)``, float16, row-major C-contiguous, on the GPU (Numba, CuPy,
            PyTorch or any ``__cuda_array_interface__`` object; zero-copy).
        b: B, shape ``(K, N)``, float16, row-major C-contiguous, on the same GPU.
        out: C, shape ``(M, N)``, float32 or float16, C-contiguous, on the same GPU, not
            overlapping A or B: written in place and returned. None: a new array of
            ``out_dtype`` and of ``a``'s kind.
        out_dtype: ``"float32"`` (the default: FP32 results, no rounding after the FP32 sums) or
            ``"float16"`` (each result rounded to FP16 once, at the end). With ``out`` given,
            its dtype decides and ``out_dtype``, if given, must match it.
        alpha, beta: real scalars, applied in FP32 to the FP32 sums. With ``beta == 0`` C is
            not read.
        stream: as for :func:`sgemm`.
        stage: None (the FP16 stage for the shape) or the name / ``Stage`` of an FP16 stage
            (``precision == "fp16"``, e.g. ``"hgemm_mma"``).

    Returns:
        ``out`` if given, else the new array.

    Needs compute capability 8.0+. The kernel copies 16-byte chunks (8 halves) with
    ``cp.async``: A's and B's rows must be 16-byte aligned, so ``K`` and ``N`` must be
    multiples of 8 (pad them with zeros otherwise: that changes nothing in the product).
    ``M == 0`` or ``N == 0`` gives an empty C.

    Raises:
        TypeError: a host array or other non-device object; ``a`` or ``b`` not float16; ``out``
            of another dtype than float32/float16 (the dtypes of ``a``, ``b`` and ``out`` are
            checked before anything else); alpha/beta not real; ``stage`` or ``stream`` of
            another type.
        ValueError: an operand not 2-D C-contiguous; inner dimensions that differ; ``K`` or
            ``N`` not a multiple of 8, ``K == 0``, or an operand not 16-byte aligned; ``out``
            of the wrong shape, not C-contiguous, overlapping ``a`` or ``b``, or not of
            ``out_dtype``; an unknown ``out_dtype``; operands on different GPUs; a stage that
            is not an FP16 stage; a GPU below compute capability 8.0. Nothing is launched or
            written when an error is raised.
    """
    A, B = operand(a), operand(b)
    C = None if out is None else operand(out)
    # dtypes first (a, b, out), before any shape or stride is read: a wrong dtype is reported as
    # one, not as the layout it seems to have
    for label, X in (("a", A), ("b", B)):
        if X.dtype != F16:
            raise TypeError(
                f"hgemm: {label} must be float16, got dtype {X.dtype} (float32 "
                "operands: numba_gemm.sgemm, with compute='tf32' for tensor cores)"
            )
    if C is not None and C.dtype not in (F32, F16):
        raise TypeError(f"hgemm: out must be float32 or float16, got dtype {C.dtype}")
    for label, X in (("a", A), ("b", B)):
        if len(X.shape) != 2 or (0 not in X.shape and tuple(X.strides) != (2 * X.shape[1], 2)):
            raise ValueError(
                f"hgemm: {label} must be 2-D and C-contiguous, got shape "
                f"{tuple(X.shape)} and strides {tuple(X.strides)} bytes"
            )
    (M, K), (kb, N) = A.shape, B.shape
    if K != kb:
        _inner_mismatch(A.shape, B.shape)
    if B.device != A.device:
        raise ValueError(f"a is on GPU {A.device} and b on GPU {B.device}: put them on one GPU")
    if out_dtype is not None and out_dtype not in HGEMM_OUT:
        raise ValueError(
            f"out_dtype must be one of {sorted(HGEMM_OUT)} (or None), got {out_dtype!r}"
        )
    if C is not None:
        dt = "float16" if C.dtype == F16 else "float32"
        if out_dtype is not None and out_dtype != dt:
            raise ValueError(f"out is {dt} but out_dtype is {out_dtype!r}")
        if tuple(C.shape) != (M, N) or (
            M * N and tuple(C.strides) != (C.dtype.itemsize * N, C.dtype.itemsize)
        ):
            raise ValueError(
                f"out must be a C-contiguous ({M}, {N}) array, got shape "
                f"{tuple(C.shape)} and strides {tuple(C.strides)} bytes"
            )
        if C.device != A.device:
            raise ValueError(f"out is on GPU {C.device} and a, b on GPU {A.device}: use one GPU")
        # contiguous arrays span [ptr, ptr + bytes): out must not intersect a or b
        c0, c1 = C.ptr, C.ptr + C.dtype.itemsize * M * N
        for label, x0, x1 in (("a", A.ptr, A.ptr + 2 * M * K), ("b", B.ptr, B.ptr + 2 * K * N)):
            if c0 < c1 and x0 < x1 and x0 < c1 and c0 < x1:
                raise ValueError(f"out overlaps {label}: the output must not alias an input")
    else:
        dt = out_dtype or "float32"
    if K == 0:
        raise ValueError("hgemm: K == 0 (an empty inner dimension); the FP16 kernel needs K >= 8")
    if K % 8 or N % 8 or (A.ptr | B.ptr) & 15:
        raise ValueError(
            f"hgemm: rows of a and b must be 16-byte aligned for the kernel's "
            f"16-byte copies: K ({K}) and N ({N}) multiples of 8 and both arrays "
            "16-byte aligned; pad K and N with zeros (the product is unchanged) "
            "or use a fresh allocation"
        )
    alpha32 = _SCALARS.get(alpha) if type(alpha) is float else None
    if alpha32 is None:
        alpha32 = _check_scalar("alpha", alpha)
    if out is None or (type(beta) is float and beta == 0.0):
        beta32 = 0.0  # C is not read
    else:
        beta32 = _check_scalar("beta", beta)
    strm = DEFAULT_STREAM if type(stream) is int and stream == 0 else stream_handle(stream)
    key = (
        "fp16",
        A.device,
        M,
        N,
        K,
        stage if stage is None or type(stage) is str else _stage_key(stage),
        dt,
    )
    p = _plans.get(key)
    if p is None and M and N:
        p = _kept(
            key,
            lambda: _runner(M, N, K, stage=stage, device=A.device, compute="fp16", out_dtype=dt),
        )
    if out is None:
        out = _new_output(A.obj, A.device, (M, N), dt)
        C = operand(out)
    if M == 0 or N == 0:
        return out
    if (A.stream is not None or B.stream is not None or C.stream is not None) and not SIMULATOR:
        _order_after_producers(strm, p, A, B, C)
    p.run(A, B, C, alpha32, beta32, strm)
    return out


def matmul(
    a: Any,
    b: Any,
    *,
    out: Any = None,
    stage: str | Stage | None = None,
    stream: Any = 0,
    compute: str | None = None,
) -> Any:
    """``a @ b`` in FP32 on the GPU, with ``numpy.matmul``'s shape rules.

    Args:
        a, b: float32 device arrays (as for :func:`sgemm`: Numba, CuPy, PyTorch, CUDA Array
            Interface), on one GPU, of any number of dimensions >= 1. As in NumPy: a 1-D ``a``
            is a row ``(1, K)`` and a 1-D ``b`` a column ``(K, 1)``, that dimension being
            removed from the result; dimensions before the last two are batch dimensions,
            broadcast against each other. The last two dimensions of each may be row- or
            column-major with any pitch (no copy); batch dimensions may have any strides (0:
            broadcast).
        out: the result, of the broadcast shape ``(*batch, M, N)`` (less removed dimensions),
            float32, with row-major matrices; default: a new C-contiguous array of ``a``'s kind.
        stage, stream, compute: as for :func:`sgemm`.

    Returns:
        ``out`` or the new array.

    Launches: two 2-D operands make the call ``sgemm(a, b, out=out)`` makes (its checks, plan
    and fast lane: the same host time). Batches: one kernel (grid z over the batch) when each
    operand's batch dimensions collapse into one stride (contiguous batches, a broadcast
    operand, or one batch dimension), else one per index of the leading batch dimensions that
    do not collapse, every one checked before the first is launched.

    Raises:
        TypeError, ValueError: as :func:`sgemm` (``out`` not float32 is a ValueError); also a
        0-D operand; batch dimensions that do not broadcast (the message gives both shapes); an
        ``out`` whose matrices share memory (a broadcast batch dimension, stride 0, or
        overlapping slices), or that overlaps ``a`` or ``b`` anywhere. Nothing is launched or
        written when an error is raised.
    """
    # 2-D operands (nearly every call) are sgemm's product with alpha 1 and beta 0: its fast lane,
    # checks, plans and launch, at sgemm's host cost
    if compute is None and type(stream) is int and stream == 0:
        done = _plain_call(a, b, out, stage, 1.0, 0.0)
        if done is not None:
            return done
    _check_compute(compute)
    A, B = operand(a), operand(b)
    C = None if out is None else operand(out)
    _check_dtypes(A, B, C)  # first: nothing below is read as float32 unless it is
    if len(A.shape) == 2 and len(B.shape) == 2:
        A, B, C, g, shape = _validate_operands(A, B, C)
        return _run(A, B, C, g, shape, out, 1.0, 0.0, stage, stream, compute)
    if len(A.shape) == 0 or len(B.shape) == 0:
        raise ValueError(
            "matmul: a and b must have at least one dimension (no scalars), got "
            f"shapes {tuple(A.shape)} and {tuple(B.shape)}"
        )
    a_vec, b_vec = len(A.shape) == 1, len(B.shape) == 1
    ashape, astr = (
        ((1,) + tuple(A.shape), (0,) + tuple(A.strides))
        if a_vec
        else (tuple(A.shape), tuple(A.strides))
    )
    bshape, bstr = (
        (tuple(B.shape) + (1,), tuple(B.strides) + (0,))
        if b_vec
        else (tuple(B.shape), tuple(B.strides))
    )
    if ashape[-1] != bshape[-2]:
        raise ValueError(
            f"matmul: inner dimensions differ: a has shape {tuple(A.shape)} and b {tuple(B.shape)}"
        )
    try:
        batch = np.broadcast_shapes(ashape[:-2], bshape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions {ashape[:-2]} of a and {bshape[:-2]} of b do "
            "not broadcast (numpy.matmul's rule)"
        ) from None
    M, N = ashape[-2], bshape[-1]
    shape = batch + (M, N)
    final = shape[:-2] + ((M,) if not a_vec else ()) + ((N,) if not b_vec else ())
    given = C is not None
    if not given:
        out = _new_output(A.obj, A.device, final)
        C = operand(out)
    elif tuple(C.shape) != final:
        raise ValueError(
            f"out has shape {tuple(C.shape)}, expected {final} for a "
            f"{tuple(A.shape)} @ {tuple(B.shape)} product"
        )
    # C's strides in the full (*batch, M, N) shape: 0 for the dimension a 1-D operand removed
    nb = len(batch)
    rest = tuple(C.strides[nb:])
    cstr = tuple(C.strides[:nb]) + (0 if a_vec else rest[0], 0 if b_vec else rest[-1])

    def batch_strides(xshape, xstr):  # strides of the broadcast batch dims (0: broadcast)
        nb = len(xshape) - 2
        pad = len(batch) - nb
        return tuple(
            0 if i < pad or xshape[i - pad] == 1 else xstr[i - pad] for i in range(len(batch))
        )

    sa, sb, sc = (
        batch_strides(ashape, astr),
        batch_strides(bshape, bstr),
        tuple(cstr[: len(batch)]),
    )
    # collapse batch dims (right to left) while every operand keeps one stride across them
    dims = [(n, sa[i], sb[i], sc[i]) for i, n in enumerate(batch) if n != 1]
    merged: list = []
    for n, x, y, z in reversed(dims):
        if merged and all(
            s == t * merged[-1][0] for s, t in zip((x, y, z), merged[-1][1:], strict=True)
        ):
            m = merged[-1]
            merged[-1] = (m[0] * n, m[1], m[2], m[3])
        else:
            merged.append((n, x, y, z))
    merged.reverse()
    inner = merged[-1] if merged else (1, 0, 0, 0)
    outer = merged[:-1]
    if given and outer:  # one launch: its views are the whole operands, checked below
        _check_matmul_out(A, B, C, batch, cstr, M, N)
    mat_a = (ashape[-2], ashape[-1]), astr[-2:]
    mat_b = (bshape[-2], bshape[-1]), bstr[-2:]
    mat_c = (M, N), cstr[-2:]
    # every launch's operands validated before the first launch: an error writes nothing
    launches = []
    for idx in np.ndindex(*[m[0] for m in outer]):
        offs = [sum(i * m[k] for i, m in zip(idx, outer, strict=True)) for k in (1, 2, 3)]
        views = []
        for X, (mshape, mstr), off, bs in (
            (A, mat_a, offs[0], inner[1]),
            (B, mat_b, offs[1], inner[2]),
            (C, mat_c, offs[2], inner[3]),
        ):
            views.append(
                Operand(
                    X.obj, X.ptr + off, (inner[0], *mshape), (bs, *mstr), F32, X.device, X.stream
                )
            )
        launches.append(_validate_general(*views))
    for Av, Bv, Cv, g, vshape in launches:
        _run(Av, Bv, Cv, g, vshape, out, 1.0, 0.0, stage, stream, compute)
    return out


def _check_matmul_out(
    A: Operand, B: Operand, C: Operand, batch: tuple, cstr: tuple, M: int, N: int
) -> None:
    """A caller's ``out`` of a ``matmul`` of several launches, as a whole (each launch's view
    is checked by ``_validate_general``): no two products may share its memory, and it may share
    none with ``a`` or ``b``. Checked on the whole arrays because a launch's view sees only its
    own slice, and one slice of ``out`` written over another slice of an input, or of ``out``, is
    wrong results with no error. ``cstr``: C's strides (bytes) in the ``(*batch, M, N)`` shape.

    Raises:
        ValueError: a batch dimension of ``out`` whose stride (0: broadcast) does not clear the
            memory of the dimensions inside it, as ``sgemm`` asks of its one batch stride;
            ``out`` overlapping ``a`` or ``b``.
    """
    span = (M - 1) * abs(cstr[-2]) + (N - 1) * abs(cstr[-1]) + 4  # bytes of one matrix
    dims = zip(batch, cstr[: len(batch)], strict=True)
    for n, s in sorted(((n, abs(s)) for n, s in dims if n > 1), key=lambda d: d[1]):
        if s < span:
            raise ValueError(
                f"out's matrices overlap (shape {tuple(C.shape)}, strides "
                f"{tuple(C.strides)} bytes): each product of the batch needs its "
                "own memory (a broadcast out, stride 0, is not allowed)"
            )
        span += (n - 1) * s
    for label, X in (("a", A), ("b", B)):
        if overlaps(C, X):
            raise ValueError(f"out overlaps {label}: the output must not alias an input")


def _plan(
    M: int,
    N: int,
    K: int,
    g: Geometry | None,
    stage: Any,
    aligned: bool | int,
    device: int,
    compute: str | None = None,
) -> Runner:
    """The runner of ``plan_for`` this product; an empty one (a zero dimension) gets a 1 x 1 x 1
    plan, which only lends its GPU and scale kernel. ``aligned``: without ``g``, whether the rows
    are 16-byte aligned (a bool); with it, the pointers' :class:`Alignment` (an int of its
    values: the key the fast lane computes without building one)."""
    if g is None:
        alignment = Alignment.ALL if aligned else Alignment.NONE
    else:
        alignment = Alignment(aligned)
        if min(M, N, K, g.batch) < 1:
            g = None
    return _runner(
        max(M, 1),
        max(N, 1),
        max(K, 1),
        stage=stage,
        alignment=alignment,
        device=device,
        geometry=g,
        compute=compute,
    )


def _runner(*args: Any, **kwargs: Any) -> Runner:
    """``launch.launcher.runner(plan_for(...))``."""
    return runner(plan_for(*args, **kwargs))


def _order_after_producers(strm: int, p: Plan, *ops: Operand) -> None:
    """Make ``strm`` wait on the device for each operand's producer stream, if it has one that is
    neither ``strm`` nor a default stream ordered with it (in the operands' GPU's context)."""
    for x in ops:
        s = x.stream
        if s is not None and s != strm and not (s in SHARED_STREAMS and strm in SHARED_STREAMS):
            driver.wait_for(s, strm, p.kernel().ctx)


def _scale(C: Operand, g: Geometry | None, beta: float, strm: Any, p: Runner) -> None:
    """``C = beta * C`` (the K == 0 product); beta == 0 writes exact zeros."""
    g = g or Geometry.plain(*C.shape, 0)
    M, N = g.M, g.N
    c3 = g.arrays(C, C, C)[2]  # C as a strided batch: (batch, M, N), its pitch and batch stride
    grid = (cdiv(N, SCALE_BLOCK[0]), cdiv(M, SCALE_BLOCK[1]), c3.shape[0])
    check_grid(grid, "C = beta * C (K = 0)")
    scale_kernel(p.plan.device).launch(grid, (*SCALE_BLOCK, 1), strm, (c3,), (beta,))
