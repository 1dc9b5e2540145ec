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
# the space the tuner sweeps, what it picked, the **wave quantization** model the plan uses to
# price a configuration at a given shape, and the two ways to get more parallelism than C's
# tiles offer, **split-K** and **stream-K** (both implemented in the package).
#
# Where the outputs come from: the cells that run or check a kernel run on the machine the first
# cell prints (the CUDA simulator or a GPU); every GPU number is read from data stored in the
# repository: the tuning file (`numba_gemm/tuning/sm_90.json`, which names the GPUs it was
# measured on) and the H200 benchmark run stored in the repository (`h.results()`, which names its
# GPU and SM count). The plans below are made for that GPU from that tuning file, so they do not
# depend on the machine that runs the notebook (only a user's own tuning cache, where one exists,
# would change them).

# %%
import math

import _figures_pipeline as fig_pipe
import _helpers as h
import matplotlib.pyplot as plt

import numba_gemm
from numba_gemm.device import SMEM_OPTIN_LIMIT, DeviceInfo
from numba_gemm.kernels import _splitk, _streamk
from numba_gemm.kernels import _tunable as tun
from numba_gemm.kernels import k09_double_buffering as k09
from numba_gemm.plan import cost, tuning

print("outputs from:", h.machine())
TUNABLE = ("warptiling", "double_buffering", "multistage")
stages = {n: numba_gemm.get_stage(n) for n in TUNABLE}
meta, _ = h.results()
cc = tuple(int(x) for x in meta["compute_capability"].split("."))
sms = int(meta["sm_count"])
# the GPU of the stored benchmark run: its tuning data and its plans, wherever this notebook runs
gpu = DeviceInfo(id=0, name=meta["gpu"], cc=cc, sm_count=sms, smem_optin=SMEM_OPTIN_LIMIT)
print(
    f"benchmark run stored in the repository: {meta['gpu']}, compute capability "
    f"{cc[0]}.{cc[1]}, {sms} SMs"
)

# %% [markdown]
# ## The configuration space
#
# A configuration is a plain dict of ints (the keys of notebook 05: tile sizes, `MINB`,
# `SPLITK`, `NBUF`). `check_config` is the one list of constraints (divisibility of the tiles,
# 32 thread tiles per warp sub-tile, float4 loads that split evenly over the threads, SMEM and
# register limits); the tuner and `Stage.with_config` both rely on it.

# %%
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
# bounds (`MINB`) and split-K for the best ones. In the figure each dot is one configuration of
# the grid (the bigger the dot, the more threads per block); the stars are the winners the tuning
# file holds for the large (4096-cubed) class. `multistage` with `NBUF = 2` keeps as many SMEM
# copies as `double_buffering`, so its dots of those tile shapes sit exactly on
# `double_buffering`'s (drawn later, on top): the orange of the middle stage shows only where the
# two spaces differ. What to look at is the vertical position of the stars, printed under the
# figure: the winners sit at the top of the accumulator range, where each thread does the most
# FMAs per value it loads (notebook 05), and spread along the SMEM axis.

# %%
copies = {
    "warptiling": lambda c: 1,
    "double_buffering": lambda c: k09.SMEM_COPIES,
    "multistage": lambda c: c["NBUF"],
}
large = tuning.winners("large", device=gpu)
h.plot_space(
    {n: (s.space, copies[n]) for n, s in stages.items()},
    {f"{n} (large)": (r["config"], copies[n]) for n, r in large.items() if n in copies},
)


def accumulators(cfg):
    d = tun.derived(cfg)
    return d["WMITER"] * cfg["TM"] * cfg["WNITER"] * cfg["TN"]


top = max(accumulators(cfg) for s in stages.values() for cfg in s.space)
for n in TUNABLE:
    cfg = large[n]["config"]
    smem = copies[n](cfg) * tun.derived(cfg)["TILE_SMEM_BYTES"] / 1024
    print(
        f"{n:<17} large-class winner: {accumulators(cfg)} accumulators per thread "
        f"(largest in the space: {top}), {smem:.0f} KiB of SMEM per block"
    )

