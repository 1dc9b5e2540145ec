"""Split-K: partial products over slices of K into a workspace, then one reduction into C.

Shapes whose M x N holds fewer block tiles than the GPU has SMs (1024^2 in 128x128 tiles is 64
blocks for 132 SMs) leave most of the GPU idle. With ``SPLITK = S`` the grid gets a z dimension
of S; block z computes ``A[:, Kz] @ B[Kz, :]`` for its slice Kz of K and writes it, unscaled, to
rows ``[z*M, (z+1)*M)`` of a workspace W of shape ``(S*M, N)``; ``reduce_splits`` then computes
``C = alpha * sum_z W_z + beta * C`` in a fixed order (deterministic, no atomics). The plan
(``numba_gemm.plan``) launches the two kernels.

The workspace is grow-only and kept per (GPU, CUDA stream, and host thread for the default
streams), so that repeated calls allocate once; calls on one stream run in order, so they can
share it.

Source: the split-K ("sliced-K") GEMM of NVIDIA CUTLASS (``GemmSplitKParallel``: partials then a
reduction kernel).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numba import cuda

_workspaces: dict = {}
_lock = threading.Lock()

REDUCE_BLOCK = (32, 8)


@cuda.jit
def reduce_splits(W, C, alpha, beta):
    """``C[0] = alpha * sum_z W[z*M:(z+1)*M] + beta * C[0]`` for W ``(S*M, N)`` (C-contiguous)
    and C ``(1, M, N)`` (any strides: a row pitch); C is not read when ``beta == 0``."""
    M, N = C.shape[1], C.shape[2]
    splits = W.shape[0] // M
    c = cuda.blockIdx.x * REDUCE_BLOCK[0] + cuda.threadIdx.x
    r = cuda.blockIdx.y * REDUCE_BLOCK[1] + cuda.threadIdx.y
    if r < M and c < N:
        acc = W[r, c]
        for z in range(1, splits):
            acc += W[z * M + r, c]
        if beta == 0:
            C[0, r, c] = alpha * acc
        else:
            C[0, r, c] = alpha * acc + beta * C[0, r, c]


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


def workspace(rows: int, cols: int, stream: Any, device: int = 0, wrap: Any = None) -> Any:
    """A float32 ``(rows, cols)`` Numba device array on GPU ``device`` from the grow-only buffer
    of this stream (views memoized: a call in steady state allocates and builds nothing); with
    ``wrap``, ``wrap(view)`` instead, memoized beside the view (and dropped with it when the
    buffer grows)."""
    key = (device, *stream_key(stream))
    entry = _workspaces.get(key)
    if entry is None or entry[0].size < rows * cols:
        with _lock, cuda.gpus[device]:
            entry = (cuda.device_array(max(rows * cols, 1), dtype=np.float32), {})
            _workspaces[key] = entry
    buf, views = entry
    view = views.get((rows, cols))
    if view is None:
        view = views[(rows, cols)] = buf[: rows * cols].reshape(rows, cols)
    if wrap is None:
        return view
    wrapped = views.get((rows, cols, wrap))
    if wrapped is None:
        wrapped = views[(rows, cols, wrap)] = wrap(view)
    return wrapped
