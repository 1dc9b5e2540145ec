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
# # 06 · Tuning and shapes: the configuration space, waves, split-K and stream-K
#
# The last three stages (notebook 05) take their tile sizes as a configuration. No single
# configuration is best everywhere: large tiles reuse more and need fewer blocks, small tiles
# fill the GPU better when C is small or ragged. This notebook covers how `numba_gemm` chooses:
# the space the tuner sweeps, what it picked on the H200, the **wave quantization** model the plan
# uses to price a configuration at a given shape, and the two ways to get more parallelism than
# C's tiles offer, **split-K** and **stream-K** (both in the package; stream-K's kernels in
# `numba_gemm/kernels/_streamk.py`).

# %%
import _helpers as h
import matplotlib.pyplot as plt

import numba_gemm
from numba_gemm.device import SMEM_OPTIN_LIMIT, DeviceInfo
from numba_gemm.kernels import _splitk
from numba_gemm.kernels import _tunable as tun
from numba_gemm.kernels import k09_double_buffering as k09
from numba_gemm.kernels import k16_skinny_n as k16
from numba_gemm.plan import tuning

print("outputs from:", h.machine())
TUNABLE = ("warptiling", "double_buffering", "multistage")
stages = {n: numba_gemm.get_stage(n) for n in TUNABLE}
meta, _ = h.results()

# %% [markdown]
# ## The configuration space
#
# A configuration is a plain dict of ints; `_tunable` documents the keys, and `check_config` is
# the one list of constraints (divisibility of the tiles, 32 thread tiles per warp sub-tile,
# float4 loads that split evenly over the threads, SMEM and register limits). The tuner and
# `Stage.with_config` both rely on it.

# %%
print(tun.__doc__)
h.show_source(tun.check_config)

# %% [markdown]
# An invalid configuration is rejected with the constraint it breaks, before anything compiles:

# %%
try:
    stages["warptiling"].with_config(dict(stages["warptiling"].config, WN=48))
except ValueError as e:
    print("ValueError:", e)

# %% [markdown]
# Each tunable stage's `space` is the grid of tile shapes the tuner times first (filtered by
# `check_config` and by block sizes and accumulator counts worth timing), before refining launch
# bounds (`MINB`) and split-K for the best ones. The stars are the committed winners for the
# large (4096) class, from the sm_90 tuning file.

# %%
copies = {
    "warptiling": lambda c: 1,
    "double_buffering": lambda c: k09.SMEM_COPIES,
    "multistage": lambda c: c["NBUF"],
}
large = tuning.winners("large", device=("", (9, 0)))
h.plot_space(
    {n: (s.space, copies[n]) for n, s in stages.items()},
    {f"{n} (large)": (r["config"], copies[n]) for n, r in large.items() if n in copies},
)

# %% [markdown]
# ## What the tuner picked on the H200
#
# `python -m numba_gemm.tools.tune` times candidates per **shape class** and keeps the winner and a
# few alternatives of other block-tile shapes. The *regime* classes hold single products that a
# class by size misprices (few rows: skinny, narrow; few columns: gemv_n, skinny_n, narrow_n;
# deep K); the *area* classes (small, medium,
# large) split the rest by the number of elements of C; batched holds batches of small matrices.
# The classes, from `numba_gemm.plan.tuning.CLASSES` (`tuning.shape_class` puts a batch of small
# matrices in `batched`, and any other product in the first of the others that holds it, a batch
# counting as `batch * M` rows):

# %%
for cls in tuning.CLASSES:
    bound = f"{cls.limit:,} ({round(cls.limit**0.5)}^2)" if cls.limit else ""
    if cls.batch > 1:
        who = f"batches (> 1) of matrices with M*N <= {bound}"
    elif cls.regime:
        who = "products with " + ", ".join(
            ([f"M <= {cls.max_m}"] if cls.max_m else [])
            + ([f"N <= {cls.max_n}"] if cls.max_n else [])
            + ([f"K >= {cls.min_depth} max(M, N)"] if cls.min_depth else [])
            + ([f"M*N <= {bound}"] if cls.limit else [])
        )
    elif cls.limit is None:
        who = "any other product"
    else:
        who = f"products with batch*M*N <= {bound}"
    tuned = "x".join(map(str, cls.shape)) + (f", batch {cls.batch}" if cls.batch > 1 else "")
    print(f"{cls.name:<8} {who:<58} tuned at {tuned}")

