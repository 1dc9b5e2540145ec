"""Stage 23, tf32x3_tma: FP32-accurate products (3xTF32) on the TMA-fed, warp-specialized pipeline.

Stage 19's arithmetic (each operand split into TF32 ``big + small`` parts; per multiply three
products ``small * big``, ``big * small``, ``big * big``; each tile's products into fresh
accumulators, added to FP32 sums, in slices of the tile's rows when the whole tile's would not
fit the registers) on stage 22's kernel (``tf32_tma_rs``: the producer warp's TMA
copies, ``C^T = B^T A^T`` with B's fragments from registers): the kernel is ``tf32_tma_rs``'s
with ``mode = "3xtf32"``. A's small parts are written by the consumer threads to one of three
SMEM tiles per landed tile, while the previous tile's products run. Shapes, edges and variants
as stage 22. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.
Compute capability 9.0 exactly (``sm_90a``).

Source: NVIDIA CUTLASS example 27, "ampere_3xtf32_fast_accurate_tensorop_gemm"; Ootomo and
Yokota, "Recovering single precision accuracy from Tensor Cores while surpassing the FP32
theoretical peak performance" (IJHPCA 2022); PTX ISA 8.x, "wgmma.mma_async",
"cp.async.bulk.tensor".
"""

from . import k22_tf32_tma_rs as k22

#: 192x128x32: two consumer warpgroups of 64 columns x 192 rows (96 FP32 sums per thread; a
#: tile's products in two slices of 96 rows, 48 per-tile products per thread), three buffers of
#: 40 KB and three 24 KB tiles of small parts. At 128 x 128 (one slice) 4096^3 ran 2.13x cuBLAS
#: FP32 on an H200, at 192 x 128 2.22x; 8192^3 2.14x and 2.55x (docs/design.md §5.3).
DEFAULT_CONFIG = dict(BM=192, BN=128, BK=32, NBUF=3)

STAGE = k22.make_stage(DEFAULT_CONFIG, mode="3xtf32")
