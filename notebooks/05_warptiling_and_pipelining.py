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
# next three stages reorganise the work around the **warp**, the unit that actually issues
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
#
# Stage 10 is the most elaborate of the three, but not the fastest: the end of the notebook
# measures it against stage 9 and shows where its time goes.
#
# The run-and-check cells run on the simulator or the GPU, as the first output says; every GPU
# number (timings, Nsight Compute counters) comes from the H200 benchmark run stored in the
# repository (`h.RUN_DIR`).

# %%
import inspect
import re

import _figures_pipeline as fig_pipe
import _helpers as h

import numba_gemm
from numba_gemm.kernels import _tunable as tun
from numba_gemm.kernels import k07_bank_conflict_free as k07
from numba_gemm.kernels import k08_warptiling as k08
from numba_gemm.kernels import k10_multistage as k10
from numba_gemm.plan import tuning

print("outputs from:", h.machine())
wt, db, ms = (numba_gemm.get_stage(n) for n in ("warptiling", "double_buffering", "multistage"))
meta, _ = h.results()
# the tuning data of the stored benchmark run's GPU (on the simulator too: same configurations)
gpu = (meta["gpu"], tuple(int(x) for x in meta["compute_capability"].split(".")))
large = tuning.winners("large", device=gpu)


def inner(fn, name):
    """The code of the function ``name`` defined inside ``fn`` (``inspect`` reads its source)."""
    return next(c for c in fn.__code__.co_consts if inspect.iscode(c) and c.co_name == name)


# %% [markdown]
# ## Stage 8: the warp tile
#
# `k08.make_parts(cfg)` builds, for one configuration, the device functions that stages 9 and
# 10 reuse, with every tile size a compile-time constant. Two of them are the whole idea of the
# stage. `thread_origin` maps a thread to its place: block -> warp (`warp // WARPS_N`,
# `warp % WARPS_N` in the grid of warp tiles) -> lane (`lane // LANES_N`, `lane % LANES_N` in the
# grid of thread tiles of a warp sub-tile):

# %%
parts = k08.make_parts(wt.config)
h.show_source(parts.thread_origin)

# %% [markdown]
# One `k` of the inner loop, `_mma_step`: the thread loads its `WMITER * TM` values of A's column
# and `WNITER * TN` of B's row with 128-bit SMEM loads (`load4`), then does the outer product of
# the two into its accumulators. `mma_tile` is this step unrolled `BK` times.
#
# A word on names: "mma" (matrix multiply-accumulate) is the customary name for this step of a
# GEMM. Here it is FP32 FMA instructions (FFMA) on the ordinary FP32 pipe, one outer product at a
# time, not the tensor-core `mma` instruction of PTX (notebook 07).

# %%
h.show_source(inner(k08.make_parts, "_mma_step"))

# %% [markdown]
# The serpentine order of the last loop changes only the order of the FFMAs, so that two
# consecutive ones share a register operand; the comment's figures ("both GPUs": an H100 and an
# H200) are measurements recorded in docs/design.md §2, not repeated here.

# %% [markdown]
# The kernel's K loop is stage 7's: load the block's A and B tiles (GMEM -> registers, each
# thread `A_LOADS` and `B_LOADS` float4s), store them to SMEM (`As[k, m]` transposed, `Bs[k, n]`),
# barrier, `mma_tile`, barrier. `work` gives the block its tile of C and its range of K (the whole
# K, unless split-K cuts it: notebook 06), and `epilogue_store` writes C.

# %%
h.show_source(wt)

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
# - `SPLITK`: how many slices K is cut into, each computed by its own block (1: no split);
# - `NBUF` (stage 10 only): how many SMEM buffers its `cp.async` ring has.

# %% [markdown]
# Why a warp tile helps: in stage 7 the 16 threads of a warp row span the whole `BN`-column
# block tile, so a warp reads a wide, thin slice of `Bs` and the `float4` reads of B collide unless
# the columns are interleaved by hand. With warp tiles, the lanes of a sub-tile read adjacent
# `float4`s of their own `WSUBM` rows and `WSUBN` columns.
#
# How many SMEM wavefronts (passes of the 32 banks) do those reads take? Notebook 04 found that
# the hardware does not serve a 128-bit load (`LDS.128`) as one 32-lane access: it serves it as
# two half-warps, with no broadcast between the halves. The warp-tiled loads need one more detail
# of the same kind, which the measurement at the end of this notebook pins down: within a
# half-warp, each quarter-warp (8 lanes x 16 bytes = 128 bytes, one wavefront's width) shares the
# words its own lanes ask for, but the two quarters do not share a word between them. A half-warp
# then takes one wavefront per 32 words its two quarters ask for (a word asked for by both counted
# twice), or more where one bank must deliver several different words (a bank conflict).
# `lds128_wavefronts` below implements that rule; next to it, the plain model of notebook 04
# (`wavefronts`: one pass per bank, broadcast across the whole warp), applied to
# `thread_origin` and `_mma_step` above (warp 0, `k = 0`):


