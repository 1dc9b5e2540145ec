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
# # 01 · Naive, then coalesced global memory access
#
# The first two rungs compute C the obvious way: one thread per element of C, each a K-long dot
# product read straight from global memory (GMEM). They do the same arithmetic and differ in a
# single line, the map from a thread's index to the element of C it computes. That line decides
# how many bytes each load instruction of a warp moves. On the GPU the second kernel is more than
# twice as fast as the first at every power-of-two size where both ran (the measurements at the
# end), and the profiler's counts show why.

# %%
import _helpers as h
import matplotlib.pyplot as plt

from numba_gemm.kernels import k01_naive, k02_gmem_coalesce

print("outputs from:", h.machine())

# %% [markdown]
# ## Stage 1: `naive`
#
# A block of `BLOCK x BLOCK` threads computes a `BLOCK x BLOCK` tile of C. Here is the whole
# module: the docstring, the tile constant, the kernel, its launch configuration and the `Stage`
# record that registers it in `numba_gemm.STAGES`.

# %%
h.show_source(k01_naive)

# %% [markdown]
# ## Stage 2: `gmem_coalesce`, the one-line change
#
# The diff between the two kernels: `threadIdx.x` moves from the row to the column.

# %%
h.show_diff(h.kernel_function(k01_naive.STAGE), h.kernel_function(k02_gmem_coalesce.STAGE))

# %% [markdown]
# ## Which threads touch which addresses
#
# A block's threads are numbered `threadIdx.x + threadIdx.y * blockDim.x`, and each run of 32
# consecutive numbers is a **warp**: 32 lanes that execute each instruction together. With a
# block of `32 x 32`, warp `w` is the threads with `threadIdx.y = w` and `threadIdx.x = 0..31`.
# When a warp executes a load, the memory system serves the 32 lanes' addresses together: it
# moves whole 32-byte **sectors** (and 128-byte L1 lines of 4 sectors). If the 32 lanes read 32
# consecutive floats, that is 128 bytes in 4 sectors, every byte used: the access is
# **coalesced**. If they read 32 floats a row apart, it takes 32 sectors to deliver 128 useful
# bytes.
#
# The two maps, written as in the kernels (block (0, 0), so `blockIdx` is 0):

# %%
BLOCK = k01_naive.BLOCK
assert BLOCK == k02_gmem_coalesce.BLOCK


def naive_map(tx, ty):  # k01: row = ... + threadIdx.x, col = ... + threadIdx.y
    return tx, ty


def coalesced_map(tx, ty):  # k02: row = ... + threadIdx.y, col = ... + threadIdx.x
    return ty, tx


fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
h.draw_ownership(axes[0], BLOCK, naive_map, "naive: warp w computes column w of the tile")
h.draw_ownership(axes[1], BLOCK, coalesced_map, "gmem_coalesce: warp w computes row w")
fig.suptitle(f"a {BLOCK} x {BLOCK} tile of C, shaded by warp (alternating greys), warp 0 red")
fig.tight_layout()
plt.show()

# %% [markdown]
# Now the addresses of warp 0's accesses at one step `k` of the loop, for the shape of the
# benchmark's 4096-cubed row: `A[row, k]`, `B[k, col]` and the final store to `C[row, col]`. A
# row-major float32 element `X[i, j]` of an array with `n` columns lives at byte `4 * (i*n + j)`.

# %%
K = N = 4096  # the benchmark's 4096^3 row
k = 0
lanes = range(32)
fig, axes = plt.subplots(2, 3, figsize=(13, 6))
maps = (("naive", naive_map), ("gmem_coalesce", coalesced_map))
for row_axes, (name, mapping) in zip(axes, maps, strict=True):
    rc = [mapping(tx, 0) for tx in lanes]  # warp 0 of block (0, 0)
    h.draw_access(row_axes[0], [4 * (r * K + k) for r, _ in rc], f"{name}, load A[row, k]")
    h.draw_access(row_axes[1], [4 * (k * N + c) for _, c in rc], f"{name}, load B[k, col]")
    h.draw_access(row_axes[2], [4 * (r * N + c) for r, c in rc], f"{name}, store C[row, col]")
fig.tight_layout()
plt.show()

# %% [markdown]
# In `naive`, the lanes of a warp share a column and walk down the rows: their loads of A are a
# row (16 KiB here) apart, 32 sectors per instruction for 128 useful bytes, and so are their
# stores to C. Their loads of B all hit one address, which the hardware **broadcasts**. In
# `gmem_coalesce` the roles swap: the lanes share a row, so the load of A is the broadcast and the
# load of B and the store to C are one contiguous 128-byte line each.
#
# (Counting sectors, an uncoalesced warp load moves 8 times the bytes of a coalesced one: 32
# sectors instead of 4 for the same 128 useful bytes. The naive kernel is not 8 times slower,
# though: each thread walks its own row of A along `k`, so a sector fetched for one `k` also holds
# the next 7 floats of that row, and the L1 and L2 caches keep some of them. What the caches
# cannot fix is that every FMA still needs two loads through the memory pipeline.)

# %% [markdown]
# ## Run and check
#
# Both stages through the public call on the same operands, against NumPy in float64.

# %%
M, N, K = h.demo_shape()
h.check_stages(["naive", "gmem_coalesce"], M, N, K)

