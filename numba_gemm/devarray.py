"""Recognising device arrays: Numba's, any ``__cuda_array_interface__`` object, the simulator's."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .vecmem import SIMULATOR


def is_device_array(obj: Any) -> bool:
    """True for Numba device arrays and objects exporting ``__cuda_array_interface__``.

    Under the CUDA simulator, "device" arrays are the simulator's wrappers (``cuda.to_device``).
    """
    if getattr(obj, "__cuda_ndarray__", False):  # Numba's DeviceNDArray and the simulator's
        return True
    return not SIMULATOR and hasattr(obj, "__cuda_array_interface__")


def as_device_array(obj: Any) -> Any:
    """A Numba device array viewing the same memory as ``obj`` (zero-copy).

    Raises:
        TypeError: ``obj`` is not a device array (a NumPy array names the fix).
    """
    if getattr(obj, "__cuda_ndarray__", False):
        return obj
    if is_device_array(obj):
        return cuda.as_cuda_array(obj)
    if isinstance(obj, np.ndarray):
        raise TypeError(
            "expected a device array, got a host numpy.ndarray: copy it to the GPU first with "
            "numba.cuda.to_device(x) (or cupy.asarray(x))"
        )
    raise TypeError(
        f"expected a device array (a Numba device array or an object with "
        f"__cuda_array_interface__, e.g. a CuPy array or PyTorch CUDA tensor), "
        f"got {type(obj).__name__}"
    )


def data_ptr(arr: Any) -> int:
    """Address of the first element (device address on a GPU; host address on the simulator)."""
    if SIMULATOR:
        return int(arr.__array_interface__["data"][0])
    return int(arr.__cuda_array_interface__["data"][0])


def byte_span(arr: Any) -> tuple[int, int]:
    """``[start, stop)`` byte range covered by ``arr`` (for aliasing checks)."""
    start = data_ptr(arr)
    if arr.size == 0:
        return start, start
    itemsize = np.dtype(arr.dtype).itemsize
    lo = hi = 0
    for n, s in zip(arr.shape, arr.strides, strict=True):
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return start + lo, start + hi + itemsize


def overlaps(x: Any, y: Any) -> bool:
    """True if the memory of ``x`` and ``y`` overlaps."""
    x0, x1 = byte_span(x)
    y0, y1 = byte_span(y)
    return x0 < y1 and y0 < x1
