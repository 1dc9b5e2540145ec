"""Stage 11, tf32_mma: the products of stage 3's SMEM tiles on tensor cores, in TF32.

The FP32 ladder ends at the FMA pipe: 128 FP32 FMAs per clock per SM. A tensor core multiplies a
whole 16x8 by 8x8 tile in one warp-wide instruction (``mma.sync.aligned.m16n8k8`` with TF32
inputs: 10 mantissa bits, FP32 exponent and accumulation), many times the FMA rate. This is the
teaching rung: 64x64 block tile, BK = 8, 4 warps (2x2), each warp
computing a 32x32 tile as 2x4 fragments of 16x8; every K tile is copied to SMEM with plain
loads (zeros past the matrix) and, per 8-deep step, each lane reads its elements of the A and B
fragments (the PTX ISA's ownership map, ``numba_gemm.ptx.mma``), rounds them to TF32
(``cvt.rna.tf32.f32``) and issues 8 mma.

SMEM padding makes the fragment reads conflict-free: lane ``(g, q) = (lane >> 2, lane & 3)``
reads ``As[m + g, k + q]`` (pitch BK + 4 = 12 floats: ``12 g + q`` hits 32 distinct banks) and
``Bs[k + q, n + g]`` (pitch BN + 8 = 72: ``8 q + g`` mod 32, distinct).

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``; float32, row-major, C-contiguous; any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C`` with A and B rounded to TF32 (relative
error ~1e-3 of the FP32 result: ``registry.TOLERANCE["tf32"]``); C is not read when ``beta == 0``.
Needs compute capability 8.0+.

Source: PTX ISA, "Matrix Fragments for mma.m16n8k8" (.tf32); NVIDIA Ampere GA100 whitepaper
(TF32).
"""

from ..backend import cuda, float32, int32
from ..device import tile_grid
from ..ptx.mma import MMA_TF32, mma_tf32, to_tf32
from ._common import device_jit, store_c
from .stage import Stage

# --- tile constants
BM = 64
BN = 64
BK = 8
WM = 32  # warp tile
WN = 32
MMA_M, MMA_N, MMA_K = MMA_TF32  # one mma: 16x8 outputs, 8 deep
WARPS_M = BM // WM
WARPS_N = BN // WN
NUM_THREADS = 32 * WARPS_M * WARPS_N  # 128
MITER = WM // MMA_M  # fragments per warp tile along M: 2
NITER = WN // MMA_N  # ... along N: 4
FRAGS = MITER * NITER  # 16x8 accumulator fragments per warp: 8
AS_PITCH = BK + 4  # As[m, k]; 12 * g + q covers the 32 banks
BS_PITCH = BN + 8  # Bs[k, n]; 8 * q + g (mod 32) covers them
A_LOADS = BM * BK // NUM_THREADS  # elements of the A tile each thread copies: 4
B_LOADS = BK * BN // NUM_THREADS  # ... of the B tile: 4
assert BM % WM == 0 and BN % WN == 0, "warp tiles must tile the block"
assert WM % MMA_M == 0 and WN % MMA_N == 0 and BK % MMA_K == 0, "fragments must tile the warp"
assert BM * BK % NUM_THREADS == 0 and BK * BN % NUM_THREADS == 0, "copies split evenly"
assert AS_PITCH % 32 in (4, 12, 20, 28) and BS_PITCH % 32 in (8, 24), "conflict-free pads"


@device_jit
def store_fragment(C, r, c, d0, d1, d2, d3, alpha, beta, M, N):
    """Epilogue for a lane's part of one 16x8 accumulator fragment whose lane-(g, q) element
    ``(g, 2q)`` lands at ``C[r, c]``: ``d0, d1`` at ``(r, c), (r, c + 1)``, ``d2, d3`` eight rows
    below; only inside (M, N)."""
    if r < M:
        if c < N:
            store_c(C, r, c, d0, alpha, beta)
        if c + 1 < N:
            store_c(C, r, c + 1, d1, alpha, beta)
    if r + 8 < M:
        if c < N:
            store_c(C, r + 8, c, d2, alpha, beta)
        if c + 1 < N:
            store_c(C, r + 8, c + 1, d3, alpha, beta)


