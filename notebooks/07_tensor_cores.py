# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Tensor cores from Python: `mma.sync`, `ldmatrix`, TF32, 3xTF32 and FP16
#
# Stages 1-10 multiply on the FP32 pipe: one FFMA per lane per instruction, and cuBLAS FP32 on an
# H200 runs that pipe at ~77 % of its peak. Tensor cores are a different unit: one warp-wide
# instruction, `mma.sync`, multiplies a 16x8 tile by an 8x8 one (TF32) or a 16x16 tile by a
# 16x8 one (FP16) and adds the result to a 16x8 accumulator, with the operands spread over the
# registers of the warp's 32 lanes. Numba has no API for them (no WMMA, no `mma`), but it can
# emit any PTX through an `@intrinsic` and llvmlite's `ir.InlineAsm`: that is all this package
# uses. The rungs:
#
# - stage 11, `tf32_mma`: the seed guide's V5, the smallest kernel that works (64x64x8 block, 4
#   warps, fragments read from SMEM element by element);
# - stage 12, `tf32_mma_multistage`: the `multistage` pipeline (`cp.async` ring) feeding
#   `ldmatrix`, large warp tiles, copies interleaved with the mma;
# - stage 13, `tf32x3_mma`: the same kernel computing FP32-accurate products from three TF32
#   ones (3xTF32);
# - stage 14, `hgemm_mma`: FP16 operands, FP32 sums (the seed's V6; `numba_gemm.hgemm`).

# %%
import _helpers as h
import numpy as np
from numba import cuda

import numba_gemm
from numba_gemm.kernels import k11_tf32_mma as k11
from numba_gemm.kernels import k12_tf32_mma_multistage as k12
from numba_gemm.ptx import mma

print("outputs from:", h.machine())
for s in numba_gemm.STAGES:
    if s.precision != "fp32":
        print(f"{s.label:<44} precision {s.precision:<7} config {dict(s.config) or '-'}")

# %% [markdown]
# ## One instruction, as an intrinsic
#
# `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}`
# takes ten 32-bit registers per lane (four of A, two of B, four accumulators) and returns four.
# The intrinsic below declares that signature to Numba (ten numbers in, a `UniTuple(float32, 4)`
# out), and its code generator emits the asm with one output per accumulator, unpacked from an
# LLVM struct. Two details decide whether it is correct at all: the integer operands must be
# exactly `int32` (a Python `+ 1` makes an int64 that does not lower), and the call carries LLVM's
# `convergent` attribute, so that the optimiser never moves it into control flow that only some
# lanes take: all 32 must execute it together.

# %%
h.show_source_between(mma, "def _mma(shape_ptx)", "def _shared_address")

# %% [markdown]
# ## Who holds what: the fragment maps
#
# The instruction fixes which lane supplies which element. With `g = lane >> 2` (a group of 4
# lanes, 0..7) and `q = lane & 3`, lane `(g, q)` holds `A[g, q]`, `A[g+8, q]`, `A[g, q+4]`,
# `A[g+8, q+4]` in `a0..a3`, `B[q, g]`, `B[q+4, g]` in `b0, b1`, and receives `D[g, 2q]`,
# `D[g, 2q+1]`, `D[g+8, 2q]`, `D[g+8, 2q+1]`. Drawn from the maps the package's model uses (the
# drawing asserts that every element is held exactly once):

# %%
h.draw_fragments()

# %% [markdown]
# A wrong map does not crash: it computes a different product. So the tests write these maps
# out in tiny kernels (`tests/test_mma.py`) and compare with NumPy, on a GPU (the real
# instruction) and on the CPU. On the simulator, `mma_tf32` is a plain-Python model: each lane
# publishes its ten registers to its warp's slot, waits at a barrier of its 32 lanes, and the
# first lane through assembles A, B and C *by these maps*, multiplies, and scatters D back. A
# kernel with a wrong index therefore fails on a laptop, not only on an H100:

