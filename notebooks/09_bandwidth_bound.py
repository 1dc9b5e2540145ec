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
# # 09 · Bandwidth-bound products: few rows (`skinny`) and few columns (`skinny_n`)
#
# Every stage so far was built for large products, where each element of A and B feeds
# thousands of FMAs and the work is keeping the FP32 pipes busy. A language model generating
# text multiplies a handful of token rows `x` (M = 1 to 64) by a large weight matrix W: each
# element of W is read from DRAM for at most M FMAs, and the FMA pipes wait for memory. Such a
# product is **bandwidth-bound**: the best any kernel can do is read W once, at the speed of
# DRAM. Two stages are built for it:
#
# - stage 15, `skinny` (M <= 64): the large operand is B, streamed once along its rows; a
#   block's threads split B's columns and, in **k-groups**, its rows; the few rows of A wait in
#   SMEM;
# - stage 16, `skinny_n` (N <= 64): the mirror, a large A (M x K, row-major) times a few
#   columns of B. A can only be streamed along K, so the 32 lanes of a warp split a row's K and
#   combine their partial sums with **warp shuffles** (`shfl.sync`: a lane reads a register of
#   another lane of its warp, without SMEM).
#
# Both can also split K over the grid (split-K, notebook 06): the few output tiles of such a
# product are often too few to occupy every SM.
#
# Cells that run or check kernels run on the simulator or on a GPU, as the first output line
# says; every GPU number (times, rates, profiles, SASS) comes from the H200 benchmark run stored in
# the repository (`bench/results/nvidia-h200/2026-11-27-notebooks/`, its GPU and repeats printed
# below).

# %%
import json
import re
from collections import Counter

import _figures_bandwidth as fb
import _helpers as h
import numpy as np
from numba import cuda

import numba_gemm
from numba_gemm.device import SMEM_OPTIN_LIMIT, WARP_SIZE, DeviceInfo
from numba_gemm.kernels import k15_skinny as k15
from numba_gemm.kernels import k16_skinny_n as k16
from numba_gemm.tools.bench.runner import SKIP_FACTOR

print("outputs from:", h.machine())
sk, skn = numba_gemm.get_stage("skinny"), numba_gemm.get_stage("skinny_n")
meta, rows = h.results()
peaks = h.gpu_peaks()
# the GPU of the stored benchmark run, for the plans below (plan_for prices shapes for a device)
gpu = DeviceInfo(
    id=0, name=meta["gpu"], cc=peaks["cc"], sm_count=peaks["sms"], smem_optin=SMEM_OPTIN_LIMIT
)
# the stored run's products with few rows or few columns
SKINNY = [tuple(s) for s in meta["sizes"] if min(s[0], s[1]) <= 64 < max(s[0], s[1])]
# the short legend of every GPU number below
RUN = f"{meta['gpu'].removeprefix('NVIDIA ')}, median of {meta['reps']}"
print(f"GPU numbers: the stored run ({RUN} repeats), {h.RUN_DIR.relative_to(h.ROOT)}")
print("its few-row / few-column products (M x N x K):", SKINNY)

# %% [markdown]
# ## Arithmetic intensity: FLOP per byte
#
# A product `C = A @ B` with A `(M, K)`, B `(K, N)` and C `(M, N)` does `2 M N K` floating-point
# operations (a multiply and an add per term) and must at least read A and B once and write C
# once: `4 (M K + K N + M N)` bytes in float32. Their ratio is the product's **arithmetic
# intensity**. For N = K and M much smaller, `M K` and `M N` are small beside `K N` and the
# intensity is about `M / 2` FLOP per byte: each 4-byte element of B feeds `M` multiply-adds.
#
# The GPU has two ceilings. Its FP32 peak is `SMs x FMA per clock per SM x 2 x clock`: SM count
# and clock from the stored run's `results.json`, 128 FP32 FMA per clock per SM for compute
# capability 9.0 from the CUDA C++ Programming Guide ("Arithmetic Instructions", throughput of
# 32-bit floating-point multiply-add). Its DRAM (HBM) bandwidth is the datasheet figure that
# `_helpers.DRAM_BYTES_PER_S` records (NVIDIA's H200 datasheet, "GPU memory bandwidth", H200
# SXM); docs/design.md §1 records 4.3 TB/s measured for a device-to-device copy on the H200,
# against that datasheet's 4.8 TB/s: the datasheet figure is a roof, not a rate a kernel can
# expect. A kernel needs at least `FLOP / peak` seconds
# for its arithmetic and `bytes / bandwidth` for its traffic; whichever is longer bounds it. The
# two are equal at the **ridge** intensity `peak / bandwidth`.

# %%
ridge = peaks["flops"] / peaks["bytes_per_s"]
print(
    f"{peaks['gpu']}: FP32 peak = {peaks['sms']} SMs x {peaks['fma_per_clock_per_sm']} FMA/clock "
    f"x 2 FLOP x {peaks['clock_hz'] / 1e9:.2f} GHz = {peaks['flops'] / 1e12:.1f} TFLOP/s; "
    f"HBM {peaks['bytes_per_s'] / 1e12:g} TB/s; ridge {ridge:.1f} FLOP/byte\n"
)