# %% [markdown]
# Few rows and few columns are not mirror images for a row-major A. With few rows (stage 15,
# `skinny`) the large operand is B, read along N: a thread owns four columns and each B element
# goes through registers once. With few columns (stage 16, `skinny_n`) the large operand is A,
# and it can only be streamed along K: the 32 lanes of a warp split a row's K (one 128-bit load
# each), so every output is a sum over the lanes. Stage 16 ends with a *reduce-scatter* over the
# lanes: at each of five shuffle exchanges (lane `l` with lane `l ^ 16`, then `^ 8`, ...) a lane
# keeps half of its partial sums, sends the other half and adds what its partner sent: 62
# shuffles for 64 sums per lane instead of 5 x 64 for a butterfly on each. Which lane ends with
# which sums, for the H200's tuned configuration of the few-columns class (on the simulator the
# same exchange runs through SMEM, so a wrong index map fails there too):

# %%
h.show_source(k16.make_lane_reduce)
cfg = tuning.winners("skinny_n", device=("", (9, 0)))["skinny_n"]["config"]
V = cfg["RW"] * cfg["NB"]
print(f"{h.describe(cfg)}: {V} partial sums per lane, (row, column) = divmod(sum, NB)")
for lane in range(0, 32, 4):
    cells = []
    for q in range(lane, lane + 4):
        first, count, owner = k16.lane_sums_owned(V, q)
        sums = [divmod(first + i, cfg["NB"]) for i in range(count)] if owner else "copy"
        cells.append(f"lane {q:2}: {sums}")
    print("   ".join(cells))

# %% [markdown]
# The committed defaults for compute capability 9.0 (`numba_gemm/tuning/sm_90.json`, measured on
# the GPU named in it). `block(s)/SM` is what the CUDA occupancy API reported on that GPU for the
# kernel the tuner had loaded; the resource reports of these notebooks compute the same quantity
# offline, and the two can differ (see the small-class report below).

# %%
path = tuning.defaults_path((9, 0))
print(f"{path.relative_to(h.ROOT)}: classes {[c.name for c in tuning.CLASSES]}")
for cls in tuning.CLASSES:
    shape = "x".join(map(str, cls.shape)) + (f" x{cls.batch}" if cls.batch > 1 else "")
    for name, r in sorted(tuning.winners(cls.name, device=("", (9, 0))).items()):
        if numba_gemm.get_stage(name).precision != "fp32":
            continue  # the TF32 wgmma stages' classes: design.md §5.1
        print(
            f"{cls.name:<7} {shape:>18} {name:<17} {r['ms']:.3f} ms "
            f"({r['pct_cublas']:.0%} of cuBLAS), {r['blocks_per_sm']} block(s)/SM: "
            f"{h.describe(r['config'])}"
        )

# %% [markdown]
# ## Wave quantization
#
# A grid of `ceil(M/BM) * ceil(N/BN)` blocks runs on the SMs in **waves**: each SM holds as many
# blocks at once as its registers, SMEM and thread slots allow (the occupancy of notebooks
# 03-05), so a wave is `SMs x blocks per SM` blocks. Every block walks all of K, so a kernel
# takes about `ceil(blocks / slots)` times the duration of one block. When the last wave is only
# partly filled, the idle slots cost as much time as busy ones.
#
# That is a model, and it has a blind spot. With one block per SM an idle slot is an idle SM. With
# several blocks per SM, a partly filled last wave can still give every SM at least one block:
# no SM idles, they just run at lower occupancy, and a block with the SM less crowded may well
# finish sooner. The model counts those empty slots as lost time all the same, so it overstates
# the loss there. (It also treats waves as if they ran in lockstep, while the GPU starts a new
# block whenever a slot frees.)
#
# The committed large-class winner of `multistage` at two adjacent sizes, with the GPU's SM count
# from the results file: one extra row and column of C adds a row and a column of mostly empty
# tiles, and a whole wave.

# %%
sms = int(meta["sm_count"])
ms_large = large["multistage"]
c = ms_large["config"]
fig, axes = plt.subplots(2, 1, figsize=(12, 4.6))
for ax, n in zip(axes, (4096, 4097), strict=True):
    h.draw_waves(ax, n, n, c["BM"], c["BN"], sms, ms_large["blocks_per_sm"])
fig.tight_layout()
plt.show()

# %% [markdown]
# The busy share of the slots across sizes, for the large-class candidates the tuning file keeps
# (winner and alternatives of each stage; tile shapes with the same number of blocks per wave
# coincide): no tile shape is best at every size, which is why the plan keeps several candidates
# per class and prices each at the actual shape.

