"""Per-stream device buffers of the launch layer: split-K's partial products and tile counters,
stream-K's partial tiles (the same pair), and aligned staging's padded operands.

Each is grow-only and kept per (GPU, CUDA stream, and host thread for the default streams):
calls on one stream run in order, so they can share a buffer, and a split-K call leaves every
counter at 0. A buffer is allocated (counters zeroed) on its stream's first call that needs it;
views of it are memoized per shape, so a call in steady state allocates and builds nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.driver import device_memset

from ..arrays import DTYPES, F32, Operand, operand

_lock = threading.Lock()
_split: dict = {}
_staging: dict = {}
#: Bumped whenever a split-K workspace is replaced by a larger one: views memoized elsewhere (a
#: runner's per-stream buffers, ``launcher.Runner``) are stale once it changes.
generation = 0


def stream_key(stream: Any) -> tuple:
    """The CUDA stream itself, not a Python wrapper. The default streams (handles 0, 1, 2) are
    shared by host threads, so there the key adds the thread."""
    if isinstance(stream, int):
        handle = stream
    elif stream is None:
        handle = 0
    elif getattr(stream, "handle", None) is None:  # the simulator's streams have no handle
        return (id(stream), 0)
    else:  # a Numba stream
        handle = int(stream)
    return (handle, threading.get_ident() if handle in (0, 1, 2) else 0)


def split_buffers(
    rows: int, cols: int, counters: int, stream: Any, device: int = 0, wrap: Any = None
) -> tuple[Any, Any]:
    """``(W, L)`` of this stream on GPU ``device``: W a float32 ``(rows, cols)`` Numba device
    array (the workspace; zeros where no call has written), L ``counters`` int32 arrival
    counters (tiles x ``kernels._splitk.counters_per_tile``, and one more where the launcher
    licenses the spread sum), all 0 between calls.

    Both come from grow-only buffers (views memoized: a call in steady state allocates and builds
    nothing); with ``wrap``, ``(wrap(W), wrap(L))`` instead, memoized beside the views (and
    dropped with them when a buffer grows)."""
    key = (device, *stream_key(stream))
    entry = _split.get(key)
    if entry is None or entry[0].size < rows * cols or entry[1].size < counters:
        global generation
        with _lock, cuda.gpus[device]:
            generation += 1
            old = entry
            w = max(rows * cols, 1, 0 if old is None else old[0].size)
            n = max(counters, 1, 0 if old is None else old[1].size)
            wbuf = cuda.device_array(w, dtype=np.float32)
            # zeros: a view's rows are padded to whole 16-byte units and the tile sums read and
            # add the padding (never stored to C); uninitialized, it may hold NaNs, which the
            # simulator reports as invalid arithmetic
            device_memset(wbuf, 0, wbuf.nbytes)
            entry = (wbuf, cuda.to_device(np.zeros(n, dtype=np.int32)), {})
            _split[key] = entry
    wbuf, lbuf, views = entry
    got = views.get((rows, cols, counters, wrap))
    if got is None:
        # L exactly ``counters`` long: its length is the spread sum's licence (``_splitk``)
        W, L = wbuf[: rows * cols].reshape(rows, cols), lbuf[: max(counters, 1)]
        got = views[(rows, cols, counters, wrap)] = (W, L) if wrap is None else (wrap(W), wrap(L))
    return got


def split_operands(
    rows: int, cols: int, counters: int, stream: Any, device_id: int
) -> tuple[Operand, Operand]:
    """:func:`split_buffers` as kernel operands: the workspace as a 3-D ``(1, rows, cols)``
    strided :class:`Operand` (the kernels' spec ``S``), the counters as a 1-D one."""
    return split_buffers(rows, cols, counters, stream, device_id, wrap=_split_operand)


def _split_operand(x: Any) -> Operand:
    o = operand(x)
    if len(o.shape) == 2:  # the workspace: one strided matrix, as the kernels' spec S takes it
        rows, cols = o.shape
        return Operand(o.obj, o.ptr, (1, rows, cols), (0, 4 * cols, 4), F32, o.device)
    return o


def staging_buffers(
    M: int, s: Any, stream: Any, device: int, bt: bool = False
) -> tuple[Operand, Operand, Operand]:
    """Aligned staging's buffers (``plan.staging``; ``s`` its ``Staging``): A' ``(M, K4)``, B'
    ``(K4, N4)`` (``bt``, B stored transposed: ``(N4, K4)``), C' ``(M, N4)``: C-contiguous
    operands (storage views) of ``s.ab_type`` (A', B') and ``s.c_type`` (C') in this stream's
    workspace on GPU ``device`` (grow-only; each view starts on a 16-byte boundary, since its
    rows are whole 16-byte units; the views are memoized per shape)."""
    key = (device, *stream_key(stream))
    types = (s.ab_type, s.ab_type, s.c_type)
    shapes = ((M, s.K4), (s.N4, s.K4) if bt else (s.K4, s.N4), (M, s.N4))
    sizes = [DTYPES[t].itemsize for t in types]
    need = -(-sum(z * r * c for z, (r, c) in zip(sizes, shapes, strict=True)) // 4)  # floats
    entry = _staging.get(key)
    if entry is None or entry[0].size < need:
        with _lock, cuda.gpus[device]:
            entry = _staging.get(key)  # another thread on this stream may have grown it
            if entry is None or entry[0].size < need:
                arr = cuda.device_array(need, dtype=np.float32)
                entry = _staging[key] = (arr, operand(arr).ptr, {})
    arr, base, views = entry
    got = views.get((M, s, bt))
    if got is None:
        got, off = [], 0
        for (rows, cols), name, size in zip(shapes, types, sizes, strict=True):
            dtype = DTYPES[name]
            got.append(Operand(arr, base + off, (rows, cols), (size * cols, size), dtype, device))
            off += size * rows * cols
        got = views[(M, s, bt)] = tuple(got)
    return got


_packing: dict = {}


def packing_buffer(floats: int, stream: Any, device: int) -> tuple[Any, int]:
    """``(owner, device address)`` of at least ``floats`` float32 in this stream's workspace on
    GPU ``device`` (grow-only): where ``grouped_mm``'s list form packs the rows and matrices that
    do not lie as one array, kept past the call as the launches on the stream need them."""
    key = (device, *stream_key(stream))
    entry = _packing.get(key)
    if entry is None or entry[0].size < floats:
        with _lock, cuda.gpus[device]:
            entry = _packing.get(key)
            if entry is None or entry[0].size < floats:
                arr = cuda.device_array(max(floats, 4), dtype=np.float32)
                entry = _packing[key] = (arr, operand(arr).ptr)
    return entry
