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
# # 05 · Warp tiling, double buffering and the `cp.async` pipeline
#
# After notebook 04 the inner loop is mostly FMAs fed by conflict-free 128-bit SMEM loads. The
# last three rungs reorganise the work around the **warp**, the unit that actually issues
# instructions, and then overlap memory with math:
#
# - stage 8, `warptiling`: a level between block and thread. The block tile `BM x BN` is split
#   into warp tiles `WM x WN`; a warp walks its tile as `WMITER x WNITER` sub-tiles, in each of
#   which its 32 lanes hold `TM x TN` thread tiles. The sizes become parameters (a configuration
#   dict), swept by the tuner (notebook 06);
# - stage 9, `double_buffering`: two SMEM copies of the tiles; the loads of the next K tile are
#   in flight while the warps compute on the current one, and one `syncthreads` per K tile
#   suffices;
# - stage 10, `multistage`: `cp.async` copies GMEM straight into a ring of `NBUF` SMEM buffers,
#   with no registers spent on staging, and up to `NBUF - 1` tiles in flight.

# %%
import _helpers as h

import numba_gemm
from numba_gemm.kernels import _tunable as tun
from numba_gemm.kernels import k08_warptiling as k08
from numba_gemm.kernels import k10_multistage as k10
from numba_gemm.plan import tuning

print("outputs from:", h.machine())
wt, db, ms = (numba_gemm.get_stage(n) for n in ("warptiling", "double_buffering", "multistage"))

# %% [markdown]
# ## Stage 8: the warp tile
#
# The whole module. `make_parts` builds, for one configuration, the device functions that stages
# 9 and 10 reuse: `thread_origin` (block -> warp -> lane: where a thread's tiles start),
# `load_tiles`/`store_tiles` (GMEM -> registers -> SMEM) and `mma_tile` (`BK` outer-product steps
# over the thread's `WMITER x WNITER` tiles, unrolled). `_make_kernel` closes over the
# configuration, so every tile size is a compile-time constant of the kernel.
#
# A word on names: "mma" (matrix multiply-accumulate) in `mma_tile` and `_mma_step` is the
# customary name for this step of a GEMM. Here it is FP32 FMA instructions (FFMA) on the ordinary
# FP32 pipe, one outer product at a time; it is not the tensor-core `mma` instruction of PTX,
# which these kernels do not use (`numba_gemm.ptx.mma` and the tensor-core stages registered after
# stage 10 are another matter).

# %%
h.show_source(k08)

# %% [markdown]
# The default configuration, its derived constants, and the hierarchy they make, drawn from
# them (`WMITER`, `WSUBM`, `WSUBN` and `NUM_THREADS` come from `_tunable.derived`):

# %%
cfg = dict(wt.config)
d = tun.derived(cfg)
print("config:", cfg)
print("derived:", {k: d[k] for k in ("NUM_THREADS", "WMITER", "WSUBM", "WSUBN")})
h.draw_warp_tiles(cfg, d)

# %% [markdown]
# Besides the tile sizes, a configuration has keys that notebook 06 explains in full:
#
# - `MINB`: the minimum number of blocks per SM promised to the compiler (`launch_bounds`; 0: no
#   promise). It caps the registers a thread may use, so that that many blocks fit;
# - `SPLITK`: how many slices K is cut into, each computed by its own block, the partial products
#   then summed by the last of them to finish (1: no split; notebook 06);
# - `NBUF` (stage 10 only): how many SMEM buffers its `cp.async` ring has.

# %% [markdown]
# Why a warp tile helps: in stage 7 the 16 threads of a warp row span the whole `BN`-column
# block tile, so a warp reads a wide, thin slice of `Bs` and the `float4` reads of B collide unless
# the columns are interleaved by hand. With warp tiles, the lanes of a sub-tile read adjacent
# `float4`s of their own `WSUBM` rows and `WSUBN` columns. The wavefront model of notebook 04,
# applied to the kernel's `thread_origin` and `_mma_step` index maps (warp 0, `k = 0`):