# %% [markdown]
# ## What the tuner picked
#
# `python -m numba_gemm.tools.tune` times candidates per **shape class** and keeps the winner and a
# few alternatives of other block-tile shapes. A class is a family of shapes that one tuned
# configuration can serve. Two kinds: products of an unusual *shape* (few rows, few columns, a
# very short or very long K), whose best tiles differ from those of a square of the same size,
# and square-ish products grouped by *size*, the number of elements of C (small, medium, large).
# A last class holds batches of small matrices. The classes, from `numba_gemm.plan.tuning.CLASSES`
# (`tuning.shape_class` puts a batch of small matrices in `batched`, and any other product in the
# first of the others that holds it, a batch counting as `batch * M` rows):

# %%
for c in tuning.CLASSES:
    bound = f"{c.limit:,} ({round(c.limit**0.5)}^2)" if c.limit else ""
    if c.batch > 1:
        who = f"batches (> 1) of matrices with M*N <= {bound}"
    elif c.regime:
        rules = [f"M <= {c.max_m}"] if c.max_m else []
        rules += [f"N <= {c.max_n}"] if c.max_n else []
        rules += [f"K >= {c.min_depth} max(M, N)"] if c.min_depth else []
        rules += [f"K <= {c.max_k}"] if c.max_k else []
        rules += [f"M*N <= {bound}"] if c.limit else []
        who = "products with " + ", ".join(rules)
    elif c.limit is None:
        who = "any other product"
    else:
        who = f"products with batch*M*N <= {bound}"
    tuned = "x".join(map(str, c.shape)) + (f", batch {c.batch}" if c.batch > 1 else "")
    print(f"{c.name:<8} {who:<58} tuned at {tuned}")

# %% [markdown]
# The few-rows and few-columns classes (`skinny`, `gemv_n`, `skinny_n`) are where a product reads
# far more bytes than it does FLOPs: their own stages, 15 (`skinny`) and 16 (`skinny_n`), stream
# the large operand once and are the subject of notebook 09. This notebook follows the tiled
# stages 8-10.

# %% [markdown]
# The winners of the FP32 stages per class, from the tuning file's entry for the GPU of the stored
# benchmark run. `block(s)/SM` is what the CUDA occupancy API reported on that GPU for the kernel
# the tuner had loaded.

# %%
print(f"{tuning.source(gpu)}: classes {[c.name for c in tuning.CLASSES]}")
for c in tuning.CLASSES:
    shape = "x".join(map(str, c.shape)) + (f" x{c.batch}" if c.batch > 1 else "")
    for name, r in sorted(tuning.winners(c.name, device=gpu).items()):
        if numba_gemm.get_stage(name).precision != "fp32":
            continue  # the tensor-core stages: notebook 07 on
        print(
            f"{c.name:<8} {shape:>18} {name:<17} {r['ms']:.3f} ms "
            f"({r['pct_cublas']:.0%} of cuBLAS), {r['blocks_per_sm']} block(s)/SM: "
            f"{h.describe(r['config'])}"
        )

# %% [markdown]
# ## Wave quantization
#
# A grid of `ceil(M/BM) * ceil(N/BN)` blocks runs on the SMs in **waves**: each SM holds as many
# blocks at once as its registers, SMEM and thread slots allow (the occupancy of notebooks
# 03-05), so a wave is `SMs x blocks per SM` blocks, the **slots**. Every block walks all of K,
# so a kernel takes about `ceil(blocks / slots)` times the duration of one block. When the last
# wave is only partly filled, the idle slots cost as much time as busy ones. The model, in full:


# %%
def waves(M, N, BM, BN, slots, splits=1):
    """Blocks of a grid of BM x BN tiles (``splits`` K slices each), waves of ``slots``
    resident blocks, and the share of the slots the waves keep busy."""
    blocks = math.ceil(M / BM) * math.ceil(N / BN) * splits
    n = math.ceil(blocks / slots)
    return dict(blocks=blocks, waves=blocks / slots, full_waves=n, busy=blocks / (n * slots))


