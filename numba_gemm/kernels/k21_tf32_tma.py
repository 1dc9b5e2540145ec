"""Stage 21, tf32_tma: TF32 on the TMA-fed, warp-specialized wgmma pipeline, for ``x @ W.T``.

Stage 20's kernel (``hgemm_tma``: a producer warpgroup whose one thread asks the TMA for each K
tile, consumer warpgroups that only wait on the tile's mbarrier and multiply, buffers released
per consumer warp) on float32 operands read as TF32. A TF32 product reads both operands
K-major from SMEM (the instruction has no transposed TF32 operand), so this stage serves the
product whose two operands hold K along their rows: A ``(M, K)`` and B stored ``(N, K)``
(layout ``NT``: ``torch.nn.Linear``'s ``x @ W.T``), each a 128-byte swizzled box of 32 floats of
K per row. (Row-major B, ``NN``, stays with stage 18, which builds B's fragments in registers.)
Rows 16-byte aligned (``K % 4 == 0``); C ``(M, N)`` float32 row-major, any N. Computes
``C = alpha * A @ B + beta * C`` with TF32 products (inputs truncated to 10 mantissa bits) and
FP32 sums; C is not read when ``beta == 0``. Compute capability 9.0 exactly (``sm_90a``).

Source: PTX ISA 8.x, "wgmma.mma_async" (``.tf32``: K-major operands only), "cp.async.bulk.tensor";
NVIDIA CUTLASS sm_90 TF32 GEMMs (``KernelTmaWarpSpecializedCooperative``, TN layouts).
"""

from . import k20_hgemm_tma as k20

#: 256x128x32: four consumer warpgroups of 64 x 128 (64 FP32 accumulators per thread) and a
#: producer warpgroup; four buffers of 48 KB. The fastest of five at 4096^3 on an H200 (96.8 %
#: of cuBLAS TF32 by kernel time; docs/design.md §5.2).
DEFAULT_CONFIG = dict(BM=256, BN=128, BK=32, NBUF=4)

STAGE = k20.make_stage(DEFAULT_CONFIG, kind="tf32")
