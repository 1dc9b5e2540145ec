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
# # 08 · Hopper: warpgroup MMA (`wgmma`), the Tensor Memory Accelerator and warp specialization
#
# Notebook 07 ended with `mma.sync`, the warp-wide tensor-core instruction of Ampere, fed from
# registers: its stages stayed well short of cuBLAS, which on Hopper uses another instruction.
# This chapter builds the Hopper (compute capability 9.0) kernels of the package, in two steps.
# They are compiled for `sm_90a`: the `a` marks *architecture-specific* features (`wgmma`,
# `setmaxnreg`, ...), which code may use only when it is built for exactly this architecture; such
# code runs on compute capability 9.0 and on no later GPU.
#
# - **`wgmma`** (stages 17-19): four warps, a *warpgroup*, issue one asynchronous product of a
#   64-row tile whose operands the tensor cores read straight from shared memory (SMEM) through
#   64-bit *matrix descriptors*; the copies into SMEM are still every thread's `cp.async`
#   (notebook 05). Stage 17 multiplies FP16, stage 18 TF32, stage 19 FP32-accurate 3xTF32;
# - **TMA and warp specialization** (stages 20-24): one thread asks the Tensor Memory Accelerator
#   for whole tiles, *mbarriers* in SMEM tell the multiplying warpgroups when a tile has landed and
#   the copying one when a buffer is free again, and persistent blocks walk the tiles of C. Stage
#   20 multiplies FP16, 21 and 22 TF32 (for the two layouts of B), 23 3xTF32 and 24 BF16.
#
# Each stage is shown (its own source, or its key function where it shares a kernel), run and
# checked (on the GPU at 4096-cubed with its tuned tiles, on the simulator on a few tiles), and
# compared by its GPU timings with cuBLAS in its own precision where the run has them (the tables
# say which stages were timed at which sizes).
#
# Run and check cells execute on the simulator or on a GPU, as the first output line prints; every
# GPU number (timings, Nsight Compute metrics, SASS) comes from the H200 benchmark run stored in
# the repository (`h.RUN_DIR`, printed with each table).

# %%
import collections
import csv
import inspect
import re

import _figures_hopper as fig
import _helpers as h
import numpy as np
from numba import cuda

import numba_gemm
from numba_gemm.kernels import k17_hgemm_wgmma as k17
from numba_gemm.kernels import k18_tf32_wgmma as k18
from numba_gemm.kernels import k19_tf32x3_wgmma as k19
from numba_gemm.kernels import k20_hgemm_tma as k20
from numba_gemm.kernels import k21_tf32_tma as k21
from numba_gemm.kernels import k22_tf32_tma_rs as k22
from numba_gemm.kernels import k23_tf32x3_tma as k23
from numba_gemm.kernels import k24_bf16_tma as k24
from numba_gemm.launch import tensormap
from numba_gemm.ptx import tma, wgmma
from numba_gemm.tools.check import stored_transposed

print("outputs from:", h.machine())
HOPPER = [s for s in numba_gemm.STAGES if s.arch == (9, 0)]  # the sm_90a stages: 17-24
for s in HOPPER:
    print(f"{s.label:<62} {s.precision:<7} {dict(s.config)}")


# %% [markdown]
# Several stages build their kernels from closures (a kernel made per tile configuration, its
# device functions inside). To show one of those inner functions, the small search below walks
# the closures of a kernel until it finds the function of that name:


# %%
def inner(fn, name):
    """The function called ``name`` among those that ``fn`` (a kernel or device function) holds
    in its closure, directly or through other closures (breadth first)."""
    queue, seen = collections.deque([getattr(fn, "py_func", fn)]), set()
    while queue:
        f = queue.popleft()
        if id(f) in seen or not inspect.isfunction(f):
            continue
        seen.add(id(f))
        if f.__name__ == name and f is not fn:
            return f
        for cell in f.__closure__ or ():
            queue.append(getattr(cell.cell_contents, "py_func", cell.cell_contents))
    raise LookupError(f"no function {name!r} in the closures of {fn}")


def show(fn, name):
    """Print the source of the inner function ``name`` of ``fn``."""
    h.show_source(inner(fn, name))


# %% [markdown]
# What the GPU finally runs is SASS, the machine code `ptxas` makes of the PTX. The stored run
# keeps each stage's default kernel as SASS (`h.sass`); the function below prints the lines of
# chosen instructions from a marker on, shortening runs of one instruction:


# %%
OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def opcodes(stage):
    """``(opcode, line)`` of each instruction of ``stage``'s SASS."""
    out = []
    for line in h.sass(stage).splitlines():
        m = OPCODE.match(line)
        if m:
            out.append((m.group(1), line.strip().rstrip(" ;")))
    return out


def sass_excerpt(stage, ops, start, end=None, count=40, run_shown=4):
    """The instructions of ``stage``'s SASS whose opcode starts with one of ``ops``, from the
    first containing ``start`` to the first containing ``end`` (or ``count`` lines); of a run of
    one opcode, the first ``run_shown`` lines and a count of the rest."""
    code = opcodes(stage)
    i = next(k for k, (_, line) in enumerate(code) if start in line)
    shown, run = [], None  # run: [opcode, lines in it]
    for op, line in code[i:]:
        if not op.startswith(ops):
            continue
        base = op.split(".")[0]
        if run and run[0] == base:
            run[1] += 1
        else:
            if run and run[1] > run_shown:
                shown.append(f"    ... and {run[1] - run_shown} more {run[0]}")
            run = [base, 1]
        if run[1] <= run_shown:
            shown.append(line)
        if (end and end in line) or len(shown) >= count:
            break
    print(f"# --- SASS of {stage} (default tiles)\n" + "\n".join(shown))


# %% [markdown]
# ## The ceiling: dense tensor-core peak
#
# The numbers every stage here is measured against. NVIDIA's *H100 Tensor Core GPU Architecture*
# whitepaper (2022, "H100 SM Architecture") gives the dense tensor-core rate of one Hopper SM per
# clock: twice an A100 SM's, that is 2048 FP16 or BF16 fused multiply-adds (FMA) per clock and
# half that for TF32 (the H200 has the same SM). Times the SM count and the maximum SM clock of
# the GPU that produced the stored results (its `results.json`), times 2 FLOP per FMA:

# %%
#: Dense tensor-core FMA per clock per SM of a Hopper (GH100) SM, by operand type: NVIDIA H100
#: Tensor Core GPU Architecture whitepaper (2022), "H100 SM Architecture" (2x an A100 SM's 1024
#: FP16 FMA per clock; TF32 at half the FP16 rate).
TC_FMA_PER_CLOCK_PER_SM = {"fp16": 2048, "bf16": 2048, "tf32": 1024}

meta, _ = h.results()
sms = int(meta["sm_count"])
clock_hz = float(meta["clocks"]["max_sm"].split()[0]) * 1e6
PEAK = {p: sms * clock_hz * 2 * fma for p, fma in TC_FMA_PER_CLOCK_PER_SM.items()}
print(f"{meta['gpu']}: {sms} SMs at {clock_hz / 1e6:.0f} MHz (max SM clock)")
for p, v in PEAK.items():
    print(f"  dense {p.upper():<4} tensor peak: {v / 1e12:7.1f} TFLOP/s")
# the datasheets quote the peak at a lower clock: the clock their dense FP16 figure implies
DATASHEET_FP16 = 989.4e12  # H100 SXM5 / H200: "FP16 Tensor Core 1,979 TFLOPS" with sparsity
print(
    f"  (the datasheet's dense FP16 {DATASHEET_FP16 / 1e12:.1f} TFLOP/s implies "
    f"{DATASHEET_FP16 / (sms * 2 * TC_FMA_PER_CLOCK_PER_SM['fp16']) / 1e6:.0f} MHz)"
)

