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
# # 02 · Shared-memory tiling
#
# In `gmem_coalesce` (notebook 01) every thread reads its own row of A and column of B from
# global memory (GMEM): an element of A is fetched by every thread that needs it, N times in all,
# and every FMA costs two loads through the memory pipeline. Stage 3, `smem_tiling`, makes the
# threads of a block share their loads: the block copies a tile of A and a tile of B into
# **shared memory** (SMEM: on-chip, shared by the threads of a block, with far more bandwidth and
# far less latency than GMEM), synchronises, and computes from there. Each float fetched from GMEM
# is then read by a whole row (or column) of the block's threads from SMEM.

# %%
import _helpers as h

from numba_gemm.kernels import k03_smem_tiling as k03

print("outputs from:", h.machine())

# %% [markdown]
# ## The kernel
#
# Tile constants `BM = BN = BK = TILE`: a block of `TILE x TILE` threads computes a `BM x BN` tile
# of C, one element per thread, and walks K in steps of `BK`. Each step has two phases, ruled in
# the source: `GMEM -> SMEM` (every thread copies one element of the A tile `As` and one of the B
# tile `Bs`, zero outside the matrices, so the inner loop needs no bounds checks) and
# `SMEM -> registers, FMA` (BK multiply-adds from SMEM).

# %%
h.show_source(k03)

# %% [markdown]
# ## Tiles moving through SMEM
#
# One block's work, drawn from the module's constants: at step `t` the block holds tile `t` of
# its row panel of A and tile `t` of its column panel of B in SMEM, and every thread adds `BK`
# products to its element of the C tile.

# %%
h.draw_smem_tiling(k03.BM, k03.BN, k03.BK)

# %% [markdown]
# ## How much GMEM traffic that saves
#
# Per K step, a block loads `BM*BK + BK*BN` floats from GMEM and does `BM*BN*BK` FMAs, so it
# loads `(BM + BN) / (BM * BN)` floats per FMA. Stage 2 loads two per FMA (each from a cache if
# lucky).

# %%
per_fma = (k03.BM + k03.BN) / (k03.BM * k03.BN)
print(f"stage 3: {per_fma:.4f} GMEM floats per FMA, {2 / per_fma:.0f}x fewer than stage 2's 2")
print(
    f"SMEM per block: As + Bs = 4 B x ({k03.BM}x{k03.BK} + {k03.BK}x{k03.BN}) = "
    f"{4 * (k03.BM * k03.BK + k03.BK * k03.BN)} B"
)

# %% [markdown]
# ## Why two `syncthreads`
#
# SMEM is shared by all warps of the block, and warps run at their own pace. Two barriers guard
# the two hazards of reusing `As` and `Bs` at every K step:
#
# 1. after the stores (read-after-write): no warp may read the tiles before all warps have
#    written their elements of them;
# 2. after the FMAs (write-after-read): no warp may store the *next* tiles into `As`/`Bs` while
#    another warp is still reading the current ones.
#
# The second one is easy to forget, because a kernel without it usually passes small tests: the
# failure needs one warp to finish its FMAs a whole phase ahead of another. The schematic below
# shows it (durations are illustrative, not measured).

# %%
h.draw_barriers()

# %% [markdown]
# Stage 9 (notebook 05) gets down to one barrier per K step by keeping two copies of the tiles.

# %% [markdown]
# ## Run and check

# %%
M, N, K = h.demo_shape()
h.check_stages(["smem_tiling"], M, N, K)

# %% [markdown]
# ## Registers, SMEM, occupancy
#
# The `smem` column is the static shared memory of `As` and `Bs`; blocks of `TILE x TILE`
# threads are large, so the number of threads per SM, not SMEM, limits how many blocks are
# resident.

# %%
_ = h.resources(["gmem_coalesce", "smem_tiling"])

