"""Operands: what a call needs to know of a device array, read in a few hundred nanoseconds.

``operand(x)`` turns a Numba device array, a CuPy array, a PyTorch CUDA tensor or any object with
``__cuda_array_interface__`` (CAI) into an :class:`Operand`: data pointer, shape, strides in bytes,
dtype, GPU ordinal and the stream the producer last used (CAI v3), without building a Numba
``DeviceNDArray`` (tens of microseconds). One reader per type, chosen once per type and cached:

- Numba ``DeviceNDArray``: its attributes (``gpu_data.device_pointer``, ``shape``, ``strides``);
- CuPy ``ndarray``: ``data.ptr``, ``shape``, ``strides``, ``data.device_id``; its producer stream is
  CuPy's current stream, as in CuPy's own CAI export;
- PyTorch ``Tensor``: ``data_ptr()``, ``shape``, ``stride()`` (elements), ``get_device()``;
- anything else: its CAI dict (v2/v3), the device from the driver (``cuPointerGetAttribute``).

For the call path's fast lanes, each of the first three (and the simulator's arrays) also has a
*plain* reader (:data:`PLAIN`): ``(ptr, rows, cols)`` of a 2-D float32 C-contiguous operand with
nothing to order after, None for anything else; and one for the transpose of such an operand
(:data:`PLAIN_T`: ``x @ w.T``). PyTorch tensors and the simulator's arrays have a 16-bit one too
(:data:`HALF`: ``hgemm``'s lane).

The alignment rule of the vector kernels, :func:`rows_aligned`, lives here too: the plan and the
launch both use it. So do the aliasing checks (:func:`overlaps`, :func:`plain_overlap`) and the
allocation of a new output by the operands' own library (:func:`new_output`).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numba import cuda

from .device import SIMULATOR
from .launch import driver as _driver

F32 = np.dtype(np.float32)


class BFloat16:
    """The dtype of bfloat16 operands as the call path sees them (:data:`BF16`, one object).

    NumPy has no bfloat16 (``ml_dtypes`` registers one, ``np.dtype(ml_dtypes.bfloat16)``, whose
    type string is ``"<V2"``): every reader turns a bfloat16 operand (a PyTorch
    ``torch.bfloat16`` tensor, a Numba device array of ``ml_dtypes.bfloat16``, a CAI object
    with type string ``"<V2"``, the convention of ``ml_dtypes`` and JAX, which PyTorch's
    pull request #143042 adopted) into this one object, so checks compare ``dtype is BF16``.
    Kernels take such an operand as ``uint16`` (its bits: launch spec ``U``)."""

    name = "bfloat16"
    itemsize = 2
    str = "<V2"

    def __repr__(self) -> str:
        return "bfloat16"


#: The one bfloat16 dtype object (:class:`BFloat16`).
BF16 = BFloat16()
#: The operands' element types by name, as the call path's dtype objects.
DTYPES = {"float32": F32, "float16": np.dtype(np.float16), "bfloat16": BF16}


def _np_or_bf16(dtype: Any) -> Any:
    """``dtype`` as a NumPy dtype, or :data:`BF16` for a bfloat16 one (``ml_dtypes``' ``V2``)."""
    if dtype is F32:
        return F32
    dtype = np.dtype(dtype)
    return BF16 if dtype.name == "bfloat16" or dtype.str in ("<V2", "|V2") else dtype


class Operand:
    """A 2-D (or not: see ``ndim``) device array as the call path sees it.

    Attributes:
        obj: the object the caller passed.
        ptr: device address of element ``[0, 0]`` (a host address on the simulator).
        shape, strides: tuples; strides in bytes.
        dtype: a NumPy dtype, or the library's own dtype object when it has no NumPy equivalent.
        device: GPU ordinal (0 on the simulator).
        stream: the producer's stream handle from CAI v3 (None: nothing to order against).
    """

    __slots__ = ("obj", "ptr", "shape", "strides", "dtype", "device", "stream")

    def __init__(self, obj, ptr, shape, strides, dtype, device, stream=None):
        self.obj = obj
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.stream = stream

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_c_contiguous(self) -> bool:
        """Row-major with no gaps (dimensions of extent 1 may have any stride, as in NumPy)."""
        expect = getattr(self.dtype, "itemsize", 4)
        for n, s in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * getattr(self.dtype, "itemsize", 4)


def rows_aligned(ptr: int, cols: int) -> bool:
    """Whether a row-major float32 array at ``ptr`` with ``cols`` columns allows 128-bit row
    accesses: its base is a multiple of 16 bytes and its row pitch a multiple of 4 floats, so
    ``x[r, c]`` with ``c % 4 == 0`` is 16-byte aligned. The one alignment rule of the package."""
    return ptr % 16 == 0 and cols % 4 == 0


def pointers_aligned(a_ptr: int, b_ptr: int, c_ptr: int) -> bool:
    """Whether the base pointers of A, B and C are all 16-byte aligned: the call path's key for
    a 2-D C-contiguous product (the shape in the key says the rest of :func:`rows_aligned`; the
    plan applies it, ``Geometry.alignment``, per stage)."""
    return not ((a_ptr | b_ptr | c_ptr) & 15)


# --- readers, one per type ---------------------------------------------------------------------


def _from_numba(x: Any) -> Operand:
    gd = x.gpu_data
    ptr = int(gd.device_pointer) if gd is not None else 0
    stream = x.stream
    return Operand(
        x,
        ptr,
        x.shape,
        x.strides,
        _np_or_bf16(x.dtype),
        gd.context.device.id,
        int(stream) if stream else None,
    )


def _from_simulator(x: Any) -> Operand:
    ptr = int(x.__array_interface__["data"][0])
    return Operand(x, ptr, tuple(x.shape), tuple(x.strides), _np_or_bf16(x.dtype), 0)


def _from_cupy(x: Any) -> Operand:
    mem = x.data
    cp = sys.modules["cupy"]
    return Operand(
        x,
        mem.ptr,
        x.shape,
        x.strides,
        _np_or_bf16(x.dtype),
        mem.device_id,
        cp.cuda.get_current_stream().ptr or None,
    )


_TORCH_F32: Any = None


def _from_torch(x: Any) -> Operand:
    if not x.is_cuda:
        raise TypeError(
            f"expected a device array, got a PyTorch tensor on {x.device}: move it to the GPU "
            "first (tensor.cuda())"
        )
    dt = x.dtype
    st = x.stride()  # in elements
    if dt is _TORCH_F32:
        dtype = F32
        strides = (st[0] * 4, st[1] * 4) if len(st) == 2 else tuple(v * 4 for v in st)
    else:
        dtype = _torch_dtype(dt)
        strides = tuple(v * x.element_size() for v in st)
    return Operand(x, x.data_ptr(), x.shape, strides, dtype, x.get_device() if _MULTI_GPU else 0)


def _torch_dtype(dt: Any) -> Any:
    name = str(dt).removeprefix("torch.")
    if name == "bfloat16":
        return BF16
    try:
        return np.dtype(name)
    except TypeError:
        return dt  # float8 etc.: no NumPy dtype; reported by name


def _from_cai(x: Any) -> Operand:
    d = x.__cuda_array_interface__
    if d.get("mask") is not None:
        raise ValueError("masked arrays (__cuda_array_interface__ 'mask') are not supported")
    dtype = _np_or_bf16(d["typestr"])
    shape = tuple(d["shape"])
    strides = d.get("strides")
    if strides is None:  # C-contiguous
        acc, out = dtype.itemsize, []
        for n in reversed(shape):
            out.append(acc)
            acc *= n
        strides = tuple(reversed(out))
    ptr = int(d["data"][0])
    stream = d.get("stream")
    if SIMULATOR:
        device = 0
    else:
        device = _driver.pointer_device(ptr) if ptr else 0
    return Operand(
        x, ptr, shape, tuple(strides), dtype, device, stream if stream not in (None, 0) else None
    )


# --- plain readers: the call path's fast lane ---------------------------------------------------
#
# A *plain* operand is 2-D, float32, C-contiguous, on the one visible GPU, with no producer stream
# to order after: what nearly every call passes. Its plain reader returns ``(ptr, rows, cols)``
# and None for anything else; ``api.sgemm`` then takes the general path (``operand`` and
# validation), which also raises the errors. Readers for PyTorch, Numba, CuPy and the simulator.


def row_major(shape: tuple, st: tuple) -> bool:
    """Whether a 2-D float32 array of ``shape`` and byte strides ``st`` is row-major with no
    gaps: the stride of a dimension of extent 1 does not count (as in NumPy), so ``w.T`` of a
    ``(N, 1)`` weight is a plain ``(1, N)`` matrix to the fast lane and to ``checks.validate``
    alike (the lane finds the plans the general path keys). The lane's readers test the common
    strides inline first: a call costs ~25 ns an operand on the host."""
    return (st[1] == 4 or shape[1] == 1) and (st[0] == 4 * shape[1] or shape[0] == 1)


def _plain_torch(x: Any) -> tuple[int, int, int] | None:
    if x.is_cuda and x.dtype is _TORCH_F32:
        st = x.stride()
        if len(st) == 2:
            rows, cols = x.shape
            if (st[1] == 1 or cols == 1) and (st[0] == cols or rows == 1):
                return x.data_ptr(), rows, cols
    return None


def _plain_numba(x: Any) -> tuple[int, int, int] | None:
    shape, st = x.shape, x.strides
    if (
        len(shape) == 2
        and (st[1] == 4 and st[0] == 4 * shape[1] or row_major(shape, st))
        and x.dtype == F32
    ):
        gd = x.gpu_data
        if gd is not None and not x.stream:
            return int(gd.device_pointer), shape[0], shape[1]
    return None


def _plain_cupy(x: Any) -> tuple[int, int, int] | None:
    shape, st = x.shape, x.strides
    if (
        len(shape) == 2
        and (st[1] == 4 and st[0] == 4 * shape[1] or row_major(shape, st))
        and x.dtype == F32
        and not sys.modules["cupy"].cuda.get_current_stream().ptr
    ):
        return x.data.ptr, shape[0], shape[1]
    return None


# The simulator's readers test shape, strides and dtype before reading the array interface (the
# costly part): ``matmul`` asks them first of every operand, batches included.


def _plain_simulator(x: Any) -> tuple[int, int, int] | None:
    shape, st = x.shape, x.strides
    if (
        len(shape) == 2
        and (st[1] == 4 and st[0] == 4 * shape[1] or row_major(shape, st))
        and x.dtype == F32
    ):
        return int(x.__array_interface__["data"][0]), shape[0], shape[1]
    return None


# Transposed plain operands: the transpose of a plain one (``w.T`` of a row-major ``(N, K)``
# weight, as ``x @ w.T`` passes it): 2-D float32 with strides ``(4, 4 * rows)``. Their readers
# return ``(ptr, rows, cols)`` of the view, None for anything else; the fast lane asks them only
# of an operand that is not plain.


def _plain_t_torch(x: Any) -> tuple[int, int, int] | None:
    if x.is_cuda and x.dtype is _TORCH_F32:
        st = x.stride()
        if len(st) == 2 and st[0] == 1:
            rows, cols = x.shape
            if st[1] == rows:
                return x.data_ptr(), rows, cols
    return None


def _plain_t_numba(x: Any) -> tuple[int, int, int] | None:
    shape, st = x.shape, x.strides
    if len(shape) == 2 and st[0] == 4 and st[1] == 4 * shape[0] and x.dtype == F32:
        gd = x.gpu_data
        if gd is not None and not x.stream:
            return int(gd.device_pointer), shape[0], shape[1]
    return None


def _plain_t_cupy(x: Any) -> tuple[int, int, int] | None:
    shape, st = x.shape, x.strides
    if (
        len(shape) == 2
        and st[0] == 4
        and st[1] == 4 * shape[0]
        and x.dtype == F32
        and not sys.modules["cupy"].cuda.get_current_stream().ptr
    ):
        return x.data.ptr, shape[0], shape[1]
    return None


def _plain_t_simulator(x: Any) -> tuple[int, int, int] | None:
    shape, st = x.shape, x.strides
    if len(shape) == 2 and st[0] == 4 and st[1] == 4 * shape[0] and x.dtype == F32:
        return int(x.__array_interface__["data"][0]), shape[0], shape[1]
    return None


# Plain vectors: 1-D, float32, contiguous, on the one visible GPU, nothing to order after (a
# fused epilogue's bias). Their readers return ``(ptr, length)``, None for anything else.


def _vector_torch(x: Any) -> tuple[int, int] | None:
    if x.is_cuda and x.dtype is _TORCH_F32:
        st = x.stride()
        if len(st) == 1 and st[0] == 1:
            return x.data_ptr(), x.shape[0]
    return None


def _vector_numba(x: Any) -> tuple[int, int] | None:
    if len(x.shape) == 1 and x.strides[0] == 4 and x.dtype == F32:
        gd = x.gpu_data
        if gd is not None and not x.stream:
            return int(gd.device_pointer), x.shape[0]
    return None


def _vector_cupy(x: Any) -> tuple[int, int] | None:
    if (
        len(x.shape) == 1
        and x.strides[0] == 4
        and x.dtype == F32
        and not sys.modules["cupy"].cuda.get_current_stream().ptr
    ):
        return x.data.ptr, x.shape[0]
    return None


def _vector_simulator(x: Any) -> tuple[int, int] | None:
    if len(x.shape) == 1 and x.strides[0] == 4 and x.dtype == F32:
        return int(x.__array_interface__["data"][0]), x.shape[0]
    return None


# 16-bit readers: ``hgemm``'s fast lane. ``(ptr, rows, cols, dtype name, transposed)`` of a 2-D
# float16 or bfloat16 operand that is C-contiguous (transposed False) or the transpose of a
# C-contiguous one (True), with nothing to order after; None for anything else.

#: torch's 16-bit dtypes -> their names (set with the PyTorch reader)
_TORCH_HALF: dict = {}


def _half_torch(x: Any) -> tuple[int, int, int, str, bool] | None:
    name = _TORCH_HALF.get(x.dtype)
    if name is not None and x.is_cuda:
        st = x.stride()
        if len(st) == 2:
            rows, cols = x.shape
            if st[1] == 1 and st[0] == cols:
                return x.data_ptr(), rows, cols, name, False
            if st[0] == 1 and st[1] == rows:
                return x.data_ptr(), rows, cols, name, True
    return None


def _half_simulator(x: Any) -> tuple[int, int, int, str, bool] | None:
    shape, st = x.shape, x.strides
    if len(shape) == 2 and x.dtype.itemsize == 2:
        name = np.dtype(x.dtype).name
        if name in ("float16", "bfloat16"):
            ptr = int(x.__array_interface__["data"][0])
            if st[1] == 2 and st[0] == 2 * shape[1]:
                return ptr, shape[0], shape[1], name, False
            if st[0] == 2 and st[1] == 2 * shape[0]:
                return ptr, shape[0], shape[1], name, True
    return None


#: type -> its 16-bit reader (PyTorch tensors and the simulator's arrays, once met; none with
#: several GPUs visible)
HALF: dict[type, Any] = {}
_HALF_OF = {_from_torch: _half_torch, _from_simulator: _half_simulator}

#: type -> its plain reader (types with one, once ``operand`` has met them; none with several
#: GPUs visible, where each operand's GPU must be read and checked)
PLAIN: dict[type, Any] = {}
#: type -> its transposed plain reader (every type of :data:`PLAIN`)
PLAIN_T: dict[type, Any] = {}
#: type -> its plain vector reader (every type of :data:`PLAIN`)
PLAIN_V: dict[type, Any] = {}
_PLAIN_OF = {
    _from_torch: (_plain_torch, _plain_t_torch, _vector_torch),
    _from_numba: (_plain_numba, _plain_t_numba, _vector_numba),
    _from_cupy: (_plain_cupy, _plain_t_cupy, _vector_cupy),
    _from_simulator: (_plain_simulator, _plain_t_simulator, _vector_simulator),
}

_READERS: dict[type, Any] = {}


_MULTI_GPU = True  # decided with the first reader: one visible GPU means every operand is on it


def _reader(tp: type, x: Any) -> Any:
    """The reader for objects of type ``tp`` (decided once per type)."""
    global _TORCH_F32, _MULTI_GPU
    if not SIMULATOR and not _READERS:
        try:
            _MULTI_GPU = _driver.device_count() > 1
        except (OSError, _driver.CudaDriverError):
            _MULTI_GPU = True
    torch = sys.modules.get("torch")
    if getattr(x, "__cuda_ndarray__", False):
        r = _from_simulator if SIMULATOR else _from_numba
    elif torch is not None and isinstance(x, torch.Tensor):
        _TORCH_F32 = torch.float32
        _TORCH_HALF.update({torch.float16: "float16", torch.bfloat16: "bfloat16"})
        r = _from_torch
    elif "cupy" in sys.modules and isinstance(x, sys.modules["cupy"].ndarray):
        r = _from_cupy
    elif not SIMULATOR and hasattr(x, "__cuda_array_interface__"):
        r = _from_cai
    else:
        return None
    _READERS[tp] = r
    if r in _PLAIN_OF and (SIMULATOR or not _MULTI_GPU):
        PLAIN_T[tp] = _PLAIN_OF[r][1]
        PLAIN_V[tp] = _PLAIN_OF[r][2]
        PLAIN[tp] = _PLAIN_OF[r][0]
        if r in _HALF_OF:
            HALF[tp] = _HALF_OF[r]
    return r


def operand(x: Any) -> Operand:
    """The :class:`Operand` view of a device array (zero-copy, nothing validated but the type).

    Raises:
        TypeError: ``x`` is not a device array: a host NumPy array (the message names
            ``numba.cuda.to_device``), a CPU tensor, or another object.
    """
    tp = type(x)
    r = _READERS.get(tp) or _reader(tp, x)
    if r is None:
        if isinstance(x, np.ndarray):
            raise TypeError(
                "expected a device array, got a host numpy.ndarray: copy it to the GPU first with "
                "numba.cuda.to_device(x) (or cupy.asarray(x))"
            )
        raise TypeError(
            f"expected a device array (a Numba device array or an object with "
            f"__cuda_array_interface__, e.g. a CuPy array or PyTorch CUDA tensor), "
            f"got {tp.__name__}"
        )
    return r(x)


def byte_span(arr: Any) -> tuple[int, int]:
    """``[start, stop)`` byte range covered by an :class:`Operand` (or any object with ``ptr`` or
    array interfaces, ``shape``, ``strides``, ``dtype``): for aliasing checks."""
    start = arr.ptr if isinstance(arr, Operand) else _data_ptr(arr)
    if any(n == 0 for n in arr.shape):
        return start, start
    itemsize = getattr(arr.dtype, "itemsize", 4)
    lo = hi = 0
    for n, s in zip(arr.shape, arr.strides, strict=True):
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return start + lo, start + hi + itemsize


def _data_ptr(arr: Any) -> int:
    if SIMULATOR:
        return int(arr.__array_interface__["data"][0])
    return int(arr.__cuda_array_interface__["data"][0])


def overlaps(x: Any, y: Any) -> bool:
    """True if the memory of ``x`` and ``y`` overlaps."""
    x0, x1 = byte_span(x)
    y0, y1 = byte_span(y)
    return x0 < y1 and y0 < x1


def new_output(obj: Any, device: int, shape: tuple, dtype: str = "float32") -> Any:
    """A new C-contiguous array of ``shape`` and ``dtype`` (``"float32"``, ``"float16"`` or
    ``"bfloat16"``) of the same kind as ``obj`` (a PyTorch tensor, a CuPy array, else a Numba
    device array), allocated by that library on GPU ``device`` (``obj``'s).

    Raises:
        TypeError: a bfloat16 array of a library without that dtype (CuPy; Numba without
            ``ml_dtypes`` installed).
    """
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        import torch  # optional dependency: only for PyTorch operands

        return torch.empty(shape, dtype=getattr(torch, dtype), device=obj.device)
    if dtype == "bfloat16":
        dtype = _bf16_numpy(mod)
    if mod == "cupy":
        import cupy  # optional dependency: only for CuPy operands

        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype=dtype)
    if SIMULATOR:
        return cuda.device_array(shape, dtype=dtype)
    with cuda.gpus[device]:
        return cuda.device_array(shape, dtype=dtype)


def _bf16_numpy(mod: str) -> np.dtype:
    """NumPy's bfloat16 dtype (``ml_dtypes``') for a new Numba array; TypeError where there is
    none."""
    if mod != "cupy":
        try:
            import ml_dtypes  # optional: the only NumPy bfloat16
        except ImportError:
            pass
        else:
            return np.dtype(ml_dtypes.bfloat16)
    raise TypeError(
        f"a new bfloat16 output needs an array library with that dtype ({mod} arrays: "
        "install ml_dtypes for Numba arrays); pass out=<a bfloat16 array> or "
        "out_dtype='float32'"
    )


def plain_overlap(
    a0: int, b0: int, c0: int, M: int, N: int, K: int, ab: int = 4, c: int = 4
) -> str | None:
    """Which of C-contiguous ``a`` (M, K) at ``a0`` and ``b`` (K, N) at ``b0`` (``ab`` bytes an
    element: float32) the C-contiguous ``out`` (M, N) at ``c0`` (``c`` bytes an element)
    overlaps (``"a"``, ``"b"``), or None. Each spans ``[ptr, ptr + itemsize * size)``."""
    c1 = c0 + c * M * N
    if c1 > c0:
        if a0 < c1 and c0 < a0 + ab * M * K:
            return "a"
        if b0 < c1 and c0 < b0 + ab * K * N:
            return "b"
    return None