def intensity(M, N, K):
    """FLOP, minimum DRAM bytes (A, B read once, C written once; float32) and their ratio."""
    flop = 2 * M * N * K
    moved = 4 * (M * K + K * N + M * N)
    return flop, moved, flop / moved


print(
    f"{'M x N x K':>16} {'GFLOP':>7} {'MB':>7} {'FLOP/B':>7} {'FMA floor':>10} {'byte floor':>11}"
)
for shape in [*SKINNY, (4096, 4096, 4096)]:
    flop, moved, ai = intensity(*shape)
    t_fma, t_bytes = flop / peaks["flops"], moved / peaks["bytes_per_s"]
    bound = "bandwidth" if t_bytes > t_fma else "compute"
    print(
        f"{'x'.join(map(str, shape)):>16} {flop / 1e9:7.3f} {moved / 1e6:7.1f} {ai:7.1f} "
        f"{t_fma * 1e6:7.1f} us {t_bytes * 1e6:8.1f} us  -> {bound}-bound by "
        f"{max(t_fma, t_bytes) / min(t_fma, t_bytes):.0f}x"
    )
cross = next(m for m in range(1, 4097) if intensity(m, 4096, 4096)[2] >= ridge)
print(f"\nM x 4096 x 4096 reaches the ridge at M = {cross}")

# %% [markdown]
# A single row (a GEMV, matrix-vector product) sits far to the left of the ridge: its FMA
# floor is a small fraction of its byte floor. The run's other few-row and few-column products
# (the rows of the table above with M or N above 1) are closer, but their byte floor is still the
# larger one. The limit of `skinny` (64 rows) lies
# past the ridge: there the product is no longer bound by bytes in the roofline's sense, and
# which kernel wins is the planner's question (below).
#
# ## The roofline
#
# The roofline (Williams, Waterman and Patterson, "Roofline", CACM 2009) draws both ceilings at
# once: attainable GFLOP/s = `min(peak, intensity x bandwidth)`. On it, the stored run's kernel
# times: the FP32 tiled stages 1-10 and cuBLAS at 4096-cubed, far right and under the flat roof;
# at the few-row and few-column products, the two stages of this notebook, stage 9
# `double_buffering` (the tiled workhorse) and cuBLAS FP32, all on the slanted roof's side, where
# the only way up is more bytes per second. Colour is the implementation, marker the product: a
# 16-row and a 16-column product of the same sizes have the same intensity, so they share an x;
# cuBLAS is drawn as an outline, over a point of about the same rate.
# Each point's x is the product's intensity from the byte model above (the minimum traffic), not
# the traffic its kernel measured: a kernel that reads an operand twice sits, in truth, further
# left. The cell prints every point; the plot labels only the slowest and fastest tiled stage at
# 4096-cubed, and the stages the run did not time there (with the bench's reason).

# %%
TILED = [s.name for s in numba_gemm.STAGES if s.precision == "fp32" and s.general]


def own_stage(shape):
    """The stage of this notebook that takes the shape (few rows: skinny, else skinny_n)."""
    return "skinny" if sk.supports(*shape) else "skinny_n"


def xname(shape):
    return "x".join(map(str, shape))


sq = (4096, 4096, 4096)
IMPLS = {  # implementation (a colour) -> [(stage, shape), ...]
    "FP32 tiled stages 1-10": [(s, sq) for s in TILED],
    "skinny / skinny_n (15, 16)": [(own_stage(s), s) for s in SKINNY],
    "double_buffering (9)": [("double_buffering", s) for s in SKINNY],
    "cuBLAS FP32": [(h.CUBLAS, s) for s in [*SKINNY, sq]],
}
points, untimed = [], []
print(f"{'implementation':<28} {'stage':<19} {'M x N x K':>14} {'FLOP/B':>7} {'GFLOP/s':>8}")
for impl, runs in IMPLS.items():
    for stage, shape in runs:
        r = h.result(stage, shape)
        if r is None or not r["gflops"]:
            untimed.append((stage, shape, r["status"] if r else "no row"))
            continue
        ai = intensity(*shape)[2]
        p = dict(x=ai, y=r["gflops"], impl=impl, shape=xname(shape), stage=stage)
        points.append(dict(p, hollow=stage == h.CUBLAS))  # cuBLAS: an outline, on top
        print(f"{impl:<28} {stage:<19} {xname(shape):>14} {ai:7.1f} {r['gflops']:8,.0f}")
skip_ms = SKIP_FACTOR * meta["max_ms"]
for stage, shape, status in untimed:
    print(
        f"not timed: {stage} at {xname(shape)}, {status}: the bench's one estimating call took "
        f"over SKIP_FACTOR x --max-ms = {SKIP_FACTOR} x {meta['max_ms']:g} = {skip_ms:g} ms"
    )
at_sq = [p for p in points if p["impl"] == "FP32 tiled stages 1-10"]
label = {id(min(at_sq, key=lambda p: p["y"])), id(max(at_sq, key=lambda p: p["y"]))}
for p in points:  # only the slowest and fastest tiled stage at 4096^3 are labelled
    p["note"] = numba_gemm.get_stage(p["stage"]).label if id(p) in label else ""