# %%
def wavefronts(lane_words, banks=32):
    """Plain model: the most distinct words any bank delivers (equal words broadcast to all)."""
    per_bank = {}
    for words in lane_words:
        for w in words:
            per_bank.setdefault(w % banks, set()).add(w)
    return max(len(v) for v in per_bank.values())


def lds128_wavefronts(lane_words, banks=32):
    """One LDS.128 served as two half-warps; in each, the words of each quarter-warp are
    counted once, and the half takes a wavefront per `banks` of them, or the most distinct
    words of one bank where that is larger (a conflict)."""
    total = 0
    for half in (lane_words[:16], lane_words[16:]):
        asked = sum(len({w for words in q for w in words}) for q in (half[:8], half[8:]))
        total += max(-(-asked // banks), wavefronts(half, banks))
    return total


def warp_reads(cfg, d, warp=0):
    """Per-lane SMEM words of one k of `_mma_step`: the A reads and the B reads (float4s)."""
    TM, TN, WM, WN, BN = (cfg[k] for k in ("TM", "TN", "WM", "WN", "BN"))
    lanes_n, warps_n = d["WSUBN"] // TN, BN // WN

    def rows(ln):  # thread_origin's wm0
        return (warp // warps_n) * WM + (ln // lanes_n) * TM

    def cols(ln):  # thread_origin's wn0
        return (warp % warps_n) * WN + (ln % lanes_n) * TN

    a = [  # load4(As, k, wm0 + wm * WSUBM + i)
        [[rows(ln) + wm * d["WSUBM"] + i + e for e in range(4)] for ln in range(32)]
        for wm in range(d["WMITER"])
        for i in range(0, TM, 4)
    ]
    b = [  # load4(Bs, k, wn0 + wn * WSUBN + j)
        [[cols(ln) + wn * d["WSUBN"] + j + e for e in range(4)] for ln in range(32)]
        for wn in range(cfg["WNITER"])
        for j in range(0, TN, 4)
    ]
    return a, b


configs = {"warptiling (default)": cfg}
for name, res in large.items():
    if numba_gemm.get_stage(name).precision == "fp32":  # (the TF32 stages have no warp tiles)
        configs[f"{name} (tuned, large)"] = res["config"]
print(f"{'per k and warp':<32} {'LDS.128':>7} {'plain':>5} {'rule':>4} {'FFMA':>5} {'FFMA/wf':>7}")
ratio = {}
for name, c in configs.items():
    dd = tun.derived(c)
    a, b = warp_reads(c, dd)
    plain = sum(wavefronts(x) for x in a + b)
    rule = sum(lds128_wavefronts(x) for x in a + b)
    ffma = dd["WMITER"] * c["TM"] * c["WNITER"] * c["TN"]
    ratio[name] = ffma / rule
    print(
        f"{name:<32} {len(a) + len(b):>7} {plain:>5} {rule:>4} {ffma:>5} {ffma / rule:>7.1f}"
        f"   A loads {[lds128_wavefronts(x) for x in a]},"
        f" B loads {[lds128_wavefronts(x) for x in b]}"
    )
lo, hi = min(ratio.values()), max(ratio.values())
same = "the same for every configuration" if lo == hi else f"{lo:.1f} to {hi:.1f}"
print(f"FFMA per wavefront (rule): {same}; at 1 wavefront and 4 warp FFMAs per clock and SM,")
print(f"SMEM could feed {lo / 4:.1f}x the FFMAs an SM can issue (SMEM-issue bound, notebook 04)")

# %% [markdown]
# Columns: the 128-bit loads of one `k`, their wavefronts by the plain model and by the 128-bit
# rule, the FFMA instructions they feed (one per accumulator of the thread's register tile,
# `WMITER*TM x WNITER*TN`), FFMA per wavefront by the rule, then each load's wavefronts by the
# rule. An A load asks for one or two `float4`s per quarter-warp, far fewer than a wavefront's 32
# words, so the rule gives it one wavefront per half-warp, where the plain model gives one for
# the whole warp. In a B load the two quarters of a half-warp ask for the same `float4`s, each
# quarter as many as fill a wavefront or half of one, so the rule charges them again: the B loads
# are where the two models part.
#
# The tuned configurations hold twice the default's accumulators per thread (128 against 64),
# and by the rule they need twice the wavefronts too: the FFMA-per-wavefront column does not
# improve. Either way, SMEM bandwidth is not the limit (the last line). What the larger register
# tiles buy is fewer GMEM tile loads per FMA (a larger block tile) and more independent FMAs per
# warp; whether that is speed depends on how long the warps wait for each K tile to arrive from
# GMEM, which the next two stages attack. The rule is checked against Nsight Compute's count at
# the end of this notebook.

# %% [markdown]
# ## Stage 9: double buffering
#
# The kernel against stage 8's: a prologue loads the first tile; in the loop, the loads of tile
# `k0 + BK` are issued *before* the math on the current tile and stored into the other SMEM copy
# *after* it. That copy was last read before the previous barrier, so one `syncthreads` per K
# tile is enough. The comment about the unconditional prefetch records a pitfall: under an `if`,
# the compiler moved the loads below the math and the latency was exposed again (the slowdown it
# quotes was measured on the GPU and is recorded in docs/design.md §2).

# %%
h.show_diff(h.kernel_function(wt), h.kernel_function(db))

# %% [markdown]
# ## Stage 10: the `cp.async` ring
#
# `cp.async` (compute capability 8.0+) copies GMEM to SMEM without passing through registers.
# A thread's copies are grouped: `commit()` (`cp.async.commit_group`) closes the group of the
# copies issued since the last commit, and `wait(n)` (`cp.async.wait_group n`) blocks the thread
# until at most `n` of its groups are still in flight; a `syncthreads` after it makes everyone's
# copies visible. Numba has no such instruction: `numba_gemm.ptx.cpasync` emits it as inline PTX
# (on the simulator, a plain copy stands in for it).
#
# Tile `t` lives in slot `t % NBUF` of a ring of `NBUF` SMEM buffers. The prologue issues tiles
# `0 .. NBUF-2`, one commit group each. At step `t` the kernel waits until at most `NBUF - 2`
# groups are pending (so the group of tile `t` has landed), barriers, refills the slot that tile
# `t - 1` used with tile `t + NBUF - 1`, commits, and computes on slot `t % NBUF`. `cb` and `nb`
# are the two ring indices:

# %%
h.show_source(ms)

# %% [markdown]
# A's tile is read along K and stored transposed (`As[k, m]`), so its copies cannot be 16-byte
# ones: each `cp.async` moves one 4-byte element, with its own GMEM and SMEM addresses (B, read
# along N, is copied 16 bytes at a time). The copy of one thread's chunk of A:

# %%
h.show_source(inner(k10.make_copier, "_copy"))

# %% [markdown]
# ### The ring in SMEM
#
# The same loop replayed on the host, step by step, with the kernel's own ring arithmetic (`cb`,
# `nb`, `wait(NBUF - 2)`): which K tile each slot holds while the FMAs run, and which commit groups
# are still pending. The asserts check that the wait really covers tile `t` and that `cb` is the
# slot holding it.


# %%
def ring(NBUF, tiles):
    """Per step t of sgemm_multistage_unit's K loop: slot -> K tile, the slot computed on, the
    slot refilled, and the K tiles of the groups still pending after wait(NBUF - 2)."""
    groups = [s if s < tiles else None for s in range(NBUF - 1)]  # prologue: one group a tile
    holds = {s: s for s in range(min(NBUF - 1, tiles))}
    cb, nb, steps = 0, NBUF - 1, []
    for t in range(tiles):
        landed = len(groups) - (NBUF - 2)  # wait(NBUF - 2): all but the last NBUF - 2 groups
        assert t in groups[:landed] and holds[cb] == t
        nxt = t + NBUF - 1  # copies issued into slot nb, which tile t - 1 used
        if nxt < tiles:
            holds[nb] = nxt
        groups.append(nxt if nxt < tiles else None)  # commit() (possibly empty)
        pending = [g for g in groups[landed:] if g is not None]
        issued = nb if nxt < tiles else None
        steps.append(dict(holds=dict(holds), compute=cb, issued=issued, in_flight=pending))
        cb = cb + 1 if cb + 1 < NBUF else 0
        nb = nb + 1 if nb + 1 < NBUF else 0
    return steps


def smem_layout(c):
    """The dynamic SMEM of one block, in order: NBUF copies of As, then NBUF of Bs (bytes)."""
    dd = tun.derived(c)
    a, b = 4 * c["BK"] * dd["AS_PITCH"], 4 * c["BK"] * dd["BS_PITCH"]
    return [(f"As[{s}]", a) for s in range(c["NBUF"])] + [(f"Bs[{s}]", b) for s in range(c["NBUF"])]


rings = [("multistage, default configuration", ms.config)]
rings.append(("multistage, tuned for large products", large["multistage"]["config"]))
TILES = 8
fig_pipe.draw_ring(
    [(t, c["NBUF"], c["BK"], ring(c["NBUF"], TILES), smem_layout(c)) for t, c in rings]
)
for title, c in rings:
    n = len(ring(c["NBUF"], TILES)[0]["in_flight"])
    print(f"{title}: NBUF {c['NBUF']}: {n} K tile(s) in flight during the FMAs of a step")

# %% [markdown]
# With `NBUF = 2` the wait is `wait_group(0)`: every copy has landed before the math starts,
# and the one tile in flight during the math is the one issued just before it, as in stage 9.
# Each extra slot adds a tile in flight, at the price of one more copy of both tiles in SMEM
# (the second title line of each panel), which can cost blocks per SM.
#
# ## Loads and math over time
#
# A schematic of one block's K loop for each stage (illustrative units, not measurements: the GMEM
# latency is drawn longer than one tile's math, as it is for a block that has little else to
# do). Stage 8 exposes the whole latency on every tile; stage 9 hides it behind one tile of math;
# stage 10 keeps `NBUF - 1` tiles in flight, drawn for the two rings above.

# %%
h.draw_pipelines(
    [
        ("warptiling", 1),
        ("double_buffering", 2),
        *(("multistage", c["NBUF"]) for _, c in rings),
    ]
)

# %% [markdown]
# By this schematic the `cp.async` ring finishes first, ahead of double buffering (the `ends at`
# of each panel). The measurements at the end of this notebook say the reverse: on the H200,
# stage 10 is slower than stage 9. The schematic is idealised: a fixed GMEM latency, no
# contention for memory or issue slots, and `cp.async` drawn as free for the threads that issue
# it (no registers, no SMEM stores). On the GPU the copies are instructions too (one per 4-byte
# element of A, above), they write SMEM while other warps read it, and the deeper ring costs
# SMEM; the profile below shows what that amounts to.

# %% [markdown]
# ## Run and check
#
# On a GPU, `sgemm(stage=name)` uses the configuration tuned for the shape (notebook 06); on the
# simulator there is no tuning data and each stage runs its default configuration.

# %%
M, N, K = h.demo_shape()
h.check_stages(["warptiling", "double_buffering", "multistage"], M, N, K)

# %% [markdown]
# ## Registers, SMEM, occupancy of the tuned configurations
#
# The report (`ptxas -v`, compiled offline) for the configurations the stored tuning picks for
# large products such as 4096-cubed (notebook 06 explains how shapes are grouped). These kernels
# hold many accumulators per thread, up to the 255-register limit, and so few warps per SM: they
# trade occupancy (many warps to switch between) for **instruction-level parallelism** (many
# independent FMAs and loads in flight within each warp; V. Volkov, "Better Performance at Lower
# Occupancy", GTC 2010). Stage 10's tiles live in dynamic SMEM (`NBUF` copies, beyond the 48 KB
# of static SMEM when needed).

# %%
_ = h.resources(["warptiling", "double_buffering", "multistage"], tuned="large")

# %% [markdown]
# ## What the warps wait for: Nsight Compute
#
# Nsight Compute profiled one call of each stage at 4096-cubed with its tuned configuration (the
# same kernels as the report above, except that stage 10 was profiled, and timed below, before
# its 4-byte copies of A were laid out along K: one warp-wide copy now reads runs of 16 floats
# where it read 4 floats of each of 8 rows, which left these 128 x 256 tiles 0.97-1.01x their
# time and made the smaller ones 10-30 % faster, docs/design.md §4.12), on the H200 of the
# stored benchmark run, with `--clock-control none`: Nsight Compute left the clocks alone instead
# of locking them at their base value, so the kernels ran at the same boost clocks as in the
# timings below. One call of cuBLAS FP32 was profiled for comparison. First the kernels' shape:
# time, registers, warps per SM, how often the warp schedulers issued an instruction, how busy the
# FP32 FMA pipe was, and how many instructions ran in all:

# %%
TARGETS = ["bank_conflict_free", "warptiling", "double_buffering", "multistage", "cublas_fp32"]
h.ncu_table(
    TARGETS,
    [
        "gpu__time_duration.sum",
        "launch__registers_per_thread",
        "sm__warps_active.avg.per_cycle_active",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.per_cycle_active",
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed.sum",
    ],
    [
        "kernel time (ns)",
        "registers per thread",
        "warps per SM (achieved)",
        "achieved occupancy (%)",
        "issued per scheduler cycle",
        "FMA pipe busy (%)",
        "instructions (warp)",
    ],
)
ffma = 4096**3 // 32  # FFMA warp instructions of a 4096^3 product: one per 32 multiply-adds
for t in TARGETS:
    print(f"{t:<19} instructions per FFMA: {h.ncu(t, 'smsp__inst_executed.sum') / ffma:.3f}")

# %% [markdown]
# All five run about the same number of instructions, about a tenth more than the FFMAs the
# product needs; what differs is how often the schedulers find a warp ready to issue one. Each SM
# has four schedulers, each able to issue one instruction per cycle from the warps it holds; these
# kernels give each only two warps (8 per SM, stage 7 four), so whenever both wait, the cycle
# is lost. What they wait for is Nsight Compute's *warp state* breakdown: for each state, how many
# cycles a warp spends in it between two of its instructions (`smsp__average_warps_issue_stalled_
# <state>_per_issue_active.ratio`; `selected` is the cycle in which it issues, `not_selected` a
# cycle ready but passed over for another warp). A bar's height is the warps a scheduler holds
# divided by how often it issues, so stage 7's, with twice the warps, is taller. The states that
# matter here:
#
# - `long_scoreboard`: waiting for the result of a GMEM load (here, the load of the next tile into
#   registers before it is stored to SMEM);
# - `barrier`: waiting at `syncthreads` for the other warps of the block;
# - `short_scoreboard`: waiting for the result of an SMEM load (the fragments the FMAs read);
# - `mio_throttle`, `lg_throttle`: the queue of SMEM (GMEM) instructions is full;
# - `wait`: a fixed-latency dependency: the compiler makes the warp sit out a set number of
#   cycles after an arithmetic instruction;
# - `dispatch_stall`: the dispatcher held back an instruction that had been selected;
# - `no_instruction`: the warp had no instruction fetched to issue (an instruction-cache miss,
#   or just after a branch);
# - `math_pipe_throttle`: the pipe the instruction needs is busy.

# %%
STATES = [
    "selected",
    "not_selected",
    "long_scoreboard",
    "barrier",
    "short_scoreboard",
    "wait",
    "dispatch_stall",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "no_instruction",
]


def stalled(t, state):
    return h.ncu(t, f"smsp__average_warps_issue_stalled_{state}_per_issue_active.ratio")


fig_pipe.plot_stalls(
    TARGETS,
    {s: [stalled(t, s) for t in TARGETS] for s in STATES},
    [h.ncu(t, "smsp__issue_active.avg.per_cycle_active") for t in TARGETS],
    "what a warp does between two of its instructions (4096-cubed, tuned configurations)",
)
for t in TARGETS:
    top = sorted(STATES[2:], key=lambda s: -stalled(t, s))[:3]  # waits: not (not_)selected
    print(f"{t:<19} largest waits: " + ", ".join(f"{s} {stalled(t, s):.2f}" for s in top))
print("queues full (too thin to see above):")
for t in TARGETS:
    print(f"  {t:<19} " + ", ".join(f"{s} {stalled(t, s):.2f}" for s in STATES[7:9]))

# %% [markdown]
# Read left to right:
#
# - stage 8 waits above all on its GMEM loads (`long_scoreboard`), as the timeline above draws
#   it. Its larger warp tiles need fewer SMEM wavefronts than stage 7 (below), but
#   its 128-accumulator threads leave half as many warps per SM as stage 7 has to cover those
#   waits, and the schedulers issue no more often: that is why stage 8 alone is no faster than
#   stage 7 at 4096;
# - stage 9 keeps the same warps but has the next tile's loads in flight during the math: the
#   `long_scoreboard` and `barrier` waits all but vanish, and the schedulers issue most often
#   of the four, close to cuBLAS;
# - stage 10 has no GMEM loads into registers at all, yet issues less often than stage 9: its
#   largest wait is for its SMEM loads (`short_scoreboard`), several times stage 9's. Its
#   `cp.async` copies are GMEM instructions that write SMEM, and they compete with the fragment
#   loads for the SMEM banks. The queue of GMEM instructions is rarely full: `lg_throttle`,
#   printed in the last lines, is small for every kernel, stage 10's a little above the others.
#
# The SMEM side of the same kernels: the wavefronts the fragment loads take, per `k` and warp
# (the two counts from the start of this notebook next to the measured one), and the bank
# conflicts Nsight Compute counts for SMEM loads, stores, and the SMEM writes of `cp.async`
# (`ldgsts`):

# %%
h.ncu_table(
    TARGETS,
    [
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum",
    ],
    [
        "SMEM load wavefronts",
        "SMEM wavefronts, all",
        "bank conflicts: loads",
        "bank conflicts: stores",
        "bank conflicts: cp.async",
    ],
)
for name in ("warptiling", "double_buffering", "multistage"):
    c = large[name]["config"]
    a, b = warp_reads(c, tun.derived(c))
    warps_k = h.ncu(name, "launch__grid_size") * h.ncu(name, "launch__block_size") / 32 * 4096
    got = h.ncu(name, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") / warps_k
    print(
        f"{name:<17} SMEM load wavefronts per k and warp ({len(a) + len(b)} LDS.128): plain "
        f"model {sum(map(wavefronts, a + b))}, 128-bit rule {sum(map(lds128_wavefronts, a + b))}, "
        f"measured {got:.1f}"
    )
# stage 7's fragment loads per k (notebook 04's maps: two A loads, two B loads), same check
s7 = [
    [[(t // k07.THREADS_N) * k07.TM + i + e for e in range(4)] for t in range(32)]
    for i in range(0, k07.TM, 4)
] + [
    [[g * k07.COL_GROUP_STRIDE + (t % k07.THREADS_N) * 4 + e for e in range(4)] for t in range(32)]
    for g in range(2)
]
warps_k = h.ncu("bank_conflict_free", "launch__grid_size") * k07.NUM_THREADS / 32 * 4096
got = h.ncu("bank_conflict_free", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") / warps_k
print(
    f"{'bank_conflict_free':<17} SMEM load wavefronts per k and warp ({len(s7)} LDS.128): plain "
    f"model {sum(map(wavefronts, s7))}, 128-bit rule {sum(map(lds128_wavefronts, s7))}, "
    f"measured {got:.1f}"
)
cp = {t: h.ncu(t, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum") for t in TARGETS}
print(
    f"cp.async bank conflicts, multistage / cuBLAS FP32: {cp['multistage'] / cp['cublas_fp32']:.1f}"
)
copies = re.findall(r"\bLDGSTS\S*", h.sass("multistage"))
print("multistage's cp.async instructions in its SASS (default configuration):")
for kind in sorted(set(copies)):
    print(f"  {kind:<22} {copies.count(kind):>3}  ({'16' if '128' in kind else '4'}-byte copies)")

# %% [markdown]
# The fragment loads of stages 8-10 have no bank conflicts, or essentially none (the table's
# load conflicts against its load wavefronts), and the measured wavefronts per `k`
# are those of the 128-bit rule, not of the plain model: each B load's two quarter-warps are
# served separately even where they ask for the same words. The same rule gives stage 7's
# measured count too (the fourth line), where it agrees with notebook 04's half-warp picture:
# the warp-tiled B loads, whose two quarter-warps ask for the same words, are the case that
# tells the two apart. By the rule's FFMA-per-wavefront count SMEM bandwidth is still not the
# limit, so the fragment loads cost the warps their latency (`short_scoreboard`) rather than SMEM
# throughput.
# Stage 10's SMEM traffic is not only its fragment loads: its `cp.async` copies write SMEM too,
# and they are the only bank conflicts in its column; cuBLAS's kernel, which also copies with
# `cp.async`, has fewer (the ratio is printed). The compiled kernel shows the cost of A's
# transposed tile: its copies are 4-byte `LDGSTS` instructions, one per element (the `_copy`
# above), beside B's 16-byte ones. All of this is one size on one GPU; the timings below
# compare the stages at the others.

# %% [markdown]
# ## Measured on the GPU
#
# The tunable stages are measured with their tuned configuration for each size (the `config`
# column of the CSV), in GFLOP/s and as a share of cuBLAS FP32. The times are kernel times: the
# GPU time of the kernels alone, without the Python call around them (notebook 06 times the
# public `sgemm` call end to end).

# %%
STAGES_HERE = ["bank_conflict_free", "warptiling", "double_buffering", "multistage"]
h.print_results(STAGES_HERE)

# %% [markdown]
# What each stage changes, size by size: each stage's kernel time against stage 8's (above 1:
# faster than `warptiling`), at the power-of-two sizes (4095 is in the table above and in the
# lines printed below the figure). Each stage runs its own tuned configuration at each size, so
# a point compares two tuned kernels, not one change in isolation.

# %%
sizes = h.square_sizes()


def ms_of(stage, n):
    r = h.result(stage, n)
    return r["median_ms"] if r and r["median_ms"] else None


ratios = {
    s: [
        ms_of("warptiling", n) / ms_of(s, n) if ms_of("warptiling", n) and ms_of(s, n) else None
        for n in sizes
    ]
    for s in ("bank_conflict_free", "double_buffering", "multistage")
}
fig_pipe.plot_relative(
    sizes, {"kernel": ratios}, "warptiling", f"{meta['gpu']}, median of {meta['reps']} calls"
)
every = sizes + h.square_sizes(pow2=False)
for a, b in (
    ("warptiling", "bank_conflict_free"),
    ("double_buffering", "warptiling"),
    ("multistage", "double_buffering"),
):
    both = [n for n in every if ms_of(a, n) and ms_of(b, n)]
    won = [n for n in both if ms_of(a, n) < ms_of(b, n)]
    which = "every size measured" if won == both else (won or "none of the sizes measured")
    print(f"{a} faster than {b} at: {which}")
both = [n for n in every if ms_of("multistage", n) and ms_of("double_buffering", n)]
slow = [ms_of("multistage", n) / ms_of("double_buffering", n) for n in both]
print(
    f"multistage's time / double_buffering's: {min(slow):.2f} to {max(slow):.2f} over {both}; "
    f"slower at {sum(r > 1 for r in slow)} of {len(both)} sizes"
)
st = {t: h.ncu(t, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum") for t in TARGETS}
print("at 4096-cubed (Nsight Compute, above):")
for t in ("double_buffering", "multistage"):
    print(
        f"  {t:<17} short_scoreboard {stalled(t, 'short_scoreboard'):.2f}, issued per "
        f"scheduler cycle {h.ncu(t, 'smsp__issue_active.avg.per_cycle_active'):.2f}, "
        f"SMEM bank conflicts: stores {st[t]:,.0f}, cp.async {cp[t]:,.0f}"
    )

# %% [markdown]
# Warp tiling on its own is the stage that does not pay at every size (the first line above); at
# 4096, one of the sizes where it loses to stage 7, the profile showed why: its tuned tiles leave
# too few warps to cover the GMEM waits. Its payoff is what it enables: tile sizes that are
# parameters, and the parts (`make_parts`) on which stages 9 and 10 build their pipelines.
# Hiding the GMEM latency is what then brings the kernels near cuBLAS (the second line).
#
# Stage 10 is slower than stage 9 at every size measured (the third and fourth lines), the
# reverse of what the schematic timeline predicted. The profile at 4096 shows where the time
# goes, in the last lines: the `cp.async` copies, A's one 4-byte element at a time, write SMEM
# with more bank conflicts than stage 9's stores from registers, the fragment loads wait longer
# for SMEM (`short_scoreboard`), and the schedulers issue less often. Stage 9 already hides the
# GMEM latency (its `long_scoreboard` wait all but vanished in the warp-state figure), so the
# deeper ring has little left to hide and pays for its copies. The same ring comes back in
# notebook 07 (stage 12), feeding tensor cores, whose math per tile is much shorter. Which
# configuration and which stage to run at a given shape is the subject of notebook 06.
