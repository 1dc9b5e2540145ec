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
# Stages 1-10 multiply on the FP32 pipe: one FFMA per lane per instruction. Tensor cores are a
# different unit: one warp-wide instruction, `mma.sync`, multiplies a 16x8 tile of A by an 8x8
# tile of B (TF32) or a 16x16 tile by a 16x8 one (FP16) and adds the product to a 16x8
# accumulator tile, with the operands spread over the registers of the warp's 32 lanes. Numba has
# no API for them (no WMMA, no `mma`), but it can emit any PTX instruction through an
# `@intrinsic` and llvmlite's `ir.InlineAsm`: that is all this package uses. The stages:
#
# - stage 11, `tf32_mma`: the smallest kernel that works: small SMEM tiles, every lane reading
#   its fragment elements from SMEM one at a time;
# - stage 12, `tf32_mma_multistage`: notebook 05's `cp.async` ring feeding `ldmatrix`, and big
#   warp tiles;
# - stage 13, `tf32x3_mma`: the same kernel computing FP32-accurate products from three TF32
#   ones (3xTF32);
# - stage 14, `hgemm_mma`: FP16 operands, FP32 sums (`numba_gemm.hgemm`).
#
# Each is rated against cuBLAS in its own precision: TF32 against cuBLAS TF32, 3xTF32 (FP32
# accuracy) against cuBLAS FP32, FP16 against cuBLAS FP16.
#
# Where the numbers come from: the cells that run and check kernels run on the machine printed
# below (the Numba CUDA simulator or a GPU); every timing and profile is from the H200 benchmark
# run stored in the repository (its folder is printed under the first cell's output).

# %%
import _figures_tensor_cores as fig
import _helpers as h
import matplotlib.pyplot as plt
import numpy as np
from numba import cuda, float32
from numba.core.types import float16

import numba_gemm
from numba_gemm.kernels import k11_tf32_mma as k11
from numba_gemm.kernels import k12_tf32_mma_multistage as k12
from numba_gemm.ptx import mma
from numba_gemm.ptx.vecmem import SMEM_ALIGN

print("outputs from:", h.machine())
print("GPU timings and profiles from:", h.RESULTS_DIR.parent.relative_to(h.ROOT))
STAGES = ["tf32_mma", "tf32_mma_multistage", "tf32x3_mma", "hgemm_mma"]
for name in STAGES:
    s = numba_gemm.get_stage(name)
    print(f"{s.label:<44} precision {s.precision:<7} config {dict(s.config) or '-'}")

# %% [markdown]
# `numba_gemm/ptx/mma.py` defines each instruction twice: as a GPU intrinsic, and as a
# plain-Python model that the simulator runs instead. A process holds only one of the two, so to
# show both on either machine, `h.show_defs` finds a definition by its name in the syntax tree of
# the module (or of a function: the kernel builder of stage 12 defines its parts inside itself).


# %% [markdown]
# ## One instruction, as an intrinsic
#
# `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}`
# takes ten 32-bit registers per lane (four of A, two of B, four accumulators) and returns four.
# The intrinsic below declares that signature to Numba (ten numbers in, a `UniTuple(float32, 4)`
# out), and its code generator emits the asm with one output per accumulator, unpacked from an
# LLVM struct. Two details decide whether it is correct at all: the integer operands are cast to
# exactly `int32` (the asm's `r` registers are 32-bit), and the call carries LLVM's `convergent`
# attribute, so that the optimiser never moves it into control flow that only some lanes take:
# all 32 must execute it together.

# %%
h.show_defs(mma, "_mma")

# %% [markdown]
# ## Who holds what: the fragment maps
#
# The instruction fixes which lane supplies which element. With `g = lane >> 2` (a group of 4
# lanes, 0..7) and `q = lane & 3`, lane `(g, q)` holds `A[g, q]`, `A[g+8, q]`, `A[g, q+4]`,
# `A[g+8, q+4]` in `a0..a3`, `B[q, g]`, `B[q+4, g]` in `b0, b1`, and receives `D[g, 2q]`,
# `D[g, 2q+1]`, `D[g+8, 2q]`, `D[g+8, 2q+1]` (PTX ISA, "Matrix Fragments for mma.m16n8k8").
# The drawing asserts that every element is held exactly once:

# %%
h.draw_fragments()

# %% [markdown]
# A wrong map does not crash: it computes a different product. On the simulator, `mma_tf32` is a
# plain-Python model: each lane publishes its ten registers to its warp's slot, waits at a
# barrier of its 32 lanes, and the first lane through assembles A, B and C *by these maps*,
# multiplies, and scatters D back (the tests compare the same maps with the real instruction on a
# GPU, `tests/test_mma.py`). So a kernel with a wrong index fails on a laptop, not only on an
# H100:

# %%
h.show_defs(mma, "_warp_op")
h.show_source(mma._tf32_product)

# %% [markdown]
# The maps drawn above against that model: pack a random A and B into the 32 lanes' registers by
# the drawn maps, run the model, unpack D by the drawn map, compare with NumPy's product:

# %%
maps = h.fragment_maps()
rng = np.random.default_rng(0)
A = mma.tf32_round(rng.standard_normal((16, 8)).astype(np.float32))  # exact in TF32
B = mma.tf32_round(rng.standard_normal((8, 8)).astype(np.float32))
regs = np.zeros((32, 10), dtype=object)  # a0..a3, b0, b1 (TF32 bit patterns), c0..c3
regs[:, 6:] = 0.0
for name, X, first in (("A (16x8)", A, 0), ("B (8x8)", B, 4)):
    for r, c, lane, k in maps[name][1]:
        regs[lane, first + k] = int(X[r, c].view(np.int32))
D = mma._tf32_product(regs)  # (32, 4): d0..d3 of every lane
got = np.zeros((16, 8))
for r, c, lane, k in maps["C, D (16x8)"][1]:
    got[r, c] = D[lane, k]
ref = A.astype(np.float64) @ B.astype(np.float64)
diff = np.abs(got / ref - 1).max()
print(f"the model, by the drawn maps, against A @ B: max relative difference {diff:.1e}")

# %% [markdown]
# ## Stage 11: the simplest kernel
#
# The block tile is copied to SMEM with plain loads (zeros past the matrix); its warps split it
# into warp tiles of `MITER x NITER` accumulator fragments of 16x8. Per 8-deep K step each lane
# reads its A and B elements from SMEM *by the maps above*, rounds them to TF32
# (`cvt.rna.tf32.f32`: `to_tf32`) and issues one mma per fragment. It works, and it is slow: every
# fragment element costs a scalar SMEM load and a conversion, and a warp's mma per step are few.

# %%
print({k: getattr(k11, k) for k in ("BM", "BN", "BK", "WM", "WN", "NUM_THREADS", "MITER", "NITER")})
h.show_source(k11.sgemm_tf32_mma)

# %%
h.check_stages(["tf32_mma"], *h.demo_shape())

# %% [markdown]
# ## Stage 12: `ldmatrix`, big warp tiles and a `cp.async` ring
#
# Three changes make the tensor cores busier.
#
# **1. `ldmatrix`.** `ldmatrix.sync.aligned.m8n8.x4.shared.b16` loads four 8x8 matrices of 16-bit
# elements per warp in one instruction: lane `l` gives the SMEM address of one 16-byte row (row
# `l % 8` of matrix `l // 8`), and every lane receives, of each matrix `i`, the 32-bit word `q` of
# row `g` in its register `r_i`. The `.trans` form transposes each matrix on the way. The model
# the simulator runs says exactly that:

# %%
h.show_defs(mma, "_ldmatrix")

# %% [markdown]
# The kernel's A tile is K-major in SMEM (`As[m, k]`, as A lies in GMEM), four floats to a
# 16-byte row. TF32 elements are 32-bit, so `ldmatrix` moves them as pairs of 16-bit halves:
# word `q` of row `g` of the first matrix is the float `As[g, q]`, and one `ldmatrix.x4`
# delivers a whole A fragment. B (`Bs[k, n]`, as B lies in GMEM) would need the transposing
# form, which only moves true 16-bit elements, so in TF32 each lane reads its two B elements one
# by one. The two fragment loaders of the kernel builder (`MMA_K // 2`: the 4 floats of a row):

# %%
h.show_defs(k12._make_kernel.__wrapped__, "_load_a", "_load_b")

# %% [markdown]
# To see the instruction work, here is one warp doing one TF32 step of stage 12 on a single 16x8
# A tile and 8x8 B tile: A through `ldmatrix.x4` with `_load_a`'s address (at `wm0 = mi = kk =
# 0`), B by `_load_b`'s two reads, then one `mma_tf32`. The kernel records the address each lane
# gave and the registers each lane got; A holds the numbers 0..127 (`A[r, c] = 8 r + c`), so a
# register's value says which element it received. On a GPU this is the hardware's answer; on the
# simulator, the model's.

# %%
MMA_M, MMA_N, MMA_K = mma.MMA_TF32
MMA_K16 = mma.MMA_F16[2]  # FP16: 16 deep
N16 = 2 * MMA_N  # the FP16 B tile below: two 8-column fragments


