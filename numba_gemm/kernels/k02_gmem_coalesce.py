"""Stage 2, gmem_coalesce: the naive kernel with threadIdx.x mapped to the column.

Same arithmetic as ``naive``; only the thread-to-element map changes. Consecutive threads of a warp
now take consecutive *columns*: their loads of ``B[k, col]`` fall in one 128-byte line (coalesced),
their loads of ``A[row, k]`` are one broadcast, and their stores to C are coalesced too.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernel 2.
"""

from ..backend import cuda, float32
from ..device import tile_grid
from ._common import store_c
from .stage import Stage

# --- tile constants
BLOCK = 32  # threads per block along each of x (columns of C) and y (rows of C)


@cuda.jit
def sgemm_gmem_coalesce(A, B, C, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    row = cuda.blockIdx.y * BLOCK + cuda.threadIdx.y
    col = cuda.blockIdx.x * BLOCK + cuda.threadIdx.x  # x -> column: a warp reads one row of B
    if row < M and col < N:
        # --- GMEM -> registers, FMA
        acc = float32(0.0)
        for k in range(K):
            acc += A[row, k] * B[k, col]
        # --- epilogue: write C
        store_c(C, row, col, acc, alpha, beta)


def launch_config(M, N, K):
    """Grid over (N/32, M/32) tiles, 32x32 threads."""
    return tile_grid(M, N, BLOCK, BLOCK), (BLOCK, BLOCK)


STAGE = Stage(
    name="gmem_coalesce",
    label="2: GMEM coalescing",
    kernel=sgemm_gmem_coalesce,
    launch_config=launch_config,
    tile=(BLOCK, BLOCK),
)