# %% [markdown]
# ## Registers, shared memory, occupancy
#
# Two words first. Numba compiles a kernel to **PTX**, NVIDIA's virtual instruction set (text such
# as `ld.global.v4.f32`); `ptxas`, NVIDIA's assembler, turns PTX into **SASS**, the machine code
# the GPU runs (`LDG.E.128` for the same 128-bit global load). The report's `ldg.v4` column is
# short for that PTX instruction. The resource report compiles each kernel for sm_90 (compute
# capability 9.0, Hopper) and runs `ptxas -v`; no GPU is involved. Its
# columns, used in every notebook from here on:
#
# - `regs`: registers per thread;
# - `spill`: bytes of spill stores / spill loads, registers that did not fit and went to *local
#   memory* (per-thread memory that lives in DRAM behind the caches: slow); `stack`: bytes of
#   stack frame per thread, also local memory. Both should be 0;
# - `smem`: shared memory per block (static plus dynamic), bytes; `thr`: threads per block;
# - `blk/SM` and `occ`: resident blocks per SM and the theoretical **occupancy** (resident warps
#   per SM over the most an SM can hold, 64 on sm_90) that registers, SMEM and threads allow,
#   computed from the numbers before them, not measured;
# - `ldg.v4`, `lds.v4`, `stg.v4`, `sts.v4`, `local`: how many 128-bit global/shared loads and
#   stores and local-memory accesses the PTX *contains* (a static count of instructions in the
#   code, not of instructions executed). Notebook 04 is where the first four become non-zero;
# - `mma`, `ldsm`, `wgmma`: tensor-core instructions, zero until notebooks 07-08;
# - `variant`: which build of the kernel the row is (notebook 04: 128-bit or scalar accesses).
#
# The two kernels are the same code up to the index map, so their resources match: the
# difference in speed below is the memory access pattern alone.

# %%
_ = h.resources(["naive", "gmem_coalesce"])

# %% [markdown]
# ## Measured on the GPU
#
# The committed benchmark (kernel time, median of CUDA-event timings) against cuBLAS FP32. From
# N = 1024 on, both rungs stay in the low single-digit percent of cuBLAS: each FMA still needs two
# loads from GMEM through the caches. Counted as requested, 8 bytes per 2 FLOP, that would put
# them far left of the roofline's ridge; the L2 cache absorbs most of the re-reads, so their
# DRAM traffic is moderate (notebook 00's table), and what limits them is the load path between
# L1, L2 and the SMs, below. (At the smaller sizes the percentages are higher because
# cuBLAS cannot fill the GPU there either.) The cure is to load each value once per block and
# reuse it from on-chip shared memory: notebook 02.
#
# What the table shows, size by size: at every power-of-two size `gmem_coalesce` is the faster
# (the ratios are printed below the plot). At 4096 `naive` exceeded the benchmark's time limit
# per call and was skipped; its Nsight Compute profile below gives its time there. At 4095 the
# picture changes: `naive` runs much faster than at 4096, level with `gmem_coalesce`, whose rate
# barely moves. The profile of 4096 alone cannot say why; what it does show is the access
# pattern of each kernel.

# %%
h.print_results(["naive", "gmem_coalesce"])
h.plot_results(["naive", "gmem_coalesce"])

# %%
print("gmem_coalesce over naive, GFLOP/s ratio from the committed results:")
for n in h.square_sizes() + h.square_sizes(pow2=False):
    slow, fast = h.result("naive", n), h.result("gmem_coalesce", n)
    if slow and fast and slow["gflops"] and fast["gflops"]:
        print(f"N = {n:>5}: {fast['gflops'] / slow['gflops']:.2f}x")

# %% [markdown]
# ## What the profiler counts
#
# Nsight Compute counts, for one call of each kernel at 4096^3, the global-load *requests* (one
# per warp load instruction) and the 32-byte *sectors* they touched. A request whose 32 lanes
# read 32 consecutive floats touches 4 sectors; lanes spread over 32 rows touch up to 32. Also
# counted: the bytes moved from DRAM and the share of L2 lookups that hit.

# %%
metrics = [
    "gpu__time_duration.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "dram__bytes_read.sum",
    "lts__t_sector_hit_rate.pct",
]
labels = [
    "time (ns)",
    "global load requests",
    "sectors they touched",
    "DRAM bytes read",
    "L2 hit %",
]
h.ncu_table(["naive", "gmem_coalesce"], metrics, labels)
for s in ("naive", "gmem_coalesce"):
    sectors = h.ncu(s, metrics[2]) / h.ncu(s, metrics[1])
    print(f"{s}: {sectors:.1f} sectors per request")

# %% [markdown]
# Both kernels read about the same number of bytes from DRAM: the 50 MB L2 cache catches most of
# the re-reading either way. The difference is in the sectors per request, and the counts match
# the index maps exactly. Each step `k` issues two loads per warp. In `naive` the 32 lanes hold 32
# rows of C: their loads of `A[row, k]` touch 32 sectors, their loads of `B[k, col]` one (every
# lane reads the same element), `(32 + 1) / 2 = 16.5` on average. In `gmem_coalesce` the lanes
# hold 32 columns: `A[row, k]` is one sector, `B[k, col]` 32 consecutive floats in 4 sectors,
# `(1 + 4) / 2 = 2.5`. Each sector is a separate lookup in L1, and the misses go on to L2, so
# `naive` pushes several times the traffic through the L1/L2 path for the same useful data, and
# that is where its extra time goes.