# %%
cands = [
    (r["config"]["BM"], r["config"]["BN"], r["blocks_per_sm"], r["config"]["SPLITK"])
    for name in ("double_buffering", "multistage")
    for r in tuning.candidates(large[name], name)
]
h.plot_wave_efficiency(cands, sms, range(1024, 8193, 8), marks=(2048, 4096, 8192))

# %% [markdown]
# ## The plan: pricing candidates at the actual shape
#
# `numba_gemm.plan_for` is what `sgemm` calls (once per shape). For the automatic choice it
# takes every tuned candidate of every stage for the shape's class and predicts its time at this
# shape from its time at the tuned shape, scaled by `waves x K tiles` (plus the cost of split-K's
# reduction); the cheapest wins. Here it is asked for the GPU of the committed run (its name,
# compute capability and SM count, from `results.json`), next to what the benchmark measured for
# `sgemm`'s choice at the same sizes.

# %%
gpu = DeviceInfo(
    id=0, name=meta["gpu"], cc=h.gpu_peaks()["cc"], sm_count=sms, smem_optin=SMEM_OPTIN_LIMIT
)
for n in (1024, 2048, 4096, 4095, 4097):
    p = numba_gemm.plan_for(n, n, n, device=gpu)
    r = h.result("auto", n)
    print(
        f"{n}^3 plan: {p.stage.name} {h.describe(p.stage.config)}, {p.variant} variant, "
        f"predicted {p.predicted_ms:.3f} ms\n       bench: {h.describe(r['config'])}, "
        f"measured {r['median_ms']:.3f} ms ({r['pct_cublas']:.0%} of cuBLAS)"
    )
print("\nwhy, at 4097:", numba_gemm.plan_for(4097, 4097, 4097, device=gpu).reason)

# %% [markdown]
# ## Split-K
#
# When C has fewer tiles than the GPU has slots, the whole grid is one partly filled wave: the
# slots without a tile (whole SMs, when there are fewer tiles than SMs) idle for the whole
# kernel. Split-K cuts K into `SPLITK` slices and gives each (tile, slice) pair its own block
# (grid `z`); each block writes its partial product to a workspace and counts itself in at the
# tile's counter (a fence, then an atomic add). The block that arrives last sums the tile's
# slices in slice order and writes C: the same rounding whichever block is last (deterministic),
# and no second kernel, so no second launch on the host. Past 16 slices the sum has two levels
# (groups of about sqrt(SPLITK) slices first), so that no single block reads 64 partial tiles. It
# pays the extra traffic of the partial products and a tail on the last blocks, which is worth it
# only when the parallelism gained is large. The device function every split-K block ends with:

# %%
h.show_source(_splitk.make_fixup)

# %% [markdown]
# The small-class winner of `multistage` uses it; here is its grid at 1024-cubed with and without
# its `SPLITK`:

# %%
small = tuning.winners("small", device=("", (9, 0)))["multistage"]
c = small["config"]
fig, axes = plt.subplots(2, 1, figsize=(12, 3.8))
for ax, splits in zip(axes, (1, c["SPLITK"]), strict=True):
    h.draw_waves(ax, 1024, 1024, c["BM"], c["BN"], sms, small["blocks_per_sm"], splits)
fig.tight_layout()
plt.show()

# %% [markdown]
# A split-K configuration is checked like any other (a `Stage` passed to `sgemm` runs as given).
# Its relative error differs a little from the other checks' on the same operands: each slice
# sums its own part of K and the slices are added at the end, a different order of the same
# floating-point additions, so the rounding differs.

# %%
M, N, K = h.demo_shape()
db = stages["double_buffering"]
split = db.with_config(dict(db.config, SPLITK=2))
print(split, "grid:", split.launch_config(M, N, K)[0])
h.check_stages([split], M, N, K)

# %% [markdown]
# ## Stream-K
#
# Split-K still works in waves of equal blocks. **Stream-K** (Osama, Merrill, Cecka, Garland and
# Owens, "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on
# the GPU", PPoPP 2023) launches one persistent block per SM slot and gives each the same number
# of K iterations of the whole problem (tiles x K steps), in tile order: a block's share may end
# in the middle of a tile, and the blocks that share a tile combine their partial sums (a
# "fix-up"). Every SM then finishes at about the same time whatever the number of tiles, at the
# price of the fix-ups. CUTLASS implements it (its stream-K tile schedulers, also in hybrid with
# data-parallel waves); `numba_gemm` does not. A toy comparison, schematic (one block per SM, no
# real timings): 5 tiles of 8 K iterations on 4 SMs, split-K 2. Data-parallel needs a second
# wave for one tile; split-K's 10 half-tiles still do not divide evenly over 4 SMs, so its last
# wave is half empty; stream-K gives every SM the same share.

