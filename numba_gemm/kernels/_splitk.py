"""Split-K: partial products over slices of K into a workspace, then one reduction into C.

Shapes whose M x N holds fewer block tiles than the GPU has SMs (1024^2 in 128x128 tiles is 64
blocks for 132 SMs) leave most of the GPU idle. With ``SPLITK = S`` the grid gets a z dimension
of S; block z computes ``A[:, Kz] @ B[Kz, :]`` for its slice Kz of K and writes it, unscaled, to
rows ``[z*M, (z+1)*M)`` of a workspace W of shape ``(S*M, N)``; ``reduce_splits`` then computes
``C = alpha * sum_z W_z + beta * C`` in a fixed order (deterministic, no atomics).

The workspace is grow-only and kept per (device, CUDA stream handle, and host thread for the
default stream), so that repeated calls allocate once; calls on one stream run in order, so they
can share it.

Source: the split-K ("sliced-K") GEMM of NVIDIA CUTLASS (``GemmSplitKParallel``: partials then a
reduction kernel).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numba import cuda

from ..launch import cdiv

_workspaces: dict = {}

REDUCE_BLOCK = (32, 8)


@cuda.jit
def reduce_splits(W, C, alpha, beta):
    """``C = alpha * sum_z W[z*M:(z+1)*M] + beta * C``; C is not read when ``beta == 0``."""
    M, N = C.shape
    splits = W.shape[0] // M
    c = cuda.blockIdx.x * REDUCE_BLOCK[0] + cuda.threadIdx.x
    r = cuda.blockIdx.y * REDUCE_BLOCK[1] + cuda.threadIdx.y
    if r < M and c < N:
        acc = W[r, c]
        for z in range(1, splits):
            acc += W[z * M + r, c]
        if beta == 0:
            C[r, c] = alpha * acc
        else:
            C[r, c] = alpha * acc + beta * C[r, c]


def _stream_key(stream: Any) -> tuple:
    """The CUDA stream itself, not its Python wrapper (sgemm wraps CuPy/PyTorch streams anew on
    every call). The default stream is per host thread when per-thread default streams are on."""
    if stream in (0, None):
        return (0, threading.get_ident())
    handle = getattr(stream, "handle", None)
    try:
        return (int(getattr(handle, "value", handle)), 0)
    except (TypeError, ValueError):  # the simulator's streams have no handle
        return (id(stream), 0)


def workspace(rows: int, cols: int, stream: Any) -> Any:
    """A float32 ``(rows, cols)`` device array from the grow-only buffer of this stream."""
    key = (getattr(cuda.get_current_device(), "id", 0), *_stream_key(stream))
    need = rows * cols
    buf = _workspaces.get(key)
    if buf is None or buf.size < need:
        buf = cuda.device_array(max(need, 1), dtype=np.float32)
        _workspaces[key] = buf
    return buf[:need].reshape(rows, cols)


def launch_split_k(stage, grid, block, A, B, C, alpha, beta, stream) -> None:
    """Run ``stage`` split over ``grid[2]`` K slices, then reduce the slices into C."""
    M, N = C.shape
    splits = grid[2]
    W = workspace(splits * M, N, stream)
    stage.launch_kernel(grid, block, A, B, W, np.float32(1.0), np.float32(0.0), stream)
    rgrid = (cdiv(N, REDUCE_BLOCK[0]), cdiv(M, REDUCE_BLOCK[1]))
    reduce_splits[rgrid, REDUCE_BLOCK, stream](W, C, alpha, beta)