# %%
h.show_source_between(mma, "    def _warp_op(value, op):", "    def to_tf32(x):")
h.show_source_between(mma, "def _tf32_product(frags)", "def _f16_product(frags)")

# %% [markdown]
# ## Stage 11: the teaching rung
#
# The seed's V5 shape: a 64x64 block tile, four warps of 32x32, each warp a 2x4 grid of 16x8
# accumulator fragments; per 8-deep K step a lane reads its A and B elements from SMEM by the maps
# above, rounds them to TF32 (`cvt.rna.tf32.f32`) and issues 8 mma. It works, and it is slow:
# every fragment element costs a scalar SMEM load and a conversion, for one mma per 16x8x8.

# %%
h.show_source(k11.sgemm_tf32_mma)

# %%
h.check_stages(["tf32_mma"], *h.demo_shape())

# %% [markdown]
# ## Stage 12: `ldmatrix`, a `cp.async` ring and big warp tiles
#
# Three changes make the tensor cores busy:
#
# 1. **`ldmatrix.x4`** loads four 8x8 matrices of 16-bit elements per warp in one instruction:
#    lane `l` gives the SMEM address of one 16-byte row, and each lane receives, of each matrix,
#    the 32-bit word `q` of row `g`, exactly the A-fragment map when the A tile is stored K-major
#    (`As[m, k]`), 4 floats per row. TF32 elements are 32-bit, so `ldmatrix` moves them as pairs
#    of halves; the transposing form only works for true 16-bit elements, which is why B (stored
#    `Bs[k, n]`, as B lies in GMEM) is read element by element in TF32.
# 2. **Warp tiles of 64x64**: 4x8 fragments, 32 mma per 8-deep step, so each fragment loaded
#    feeds 4 or 8 mma (128 accumulators per lane, 244 registers).
# 3. **The `multistage` ring** (`cp.async` into NBUF SMEM buffers) with the next tile's copies
#    issued *between* the first mma steps, not before them: their address arithmetic then
#    overlaps tensor-core work (docs/design.md: +17 % for the same tiles).
#
# The kernel builder (one function for stages 12-14, the arithmetic is a parameter):

# %%
h.show_source(k12._make_kernel.__wrapped__)  # (the function under its functools.cache)

# %% [markdown]
# ## TF32 rounding and the 3xTF32 split
#
# TF32 keeps 10 of FP32's 23 mantissa bits: rounding each operand costs ~2^-11 relative error
# per element, and a 4096-deep dot product about 3e-4 in the result. 3xTF32 (CUTLASS example
# 27) splits each operand `x = big + small`, `big = tf32(x)`, `small = tf32(x - big)`, and
# computes `a_big*b_big + a_big*b_small + a_small*b_big`: three mma instead of one, about 21
# mantissa bits per operand. On random numbers, with the package's own rounding model:

# %%
rng = np.random.default_rng(0)
x = rng.standard_normal(100_000).astype(np.float32)
big = mma.tf32_round(x)
small = mma.tf32_round(x - big)
for label, approx in (
    ("tf32(x)", big.astype(np.float64)),
    ("tf32(x) + tf32(x - tf32(x))", big.astype(np.float64) + small),
):
    err = np.abs(approx - x) / np.abs(x)
    print(f"{label:<30} max relative error {err.max():.2e}  (2^{np.log2(err.max()):.1f})")

# %% [markdown]
# One more trap: the tensor cores add with truncation, so chaining the accumulator through the
# three mma leaves TF32-like error in the sums (measured on an H200: 25x FP32's error at 4096^3).
# Stage 13 starts each step's three products from zero and adds the result to the accumulators
# with FP32 adds. On a small problem (the simulator runs one warp per block), stage 12 against
# stage 13:

# %%
SIM_TILES = dict(BM=32, BN=32, BK=8, WM=32, WN=32, NBUF=3, MINB=1)  # one warp: the simulator
tf32, x3 = (numba_gemm.get_stage(n) for n in ("tf32_mma_multistage", "tf32x3_mma"))
if h.simulator():
    tf32, x3 = tf32.with_config(SIM_TILES), x3.with_config(SIM_TILES)
