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
# # 00 · The problem and its floors
#
# SGEMM computes `C = alpha * A @ B + beta * C` in single precision (FP32), with A of shape
# `(M, K)`, B `(K, N)` and C `(M, N)`, all row-major float32 arrays in GPU memory. `numba_gemm`
# does it with a ladder of CUDA kernels written in Python with Numba, from one thread per output
# element up to a pipelined, warp-tiled kernel that comes close to cuBLAS (NVIDIA's library of
# tuned linear-algebra kernels) on large products (the
# last plot of this notebook shows how close, size by size). These notebooks climb that ladder
# one rung at a time, with the package's own source, its own checks and its committed GPU
# measurements.
#
# This first notebook sets the target: how much arithmetic a GEMM is, how many bytes it must
# move at the least, what that allows on the GPU the measurements come from, and how close cuBLAS
# gets.
#
# Every notebook says first where its outputs come from. The committed `.ipynb` files are meant
# to be executed on a GPU (`python notebooks/execute.py`), where the runs use 4096-sized
# problems; CI executes the same cells under the Numba CUDA simulator (the kernels run on the CPU,
# thread by thread) on small shapes. The plots of GPU performance always read the committed
# benchmark files, whichever machine runs the notebook.

# %%
import _helpers as h
import numpy as np
from numba import cuda

import numba_gemm

print("outputs from:", h.machine())

# %% [markdown]
# ## The ladder
#
# `numba_gemm.STAGES` is the ordered registry of kernels; each stage is one module in
# `numba_gemm/kernels/` whose docstring says what changed from the previous rung. The notebooks
# follow it: 01 covers stages 1-2, 02 stage 3, 03 stages 4-5, 04 stages 6-7, 05 stages 8-10, and
# 06 the tuning and shape questions around those three. Stages 11-14 leave the FP32 FMA pipe for
# tensor cores with `mma.sync`: TF32 and 3xTF32 (`sgemm(..., compute="tf32")` or `"3xtf32"`) and
# FP16 (`numba_gemm.hgemm`): notebook 07. Stages 17-24 are Hopper's own instructions (`wgmma`,
# TMA, warp specialization): notebook 08. Stages 15-16 serve products with very few rows or
# columns, which memory bandwidth bounds, not arithmetic: notebook 09. (The terms of those later
# stages are explained in their notebooks; FMA, the fused multiply-add, is defined below.)

# %%
for s in numba_gemm.STAGES:
    doc = h.stage_module(s).__doc__.strip().splitlines()[0]
    print(f"{s.label:<28} {doc}")

# %% [markdown]
# ## A first call
#
# The public entry point is `numba_gemm.sgemm(a, b)` on device arrays. Without `stage=` it picks
# the kernel it predicts fastest for this GPU and shape; `numba_gemm.explain(a, b)` says which and
# why. Every notebook checks its kernels the same way: random float32 operands, an output filled
# with NaN first (an element a kernel forgets to write stays NaN), and the relative error
# `||C - ref|| / ||ref||` against the product computed by NumPy in float64.
#
# The checks use a ragged shape (`h.demo_shape()`: 4095 on a GPU, a few dozen on the simulator),
# on purpose: no dimension is a multiple of a tile size or of 4, so every check also runs the
# partly filled edge tiles and, from stage 6 on, the scalar-GMEM variant that the kernels fall
# back to when rows are not 16-byte aligned (notebook 04).
#
# The plan printed below names tile sizes and options (`BM`, `BN`, `BK`, `WM`, `WN`, `TM`, `TN`,
# `MINB`, `SPLITK`, `NBUF`...) that notebooks 02-06 define one by one; for now, read the stage
# name, the variant and the error check.

# %%
M, N, K = h.demo_shape()
rng = np.random.default_rng(0)
d_a = cuda.to_device(rng.standard_normal((M, K), dtype=np.float32))
d_b = cuda.to_device(rng.standard_normal((K, N), dtype=np.float32))
print(numba_gemm.explain(d_a, d_b))
h.check_stages([None], M, N, K)

