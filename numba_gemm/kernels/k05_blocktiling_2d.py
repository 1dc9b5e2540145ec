"""Stage 5, blocktiling_2d: each thread computes an 8x8 register tile as outer products.

From ``blocktiling_1d``: the block tile grows to 128x128 and each of the 256 threads owns a
TM x TN = 8x8 tile of C. Per k it loads a fragment of TM values of A and TN values of B from SMEM
into registers (``reg_m``, ``reg_n``) and does their outer product: 64 FMAs per 16 SMEM loads,
0.25 loads per FMA against stage 4's (TM + 1) / TM = 1.125 (4.5x fewer). Accumulators and
fragments are ``cuda.local.array`` indexed only by constants (the TM/TN loops are unrolled by
NVVM), so they live in registers.

The BK loop is deliberately *not* unrolled (unlike stages 4 and 6+): unrolled, ptxas (the
assembler from PTX to machine code) moves the SMEM loads of later k steps earlier and needs 148
registers a thread, which leaves room for one block per SM instead of two; measured on an H200
at 4096^3 that ran at 14.0 TFLOP/s, rolled at 16.8. (Capping the unrolled kernel at 128
registers ran faster still, 19.9 TFLOP/s, but spilled 80 bytes a thread to local memory; the
package keeps its kernels free of spills, a rule that costs here and pays elsewhere.)

Edges as in stage 4: rows/columns past M/N clamped, elements past K zero-filled.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernel 5.
"""

from ..backend import cuda, float32
from ..device import tile_grid
from ._common import device_jit, store_c
from .stage import Stage

# --- tile constants
BM = 128
BN = 128
BK = 8
TM = 8
TN = 8
NUM_THREADS = BM * BN // (TM * TN)  # 256
STRIDE_A = NUM_THREADS // BK  # rows of the A tile loaded per pass
STRIDE_B = NUM_THREADS // BN  # rows of the B tile loaded per pass
assert NUM_THREADS % BK == 0 and BM % STRIDE_A == 0, "A tile must split evenly over the threads"
assert NUM_THREADS % BN == 0 and BK % STRIDE_B == 0, "B tile must split evenly over the threads"
assert BM % TM == 0 and BN % TN == 0, "thread tiles must divide the block tile"


@device_jit
def _outer_product(d, As, Bs, reg_m, reg_n, thread_results, thread_row, thread_col):
    # SMEM -> registers: a TM fragment of A's column d and a TN fragment of B's row d
    for i in range(TM):
        reg_m[i] = As[thread_row * TM + i, d]
    for j in range(TN):
        reg_n[j] = Bs[d, thread_col * TN + j]
    # registers -> FMA: TM x TN outer product
    for i in range(TM):
        for j in range(TN):
            thread_results[i, j] += reg_m[i] * reg_n[j]


@cuda.jit
def sgemm_blocktiling_2d(A, B, C, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    As = cuda.shared.array((BM, BK), float32)
    Bs = cuda.shared.array((BK, BN), float32)
    tid = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    thread_row = tid // (BN // TN)
    thread_col = tid % (BN // TN)
    a_row, a_col = tid // BK, tid % BK  # first A element this thread copies, then every STRIDE_A
    b_row, b_col = tid // BN, tid % BN
    b_src_col = min(col0 + b_col, N - 1)

    thread_results = cuda.local.array((TM, TN), float32)
    reg_m = cuda.local.array(TM, float32)
    reg_n = cuda.local.array(TN, float32)
    for i in range(TM):
        for j in range(TN):
            thread_results[i, j] = float32(0.0)

    for k0 in range(0, K, BK):
        # --- GMEM -> SMEM (rows/cols clamped, zeros past K)
        for off in range(0, BM, STRIDE_A):
            src_row = min(row0 + a_row + off, M - 1)
            k = k0 + a_col
            As[a_row + off, a_col] = A[src_row, k] if k < K else float32(0.0)
        for off in range(0, BK, STRIDE_B):
            k = k0 + b_row + off
            Bs[b_row + off, b_col] = B[k, b_src_col] if k < K else float32(0.0)
        cuda.syncthreads()  # the tiles are complete before anyone reads them

        # --- SMEM -> registers, FMA
        for d in range(BK):  # rolled: see the module docstring
            _outer_product(d, As, Bs, reg_m, reg_n, thread_results, thread_row, thread_col)
        cuda.syncthreads()  # everyone is done reading before the next tiles overwrite SMEM

    # --- epilogue: write C
    for i in range(TM):
        row = row0 + thread_row * TM + i
        for j in range(TN):
            col = col0 + thread_col * TN + j
            if row < M and col < N:
                store_c(C, row, col, thread_results[i, j], alpha, beta)


def launch_config(M, N, K):
    """Grid over (N/128, M/128) tiles, 256 threads."""
    return tile_grid(M, N, BM, BN), (NUM_THREADS,)


STAGE = Stage(
    name="blocktiling_2d",
    label="5: 2D blocktiling",
    kernel=sgemm_blocktiling_2d,
    launch_config=launch_config,
    tile=(BM, BN),
)