# %% [markdown]
# These are upper bounds: they assume every SM runs at the maximum clock the driver reports, where
# the datasheet's own figure implies a lower one (printed above). The percentages of peak below
# use them as they are.
#
# ## What cuBLAS runs on Hopper
#
# Nsight Compute on one 4096^3 call of notebook 07's best `mma.sync` stages (12: TF32, 14: FP16)
# and of cuBLAS in the same precisions, from the stored run (`python -m
# numba_gemm.tools.profile`, `ncu --clock-control none`): the kernels cuBLAS picks, how busy they
# keep the tensor pipe, whether they issue warpgroup MMA (`GMMA`, the SASS name of `wgmma`) and use
# the TMA, and their launch shape:

# %%
NCU_TARGETS = ["tf32_mma_multistage", "hgemm_mma", "cublas_tf32", "cublas_fp16"]
with open(h.RUN_DIR / "ncu" / "ncu.csv", newline="") as f:
    kernels = {r["target"]: r["kernel"] for r in csv.DictReader(f) if r["target"].startswith("cub")}
for target in NCU_TARGETS:
    if target in kernels:
        print(f"{target}: {kernels[target]}")
h.ncu_table(
    NCU_TARGETS,
    [
        "gpu__time_duration.sum",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
        "sm__pipe_tma_cycles_active.avg.pct_of_peak_sustained_active",
        "launch__grid_size",
        "launch__block_size",
        "launch__registers_per_thread",
    ],
    [
        "duration (ns)",
        "tensor pipe busy (% of active cycles)",
        "GMMA instructions (% of peak rate)",
        "TMA unit busy (% of active cycles)",
        "blocks",
        "threads per block",
        "registers per thread",
    ],
)

# %% [markdown]
# How a tensor pipe can be busy most of the time while its `GMMA` instructions run at a few
# percent of their peak issue rate: one `GMMA` is a whole warpgroup's `64 x N x K` product, which
# keeps the SM's tensor cores busy for many clocks, so few instructions are needed. At the dense
# rates of the whitepaper (the ceiling section above), the largest shapes take:

# %%
for kind, (m, k), p in (("FP16", wgmma.WGMMA_F16, "fp16"), ("TF32", wgmma.WGMMA_TF32, "tf32")):
    n = max(wgmma.N_VALUES)
    clocks = m * n * k / TC_FMA_PER_CLOCK_PER_SM[p]
    print(
        f"{kind}: one m{m}n{n}k{k} = {m * n * k:,} FMA = {clocks:.0f} clocks of an SM's tensor "
        f"cores ({TC_FMA_PER_CLOCK_PER_SM[p]} FMA per clock)"
    )

# %% [markdown]
# The `mma.sync` stages keep the tensor pipe busy a far smaller share of the cycles than cuBLAS,
# whose kernels issue `GMMA` and use the TMA unit, with one block per SM (the `blocks` row against
# the SM count above) of three warpgroups (384 threads). That is the launch shape this chapter
# arrives at in stage 20 (section 5): at most one block per SM, one producer warpgroup that asks
# the TMA for the tiles and two consumer warpgroups that issue `wgmma`, with the same registers
# per thread at launch (its resource report).
#
# ## 1. Warpgroups: four warps, one product
#
# `mma.sync` is one warp's instruction: a 16x8 (TF32: x8, FP16: x16) product per warp, its
# operands in the lanes' registers. `wgmma.mma_async` belongs to a **warpgroup**: four
# consecutive warps (128 threads, the first a multiple of 128) that issue it together, each with
# the same operands, for one `64 x N x K` product, N from 8 to 256 in steps of 8 (K = 16 for FP16
# and BF16, 8 for TF32). The products are *asynchronous*: the warps go on issuing other
# instructions (more products, the next tiles' copies) and wait for them later. The instruction
# shapes, from `numba_gemm.ptx.wgmma`:

# %%
for kind, (m, k) in (("FP16/BF16", wgmma.WGMMA_F16), ("TF32", wgmma.WGMMA_TF32)):
    n = max(wgmma.N_VALUES)
    print(
        f"{kind:<9} m{m}n{n}k{k}: {m * n * k:>7,} FMA per instruction per warpgroup "
        f"({m * n * k // (16 * 8 * k):>3}x an m16n8k{k} mma.sync)"
    )
print(f"threads in a warpgroup: {wgmma.WARPGROUP}")

# %% [markdown]
# The accumulators stay in registers: each of the 128 threads holds `N / 2` FP32 results. Warp
# `w` of the group holds rows `16 w .. 16 w + 15`, and within them the accumulator map of
# `mma.m16n8` from notebook 07, once per 8 columns. The package writes this map once, in
# `wgmma.owned`, which the simulator's model of the instruction uses to hand each thread its
# results and the kernels' epilogues mirror when they store C:

# %%
h.show_source(wgmma.owned)

# %% [markdown]
# Drawn for a `64 x 64` product (every element is asserted to belong to exactly one thread):

# %%
N_DRAWN = 64
owner = np.full((64, N_DRAWN, 3), -1)
for w in range(4):
    for lane in range(32):
        rows, cols = wgmma.owned(w, lane, N_DRAWN)
        assert (owner[rows, cols] == -1).all(), "an element owned twice"
        owner[rows, cols] = np.stack(
            [np.full(len(rows), w), np.full(len(rows), lane), np.arange(len(rows))], 1
        )
assert (owner >= 0).all(), "an element nobody owns"
fig.draw_accumulators(owner)

# %% [markdown]
# On the simulator (`NUMBA_ENABLE_CUDASIM=1`) the product is a plain-Python model: every thread
# reads both operands through their descriptors (next section), multiplies them with NumPy, and
# keeps the elements `owned` gives it. A kernel with a wrong descriptor, layout or index
# therefore computes a wrong product on a laptop too:

# %%
h.show_defs(wgmma, "_update", "mma_f16")

# %% [markdown]
# ## 2. SMEM matrix descriptors and the 128-byte swizzle
#
# The operands of `wgmma` are not in registers (except, optionally, A: section 3), so the
# instruction needs to know where in SMEM they lie and how. That is the 64-bit **matrix
# descriptor** of each operand: bits 0-13 the start address, 16-29 the *leading byte offset*
# (LBO), 32-45 the *stride byte offset* (SBO), each in units of 16 bytes, and bits 62-63 the
# swizzle mode. The package encodes it in one function (on the GPU, `smem_desc` emits the same
# arithmetic on the SMEM address of an array element):

# %%
h.show_source(wgmma.encode_desc)

# %% [markdown]
# The kernels use the **128-byte swizzle**: an operand is stored as rows of 128 bytes (64 FP16
# values or 32 FP32 values of K for a K-major operand), and within each group of 8 rows (a
# 1024-byte *atom*, so SBO = 1024) the 16-byte chunk `c` of row `r` is stored at chunk `c ^ (r %
# 8)`. For a K-major swizzled operand the LBO is unused (16 is passed); for the MN-major FP16
# B of stage 17 it is the distance between its 64-column blocks. Stage 17's descriptors for its
# default tile, and where they move at each 16-deep product step (its `_product`, below):

# %%
st17 = numba_gemm.get_stage("hgemm_wgmma")
cfg17 = dict(st17.config)
d17 = k17.derived(cfg17)
show(h.kernel_function(st17), "_product")