# %% [markdown]
# It has a blind spot. With one block per SM an idle slot is an idle SM. With several blocks per
# SM, a partly filled last wave can still give every SM at least one block: no SM idles, they just
# run at lower occupancy, and a block with the SM less crowded may well finish sooner. The model
# counts those empty slots as lost time all the same, so it overstates the loss there. (It also
# treats waves as if they ran in lockstep, while the GPU starts a new block whenever a slot
# frees.)
#
# The large-class winner of `multistage` at two adjacent sizes, with the SM count of the stored
# run: one extra row and column of C adds a row and a column of mostly empty tiles. It is drawn
# here, rather than `double_buffering` (which the plan runs at these sizes, as shown further
# down), because it holds one block per SM, the case in which the model is exact about idle
# SMs; the cell prints how many blocks per SM `double_buffering`'s winner holds, the case with
# the blind spot above.

# %%
ms_large = large["multistage"]
c = ms_large["config"]
slots = sms * ms_large["blocks_per_sm"]
fig, axes = plt.subplots(2, 1, figsize=(12, 4.6))
for ax, n in zip(axes, (4096, 4097), strict=True):
    what = f"{n}x{n} in {c['BM']}x{c['BN']} tiles, {sms} SMs x {ms_large['blocks_per_sm']}"
    fig_pipe.draw_waves(ax, waves(n, n, c["BM"], c["BN"], slots), slots, what)
fig.tight_layout()
plt.show()
print(
    f"blocks per SM of the large-class winners: multistage {ms_large['blocks_per_sm']}, "
    f"double_buffering {large['double_buffering']['blocks_per_sm']}"
)

# %% [markdown]
# The busy share of the slots across sizes, for the large-class candidates the tuning file keeps
# (winner and alternatives of each stage). Candidates whose curves are identical (same tile area
# and same blocks per SM give the same waves) share one line and one legend entry. No tile shape
# is best at every size, which is why the plan keeps several candidates per class and prices each
# at the actual shape.

# %%
cands = sorted(
    {
        (r["config"]["BM"], r["config"]["BN"], r["blocks_per_sm"], r["config"]["SPLITK"])
        for name in ("double_buffering", "multistage")
        for r in tuning.candidates(large[name], name)
    }
)
ns = range(1024, 8193, 8)
curves = {}  # identical curves -> one line, its labels joined
for bm, bn, per, s in cands:
    ys = tuple(waves(n, n, bm, bn, sms * per, s)["busy"] for n in ns)
    label = f"{bm}x{bn} tiles, {per} block(s)/SM" + (f", split {s}" if s > 1 else "")
    curves.setdefault(ys, []).append(label)
fig_pipe.plot_busy(
    ns,
    {" = ".join(labels): list(ys) for ys, labels in curves.items()},
    f"wave quantization on {sms} SMs",
    marks=(2048, 4096, 8192),
)

# %% [markdown]
# ## The plan: pricing candidates at the actual shape
#
# `numba_gemm.plan_for` is what `sgemm` calls (once per shape). For the automatic choice it
# takes every tuned candidate of every stage for the shape's class and predicts its time at this
# shape from its time at the tuned shape, scaled by the work the wave model counts: waves times
# the K tiles each block walks. The cheapest wins. Without split-K, that prediction is:


# %%
def predict(cand, M, N, K, sms):
    """A candidate's time at M x N x K from its time at the tuned shape: scaled by waves x K
    tiles (the wave model; aligned operands, no split-K)."""
    BM, BN, BK = (cand["config"][k] for k in ("BM", "BN", "BK"))
    slots = sms * cand["blocks_per_sm"]

    def work(m, n, k):
        return math.ceil(math.ceil(m / BM) * math.ceil(n / BN) / slots) * math.ceil(k / BK)

    return cand["ms"] * work(M, N, K) / work(*cand["shape"])


# %% [markdown]
# The package's version (`numba_gemm.plan.cost.estimate_ms`) adds what this one leaves out
# (split-K's reduction, batches, the scalar kernel of unaligned rows); on the large class's
# candidates without split-K and aligned sizes the two agree:

# %%
for name in ("double_buffering", "multistage"):
    for cand in tuning.candidates(large[name], name):
        if cand["config"]["SPLITK"] != 1:
            continue
        cells = []
        for n in (2048, 4096, 8192):
            mine, pkg = predict(cand, n, n, n, sms), cost.estimate_ms(cand, n, n, n, sms)
            assert math.isclose(mine, pkg, rel_tol=1e-9), (mine, pkg)
            cells.append(f"{n}: {mine:7.3f} ms")
        print(f"{name:<17} {h.describe(cand['config']):<72} " + "  ".join(cells))