h.check_stages([tf32, x3], *h.demo_shape(aligned=True))

# %% [markdown]
# ## Stage 14: FP16 in, FP32 sums
#
# With FP16 operands a 32-bit register holds two elements, the mma is `m16n8k16` (twice the K
# for the same registers), and `ldmatrix.x4.trans` can load B from its N-major tile,
# transposing on the way: both fragments come from `ldmatrix`, with no conversion at all. The
# entry point is `numba_gemm.hgemm` (BLAS's HGEMM): FP16 A and B, FP32 sums, FP32 output or FP16
# (`out_dtype="float16"`); the 16-byte copies need K and N multiples of 8.

# %%
M, N, K = (36, 40, 48) if h.simulator() else (4096, 4096, 4096)
a16 = rng.standard_normal((M, K)).astype(np.float16)
b16 = rng.standard_normal((K, N)).astype(np.float16)
ref = a16.astype(np.float64) @ b16.astype(np.float64)
stage = numba_gemm.get_stage("hgemm_mma")
if h.simulator():
    stage = stage.with_config(dict(SIM_TILES, BK=16))
for out_dtype in ("float32", "float16"):
    c = numba_gemm.hgemm(
        cuda.to_device(a16), cuda.to_device(b16), out_dtype=out_dtype, stage=stage
    ).copy_to_host()
    err = np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)
    print(
        f"hgemm {M}x{N}x{K}, {out_dtype} C: relative error vs float64 of the same FP16 inputs "
        f"{err:.1e}"
    )

# %% [markdown]
# ## Against cuBLAS
#
# The committed run (`python -m numba_gemm.tools.tensor_cores`): cuBLAS through `torch.mm` in
# the same process at each precision, every implementation checked against float64 before it is
# timed. The dashed lines are what `mma.sync` reaches from registers alone, with no loads at all;
# cuBLAS itself is above them because on Hopper it uses `wgmma` (asynchronous warpgroup mma on SMEM
# operands). This chapter's `mma.sync` stages do not; the package's Hopper stages (17-24) do, and
# are timed in docs/design.md §5, not here.

# %%
h.plot_tensor_cores()
print(
    f"{'size':>5} {'implementation':<26} {'kernel ms':>9} {'TFLOP/s':>8} "
    f"{'vs baseline':>11} {'vs ceiling':>10}  baseline"
)
for r in h.tc_results():
    if r["impl"] in h.TC_PLOTTED and r["kernel_ms"]:
        pct = f"{r['pct_baseline_kernel']:.0f} %" if r["pct_baseline_kernel"] else ""
        ceiling = h.MMA_SYNC_CEILING.get(h.TC_PLOTTED[r["impl"]])
        # 3xTF32 issues three TF32 mma per product: its mma rate is 3x its TFLOP/s
        mma_rate = r["tflops_kernel"] * (3 if "3xtf32" in r["impl"] else 1)
        of_ceiling = f"{mma_rate / ceiling:.0%}" if ceiling and "cuBLAS" not in r["impl"] else ""
        print(
            f"{r['n']:>5} {r['impl']:<26} {r['kernel_ms']:>9.3f} {r['tflops_kernel']:>8.1f} "
            f"{pct:>11} {of_ceiling:>10}  {r['baseline']}"
        )

# %% [markdown]
# Where that leaves the rungs (the table above): TF32 and FP16 run at about half of the
# `mma.sync` ceiling, well short of cuBLAS at the same precision, and 3xTF32 edges past cuBLAS
# FP32 (TF32 off) while being more accurate than it. The resource report of the same kernels
# (`python -m numba_gemm.tools.resources`; `mma` and `ldsm` count the `mma.sync` and `ldmatrix`
# instructions in the PTX) shows why the big warp tiles stop there: close to the 255-register
# limit, one block of 8 warps per SM, no room left to load the next step's fragments while the
# current step's mma run (docs/design.md has the profiler's stall breakdown).

# %%
print((h.TC_RESULTS_DIR / "resources.txt").read_text())
