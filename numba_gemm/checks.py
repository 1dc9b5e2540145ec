"""The checks of a call, made before anything is launched or written: dtypes first (a, b and
out), then shapes, strides, layouts, batch broadcasting, GPUs, aliasing and scalars. Each raises
a ``TypeError`` or ``ValueError`` that says what was wrong and what is expected; each returns what
the call needs next (the operands' :class:`~numba_gemm.plan.geometry.Geometry`, the result shape,
the launches of a batched ``matmul``).

The 2-D C-contiguous call that nearly every caller makes is checked by the fast lane in
``api._plain_call`` without these functions; anything it does not take (errors included) comes
here.
"""

from __future__ import annotations

import inspect
import math
import numbers
import struct
import types
from typing import Any

import numpy as np
from numba import cuda

from .arrays import BF16, F32, Operand, byte_span, operand, overlaps, plain_overlap, row_major
from .device import SIMULATOR
from .kernels._epilogue import ACTIVATIONS, MAX_OPERANDS, OPERAND_SPECS, Epilogue
from .plan.geometry import Geometry

_F32 = struct.Struct("f")
F16 = np.dtype(np.float16)


#: The ``compute`` argument of ``numba_gemm.sgemm``: the arithmetic of the inner product, as
#: cuBLAS names its compute types (``cublasComputeType_t``) where it has one. "fp32" (the
#: default): IEEE FP32 on the FMA pipe. "tf32": inputs rounded to TF32 (10-bit mantissa), FP32
#: accumulate, on tensor cores (relative error ~1e-3). "3xtf32": each input split into two TF32
#: parts, three tensor-core products accumulated in FP32 (FP32-level accuracy; CUTLASS's
#: ``OpMultiplyAddFastF32``; cuBLAS has no such compute type). The TF32 modes need compute
#: capability 8.0+ and take 2-D row-major C-contiguous operands.
COMPUTE = {"fp32": "CUBLAS_COMPUTE_32F", "tf32": "CUBLAS_COMPUTE_32F_FAST_TF32", "3xtf32": None}


def check_compute(compute: Any) -> None:
    if compute is not None and compute not in COMPUTE:
        raise ValueError(f"compute must be one of {sorted(COMPUTE)} (or None), got {compute!r}")


def _check_float32(label: str, x: Operand, *, error: type[Exception] = TypeError) -> None:
    if x.dtype is not F32 and x.dtype != F32:
        hint = ""
        if (x.dtype == F16 or x.dtype is BF16) and label != "out":
            hint = (
                f": for {x.dtype} operands call numba_gemm.hgemm (16-bit tensor cores, FP32 "
                "accumulation)"
            )
        raise error(f"{label} must be float32, got dtype {x.dtype}{hint}")


def check_dtypes(A: Operand, B: Operand, C: Operand | None) -> None:
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


def matrix(label: str, x: Operand) -> tuple[int, int, int, bool, int, int]:
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
SCALARS: dict = {1.0: 1.0}


def out_apart(C: Operand, A: Operand, B: Operand) -> None:
    """Raise ``ValueError`` if the bytes of ``C`` (out) overlap those of ``A`` or ``B``."""
    for label, X in (("a", A), ("b", B)):
        if overlaps(C, X):
            raise ValueError(f"out overlaps {label}: the output must not alias an input")


def check_scalar(label: str, v: Any) -> float:
    """``v`` rounded to float32 (returned as a Python float, what the kernel will use)."""
    x = SCALARS.get(v) if type(v) is float or type(v) is int else None
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
    if len(SCALARS) < 64 and (type(v) is float or type(v) is int) and v != 0:
        SCALARS[v] = x
    return x


def validate(
    a: Any, b: Any, out: Any
) -> tuple[Operand, Operand, Operand | None, Geometry | None, tuple]:
    """``(A, B, C or None, geometry, result shape)`` of ``sgemm(a, b, out=out)``; geometry None:
    the common case, 2-D C-contiguous operands (``Geometry.plain``)."""
    return validate_operands(operand(a), operand(b), None if out is None else operand(out))


