"""Stage 4, blocktiling_1d: each thread computes TM = 8 elements of a column of C.

From ``smem_tiling``: the block tile grows to 64x64 with a thin BK = 8 K slice, and each of the
512 threads keeps TM = 8 results in registers. Per k it reads one SMEM value of B (once, into a
register) and reuses it for TM FMAs, but still reads each of its TM values of A from SMEM: TM + 1
SMEM loads per TM FMAs, 1.125 per FMA against stage 3's 2 (1.8x fewer). For a warp the TM loads of
A are broadcasts (all 32 lanes share thread_row), so per k it needs TM + 1 SMEM wavefronts for TM
FFMA instructions: still SMEM-bound, less so than stage 3.

Edges: a row of A (column of B) past M (N) feeds only elements of C that are never stored, so its
index is clamped to the last valid one instead of being tested; elements past K are zero-filled.
The BK loop is unrolled with ``_common.unroll`` (Numba has no ``#pragma unroll``).

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernel 4.
"""

from ..backend import cuda, float32
from ..device import tile_grid
from ._common import device_jit, store_c, unroll
from .stage import Stage

# --- tile constants
BM = 64  # rows of C per block
BN = 64  # columns of C per block
BK = 8  # K slice staged in SMEM per step
TM = 8  # rows of C per thread (one column segment)
NUM_THREADS = BM * BN // TM  # 512
assert BM * BK == NUM_THREADS, "each thread loads exactly one element of the A tile"
assert BK * BN == NUM_THREADS, "each thread loads exactly one element of the B tile"
assert BM % TM == 0, "TM must divide BM"


@device_jit
def _dot_step(d, As, Bs, thread_results, thread_row, thread_col):
    # one k of the BK slice: TM FMAs reusing one SMEM value of B held in a register
    b = Bs[d, thread_col]
    for i in range(TM):
        thread_results[i] += As[thread_row * TM + i, d] * b


_dot_tile = unroll(BK, _dot_step)


@cuda.jit
def sgemm_blocktiling_1d(A, B, C, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    As = cuda.shared.array((BM, BK), float32)
    Bs = cuda.shared.array((BK, BN), float32)
    tid = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    thread_row = tid // BN  # which TM-row segment of the tile
    thread_col = tid % BN
    # GMEM -> SMEM assignment: one element of each tile per thread, clamped into the matrices
    a_row, a_col = tid // BK, tid % BK
    b_row, b_col = tid // BN, tid % BN
    a_src_row = min(row0 + a_row, M - 1)
    b_src_col = min(col0 + b_col, N - 1)

    thread_results = cuda.local.array(TM, float32)
    for i in range(TM):
        thread_results[i] = float32(0.0)

    for k0 in range(0, K, BK):
        # --- GMEM -> SMEM (zeros past K)
        As[a_row, a_col] = A[a_src_row, k0 + a_col] if k0 + a_col < K else float32(0.0)
        Bs[b_row, b_col] = B[k0 + b_row, b_src_col] if k0 + b_row < K else float32(0.0)
        cuda.syncthreads()  # the tiles are complete before anyone reads them

        # --- SMEM -> registers, FMA
        _dot_tile(As, Bs, thread_results, thread_row, thread_col)
        cuda.syncthreads()  # everyone is done reading before the next tiles overwrite SMEM

    # --- epilogue: write C
    col = col0 + thread_col
    for i in range(TM):
        row = row0 + thread_row * TM + i
        if row < M and col < N:
            store_c(C, row, col, thread_results[i], alpha, beta)


def launch_config(M, N, K):
    """Grid over (N/64, M/64) tiles, 512 threads."""
    return tile_grid(M, N, BM, BN), (NUM_THREADS,)


STAGE = Stage(
    name="blocktiling_1d",
    label="4: 1D blocktiling",
    kernel=sgemm_blocktiling_1d,
    launch_config=launch_config,
    tile=(BM, BN),
)