# %%
def warp_reads(cfg, d, warp=0):
    """Per-lane SMEM words of one k of `_mma_step`: the A reads and the B reads (float4s)."""
    TM, TN, WM, WN, BN = (cfg[k] for k in ("TM", "TN", "WM", "WN", "BN"))
    lanes_n, warps_n = d["WSUBN"] // TN, BN // WN
    a, b = [], []
    for wm in range(d["WMITER"]):
        for i in range(0, TM, 4):  # load4(As, k, wm0 + wm * WSUBM + i)
            a.append(
                [
                    [
                        (warp // warps_n) * WM + (ln // lanes_n) * TM + wm * d["WSUBM"] + i + e
                        for e in range(4)
                    ]
                    for ln in range(32)
                ]
            )
    for wn in range(cfg["WNITER"]):
        for j in range(0, TN, 4):  # load4(Bs, k, wn0 + wn * WSUBN + j)
            b.append(
                [
                    [
                        (warp % warps_n) * WN + (ln % lanes_n) * TN + wn * d["WSUBN"] + j + e
                        for e in range(4)
                    ]
                    for ln in range(32)
                ]
            )
    return a, b


configs = {"warptiling (default)": cfg}
for name, res in tuning.winners("large", device=("", (9, 0))).items():
    if numba_gemm.get_stage(name).precision == "fp32":  # (the TF32 stages have no warp tiles)
        configs[f"{name} (tuned, large)"] = res["config"]
for name, c in configs.items():
    dd = tun.derived(c)
    a, b = warp_reads(c, dd)
    w = sum(h.wavefronts(x) for x in a + b)
    ffma = dd["WMITER"] * c["TM"] * c["WNITER"] * c["TN"]
    print(
        f"{name:<32} per k and warp: {len(a) + len(b):>2} LDS.128, {w:>2} wavefronts, "
        f"{ffma:>3} FFMA ({ffma / w:.0f} FFMA per wavefront); {ffma} accumulators per thread"
    )

# %% [markdown]
# Each thread's register tile is `WMITER*TM x WNITER*TN` accumulators, and each fragment value
# it loads feeds a whole row or column of them. The tuned configurations hold more accumulators
# than the default (up to `_tunable.MAX_ACCUMULATORS`), so FMAs outnumber SMEM wavefronts even
# more (last column). By this count stage 8 should beat stage 7 clearly; the measurements at the
# end of this notebook show that at the large sizes it does not, and why the rung is still worth
# it.

# %% [markdown]
# ## Stage 9: double buffering
#
# The kernel against stage 8's: a prologue loads the first tile; in the loop, the loads of tile
# `k0 + BK` are issued *before* the math on the current tile and stored into the other SMEM copy
# *after* it. That copy was last read before the previous barrier, so one `syncthreads` per K
# tile is enough. The comment about the unconditional prefetch records a measured pitfall: under
# an `if`, the compiler sank the loads below the math and the latency was exposed again.

# %%
h.show_diff(h.kernel_function(wt), h.kernel_function(db))

# %% [markdown]
# ## Stage 10: the `cp.async` multistage pipeline
#
# `cp.async` (compute capability 8.0+) copies GMEM to SMEM without passing through registers;
# a thread groups its copies (`commit`) and waits until at most `n` groups are still in flight
# (`wait(n)`), then a `syncthreads` makes everyone's copies visible. Numba has no such
# instruction: `numba_gemm.ptx.cpasync` emits it as inline PTX. The module docstring has the
# schedule; the kernel:

# %%
print(k10.__doc__)
h.show_source(ms)

# %% [markdown]
# ## Loads and math over time
#
# A schematic of one block's K loop for each rung (illustrative units, not measurements: the GMEM
# latency is drawn longer than one tile's math, as it is for a block that has little else to
# do). Stage 8 exposes the whole latency on every tile; stage 9 hides it behind one tile of math;
# stage 10 keeps `NBUF - 1` tiles in flight, drawn here for its default `NBUF` and for the
# largest value the tuner tries.

# %%
deepest = max(c["NBUF"] for c in ms.space)
h.draw_pipelines(
    [
        ("warptiling", 1),
        ("double_buffering", 2),
        ("multistage", ms.config["NBUF"]),
        ("multistage", deepest),
    ]
)

# %% [markdown]
# The schematic is idealised: a fixed GMEM latency, no contention for memory or issue slots, and
# `cp.async` drawn as free for the threads that issue it (no registers, no SMEM stores), so stage
# 10 ends first even with two buffers. Two things on the GPU differ from it:
#
# - the tuned `NBUF` is whatever the tuning file's configuration says (printed with the resource
#   report below), not the deepest ring: more buffers cost SMEM per block, and the tuner keeps
#   whichever configuration it measured fastest;
# - stage 10 does not beat stage 9 everywhere: in the measurements at the end it trails stage 9
#   at the power-of-two sizes from 1024 up. A likely reason, from its module docstring (a
#   hypothesis; the copies were not profiled here): A is read along K and stored transposed, so
#   its tile is copied with one 4-byte `cp.async.ca` per element (stage 9 reads it from GMEM
#   with 128-bit loads, four elements per instruction), and every copy needs its own GMEM and
#   SMEM addresses: that address arithmetic takes issue slots from the FMAs.

# %% [markdown]
# ## Run and check
#
# On a GPU, `sgemm(stage=name)` uses the configuration tuned for the shape's class (notebook
# 06); on the simulator there is no tuning data and each stage runs its default configuration.

# %%
M, N, K = h.demo_shape()
h.check_stages(["warptiling", "double_buffering", "multistage"], M, N, K)

# %% [markdown]
# ## Registers, SMEM, occupancy of the tuned configurations
#
# The report for the configurations the committed sm_90 tuning picks at the 4096 class. Note the
# occupancy: one or two blocks per SM, a small fraction of the 64 warps an SM can hold. These
# kernels trade occupancy (many warps to switch between) for **instruction-level parallelism** (many
# independent FMAs and loads in flight within each warp; V. Volkov, "Better Performance at Lower
# Occupancy", GTC 2010), spending up to the 255-register limit on accumulators. Stage 10's tiles
# live in dynamic SMEM (`NBUF` copies, beyond the 48 KB of static SMEM when needed).

# %%
_ = h.resources(["warptiling", "double_buffering", "multistage"], tuned="large")

# %% [markdown]
# ## Measured on the GPU
#
# The tunable stages are measured with their tuned configuration for each size (the `config`
# column of the CSV). At N >= 2048, warp tiling alone is level with or slightly below stage 7,
# despite its better FFMA-per-wavefront count: whatever it saves in SMEM traffic, something else
# (not profiled here) takes back. Its gains are at the ragged sizes and at N <= 1024, where its
# tuned configurations (other tiles, split-K: notebook 06) fill the GPU better than stage 7's
# fixed tiles. Its real payoff is what it enables: tile sizes that are parameters, and the parts
# (`make_parts`) on which stages 9 and 10 build their pipelines. Hiding the GMEM latency is what
# then brings the kernels near cuBLAS. At the ragged sizes, the choice of tiles matters as much
# as the kernel: notebook 06.

# %%
h.print_results(["bank_conflict_free", "warptiling", "double_buffering", "multistage"])
h.plot_results(
    ["bank_conflict_free", "warptiling", "double_buffering", "multistage"],
    highlight=["warptiling", "double_buffering", "multistage"],
)