def validate_operands(
    A: Operand, B: Operand, C: Operand | None
) -> tuple[Operand, Operand, Operand | None, Geometry | None, tuple]:
    """:func:`validate` of operands already read."""
    if A.dtype is not F32 or B.dtype is not F32 or (C is not None and C.dtype is not F32):
        check_dtypes(A, B, C)
    sa, sb = A.shape, B.shape
    # the common case in one test per operand: 2-D, C-contiguous
    if len(sa) == 2 and row_major(sa, A.strides) and len(sb) == 2 and row_major(sb, B.strides):
        M, K = sa
        N = sb[1]
        if K != sb[0]:
            inner_mismatch(sa, sb)
        if B.device != A.device:
            raise ValueError(f"a is on GPU {A.device} and b on GPU {B.device}: put them on one GPU")
        if C is None:
            return A, B, None, None, (M, N)
        sc = C.shape
        if len(sc) == 2 and sc == (M, N) and row_major(sc, C.strides):
            if C.device != A.device:
                raise ValueError(
                    f"out is on GPU {C.device} and a, b on GPU {A.device}: use one GPU"
                )
            label = plain_overlap(A.ptr, B.ptr, C.ptr, M, N, K)
            if label:
                raise ValueError(f"out overlaps {label}: the output must not alias an input")
            return A, B, C, None, (M, N)
    return validate_general(A, B, C)


def inner_mismatch(sa: tuple, sb: tuple) -> None:
    raise ValueError(
        f"inner dimensions differ: a has shape {tuple(sa)} and b has shape {tuple(sb)}; need a "
        "(M, K) and b (K, N), or batches (batch, M, K) and (batch, K, N)"
    )


def validate_general(
    A: Operand, B: Operand, C: Operand | None
) -> tuple[Operand, Operand, Operand | None, Geometry, tuple]:
    """Any layout, pitch and batch (see ``sgemm``), of operands whose dtypes were checked
    (:func:`check_dtypes`)."""
    ba, M, K, ta, lda, sa = matrix("a", A)
    bb, kb, N, tb, ldb, sb = matrix("b", B)
    if K != kb:
        inner_mismatch(A.shape, B.shape)
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
    _, _, _, tc, ldc, stc = matrix("out", C)
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
    out_apart(C, A, B)
    return A, B, C, Geometry(batch, M, N, K, layout, lda, ldb, ldc, sa, sb, stc), shape