# %% [markdown]
# The plan for the GPU of the stored run at each of its square sizes, next to what the benchmark
# measured for `sgemm`'s own choice (`auto`) there, and the plan's reason at the ragged size
# (rows of 4095 floats are not 16-byte aligned, so the 128-bit loads of notebook 04 cannot read
# them). The reason names two ways to run such a product. The *scalar-GMEM* variant is the same
# kernel loading global memory one float at a time. The *staged* plan (`numba_gemm.plan.staging`)
# first copies the operands into scratch buffers whose rows are padded with zeros to a multiple
# of 4 floats, runs the aligned (vector) kernel there, and copies C back; the reason gives the
# predicted time of the copies, of the aligned plan, and of the scalar plan it beat.

# %%
squares = h.square_sizes() + h.square_sizes(pow2=False)
for n in squares:
    p = numba_gemm.plan_for(n, n, n, device=gpu)
    r = h.result("auto", n)
    bench = (
        f"{h.describe(r['config'])}, measured {r['median_ms']:.3f} ms "
        f"({r['pct_cublas']:.0%} of cuBLAS)"
        if r and r["median_ms"]
        else "not in the stored run"
    )
    print(
        f"{n}^3 plan: {p.stage.name} {h.describe(p.stage.config)}, {p.variant} variant, "
        f"predicted {p.predicted_ms:.3f} ms\n       bench: {bench}"
    )
ragged = next(iter(h.square_sizes(pow2=False)), 4095)
pr = numba_gemm.plan_for(ragged, ragged, ragged, device=gpu)
print(f"\nwhy, at {ragged}:", pr.reason.replace("; ", ";\n    "))
print("staged:", pr.staging is not None)

# %% [markdown]
# ## Split-K
#
# When C has fewer tiles than the GPU has slots, the whole grid is one partly filled wave and the
# slots without a tile idle for the whole kernel. Split-K cuts K into `SPLITK` slices and gives each
# (tile, slice) pair its own block (grid `z`): `SPLITK` times the blocks, each walking `1 / SPLITK`
# of K. The grid of the small-class winner of `multistage` at 1024-cubed, with and without its
# `SPLITK` (the titles say how many slices it has). It is drawn because it is its small-class winner
# uses split-K (as `warptiling`'s does; `double_buffering`'s does not); the plan itself runs
# `double_buffering` at 1024-cubed (printed above), with the configuration that cell prints.

# %%
small = tuning.winners("small", device=gpu)["multistage"]
c = small["config"]
slots_small = sms * small["blocks_per_sm"]
splits = sorted({1, c["SPLITK"]})
fig, axes = plt.subplots(len(splits), 1, figsize=(12, 1.9 * len(splits)), squeeze=False)
for ax, s in zip(axes[:, 0], splits, strict=True):
    w = waves(1024, 1024, c["BM"], c["BN"], slots_small, s)
    what = f"1024x1024, {c['BM']}x{c['BN']} tiles x {s} K slice(s)"
    fig_pipe.draw_waves(ax, w, slots_small, what)
fig.tight_layout()
plt.show()

# %% [markdown]
# **How the slices are combined.** Each block writes its partial product of the tile, unscaled,
# to its own slice of a workspace (`SPLITK * M` rows of N floats), then *arrives* at the tile's
# counter: a fence makes its writes visible to the whole GPU, and one thread adds 1 to the
# counter atomically. The block that brings the count to `SPLITK` is the last of the tile's
# slices: it sums the slices in slice order (0, 1, ...) and writes `C = alpha * sum + beta * C`.
# The order is fixed whichever block arrives last, so the result is deterministic, and it all
# happens in the one kernel. The arrival, as the package writes it:

# %%
h.show_source(_splitk.arrive)

# %% [markdown]
# **The cost.** Every partial product is written once and read once: `SPLITK * M * N * 4` bytes
# of partial sums, so `2 * SPLITK * M * N * 4` bytes more traffic than the plain kernel (the
# "extra traffic" column), plus the tail in which the last block of each tile sums. The plan
# prices that (`cost.reduce_ms`) and adds it to the wave model's prediction, so split-K wins only
# where the slots it fills are worth more than its traffic. For the small-class winner at
# 1024-cubed:

