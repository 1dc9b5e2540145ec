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
# # 03 · 1D and 2D blocktiling: more results per thread
#
# In `smem_tiling` (notebook 02) each thread computes one element of C and, for every FMA, reads
# two values from shared memory (SMEM): the kernel is bound by SMEM bandwidth. The fix is to give
# each thread several elements of C, kept in **registers**, so that a value read from SMEM feeds
# several FMAs:
#
# - stage 4, `blocktiling_1d`: each thread computes `TM` elements of one column of C. Per step
#   `k` it reads one value of B into a register and reuses it for `TM` FMAs;
# - stage 5, `blocktiling_2d`: each thread computes a `TM x TN` tile of C as a sum of **outer
#   products**: per `k` it loads `TM` values of A (`reg_m`) and `TN` of B (`reg_n`) and does all
#   `TM * TN` products.
#
# With more work per thread, a block covers a larger tile of C (`BM x BN`) with fewer threads,
# which also cuts GMEM traffic per FMA. `BK` becomes small (a thin K slice), but not for lack of
# SMEM (the tiles take a few KB, see the resource report): it follows from how the threads copy
# the tiles. In stage 4 each thread copies exactly one element of the A tile and one of the B
# tile, which the module asserts as `BM * BK == NUM_THREADS` and `BK * BN == NUM_THREADS`: `BK`
# is `NUM_THREADS / BM`, fixed by the tile and thread counts. Stage 5 copies in passes of
# `NUM_THREADS` elements (the `STRIDE_A`, `STRIDE_B` asserts) and keeps the same `BK`.

# %%
import _helpers as h
import matplotlib.pyplot as plt

from numba_gemm.kernels import k03_smem_tiling as k03
from numba_gemm.kernels import k04_blocktiling_1d as k04
from numba_gemm.kernels import k05_blocktiling_2d as k05

print("outputs from:", h.machine())

# %% [markdown]
# ## Stage 4: 1D blocktiling
#
# Note `_dot_step` (one `k`: one SMEM read of B, `TM` FMAs) and `unroll(BK, ...)`: Numba has no
# `#pragma unroll`, so `numba_gemm.kernels._common.unroll` chains `BK` copies of the step at
# compile time; the `k` part of every SMEM index and every index into the register array
# `thread_results` is then a constant, which keeps the array in registers (a run-time index
# would send it to local memory).

# %%
h.show_source(k04)

# %% [markdown]
# ## Stage 5: 2D blocktiling
#
# The outer product lives in `_outer_product`. The module docstring records a measured
# trade-off: the `BK` loop is left *rolled* here, because unrolled it needs more registers than
# fit two blocks per SM.

# %%
h.show_source(k05)

# %% [markdown]
# ## Thread tiles, drawn
#
# Each block tile, cut into the tiles of its threads (thread `tid` owns thread-tile row
# `tid // (BN/TN)` and column `tid % (BN/TN)`, as in both kernels), coloured by warp. Thread 0 is
# black and warp 0 is outlined in red: in stage 4 a warp covers a `TM`-row strip of 32 columns;
# in stage 5 a warp covers two rows of 16 thread tiles.

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1, 1, 0.6]})
h.draw_thread_tiles(
    axes[0],
    k04.BM,
    k04.BN,
    k04.TM,
    1,
    f"stage 4: {k04.BM} x {k04.BN} block tile, TM x 1 = {k04.TM} x 1 per thread",
)
h.draw_thread_tiles(
    axes[1],
    k05.BM,
    k05.BN,
    k05.TM,
    k05.TN,
    f"stage 5: {k05.BM} x {k05.BN} block tile, TM x TN = {k05.TM} x {k05.TN} per thread",
)
h.draw_outer_product(axes[2], k05.TM, k05.TN)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Loads per FMA
#
# From the tile constants: SMEM loads per FMA for one thread are `(TM + TN) / (TM * TN)`; GMEM
# floats per FMA for one block are `(BM + BN) / (BM * BN)` (notebook 02). The last column is the
# SMEM-issue bound of notebook 02 (an SM serves one SMEM wavefront per clock and issues at most 4
# warp-FMAs per clock), counting one wavefront per SMEM load instruction of a warp.

