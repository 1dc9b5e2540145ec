"""Stage 24, bf16_tma: BF16 on the TMA-fed, warp-specialized wgmma pipeline.

bfloat16 keeps float32's 8-bit exponent and drops its mantissa to 7 bits: the range of FP32 at
the size of FP16, the type most models train and serve in. Stage 20's kernel (``hgemm_tma``: a
producer warpgroup whose one thread asks the TMA for each K tile, consumer warpgroups that only
wait on the tile's mbarrier and multiply, persistent blocks) runs it unchanged but for two
things:

- the tensor maps describe ``bfloat16`` elements and the product is
  ``wgmma.mma_async ... .f32.bf16.bf16`` (``ptx.wgmma.mma_bf16``): the same 2-byte elements,
  boxes, swizzle and rate as FP16, so the same tiles are right for it and, without BF16 tuning
  data, the plan prices stage 20's tuned configurations for it (``Stage.tuned_as``);
- a bfloat16 C is stored through ``ptx.bf16.to_c`` (``cvt.rn.bf16.f32``: each FP32 result
  rounded once, to nearest even), read back through ``from_c`` when ``beta != 0``.

Numba has no bfloat16 array type, so A, B and a bfloat16 C reach the kernel as ``uint16`` arrays
of their bits (launch spec ``U``): the kernel only reads A's and B's shapes, the TMA moves their
bytes and the tensor cores read them as bfloat16.

Shapes: A ``(M, K)`` bfloat16 row-major; B ``(K, N)`` row-major (``NN``) or stored ``(N, K)``
(``NT``: ``x @ W.T``); C ``(M, N)`` float32 or bfloat16, row-major. A's and B's rows 16-byte
aligned (``K % 8 == 0``, ``N % 8 == 0``). Computes ``C = alpha * A @ B + beta * C`` with exact
BF16 products and FP32 sums; C is not read when ``beta == 0``. Compute capability 9.0 exactly
(``sm_90a``).

Source: PTX ISA 8.x, "wgmma.mma_async" (``.bf16``), "cvt" (``.bf16``); NVIDIA CUTLASS sm_90
``KernelTmaWarpSpecializedCooperative`` (its BF16 GEMMs use the FP16 tiles, 128 x 256 x 64).
"""

from . import k20_hgemm_tma as k20

#: 128x256x64 with four buffers: stage 20's default (two consumer warpgroups of 64 x 256 and a
#: producer warpgroup, 192 KB of SMEM), for the same 2-byte operands at the same product rate.
DEFAULT_CONFIG = dict(k20.DEFAULT_CONFIG)

STAGE = k20.make_stage(DEFAULT_CONFIG, kind="bf16")