# %%
small_cand = tuning.candidates(small, "multistage")[0]
for s in sorted({1, 2, c["SPLITK"], 2 * c["SPLITK"]}):
    extra = 2 * s * 1024 * 1024 * 4 if s > 1 else 0
    pred = cost.estimate_ms(small_cand, 1024, 1024, 1024, sms, splits=s)
    print(
        f"SPLITK {s:>2}: {waves(1024, 1024, c['BM'], c['BN'], slots_small, s)['busy']:4.0%} of "
        f"the slots busy, {extra / 2**20:5.0f} MiB of extra traffic, reduction "
        f"{cost.reduce_ms(s, 1024, 1024, c, stages['multistage']) * 1e3:5.1f} us, "
        f"predicted {pred * 1e3:6.1f} us in all"
    )

# %% [markdown]
# Those are predictions. The tuning file holds measurements: at each class's tuned shape the tuner
# timed some tile shapes at more than one `SPLITK`. Every such tile, with its measured times (the
# fastest marked `*`):

# %%
won, lost, gain = set(), set(), 1.0
for cls in tuning.CLASSES:
    shape = "x".join(map(str, cls.shape))
    for name, rec in sorted(tuning.winners(cls.name, device=gpu).items()):
        if name not in TUNABLE:
            continue
        groups = {}  # the same configuration but for SPLITK -> {SPLITK: ms}
        for x in tuning.candidates(rec, name):
            tile = tuple(sorted((k, v) for k, v in x["config"].items() if k != "SPLITK"))
            groups.setdefault(tile, {})[x["config"]["SPLITK"]] = x["ms"]
        for tile, by_split in groups.items():
            if len(by_split) < 2:
                continue
            best = min(by_split, key=by_split.get)
            (won if best > 1 else lost).add(cls.name)
            if best > 1 and 1 in by_split:
                gain = max(gain, by_split[1] / by_split[best])
            cfg = dict(tile)
            tiles = f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} MINB {cfg['MINB']}" + (
                f" NBUF {cfg['NBUF']}" if "NBUF" in cfg else ""
            )
            times = ", ".join(
                f"{k}: {v:.3f} ms" + ("*" if k == best else "") for k, v in sorted(by_split.items())
            )
            print(f"{cls.name:<8} {shape:>15} {name:<17} {tiles:<27} SPLITK {times}")
print(
    f"\nsplit-K fastest in classes: {sorted(won)}; no split (SPLITK 1) fastest in: "
    f"{sorted(lost)}\nlargest measured gain of the best split over SPLITK 1: {gain:.1f}x"
)

# %% [markdown]
# Split-K won where C has few tiles for the slots (the few-rows, few-columns and deep classes) and
# lost where C's own tiles already come close to filling them (medium; at the small class it
# depends on the tile), as the model predicts: there it adds its extra traffic and fills little.
#
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
# Split-K still works in waves of equal blocks, and a whole factor of more blocks rarely lands on
# a multiple of the slots. **Stream-K** (Osama, Merrill, Cecka, Garland and Owens, "Stream-K:
# Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the GPU", PPoPP
# 2023) launches one block per slot and gives each the same number of K iterations of the whole
# problem (tiles x K tiles each), in tile order: a block's share may end in the middle of a tile,
# and the blocks that share a tile combine their partial sums as split-K's do (the last to
# arrive sums them). Every SM then finishes at about the same time whatever the number of tiles,
# at the price of those fix-ups. In `numba_gemm` a configuration with `SPLITK = 0`
# (`_tunable.STREAM_K`) runs as stream-K (`numba_gemm/kernels/_streamk.py`). The wave model cannot
# price it from a tiled candidate's time: it counts stream-K's one wave as full, while a stream-K
# block runs alone on its SM and at its own speed (the comment in `cost.split_options` says the
# same). So the plan considers a stream-K configuration where one was measured (the tuning file's
# measured shapes), or, for B row-major (NN), where a class candidate carries its stream-K twin's
# own time at one shape (`tools.tune --retime SK`, scaled by `cost.stream_k_ms`); elsewhere it
# runs only when a caller names such a configuration.
#
# A toy comparison, schematic (one block per SM, no real timings): 5 tiles of 8 K iterations on
# 4 SMs, split-K 2. Data-parallel needs a second wave for one tile; split-K's 10 half-tiles still
# do not divide evenly over 4 SMs, so its last wave is half empty; stream-K gives every SM the
# same share.

