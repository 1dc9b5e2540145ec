"""Stage 19, tf32x3_wgmma: FP32-accurate products on Hopper's warpgroup tensor cores (3xTF32).

Stage 13's arithmetic (each operand split into TF32 ``big + small`` parts, three products
``small * big``, ``big * small``, ``big * big`` per multiply, the tensor cores' truncating sums
flushed into FP32 accumulators) on stage 18's kernel (``C^T = B^T A^T`` with B's fragments from
registers and the A tile from 128-byte-swizzled SMEM through descriptors): the kernel is
``tf32_wgmma``'s with ``MODE = "3xtf32"``. A's small parts are made once per A tile by a pass
over SMEM (not once per warp fragment, as stage 13 must), and each BK tile's products are
flushed, not each 8-deep step's. Shapes, edges and variants as stage 18. Computes
``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``. Compute capability 9.0
exactly (``sm_90a``).

Source: NVIDIA CUTLASS example 27, "ampere_3xtf32_fast_accurate_tensorop_gemm"; Ootomo and
Yokota, "Recovering single precision accuracy from Tensor Cores while surpassing the FP32
theoretical peak performance" (IJHPCA 2022); PTX ISA 8.x, "wgmma.mma_async".
"""

from . import k18_tf32_wgmma as k18

#: 128x128x32: two warpgroups of 64 columns x 128 rows; 64 FP32 accumulators and two sets of
#: 64 per-tile products per thread; four buffers.
DEFAULT_CONFIG = dict(BM=128, BN=128, BK=32, NBUF=4, SPLITK=1)

STAGE = k18.make_stage(DEFAULT_CONFIG, mode="3xtf32")