missing = ", ".join(f"{numba_gemm.get_stage(st).label}" for st, shape, _ in untimed if shape == sq)
fb.plot_roofline(
    peaks,
    points,
    f"FP32 roofline, {RUN}, kernel time",
    footnote=(intensity(*sq)[2], f"not timed at {xname(sq)}:\n{missing}") if missing else None,
)

# %% [markdown]
# ## Stage 15, `skinny`: B streamed once
#
# The tile of this stage is `MT x BN`: `MT` rows of C (all of M when M <= MT) by `BN` columns.
# The work of a block is split three ways:
#
# - **columns**: each thread owns four consecutive columns of C, so each of its loads of B is one
#   128-bit load of four floats of one row; `CG = BN / 4` threads cover a row of the block's B
#   tile (the scalar variant, for rows not 16-byte aligned, spreads a thread's four columns `G`
#   apart, so that each 32-bit load of a warp still reads consecutive floats);
# - **rows of B within a block**: the `KG = THREADS / CG` groups of `CG` threads (the
#   **k-groups**) walk interleaved rows of B: in each chunk of `KC` rows, k-group `g` loads rows
#   `g, g + KG, g + 2 KG, ...`, `KSTEP = KC / KG` independent 128-bit loads per thread, all
#   issued before the FMAs that use them, so that many loads are in flight;
# - **K over the grid**: `SPLITK` blocks share each column tile, each on its own slice of K (grid
#   z), because `N / BN` blocks alone cannot keep every SM busy.
#
# A is small: it is staged in SMEM (`As[k, m]`) a **super-chunk** of `KS` columns at a time (as
# many as fit the module's `A_SMEM` bytes), so that the stream of B passes a barrier only once
# per super-chunk, and every lane of a warp reads the same element of A (a broadcast). Each
# thread keeps `MT x 4` accumulators over its rows of K. At the end, the k-groups' partial sums
# meet in SMEM and are added; with split-K, each slice then writes its partial tile to a
# workspace and the tile's last slice to finish sums them into C (the one-kernel split-K of
# notebook 06).
#
# The kernel, as `h.kernel_function` returns it for the default configuration, with its phases
# ruled (`# ---`). Four switches are compile-time constants of the configuration and layout, so
# only one path of the K loop is compiled. They depend on the tile's rows `MT`, a constant of the
# configuration, not on the product's M (a 16-row product may run on a tile of 8 rows, two row
# blocks):
#
# - `EARLY_B` (a tile of one row, `MT = 1`: a GEMV): the first B chunk of each super-chunk is
#   loaded before A is staged, so that the two DRAM round trips overlap;
# - `PIPE` (a tile of 2 to 8 rows, `2 <= MT <= 8`): each chunk goes in two halves, the loads of
#   the next half issued
#   before the FMAs of this one, behind `issue_fence` (a `__syncwarp()` that the compiler does
#   not move loads across), so that a warp always has loads of B in flight;
# - `NBUF > 0`: B does not pass through registers but through a ring of `NBUF` chunks in SMEM,
#   filled by `cp.async` (the ring of notebook 05, applied to B);
# - `BT`: B stored transposed (`x @ W.T`, a `torch.nn.Linear` weight), read four k at a time.
#
# Otherwise (for instance the default configuration: its `MT`, printed below) a chunk's loads
# are all issued, then its FMAs run. The two statements of `_make_kernel` that set the first two
# switches, then the kernel:

# %%
h.show_statement(k15._make_kernel, "EARLY_B = MT == 1 and not NBUF and not BT")
h.show_statement(k15._make_kernel, "PIPE = not NBUF and not BT and 2 <= MT <= 8 and KSTEP % 2 == 0")
print(f"default configuration: {h.describe(sk.config)} (MT = {sk.config['MT']})\n")
h.show_source(sk)


# %% [markdown]
# The loops call device functions that `_make_kernel` built for the configuration. Their own
# source, read from the kernel's closure (`unroll(n, body)` from `kernels/_common.py` builds a
# device function that calls `body(0, ...) ... body(n - 1, ...)` with each index a compile-time
# constant; `step_of` finds that `body`):


# %%
def captured(fn):
    """The variables a closure (a kernel or device function built by a factory) captured."""
    fn = getattr(fn, "py_func", fn)
    cells = [c.cell_contents for c in fn.__closure__ or ()]
    return dict(zip(fn.__code__.co_freevars, cells, strict=True))


def step_of(unrolled):
    """The step function ``body`` of a device function built by ``_common.unroll``."""
    free = captured(unrolled)
    return free["body"] if "body" in free else step_of(free["first"])


k15_fns = captured(h.kernel_function(sk))
SWITCHES = ("EARLY_B", "PIPE", "NBUF", "BT", "SPLITK")
print(f"default configuration, MT = {sk.config['MT']}:", {k: k15_fns[k] for k in SWITCHES})
h.show_source(step_of(k15_fns["load_chunk"]))  # GMEM -> registers: row j of a thread's chunk
h.show_source(step_of(captured(step_of(k15_fns["fma_chunk"]))["fma_rows"]))  # A x B -> sums
h.show_source(step_of(k15_fns["reduce_store"]))  # the k-groups' sums, then C

