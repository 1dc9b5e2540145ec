"""Stage 3, smem_tiling: 32x32 tiles of A and B staged through shared memory.

Each block computes a 32x32 tile of C. Per K step, its 1024 threads each copy one element of A and
one of B into SMEM (coalesced), synchronise, and accumulate 32 products from SMEM. Every GMEM float
is now read by 32 threads from SMEM instead of 32 times from GMEM: arithmetic intensity rises 32x
over ``gmem_coalesce``. Out-of-range elements of ragged edge tiles are stored as zeros, so the
inner loop needs no bounds checks and any M, N, K works.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: CUDA C Programming Guide, "Shared Memory" matrix-multiplication example; Boehm's SGEMM
worklog, kernel 3.
"""

from ..backend import cuda, float32
from ..device import tile_grid
from ._common import store_c
from .stage import Stage

# --- tile constants
TILE = 32  # BM = BN = BK = TILE; the block is TILE x TILE threads, one per element of the C tile
BM = BN = BK = TILE


@cuda.jit
def sgemm_smem_tiling(A, B, C, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    As = cuda.shared.array((BM, BK), float32)
    Bs = cuda.shared.array((BK, BN), float32)
    tx = cuda.threadIdx.x  # column inside the tile (fast index: coalesced GMEM access)
    ty = cuda.threadIdx.y  # row inside the tile
    row = cuda.blockIdx.y * BM + ty
    col = cuda.blockIdx.x * BN + tx

    acc = float32(0.0)
    for k0 in range(0, K, BK):
        # --- GMEM -> SMEM (zero-fill outside the matrices)
        a_col = k0 + tx
        b_row = k0 + ty
        As[ty, tx] = A[row, a_col] if row < M and a_col < K else float32(0.0)
        Bs[ty, tx] = B[b_row, col] if b_row < K and col < N else float32(0.0)
        cuda.syncthreads()  # the tiles are complete before anyone reads them

        # --- SMEM -> registers, FMA
        for k in range(BK):
            acc += As[ty, k] * Bs[k, tx]
        cuda.syncthreads()  # everyone is done reading before the next tiles overwrite SMEM

    # --- epilogue: write C
    if row < M and col < N:
        store_c(C, row, col, acc, alpha, beta)


def launch_config(M, N, K):
    """Grid over (N/32, M/32) tiles, 32x32 threads."""
    return tile_grid(M, N, BM, BN), (BN, BM)


STAGE = Stage(
    name="smem_tiling",
    label="3: SMEM tiling",
    kernel=sgemm_smem_tiling,
    launch_config=launch_config,
    tile=(BM, BN),
)