# %%
def a_step(s, BM):
    """Stage 17's ``a_off`` for product step s (16-byte units), as in ``_product``."""
    per_row = wgmma.SW_ROW // (2 * k17.MMA_K)  # STEPS_PER_ROW: 16-deep steps per 128-byte row
    return ((s // per_row) * BM * wgmma.SW_ROW + (s % per_row) * 2 * k17.MMA_K) // 16


BM17 = cfg17["BM"]
desc_a = wgmma.encode_desc(0, wgmma.CORE_BYTES, wgmma.SW_ATOM, swizzle=128)
desc_a_wg1 = wgmma.encode_desc(k17.WG_M * wgmma.SW_ROW, wgmma.CORE_BYTES, wgmma.SW_ATOM, 128)
desc_b = wgmma.encode_desc(0, d17["LBO_B"], wgmma.SW_ATOM, swizzle=128)
descs = {
    "A, warpgroup 0, step 0": desc_a,
    "A, warpgroup 1, step 1": desc_a_wg1 + a_step(1, BM17),
    f"B (LBO {d17['LBO_B']} B), step 1": desc_b + 1 * k17.MMA_K * wgmma.SW_ROW // 16,
}
for label, d in descs.items():
    start, lbo, sbo, swz = wgmma.decode_desc(d)
    print(f"{label:<28} start {start:>6} B, LBO {lbo:>5} B, SBO {sbo:>5} B, swizzle {swz} B")
fig.draw_descriptors(descs)

# %% [markdown]
# The copy into SMEM and the product's read must agree on where every element lies. The copy
# side is `k17.swizzled_chunk` (where chunk `c` of tile row `r` goes); the read side is the
# descriptor, decoded by `wgmma.operand_offsets` exactly as the simulator's model reads it.
# Checked for every element of the A tile and every product step:

# %%
h.show_source(k17.swizzled_chunk)
dst = k17.swizzled_chunk(BM17).py_func
T16 = k17.T  # FP16 values per 16-byte chunk
for s in range(cfg17["BK"] // k17.MMA_K):
    read = wgmma.operand_offsets(desc_a + a_step(s, BM17), 64, k17.MMA_K, 2, mn_major=False)
    m, kk = np.meshgrid(np.arange(64), s * k17.MMA_K + np.arange(k17.MMA_K), indexing="ij")
    copied = np.vectorize(dst)(m, kk // T16) * 16 + (kk % T16) * 2
    assert (read == copied).all(), f"step {s}: the copy and the descriptor disagree"
print(f"A tile {BM17} x {cfg17['BK']}: copy and descriptor agree for all {cfg17['BK'] // 16} steps")

# %% [markdown]
# Why swizzle at all. A warp's 32 copies of 16 bytes take four whole 128-byte rows of A's tile
# (consecutive threads, consecutive chunks: 4 whole 128-byte lines of GMEM). Without a swizzle,
# the descriptor's other layout (8 x 16-byte *core matrices*, LBO between neighbours along K)
# puts chunk `c` of rows 0-7 in one 128-byte core matrix each, so a row's 8 chunks all fall on the
# same 4 banks. With it, they spread over all 32. The left panel is the swizzle's permutation
# (`wgmma.swizzle_128b`); the two others are the banks of one warp's 32 copies, counted with
# notebook 04's wavefront model (`h.wavefronts`: the most distinct 4-byte words any one bank must
# deliver), from both layouts' `operand_offsets`:

# %%
atom = np.zeros((8, 8), int)
for r in range(8):
    for c in range(8):
        phys = wgmma.swizzle_128b(r * wgmma.SW_ROW + c * wgmma.CORE_BYTES)
        atom[phys // wgmma.SW_ROW, (phys % wgmma.SW_ROW) // wgmma.CORE_BYTES] = c

BK17 = cfg17["BK"]
layouts = {
    "no swizzle (core matrices, LBO 128)": wgmma.encode_desc(0, 128, BK17 // T16 * 128),
    "128-byte swizzle (stage 17)": desc_a,
}
panels = []
for name, d in layouts.items():
    off = wgmma.operand_offsets(d, 8, BK17, 2, mn_major=False)  # 8 rows of the tile, all of K
    # lane l copies chunk l % 8 of row l // 8: 8 FP16 values = 4 words
    lane_words = [
        sorted({int(o) // 4 for o in off[lane // 8, 8 * (lane % 8) : 8 * (lane % 8) + 8]})
        for lane in range(32)
    ]
    print(f"{name:<38} one warp's copies: {h.wavefronts(lane_words)} wavefronts")
    panels.append((lane_words, f"{name}: a warp's 16-byte copies"))
fig.draw_swizzle(atom, panels, h.draw_banks)

# %% [markdown]
# Four wavefronts is the minimum for 512 bytes. The alternative without a swizzle is to let each
# warp copy half rows of 8 consecutive rows (64 bytes each: conflict-free in SMEM, but only half
# of each 128-byte GMEM line a request touches). When the package was built, that core-matrix
# version ran at less than half the speed of the swizzled one, its warps stalled on the copies
# (docs/design.md §5, "Tensor cores").
#
# ## Stage 17: `hgemm_wgmma`, FP16 on warpgroups
#
# A block tile of `BM / 64` warpgroups (its default, printed at the top: two), each with 64 rows
# of C and `BN / 2` FP32 accumulators per thread, and the `cp.async` ring of notebook 05, with the
# math replaced by `BK / 16` products per K tile. The kernel:

# %%
h.show_source(st17)

# %% [markdown]
# Three instructions order the asynchronous products, each executed by all 128 threads:
#
# - `wgmma.fence` before the first product that reads registers written since (here: the
#   accumulators, which the previous wait hands back);
# - `wgmma.commit_group` closes a *group*: the `BK / 16` products of one K tile;
# - `wgmma.wait_group n` waits until at most `n` of this warpgroup's groups are still running.
#
# Stage 17 waits with `n = 1`: the products of tile `t` keep running while the warps issue the
# copies of a later tile and go round to issue tile `t + 1`'s; only tile `t - 1`'s must be done.
# So at most two groups are in flight, and two ring buffers are held by products: the one being
# read and the one that may still be read. The copies therefore go `DIST = NBUF - 2` tiles ahead,
# into the buffer of tile `t - 2`, which the block barrier at the top of the iteration guarantees
# every warpgroup has finished with. (`fence.proxy.async` before that barrier makes the SMEM the
# threads' `cp.async` copies wrote visible to the tensor cores, which read SMEM through another
# path, the *async proxy*.)
#
# In the SASS each line of the loop has its instruction: `DEPBAR` (this thread's `cp.async`
# groups), `FENCE.VIEW.ASYNC` (the proxy fence), `BAR.SYNC` (the block barrier), `WARPGROUP.ARRIVE`
# (`wgmma.fence`), the products as `HGMMA.64x256x16` on descriptors (`gdesc`, B with `tnspB`), the
# last one marking the group (`gsb0`, the commit), the next tile's copies as `LDGSTS`, and
# `WARPGROUP.DEPBAR.LE gsb0, 0x1` (`wait_group 1`):

# %%
sass_excerpt(
    "hgemm_wgmma",
    ("DEPBAR", "FENCE", "BAR.SYNC", "WARPGROUP", "HGMMA", "LDGSTS", "LDGDEPBAR"),
    start="DEPBAR.LE SB0, 0x1",
    end="WARPGROUP.DEPBAR.LE gsb0, 0x1",
)

# %% [markdown]
# The ring's state at each iteration, from the kernel's own recurrence for `cb` (the buffer of
# tile `t`) and `nb` (the buffer the copies go to):


# %%
def k_loop_states(nbuf, iters):
    """Ring buffers after each iteration of stage 17's K loop has issued its work, stepping
    ``cb`` and ``nb`` as the kernel does."""
    dist = nbuf - 2  # DIST: tiles of copies in flight
    held = {s: ("copy in flight", f"tile {s}") for s in range(dist)}  # the prologue
    cb, nb, out = 0, dist, []
    for t in range(iters):
        held[cb] = ("products issued", f"mma {t}")  # tile t landed: its products, left running
        if t > 0:
            held[(cb - 1) % nbuf] = ("products may still run", f"mma {t - 1}")
        held[nb] = ("copy in flight", f"tile {t + dist}")  # into tile t - 2's buffer
        out.append([held.get(b, ("free", "")) for b in range(nbuf)])
        cb = cb + 1 if cb + 1 < nbuf else 0
        nb = nb + 1 if nb + 1 < nbuf else 0
    return out


fig.draw_buffer_table(
    k_loop_states(cfg17["NBUF"], 8),
    f"stage 17's ring, NBUF = {cfg17['NBUF']}: after iteration t issued tile t's products and "
    f"the copies of tile t + {cfg17['NBUF'] - 2}",
)

# %% [markdown]
# Run and checked (`hgemm`, FP16 operands, FP32 sums and C) against the float64 product of the
# same FP16 inputs, into a C poisoned with NaN. On the simulator every stage of this notebook runs
# with a small tile of one warpgroup (64 x 64, the tests' tile) on a problem of a few tiles; on a
# GPU, with the package's tuned tiles for the shape.

# %%
SIM_WGMMA = dict(BM=64, BN=64, BK=64, NBUF=3)  # one warpgroup
SIM_TMA = dict(BM=64, BN=64, BK=64, NBUF=2)  # one consumer warpgroup and the producer's


def sized(name):
    """The stage to run: by name on a GPU (the plan picks the tuned tiles); on the simulator
    with one of the small tiles above."""
    if not h.simulator():
        return name
    st = numba_gemm.get_stage(name)
    small = SIM_TMA if st.tensor_maps is not None else SIM_WGMMA
    return st.with_config({k: small.get(k, v) for k, v in st.config.items()})


M, N, K = (100, 72, 200) if h.simulator() else h.demo_shape(aligned=True)
h.check_stages([sized("hgemm_wgmma")], M, N, K)

# %% [markdown]
# ## 3. TF32: why the kernel computes C^T = B^T A^T (stage 18)
#
# For 32-bit operands `wgmma` has no transposed form: a TF32 operand in SMEM must be **K-major**
# (K contiguous along each row of the operand). The 16-bit products take two extra immediate
# operands, `imm-trans-a` and `imm-trans-b`; the TF32 ones do not, as the PTX the package emits
# shows (`tail`):

# %%
h.show_defs(wgmma, "_ss_typer")

# %% [markdown]
# A (`M x K`, row-major) is K-major as it lies. B (`K x N`, row-major) is not: along a row of B,
# N varies. The kernel therefore computes the transposed product, `C^T = B^T A^T` (the identity
# every row-major BLAS relies on): the instruction's first operand is a 64-column slice of B,
# transposed, and its second the A tile exactly as it lies, K-major, swizzled, read through a
# descriptor. The first operand of `wgmma` may come from **registers** instead of SMEM, in the
# `mma.m16n8k8` fragment layout of notebook 07, and registers have no layout constraint: each
# lane loads its elements of B from wherever they are. Each warpgroup then owns 64 columns of C
# and all `BM` rows, and holds its accumulators transposed. On random matrices:

# %%
rng = np.random.default_rng(0)
a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
print("C^T == B^T A^T:", np.allclose((a @ b).T, b.T @ a.T))

# %% [markdown]
# Which column of C each row of the register operand stands for is the kernel's choice, and it
# chooses so that a lane's four elements come from two 64-bit SMEM loads (`Bs[k, n : n + 2]`, at
# `k = q` and `q + 4`) and its accumulators make 64-bit stores of C: rows `g` and `g + 8` of the
# warp's 16 are columns `n = 16 w + 2 g` and `n + 1`. The product step and the K-tile body
# (`wait_group 1` as in stage 17):

# %%
st18 = numba_gemm.get_stage("tf32_wgmma")
show(h.kernel_function(st18), "_product")
show(h.kernel_function(st18), "tile")

# %% [markdown]
# The register operand of warp 0, drawn from those formulas (`n = 16 w + 2 * (lane >> 2)`, `fk =
# q`, two `load2` at `k` and `k + 4`): which lane loads each element of the B tile, and which C
# column each fragment row stands for. Composed with `wgmma.owned` (the accumulator map of
# section 1), lane `(g, q)` holds C rows `8 i + 2 q` and `8 i + 2 q + 1` of columns `n` and `n +
# 1`: the pairs `k18.make_rs_store` stores, checked below for all 128 threads.

# %%
lanes_b = np.full((k18.MMA_K, 16), -1)
col_of_row = np.zeros(16, int)
for lane in range(32):
    g, q = lane >> 2, lane & 3
    n = 2 * g  # warp 0: w16 = 0
    for k in (q, q + 4):  # b_fragment: load2(Bs, k, n), load2(Bs, k + 4, n)
        lanes_b[k, n : n + 2] = lane
    col_of_row[g], col_of_row[g + 8] = n, n + 1  # fragment rows g, g + 8 -> C columns n, n + 1
assert (lanes_b >= 0).all()
fig.draw_rs_operand(
    lanes_b, col_of_row, "warp 0: the lane that loads Bs[k, n] (colour: g = lane >> 2)"
)

BM18 = 64
for w in range(4):
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        n = 16 * w + 2 * g
        rows, cols = wgmma.owned(w, lane, BM18)  # of D = C^T: row = fragment row, col = C row
        c_col = np.where(rows % 16 < 8, n, n + 1)  # fragment row 16w + g -> n, 16w + g + 8 -> n+1
        i = np.arange(BM18 // 8)  # make_rs_store: acc[4i], acc[4i + 2] at row 8i + 2q, ...
        want_rows = np.stack([8 * i + 2 * q, 8 * i + 2 * q + 1, 8 * i + 2 * q, 8 * i + 2 * q + 1])
        want_cols = np.stack(
            [np.full_like(i, n), np.full_like(i, n), np.full_like(i, n + 1), np.full_like(i, n + 1)]
        )
        assert (cols == want_rows.T.reshape(-1)).all() and (c_col == want_cols.T.reshape(-1)).all()
print("every thread's accumulators are the C elements make_rs_store writes")

# %% [markdown]
# Two details of TF32 itself. The register operand is rounded to TF32 by an integer add
# (`round_tf32_bits`: `(bits + 0x1000) & ~0x1FFF`), but the SMEM operand is *truncated* by the
# tensor cores (its low 13 mantissa bits dropped), so stage 18's error is above cuBLAS TF32's
# (the last table of this notebook prints both, against cuBLAS FP32's result). And the layouts:
# stage 18 takes A and B in any storage order and in batches, and can split K (the tunable
# stages' contract, notebook 06).
#
# ## Stage 19: 3xTF32 on `wgmma`
#
# Stage 13's arithmetic (notebook 07: each operand split into TF32 `big + small`, three
# products per multiply, the tensor cores' truncating sums flushed into FP32 accumulators) on
# stage 18's kernel. The module is a configuration of `k18`; A's small parts are made once per A
# tile by a pass over SMEM, into a second swizzled tile, and every K tile waits for all its
# products (`wait_group 0`) before adding them to the FP32 sums:

# %%
h.show_source(k19)
show(h.kernel_function(numba_gemm.get_stage("tf32x3_wgmma")), "tile_3x")

# %%
h.check_stages([sized("tf32_wgmma"), sized("tf32x3_wgmma")], M, N, K)

# %% [markdown]
# ### Stages 17-19 on the GPU
#
# GFLOP/s of each stage and, in brackets, its share of cuBLAS in the stage's own precision
# (stage 17: cuBLAS FP16; 18: cuBLAS TF32; 19: cuBLAS FP32 with TF32 off, the accuracy it
# matches), kernel time, beside the `mma.sync` stage of the same precision from notebook 07 (14,
# 12, 13). Below each table, the sizes at which the new stage is the faster of the two (4095^3
# included). At 4095^3 the FP16 stages do not run (`SKIPPED`: `hgemm` needs N and K multiples of
# 8) and the TF32 ones, named explicitly as here, run their scalar variants (4-byte copies, since
# rows of 4095 floats are not 16-byte aligned); the public `sgemm` avoids them by copying such
# operands into aligned ones first.


# %%
def faster(new, old, sizes=None):
    """Print the N^3 sizes of the stored run (powers of two and 4095) at which stage ``new``
    takes less kernel time than ``old``, and those at which it does not; a size where either
    has no timing is not compared."""
    won, lost = [], []
    for n in sizes or h.square_sizes() + h.square_sizes(pow2=False):
        a, b = h.result(new, n), h.result(old, n)
        if a and b and a["median_ms"] and b["median_ms"]:
            (won if a["median_ms"] < b["median_ms"] else lost).append(str(n))
    if not won and not lost:
        print(f"{new} vs {old}: no size where both have timings")
        return
    print(
        f"{new} faster than {old} at N = {', '.join(won) or '-'}; not at: {', '.join(lost) or '-'}"
    )


for old, new in (
    ("hgemm_mma", "hgemm_wgmma"),
    ("tf32_mma_multistage", "tf32_wgmma"),
    ("tf32x3_mma", "tf32x3_wgmma"),
):
    h.print_results([old, new])
    faster(new, old)
    print()

# %% [markdown]
# `wgmma` lifts each precision above its `mma.sync` stage at every power-of-two size (the lines
# under the tables). At 4095^3 the TF32 and 3xTF32 stages run their scalar variants, with 4-byte
# copies, and there the `wgmma` ones are the slower. 3xTF32 now passes cuBLAS FP32 at the larger
# sizes, with an error of FP32's order (its check above: three orders of magnitude below the TF32
# stages'). FP16 and TF32 stay below cuBLAS of their precision.
#
# What is left to remove is argued from the code and the timings, not from a profile: the stored
# Nsight Compute run covers cuBLAS and stages 1-14 only (it was stopped after stage 14), so
# stages 17-24 have no metrics there. In stages 17-19 the multiplying warps still issue every
# copy, compute its addresses and wait for it, and the whole block meets at a barrier once per
# K tile. The next two sections take both away, and the timings of stages 20-23 against 17-19
# (further down) show what that buys.
#
# ## 4. The Tensor Memory Accelerator and mbarriers
#
# In stages 17-19 every thread copies: each issues its share of 16-byte `cp.async`, computes
# their addresses, clamps at the matrix's edges, waits for its own copies, and then the whole
# block meets at a barrier once per K tile. On Hopper, one thread can instead ask the **Tensor
# Memory Accelerator** (TMA) for a whole tile: `cp.async.bulk.tensor` copies a *box* of a matrix
# described by a **tensor map**, a 128-byte object the driver encodes on the host
# (`cuTensorMapEncodeTiled`) from the matrix's address, sizes and row stride, the box size and
# the swizzle. The package checks the driver's rules in plain Python first (so a bad map fails
# with a message that names the field, on the simulator too), then encodes it once per operand
# and keeps it:

# %%
h.show_source(tensormap.matrix_spec)
st20 = numba_gemm.get_stage("hgemm_tma")
cfg20 = dict(st20.config)
box_a, box_b = k20.boxes(cfg20, "NN")
spec = tensormap.matrix_spec("float16", (4096, 4096), 4096 * 2, box_a)
print(spec, f"\none box: {spec.box_bytes} bytes")
try:  # rows of 13 floats (52 bytes): not the multiple of 16 bytes a map's stride must be
    tensormap.matrix_spec("float32", (64, 13), 13 * 4, (32, 64))
except ValueError as e:
    print("refused:", e)

# %% [markdown]
# The TMA writes the box into SMEM already in the 128-byte swizzle (`tma.box_offsets`, the
# layout the simulator's model lands a box in, checked against the hardware by
# `tests/test_tma.py`), and zero-fills whatever lies outside the matrix, so the kernel needs no
# clamps at the edges. The box of A lands exactly where stage 20's descriptor reads it:

# %%
landed = tma.box_offsets(spec)  # (rows, cols) of the box -> SMEM byte offset
read = wgmma.operand_offsets(desc_a, box_a[1], box_a[0], 2, mn_major=False)
print(
    f"A box {box_a[1]} rows x {box_a[0]} values: TMA writes each element where the "
    f"descriptor reads it: {bool((landed == read).all())}"
)

# %% [markdown]
# The copy completes asynchronously, so the consumers need to learn when a tile has landed and
# the producer when a buffer is free again. Both go through **mbarriers**: 64-bit SMEM objects
# with an expected number of arrivals and a count of bytes still to land. When both reach zero the
# barrier's current *phase* completes and its parity flips; a thread waits for a phase with
# `mbarrier.try_wait.parity` (spinning until the phase of that parity has completed). Stage 20 keeps
# two per ring buffer, as CUTLASS's `PipelineTmaAsync` does:
#
# - *full[s]*: one arrival per phase, the producer's `arrive.expect_tx` of the tile's bytes; the
#   TMA's bytes count it down as they land;
# - *empty[s]*: one arrival per consumer warp, once the products that read buffer `s` are done.
#
# Tile `kt` goes to buffer `s = kt % NBUF` in phase `(kt // NBUF) % 2`: the consumers wait on
# *full[s]* for that parity, the producer on *empty[s]* for the other one. A fresh barrier is in
# phase 0, so waiting for parity 1 returns at once: the producer's first pass over the empty
# buffers needs no special case. The simulator's model of a barrier is those rules in a few lines:
# `[expected, pending, tx, phase]` per barrier (arrivals per phase, arrivals still missing, bytes
# still to land, the parity of the phase in progress); a landing box subtracts its bytes from
# `tx`, and a wait for parity `p` returns once the phase in progress has the other parity:

# %%
h.show_defs(tma, "_settle", "_arrive", "mbar_arrive", "mbar_expect_tx", "mbar_wait")

# %% [markdown]
# The producer's loop over one C tile's K tiles:

# %%
h.show_source(inner(k20.make_producer(cfg20, "NN", "f16"), "produce"))

# %% [markdown]
# The ring over time, from a small model of those rules (schematic units, not measurements: a
# TMA latency of several products, the tensor cores running one product group at a time, the
# consumer releasing tile `kt - 1`'s buffer after `wait_group 1` at tile `kt`, as in stage 20).
# On the GPU the products of tile `kt` are issued while tile `kt - 1`'s may still run, so two
# buffers can be held by products and `NBUF - 2` tiles are in flight. The model is simpler: its
# tensor cores run one group at a time, so tile `kt - 1`'s products are done when tile `kt`'s
# start, and its buffer is released then; at most one buffer is in products at a time. With
# stage 20's default `NBUF`, the copies stay ahead of the products after the first tile; with two
# buffers the tensor cores wait for tiles again and again. "Busy" counts from the first TMA
# issue, the wait for the first tile included:


# %%
def ring(nbuf, tiles, latency, product):
    """Times of each K tile in stage 20's ring: TMA issued (once its buffer's *empty* phase
    completed), landed (*full* completes), products start and end (one group at a time), buffer
    released (*empty* arrival: after ``wait_group 1`` at the next tile)."""
    issue, land, start, end, release = ([0.0] * tiles for _ in range(5))
    producer = consumer = pipe = 0.0
    for kt in range(tiles):
        free = release[kt - nbuf] if kt >= nbuf else 0.0  # mbar_wait(empty, s, phase ^ 1)
        issue[kt] = producer = max(producer, free)
        land[kt] = issue[kt] + latency  # the bytes have landed: full[s]'s phase completes
        consumer = max(consumer, land[kt])  # mbar_wait(full, s, phase)
        start[kt] = max(consumer, pipe)
        end[kt] = pipe = start[kt] + product
        if kt > 0:  # wait(1): tile kt - 1's products are done -> mbar_arrive(empty, prev)
            release[kt - 1] = consumer = max(consumer, end[kt - 1])
    release[-1] = end[-1]  # wait(0) after the last tile
    busy = tiles * product / end[-1]  # from the first issue at time 0: the fill included
    return dict(nbuf=nbuf, issue=issue, land=land, start=start, end=end, release=release, busy=busy)


LATENCY, PRODUCT = 3.0, 1.0
rings = [
    (f"NBUF = {cfg20['NBUF']} (stage 20's default)", ring(cfg20["NBUF"], 10, LATENCY, PRODUCT)),
    ("NBUF = 2", ring(2, 10, LATENCY, PRODUCT)),
]
for title, r in rings:
    print(f"{title}: tensor cores busy {r['busy']:.0%} of the time from the first TMA issue")
fig.draw_ring(rings)

# %% [markdown]
# ## 5. Warp specialization and persistent blocks (stage 20)
#
# With the copies reduced to one thread's requests, the block splits its warps by role: one
# **producer** warpgroup (of which one thread issues the TMA copies) and `BM / 64` **consumer**
# warpgroups that only wait on *full*, multiply, and arrive on *empty*. Nobody waits at a block
# barrier after the mbarriers are initialised. Two more things in the kernel:
#
# - `setmaxnreg`: the producer needs few registers, the consumers many (`BN / 2` accumulators
#   per thread). The producer warpgroup gives registers back (`setmaxnreg.dec` to
#   `PRODUCER_REGS`) and the consumers take them (`setmaxnreg.inc`), within what the launch
#   allocated (`k20.consumer_registers`, below);
# - **persistent blocks**: the grid has at most one block per SM, and each block walks the C
#   tiles `gridDim.x` apart. The ring's buffers and phases run on from one C tile to the next, so
#   while the consumers store one tile's C, the producer already loads the next tile's first K
#   tiles;
# - **programmatic dependent launch** (`tma.pdl_wait`, `tma.pdl_launch_dependents`: PTX
#   `griddepcontrol.wait` and `.launch_dependents`): the kernel is launched so that the next
#   kernel in the stream may start while this one's blocks are still finishing; `pdl_wait` makes
#   every thread wait until the kernel ahead of it has completed before it touches GMEM, so
#   only the launch and set-up overlap, never the reads of a C still being written.
#
# The source's comments point to docs/design.md for the measurements behind three choices: the
# grouped tile order (§5.2, drawn below), the consumers' register budget (§5.3: asking
# `setmaxnreg` for more than the launch allocated waits forever) and the dependent launch (§5.5:
# it saves the launch and set-up of each call back to back). The kernel (the same source serves
# stages 21 and 24):

# %%
h.show_source(st20)
h.show_source(k20.consumer_registers)
print(f"producer registers per thread: {k20.PRODUCER_REGS}")
print(
    "consumer registers per thread, by consumer warpgroups:",
    {c: k20.consumer_registers(c) for c in range(1, 5)},
)

# %% [markdown]
# What `ptxas` makes of the kernels at their default tiles (`numba_gemm.tools.resources`, compiled
# for `sm_90a` in a subprocess, no GPU needed; `wgmma` counts the instructions in the PTX). The
# `cp.async` stages 17 and 18 take most of the 255 registers a thread may name, for 256 threads.
# For the warp-specialized ones `regs` is what the launch allocates to every thread of the block
# (`launch_bounds`: the 65536 registers of an SM over the block's threads, in steps of 8): the
# pool that `setmaxnreg` then moves from the producer to the consumers, as `consumer_registers`
# (printed above) computes.

# %%
_ = h.resources(["hgemm_wgmma", "tf32_wgmma", "hgemm_tma", "tf32_tma", "tf32_tma_rs"])

# %% [markdown]
# In the SASS: the producer warpgroup gives its registers back (`USETMAXREG.DEALLOC` to
# `PRODUCER_REGS`, in hex; `.CTAPOOL`: into the block's pool of registers, from which the
# consumers' `setmaxnreg.inc` takes them), then per K tile waits on *empty*
# (`SYNCS.PHASECHK.TRANS64.TRYWAIT`), announces the bytes on *full* (`SYNCS.ARRIVE.TRANS64`,
# the `arrive.expect_tx`) and issues the boxes (`UTMALDG.2D`: one of A and `BN / 64` of B at the
# default tile). The consumers take the registers (`USETMAXREG.TRY_ALLOC`, to what
# `consumer_registers` gives two consumers), wait on *full*, issue the tile's `HGMMA`, wait for
# the previous tile's (`WARPGROUP.DEPBAR.LE gsb0, 0x1`) and arrive on *empty*:

# %%
sass_excerpt("hgemm_tma", ("SYNCS", "UTMALDG", "USETMAXREG"), start="USETMAXREG.DEALLOC", count=6)
sass_excerpt(
    "hgemm_tma",
    ("SYNCS", "WARPGROUP", "HGMMA", "USETMAXREG"),
    start="USETMAXREG.TRY_ALLOC",
    count=9,
)

# %% [markdown]
# Across the tensor-core kernels, which of these instructions each contains (counted in the SASS
# of its default kernel: instructions in the code, not executions; the compiler unrolls loops
# differently in each). `mma.sync` and `ldmatrix` (stage 14) become `wgmma` (17, 18); in 20 and
# 22 the threads' `cp.async` copies (`LDGSTS`) become the TMA's (`UTMALDG`) and the hand-offs go
# through mbarriers (`SYNCS`). Their one `BAR.SYNC` is the barrier after the mbarriers are
# initialised; stage 17's is the one inside its K loop (the excerpt in stage 17's section):

# %%
COUNTED = ["HMMA", "LDSM", "HGMMA", "LDGSTS", "UTMALDG", "SYNCS", "BAR.SYNC", "USETMAXREG"]
print(f"{'stage':<14}" + "".join(f"{op:>11}" for op in COUNTED))
for stage in ["hgemm_mma", "hgemm_wgmma", "tf32_wgmma", "hgemm_tma", "tf32_tma_rs"]:
    ops = [op for op, _ in opcodes(stage)]
    print(f"{stage:<14}" + "".join(f"{sum(o.startswith(c) for o in ops):>11}" for c in COUNTED))

# %% [markdown]
# The order of the tiles is `make_tile_order`: `GROUP_M` tile rows walked column by column, so
# that the tiles the blocks hold at the same time share their rows of A and columns of B in L2
# (Triton's and CUTLASS's grouped order):

# %%
h.show_source(k20.make_tile_order)

# %% [markdown]
# Drawn for a small grid (12 x 5 tiles, 6 persistent blocks), from the package's own `tile_at`:

# %%
TILES_M, TILES_N, BLOCKS = 12, 5, 6
tile_at = k20.make_tile_order(cfg20["BM"], cfg20["BN"]).py_func
order = np.full((TILES_M, TILES_N), -1)
for t in range(TILES_M * TILES_N):
    r0, c0 = tile_at(t, TILES_M, TILES_N)
    order[r0 // cfg20["BM"], c0 // cfg20["BN"]] = t
assert (order >= 0).all()
fig.draw_tile_order(order, BLOCKS, k20.GROUP_M)


# %% [markdown]
# What the grouping buys, counted rather than timed: the A rows and B columns of tiles (each
# `BM x K` or `K x BN`) that one wave of `sms` tiles touches, for the grouped walk and for plain
# row-major order, at stage 20's default tile and the SM count of the stored run's GPU. Fewer
# panels per wave means more of the operands are read from L2 instead of DRAM once they outgrow
# it. When the order was chosen, it gained at 8192^3 and made no difference at 4096^3
# (docs/design.md §5.2). By this count, at 4096^3 a wave of row-major order (a few whole tile
# rows) touches fewer panels than the grouped walk; from 8192^3 on, many more:


# %%
def panels_per_wave(tiles_m, tiles_n, blocks, at):
    """Mean number of distinct tile rows + tile columns per wave of ``blocks`` tiles."""
    total, waves = 0, 0
    for w0 in range(0, tiles_m * tiles_n, blocks):
        tiles = [at(t) for t in range(w0, min(w0 + blocks, tiles_m * tiles_n))]
        total += len({r for r, _ in tiles}) + len({c for _, c in tiles})
        waves += 1
    return total / waves


BM20, BN20 = cfg20["BM"], cfg20["BN"]
for n in (4096, 8192, 16384):
    tm, tn = -(-n // BM20), -(-n // BN20)
    grouped = panels_per_wave(tm, tn, sms, lambda t, tm=tm, tn=tn: tile_at(t, tm, tn))
    row_major = panels_per_wave(tm, tn, sms, lambda t, tn=tn: divmod(t, tn))
    print(
        f"{n}^3, {tm} x {tn} tiles of {BM20} x {BN20}, waves of {sms}: tile rows + columns per "
        f"wave {grouped:.1f} (grouped), {row_major:.1f} (row-major)"
    )

# %%
h.check_stages([sized("hgemm_tma")], M, N, K)

# %% [markdown]
# ## Stage 21: `tf32_tma`, TF32 for `x @ W.T`
#
# Stage 20's kernel with float32 tensor maps and the TF32 product. Both TF32 operands must be
# K-major in SMEM and the TMA copies boxes as they are stored, so this stage serves the product
# whose two operands both hold K along their rows: A `(M, K)` and B stored `(N, K)`, the layout
# of `torch.nn.Linear`'s `x @ W.T` (`NT`). The module is one configuration:

# %%
h.show_source(k21)
st21 = numba_gemm.get_stage("tf32_tma")
print("layouts:", st21.layouts, " tensor maps (type, A's box, B's box):", st21.tensor_maps("NT"))

# %% [markdown]
# The share of cuBLAS TF32 in the module's comment on its tile is the measurement made when
# that tile was chosen, in an earlier run; this run's timings of stage 21 are in the tables of
# "Stages 20-24 on the GPU" below.

# %% [markdown]
# `h.check_stages` passes B row-major, which this stage does not take, so its check is written
# out here the same way (standard-normal operands, C poisoned with NaN, relative error against
# the float64 product), with B stored transposed: the `(N, K)` weight, read through a zero-copy
# transposed view.


# %%
x = rng.standard_normal((M, K), dtype=np.float32)
w = rng.standard_normal((N, K), dtype=np.float32)
d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
# the package's test harness makes the operand: w's memory seen as its transpose, no copy (on a
# GPU, Numba's `.T` of a device array is a contiguous copy, not a view)
w_t = stored_transposed(w.T)
numba_gemm.sgemm(cuda.to_device(x), w_t, stage=sized("tf32_tma"), out=d_c)
ref = x.astype(np.float64) @ w.T.astype(np.float64)
c = d_c.copy_to_host()
err = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
ok = bool(np.isfinite(c).all()) and err <= st21.rtol
print(
    f"{'tf32_tma':<20} {M}x{N}x{K}, B stored (N, K): relative error vs float64 NumPy {err:.2e} "
    f"(bound {st21.rtol:g}): {'ok' if ok else 'FAILED'}"
)
assert ok, "wrong results from tf32_tma"

# %% [markdown]
# ## Stage 22: `tf32_tma_rs`, TF32 for row-major B
#
# Stage 18's transposed product on stage 20's pipeline: B lands by TMA as boxes of 32 columns x
# `BK` rows of K, each lane loads its register fragment from the swizzled box (two 64-bit loads),
# and the A tile is the SMEM operand. Which 16-byte chunk of its box a lane's column pair comes
# from is chosen (`lane_chunk`) so that a half-warp's loads hit 8 different chunks after the
# swizzle: no bank conflict. The fragment loads:

# %%
h.show_source(k22.lane_chunk)
st22 = numba_gemm.get_stage("tf32_tma_rs")
show(h.kernel_function(st22), "_fragment")

# %% [markdown]
# Counted with the wavefront model for each warp's loads at `k = q` (row `q` of its box), from
# the kernel's addressing (`c0 = (bx * BK + q) * ROW_CHUNKS + (ch ^ q)`, two floats at `p2 = 2 *
# (g & 1)`): 32 lanes of 8 bytes need at least two wavefronts of 128 bytes.

# %%
BK22 = st22.config["BK"]
for w in range(4):
    words = []
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        bx, ch, p2 = w >> 1, k22.lane_chunk(w, g), 2 * (g & 1)
        chunk = (bx * BK22 + q) * k22.ROW_CHUNKS + (ch ^ q)
        words.append([chunk * 4 + p2, chunk * 4 + p2 + 1])
    print(f"warp {w}: the 64-bit loads of k = q take {h.wavefronts(words)} wavefront(s)")

# %% [markdown]
# One difference in the pipeline: a register operand is read until its product is done, so a
# consumer may not load the next tile's fragments into those registers while the products run.
# Stage 22 waits for all of a tile's products (`wait_group 0`) before it loads the next fragments
# and releases the buffer; the other consumer warpgroup's products keep the tensor cores busy
# meanwhile. (When the stage was built with stage 20's `wait_group 1`, it was as fast and wrong
# on the GPU, and right on the simulator, whose products are synchronous: docs/design.md §5.3.)
# The consumer loop:

# %%
h.show_statement(k22.make_kernel, "for _ in range(k_tiles):")

# %%
h.check_stages([sized("tf32_tma_rs")], M, N, K)

# %% [markdown]
# ## Stage 23: `tf32x3_tma`, 3xTF32 on the TMA pipeline
#
# Stage 19's arithmetic on stage 22's kernel. The consumer threads make A's small parts of each
# landed tile into one of three SMEM tiles and meet on a third kind of mbarrier before the
# products read them; where the FP32 sums and a whole tile's fresh accumulators would not fit
# the registers, a tile's products are made in slices of its rows, each slice's added to the sums
# before the next (`SLICES`):

# %%
h.show_source(k23)
show(h.kernel_function(numba_gemm.get_stage("tf32x3_tma")), "_slice")
print("slices of the default tile:", k22.derived(k23.DEFAULT_CONFIG, "3xtf32")["SLICES"])

# %% [markdown]
# The module's comment on its tile quotes the measurements by which the tile was chosen (the
# two-slice tile against the one-slice one, in an earlier run); this run's timings of stage 23
# are in the tables below.

# %%
h.check_stages([sized("tf32x3_tma")], M, N, K)

# %% [markdown]
# ## Stage 24: `bf16_tma`, BF16
#
# bfloat16 keeps float32's 8-bit exponent and 7 bits of mantissa: FP32's range at FP16's size.
# The elements are 2 bytes as FP16's and the tensor cores multiply them at the same rate, so
# stage 24 is stage 20's kernel with bfloat16 tensor maps and `wgmma ... .bf16.bf16`:

# %%
h.show_source(k24)
h.check_stages([sized("bf16_tma")], M, N, K)

# %% [markdown]
# ### Stages 20-24 on the GPU
#
# As for stages 17-19: GFLOP/s and the share of cuBLAS in each stage's precision (20: FP16; 21,
# 22: TF32; 23: FP32 with TF32 off; 24: BF16), kernel time, beside the `cp.async` stage of the
# same precision (stage 24 beside stage 20: the same kernel on elements of the same size). At
# 4095^3 the TMA stages do not run (`SKIPPED`): a tensor map's rows must be 16-byte aligned (the
# refusal in section 4). A stage whose result did not pass the bench's check before timing is
# `FAILED` and has no timing there. The last lines say whether stage 21 has timings in this run
# and, for any stage that failed the bench's check, with what error.

# %%
for old, new in (
    ("hgemm_wgmma", "hgemm_tma"),
    ("tf32_wgmma", "tf32_tma"),
    ("tf32_wgmma", "tf32_tma_rs"),
    ("tf32x3_wgmma", "tf32x3_tma"),
):
    h.print_results([old, new])
    faster(new, old)
    print()
h.print_results(["hgemm_tma", "bf16_tma"])
ratios = [
    h.result("bf16_tma", n)["median_ms"] / h.result("hgemm_tma", n)["median_ms"]
    for n in h.square_sizes()
]
print(f"bf16_tma / hgemm_tma kernel time: {min(ratios):.3f} .. {max(ratios):.3f}\n")
_, rows = h.results()
timed21 = [r for r in rows if r["stage"] == "tf32_tma" and r["timing"] == "kernel" and r["gflops"]]
print(f"tf32_tma (stage 21) has kernel timings at {len(timed21)} shape(s) of this run")
failed = collections.defaultdict(list)
for r in rows:
    if (
        r["stage"] in [s.name for s in HOPPER]
        and r["status"] == "FAILED"
        and r["timing"] == "kernel"
    ):
        failed[r["stage"]].append(r)
for name, rs in failed.items():
    print(
        f"{name} FAILED the bench's check at {len(rs)} shape(s): relative error up to "
        f"{max(r['rel_error'] or 0 for r in rs):.2f} (bound {numba_gemm.get_stage(name).rtol:g})"
    )
    if name == "tf32_tma":  # why, from the run's own notes (its README)
        print(
            "  this run's bench made stage 21's B (stored (N, K)) with Numba's `.T`, which on a GPU"
            "\n  is a contiguous copy, not a view: the stage multiplied by B^T. Its check in this"
            "\n  notebook (section 'Stage 21') passes the transposed view and passes."
        )

# %% [markdown]
# With the copies handed to the TMA and the hand-offs to mbarriers, each precision's TMA stage
# gains over its `cp.async` stage at nearly every size where both are timed (the lines under the
# tables say where not), with each stage's own tuned tiles. BF16 runs at FP16's speed (the ratio
# printed), as the same kernel on elements of the same size should.

# %% [markdown]
# ## Against the ceiling and cuBLAS
#
# TFLOP/s at each N^3 of the stored run (kernel time), one panel per precision, with cuBLAS of
# that precision, notebook 07's `mma.sync` stage (grey) and the dense peak derived at the start
# (for 3xTF32, a third of the TF32 peak: three TF32 products per multiply):

# %%
SQUARES = h.square_sizes()
PANELS = {
    "FP16 / BF16": (
        "hgemm_mma",
        ["hgemm_wgmma", "hgemm_tma", "bf16_tma"],
        ["cublas_fp16", "cublas_bf16"],
    ),
    "TF32": ("tf32_mma_multistage", ["tf32_wgmma", "tf32_tma", "tf32_tma_rs"], ["cublas_tf32"]),
    "3xTF32 (FP32 accuracy)": ("tf32x3_mma", ["tf32x3_wgmma", "tf32x3_tma"], ["cublas_fp32"]),
}


def tflops(stage):
    """TFLOP/s of ``stage`` at each of :data:`SQUARES` (None where it has no timing)."""
    out = []
    for n in SQUARES:
        r = h.result(stage, n)
        out.append(r["gflops"] / 1e3 if r and r["gflops"] else None)
    return out


def why_untimed(stage):
    """The statuses of ``stage``'s untimed rows at :data:`SQUARES` (the legend's note)."""
    return "/".join(sorted({r["status"] for n in SQUARES if (r := h.result(stage, n))}))


panels = []
for title, (mma_sync, ours, theirs) in PANELS.items():
    lines = [
        (f"{mma_sync} (notebook 07)", tflops(mma_sync), dict(color="0.6", marker=".", ms=4), "")
    ]
    for i, s in enumerate(ours):
        lines.append((s, tflops(s), dict(color=f"C{i}", marker="o", ms=3), why_untimed(s)))
    for j, s in enumerate(theirs):
        lines.append((s, tflops(s), dict(color="black", marker="x^"[j], ms=4, ls="--"), ""))
    panels.append((title, lines))
peaks = {
    "FP16 / BF16": ("dense FP16 / BF16 peak", PEAK["fp16"] / 1e12),
    "TF32": ("dense TF32 peak", PEAK["tf32"] / 1e12),
    "3xTF32 (FP32 accuracy)": ("TF32 peak / 3", PEAK["tf32"] / 3e12),
}
fig.plot_precisions(panels, SQUARES, peaks, f"{meta['gpu']}, kernel time, median of {meta['reps']}")

# %% [markdown]
# The same at the largest size, as shares of the dense peak (3xTF32: of a third of the TF32 peak)
# and of cuBLAS in the stage's precision, with each result's relative error against the bench's
# reference result (named in the first line):

# %%
BIG = max(SQUARES)
print(f"N = {BIG}, {h.results_source()}; errors against {meta['reference']}")
print(f"{'stage':<20} {'TFLOP/s':>8} {'% of peak':>10} {'x cuBLAS':>9} {'rel. error':>11}")
ROWS = [
    (s.name, PEAK["tf32"] / 3 if s.precision == "3xtf32" else PEAK[s.precision]) for s in HOPPER
]
ROWS += [("cublas_fp16", PEAK["fp16"]), ("cublas_bf16", PEAK["bf16"])]
ROWS += [("cublas_tf32", PEAK["tf32"]), ("cublas_fp32", None)]  # (FP32: no tensor cores)
for name, peak in ROWS:
    r = h.result(name, BIG)
    if not r or not r["gflops"]:
        print(f"{name:<20} {r['status'] if r else '-':>8}")
        continue
    share = f"{r['gflops'] * 1e9 / peak:.0%}" if peak else ""
    vs = f"{r['pct_cublas']:.2f}" if r["pct_cublas"] is not None else ""
    err = f"{r['rel_error']:.1e}" if r["rel_error"] is not None else ""
    print(f"{name:<20} {r['gflops'] / 1e3:>8.1f} {share:>10} {vs:>9} {err:>11}")

# %% [markdown]
# cuBLAS itself stays well short of the derived peak (its rows), which assumes the maximum clock
# throughout. The TF32 stages' results are further from the FP32 reference than cuBLAS TF32's:
# the tensor cores truncate the stages' SMEM operand to TF32 rather than round it (section 3).
# The 3xTF32 stages give FP32-level accuracy at about twice cuBLAS FP32's speed or more (`x
# cuBLAS`).