# %%
h.draw_decompositions(tiles=5, iters=8, sms=4, splits=2)

# %% [markdown]
# ## Registers, SMEM, occupancy of the small-class picks
#
# Compare with the large-class report of notebook 05. The two stages get their parallelism for
# small products in different ways. `double_buffering`'s small pick has smaller tiles, fewer
# accumulators and more blocks per SM than its large pick. `multistage`'s keeps a large block
# tile at one block per SM and gets more blocks from split-K (`SPLITK`) instead, with a deeper
# `cp.async` ring (`NBUF`) than its large pick.

# %%
_ = h.resources(["double_buffering", "multistage"], tuned="small")

# %% [markdown]
# The report's `blk/SM` for `double_buffering` need not match the `block(s)/SM` of its tuning
# record printed earlier, and here it does not. They are two different things:
#
# - the tuning record is a measurement: `tune._alternatives` asks the CUDA occupancy API
#   (`cuOccupancyMaxActiveBlocksPerMultiprocessor`) about the kernel it loaded on the GPU during
#   tuning, with that kernel's registers and its dynamic SMEM. The plan prices waves with it;
# - the report is a calculation: `resources.occupancy_sm90` applies the sm_90 occupancy rules to
#   the registers and SMEM that `ptxas -v` gives for today's compile of the same configuration.
#
# They agree when both describe the same code, and here they do not: the small class was tuned
# (its records carry the date) before later changes to the tunable kernels, among them the fix
# to `double_buffering`'s prefetch described in docs/design.md, item 8. The record describes the
# kernel as it was compiled then, the report the kernel as it is now; a re-tune would bring the
# record, and the plan's pricing with it, up to date.

# %% [markdown]
# ## Measured on the GPU
#
# `sgemm`'s automatic choice (`auto`) against the tunable stages, each with its tuned
# configuration, at every committed size. The ragged sizes show both effects of this notebook:
# 4095 (rows not 16-byte aligned, the scalar-GMEM variants) and 4097 (an extra, mostly idle wave
# unless the plan picks smaller tiles). What the benchmark's `auto` picked at each size:

# %%
for n in h.square_sizes() + h.square_sizes(pow2=False):
    r = h.result("auto", n)
    print(f"{n:>5}: {r['pct_cublas']:>5.1%} of cuBLAS FP32, {h.describe(r['config'])}")
h.print_results(["auto", *TUNABLE])
h.plot_results(["auto", *TUNABLE], highlight=TUNABLE)

# %% [markdown]
# The plan picks the candidate its model prices cheapest, which is not always the fastest one.
# Below, per size: the plan's pick with its predicted time (the plan for the committed run's
# GPU, as above), what the benchmark measured for `auto`, and the fastest of the tunable stages
# as the benchmark measured them, each with its own tuned configuration.

# %%
for n in h.square_sizes() + h.square_sizes(pow2=False):
    p = numba_gemm.plan_for(n, n, n, device=gpu)
    auto = h.result("auto", n)
    best = min((h.result(s, n) for s in TUNABLE), key=lambda r: r["median_ms"])
    ratio = auto["median_ms"] / best["median_ms"]
    print(
        f"{n:>5}: plan {p.stage.name:<16} predicted {p.predicted_ms:8.4f} ms, measured "
        f"{auto['median_ms']:8.4f} ms | fastest measured: {best['stage']:<16} "
        f"{best['median_ms']:8.4f} ms; auto / fastest {ratio:.2f}"
    )

# %% [markdown]
# From 1024 up the model ranks well, with one exception: at 2048 it picks `multistage` where
# `double_buffering` measured faster. The tuning record it prices `double_buffering` from is
# slower than what the benchmark measured (the medium-class entry predates the fix of item 8 in
# docs/design.md): the error is in the model's data, not in the model.
#
# Below 1024 the model itself is the problem. It scales a candidate's time at the tuned shape by
# `waves x K tiles` and has no term for what does not scale that way: the launch, each block's
# prologue and epilogue, the pipeline's fill and drain. At the smallest sizes its predictions
# fall well short of the measured times. At 256 and 512 it prices a split-K `double_buffering`
# configuration cheapest, and that one takes markedly longer than the `multistage` configuration
# measured at the same sizes (last column). Ranking small shapes well would need tuning data
# measured at those shapes, not extrapolated to them from 1024.