# %% [markdown]
# ## FLOPs and bytes
#
# Each of the `M * N` elements of C is a dot product of length K: K multiplies and K adds, which
# the GPU fuses into K FMA (fused multiply-add) instructions. So a GEMM is `2 * M * N * K`
# floating-point operations (FLOP). This is the count every GFLOP/s figure in these notebooks
# uses.
#
# At the least, a kernel must read A and B once and write C once: `4 * (M*K + K*N + M*N)` bytes
# (with `beta = 0`; C is also read otherwise). The ratio of the two is the **arithmetic
# intensity**, FLOP per byte of DRAM traffic. For a square `N x N x N` product it is
# `2N^3 / 12N^2 = N / 6`: it grows with the size, because every input element takes part in N
# multiply-adds.
#
# The sizes below are those of the committed benchmark run.

# %%
peaks = h.gpu_peaks()
print("time floors in microseconds: FLOP / FP32 peak, bytes / DRAM bandwidth; and cuBLAS FP32")
print(
    f"{'N':>6} {'GFLOP':>9} {'MB moved':>9} {'FLOP/B':>7} {'at FP32 peak':>13} "
    f"{'at DRAM BW':>11} {'cuBLAS FP32':>12}"
)
for n in h.square_sizes():
    flop, nbytes = 2 * n**3, 4 * 3 * n * n
    r = h.result(h.CUBLAS, n)
    print(
        f"{n:>6} {flop / 1e9:>9.3g} {nbytes / 1e6:>9.3g} {flop / nbytes:>7.0f} "
        f"{flop / peaks['flops'] * 1e6:>13.3g} {nbytes / peaks['bytes_per_s'] * 1e6:>11.3g}"
        f" {r['median_ms'] * 1e3:>12.3g}"
    )

# %% [markdown]
# ## Where the data lives
#
# A GEMM's operands start in the GPU's DRAM (HBM) and must reach the registers of the threads
# that multiply them. Every level on the way is smaller and faster than the one below it; the
# whole ladder is about loading each value from a slow level once and reusing it many times from
# a faster one. The sizes are those of the GPU of the committed run, from NVIDIA's documents:
# the *NVIDIA H100 Tensor Core GPU Architecture* whitepaper (the H200 is the same GH100 chip with
# more and faster memory; per SM: 65,536 32-bit registers,
# 256 KB of combined L1 cache and shared memory, of which up to 228 KB can be shared memory;
# 50 MB of L2 cache) and the *NVIDIA H200 Tensor Core GPU* datasheet (141 GB of HBM3e at
# 4.8 TB/s). Shared memory has 32 banks, each serving 4 bytes per clock (CUDA C++ Programming
# Guide, "Shared Memory"), so an SM reads at most 128 bytes of it per clock: the GPU-wide rate
# below is that times the SMs and the clock.

# %%
smem_bytes_per_s = 32 * 4 * peaks["sms"] * peaks["clock_hz"]
levels = [  # (name, where, capacity, rate)
    ("registers", "per SM", "65,536 x 4 B = 256 KB", "operands of every FMA, every clock"),
    (
        "shared memory / L1",
        "per SM",
        "256 KB (up to 228 KB shared)",
        f"128 B/clock/SM = {smem_bytes_per_s / 1e12:.0f} TB/s in all",
    ),
    ("L2 cache", "whole GPU", "50 MB", "(not published)"),
    ("DRAM (HBM3e)", "whole GPU", "141 GB", f"{peaks['bytes_per_s'] / 1e12:.1f} TB/s"),
]
h.draw_memory_hierarchy(levels, peaks)

