"""Stage 14, hgemm_mma: FP16 operands on tensor cores with FP32 accumulation (HGEMM).

From ``tf32_mma_multistage`` (same cp.async ring, warp tiles and epilogue): the operands are FP16,
so a 16-byte copy moves 8 of them, the mma is ``m16n8k16`` (twice the K of the TF32 one, the same
registers: each 32-bit register holds two halves), and both fragments come from ``ldmatrix``
without conversion: A (``As[m, k]``, K-major) by ``ldmatrix.x4``, B (``Bs[k, n]``, N-major, as B
lies in GMEM) by ``ldmatrix.x4.trans``, which transposes 16-bit elements on the way (TF32's 32-bit
elements cannot be), two 8-column fragments per instruction. Per 16-deep step a 64x64 warp tile
issues 4 + 4 ``ldmatrix`` for 32 mma: the inner loop is nearly all tensor-core work.

Shapes: A ``(M, K)``, B ``(K, N)`` float16; C ``(M, N)`` float32 (or float16 through
``api.hgemm(out_dtype=...)``); row-major, C-contiguous, rows 16-byte aligned (``K % 8 == 0``,
``N % 8 == 0``: the copies are 16 bytes; there is no scalar variant). Any ``M`` and multiples of
8 for ``N, K``; edges zero-filled or clamped as in stage 12. Computes
``C = alpha * A @ B + beta * C`` with FP32 products and sums (FP16 inputs are exact in FP32); C is
not read when ``beta == 0``. Compute capability 8.0+.

Source: NVIDIA CUTLASS sm_80 ``MmaMultistage`` with ``ldmatrix`` for both operands; PTX ISA,
"mma.m16n8k16" and "ldmatrix" (``.trans``).
"""

from . import k12_tf32_mma_multistage as k12

#: 256x128x64, 8 warps of 64x64: per 16-deep step and warp 4 ``ldmatrix.x4`` (A), 4
#: ``ldmatrix.x4.trans`` (B), 32 mma; three SMEM buffers (159 KB); 255 registers, no spills. The
#: fastest of the 32 configurations of ``space("fp16")`` on an H200 at 4096^3, within 2 % of
#: 128x256x64 and 128x128x64; 64x32 warp tiles are 25 % slower
#: (bench/results/nvidia-h200/2026-11-22-fp16).
DEFAULT_CONFIG = dict(BM=256, BN=128, BK=64, WM=64, WN=64, NBUF=3, MINB=1)

STAGE = k12.make_stage(DEFAULT_CONFIG, mode="fp16")
