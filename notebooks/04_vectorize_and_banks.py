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
# # 04 · Vectorized access and shared-memory bank conflicts
#
# Stage 5 (notebook 03) has the right arithmetic shape, a `TM x TN` outer product per thread and
# `k`, but it spends too much of the SM's issue slots and SMEM bandwidth on loads. Two rungs fix
# that without changing the tiles:
#
# - stage 6, `vectorize`: every GMEM and SMEM access moves 16 bytes (a `float4`) per thread with
#   one 128-bit instruction (`LDG.128`, `LDS.128`, `STG.128`) instead of four 32-bit ones. For the
#   fragment of A to be contiguous in SMEM, A's tile is stored **transposed**, `As[k, m]`;
# - stage 7, `bank_conflict_free`: removes the two **bank conflicts** that stage 6 still has, by
#   padding `As` and by changing which columns of B each thread owns.

# %%
import _helpers as h
import matplotlib.pyplot as plt
import numpy as np
from numba import cuda

import numba_gemm
from numba_gemm.kernels import k05_blocktiling_2d as k05
from numba_gemm.kernels import k06_vectorize as k06
from numba_gemm.kernels import k07_bank_conflict_free as k07

print("outputs from:", h.machine())

# %% [markdown]
# ## Stage 6: 128-bit accesses
#
# Numba has no `float4` type: `numba_gemm.ptx.vecmem.load4/store4` are `@intrinsic`s (functions
# that write compiler IR directly) that emit an LLVM `<4 x float>` access (a vector of four floats
# in the compiler's intermediate language) with 16-byte alignment, which NVVM (NVIDIA's LLVM-based
# compiler to PTX) lowers to the `.v4` instructions.
# A 128-bit access needs a 16-byte aligned address, so the stage exists twice (`make_kernel(vec)`):
# the vector kernel, launched when A, B and C have 16-byte aligned rows (K and N multiples of 4),
# and the same code with scalar GMEM accesses for any other shape.

# %%
h.show_source(k06)

# %% [markdown]
# Each thread copies one `float4` of the A tile from GMEM (4 consecutive `k` of one row `m`) and
# scatters it down a column of the transposed `As[k, m]`. The assignment, as in the kernel:
# `a_row = tid // (BK // 4)`, `a_col = (tid % (BK // 4)) * 4`.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [1, 2]})
h.draw_float4_copy(
    axes, k06.BK, 16, lambda tid: tid // (k06.BK // 4), lambda tid: (tid % (k06.BK // 4)) * 4
)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The 32 banks
#
# SMEM is split into 32 **banks**, each 4 bytes wide: the 4-byte word at byte address `a` lives
# in bank `(a / 4) % 32`. In one pass (a **wavefront**) each bank delivers one word, to any
# number of lanes (equal addresses are broadcast). When the lanes of a warp instruction ask one
# bank for several *different* words, the instruction takes as many wavefronts as the largest
# such number: a bank conflict. The model used below, `h.wavefronts` (its source is printed
# below), counts exactly that: the largest number of distinct words any one bank must deliver.
# It is a model of the source; after it, Nsight Compute's bank-conflict counters measure the
# compiled kernels.
#
# The lane-to-word maps of the accesses, copied from the kernels (warp 0, `k = d = 0`). Stage 5
# reads its fragments one float at a time; stages 6 and 7 four at a time.

# %%
h.show_source(h.wavefronts)
LANES = range(32)