# %% [markdown]
# ## The roofline of the GPU the results come from
#
# Two rates bound any kernel: the FP32 peak (every SM issuing FMAs every clock) and the DRAM
# bandwidth. A kernel with arithmetic intensity `I` can at most reach
# `min(peak, I * bandwidth)`: below the *ridge point* `peak / bandwidth` it is memory-bound, above
# it compute-bound. The peak follows from the number of SMs and the clock recorded with the
# committed results (`results.json`) and the FP32 FMA rate per SM of the architecture: 128 FP32
# multiply-adds per clock per SM for compute capability 9.0 (CUDA C++ Programming Guide,
# "Arithmetic Instructions"). The bandwidth is the H200 datasheet's.

# %%
print(f"GPU: {peaks['gpu']} (compute capability {peaks['cc'][0]}.{peaks['cc'][1]})")
print(
    f"FP32 peak = {peaks['sms']} SMs x {peaks['fma_per_clock_per_sm']} FMA/clock x 2 FLOP x "
    f"{peaks['clock_hz'] / 1e9:.2f} GHz = {peaks['flops'] / 1e12:.1f} TFLOP/s"
)
print(
    f"DRAM bandwidth (datasheet) = {peaks['bytes_per_s'] / 1e12:.1f} TB/s; ridge point = "
    f"{peaks['flops'] / peaks['bytes_per_s']:.1f} FLOP/byte"
)


# %%
def intensity(n):
    return 2 * n**3 / (4 * 3 * n * n)


pts = {}
for name, label in (
    (h.CUBLAS, "cuBLAS FP32 (TF32 off)"),
    ("cublas_tf32", "cuBLAS TF32 (tensor cores: not bound by the FP32 roof)"),
):
    pts[label] = [
        (intensity(n), h.result(name, n)["gflops"], f"N={n}" if name == h.CUBLAS else "")
        for n in h.square_sizes()
    ]
h.plot_roofline(peaks, pts)

# %% [markdown]
# Every committed size lies right of the ridge, the large ones far right: with ideal reuse, a
# 4096-cubed product needs a few hundredths of a millisecond of DRAM traffic and milliseconds of
# FMAs. So SGEMM is a **compute-bound** problem, and the work is keeping the FMA pipes (the SM's
# FP32 multiply-add units) busy. Every load, address computation and barrier is overhead to hide
# behind FMAs.
#
# Two things keep a real kernel off the roof:
#
# - *reuse*: the intensity above counts each input byte once. A kernel that reads its operands
#   from GMEM (global memory) for every FMA moves 8 bytes per 2 FLOP, far left of the ridge.
#   Rungs 1-5 are about reusing each loaded value many times from faster memories: L1, shared
#   memory (SMEM), registers;
# - *issue*: even with data in registers, the SM must issue the FMAs back to back. Rungs 6-10 are
#   about wider loads, fewer SMEM wavefronts (the passes in which shared memory serves one warp
#   access, defined in notebook 02), fewer barriers and hiding memory latency.
#
# At the small sizes, the product is too short to fill the GPU: a 256-cubed C is a handful of
# tiles for the GPU's SMs, and a launch costs microseconds. Notebook 06 comes back to that.
#
# ## The ladder's own kernels on the roofline
#
# The intensity above is the ideal: each byte read from DRAM once. A real kernel's intensity is its
# FLOP over the DRAM bytes it *actually* moved, which Nsight Compute (NVIDIA's kernel profiler,
# reading the GPU's hardware counters) counts (`dram__bytes_read.sum` and `dram__bytes_write.sum`,
# one profiled call of each stage at 4096^3; `gpu__time_duration.sum` gives its time). The L2 cache
# absorbs much of the re-reading, so even the first rungs sit at a few dozen FLOP per DRAM byte,
# right of the ridge, and still far below the roof: what holds them back is not DRAM but the on-chip
# traffic and the issue of instructions, the subject of notebooks 01-05. The ladder is not monotone
# at every step: `smem_tiling` moves more DRAM bytes than `gmem_coalesce` (notebook 02 shows why),
# and stages 8 and 10, with the tiles the plan gives them at 4096^3, are slower than stages 7 and 9
# (notebooks 05-06).