# %% [markdown]
# In `_pass`, `store_c4` writes the four consecutive columns a thread has summed with one
# 128-bit store when C's rows are 16-byte aligned (`CVEC`: the vector variant).
#
# ### Who reads which part of B
#
# The picture uses the configuration that `sgemm`'s plan picks for 16 x 4096 x 4096 on the
# stored run's GPU (the plan is explained below), and the stage module's own `derived`
# constants. The thread map is the kernel's: `cg = tid % CG`, `kg = tid // CG`, columns
# `4 cg .. 4 cg + 3` (the vector variant), rows `kg + j KG` of each chunk. Its tile's `MT`, not
# the product's 16 rows, sets the switches: the printed ones differ from the default's above
# when the two tiles' `MT` do.

# %%
shape15 = (16, 4096, 4096)
cfg15 = dict(numba_gemm.plan_for(*shape15, device=gpu).stage.config)
d15 = k15.derived(cfg15)
print(f"{'x'.join(map(str, shape15))}: {h.describe(cfg15)}")
print({k: d15[k] for k in ("CG", "KG", "KSTEP", "RM", "KS")})


def skinny_thread(tid):  # kernel: cg = tid % CG; kg = tid // CG; c = 4 * cg (G = 1, vector)
    return tid // d15["CG"], 4 * (tid % d15["CG"])


def skinny_loader(k, q):  # _load: chunk row k = kg + j * KG, columns 4 * cg .. 4 * cg + 3
    return (k % d15["KG"]) * d15["CG"] + q


