"""Stage 6, vectorize: 128-bit GMEM and SMEM accesses, A's tile stored transposed in SMEM.

From ``blocktiling_2d`` (same 128x128x8 tiles, 8x8 per thread): each thread now copies its share
of A and B with one ``ld.global.v4.f32`` each (float4 width) instead of four scalar loads; A's tile
is written *transposed* (``As[k, m]``), so that a thread's TM fragment of A is contiguous in SMEM
and both fragments are read with ``ld.shared.v4.f32``; C is written with ``st.global.v4.f32``.

Numba has no float4 view of a float32 array: ``numba_gemm.ptx.vecmem.load4/store4`` are
``@intrinsic`` functions that emit an LLVM ``<4 x float>`` access with ``align 16`` (NVVM lowers it
to the v4 instructions; ``python -m numba_gemm.tools.resources`` counts them in the PTX). A 128-bit
access needs 16-byte alignment, so this kernel exists twice: the vector one, launched when A, B and
C have 16-byte aligned rows (base address % 16 == 0 and K, N multiples of 4), and the same code with
scalar GMEM accesses for any other shape (``Stage.scalar_kernel``); SMEM accesses stay 128-bit.

Edges: rows/columns past M/N clamped (never stored), elements past K zero-filled.

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: Boehm's SGEMM worklog, kernel 6.
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
assert BM * BK // 4 == NUM_THREADS, "each thread copies one float4 of the A tile"
assert BK * BN // 4 == NUM_THREADS, "each thread copies one float4 of the B tile"
assert TM % 4 == 0 and TN % 4 == 0, "fragments are read as float4"


@device_jit
def _outer_product_step(d, As, Bs, reg_m, reg_n, thread_results, thread_row, thread_col):
    # SMEM -> registers: 128-bit reads of the (transposed) A fragment and of the B fragment
    for i in range(0, TM, 4):
        reg_m[i], reg_m[i + 1], reg_m[i + 2], reg_m[i + 3] = load4(As, d, thread_row * TM + i)
    for j in range(0, TN, 4):
        reg_n[j], reg_n[j + 1], reg_n[j + 2], reg_n[j + 3] = load4(Bs, d, thread_col * TN + j)
    for i in range(TM):
        for j in range(TN):
            thread_results[i, j] += reg_m[i] * reg_n[j]


_outer_products = unroll(BK, _outer_product_step)


@device_jit
def _store_row(i, C, thread_results, row0, col0, thread_row, thread_col, alpha, beta, M, N, vec):
    # row i of the thread tile -> C, four columns at a time
    row = row0 + thread_row * TM + i
    for j in range(0, TN, 4):
        store_c4(
            C,
            row,
            col0 + thread_col * TN + j,
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
    def sgemm_vectorize(A, B, C, alpha, beta):
        M, K = A.shape
        N = B.shape[1]
        As = cuda.shared.array((BK, BM), float32, alignment=SMEM_ALIGN)  # transposed: [k, m]
        Bs = cuda.shared.array((BK, BN), float32, alignment=SMEM_ALIGN)
        tid = cuda.threadIdx.x
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        thread_row = tid // (BN // TN)
        thread_col = tid % (BN // TN)
        a_row, a_col = tid // (BK // 4), (tid % (BK // 4)) * 4  # one float4 of the A tile
        b_row, b_col = tid // (BN // 4), (tid % (BN // 4)) * 4  # one float4 of the B tile
        a_src_row = min(row0 + a_row, M - 1)

        thread_results = cuda.local.array((TM, TN), float32)
        reg_m = cuda.local.array(TM, float32)
        reg_n = cuda.local.array(TN, float32)
        for i in range(TM):
            for j in range(TN):
                thread_results[i, j] = float32(0.0)

        for k0 in range(0, K, BK):
            # --- GMEM -> SMEM: float4 loads; A's float4 (one row, 4 k's) scattered into As[k, m]
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

    return sgemm_vectorize


def launch_config(M, N, K):
    """Grid over (N/128, M/128) tiles, 256 threads."""
    return tile_grid(M, N, BM, BN), (NUM_THREADS,)


STAGE = Stage(
    name="vectorize",
    label="6: vectorized GMEM/SMEM",
    kernel=make_kernel(True),
    scalar_kernel=make_kernel(False),
    launch_config=launch_config,
    tile=(BM, BN),
)