# %%
n = 4096
FP32_LADDER = [s.name for s in numba_gemm.STAGES[:10]]
print(f"{'kernel':<20} {'ms':>7} {'DRAM MB':>8} {'FLOP/B':>7} {'GFLOP/s':>8} {'of FP32 peak':>12}")
pts = {"cuBLAS FP32": [], "stages 1-10": []}
for name in [h.CUBLAS, *FP32_LADDER]:
    t = h.ncu(name, "gpu__time_duration.sum") * 1e-9  # ns
    dram = h.ncu(name, "dram__bytes_read.sum") + h.ncu(name, "dram__bytes_write.sum")
    flop = 2 * n**3
    gflops = flop / t / 1e9
    print(
        f"{name:<20} {t * 1e3:>7.2f} {dram / 1e6:>8.0f} {flop / dram:>7.1f} {gflops:>8,.0f} "
        f"{gflops * 1e9 / peaks['flops']:>12.1%}"
    )
    group = "cuBLAS FP32" if name == h.CUBLAS else "stages 1-10"
    label = str(numba_gemm.get_stage(name).label.split(":")[0]) if name != h.CUBLAS else ""
    pts[group].append((flop / dram, gflops, label))
h.plot_roofline(peaks, pts, title="measured intensity (DRAM bytes from Nsight Compute), 4096^3")

# %% [markdown]
# ## What cuBLAS reaches, and why the target is the FMA pipe
#
# cuBLAS in FP32 is the benchmark, measured in the same process as our kernels with TF32 off.
# The tensor cores (TF32) are several times faster on large products (the table below: from
# N = 1024 on; much less at 256 and 512), but TF32 rounds the inputs to a 10-bit
# mantissa: the committed run records its relative error against the FP32 result. An SGEMM must
# be accurate to FP32 (our bound is `1e-5` relative), so the ceiling for these notebooks is the
# FP32 FMA pipe, not the tensor cores.

# %%
for n in h.square_sizes():
    fp32, tf32 = h.result(h.CUBLAS, n), h.result("cublas_tf32", n)
    print(
        f"N = {n:>5}: cuBLAS FP32 {fp32['gflops']:>9,.0f} GFLOP/s = "
        f"{fp32['gflops'] * 1e9 / peaks['flops']:>5.1%} of FP32 peak;  TF32 "
        f"{tf32['gflops']:>9,.0f} GFLOP/s, relative error {tf32['rel_error']:.1e}"
    )

# %% [markdown]
# The whole ladder against cuBLAS, as measured. Two timings appear in every results plot of these
# notebooks: *kernel time*, the GPU time of the kernels alone (CUDA events, median of 20), and *end
# to end*, the public call a user makes, back to back (`numba_gemm.sgemm(a, b, out=c)` for ours,
# `torch.mm` for cuBLAS, which the benchmark calls through PyTorch), host work included. The
# left plot: `sgemm`'s automatic choice; the
# right: every stage at the largest size and at the ragged size 4095, each as a share of cuBLAS
# in its own precision: FP32 and 3xTF32 against cuBLAS FP32, TF32 against cuBLAS TF32, FP16 and
# BF16 against cuBLAS FP16 and BF16). Stages 15-16 do not serve square products; a stage that
# does not serve a shape (the TMA stages need 16-byte aligned rows, so none at 4095) or whose
# check failed in this run has no bar there (notebook 08's table says which). Bars above 100 %
# are the 3xTF32 stages (13, 19, 23), which reach FP32 accuracy on tensor cores and so outrun
# cuBLAS's FP32 FMA pipe (notebook 07 explains how). The next notebooks take the stages one by
# one.

# %%
h.plot_results(["auto"], highlight=[s.name for s in numba_gemm.STAGES], ladder=True)