# %%
h.draw_decompositions(tiles=5, iters=8, sms=4, splits=2)

# %% [markdown]
# The same toy through the package's own decomposition, `_streamk.unit` (the function the kernels
# run, as a plain Python function): each block's units of work, as (tile, K iterations), and how
# many blocks share that tile.

# %%
T, ITERS, G = 5, 8, 4
for blk in range(G):
    units = [_streamk.unit(blk, u, T, ITERS, G) for u in range(_streamk.units(blk, T, ITERS, G))]
    print(
        f"block {blk}: "
        + ", ".join(
            f"tile {t} iterations {b}-{e - 1} ({n} block(s))" for t, b, e, _, _, n, _ in units
        )
    )

# %% [markdown]
# The measured shapes of the tuning file that hold a stream-K candidate, and whether it won there:

# %%
sk_won, sk_lost = [], []
for rec in tuning.measured_shapes(gpu):
    sk = [x for x in rec["candidates"] if x["config"].get("SPLITK", 1) == tun.STREAM_K]
    if sk:
        best = min(rec["candidates"], key=lambda x: x["ms"])
        sk_ms = min(x["ms"] for x in sk)
        how = "stream-K" if best in sk else f"SPLITK {best['config'].get('SPLITK', 1)}"
        shape = "x".join(map(str, rec["shape"]))
        (sk_won if best in sk else sk_lost).append((shape, sk_ms / best["ms"]))
        print(
            f"{shape}: stream-K {sk[0]['stage']} {sk_ms:.3f} ms; fastest: {best['stage']} ({how}) "
            f"{best['ms']:.3f} ms"
        )
print(f"\nstream-K measured at {len(sk_won) + len(sk_lost)} shape(s); fastest at {len(sk_won)}")
for shape, r in sk_lost:
    print(f"  {shape}: stream-K {r - 1:.1%} slower than the fastest candidate")

# %% [markdown]
# In the data of this GPU stream-K has not paid off: at the one measured shape that holds it
# (the lines above) a tiled configuration without any split beat it, so the plan, which uses
# stream-K only where it was measured fastest or where a class candidate carries its stream-K
# twin's own time (the committed data holds none: on an H200 the twins' picks raced even with
# the tiles they replaced, docs/design.md §4.6), never picks it.
# Its trade is split-K's (fix-ups of partial sums in exchange for SMs that all finish together),
# and on this GPU the tiled kernels, with several blocks per SM and split-K where C has few tiles,
# leave it nothing measured to win.

# %% [markdown]
# ## Registers, SMEM, occupancy of the small-class picks
#
# Compare with the large-class report of notebook 05. The two stages can get their parallelism
# for small products in different ways (smaller tiles and more blocks per SM, or split-K); the
# configurations are printed under the table. The table's `blk/SM` is calculated from today's
# compile, the tuning file's `block(s)/SM` (printed earlier) was measured when the tuner ran;
# where a later change to a kernel makes the two differ (the last line says where), the tuning
# record prices an older kernel until a re-tune updates it.

# %%
report = h.resources(["double_buffering", "multistage"], tuned="small")
small_all = tuning.winners("small", device=gpu)
stale = [r["stage"] for r in report if r["blocks_per_sm"] != small_all[r["stage"]]["blocks_per_sm"]]
print("blocks per SM differ between the tuning record and today's compile for:", stale or "none")

# %% [markdown]
# ## Measured on the GPU
#
# `sgemm`'s automatic choice (`auto`) against the tunable stages, each with its tuned
# configuration, at every size of the stored run. What the benchmark's `auto` ran at each size:

# %%
for n in squares:
    r = h.result("auto", n)
    if r and r["median_ms"]:
        print(f"{n:>5}: {r['pct_cublas']:>5.1%} of cuBLAS FP32, {h.describe(r['config'])}")
h.print_results(["auto", *TUNABLE])

# %% [markdown]
# The same choice timed end to end (the public call made back to back in a loop, host work
# included), against cuBLAS timed the same way through PyTorch (`torch.mm`), at every shape of the
# run. In that loop the GPU waits for the host whenever a call takes the host longer to issue
# than its kernels take to run, so a call's end-to-end time above its kernel time is host work
# the kernel did not hide:

