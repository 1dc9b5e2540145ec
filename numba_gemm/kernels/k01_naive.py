"""Stage 1, naive: one thread per element of C, threadIdx.x mapped to the row.

Each thread computes one ``C[row, col]`` as a K-long dot product read straight from GMEM.
Consecutive threads of a warp take consecutive *rows*, so a warp's loads of ``A[row, k]`` are K
floats apart (uncoalesced: one 32-byte sector per thread) and its stores to C likewise: this is
the baseline that every later stage is measured against.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: S. Boehm, "How to Optimize a CUDA Matmul Kernel for
cuBLAS-like Performance: a Worklog" (2022), kernel 1.
"""

from ..backend import cuda, float32
from ..device import tile_grid
from ._common import store_c
from .stage import Stage

# --- tile constants
BLOCK = 32  # threads per block along each of x (rows of C) and y (columns of C)


@cuda.jit
def sgemm_naive(A, B, C, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    row = cuda.blockIdx.y * BLOCK + cuda.threadIdx.x  # x -> row: the uncoalesced mapping
    col = cuda.blockIdx.x * BLOCK + cuda.threadIdx.y
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
    name="naive",
    label="1: naive",
    kernel=sgemm_naive,
    launch_config=launch_config,
    tile=(BLOCK, BLOCK),
)