def s5_read_a(i):  # reg_m[i] = As[thread_row * TM + i, d]; As is (BM, BK)
    return [[((t // (k05.BN // k05.TN)) * k05.TM + i) * k05.BK] for t in LANES]


def s5_read_b(j):  # reg_n[j] = Bs[d, thread_col * TN + j]; Bs is (BK, BN)
    return [[(t % (k05.BN // k05.TN)) * k05.TN + j] for t in LANES]


def s6_read_a(i):  # load4(As, d, thread_row * TM + i); As is (BK, BM), transposed
    return [[(t // (k06.BN // k06.TN)) * k06.TM + i + e for e in range(4)] for t in LANES]


def s6_read_b(j):  # load4(Bs, d, thread_col * TN + j)
    return [[(t % (k06.BN // k06.TN)) * k06.TN + j + e for e in range(4)] for t in LANES]


def s6_store_a(i):  # As[a_col + i, a_row] = a_i; pitch BM
    return [[((t % (k06.BK // 4)) * 4 + i) * k06.BM + t // (k06.BK // 4)] for t in LANES]


def s7_read_a(i):  # load4(As, d, thread_row * TM + i); As is (BK, AS_PITCH)
    return [[(t // k07.THREADS_N) * k07.TM + i + e for e in range(4)] for t in LANES]


def s7_read_b(g):  # load4(Bs, d, g * COL_GROUP_STRIDE + thread_col * 4)
    return [
        [g * k07.COL_GROUP_STRIDE + (t % k07.THREADS_N) * 4 + e for e in range(4)] for t in LANES
    ]


def s7_store_a(i):  # As[a_col + i, a_row] = a_i; pitch AS_PITCH = BM + A_PAD
    return [[((t % (k07.BK // 4)) * 4 + i) * k07.AS_PITCH + t // (k07.BK // 4)] for t in LANES]


# %% [markdown]
# **Conflict 1, the transposed store of A.** Lanes `2m` and `2m + 1` write `As[i, m]` and `As[4 + i,
# m]`. The word `As[r, m]` of a tile with a row pitch of `P` floats is word `r * P + m`, in bank `(r
# * P + m) % 32`, so row `4 + i` sits `4 * P % 32` banks away from row `i`. With stage 6's pitch
# `BM`, a multiple of 32, that shift is 0: both words fall in bank `m % 32` and every store takes
# two wavefronts. Stage 7 pads each row by `A_PAD` floats (pitch `AS_PITCH = BM + A_PAD`), which
# shifts row `4 + i` by half the banks, so the lanes writing row `i` and those writing row `4 + i`
# use different halves. With the modules' constants (printed after Conflict 2 below):
#
# **Conflict 2, the fragment reads of B.** In stage 6, the 16 threads of a warp that differ in
# `thread_col` read `float4`s `TN` floats apart (each thread owns `TN` adjacent columns and reads
# them as `TN / 4` `float4`s), so four of their chunks share each group of banks: four wavefronts
# where two would carry the same bytes. In stage 7, each thread owns two groups of 4 columns,
# `BN / 2` apart (`COL_GROUP_STRIDE`), so the 16 threads read 256 contiguous bytes: two
# wavefronts, the minimum.

# %%
BANKS = h.BANKS
print(
    f"stage 6: pitch BM = {k06.BM} floats; row 4 + i is 4 * {k06.BM} % {BANKS} = "
    f"{4 * k06.BM % BANKS} banks from row i"
)
print(
    f"stage 7: A_PAD = {k07.A_PAD}, AS_PITCH = BM + A_PAD = {k07.AS_PITCH} floats; row 4 + i is "
    f"4 * {k07.AS_PITCH} % {BANKS} = {4 * k07.AS_PITCH % BANKS} banks from row i"
)
print(
    f"stage 7: B columns of thread t: 4t and COL_GROUP_STRIDE + 4t, COL_GROUP_STRIDE = BN / 2 = "
    f"{k07.COL_GROUP_STRIDE}; THREADS_N = {k07.THREADS_N} threads along N read "
    f"{k07.THREADS_N} x 16 B = {k07.THREADS_N * 16} contiguous bytes per float4 read"
)

# %%
fig, axes = plt.subplots(2, 2, figsize=(13, 6))
h.draw_banks(axes[0, 0], s6_store_a(0), f"stage 6: store As[a_col, a_row], pitch BM = {k06.BM}")
h.draw_banks(axes[0, 1], s7_store_a(0), f"stage 7: same store, pitch BM + A_PAD = {k07.AS_PITCH}")
h.draw_banks(axes[1, 0], s6_read_b(0), "stage 6: LDS.128 of B columns thread_col * TN")
h.draw_banks(axes[1, 1], s7_read_b(0), "stage 7: LDS.128 of B columns thread_col * 4")
fig.suptitle("one warp instruction, lanes by colour (numbers: the lanes asking for that word)")
fig.tight_layout()
plt.show()

# %% [markdown]
# Totals per warp, from the same maps: SMEM wavefronts of the fragment loads per `k` (which
# happen `BK` times per K tile) and of A's stores per K tile, for the same `TM * TN` FMA
# instructions per `k`. Stage 5 issues one load per float, and its A and B reads conflict as
# well.

# %%
per_k = {
    "blocktiling_2d": sum(h.wavefronts(s5_read_a(i)) for i in range(k05.TM))
    + sum(h.wavefronts(s5_read_b(j)) for j in range(k05.TN)),
    "vectorize": sum(h.wavefronts(s6_read_a(i)) for i in range(0, k06.TM, 4))
    + sum(h.wavefronts(s6_read_b(j)) for j in range(0, k06.TN, 4)),
    "bank_conflict_free": sum(h.wavefronts(s7_read_a(i)) for i in range(0, k07.TM, 4))
    + sum(h.wavefronts(s7_read_b(g)) for g in range(2)),
}
stores = {
    "vectorize": sum(h.wavefronts(s6_store_a(i)) for i in range(4)),
    "bank_conflict_free": sum(h.wavefronts(s7_store_a(i)) for i in range(4)),
}
ffma = k05.TM * k05.TN
for name, w in per_k.items():
    print(
        f"{name:<20} fragment loads: {w:>2} wavefronts per k for {ffma} FFMA "
        f"(SMEM-issue bound {h.smem_issue_bound(ffma, w):.0%});  A stores per tile: "
        f"{stores.get(name, '-')}"
    )

# %% [markdown]
# The same counts measured: Nsight Compute's bank conflicts (wavefronts beyond the fewest each
# SMEM instruction) for loads and stores, and the SMEM wavefronts per warp FMA instruction (all
# the kernel's load wavefronts over the `4096^3 / 32` FMA instructions of the product), one
# profiled call at 4096^3. Then the compiled instructions themselves: the SASS of each kernel,
# counted for its 128-bit (`LDS.128`) and 32-bit (`LDS`) shared loads.

# %%
n = 4096
names = ["blocktiling_2d", "vectorize", "bank_conflict_free"]
h.ncu_table(
    names,
    [
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    ],
    ["bank conflicts, loads", "bank conflicts, stores", "load wavefronts"],
)
for name in names:
    wf = h.ncu(name, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") / (n**3 / 32)
    code = [ln.split(";")[0] for ln in h.sass(name).splitlines() if "LDS" in ln]
    wide = sum("LDS.128" in ln for ln in code)
    print(
        f"{name:<20} {wf:.3f} load wavefronts per FMA instruction; SASS: {wide} LDS.128, "
        f"{len(code) - wide} other shared loads"
    )

# %% [markdown]
# Stage 5's measured wavefronts per FMA match the model's count exactly (48 per `k` for 64 FMA
# instructions). For the 128-bit loads of stages 6 and 7 the measured counts are about twice the
# model's: the model lets all 32 lanes share a broadcast word in one pass. The measured counts fit
# exactly a model in which the hardware serves a warp's 128-bit access as two half-warps, with no
# broadcast between the halves (stage 7: two A loads of 2 wavefronts and two B loads of 4, per `k`:
# `(2 x 2 + 2 x 4) / 64 = 0.1875` per FMA; stage 6: `(2 x 2 + 2 x 8) / 64 = 0.3125`). The order of
# the three stages is the model's. Stage 5's loads conflict heavily; stage 6's 128-bit loads need
# far fewer wavefronts per FMA but still conflict (its stores of A's transposed tile conflict too);
# stage 7's padding and column map remove the load conflicts and cut the store conflicts by about 70
# %, and its wavefronts per FMA are the lowest of the three. Once the loads are vectorized, SMEM
# bandwidth is no longer the bound by these counts; what the fewer wavefronts per instruction still
# buy is shorter waits for the fragments that the FMAs depend on, and the timings below show stage 7
# ahead of stage 6 at every size.

# %% [markdown]
# ## Stage 7: what changed
#
# The inner step and the epilogue, stage 6 against stage 7 (`AS_PITCH` and `COL_GROUP_STRIDE` are
# the new constants; the kernel body is otherwise the same):

# %%
h.show_diff(k06._outer_product_step.py_func, k07._outer_product_step.py_func)
h.show_diff(k06._store_row.py_func, k07._store_row.py_func)

# %% [markdown]
# ## Run and check: the vector and the scalar variants
#
# `numba_gemm.explain` says which variant a call runs: the 128-bit kernel needs 16-byte aligned
# rows, so a shape with K or N not a multiple of 4 runs the scalar-GMEM variant.

# %%
for M, N, K in (h.demo_shape(aligned=True), h.demo_shape()):
    d_a, d_b = cuda.device_array((M, K), np.float32), cuda.device_array((K, N), np.float32)
    for s in ("vectorize", "bank_conflict_free"):
        print(f"{M}x{N}x{K} {s}: {numba_gemm.explain(d_a, d_b, stage=s).variant} variant")
    h.check_stages(["vectorize", "bank_conflict_free"], M, N, K)

# %% [markdown]
# ## Registers, SMEM, occupancy, and the 128-bit instructions
#
# The columns after `occ` count instructions in the PTX (`mma`, `ldsm` and `wgmma` stay zero
# until the tensor-core notebooks 07-08): `ldg.v4`/`lds.v4`/`stg.v4`/`sts.v4` are
# the 128-bit global/shared loads and stores, `local` the local-memory accesses (spilled
# register arrays; there must be none). Stage 5 has no vector instructions; stages 6 and 7 load
# their fragments with `lds.v4` only. The padding costs `BK x A_PAD` floats of SMEM per block.
#
# Stages 6 and 7 are reported twice: the `vector` kernel and the `scalar` one that runs when rows
# are not 16-byte aligned. Compare their `ldg.v4`/`stg.v4` counts, registers and `blk/SM`.

# %%
_ = h.resources(["blocktiling_2d", "vectorize", "bank_conflict_free"], scalar=True)

# %% [markdown]
# ## Measured on the GPU
#
# Vectorizing doubles stage 5; removing the conflicts adds a further step. At 4095 (rows not
# 16-byte aligned) both run their scalar-GMEM variant and lose much of the gain: the last row of
# the table.
#
# The SMEM count of this notebook cannot explain that: the scalar variants keep the 128-bit
# SMEM accesses of their vector kernels, with the same bank conflicts (stage 6) or the same lack
# of them (stage 7). What changes is on the GMEM side, in the resource report above.
# The scalar kernel copies the tiles from GMEM one float per instruction, four times as many
# load instructions as `ldg.v4` (likewise for the stores of C), each with its own bounds test or
# clamp (`_common.load_a4`, `load_b4`). The kernels of the table also needed more registers than
# the vector ones: 133, one block per SM instead of two, so no second block hid their GMEM
# latency (the trade-off that made stage 5 keep its BK loop rolled, notebook 03). Part of both
# costs was Numba's: a signed index into an array carries a test for negative indices (a
# compare and a select per access, Python's `a[-1]`). The scalar loads and stores now index
# with unsigned integers, which skip it: 126 registers in the report above, two blocks per SM.
# The 4095 row was measured before that change (`docs/design.md`, "Unsigned indices"). The
# profile above is of the aligned 4096^3 product, so it does not say which cost is larger.

# %%
h.print_results(["blocktiling_2d", "vectorize", "bank_conflict_free"])
h.plot_results(["blocktiling_2d", "vectorize", "bank_conflict_free"])