# %%
rungs = [
    ("smem_tiling", k03.BM, k03.BN, k03.BK, 1, 1),  # one element per thread
    ("blocktiling_1d", k04.BM, k04.BN, k04.BK, k04.TM, 1),
    ("blocktiling_2d", k05.BM, k05.BN, k05.BK, k05.TM, k05.TN),
]
print(
    f"{'stage':<16} {'BMxBNxBK':>10} {'TMxTN':>6} {'threads':>7} {'SMEM ld/FMA':>11} "
    f"{'GMEM fl/FMA':>11} {'SMEM-issue bound':>16}"
)
for name, BM, BN, BK, TM, TN in rungs:
    bound = h.smem_issue_bound(ffma=TM * TN, wavefronts=TM + TN)
    print(
        f"{name:<16} {f'{BM}x{BN}x{BK}':>10} {f'{TM}x{TN}':>6} {BM * BN // (TM * TN):>7} "
        f"{(TM + TN) / (TM * TN):>11.3f} {(BM + BN) / (BM * BN):>11.4f} {bound:>16.0%}"
    )

# %% [markdown]
# The source-level count overstates the loads: the compiler merges some of them (neighbouring
# elements of a row of `As` come in one 64-bit load, which the `lds.v4` column of the resource
# report below, counting 128-bit loads only, does not show). Nsight Compute counts the wavefronts
# each kernel really used at 4096^3; divided by the `4096^3 / 32` warp FMA instructions of the
# product, they give the measured count, its bound, and beside it what the kernel achieved (from the
# same profiled call) and how busy the SMEM pipe was.

# %%
n, peak = 4096, h.gpu_peaks()["flops"]
print(f"{'stage':<16} {'wavefronts/FMA':>14} {'bound':>6} {'achieved':>8} {'SMEM busy':>9}")
for name, *_ in rungs:
    wf = h.ncu(name, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") / (n**3 / 32)
    achieved = 2 * n**3 / (h.ncu(name, "gpu__time_duration.sum") * 1e-9) / peak
    busy = h.ncu(
        name, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"
    )
    print(
        f"{name:<16} {wf:>14.3f} {h.smem_issue_bound(1, wf):>6.0%} {achieved:>8.1%} "
        f"{busy / 100:>9.0%}"
    )

# %% [markdown]
# Measured, stage 4 needs fewer wavefronts than the source count, which is why it runs above the
# bound of the first table; it stays below the bound of the second. Stage 5 should not be
# SMEM-bound by instruction count, yet the profiler counts more wavefronts per FMA for it than
# for stage 4, and at the large sizes it measures barely faster than stage 4, at the small ones
# slower (below). Two things eat the difference at every size:
#
# - its SMEM loads are not one wavefront each: the threads of a warp that read different rows of
#   `As` or columns of `Bs` hit the same banks (**bank conflicts**, notebook 04);
# - **registers**: `TM * TN` accumulators plus `TM + TN` fragment values per thread. The register
#   file of an SM (65536 32-bit registers) then holds fewer threads, so fewer warps are resident to
#   hide the latency of GMEM loads while others compute (lower **occupancy**). The resource report
#   shows it.

# %% [markdown]
# ## Run and check

# %%
M, N, K = h.demo_shape()
h.check_stages(["blocktiling_1d", "blocktiling_2d"], M, N, K)

# %% [markdown]
# ## Registers, SMEM, occupancy
#
# Registers per thread rise with the results each thread holds; `blk/SM` and `occ` are the
# resident blocks and the occupancy they leave (the register file is the limit for stage 5).

# %%
_ = h.resources(["smem_tiling", "blocktiling_1d", "blocktiling_2d"])

# %% [markdown]
# ## Measured on the GPU
#
# From N = 2048 on, both rungs roughly double `smem_tiling`, and stage 5's gain over stage 4 is
# small for the reasons above. Notebook 04 removes its SMEM bottlenecks: wider loads and no bank
# conflicts.
#
# At N <= 1024 stage 5 is much slower than stage 4 (and than `smem_tiling`). A third reason
# applies there: the grid is too small for the GPU. A block computes one `BM x BN` tile of C, so
# an `N x N` product has `(N / BM) * (N / BN)` blocks; with stage 5's larger tiles that is fewer
# blocks than the GPU has SMs up to N = 1024, so many SMs idle for the whole kernel (notebook 06
# comes back to how blocks fill the SMs). The block counts are printed below the plot.

# %%
h.print_results(["smem_tiling", "blocktiling_1d", "blocktiling_2d"])
h.plot_results(["smem_tiling", "blocktiling_1d", "blocktiling_2d"])

# %%
sms = h.gpu_peaks()["sms"]
print(f"blocks in the grid of an N x N product, for the {sms} SMs of the {h.gpu_peaks()['gpu']}:")
for n in (256, 512, 1024, 2048):
    counts = ", ".join(f"{name} {-(-n // BM) * -(-n // BN)}" for name, BM, BN, *_ in rungs)
    print(f"N = {n:>4}: {counts}")