@cuda.jit
def tf32_step(a, b, addr, regs, d):
    """One warp: A (16x8) -> As[m, k] -> ldmatrix.x4 (as ``_load_a``); B (8x8) -> Bs[k, n] -> two
    reads per lane (as ``_load_b``); D = one mma_tf32 with zero accumulators."""
    As = cuda.shared.array((MMA_M, MMA_K), float32, alignment=SMEM_ALIGN)
    Bs = cuda.shared.array((MMA_K, MMA_N), float32, alignment=SMEM_ALIGN)
    lane = cuda.threadIdx.x
    for i in range(lane, MMA_M * MMA_K, 32):
        As[i // MMA_K, i % MMA_K] = a[i // MMA_K, i % MMA_K]
    for i in range(lane, MMA_K * MMA_N, 32):
        Bs[i // MMA_N, i % MMA_N] = b[i // MMA_N, i % MMA_N]
    cuda.syncthreads()  # the tiles are in SMEM before any lane reads them
    r, c = lane & 15, (lane >> 4) * (MMA_K // 2)  # _load_a's address
    addr[lane, 0], addr[lane, 1] = r, c
    r0, r1, r2, r3 = mma.ldmatrix_x4(As, r, c)
    regs[lane, 0], regs[lane, 1], regs[lane, 2], regs[lane, 3] = r0, r1, r2, r3
    g, q = lane >> 2, lane & 3
    b0 = mma.round_tf32_bits(mma.float_bits(Bs[q, g]))  # _load_b's reads
    b1 = mma.round_tf32_bits(mma.float_bits(Bs[q + 4, g]))
    z = float32(0.0)
    d0, d1, d2, d3 = mma.mma_tf32(
        mma.round_tf32_bits(r0),
        mma.round_tf32_bits(r1),
        mma.round_tf32_bits(r2),
        mma.round_tf32_bits(r3),
        b0,
        b1,
        z,
        z,
        z,
        z,
    )
    d[g, 2 * q], d[g, 2 * q + 1], d[g + 8, 2 * q], d[g + 8, 2 * q + 1] = d0, d1, d2, d3


a = np.arange(MMA_M * MMA_K, dtype=np.float32).reshape(MMA_M, MMA_K)  # A[r, c] = 8 r + c
b = np.arange(MMA_K * MMA_N, dtype=np.float32).reshape(MMA_K, MMA_N) % 7 - 3
addr = cuda.to_device(np.full((32, 2), -1, np.int32))
regs = cuda.to_device(np.zeros((32, 4), np.int32))
d = cuda.to_device(np.full((MMA_M, MMA_N), np.nan, np.float32))
tf32_step[1, 32](cuda.to_device(a), cuda.to_device(b), addr, regs, d)
addr, regs, d = addr.copy_to_host(), regs.copy_to_host(), d.copy_to_host()

got = regs.view(np.float32).astype(int)  # element number 8 r + c of each lane's r0..r3
words = [(ln, k, [divmod(int(got[ln, k]), MMA_K)]) for ln in range(32) for k in range(4)]
held = {(ln, k): (r, c) for r, c, ln, k in maps["A (16x8)"][1]}
print("ldmatrix.x4 delivered the A fragment map:", all(held[ln, k] == e[0] for ln, k, e in words))
print("D == A @ B:", np.array_equal(d, a @ b))

# %% [markdown]
# The picture of that run: each 16-byte row outlined in black is the one whose address the lane
# beside it gave (lanes 0-15 the first 4 floats of rows 0-15, lanes 16-31 the last 4); each float
# is labelled with the lane that received it and coloured by the register. Register `r_i` of
# every lane comes from the matrix whose rows lanes `8i .. 8i+7` addressed, and lane `(g, q)`
# gets row `g`, float `q` of it: the A map drawn earlier (`a1` is rows 8-15, `a2` the second
# half of K).

# %%
_, ax = plt.subplots(figsize=(6.5, 6.2))
fig.draw_ldmatrix(
    ax,
    (MMA_M, MMA_K),
    4,
    addr,
    words,
    "ldmatrix.x4 of a float32 As[m, k] tile (stage 12's A fragment)\n"
    "black: the row each lane addresses; number: the lane that receives the float",
)
plt.tight_layout()
plt.show()

# %% [markdown]
# **2. Warp tiles of `WM x WN`.** A warp holds `MITER x NITER` accumulator fragments; per 8-deep
# step it loads `MITER` A fragments (one `ldmatrix.x4` each) and `NITER` B fragments and issues
# one mma per pair, so each fragment loaded feeds `NITER` or `MITER` mma. With the default tiles:

# %%
cfg = dict(k12.DEFAULT_CONFIG)
dd = k12.derived(cfg)
frags = dd["MITER"] * dd["NITER"]
print(f"config {cfg}")
print(
    f"per warp and 8-deep step: {dd['MITER']} ldmatrix.x4 (A), {2 * dd['NITER']} scalar SMEM "
    f"loads per lane (B), {frags} mma; {4 * frags} accumulators per lane; "
    f"{dd['NUM_THREADS'] // 32} warps per block"
)

# %% [markdown]
# **3. The `cp.async` ring of notebook 05** (NBUF SMEM buffers, NBUF - 1 tiles in flight), with
# one change: the next tile's copies are issued *between* the first mma steps of the current
# tile, not before them, so that their address arithmetic overlaps tensor-core work (measured on
# an H200 with the tiles fixed, that placement made the kernel 10-23 % faster: docs/design.md §5,
# "Rules"). One tile's work:

# %%
h.show_defs(k12._make_kernel.__wrapped__, "_k_step", "tile")

# %% [markdown]
# and the kernel around it: the prologue that fills the ring, the K loop (wait for tile `t`,
# barrier, `tile`), the epilogue.

# %%
h.show_defs(k12._make_kernel.__wrapped__, "sgemm_tf32_mma_multistage")

# %% [markdown]
# ## TF32 rounding and the 3xTF32 split
#
# TF32 keeps 10 of FP32's 23 mantissa bits, so rounding an operand to TF32 costs up to 2^-11
# relative error. 3xTF32 (CUTLASS example 27) splits each operand `x = big + small`,
# `big = tf32(x)`, `small = tf32(x - big)`, and computes `a_big*b_big + a_big*b_small +
# a_small*b_big`: three mma instead of one (the dropped `a_small*b_small` is below FP32's
# rounding). On random numbers, with the package's own rounding model, `big + small` keeps
# nearly all of an FP32 operand:

# %%
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
# three mma leaves TF32-like error in the sums (the comment in the code below gives the H200
# measurement: 2.9e-5 relative error at 4096^3, 25x FP32's). Stage 13 therefore starts each
# step's three products from zero and adds the result to the accumulators with FP32 adds.
# Stage 12's builder takes the arithmetic as its `MODE`; the per-fragment mma of both:

# %%
h.show_defs(k12._make_kernel.__wrapped__, "_mma")

# %% [markdown]
# Both on the demo problem (4096-cubed on the GPU, a few tiles on the simulator), after an FP32
# stage of notebook 05 (stage 9, `double_buffering`) for comparison (the simulator runs one warp per
# block, so the tensor-core tiles shrink to one warp tile there; on a GPU the stages run with their
# own tiles). 3xTF32's error is at or below the FP32 stage's, TF32's a few orders of magnitude
# above:

# %%
SIM_TILES = dict(BM=32, BN=32, BK=8, WM=32, WN=32, NBUF=3, MINB=1)  # one warp: the simulator
tf32, x3 = (numba_gemm.get_stage(n) for n in ("tf32_mma_multistage", "tf32x3_mma"))
if h.simulator():
    tf32, x3 = tf32.with_config(SIM_TILES), x3.with_config(SIM_TILES)
h.check_stages(["double_buffering", tf32, x3], *h.demo_shape(aligned=True))

# %% [markdown]
# ## Stage 14: FP16 in, FP32 sums
#
# With FP16 operands a 32-bit register holds two elements, the mma is `m16n8k16` (twice the K
# for the same registers), and both fragments come from `ldmatrix` with no conversion at all:
# A by `ldmatrix.x4` from `As[m, k]` (8 halves to a 16-byte row), and B by `ldmatrix.x4.trans`
# from `Bs[k, n]`, which transposes the 16-bit elements on the way and delivers the B fragments
# of two neighbouring 8-column slices at once. The same experiment as above, FP16, one warp,
# addresses as `_load_a` and `_load_b` compute them, a 16x16 product as two mma:


# %%
@cuda.jit
def f16_step(a, b, addr, regs, d):
    """One warp: A (16x16) -> As[m, k] -> ldmatrix.x4; B (16x16) -> Bs[k, n] -> ldmatrix.x4.trans
    (as ``_load_a``, ``_load_b`` in FP16 mode); D (16x16) = two mma_f16 (n 0-7, n 8-15)."""
    As = cuda.shared.array((MMA_M, MMA_K16), float16, alignment=SMEM_ALIGN)
    Bs = cuda.shared.array((MMA_K16, N16), float16, alignment=SMEM_ALIGN)
    lane = cuda.threadIdx.x
    for i in range(lane, MMA_M * MMA_K16, 32):
        As[i // MMA_K16, i % MMA_K16] = a[i // MMA_K16, i % MMA_K16]
        Bs[i // N16, i % N16] = b[i // N16, i % N16]
    cuda.syncthreads()  # the tiles are in SMEM before any lane reads them
    ra, ca = lane & 15, (lane >> 4) * (MMA_K16 // 2)  # _load_a's address
    rb, cb = lane & 15, (lane >> 4) * MMA_N  # _load_b's (FP16: ldmatrix.x4.trans)
    addr[lane, 0], addr[lane, 1], addr[lane, 2], addr[lane, 3] = ra, ca, rb, cb
    a0, a1, a2, a3 = mma.ldmatrix_x4(As, ra, ca)
    b0, b1, b2, b3 = mma.ldmatrix_x4_trans(Bs, rb, cb)
    regs[lane, 0], regs[lane, 1], regs[lane, 2], regs[lane, 3] = a0, a1, a2, a3
    regs[lane, 4], regs[lane, 5], regs[lane, 6], regs[lane, 7] = b0, b1, b2, b3
    z = float32(0.0)
    d0, d1, d2, d3 = mma.mma_f16(a0, a1, a2, a3, b0, b1, z, z, z, z)  # columns 0-7
    e0, e1, e2, e3 = mma.mma_f16(a0, a1, a2, a3, b2, b3, z, z, z, z)  # columns 8-15
    g, q = lane >> 2, lane & 3
    d[g, 2 * q], d[g, 2 * q + 1], d[g + 8, 2 * q], d[g + 8, 2 * q + 1] = d0, d1, d2, d3
    c = MMA_N + 2 * q
    d[g, c], d[g, c + 1], d[g + 8, c], d[g + 8, c + 1] = e0, e1, e2, e3


n16 = MMA_M * MMA_K16
a16 = np.arange(n16, dtype=np.float16).reshape(MMA_M, MMA_K16)  # A[r, c] = 16 r + c
b16 = np.arange(n16, dtype=np.float16).reshape(MMA_K16, N16)  # B[k, n] = 16 k + n
addr = cuda.to_device(np.full((32, 4), -1, np.int32))
regs = cuda.to_device(np.zeros((32, 8), np.int32))
d = cuda.to_device(np.full((MMA_M, N16), np.nan, np.float32))
f16_step[1, 32](cuda.to_device(a16), cuda.to_device(b16), addr, regs, d)
addr, regs, d = addr.copy_to_host(), regs.copy_to_host(), d.copy_to_host()

halves = regs.view(np.float16).astype(int).reshape(32, 8, 2)  # (lane, register, low/high half)
a_words = [
    (ln, k, [divmod(int(e), MMA_K16) for e in halves[ln, k]]) for ln in range(32) for k in range(4)
]
b_words = [
    (ln, k, [divmod(int(e), N16) for e in halves[ln, 4 + k]]) for ln in range(32) for k in range(4)
]
ref = a16.astype(np.float64) @ b16.astype(np.float64)
print(f"D vs A @ B: max relative difference {np.abs(d / ref - 1).max():.1e}")

_, (ax, bx) = plt.subplots(1, 2, figsize=(14, 6.6))
fig.draw_ldmatrix(
    ax,
    (MMA_M, MMA_K16),
    8,
    addr[:, :2],
    a_words,
    "A: ldmatrix.x4 of an FP16 As[m, k] tile\none word = two halves along k (low half first)",
)
fig.draw_ldmatrix(
    bx,
    (MMA_K16, N16),
    8,
    addr[:, 2:],
    b_words,
    "B: ldmatrix.x4.trans of an FP16 Bs[k, n] tile\none word = two halves along k (transposed)",
)
plt.tight_layout()
plt.show()

# %% [markdown]
# In A, lane `(g, q)` gets the pair `A[g, 2q:2q+2]` of each matrix: `a0..a3` of the FP16
# fragment map (`numba_gemm/ptx/mma.py`'s docstring), the four matrices being rows 0-7 / 8-15 by
# k 0-7 / 8-15. In B the transpose turns each addressed row of `Bs` (8 values of n at one k) into
# a column: lane `(g, q)` gets the pair `B[2q:2q+2, g]`, the `b0`/`b1` layout the mma wants, and
# `r2, r3` hold the same for columns 8-15, the next fragment. The `D vs A @ B` line above
# confirms that the registers so loaded are the ones the mma expects.
#
# The entry point is `numba_gemm.hgemm` (BLAS's HGEMM): FP16 A and B, FP32 sums, FP32 output or
# FP16 (`out_dtype="float16"`); the 16-byte copies need K and N multiples of 8.

# %%
M, N, K = (36, 40, 48) if h.simulator() else (4096, 4096, 4096)
f16 = numba_gemm.get_stage("hgemm_mma")
if h.simulator():
    f16 = f16.with_config(dict(SIM_TILES, BK=16))
a16 = rng.standard_normal((M, K)).astype(np.float16)
b16 = rng.standard_normal((K, N)).astype(np.float16)
ref = a16.astype(np.float64) @ b16.astype(np.float64)
for out_dtype in ("float32", "float16"):
    out = np.full((M, N), np.nan, dtype=out_dtype)
    c = numba_gemm.hgemm(
        cuda.to_device(a16), cuda.to_device(b16), out=cuda.to_device(out), stage=f16
    ).copy_to_host()
    err = np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)
    print(
        f"hgemm {M}x{N}x{K}, {out_dtype} C (NaN-poisoned): relative error vs float64 of the same "
        f"FP16 inputs {err:.1e}, all written: {bool(np.isfinite(c).all())}"
    )

# %% [markdown]
# ## The ceilings
#
# What could these kernels reach? Per SM and clock, Hopper's tensor cores do twice the dense math
# of the A100's ("NVIDIA H100 Tensor Core GPU Architecture" whitepaper), whose SM does 1024 dense
# FP16 FMA per clock (256 per tensor core, four tensor cores) and half that in TF32 ("NVIDIA A100
# Tensor Core GPU Architecture" whitepaper). On Hopper that rate belongs to `wgmma`, the
# asynchronous warpgroup instruction that reads its operands from SMEM (notebook 08); NVIDIA
# documents no rate for `mma.sync` there, so its ceiling has to be estimated from measurements.
# The benchmark run stored in the repository profiled one call of each stage at 4096^3 with
# Nsight Compute, which counts the cycles the tensor pipe was busy. It gives that busy share two
# ways: of the *elapsed* cycles (`sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed`:
# every cycle from the kernel's start to its end) and of the *active* cycles (`..._active`: only
# the cycles in which the SM had a block to run, so the last, part-filled wave counts less);
# the second is a little higher. This notebook uses the elapsed share throughout, because it
# divides a rate measured over the elapsed time: a stage's mma FLOP/s in that call divided by
# it estimates what `mma.sync` gives with the pipe busy every cycle (3xTF32 issues three mma per
# product, so its mma rate is three times its FLOP/s). A second, independent figure is printed
# beside each estimate: the rate of a kernel that issues `mma.sync` on register operands alone,
# with no loads, measured on an H200 while this package was developed (not part of this run;
# docs/design.md §1 records it).

# %%
meta, _ = h.results()
sms, clock_hz = meta["sm_count"], float(meta["clocks"]["max_sm"].split()[0]) * 1e6
DENSE_FMA_PER_CLOCK_PER_SM = {"TF32": 2 * 512, "FP16": 2 * 1024}  # twice A100's (whitepapers)
REGISTERS_ONLY = {"TF32": 303, "FP16": 617}  # TFLOP/s, registers-only mma.sync: design.md §1
BUSY = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"  # share of elapsed cycles
flop = 2 * 4096**3  # the profiled call
ceiling = {}
print(f"{meta['gpu']}: {sms} SMs, {clock_hz / 1e9:.2f} GHz maximum SM clock")
for p, stage, mmas in (
    ("TF32", "tf32_mma_multistage", 1),
    ("TF32", "tf32x3_mma", 3),
    ("FP16", "hgemm_mma", 1),
):
    dense = sms * clock_hz * 2 * DENSE_FMA_PER_CLOCK_PER_SM[p]
    rate = mmas * flop / (h.ncu(stage, "gpu__time_duration.sum") * 1e-9)  # mma FLOP/s
    busy = h.ncu(stage, BUSY) / 100
    full = rate / busy
    ceiling[p] = max(ceiling.get(p, 0), full)
    print(
        f"{p} dense: {sms} x {clock_hz / 1e9:.2f} GHz x 2 x {DENSE_FMA_PER_CLOCK_PER_SM[p]} FMA "
        f"= {dense / 1e12:.0f} TFLOP/s.\n  {stage:<19} {rate / 1e12:5.1f} TFLOP/s of mma, tensor "
        f"pipe busy {busy:.1%} of elapsed cycles -> estimate {full / 1e12:.0f} TFLOP/s busy every "
        f"cycle ({full / (2 * sms * clock_hz):.0f} FMA per clock per SM, {full / dense:.0%} of "
        f"dense)"
    )
for p, v in REGISTERS_ONLY.items():
    print(
        f"{p}: a registers-only mma.sync kernel measured {v} TFLOP/s on an H200 "
        f"(docs/design.md §1, not this run): {v / (ceiling[p] / 1e12):.0%} of the estimate above"
    )

# %% [markdown]
# So `mma.sync` on Hopper tops out well below the tensor cores' dense rate, and the stages of this
# notebook keep the pipe busy about half of the time: they run at about half of a ceiling that is
# itself a fraction of what cuBLAS can use.
#
# ## Against cuBLAS
#
# The H200 benchmark run stored in the repository (`python -m numba_gemm.bench`): every stage
# and cuBLAS in every precision in the same process, each result compared with the run's
# reference product before it is timed. Kernel time (the median of 20 timed calls); each stage's
# percentage is of the cuBLAS of its own precision, whose columns come first. Stage 14 does not
# run at 4095 (SKIPPED): its 16-byte copies need K and N multiples of 8. Below the table, each
# result's error against the reference, with an FP32 stage of notebook 05 (stage 9,
# `double_buffering`) for comparison.

# %%
h.print_results(STAGES)
print(f"\nrelative error against the run's reference ({meta['reference']}) at 4096^3:")
for name in ["double_buffering", *STAGES, "cublas_tf32", "cublas_fp16"]:
    r = h.result(name, 4096)
    print(f"  {r['label']:<44} {r['rel_error']:.1e}")

print("\nfrom 4096^3 to 4095^3 (GFLOP/s; 4095 is not a multiple of any tile):")
for name in ["cublas_tf32", "cublas_fp32", "cublas_fp16", *STAGES]:
    a, b = h.result(name, 4096), h.result(name, 4095)
    if a and b and a["gflops"] and b["gflops"]:
        ratio = b["gflops"] / a["gflops"]
        print(f"  {a['label']:<44} {a['gflops']:>9,.0f} -> {b['gflops']:>9,.0f} ({ratio:.2f}x)")

# %% [markdown]
# The TF32 and FP16 stages stay well short of cuBLAS in their precision over the powers of two, and
# stage 11 falls further behind as they grow. 3xTF32 is the exception: it is rated against cuBLAS
# FP32, which runs on the FP32 pipe, and the tensor cores' rate is high enough that three products
# per step still compete with it. Below the table, the errors against the run's reference, cuBLAS
# FP32: stage 9's is 0, its result bit for bit the reference's (cuBLAS FP32's kernel and the FP32
# stages add each dot product's K terms in the same order, one fused multiply-add at a time), so the
# fair FP32 comparison is the check against float64 earlier, where 3xTF32's error was at or below
# the FP32 stage's. Here 3xTF32's error is still orders of magnitude below the TF32 results', which
# all sit at TF32's level.
#
# The 4095 row is different because cuBLAS is: the last lines show cuBLAS TF32 and FP16 losing most
# of their speed from 4096^3 to 4095^3 and cuBLAS FP32 little; stage 11 gains, stage 12 loses a
# share close to cuBLAS TF32's, stage 13 more than its cuBLAS FP32. A row of 4095 floats is 16,380
# bytes, not a multiple of 16, so its rows cannot be read in aligned 16-byte pieces, the loads
# tensor-core kernels are built on (this package's TMA stages refuse such rows for that reason,
# notebook 08). The run has no profile at 4095 to show which kernel cuBLAS runs there; the table
# shows what it costs. So stage 11's much higher percentage at 4095 is mostly cuBLAS TF32's drop,
# with a smaller part from stage 11's own gain, and stage 13's lower one is its own drop against a
# cuBLAS FP32 that hardly slows.
#
# The plot: TFLOP/s against size (powers of two) with each stage's cuBLAS (dashed, grey or black)
# and the `mma.sync` ceilings (dotted: the estimates printed above), and each stage's share of
# its cuBLAS.

# %%
CUBLAS_COLORS = {"cublas_tf32": "black", "cublas_fp32": "0.45", "cublas_fp16": "0.7"}
ns = h.square_sizes()
series = {}
for name in STAGES:
    for target, style, color in (
        (name, "o-", h.stage_color(name)),
        (h.baseline_of(name), "x--", CUBLAS_COLORS[h.baseline_of(name)]),
    ):
        rows = [r for r in (h.result(target, n) for n in ns) if r and r["gflops"]]
        if not rows or rows[0]["label"] in series:
            continue
        series[rows[0]["label"]] = dict(
            ns=[r["N"] for r in rows],
            tflops=[r["gflops"] / 1e3 for r in rows],
            pct=None if target != name else [100 * r["pct_cublas"] for r in rows],
            color=color,
            style=style,
        )
fig.plot_tensor_cores(
    series,
    {
        f"mma.sync {p} ceiling, estimated (rate / tensor busy share)": (
            ceiling[p] / 1e12,
            h.stage_color(stage),
        )
        for p, stage in (("TF32", "tf32_mma_multistage"), ("FP16", "hgemm_mma"))
    },
    f"{meta['gpu']}, kernel time (median of {meta['reps']} calls)",
)

# %% [markdown]
# ## Why they stop there: Nsight Compute
#
# The same profile, against cuBLAS of each precision (all at 4096^3). Rows: kernel time; registers
# per thread and the blocks per SM they allow; achieved occupancy (the share of an SM's 64 warp
# slots in use) and the warps per scheduler that makes (an SM has 4 schedulers); the share of
# elapsed cycles the tensor pipe was busy (the same metric as in the ceilings above);
# instructions issued per cycle per scheduler (at most 1); and, per instruction issued, the
# cycles warps spent stalled for each reason that matters here. The reasons, from Nsight
# Compute's "Kernel Profiling Guide" (warp stall reasons); MIO is the SM's memory input/output
# unit, the path of shared-memory loads and stores, `ldmatrix`, shuffles and special functions:
#
# - `wait`: a fixed-latency dependency. After an instruction whose result takes a known number
#   of cycles (integer and FP arithmetic, and the `mma` itself), the compiler has the warp sit
#   out a fixed count of cycles, written into the instruction, before its next one; those cycles
#   count here;
# - `short_scoreboard`: waiting for a result of the MIO unit, such as an `ldmatrix` or shared load;
# - `long_scoreboard`: waiting for a global-memory result;
# - `math_pipe_throttle`: the pipe the instruction needs is busy with another instruction;
# - `barrier`: waiting at a `syncthreads`; `gmma`: waiting for a `wgmma` to finish;
# - `mio_throttle`: the queue into the MIO unit is full;
# - `dispatch_stall`: the dispatcher held a selected instruction back;
# - `not_selected`: ready, but the scheduler issued another warp's instruction.

# %%
TARGETS = ["tf32_mma", "tf32_mma_multistage", "tf32x3_mma", "cublas_tf32", "cublas_fp32"]
TARGETS += ["hgemm_mma", "cublas_fp16"]
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
REASONS = ("wait", "short_scoreboard", "long_scoreboard", "math_pipe_throttle", "barrier", "gmma")
rows = {
    "time (ns)": "gpu__time_duration.sum",
    "registers per thread": "launch__registers_per_thread",
    "blocks per SM (registers)": "launch__occupancy_limit_registers",
    "achieved occupancy (%)": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "tensor pipe busy (% of elapsed)": BUSY,
    "issued per cycle (scheduler)": "smsp__issue_active.avg.per_cycle_active",
    **{f"stall: {r}": STALL.format(r) for r in REASONS},
}
h.ncu_table(TARGETS, list(rows.values()), list(rows))
WARP_SLOTS, SCHEDULERS = 64, 4  # per SM, compute capability 9.0 (CUDA C++ Programming Guide)
print(
    "warps per scheduler (achieved):  "
    + "  ".join(
        f"{t} {h.ncu(t, rows['achieved occupancy (%)']) / 100 * WARP_SLOTS / SCHEDULERS:.1f}"
        for t in TARGETS
    )
)
print("\nlargest stalls per issued instruction, of every reason Nsight Compute reports:")
for t in TARGETS:
    stalls = {
        m.split("stalled_")[1].split("_per_issue")[0]: v
        for m, (v, _) in h.ncu_metrics(t).items()
        if m.startswith("smsp__average_warps_issue_stalled_") and m.endswith("active.ratio")
    }
    stalls.pop("selected", None)  # the cycle of issuing itself, 1 by definition
    top = sorted(stalls, key=stalls.get, reverse=True)[:3]
    print(f"  {t:<20} " + ", ".join(f"{r} {stalls[r]:.2f}" for r in top))

# %% [markdown]
# What the table shows:
#
# - Stage 11 waits on global memory (`long_scoreboard`): it has no pipeline, and its tensor pipe is
#   idle most of the time.
# - Stages 12-14 hold nearly all 255 registers a thread may have (accumulators, fragments, and
# 3xTF32's big and small parts), so one block of 8 warps fits per SM: two warps per scheduler. Their
# two largest stalls are `wait` and `math_pipe_throttle`; stage 14 also waits on `short_scoreboard`,
# its `ldmatrix` fragment loads. `wait` is large because their loops are runs of fixed-latency
# instructions that feed each other: in stages 12 and 13 the integer and FP instructions that round
# (and, in 13, split) the B fragments feed the `mma` right after them, 3xTF32's three `mma` of one
# fragment each read the previous one's result, and stage 14's loop is little more than `ldmatrix`
# and back-to-back `mma`, each followed by its fixed count. A scheduler fills those cycles by
# issuing another warp's instruction, and with two warps it often has none ready: it issues in about
# a third to a half of the cycles, and the tensor pipe is busy about half of the time.
# - cuBLAS TF32 and FP16 keep the tensor pipe busy nearly every cycle with fewer registers and
#   few instructions: each `wgmma` is a large product whose operands come from SMEM, not from
#   fragments loaded into registers, and it runs asynchronously, so a warp need not wait for one
#   to finish before issuing the next. Its warps stall on barriers, global memory and `wgmma`
#   instead, which costs nothing while the pipe is busy.

# %% [markdown]
# ## Registers, SMEM and instruction counts
#
# The resource report of the four kernels (compiled here for sm_90 with `ptxas -v`, no GPU
# needed; `mma` and `ldsm` count the `mma.sync` and `ldmatrix` instructions in the PTX), and the
# counts the tile arithmetic predicts for one BK tile (the unrolled loop body):

# %%
report = h.resources(STAGES)
for r in report:
    s = numba_gemm.get_stage(r["stage"])
    if s.name == "tf32_mma":
        steps, frags, a_loads, b_loads = k11.BK // MMA_K, k11.FRAGS, 0, 0
    else:
        dd = k12.derived(s.config, s.precision)
        steps, frags = s.config["BK"] // dd["MMA_K"], dd["MITER"] * dd["NITER"]
        a_loads, b_loads = dd["MITER"], dd["NITER"] // 2 if s.precision == "fp16" else 0
    per_frag = 3 if s.precision == "3xtf32" else 1
    print(
        f"{s.name:<20} {steps} steps x {frags} fragments x {per_frag} mma = "
        f"{steps * frags * per_frag:>3} mma (PTX {r['ptx_mma']}); {steps} x "
        f"({a_loads} + {b_loads}) ldmatrix = {steps * (a_loads + b_loads):>2} (PTX "
        f"{r['ptx_ldmatrix']})"
    )

# %% [markdown]
# ## What is left
#
# `mma.sync` makes every warp load its fragments from SMEM into registers and hold them beside its
# accumulators, and on Hopper it runs below the tensor cores' dense rate whatever the kernel does.
# Hopper's own instruction, `wgmma.mma_async`, has a warpgroup of 4 warps multiply operands
# straight from SMEM, asynchronously, and its Tensor Memory Accelerator (TMA) copies whole tiles
# with no thread computing addresses. Notebook 08 builds the package's Hopper stages on them.