# %%
_, rows = h.results()
shapes = sorted({(r["M"], r["N"], r["K"]) for r in rows}, key=lambda s: (s[0] == s[1] == s[2], s))
h.print_results(["auto"], sizes=shapes, timing="end_to_end")

for how, what in meta["timings"].items():
    print(f"\n{how}: {what}")
print("\nkernel time / end to end (ms), and auto's speed relative to cuBLAS both ways")
flips, gaps = [], []
for n in squares:
    t = {
        (who, how): h.result(who, n, how)["median_ms"]
        for who in ("auto", "cublas_fp32")
        for how in ("kernel", "end_to_end")
    }
    share = {how: t["cublas_fp32", how] / t["auto", how] for how in ("kernel", "end_to_end")}
    print(
        f"{n:>5}: cuBLAS {t['cublas_fp32', 'kernel']:.4f} / {t['cublas_fp32', 'end_to_end']:.4f}"
        f", auto {t['auto', 'kernel']:.4f} / {t['auto', 'end_to_end']:.4f}; auto "
        f"{share['kernel']:.0%} of cuBLAS by kernel time, {share['end_to_end']:.0%} end to end"
    )
    gaps.append((n, abs(share["end_to_end"] - share["kernel"])))
    if share["kernel"] < 1 <= share["end_to_end"]:
        flips.append((n, t["cublas_fp32", "end_to_end"] / t["cublas_fp32", "kernel"]))
for n, r in flips:
    print(
        f"at {n}^3 auto is slower than cuBLAS by kernel time but not end to end: cuBLAS's call "
        f"through PyTorch takes {r:.2f}x its kernel time there"
    )
agree = [n for i, (n, _) in enumerate(gaps) if all(g < 0.02 for _, g in gaps[i:])]
print(
    f"the two timings rate auto within 2 points of each other from {agree[0]}^3 up"
    if agree
    else "the two timings differ by 2 points or more at the largest size"
)

# %% [markdown]
# At the smallest sizes the end-to-end column is therefore a measure of the host path as much as
# of the kernel: the lines above say where the two timings rank `auto` and cuBLAS differently, and
# from which size on the kernels run long enough for the two timings to agree. (A call's end-to-end
# time can even come out below its kernel time: in the loop each kernel starts as soon as the
# previous call's work ends, while each kernel-time sample is one launch between its own pair of
# events.)
#
# Every shape of the stored run, squares and the few-rows and few-columns ones, by kernel time, as
# speed relative to cuBLAS FP32: cuBLAS's time divided by the stage's time, in percent, so above
# 100 is faster than cuBLAS. The bars are `auto` (labelled with the stage it ran), the markers the
# tunable stages with their tuned configurations and, where the run has them, the bandwidth-bound
# stages 15 and 16.

# %%
marked = [*TUNABLE, "skinny", "skinny_n"]


def plot_shapes(shapes, series, picked, title):
    """Horizontal bars (``picked``: [(percent or None, stage it ran)] per shape) labelled at their
    end, markers per stage (``series``: {stage: [percent or None per shape]})."""
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(shapes) + 1.4))
    y = list(range(len(shapes)))
    ax.barh(
        y, [p or 0 for p, _ in picked], 0.6, color="0.87", edgecolor="0.5", label="sgemm (auto)"
    )
    right = [  # the label goes right of the bar and of every marker of its row
        max([pc or 0, *(v[yi] or 0 for v in series.values())]) for yi, (pc, _) in enumerate(picked)
    ]
    for yi, (pc, name) in zip(y, picked, strict=True):
        if pc is not None:
            ax.text(right[yi] + 3, yi, f"auto ran {name}", va="center", fontsize=8)
    ax.set_xlim(0, max(right) + 45)
    marks = "osD^v"
    for i, (label, vals) in enumerate(series.items()):
        pts = [(v, yi) for yi, v in zip(y, vals, strict=True) if v is not None]
        if pts:
            ax.scatter(
                *zip(*pts, strict=True),
                s=30,
                marker=marks[i % 5],
                color=f"C{i}",
                label=label,
                zorder=3,
            )
    ax.axvline(100, color="black", ls="--", lw=1)
    ax.set_yticks(y, shapes, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="cuBLAS FP32 time / stage time (%): above 100 = faster than cuBLAS", title=title)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    plt.show()