def check_matmul_out(
    A: Operand, B: Operand, C: Operand, batch: tuple, cstr: tuple, M: int, N: int
) -> None:
    """A caller's ``out`` of a ``matmul`` of several launches, as a whole (each launch's view
    is checked by ``validate_general``): no two products may share its memory, and it may share
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
    out_apart(C, A, B)


#: hgemm's output dtypes (the ``out_dtype`` argument), by name: FP32, or the operands' own
#: 16-bit type.
HGEMM_OUT = {"float32": F32, "float16": F16, "bfloat16": BF16}


def _stored_transposed(X: Operand) -> bool:
    """Whether a non-empty 2-D 16-bit operand is the transpose of a C-contiguous array (and
    not C-contiguous itself: a dimension of 1 can make both stride patterns hold)."""
    if len(X.shape) != 2 or 0 in X.shape:
        return False
    rows, cols = X.shape
    st = tuple(X.strides)
    return st == (2, 2 * rows) and st != (2 * cols, 2)


def check_half_dtypes(A: Operand, B: Operand, C: Operand | None) -> None:
    """``hgemm``'s dtype rules, checked before anything else: ``a`` float16 or bfloat16, ``b``
    of ``a``'s type, ``out`` float32 or of that type.

    Raises:
        TypeError: as :func:`numba_gemm.hgemm` says.
    """
    half = A.dtype if A.dtype is BF16 else F16  # the operands' type, as a decides
    for label, X in (("a", A), ("b", B)):
        if not X.dtype == half:
            same = f"a is {half}: both operands of one type; " if label == "b" else ""
            raise TypeError(
                f"hgemm: {label} must be "
                + ("float16 or bfloat16" if label == "a" else f"{half}")
                + f", got dtype {X.dtype} ({same}float32 operands: numba_gemm.sgemm, with "
                "compute='tf32' for tensor cores)"
            )
    if C is not None and not (C.dtype == F32 or C.dtype == half):
        raise TypeError(
            f"hgemm: out must be float32 or {half}, got dtype {C.dtype} (a 16-bit out is of "
            "the operands' type)"
        )


def half_batches(A: Operand, B: Operand, C: Operand | None) -> tuple[int, int, int]:
    """``(batch, M, N)`` of a batched ``hgemm``: ``a (batch, M, K)`` and ``b (batch, K, N)``, either
    2-D (or a batch of one) to share one matrix with every product, ``out (batch, M, N)``.
    Each matrix is then checked as a 2-D call (:func:`batch_matrix`, :func:`check_hgemm`).

    Raises:
        TypeError: as :func:`check_half_dtypes`.
        ValueError: an operand neither 2-D nor 3-D; batch sizes that differ (other than 1);
            ``out`` not 3-D of that batch; ``out`` sharing memory with ``a`` or ``b``.
    """
    check_half_dtypes(A, B, C)
    for label, X in (("a", A), ("b", B)):
        if len(X.shape) not in (2, 3):
            raise ValueError(
                f"hgemm: {label} must be 2-D or 3-D (a batch), got shape {tuple(X.shape)}"
            )
    ba, bb = (X.shape[0] if len(X.shape) == 3 else 1 for X in (A, B))
    batch = max(ba, bb)
    if ba not in (1, batch) or bb not in (1, batch):
        raise ValueError(
            f"hgemm: batch sizes differ: a has {ba} matrices and b has {bb}; they must be "
            "equal, or one of them 1 (or 2-D) to be shared"
        )
    M, N = A.shape[-2], B.shape[-1]
    if C is not None:
        if tuple(C.shape[:1]) != (batch,) or len(C.shape) != 3:
            raise ValueError(
                f"hgemm: out must be ({batch}, {M}, {N}) for a batch of {batch}, got shape "
                f"{tuple(C.shape)}"
            )
        if batch > 1 and M * N and C.strides[0] < M * N * C.dtype.itemsize:
            raise ValueError(
                f"hgemm: out's matrices overlap (batch stride {C.strides[0]} bytes < one "
                f"matrix's {M * N * C.dtype.itemsize}): each product needs its own"
            )
        out_apart(C, A, B)
    return batch, M, N


def batch_matrix(X: Operand, i: int) -> Operand:
    """Matrix ``i`` of a 3-D operand as a 2-D one (a 2-D operand, or a batch of one, for any
    ``i``: the shared matrix)."""
    if len(X.shape) == 2:
        return X
    j = i if X.shape[0] > 1 else 0
    return Operand(
        X.obj, X.ptr + j * X.strides[0], X.shape[1:], X.strides[1:], X.dtype, X.device, X.stream
    )


def check_hgemm(
    A: Operand, B: Operand, C: Operand | None, out_dtype: str | None
) -> tuple[int, int, int, str, str]:
    """``(M, N, K, output dtype name, layout)`` of ``hgemm(a, b, out=out, out_dtype=out_dtype)``:
    dtypes first, then layout (``"NN"``; ``"?T"`` for ``b`` the transpose of a C-contiguous
    ``(N, K)``, ``"T?"`` for ``a`` that of a ``(K, M)``), shapes, GPUs and aliasing. The operands
    are float16 or bfloat16 (:data:`arrays.BF16`), both alike. Rows of any length and alignment
    pass: the plan copies what its kernels cannot read in place (``choose.half_staged``).

    Raises:
        TypeError, ValueError: as :func:`numba_gemm.hgemm` says.
    """
    check_half_dtypes(A, B, C)
    half = A.dtype  # the operands' type
    # an operand stored transposed: the transpose of a C-contiguous array (b: W.T of W (N, K),
    # as x @ W.T computes, torch.nn.Linear; a: the plan copies it row-major first)
    a_t, b_t = _stored_transposed(A), _stored_transposed(B)
    for label, X, t in (("a", A, a_t), ("b", B, b_t)):
        if t:
            continue
        if len(X.shape) != 2 or (0 not in X.shape and tuple(X.strides) != (2 * X.shape[1], 2)):
            raise ValueError(
                f"hgemm: {label} must be 2-D, C-contiguous or the transpose of a C-contiguous "
                f"array; got shape {tuple(X.shape)} and strides {tuple(X.strides)} bytes"
            )
    (M, K), (kb, N) = A.shape, B.shape
    if K != kb:
        inner_mismatch(A.shape, B.shape)
    if B.device != A.device:
        raise ValueError(f"a is on GPU {A.device} and b on GPU {B.device}: put them on one GPU")
    if out_dtype is not None and out_dtype not in ("float32", half.name):
        raise ValueError(
            f"out_dtype must be 'float32' or {half.name!r} (the operands' type), or None; got "
            f"{out_dtype!r}"
        )
    if C is not None:
        dt = "float32" if C.dtype == F32 else half.name
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
        label = plain_overlap(A.ptr, B.ptr, C.ptr, M, N, K, 2, C.dtype.itemsize)
        if label:
            raise ValueError(f"out overlaps {label}: the output must not alias an input")
    else:
        dt = out_dtype or "float32"
    if K == 0:
        raise ValueError("hgemm: K == 0 (an empty inner dimension); the 16-bit kernels need K >= 1")
    return M, N, K, dt, ("T" if a_t else "N") + ("T" if b_t else "N")


def matmul_launches(
    A: Operand, B: Operand, C: Operand | None, allocate: Any, on_shape: Any = None
) -> tuple[Any, list[tuple[Operand, Operand, Operand, Geometry, tuple]]]:
    """``(new output or None, launches)`` of ``matmul(a, b, out=out)`` for operands that are not
    both 2-D (dtypes already checked): NumPy's rules for 1-D operands and broadcast batch
    dimensions, the batch dimensions collapsed into one stride per operand where they allow it,
    and one :func:`validate_general` result per launch, every one checked before the caller
    launches the first. ``allocate(shape) -> (array, Operand)`` makes the output when ``C`` is
    None (after the shapes are checked, and after ``on_shape(M, N)``, the caller's own checks of
    the matrices' shape).

    Raises:
        ValueError: a 0-D operand; inner dimensions that differ; batch dimensions that do not
            broadcast; ``out`` of the wrong shape, with matrices that share memory, or
            overlapping ``a`` or ``b``; anything :func:`validate_general` rejects.
    """
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
    if on_shape is not None:
        on_shape(M, N)
    given = C is not None
    out = None
    if not given:
        out, C = allocate(final)
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
        check_matmul_out(A, B, C, batch, cstr, M, N)
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
        launches.append(validate_general(*views))
    return out, launches


# --- fused epilogues ------------------------------------------------------------------------------

#: Plain Python functions given as an epilogue, compiled as device functions once each (kept
#: for the process, as Numba keeps their kernels).
_DEVICE_FNS: dict = {}


def _epilogue_operand(who: str, label: str, x: Any, device: int, dtypes: tuple) -> Operand:
    """A fused epilogue's array operand, read and checked: on the GPU of the product, one of
    ``dtypes``, 1-D or 2-D, C-contiguous."""
    X = operand(x)
    if not any(X.dtype == d for d in dtypes):
        names = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{who}: {label} must be {names}, got dtype {X.dtype}")
    if X.ndim not in (1, 2) or not X.is_c_contiguous():
        raise ValueError(
            f"{who}: {label} must be a 1-D or 2-D C-contiguous array, got shape "
            f"{tuple(X.shape)} and strides {tuple(X.strides)} bytes"
        )
    if X.device != device:
        raise ValueError(f"{who}: {label} is on GPU {X.device}, the operands on GPU {device}")
    return X


def _device_function(who: str, fn: Any, nargs: int) -> Any:
    """``fn`` as a CUDA device function taking ``(value, row, col)`` and ``nargs`` operands: a
    ``@cuda.jit(device=True)`` function as it is, a plain Python function compiled as one (once
    per function)."""
    py = getattr(fn, "py_func", None)
    if py is not None:
        device = (getattr(fn, "targetoptions", None) or {}).get("device")
        if device is None:
            device = getattr(fn, "_device", False)  # the simulator's dispatcher
        if not device:
            raise TypeError(
                f"{who}: epilogue must be a device function (@cuda.jit(device=True)) or a plain "
                f"Python function, got the kernel {getattr(py, '__name__', fn)!r}"
            )
    elif isinstance(fn, types.FunctionType):
        py = fn
        got = _DEVICE_FNS.get(fn)
        if got is None:
            got = _DEVICE_FNS[fn] = cuda.jit(device=True)(fn)
        fn = got
    else:
        raise TypeError(
            f"{who}: epilogue must be a device function (@cuda.jit(device=True)) or a plain "
            f"Python function of (value, row, col, *epilogue_args), got {type(fn).__name__}"
        )
    try:
        inspect.signature(py).bind(0.0, 0, 0, *range(nargs))
    except TypeError:
        raise TypeError(
            f"{who}: epilogue {py.__name__}{inspect.signature(py)} must take (value, row, col)"
            f" and the {nargs} epilogue_args"
        ) from None
    return fn


def _probe(who: str, fn: Any, args: Any) -> None:
    """Simulator only: call ``fn`` once on the host at ``(1.0, 0, 0, *args)``, so that a
    function that fails fails before the kernel writes anything (on a GPU it fails to compile,
    before the launch)."""
    py = fn.py_func
    try:
        float(py(np.float32(1.0), 0, 0, *args))
    except Exception as e:
        raise TypeError(
            f"{who}: the epilogue function {py.__name__} fails on (1.0, row 0, col 0, "
            f"*epilogue_args): {type(e).__name__}: {e}"
        ) from e


def check_epilogue(
    who: str,
    bias: Any,
    activation: Any,
    epilogue: Any,
    epilogue_args: Any,
    M: int,
    N: int,
    device: int,
    bias_dtypes: tuple = (F32,),
) -> tuple[Any, tuple]:
    """``(Epilogue or None, its operands)`` of a call's fused-epilogue arguments
    (``kernels._epilogue``) for a ``(M, N)`` result on GPU ``device``: ``bias`` of shape ``(N,)``
    or ``(1, N)`` is added per column, ``(M, 1)`` per row (NumPy's broadcasting of ``A @ B +
    bias``; a 1-D bias is a row of C's width even when ``M == N``); ``activation`` one of
    ``ACTIVATIONS``; ``epilogue`` a device function of ``(value, row, col, *epilogue_args)``.

    Raises:
        TypeError: a bias or operand of another dtype or not a device array; an ``epilogue``
            that is not a function, is a kernel, or does not take its arguments; more than
            ``MAX_OPERANDS`` operands.
        ValueError: a bias of another shape; an unknown activation; an operand not 1-D or 2-D
            C-contiguous, or on another GPU; ``epilogue_args`` without an ``epilogue``.
    """
    if epilogue_args is None:
        epilogue_args = ()
    if not isinstance(epilogue_args, (tuple, list)):
        raise TypeError(
            f"{who}: epilogue_args must be a tuple of device arrays, got "
            f"{type(epilogue_args).__name__}"
        )
    if bias is None and activation is None and epilogue is None:
        if epilogue_args:
            raise ValueError(f"{who}: epilogue_args given without an epilogue function")
        return None, ()
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(
            f"{who}: activation must be one of {ACTIVATIONS} or None, got {activation!r}"
        )
    ops: list[Operand] = []
    kind = None
    spec = ""
    if bias is not None:
        Bv = _epilogue_operand(who, "bias", bias, device, bias_dtypes)
        shape = tuple(Bv.shape)
        if shape in ((N,), (1, N)):
            kind, n = "column", N
        elif shape == (M, 1):
            kind, n = "row", M
        else:
            raise ValueError(
                f"{who}: bias must have shape ({N},) or (1, {N}) (one per column of the "
                f"({M}, {N}) result) or ({M}, 1) (one per row), got {shape}; a full matrix "
                "goes in out with beta=1"
            )
        item = Bv.dtype.itemsize
        ops.append(Operand(Bv.obj, Bv.ptr, (n,), (item,), Bv.dtype, Bv.device, Bv.stream))
        spec += OPERAND_SPECS[(str(Bv.dtype), 1)]
    if epilogue is not None:
        if len(epilogue_args) > MAX_OPERANDS:
            raise TypeError(
                f"{who}: an epilogue takes at most {MAX_OPERANDS} epilogue_args, got "
                f"{len(epilogue_args)}"
            )
        epilogue = _device_function(who, epilogue, len(epilogue_args))
        for i, x in enumerate(epilogue_args):
            X = _epilogue_operand(who, f"epilogue_args[{i}]", x, device, (F32, F16))
            ops.append(X)
            spec += OPERAND_SPECS[(str(X.dtype), X.ndim)]
        if SIMULATOR and M and N:
            _probe(who, epilogue, epilogue_args)
    elif epilogue_args:
        raise ValueError(f"{who}: epilogue_args given without an epilogue function")
    return Epilogue(kind, activation, epilogue, spec), tuple(ops)


# --- grouped products ----------------------------------------------------------------------------

I32 = np.dtype(np.int32)


def check_grouped(A: Operand, B: Operand, O: Operand, C: Operand | None) -> str:
    """The layout (``"NN"``: B's matrices row-major; ``"NT"``: each stored transposed, ``(N,
    K)``) of ``grouped_mm(a, b, offsets, out=out)``: dtypes first, then shapes, strides, GPUs and
    aliasing.

    Raises:
        TypeError: ``a``, ``b`` or ``out`` not float32; ``offsets`` not int32.
        ValueError: ``a`` not 2-D C-contiguous ``(T, K)``; ``b`` not 3-D ``(E, K, N)`` with
            row-major or column-major matrices (unit stride along N or K) and a non-negative
            batch stride; ``offsets`` not 1-D contiguous of ``E`` entries; ``out`` not a
            C-contiguous ``(T, N)``; inner dimensions that differ; operands on different GPUs;
            ``out`` overlapping ``a``, ``b`` or ``offsets``.
    """
    for label, X in (("a", A), ("b", B)) + ((("out", C),) if C is not None else ()):
        _check_float32(label, X)
    if not O.dtype == I32:
        raise TypeError(
            f"grouped_mm: offsets must be int32 (each group's end row), got dtype {O.dtype}"
        )
    if len(A.shape) != 2 or not A.is_c_contiguous():
        raise ValueError(
            f"grouped_mm: a must be a 2-D C-contiguous (tokens, K) array, got shape "
            f"{tuple(A.shape)} and strides {tuple(A.strides)} bytes"
        )
    T, K = A.shape
    if len(B.shape) != 3:
        raise ValueError(f"grouped_mm: b must be 3-D (groups, K, N), got shape {tuple(B.shape)}")
    E, kb, N = B.shape
    sb = tuple(B.strides)
    if kb != K:
        raise ValueError(
            f"grouped_mm: a has K = {K} columns (shape {tuple(A.shape)}), b's matrices {kb} "
            f"rows (shape {tuple(B.shape)})"
        )
    if sb[2] == 4 and (sb[1] == 4 * N or K <= 1):
        layout = "NN"
    elif sb[1] == 4 and (sb[2] == 4 * K or N <= 1):
        layout = "NT"
    else:
        raise ValueError(
            f"grouped_mm: b's matrices must be row-major (K, N) or the transpose of row-major "
            f"(N, K) matrices, got shape {tuple(B.shape)} and strides {sb} bytes"
        )
    if sb[0] < 0:
        raise ValueError(f"grouped_mm: b's group stride must be >= 0, got {sb[0]} bytes")
    if len(O.shape) != 1 or O.shape[0] != E or (E > 1 and O.strides[0] != 4):
        raise ValueError(
            f"grouped_mm: offsets must be 1-D contiguous with one end row per group ({E} "
            f"groups), got shape {tuple(O.shape)}"
        )
    for label, X in (("b", B), ("offsets", O)) + ((("out", C),) if C is not None else ()):
        if X.device != A.device:
            raise ValueError(
                f"grouped_mm: {label} is on GPU {X.device}, a on GPU {A.device}: one GPU"
            )
    if C is not None:
        if tuple(C.shape) != (T, N) or not C.is_c_contiguous():
            raise ValueError(
                f"grouped_mm: out must be a C-contiguous ({T}, {N}) array, got shape "
                f"{tuple(C.shape)} and strides {tuple(C.strides)} bytes"
            )
        for label, X in (("a", A), ("b", B), ("offsets", O)):
            if overlaps(C, X):
                raise ValueError(f"grouped_mm: out overlaps {label}")
    return layout


def check_grouped_pairs(
    As: list[Operand], Bs: list[Operand], Cs: list[Operand] | None
) -> tuple[str, int, int]:
    """``(layout, K, N)`` of ``grouped_mm``'s list form (``a`` and ``b`` lists of matrices, one
    product each): dtypes first, then shapes, strides, GPUs and aliasing.

    Raises:
        TypeError: a matrix not float32.
        ValueError: ``a`` and ``b`` (and ``out``) of different lengths, or empty; an ``a_i``
            not a 2-D C-contiguous ``(M_i, K)``; a ``b_i`` not ``(K, N)`` row-major or the
            transpose of a row-major ``(N, K)``, all alike; K or N that differ between products;
            an ``out_i`` not a C-contiguous ``(M_i, N)``; operands on different GPUs; an
            ``out_i`` overlapping an input or another ``out_j``.
    """
    E = len(As)
    if E == 0 or len(Bs) != E or (Cs is not None and len(Cs) != E):
        raise ValueError(
            "grouped_mm: the list form takes a and b (and out) as lists of one matrix per "
            f"product, of one non-zero length; got {E} a, {len(Bs)} b"
            + ("" if Cs is None else f", {len(Cs)} out")
        )
    for label, xs in (("a", As), ("b", Bs)) + ((("out", Cs),) if Cs is not None else ()):
        for i, X in enumerate(xs):
            _check_float32(f"{label}[{i}]", X)
    K = As[0].shape[-1] if len(As[0].shape) == 2 else -1
    for i, X in enumerate(As):
        if len(X.shape) != 2 or X.shape[1] != K or (X.shape[0] and not X.is_c_contiguous()):
            raise ValueError(
                f"grouped_mm: a[{i}] must be a 2-D C-contiguous (M_{i}, K) array with the K = "
                f"{K} columns of a[0], got shape {tuple(X.shape)} and strides "
                f"{tuple(X.strides)} bytes"
            )
    layouts = set()
    N = Bs[0].shape[-1] if len(Bs[0].shape) == 2 else -1
    for i, X in enumerate(Bs):
        if len(X.shape) != 2 or tuple(X.shape) != (K, N):
            raise ValueError(
                f"grouped_mm: b[{i}] must be a 2-D (K, N) = ({K}, {N}) matrix (K from a, N from "
                f"b[0]), got shape {tuple(X.shape)}"
            )
        s = tuple(X.strides)
        if s[1] == 4 and (s[0] == 4 * N or K <= 1):
            layouts.add("NN")
        elif s[0] == 4 and (s[1] == 4 * K or N <= 1):
            layouts.add("NT")
        else:
            raise ValueError(
                f"grouped_mm: b[{i}] must be row-major (K, N) or the transpose of a row-major "
                f"(N, K), got strides {s} bytes"
            )
    if len(layouts) > 1:
        raise ValueError(
            "grouped_mm: the b matrices must be stored alike: all row-major (K, N) or all the "
            "transpose of row-major (N, K) matrices"
        )
    dev = As[0].device
    everything = [("a", As), ("b", Bs)] + ([("out", Cs)] if Cs is not None else [])
    for label, xs in everything:
        for i, X in enumerate(xs):
            if X.device != dev:
                raise ValueError(
                    f"grouped_mm: {label}[{i}] is on GPU {X.device}, a[0] on GPU {dev}: one GPU"
                )
    if Cs is not None:
        for i, (X, A) in enumerate(zip(Cs, As, strict=True)):
            if tuple(X.shape) != (A.shape[0], N) or (X.nbytes and not X.is_c_contiguous()):
                raise ValueError(
                    f"grouped_mm: out[{i}] must be a C-contiguous ({A.shape[0]}, {N}) array, got "
                    f"shape {tuple(X.shape)} and strides {tuple(X.strides)} bytes"
                )
        _outputs_apart(everything)
    return layouts.pop(), K, N


def _outputs_apart(named: list[tuple[str, list[Operand]]]) -> None:
    """Raise ``ValueError`` if an ``out`` operand's bytes overlap any other operand's (inputs may
    share memory): one sweep over the byte spans sorted by start, O(n log n) for n operands."""
    spans = sorted(
        (*byte_span(X), label, i)
        for label, xs in named
        for i, X in enumerate(xs)
        if byte_span(X)[0] < byte_span(X)[1]
    )
    far_any = far_out = None  # the span reaching furthest so far, of any operand / of an out
    for lo, hi, label, i in spans:
        for far, ok in ((far_out, True), (far_any, label == "out")):
            if far is not None and ok and lo < far[0]:
                raise ValueError(f"grouped_mm: {far[1]}[{far[2]}] overlaps {label}[{i}]")
        if far_any is None or hi > far_any[0]:
            far_any = (hi, label, i)
        if label == "out" and (far_out is None or hi > far_out[0]):
            far_out = (hi, label, i)
