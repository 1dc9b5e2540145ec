"""Stage 13, tf32x3_mma: FP32-accurate products on TF32 tensor cores (3xTF32).

TF32 keeps 10 of FP32's 23 mantissa bits. Split each operand into a TF32 ``big`` part and the TF32
rounding of its remainder, ``small = tf32(x - big)``: ``big + small`` carries about 21 bits. Then

    a * b ~ a_big * b_big + a_big * b_small + a_small * b_big

(the ``a_small * b_small`` term is below FP32's rounding) costs three tensor-core mma instead of
one, the two small products first. The tensor cores accumulate with truncation, so each 8-deep
step's three products start from zero and are added to the accumulators with FP32 adds (Ootomo
and Yokota's fix; chaining the accumulators through the mma measured 25x FP32's error). The
tensor cores' peak at a third of the rate is still several times the FP32 FMA pipe's; this version
reaches 1.07x cuBLAS FP32 on an H200 (docs/design.md), at better than FP32's accuracy.

The kernel is ``tf32_mma_multistage``'s with ``MODE = "3xtf32"`` (same tiles, pipeline and
fragment loads; ``mma.split_tf32``/``split_tf32_bits`` make the parts). Shapes, edges and
variants as there. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.
Compute capability 8.0+.

Source: NVIDIA CUTLASS example 27, "ampere_3xtf32_fast_accurate_tensorop_gemm"
(``OpMultiplyAddFastF32``); Ootomo and Yokota, "Recovering single precision accuracy from Tensor
Cores while surpassing the FP32 theoretical peak performance" (IJHPCA 2022).
"""

from . import k12_tf32_mma_multistage as k12

#: 128x128x16, 8 warps of 64x32 (64 accumulators per thread, plus the big and small fragments
#: of both operands and each step's fresh fragment: 254 registers, no spills). The fastest of the
#: 42 configurations of ``space("3xtf32")`` on an H200 at 4096^3; 64x64 warp tiles with BK = 32
#: spill and run at 55-72 % of it (bench/results/nvidia-h200/2026-11-22-fp16).
DEFAULT_CONFIG = dict(BM=128, BN=128, BK=16, WM=64, WN=32, NBUF=3, MINB=1)

STAGE = k12.make_stage(DEFAULT_CONFIG, mode="3xtf32")