M, N, K = shape15
S, KC = cfg15["SPLITK"], cfg15["KC"]
per = ((K + S - 1) // S + KC - 1) // KC * KC  # _tunable.block_work: whole chunks per K slice
per_thread = cfg15["MT"] * 4
pick15 = captured(h.kernel_function(numba_gemm.plan_for(*shape15, device=gpu).stage))
print(f"compile-time switches of this configuration, MT = {cfg15['MT']}:")
print({k: pick15[k] for k in SWITCHES})
print(
    f"per thread: {d15['KSTEP']} 128-bit loads of B per chunk, {per_thread} "
    f"accumulators; a warp's load covers {min(32, d15['CG']) * 16} contiguous bytes of a row of B"
    f"\nper block: its {cfg15['BN']} columns x {per} rows of K ({per // cfg15['KC']} chunks of "
    f"{cfg15['KC']})"
)
fb.draw_skinny(cfg15, d15, shape15, skinny_thread, skinny_loader, per)

# %% [markdown]
# ## Stage 16, `skinny_n`: A streamed once
#
# With few columns the large operand is A, `(M, K)` row-major: contiguous along K. To read it
# with full 128-bit loads the lanes must split K. A warp owns `RW` rows of A and C; lane `l`
# reads `A[m, k + 4 l : k + 4 l + 4]`, so one load of the warp covers 512 contiguous bytes of a
# row, and a chunk of `KC` columns is `KSTEP = KC / 128` such loads per row. The block's `NB`
# columns of B are staged in SMEM per chunk, **transposed** (`Bs[n, k]`): a lane's four k of
# column n are one 128-bit SMEM read, reused for each of the warp's `RW` rows. The next
# chunk's loads are issued before this chunk's FMAs (two register buffers, `areg` and `areg2`,
# as stage 9 does with its tiles).
#
# Each lane ends with `V = RW x NB` partial sums, each over its own k only: every output is a
# sum over the 32 lanes. A butterfly of shuffles on each sum would take `5 x V` shuffles. The
# stage uses a **reduce-scatter** instead: at each of five exchanges (lane `l` with `l ^ 16`,
# then `^ 8`, ...) a lane keeps half of the values it holds, sends the other half and adds
# what its partner sent for the kept half. Once a lane holds one value, partners add each other's
# (a butterfly on what is left). Each lane ends holding the totals of `V / 32` outputs (one,
# when `V <= 32`), and writes them.

# %%
h.show_source(skn)
k16_fns = captured(h.kernel_function(skn))
h.show_source(k16_fns["chunk"])  # one chunk: next chunk's loads, this chunk's FMAs, B to SMEM
h.show_source(step_of(k16_fns["load_a"]))  # GMEM -> registers: a lane's float4s of A
h.show_source(k16._halve)  # one exchange of the reduce-scatter

# %% [markdown]
# `lane_sums_owned` is the index map of the reduce-scatter: which sums a lane holds at the end,
# and whether it writes them (with fewer than 32 sums, several lanes end with copies of the same
# totals and only one writes). The kernel compiles this same Python function
# (`_lane_sums_owned = device_jit(lane_sums_owned)`).

# %%
h.show_source(k16.lane_sums_owned)

# %% [markdown]
# ### Who reads which part of A
#
# The configuration the skinny_n class holds for 4096 x 16 x 4096 (`plan_for(..., stage=...)`),
# with the module's `derived` constants.
# The lane map is the kernel's: warp `w` owns rows `w RW .. w RW + RW - 1` of the block, lane `l`
# loads float4 column `l + 32 j` of each of them in every chunk.

# %%
shape16 = (4096, 16, 4096)
cfg16 = dict(numba_gemm.plan_for(*shape16, stage="skinny_n", device=gpu).stage.config)
d16 = k16.derived(cfg16)
print(f"{'x'.join(map(str, shape16))}: {h.describe(cfg16)}")
print({k: d16[k] for k in ("NW", "BM", "KSTEP", "V", "BP")})
print(
    f"per lane and chunk: RW x KSTEP = {cfg16['RW'] * d16['KSTEP']} 128-bit loads of A, "
    f"V = RW x NB = {d16['V']} partial sums; grid of {-(-shape16[0] // d16['BM'])} row blocks "
    f"x {-(-shape16[1] // cfg16['NB'])} column block(s) x SPLITK {cfg16['SPLITK']}"
)


def skinny_n_lane(r, q):  # row0 = m0 + warp * RW; lane loads A[row0 + r, 4 * lane + 128 * j]
    return r // cfg16["RW"], q % WARP_SIZE


fb.draw_skinny_n(cfg16, d16, skinny_n_lane)

# %% [markdown]
# ### The reduce-scatter, step by step
#
# The loop of `lane_sums_owned` stopped after `s` exchanges says what a lane holds at that
# point; the assertion ties this small model to the package's function at the last step. The
# shuffle count per lane follows from it: a step while a lane holds `L >= 2` values sends
# `L / 2` of them, a butterfly step sends one.

# %%
V = d16["V"]


def held(lane, steps):  # lane_sums_owned's loop, stopped after `steps` exchanges
    first, length = 0, V
    for s in range(steps):
        if length >= 2:
            length //= 2
            if lane & (16 >> s):
                first += length
    return first, length


assert all(held(ln, 5) == k16.lane_sums_owned(V, ln)[:2] for ln in range(WARP_SIZE))
shuffles = sum(held(0, s)[1] // 2 if held(0, s)[1] >= 2 else 1 for s in range(5))
print(
    f"reduce-scatter of V = {V} sums over 32 lanes: {shuffles} shuffles per lane, against "
    f"5 x {V} = {5 * V} for a butterfly on each sum; each lane ends with {held(0, 5)[1]} "
    "total(s)"
)
fb.draw_reduce_scatter(V, held)

# %% [markdown]
# ## What the compiler made of it: SASS
#
# The stored run also holds each stage's **default** kernel (its default configuration, the
# vector variant, row-major B) as SASS, the GPU's machine code (`h.sass`: its PTX through `ptxas`
# for sm_90, then `nvdisasm`). These are not the configurations the plan picks at the run's
# products (above and below). The default `skinny` tile has the `MT` printed below, so neither
# `EARLY_B` nor `PIPE` is compiled in (the switches printed with the kernel above): these counts
# say nothing about the paths of the picked configurations.
# Counting its instructions checks the design against the code the GPU runs: `LDG.E.128` is a
# 128-bit global load, `LDG.E` a 32-bit one, `LDGSTS.E` a `cp.async` copy, `LDS`/`STS` SMEM loads
# and stores, `STG` global stores, `SHFL.BFLY` a butterfly shuffle (`shfl.sync.bfly`), `FFMA` an
# FP32 fused multiply-add, `BAR.SYNC` a `syncthreads`.


# %%
def sass_ops(stage):
    """Instruction counts of the stage's default kernel in the stored SASS, by mnemonic."""
    ops = Counter()
    for line in h.sass(stage).splitlines():
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", line)
        if m:
            ops[m.group(1)] += 1
    return ops


OPS = ("LDG.E.128", "LDG.E", "LDGSTS.E", "LDS.128", "LDS", "STS.128", "STS", "STG.E.128", "STG.E")
OPS += ("SHFL.BFLY", "FFMA", "BAR.SYNC.DEFER_BLOCKING")
ops = {st.name: sass_ops(st.name) for st in (sk, skn)}
print("SASS of the default kernels:")
for st in (sk, skn):
    print(f"  {st.name}: {h.describe(st.config)}")
print(f"\n{'instruction':<24} {'skinny':>8} {'skinny_n':>9}")
for op in OPS:
    print(f"{op:<24} {ops['skinny'][op]:>8} {ops['skinny_n'][op]:>9}")

c15, e15 = sk.config, k15.derived(sk.config)
c16, e16 = skn.config, k16.derived(skn.config)
ffma15 = e15["KSTEP"] * c15["MT"] * 4  # a chunk: KSTEP rows of B x MT rows of A x 4 columns
ffma16 = 2 * e16["KSTEP"] * c16["RW"] * c16["NB"] * 4  # two chunks per turn of the K loop
held16 = e16["V"]
shfl16 = 0
for _ in range(5):  # the shuffle model of the reduce-scatter, at the default V
    shfl16 += held16 // 2 if held16 >= 2 else 1
    held16 = max(held16 // 2, 1)
print(
    f"\nskinny default ({h.describe(c15)}): the K loop's FFMA per chunk = KSTEP x MT x 4 = "
    f"{ffma15}\nskinny_n default ({h.describe(c16)}): FFMA per turn (two chunks) = "
    f"2 x KSTEP x RW x NB x 4 = {ffma16}; reduce-scatter of V = {e16['V']} sums: {shfl16} "
    "shuffles"
)

# %% [markdown]
# The SASS of the default kernels agrees with the design:
#
# - `skinny` reads B with 128-bit loads only (no `LDG.E`); A arrives by 4-byte `cp.async`
#   copies (`LDGSTS.E`), read back as 128-bit SMEM broadcasts (`LDS.128`: four rows of A at one
#   k); the partial tiles and C leave four columns per store (`STG.E.128`; the one `STG.E`
#   resets split-K's tile counter);
# - `skinny_n` reads A with 128-bit loads only, and its reduce-scatter is exactly the model's
#   number of butterfly shuffles; each lane stores its own totals with a 32-bit store (one
#   `STG.E`, the other resets the tile counter), and the split-K sum of the slices writes C four
#   columns at a time (`STG.E.128`);
# - almost every `FFMA` is in the K loop, compiled once per turn: one chunk in `skinny`, the two
#   chunks of a turn in `skinny_n` (two register buffers). The few others are the epilogue's
#   `alpha * sum + beta * C`.

# %% [markdown]
# ## Run and check
#
# Each stage declares the shapes it takes (`supports`, described by `limits`): the planner never
# offers it another. Each stage's default configuration is checked against a float64 NumPy
# product, into a C poisoned with NaN first, on a ragged shape (the scalar-GMEM variant) and on
# one with 16-byte aligned rows (the 128-bit variant), as `numba_gemm.explain` reports: tiny
# shapes on the simulator, which runs each GPU thread as a Python thread, 4096-class ones on a
# GPU.

# %%
for st in (sk, skn):
    print(f"{st.name}: {st.limits}; 4096^3 supported: {st.supports(4096, 4096, 4096)}")
if h.simulator():  # tiny: each GPU thread is a Python thread
    CHECKS = {"skinny": [(5, 37, 45), (4, 36, 44)], "skinny_n": [(37, 5, 45), (36, 4, 44)]}
else:
    CHECKS = {"skinny": [(5, 4095, 4095), (16, 4096, 4096)]}
    CHECKS["skinny_n"] = [(n, m, k) for m, n, k in CHECKS["skinny"]]
for st in (sk, skn):
    for M, N, K in CHECKS[st.name]:
        d_a, d_b = cuda.device_array((M, K), np.float32), cuda.device_array((K, N), np.float32)
        print(f"{M}x{N}x{K}: {numba_gemm.explain(d_a, d_b, stage=st).variant} variant")
        h.check_stages([st], M, N, K)

# %% [markdown]
# The GPU runs other configurations than the defaults: the tuned ones the plan picks at each of
# the stored run's products (next section). Each of them, checked at that product on a GPU, and on
# the simulator on a tiny ragged shape, which runs the same structure (threads, k-groups, the
# `cp.async` ring, split-K) on fewer blocks.

# %%
picked = {}
for shape in SKINNY:
    st = numba_gemm.plan_for(*shape, device=gpu).stage
    if st.name in ("skinny", "skinny_n"):
        picked.setdefault((st.name, tuple(sorted(st.config.items()))), (st, shape))
for st, shape in picked.values():
    print(f"picked at {'x'.join(map(str, shape))}: {h.describe(st.config)}")
    tiny = (5, 37, 300) if st.name == "skinny" else (37, 5, 300)
    h.check_stages([st], *(tiny if h.simulator() else shape))

# %% [markdown]
# ## What `sgemm` picks
#
# `numba_gemm.plan_for(M, N, K)` is what `sgemm` calls for the automatic choice (notebook 06). It
# is asked here for the GPU of the stored run, at the run's products and at the limits of
# the two stages (64 and 65 rows, 64 and 65 columns). `predicted` is the plan's own price; the
# last line of each product is what the benchmark's `auto` row ran and measured there.
#
# The plan prices candidates from tuning data (notebook 06): a product measured in a sweep (a
# "measured shape") is priced from the candidates that sweep found fastest, others from their
# shape class. Its reason says which.

# %%
for shape in [*SKINNY, (64, 4096, 4096), (65, 4096, 4096), (4096, 64, 4096), (4096, 65, 4096)]:
    p = numba_gemm.plan_for(*shape, device=gpu)
    print(
        f"{'x'.join(map(str, shape)):>14}: {p.stage.name} {h.describe(p.stage.config)}, "
        f"{p.variant} variant, predicted {p.predicted_ms * 1e3:.1f} us\n{'':16}why: "
        f"{p.reason.split(';')[0].replace(f'{h.ROOT}/', '')}"
    )
    r = h.result("auto", shape)
    if r is not None and r["median_ms"]:
        print(f"{'':16}bench auto: {h.describe(r['config'])}, {r['median_ms'] * 1e3:.1f} us")

# %% [markdown]
# At the run's products the plan runs this notebook's stages, in the configuration the
# benchmark's `auto` row ran, and its predictions land close to the measured times. (Before a fix
# to the pricing of split-K candidates tuned with the spread sum, docs/design.md §4.17, the plan
# ran multistage's 32-column tile at 4096 x 16 x 4096, priced 39.7 us where it had taken 45.0.)
# At 64 rows or 64 columns, inside the stages' limits, it runs a tiled stage with split-K
# instead: past the ridge (the first section), the candidates its data prices cheapest there are
# tiled ones. From 65 rows or columns on, only the tiled stages are offered.
#
# ## Measured on the GPU
#
# The stored run times every stage at every product it takes: kernel time for all, and the
# public call `sgemm(a, b, out=c)` back to back for the automatic choice (`auto`, end to end),
# as for cuBLAS FP32 (`torch.mm`, TF32 off). For a bandwidth-bound product GFLOP/s is the wrong
# yardstick; the rate at which the kernel moves the product's bytes is the right one. **Achieved
# GB/s** below = the minimum bytes of the product (A and B read once, C written once, the byte
# model above) / kernel time, and its share of the HBM peak.
#
# A grid may request the large operand more than once: each of `skinny`'s `cdiv(M, MT)` row
# blocks streams all of B, each of `skinny_n`'s `cdiv(N, NB)` column blocks all of A. The column
# `passes` says how many times the configuration that ran does so; whether a repeated pass comes
# from DRAM or from L2 the timing cannot tell, and the GB/s column counts the minimum either way:
# the work the product needs.
#
# Rows per product: this notebook's stage (its tuned configuration for the shape), `auto`
# (`sgemm`'s choice), the fastest of the FP32 tiled stages 1-10 at that product, and cuBLAS FP32.


# %%
def passes(shape, cfg):
    """How many times the grid streams the large operand (B for skinny, A for skinny_n)."""
    M, N, _ = shape
    if "MT" in cfg:
        return -(-M // cfg["MT"])
    return -(-N // cfg["NB"]) if "NB" in cfg else None


print(f"{RUN}, kernel time; HBM peak {peaks['bytes_per_s'] / 1e12:g} TB/s")
print(
    f"{'M x N x K':>14} {'implementation':<34} {'us':>6} {'GFLOP/s':>8} {'% cuBLAS':>9} "
    f"{'GB/s':>6} {'% HBM':>6} {'passes':>6}"
)
table, repeated = [], []
for shape in SKINNY:
    flop, moved, _ = intensity(*shape)
    ok = [h.result(s, shape) for s in TILED]
    ok = [r for r in ok if r is not None and r["median_ms"]]
    best = min(ok, key=lambda r: r["median_ms"])["stage"] if ok else None
    for name, what in (
        (own_stage(shape), f"{own_stage(shape)} (this notebook)"),
        ("auto", "auto"),
        (best, f"fastest tiled: {best}"),
        (h.CUBLAS, "cuBLAS FP32"),
    ):
        r = h.result(name, shape) if name else None
        if r is None or not r["median_ms"]:
            print(f"{'x'.join(map(str, shape)):>14} {what:<34} {r['status'] if r else '-'}")
            continue
        gbs = moved / (r["median_ms"] * 1e-3) / 1e9
        cfg = json.loads(r["config"]) if r["config"] else {}
        n_pass = passes(shape, cfg)
        if name == own_stage(shape) and n_pass and n_pass > 1:
            M, N, K = shape
            large = 4 * K * (N if name == "skinny" else M)  # B (skinny) or A (skinny_n)
            repeated.append((shape, name, n_pass, (moved + (n_pass - 1) * large) / moved * gbs))
        e2e = h.result(name, shape, "end_to_end")
        table.append(
            dict(
                shape="x".join(map(str, shape)),
                impl="skinny / skinny_n" if name == own_stage(shape) else what.split(":")[0],
                gbs=gbs,
                kernel_us=r["median_ms"] * 1e3,
                e2e_us=e2e["median_ms"] * 1e3 if e2e and e2e["median_ms"] else None,
            )
        )
        pct = f"{r['pct_cublas']:.0%}" if r["pct_cublas"] else "-"
        print(
            f"{'x'.join(map(str, shape)):>14} {what:<34} {r['median_ms'] * 1e3:6.1f} "
            f"{r['gflops']:8,.0f} {pct:>9} {gbs:6,.0f} {gbs * 1e9 / peaks['bytes_per_s']:6.0%} "
            f"{n_pass or '':>6}"
        )
for shape, name, n_pass, req in repeated:  # the GB/s of the bytes the grid requests
    print(
        f"\n{name} at {xname(shape)}: its grid streams the large operand {n_pass} times; counting "
        f"every pass, {req:,.0f} GB/s = {req * 1e9 / peaks['bytes_per_s']:.0%} of the HBM peak"
    )

# %% [markdown]
# What the table shows. With one row (a GEMV), `skinny` and cuBLAS FP32 both stream the weight
# at a large share of the HBM peak and run neck and neck: the byte floor is the whole story, and
# the only gain left is in the rate. With 16 rows, cuBLAS FP32 runs far below the bandwidth roof
# (its kernel is no faster than the best tiled stage here). `skinny` is well ahead of it there,
# the largest gain of this notebook, but it too stays well below the GEMV's share of the HBM
# peak (the `% HBM` column): the configuration the plan picked has a tile of fewer rows than the
# product (the `passes` column), so its grid streams B more than once, and the GB/s column counts
# B once. Counting every pass (the last line), its rate of requested bytes is no lower a share
# of the peak than the GEMV's: the gap in the `% HBM` column is the repeated pass, not a slower
# stream. Whether a repeated pass comes from DRAM or L2, the timing cannot tell. With 16 columns
# `skinny_n` is ahead of cuBLAS by less, at a lower share of the peak than the few-row products
# reach. The FP32 tiled stages 1-10, built for squares, are far behind at every one of these
# products.
#
# ### End to end: the public call
#
# The time a user sees per call includes what the host does around the kernel: the Python call,
# its checks, the plan lookup and the launch. The same run measured that host work alone (the
# wall clock of 500 back-to-back calls, read before synchronizing, at the sizes its `overhead`
# records). Per product, the kernel time and the end-to-end time per call of `auto` and of
# cuBLAS FP32:

# %%
overhead = json.loads((h.RESULTS_DIR / "results.json").read_text())["overhead"]
host = {(o["impl"], o["size"]): o["us_per_call"] for o in overhead}
for impl in ("sgemm-numba", "torch.mm"):
    got = {size: us for (i, size), us in host.items() if i == impl}
    print(
        f"host time per call, {impl:<12}: "
        + ", ".join(f"{us:.1f} us at {n}^3" for n, us in got.items())
    )
print(f"\n{'M x N x K':>14} {'':<12} {'kernel us':>9} {'e2e us':>7} {'e2e - kernel':>13}")
for shape in SKINNY:
    for name in ("auto", h.CUBLAS):
        k, e = h.result(name, shape), h.result(name, shape, "end_to_end")
        if not (k and e and k["median_ms"] and e["median_ms"]):
            continue
        ku, eu = k["median_ms"] * 1e3, e["median_ms"] * 1e3
        print(f"{'x'.join(map(str, shape)):>14} {name:<12} {ku:9.1f} {eu:7.1f} {eu - ku:10.1f} us")
fb.plot_bandwidth(
    table,
    peaks["bytes_per_s"],
    f"{RUN}: bandwidth from kernel time (left); kernel and end-to-end time per call (right)",
)

# %% [markdown]
# At these products the launch and host cost does not show: end to end, a call costs what its
# kernel costs, within about a microsecond either way (the two timings are taken differently,
# events around each launch against events around a loop, so the difference can come out
# negative). The host's work per call is shorter than each of these kernels, and a call returns
# once its kernel is queued: back to back, the host prepares call n + 1 while the GPU runs kernel
# n, and only the GPU's time remains. A product whose kernel is shorter than the host's time per
# call shows the opposite, the host's time instead of the kernel's; these products are not small
# enough for that.
#
# ## Nsight Compute
#
# The Nsight Compute profile of the stored run is taken at 4096 x 4096 x 4096, a product neither
# stage takes (`supports` above), so it holds no profile of them (the first line printed); it shows
# the roofline's other end instead. There the tiled kernels and cuBLAS read a small multiple of the
# minimum A + B bytes from DRAM (`DRAM read / (A + B)`), at a read rate of a few percent of the
# DRAM's peak (the `DRAM read rate` row, against the peak in the last row), while their SMs are
# busy: compute-bound, the opposite of this notebook's products. Nsight Compute reports each rate
# also as a share of its own peak for the GPU, so `rate / share` is a second source for the HBM
# peak; it agrees with the datasheet figure the roofline and the GB/s table use.

# %%
print("skinny, skinny_n in the profile:", [t for t in ("skinny", "skinny_n") if h.ncu_metrics(t)])
NCU_TARGETS = ["double_buffering", "multistage", h.CUBLAS]
Mp, Np, Kp = json.loads((h.RUN_DIR / "ncu" / "ncu.json").read_text())["size"]
a_and_b = 4 * (Mp * Kp + Kp * Np)  # the minimum DRAM reads: A and B once
ROWS = {
    "duration (us)": lambda t: h.ncu(t, "gpu__time_duration.sum") / 1e3,
    "DRAM read (MB)": lambda t: h.ncu(t, "dram__bytes_read.sum") / 1e6,
    "DRAM read / (A + B), times": lambda t: h.ncu(t, "dram__bytes_read.sum") / a_and_b,
    "DRAM read rate (GB/s)": lambda t: h.ncu(t, "dram__bytes_read.sum.per_second") / 1e9,
    "SM throughput, % of peak": lambda t: h.ncu(
        t, "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    ),
    "DRAM peak = rate / share (GB/s)": lambda t: (
        h.ncu(t, "dram__bytes_read.sum.per_second")
        / h.ncu(t, "dram__bytes_read.sum.pct_of_peak_sustained_elapsed")
        * 100
        / 1e9
    ),
}
gpu_name = RUN.split(",")[0]
print(f"Nsight Compute, one call at {Mp}x{Np}x{Kp} ({gpu_name}); A + B = {a_and_b / 1e6:.0f} MB")
print(f"{'':<32}" + "".join(f"{t:>18}" for t in NCU_TARGETS))
for label, f in ROWS.items():
    print(f"{label:<32}" + "".join(f"{f(t):18,.2f}" for t in NCU_TARGETS))