def pct(stage, shape):
    r = h.result(stage, shape)
    return 100 * r["pct_cublas"] if r and r["pct_cublas"] else None


picked = []
for s in shapes:
    r = h.result("auto", s)
    name = (r["config"] and h.describe(r["config"]).split()[0]) if r else ""
    picked.append((pct("auto", s), name))
plot_shapes(
    ["x".join(map(str, s)) for s in shapes],
    {m: [pct(m, s) for s in shapes] for m in marked},
    picked,
    f"{meta['gpu']}, kernel time, median of {meta['reps']}",
)

# %% [markdown]
# The plan picks the candidate its model prices cheapest, which is not always the fastest one.
# Below, per size: the plan's pick with its predicted time (the plan for the stored run's
# GPU, as above), what the benchmark measured for `auto`, and the fastest of the tunable stages
# as the benchmark measured them, each with its own tuned configuration.

# %%
verdicts = []
for n in squares:
    p = numba_gemm.plan_for(n, n, n, device=gpu)
    auto = h.result("auto", n)
    measured = [r for r in (h.result(s, n) for s in TUNABLE) if r and r["median_ms"]]
    if not (auto and auto["median_ms"] and measured):
        continue
    best = min(measured, key=lambda r: r["median_ms"])
    ratio = auto["median_ms"] / best["median_ms"]
    verdicts.append((n, p.stage.name, p.predicted_ms, auto["median_ms"], best["stage"], ratio))
    print(
        f"{n:>5}: plan {p.stage.name:<16} predicted {p.predicted_ms:8.4f} ms, measured "
        f"{auto['median_ms']:8.4f} ms | fastest measured: {best['stage']:<16} "
        f"{best['median_ms']:8.4f} ms; auto / fastest {ratio:.2f}"
    )
close = [n for n, *_, ratio in verdicts if ratio <= 1.05]
far = [(n, ratio) for n, *_, ratio in verdicts if ratio > 1.05]
under = [n for n, _, pred, meas, *_ in verdicts if pred < 0.8 * meas]
print(f"\nauto within 5 % of the fastest tunable stage at: {close}")
print("auto more than 5 % slower at:", ", ".join(f"{n} ({r:.2f}x)" for n, r in far) or "none")
print(f"predicted time under 80 % of the measured one at: {under or 'none'}")
beat = [n for n, *_, ratio in verdicts if ratio < 0.98]
print(f"auto faster than every tunable stage run as given at: {beat or 'none'}")
at_shape = {tuple(rec["shape"]) for rec in tuning.measured_shapes(gpu)}
own = [n for n in squares if (n, n, n) in at_shape]
print(f"sizes that are also measured shapes of the tuning file: {own or 'none'}")

# %% [markdown]
# The summary says where, if anywhere, the plan's pick fell behind the fastest stage measured, and
# where its prediction fell far short of the measured time. Where `auto` beat every stage run as
# given (the fourth line of the summary), the plan found a better way to run the product than any
# stage's own kernel: at the ragged size its reason, printed earlier, says which (the staged plan:
# operands copied to 16-byte aligned rows first, then the aligned kernel, where a stage run as given
# takes its scalar-GMEM variant).
#
# Two known limits of the plan are where to look when it does miss. Its data: a candidate is
# priced from its tuning record, so a record measured on an older compile of the kernel prices
# today's kernel wrongly (the occupancy line under the small-class report shows how to spot
# one). Its model: it scales a candidate's time at the tuned shape by `waves x K tiles` and has
# no term for what does not scale that way (the launch, each block's prologue and epilogue, the
# pipeline's fill and drain), so for a shape far smaller than its class's tuned one the
# prediction could fall short of the measured time. That is not observed in this run (the third
# line of the summary), but neither is it tested much: the tuning file also holds measurements at
# particular shapes (its measured shapes, used by the stream-K cell above), the last line says
# which of this run's sizes are among them, and the plan prices a product from the candidates of
# the nearest measured shape where one lies close (its reason at 4095, printed earlier, names it)
# rather than from the class's tuned shape. Ranking shapes far from any tuned one well needs
# tuning data measured at them, which is what the measured shapes are for.
