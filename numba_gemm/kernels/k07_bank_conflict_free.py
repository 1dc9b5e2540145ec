"""Stage 7, bank_conflict_free: the vectorized kernel without its SMEM bank conflicts.

SMEM has 32 banks of 4 bytes; a warp's access is split into as many wavefronts as the most
requests any one bank gets (a 128-bit access serves at most 8 threads' distinct 16-byte chunks,
i.e. 128 contiguous bytes, per wavefront). ``vectorize`` has two conflicts, fixed here:

1. The transposed store of A: lanes ``2m`` and ``2m + 1`` write ``As[i, m]`` and ``As[4 + i, m]``.
   With a row pitch of BM = 128 floats (a multiple of 32 banks) both land in bank ``m % 32``:
   2-way conflict on every store. *Padding* the pitch to BM + 4 = 132 floats moves row ``4 + i``
   by ``4 * 132 % 32 = 16`` banks, so the 16 + 16 lanes hit 32 distinct banks. (+4 rather than
   +1 keeps every row 16-byte aligned for the 128-bit fragment reads.)
2. The fragment reads of B: thread ``t`` of a warp read ``Bs[d, 8t : 8t + 8]`` as two float4s at a
   32-byte stride, so each 128-bit wavefront got only 4 useful chunks out of 8: 2x the wavefronts.
   Each thread now owns two groups of 4 columns, ``4t`` and ``64 + 4t``: the 16 threads of a warp
   that differ in ``t`` read 256 contiguous bytes per float4, 2 wavefronts, the minimum.

Everything else (tiles, vector variants, edges) is ``vectorize``'s.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernels 7-8
(linearize / pad SMEM); NVIDIA CUDA C++ Best Practices Guide, "Shared Memory and Memory Banks".
"""

from ..backend import cuda, float32
from ..device import tile_grid
from ..ptx.vecmem import SMEM_ALIGN, load4, store4
from ._common import device_jit, load_a4, load_b4, store_c4, unroll
from .stage import Stage

# --- tile constants
BM = 128
BN = 128
BK = 8
TM = 8
TN = 8
NUM_THREADS = BM * BN // (TM * TN)  # 256
A_PAD = 4  # floats of padding per As row: 4 * (BM + A_PAD) % 32 == 16 -> conflict-free stores
AS_PITCH = BM + A_PAD  # row pitch of As (a literal for cuda.shared.array's shape)
THREADS_N = BN // TN  # threads along N: 16
COL_GROUP_STRIDE = BN // 2  # a thread's two 4-column groups are BN/2 apart
assert BM * BK // 4 == NUM_THREADS, "each thread copies one float4 of the A tile"
assert BK * BN // 4 == NUM_THREADS, "each thread copies one float4 of the B tile"
assert TN == 8 and TM % 4 == 0, "two 4-column groups per thread; A fragments read as float4"
assert (4 * AS_PITCH) % 32 == 16, "padding must shift row 4+i by half the banks"


@device_jit
def _outer_product_step(d, As, Bs, reg_m, reg_n, thread_results, thread_row, thread_col):
    for i in range(0, TM, 4):
        reg_m[i], reg_m[i + 1], reg_m[i + 2], reg_m[i + 3] = load4(As, d, thread_row * TM + i)
    for g in range(2):  # column group g: columns g * BN/2 + 4 * thread_col + (0..3)
        j = 4 * g
        reg_n[j], reg_n[j + 1], reg_n[j + 2], reg_n[j + 3] = load4(
            Bs, d, g * COL_GROUP_STRIDE + thread_col * 4
        )
    for i in range(TM):
        for j in range(TN):
            thread_results[i, j] += reg_m[i] * reg_n[j]


_outer_products = unroll(BK, _outer_product_step)


@device_jit
def _store_row(i, C, thread_results, row0, col0, thread_row, thread_col, alpha, beta, M, N, vec):
    # row i of the thread tile -> C; register column j belongs to C column group j // 4
    row = row0 + thread_row * TM + i
    for g in range(2):
        j = 4 * g
        store_c4(
            C,
            row,
            col0 + g * COL_GROUP_STRIDE + thread_col * 4,
            thread_results[i, j],
            thread_results[i, j + 1],
            thread_results[i, j + 2],
            thread_results[i, j + 3],
            alpha,
            beta,
            M,
            N,
            vec,
        )


# Unrolled so that thread_results is only ever indexed by constants (else: local memory).
_store_tile = unroll(TM, _store_row)


def make_kernel(vec):
    """The stage's kernel; ``vec`` selects 128-bit (True) or scalar (False) GMEM accesses."""

    @cuda.jit
    def sgemm_bank_conflict_free(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        As = cuda.shared.array((BK, AS_PITCH), float32, alignment=SMEM_ALIGN)  # [k, m], padded
        Bs = cuda.shared.array((BK, BN), float32, alignment=SMEM_ALIGN)
        tid = cuda.threadIdx.x
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        thread_row = tid // THREADS_N
        thread_col = tid % THREADS_N
        a_row, a_col = tid // (BK // 4), (tid % (BK // 4)) * 4
        b_row, b_col = tid // (BN // 4), (tid % (BN // 4)) * 4
        a_src_row = min(row0 + a_row, M - 1)

        thread_results = cuda.local.array((TM, TN), float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        for i in range(TM):
            for j in range(TN):
                thread_results[i, j] = float32(0.0)

        for k0 in range(0, K, BK):
            # --- GMEM -> SMEM (A transposed into the padded As)
            a0, a1, a2, a3 = load_a4(A, a_src_row, k0 + a_col, K, vec)
            As[a_col + 0, a_row] = a0
            As[a_col + 1, a_row] = a1
            As[a_col + 2, a_row] = a2
            As[a_col + 3, a_row] = a3
            b0, b1, b2, b3 = load_b4(B, k0 + b_row, col0 + b_col, K, N, vec)
            store4(Bs, b_row, b_col, b0, b1, b2, b3)
            cuda.syncthreads()  # the tiles are complete before anyone reads them

            # --- SMEM -> registers, FMA
            _outer_products(As, Bs, reg_m, reg_n, thread_results, thread_row, thread_col)
            cuda.syncthreads()  # everyone is done reading before the next tiles overwrite SMEM

        # --- epilogue: write C
        _store_tile(C, thread_results, row0, col0, thread_row, thread_col, alpha, beta, M, N, vec)

    return sgemm_bank_conflict_free


def launch_config(M, N, K):
    """Grid over (N/128, M/128) tiles, 256 threads."""
    return tile_grid(M, N, BM, BN), (NUM_THREADS,)


STAGE = Stage(
    name="bank_conflict_free",
    label="7: bank-conflict-free SMEM",
    kernel=make_kernel(True),
    scalar_kernel=make_kernel(False),
    launch_config=launch_config,
    tile=(BM, BN),
)