# %% [markdown]
# ## What bounds it now
#
# The global loads per FMA fell by the factor above. The DRAM bytes did not: in notebook 00's table
# `smem_tiling` moves more DRAM bytes than `gmem_coalesce`, because the L2 cache had already
# absorbed the re-reads of the earlier kernels, and its hit rate is lower here (the profile below).
# What fell is the traffic between the SMs and the caches, and the kernel is now limited by SMEM.
# SMEM is made of 32 **banks**, each delivering one 4-byte word per pass; a warp's SMEM access is
# served in one or more such passes, called **wavefronts** (notebook 04 draws them). Per step `k` a
# warp (32 threads of one row of the block, `threadIdx.y` fixed) reads `As[ty, k]` (one address for
# the whole warp: a broadcast, one wavefront) and `Bs[k, tx]` (32 consecutive floats, one in each
# bank: one wavefront) for a single FMA instruction (FFMA, the FP32 multiply-add of the machine
# code). An SM serves one SMEM wavefront per clock but could issue four warp-FMAs per clock, which
# caps this kernel at a small fraction of the FP32 peak. Both rates are from the CUDA C++
# Programming Guide: its table of arithmetic instruction throughput gives 128 FP32 multiply-add
# results per clock per SM for compute capability 9.0, that is 4 warp instructions of 32 lanes; and
# its shared-memory section describes 32 banks that each deliver 32 bits per clock, so one wavefront
# (up to 32 x 4 bytes) per clock.

# %%
h.show_source(h.smem_issue_bound)
peaks = h.gpu_peaks()
bound = h.smem_issue_bound(ffma=1, wavefronts=2)
measured = h.result("smem_tiling", max(h.square_sizes()))
print(
    f"SMEM-issue bound: {bound:.1%} of {peaks['flops'] / 1e12:.1f} TFLOP/s = "
    f"{bound * peaks['flops'] / 1e12:.1f} TFLOP/s; measured at N = {measured['N']}: "
    f"{measured['gflops'] / 1e3:.1f} TFLOP/s ({peaks['gpu']})"
)

# %% [markdown]
# The profile of both kernels at 4096^3 shows what moved: the global-load requests fell by the
# tile size (32x) and the sectors they touch by less (each request now reads 4 whole sectors,
# against 2.5 on average before), while the DRAM bytes grew as L2's hit rate fell.

# %%
h.ncu_table(
    ["gmem_coalesce", "smem_tiling"],
    [
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "dram__bytes_read.sum",
        "lts__t_sector_hit_rate.pct",
    ],
    ["global load requests", "sectors they touched", "DRAM bytes read", "L2 hit %"],
)

# %% [markdown]
# The count of two wavefronts per FMA instruction is read off the source. The compiled kernel does
# better: the compiler merges the broadcast loads of `As[ty, k]` and `As[ty, k + 1]` (neighbours in
# a row) into one 64-bit load, so two steps need three wavefronts, not four. Nsight Compute counts
# the SMEM wavefronts the kernel really used (one profiled call at 4096^3), and dividing by the
# number of warp FMA instructions any 4096^3 product needs (`4096^3 / 32`) gives the measured count.
# With it the same bound becomes the line below; the profiler also says how busy the SMEM pipe was.

# %%
n = 4096
wf = h.ncu("smem_tiling", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") / (n**3 / 32)
busy = h.ncu(
    "smem_tiling", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"
)
print(
    f"measured: {wf:.2f} SMEM wavefronts per FMA instruction -> bound "
    f"{h.smem_issue_bound(1, wf):.1%} of peak; SMEM pipe busy {busy:.0f} % of the kernel's time"
)

# %% [markdown]
# To do better, each value read from SMEM must feed more than one FMA: each thread has to compute
# several elements of C and keep the operands it reuses in registers. That is blocktiling,
# notebook 03.
#
# ## Measured on the GPU
#
# Against `gmem_coalesce`, and as a share of cuBLAS FP32: at the large sizes the kernel sits just
# under the bound counted from the source, and at about 70 % of the bound from the measured
# wavefronts (the SMEM pipe, the SM's unit that serves shared-memory accesses, is busy 75 % of
# the time).

# %%
h.print_results(["gmem_coalesce", "smem_tiling"])
h.plot_results(["gmem_coalesce", "smem_tiling"])