@cuda.jit
def sgemm_tf32_mma(A, B, C, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    As = cuda.shared.array((BM, AS_PITCH), float32)  # [m, k]
    Bs = cuda.shared.array((BK, BS_PITCH), float32)  # [k, n]
    tid = cuda.threadIdx.x
    warp, lane = tid // 32, tid % 32
    g, q = lane >> 2, lane & 3  # the lane's group and its place in the group
    wm0 = (warp // WARPS_N) * WM  # the warp's tile inside the block tile
    wn0 = (warp % WARPS_N) * WN
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN

    acc = cuda.local.array((FRAGS, 4), float32)  # (c0..c3) of each 16x8 fragment
    a_frag = cuda.local.array((MITER, 4), int32)  # TF32 bit patterns
    b_frag = cuda.local.array((NITER, 2), int32)
    for f in range(FRAGS):
        for i in range(4):
            acc[f, i] = float32(0.0)

    for k0 in range(0, K, BK):
        # --- GMEM -> SMEM: each thread copies 4 elements of each tile, zeros outside the matrix
        for i in range(A_LOADS):
            e = tid * A_LOADS + i
            r, c = e // BK, e % BK
            ok = row0 + r < M and k0 + c < K
            As[r, c] = A[row0 + r, k0 + c] if ok else float32(0.0)
        for i in range(B_LOADS):
            e = tid * B_LOADS + i
            r, c = e // BN, e % BN
            ok = k0 + r < K and col0 + c < N
            Bs[r, c] = B[k0 + r, col0 + c] if ok else float32(0.0)
        cuda.syncthreads()  # the tiles are complete before any warp reads its fragments

        # --- SMEM -> fragments (rounded to TF32), mma on tensor cores
        for kk in range(0, BK, MMA_K):
            for mi in range(MITER):
                m = wm0 + mi * MMA_M + g
                a_frag[mi, 0] = to_tf32(As[m, kk + q])
                a_frag[mi, 1] = to_tf32(As[m + 8, kk + q])
                a_frag[mi, 2] = to_tf32(As[m, kk + q + 4])
                a_frag[mi, 3] = to_tf32(As[m + 8, kk + q + 4])
            for ni in range(NITER):
                n = wn0 + ni * MMA_N + g
                b_frag[ni, 0] = to_tf32(Bs[kk + q, n])
                b_frag[ni, 1] = to_tf32(Bs[kk + q + 4, n])
            for mi in range(MITER):
                for ni in range(NITER):
                    f = mi * NITER + ni
                    acc[f, 0], acc[f, 1], acc[f, 2], acc[f, 3] = mma_tf32(
                        a_frag[mi, 0],
                        a_frag[mi, 1],
                        a_frag[mi, 2],
                        a_frag[mi, 3],
                        b_frag[ni, 0],
                        b_frag[ni, 1],
                        acc[f, 0],
                        acc[f, 1],
                        acc[f, 2],
                        acc[f, 3],
                    )
        cuda.syncthreads()  # every warp is done reading before the next tiles overwrite SMEM

    # --- epilogue: write C; the lane holds (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1) of each
    for mi in range(MITER):
        for ni in range(NITER):
            f = mi * NITER + ni
            store_fragment(
                C,
                row0 + wm0 + mi * MMA_M + g,
                col0 + wn0 + ni * MMA_N + 2 * q,
                acc[f, 0],
                acc[f, 1],
                acc[f, 2],
                acc[f, 3],
                alpha,
                beta,
                M,
                N,
            )


def launch_config(M, N, K):
    """Grid over (N/64, M/64) tiles, 128 threads (4 warps)."""
    return tile_grid(M, N, BM, BN), (NUM_THREADS,)


STAGE = Stage(
    name="tf32_mma",
    label="11: TF32 tensor cores (mma.sync)",
    kernel=sgemm_tf32_mma,
    launch_config=launch_config,
    precision="tf32",
    min_cc=(8, 0),
    tile=(BM, BN),
)
