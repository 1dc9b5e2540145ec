"""Tensor maps of the TMA stages' operands: checked, encoded on the host, kept in device memory.

A TMA stage reads each operand through a *tensor map* (``numba_gemm.ptx.tma``): 128 opaque
bytes the driver encodes (``cuTensorMapEncodeTiled``) from the matrix's address, sizes and row
stride, the box one copy moves and the SMEM swizzle. The kernel takes the map from GMEM (the
generic address ``cp.async.bulk.tensor`` accepts, as a ``(16,)`` int64 array argument), so each
distinct map is encoded and copied to the device once and kept: a later call with the same
operand finds it in a dict (a map holds the address, so a freed and reallocated buffer of the
same shape at the same address is served by the same, still correct, map). At most
:data:`MAX_MAPS` maps are kept per device; past that the store waits for the device (a running
kernel may still read a map) and starts over.

On the simulator a map is the plain record of ``ptx.tma.encode_record`` (what the model of
``tma_load`` reads); the same checks run first, so a box or stride the driver would refuse fails
on the CPU with the same ``ValueError``.

Source: CUDA Driver API, "Tensor Map Object Management" (``cuTensorMapEncodeTiled``).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
from numba import cuda

from ..device import SIMULATOR
from ..ptx.tma import (
    TENSOR_MAP_BYTES,
    TENSOR_MAP_WORDS,
    TMA_DTYPES,
    TMA_SWIZZLE,
    TensorMapSpec,
    check_tensor_map,
    encode_record,
)

#: Maps kept per device before the store waits for the device and starts over.
MAX_MAPS = 4096


def matrix_spec(
    dtype: str,
    shape: tuple[int, ...],
    row_stride: int,
    box: tuple[int, int],
    address: int = 0,
    batch_stride: int = 0,
    swizzle: int = 128,
) -> TensorMapSpec:
    """The map of a row-major matrix ``(rows, cols)`` (or a batch ``(batch, rows, cols)``)
    whose rows are ``row_stride`` bytes apart (batches ``batch_stride``), copied in boxes of
    ``box = (cols, rows)`` elements, checked (``ValueError`` as ``ptx.tma.check_tensor_map``)."""
    dims = tuple(int(n) for n in shape[::-1])
    strides = (int(row_stride),) + ((int(batch_stride),) if len(shape) == 3 else ())
    boxes = tuple(int(b) for b in box) + ((1,) if len(shape) == 3 else ())
    spec = TensorMapSpec(dtype, dims, strides, boxes, swizzle, int(address))
    check_tensor_map(spec)
    return spec


def encode(spec: TensorMapSpec) -> np.ndarray:
    """The 16 words of ``spec``'s map: the driver's encoding on a GPU, the simulator's record
    under ``NUMBA_ENABLE_CUDASIM=1``.

    Raises:
        ValueError: ``spec`` breaks a rule of ``cuTensorMapEncodeTiled``.
        driver.CudaDriverError: the driver refuses it anyway.
    """
    check_tensor_map(spec)
    if SIMULATOR:
        return encode_record(spec)
    from . import driver  # the GPU path only: the simulator never loads the driver

    buf = (ctypes.c_uint64 * (TENSOR_MAP_WORDS + 8))()  # room to align to 64 bytes
    out = (ctypes.addressof(buf) + 63) & ~63
    driver.encode_tensor_map(
        out,
        TMA_DTYPES[spec.dtype],
        spec.address,
        spec.dims,
        spec.strides,
        spec.box,
        TMA_SWIZZLE[spec.swizzle],
        driver.CU_TENSOR_MAP_L2_PROMOTION_128B,
    )
    return np.frombuffer(ctypes.string_at(out, TENSOR_MAP_BYTES), dtype=np.int64).copy()


_lock = threading.Lock()
_maps: dict[tuple[int, TensorMapSpec], Any] = {}
#: Bumped each time the store starts over (a holder of a map's pointer must look it up again).
generation = 0


def device_map(spec: TensorMapSpec, device: int | None = None) -> Any:
    """``spec``'s map as a ``(16,)`` int64 device array on GPU ``device`` (default: the current
    one), encoded and copied on the first request and kept (see module)."""
    global generation
    dev = 0 if SIMULATOR else (cuda.get_current_device().id if device is None else device)
    key = (dev, spec)
    got = _maps.get(key)
    if got is not None:
        return got
    words = encode(spec)
    with _lock:
        got = _maps.get(key)
        if got is None:
            if sum(1 for d, _ in _maps if d == dev) >= MAX_MAPS:
                cuda.synchronize()  # no kernel may still read a map about to be dropped
                for k in [k for k in _maps if k[0] == dev]:
                    del _maps[k]
                generation += 1
            if SIMULATOR:
                got = cuda.to_device(words)
            else:
                with cuda.gpus[dev]:
                    got = cuda.to_device(words)
            _maps[key] = got
    return got


__all__ = ["MAX_MAPS", "device_map", "encode", "generation", "matrix_spec"]
