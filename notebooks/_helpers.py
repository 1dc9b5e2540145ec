"""Shared code of the notebook walkthroughs (``notebooks/NN_*.py``), kept here so that each
notebook shows only what its rung is about.

- where a notebook's outputs come from (:func:`machine`);
- running a stage through the public call and checking it against NumPy (:func:`check_stages`);
- showing the package's own source (:func:`show_source`, :func:`show_diff`);
- the resource report, compiled in a subprocess without the simulator (:func:`resources`);
- the committed GPU results (:func:`results`, :func:`plot_results`, :func:`print_results`);
- the drawings. Every drawing takes the tile constants as arguments and the notebooks pass the
  stage modules' own globals (or a tunable stage's ``config``), so a picture changes when the
  code does. Index formulas that a drawing needs (which thread reads which address) are written
  in the notebooks, next to the kernel lines they mirror.

Run as a script (``python _helpers.py resources '["naive"]' '' ''``) it is the resource-report
subprocess that :func:`resources` starts.
"""

from __future__ import annotations

import csv
import difflib
import functools
import inspect
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

#: The GPU run the notebooks read, made at the commit their outputs come from (one place to
#: change): ``bench/`` is ``python -m numba_gemm.bench`` over every stage (its ``results.json``
#: names the command, GPU, driver and versions), ``ncu/`` is ``python -m numba_gemm.tools.profile``
#: (Nsight Compute metrics of one call of every stage and of cuBLAS at 4096^3, and SASS).
RUN = "2026-11-27-notebooks"
RUN_DIR = next(iter(sorted((ROOT / "bench" / "results").glob(f"*/{RUN}"))), None)
RESULTS_DIR = (
    RUN_DIR / "bench"
    if RUN_DIR is not None
    else ROOT / "bench" / "results" / "nvidia-h200" / "2026-11-22-call-path"
)

#: FP32 FMA results per clock per SM, by compute capability: CUDA C++ Programming Guide,
#: "Arithmetic Instructions", throughput of 32-bit floating-point add, multiply, multiply-add
#: (128 for compute capability 9.0).
FP32_FMA_PER_CLOCK_PER_SM = {(9, 0): 128}

#: DRAM (HBM) bandwidth in bytes/s, by GPU name, from the vendor's datasheet: "NVIDIA H200 Tensor
#: Core GPU" datasheet, GPU memory bandwidth 4.8 TB/s (H200 SXM). The copy bandwidth measured on
#: such a GPU is lower (docs/design.md uses 4.3 TB/s); the datasheet figure is the roof.
DRAM_BYTES_PER_S = {"NVIDIA H200": 4.8e12}

CUBLAS = "cublas_fp32"


def _quiet() -> None:
    """Notebook-wide defaults: readable figures, and no warning that a grid is too small to fill
    the GPU (numba-cuda's "Grid size ... will likely result in GPU under-utilization due to low
    occupancy": the simulator's demo grids are a handful of blocks on purpose). Only that
    message is silenced; every other warning shows."""
    import matplotlib as mpl

    mpl.rcParams.update({"figure.dpi": 90, "font.size": 9, "axes.titlesize": 9})
    for mod in ("numba.core.errors", "numba.cuda.core.errors"):
        try:
            cls = __import__(mod, fromlist=["x"]).NumbaPerformanceWarning
        except (ImportError, AttributeError):
            continue
        warnings.filterwarnings("ignore", message=r"Grid size .* under-utilization", category=cls)


# --- where the outputs come from -----------------------------------------------------------------


def simulator() -> bool:
    """True under the Numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    from numba_gemm import device

    return device.SIMULATOR


def machine() -> str:
    """The machine this notebook's outputs come from, in words."""
    from numba_gemm import device

    if device.SIMULATOR:
        return (
            "CUDA simulator (NUMBA_ENABLE_CUDASIM=1): the kernels run on the CPU, one Python "
            "thread per CUDA thread, so the problems here are small"
        )
    d = device.info()
    return f"{d.name} (compute capability {d.cc[0]}.{d.cc[1]}, {d.sm_count} SMs)"


def demo_shape(aligned: bool = False) -> tuple[int, int, int]:
    """``(M, N, K)`` of the notebooks' runs: small on the simulator, 4096-class on a GPU.

    ``aligned``: every dimension a multiple of 4 (the 128-bit path); else ragged (scalar path).
    """
    if simulator():
        return (36, 44, 20) if aligned else (37, 29, 45)
    return (4096, 4096, 4096) if aligned else (4095, 4095, 4095)


# --- run and check -------------------------------------------------------------------------------


def check_stages(stages, M: int, N: int, K: int, seed: int = 0) -> None:
    """Run ``numba_gemm.sgemm(d_a, d_b, stage=s, out=d_c)`` for each stage (a name, a ``Stage``,
    or None: sgemm's own choice, reported as ``auto``; an FP16 / BF16 stage through
    ``numba_gemm.hgemm`` on the operands rounded to 16 bits, against their float64 product)
    on one pair of standard-normal float32 operands, into a C poisoned with NaN (an element the
    kernel forgets to write stays NaN), and compare with the float64 NumPy product by relative
    Frobenius error ``||C - ref|| / ||ref||``. Prints one line per stage; raises
    ``AssertionError`` if a stage leaves NaN or exceeds its bound (``Stage.rtol``).
    """
    from numba import cuda

    import numba_gemm
    from numba_gemm.kernels.stage import TOLERANCE

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    failed = []
    for s in stages:
        stage = numba_gemm.get_stage(s) if isinstance(s, str) else s
        name, rtol = ("auto", TOLERANCE["fp32"]) if s is None else (stage.name, stage.rtol)
        precision = "fp32" if s is None else stage.precision
        d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
        if precision in ("fp16", "bf16"):  # hgemm: the 16-bit copies are the exact inputs
            x, y = (_to_16bit(v, precision) for v in (a, b))
            ref = x.astype(np.float64) @ y.astype(np.float64)
            numba_gemm.hgemm(_device_16bit(x), _device_16bit(y), stage=s, out=d_c)
        else:
            ref = a.astype(np.float64) @ b.astype(np.float64)
            numba_gemm.sgemm(cuda.to_device(a), cuda.to_device(b), stage=s, out=d_c)
        c = d_c.copy_to_host()
        err = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
        ok = bool(np.isfinite(c).all()) and err <= rtol
        print(
            f"{name:<20} {M}x{N}x{K}: relative error vs float64 NumPy {err:.2e} "
            f"(bound {rtol:g}): {'ok' if ok else 'FAILED'}"
        )
        if not ok:
            failed.append(name)
    assert not failed, f"wrong results from {failed}"


def _to_16bit(x: np.ndarray, precision: str) -> np.ndarray:
    """``x`` rounded to FP16, or to BF16 (``ml_dtypes.bfloat16``, NumPy's bfloat16 type)."""
    if precision == "bf16":
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16)
    return x.astype(np.float16)


def _device_16bit(x: np.ndarray):
    """A device copy of a 16-bit host array (bfloat16 copied as its bits: Numba copies host
    memory through a ``memoryview``, which has no bfloat16)."""
    from numba import cuda

    if x.dtype == np.float16:
        return cuda.to_device(x)
    return cuda.to_device(x.view(np.uint16)).view(x.dtype)


# --- source --------------------------------------------------------------------------------------


def _where(obj) -> str:
    path = Path(inspect.getsourcefile(obj)).resolve()
    try:
        path = path.relative_to(ROOT)
    except ValueError:
        pass
    line = inspect.getsourcelines(obj)[1] if not inspect.ismodule(obj) else 1
    return f"{path}:{line}" if line > 1 else str(path)


def kernel_function(stage):
    """The Python function of a stage's ``@cuda.jit`` kernel (``inspect`` can read its source); for
    the tunable stages, the body it runs for each unit of work (``_tunable.unit_kernel``)."""
    fn = getattr(stage.kernel, "py_func", stage.kernel)
    return getattr(fn, "body", fn)


def stage_module(stage):
    """The ``numba_gemm/kernels/kNN_*.py`` module that defines ``stage`` (its ``STAGE``); not the
    module of its kernel function, which for stages built by a shared builder (13 and 14 by
    stage 12's) is the builder's."""
    import numba_gemm.kernels as kernels

    for mod in vars(kernels).values():
        if inspect.ismodule(mod) and getattr(mod, "STAGE", None) is stage:
            return mod
    raise LookupError(f"no module of numba_gemm.kernels defines stage {stage.name!r}")


def show_source(obj) -> None:
    """Print the source of a module, function or stage kernel, under its file name."""
    if hasattr(obj, "kernel") and hasattr(obj, "launch_config"):  # a Stage: its kernel
        obj = kernel_function(obj)
    obj = getattr(obj, "py_func", obj)  # a @cuda.jit kernel or device function
    print(f"# --- {_where(obj)}\n")
    print(inspect.getsource(obj))


def show_defs(obj, *names) -> None:
    """Print the definitions called ``names`` in ``obj`` (a module or function), each the first
    of that name found outermost-first in its syntax tree (so, in a PTX wrapper module, the
    simulator's model, defined before the GPU intrinsic of the same name), under its file and
    line. A process holds only one of the two definitions; this shows either on any machine."""
    import ast
    import textwrap

    obj = inspect.unwrap(obj)
    lines, start = inspect.getsourcelines(obj)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    where = _where(obj).split(":")[0]
    for name in names:
        node = next(
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name
        )
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        text = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
        print(f"# --- {where}:{max(start, 1) + first - 1}\n\n{text}")


def show_statement(obj, head: str) -> None:
    """Print the one statement of ``obj``'s source (a module or function) whose first line is
    ``head`` (stripped), whole as the syntax tree delimits it: a loop or a branch of a kernel,
    without the rest of the kernel. Raises ``ValueError`` when no statement or several start so."""
    import ast
    import textwrap

    obj = inspect.unwrap(obj)
    lines, start = inspect.getsourcelines(obj)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and lines[n.lineno - 1].strip() == head.strip()
    ]
    if len(found) != 1:
        raise ValueError(f"{len(found)} statements of {obj!r} start with {head!r}")
    node = found[0]
    text = textwrap.dedent("".join(lines[node.lineno - 1 : node.end_lineno]))
    print(f"# --- {_where(obj).split(':')[0]}:{max(start, 1) + node.lineno - 1}\n\n{text}")


def show_diff(old, new) -> None:
    """Print a unified diff between the sources of two functions (or modules)."""
    a = inspect.getsource(old).splitlines()
    b = inspect.getsource(new).splitlines()
    print("\n".join(difflib.unified_diff(a, b, _where(old), _where(new), lineterm="", n=2)))


# --- the resource report -------------------------------------------------------------------------


def resources(names, tuned: str | None = None, scalar: bool = False) -> list[dict]:
    """Registers, spills, SMEM and sm_90 occupancy of the stages' kernels, from
    ``numba_gemm.tools.resources`` (``numba.cuda.compile_ptx`` + ``ptxas -v``, no GPU needed).

    The report compiles real kernels, which the simulator cannot, so it runs in a subprocess
    without ``NUMBA_ENABLE_CUDASIM``. ``tuned``: a shape class (``"large"``...) to report the
    tunable stages with their committed sm_90 configuration for it, as
    ``python -m numba_gemm.tools.resources --tuned`` does. Only the kernel launched for 16-byte
    aligned rows is compiled unless ``scalar`` is true: then each stage's scalar-GMEM fallback (the
    kernel for rows that are not 16-byte aligned) is reported after it too. Prints the report's
    table; returns its rows.

    Raises:
        RuntimeError: the report failed (e.g. no ptxas: install the ``test`` extra).
    """
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "resources",
        json.dumps(list(names)),
        tuned or "",
        "scalar" if scalar else "",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"resource report failed ({res.returncode}):\n{res.stderr[-3000:]}")
    table, _, rows = res.stdout.rstrip("\n").rpartition("\n")
    print(table)
    return json.loads(rows)


def _resources_main(names: list[str], tuned: str, scalar: bool = False) -> None:
    from dataclasses import asdict

    from numba_gemm import get_stage
    from numba_gemm.plan import tuning
    from numba_gemm.tools import resources

    stages = [get_stage(n) for n in names]
    if tuned:
        win = tuning.winners(tuned, device=("", (9, 0)))
        stages = [s.with_config(win[s.name]["config"]) if s.name in win else s for s in stages]
    rows = []
    for s in stages:
        rows.append(resources.kernel_resources(s, s.kernel, "vector" if s.scalar_kernel else "-"))
        if scalar and s.scalar_kernel is not None:
            rows.append(resources.kernel_resources(s, s.scalar_kernel, "scalar"))
    print(
        f"sm_90, ptxas -v{f'; tunable stages with their tuned {tuned!r} config' if tuned else ''}"
        f"\n{resources.format_table(rows)}"
    )
    for s in stages:
        if s.config:
            print(f"  {s.name}: {dict(s.config)}")
    print(json.dumps([asdict(r) for r in rows]))


# --- committed GPU results -----------------------------------------------------------------------


@functools.cache
def results() -> tuple[dict, list[dict]]:
    """``(meta, rows)`` of the committed run: ``results.json``'s ``meta`` (GPU, SMs, clocks,
    command...) and the rows of ``results.csv`` with numbers as floats (None when empty)."""
    meta = json.loads((RESULTS_DIR / "results.json").read_text())["meta"]
    rows = []
    with open(RESULTS_DIR / "results.csv", newline="") as f:
        for r in csv.DictReader(f):
            for k in ("M", "N", "K"):
                r[k] = int(r[k])
            for k in ("median_ms", "min_ms", "max_ms", "gflops", "pct_cublas", "rel_error"):
                r[k] = float(r[k]) if r[k] not in ("", None) else None
            rows.append(r)
    return meta, rows


def results_source(timing: str = "kernel") -> str:
    """Where the committed results come from, and what the timing is."""
    meta, _ = results()
    how = {
        "kernel": "kernel time (CUDA events, median)",
        "end_to_end": "the public call back to back (CUDA events, median)",
    }
    return f"{meta['gpu']}, {(RESULTS_DIR / 'results.csv').relative_to(ROOT)}, {how[timing]}"


# --- Nsight Compute evidence ----------------------------------------------------------------------


@functools.cache
def _ncu_rows() -> list[dict]:
    path = RUN_DIR / "ncu" / "ncu.csv" if RUN_DIR is not None else None
    if path is None or not path.exists():
        return []
    with open(path, newline="") as f:
        return [dict(r, id=int(r["id"]), value=float(r["value"])) for r in csv.DictReader(f)]


def _main_kernel(target: str) -> int | None:
    """The ncu id of ``target``'s longest kernel in the profiled call (a split-K fix-up or a
    padding copy is a kernel of its own)."""
    times = {
        r["id"]: r["value"]
        for r in _ncu_rows()
        if r["target"] == target and r["metric"] == "gpu__time_duration.sum"
    }
    return max(times, key=times.get) if times else None


def ncu_metrics(target: str) -> dict:
    """``{metric: (value, unit)}`` of ``target``'s main kernel (a stage name, or
    ``cublas_fp32`` / ``cublas_tf32`` / ``cublas_fp16``) in the committed Nsight Compute run
    (``RUN_DIR/ncu``: one call at 4096^3, ``ncu --clock-control none``); empty when absent."""
    k = _main_kernel(target)
    return {
        r["metric"]: (r["value"], r["unit"])
        for r in _ncu_rows()
        if r["target"] == target and r["id"] == k
    }


def ncu(target: str, metric: str) -> float:
    """One Nsight Compute metric of ``target``'s main kernel (see :func:`ncu_metrics`).

    Raises:
        KeyError: the run has no such target or metric (the message says which exist)."""
    got = ncu_metrics(target)
    if metric not in got:
        have = sorted({r["target"] for r in _ncu_rows()})
        raise KeyError(f"no {metric!r} for {target!r} in the ncu run (targets: {have})")
    return got[metric][0]


def ncu_table(targets, metrics, labels=None) -> None:
    """Print ``metrics`` (rows; ``labels`` names them) of each target's main kernel (columns)."""
    labels = labels or metrics
    w = max(len(x) for x in labels)
    cols = [max(12, len(t)) for t in targets]
    meta = json.loads((RUN_DIR / "ncu" / "ncu.json").read_text()) if RUN_DIR else {}
    size = "x".join(str(x) for x in meta.get("size", []))
    print(f"Nsight Compute, one call at {size} ({(RUN_DIR / 'ncu').relative_to(ROOT)})")
    print(" " * w + "  " + " ".join(f"{t:>{c}}" for t, c in zip(targets, cols, strict=True)))
    for m, lab in zip(metrics, labels, strict=True):
        cells = []
        for t, c in zip(targets, cols, strict=True):
            v = ncu_metrics(t).get(m)
            cells.append(f"{'-':>{c}}" if v is None else f"{v[0]:>{c},.4g}")
        print(f"{lab:<{w}}  " + " ".join(cells))


def sass(stage: str) -> str:
    """The SASS of ``stage``'s default kernel from the committed run (``RUN_DIR/ncu/sass``:
    ``ptxas`` then ``nvdisasm`` of the PTX it compiles to)."""
    import gzip

    return gzip.decompress((RUN_DIR / "ncu" / "sass" / f"{stage}.sass.gz").read_bytes()).decode()


def gpu_peaks() -> dict:
    """Peak FP32 rate and DRAM bandwidth of the GPU of the committed run: SMs and clock from
    ``results.json``, FMA/clock/SM and bandwidth from the cited tables above."""
    meta, _ = results()
    cc = tuple(int(x) for x in meta["compute_capability"].split("."))
    clock_hz = float(meta["clocks"]["max_sm"].split()[0]) * 1e6
    fma = FP32_FMA_PER_CLOCK_PER_SM[cc]
    return dict(
        gpu=meta["gpu"],
        cc=cc,
        sms=int(meta["sm_count"]),
        clock_hz=clock_hz,
        fma_per_clock_per_sm=fma,
        flops=meta["sm_count"] * fma * 2 * clock_hz,
        bytes_per_s=DRAM_BYTES_PER_S[meta["gpu"]],
    )


def smem_issue_bound(ffma: float, wavefronts: float) -> float:
    """Fraction of the FP32 peak a kernel can reach when, per step, a warp issues ``ffma`` FFMA
    instructions and needs ``wavefronts`` SMEM wavefronts: an SM serves one SMEM wavefront per
    clock and issues at most 4 warp-FFMAs per clock (128 FP32 lanes), so FFMA issue is capped at
    ``ffma / wavefronts`` warp instructions per clock."""
    return min(1.0, ffma / wavefronts / 4)


def result(stage: str, size, timing: str = "kernel") -> dict | None:
    """The committed row of ``stage`` at ``size`` (an int for N^3 or an (M, N, K) tuple)."""
    shape = (size, size, size) if isinstance(size, int) else tuple(size)
    _, rows = results()
    for r in rows:
        if r["stage"] == stage and (r["M"], r["N"], r["K"]) == shape and r["timing"] == timing:
            return r
    return None


def square_sizes(pow2: bool = True) -> list[int]:
    """The N of the committed N^3 sizes: powers of two, or the others (4095, 4097)."""
    meta, _ = results()
    ns = [m for m, n, k in meta["sizes"] if m == n == k]
    return [n for n in ns if (n & (n - 1) == 0) == pow2]


def _label(stage: str) -> str:
    _, rows = results()
    return next((r["label"] for r in rows if r["stage"] == stage), stage)


def baseline_of(stage: str) -> str:
    """The cuBLAS row a stage is rated against in the committed run (its precision's: FP32 and
    3xTF32 against cuBLAS FP32, TF32 against cuBLAS TF32, FP16 / BF16 against cuBLAS FP16 /
    BF16); ``cublas_fp32`` where the run does not say."""
    _, rows = results()
    return next((r.get("baseline") or CUBLAS for r in rows if r["stage"] == stage), CUBLAS)


def print_results(stages, sizes=None, timing: str = "kernel") -> None:
    """A table of committed GFLOP/s and % of cuBLAS (of each stage's own precision, whose cuBLAS
    columns come first) for the stages at the sizes (N for N^3, or (M, N, K) tuples)."""
    sizes = sizes or square_sizes() + square_sizes(pow2=False)
    bases = list(dict.fromkeys(baseline_of(s) for s in stages))
    print(f"GFLOP/s (% of cuBLAS of the stage's precision) from {results_source(timing)}")
    names = [*bases, *stages]
    widths = [max(18, len(_label(s))) for s in names]
    size_w = max(6, *(len(_size_name(n)) for n in sizes))
    print(
        f"{'size':>{size_w}} "
        + " ".join(f"{_label(s):>{w}}" for s, w in zip(names, widths, strict=True))
    )
    for n in sizes:
        cells = []
        for s, w in zip(names, widths, strict=True):
            r = result(s, n, timing)
            if r is None or r["gflops"] is None:
                cells.append(f"{r['status'] if r else '-':>{w}}")
            elif s in bases or r["pct_cublas"] is None:
                cells.append(f"{r['gflops']:>{w},.0f}")
            else:
                cell = f"{r['gflops']:,.0f} ({r['pct_cublas']:.1%})"
                cells.append(f"{cell:>{w}}")
        print(f"{_size_name(n):>{size_w}} " + " ".join(cells))


def _size_name(n) -> str:
    return str(n) if isinstance(n, int) else "x".join(str(x) for x in n)


def plot_results(stages, highlight=None, ladder: bool = False):
    """Committed GFLOP/s against N for N^3 products (powers of two): the stages and the cuBLAS
    of their precisions, kernel time (solid) and, where the run has it, the public call end to
    end (dotted). ``ladder``: beside it, % of cuBLAS (of each stage's precision) of every stage
    of the ladder at the largest size and at the ragged sizes, the ``highlight`` ones in colour."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from numba_gemm import STAGES

    highlight = set(highlight or stages)
    sizes = square_sizes()
    if ladder:
        fig, (ax, bx) = plt.subplots(
            1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.2]}
        )
    else:
        fig, ax = plt.subplots(figsize=(7, 4.2))
    bases = list(dict.fromkeys(baseline_of(s) for s in stages))
    for s in [*bases, *stages]:
        for timing, ls in (("kernel", "-"), ("end_to_end", ":")):
            pts = [
                (n, result(s, n, timing)["gflops"])
                for n in sizes
                if result(s, n, timing) and result(s, n, timing)["gflops"]
            ]
            if not pts:
                continue
            if s in bases:
                style = dict(color=f"{0.5 * bases.index(s) / max(1, len(bases) - 1):.2f}")
                style["ls"] = "--" if timing == "kernel" else ":"
            else:
                style = dict(color=stage_color(s), marker="o", ms=3, ls=ls)
            tag = "" if timing == "kernel" else " (end to end)"
            ax.plot(*zip(*pts, strict=True), label=_label(s) + tag, **style)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="N (M = N = K)",
        ylabel="GFLOP/s",
        title="GFLOP/s against size",
    )
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if not ladder:
        meta, _ = results()
        ax.set_title(f"{meta['gpu']}: kernel time (solid), the public call end to end (dotted)")
        fig.tight_layout()
        plt.show()
        return

    ok = [
        n for n in sizes if all(result(s.name, n) and result(s.name, n)["gflops"] for s in STAGES)
    ]
    big = ok[-1] if ok else sizes[-1]
    shown = [big, *square_sizes(pow2=False)]
    names = [s.name for s in STAGES]
    width = 0.8 / len(shown)
    for j, n in enumerate(shown):
        vals = [100 * ((result(s, n) or {}).get("pct_cublas") or 0) for s in names]
        colors = [stage_color(s) if s in highlight else "0.8" for s in names]
        x = np.arange(len(names)) + (j - (len(shown) - 1) / 2) * width
        bx.bar(
            x,
            vals,
            width,
            color=colors,
            edgecolor="black" if j == 0 else "0.4",
            hatch=None if j == 0 else ("//", "..")[(j - 1) % 2],
            lw=0.5,
        )
    bx.set_xticks(np.arange(len(names)), [str(i + 1) for i in range(len(names))], fontsize=7)
    bx.set_xlabel("stage (numbers as in the ladder's list)")
    bx.axhline(100, color="black", ls="--", lw=1)
    keys = [
        Rectangle(
            (0, 0),
            1,
            1,
            facecolor="0.8",
            edgecolor="0.4",
            hatch=None if j == 0 else ("//", "..")[(j - 1) % 2],
        )
        for j in range(len(shown))
    ]
    bx.legend(keys, [f"N = {n}" for n in shown], fontsize=7, loc="upper left")
    bx.set(
        ylabel="% of cuBLAS of the stage's precision",
        title="every stage of the ladder"
        + ("" if highlight >= set(names) else " (this notebook's in colour)"),
    )
    bx.grid(axis="y", alpha=0.3)
    fig.suptitle(results_source(), fontsize=8)
    fig.tight_layout()
    plt.show()


def stage_color(stage: str) -> str:
    """One colour per stage in every notebook's plots (its place in the ladder), black for
    sgemm's automatic choice."""
    from numba_gemm import STAGES

    names = [s.name for s in STAGES]
    return f"C{names.index(stage) % 10}" if stage in names else "black"


# --- drawings: 00 roofline -----------------------------------------------------------------------


def plot_roofline(peaks: dict, points: dict, title: str = "committed cuBLAS results") -> None:
    """The roofline of the GPU in ``peaks`` (:func:`gpu_peaks`): attainable FP32 GFLOP/s against
    arithmetic intensity, ``min(peak, intensity x DRAM bandwidth)``, and measured ``points``
    ``{label: [(intensity, GFLOP/s, annotation), ...]}``."""
    import matplotlib.pyplot as plt

    ridge = peaks["flops"] / peaks["bytes_per_s"]
    x = np.logspace(-1.5, 3.5, 200)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(
        x,
        np.minimum(peaks["flops"], x * peaks["bytes_per_s"]) / 1e9,
        color="black",
        label=f"roof: min(FP32 peak, intensity x {peaks['bytes_per_s'] / 1e12:g} TB/s)",
    )
    ax.axvline(ridge, color="0.6", ls=":", lw=1)
    ax.text(ridge * 1.1, peaks["flops"] / 1e9 / 30, f"ridge\n{ridge:.1f} FLOP/B", fontsize=7)
    for i, (label, pts) in enumerate(points.items()):
        xs, ys, _ = zip(*pts, strict=True)
        ax.scatter(xs, ys, s=18, color=f"C{i}", label=label, zorder=3)
        for xx, yy, note in pts:
            if note:
                ax.annotate(
                    note,
                    (xx, yy),
                    textcoords="offset points",
                    xytext=(4, -9),
                    fontsize=6,
                    color=f"C{i}",
                )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity (FLOP per DRAM byte)",
        ylabel="GFLOP/s",
        title=f"{peaks['gpu']}: FP32 roofline, {title}",
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    plt.show()


def draw_memory_hierarchy(levels, peaks: dict) -> None:
    """The memory levels ``[(name, where, capacity, rate), ...]``, fastest first, as a stack of
    boxes, each wider than the one above (wider = larger), with its capacity and rate."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    fig, ax = plt.subplots(figsize=(9, 3.6))
    n = len(levels)
    for i, (name, where, cap, rate) in enumerate(levels):
        w = 0.35 + 0.6 * i / max(1, n - 1)
        y = n - 1 - i
        ax.add_patch(
            FancyBboxPatch(
                (0.5 - w / 2, y + 0.1),
                w,
                0.8,
                boxstyle="round,pad=0.01",
                facecolor=plt.cm.Blues(0.25 + 0.5 * i / n),
                edgecolor="black",
                lw=0.6,
            )
        )
        ax.text(0.5, y + 0.62, f"{name} ({where})", ha="center", fontsize=8, weight="bold")
        ax.text(0.5, y + 0.3, f"{cap};  {rate}", ha="center", fontsize=7)
    ax.annotate(
        "",
        xy=(0.04, n - 0.1),
        xytext=(0.04, 0.1),
        arrowprops=dict(arrowstyle="->", color="0.3"),
    )
    ax.text(0.055, n / 2, "faster,\nsmaller", fontsize=7, color="0.3", va="center")
    ax.set(xlim=(0, 1), ylim=(0, n), title=f"{peaks['gpu']}: {peaks['sms']} SMs")
    ax.axis("off")
    fig.tight_layout()
    plt.show()


# --- drawings: 01 coalescing ---------------------------------------------------------------------

SECTOR = 32  # bytes: the unit in which L2 and DRAM move data
LINE = 128  # bytes: an L1 cache line (4 sectors)


def draw_ownership(ax, block: int, mapping, title: str) -> None:
    """A ``block x block`` tile of C shaded by the warp that computes each element (alternating
    greys; warp 0 in red).

    ``mapping(tx, ty) -> (row, col)``: the element thread ``(tx, ty)`` of block (0, 0) computes.
    Warp w holds the threads with linear id ``ty * block + tx`` in ``[32w, 32w + 32)``.
    """
    from matplotlib.colors import ListedColormap

    warp = np.zeros((block, block), dtype=int)
    for ty in range(block):
        for tx in range(block):
            r, c = mapping(tx, ty)
            warp[r, c] = (ty * block + tx) // 32
    shade = np.where(warp == 0, 2, warp % 2)
    ax.imshow(shade, cmap=ListedColormap(["0.85", "0.65", "C3"]), vmin=0, vmax=2)
    ax.set(title=title, xlabel="column of C", ylabel="row of C")


def warp_access(addresses) -> dict:
    """Sectors, lines and bytes of one warp's 4-byte accesses at byte ``addresses``."""
    addrs = np.asarray(addresses)
    distinct = np.unique(addrs)
    sectors = np.unique(addrs // SECTOR)
    return dict(
        sectors=len(sectors),
        lines=len(np.unique(addrs // LINE)),
        moved=len(sectors) * SECTOR,
        used=len(distinct) * 4,
    )


def draw_access(ax, addresses, what: str) -> None:
    """Lane (y) against byte offset (x) of one warp's 4-byte accesses; 32-byte sector
    boundaries drawn when the span is small."""
    addrs = np.asarray(addresses)
    off = addrs - addrs.min()
    a = warp_access(addrs)
    kib = off.max() > 4 * 1024
    if not kib:
        for s in range(0, int(off.max()) // SECTOR + 2):
            ax.axvline(s * SECTOR, color="0.85", lw=0.6, zorder=0)
    ax.scatter(off / 1024 if kib else off, np.arange(len(off)), s=8, color="C0")
    if a["used"] == 4:
        how = "one float broadcast to all lanes"
    else:
        how = f"{a['used']} B requested ({a['used'] / a['moved']:.0%} of it used)"
    ax.set(
        xlabel="byte offset" + (" (KiB)" if kib else ""),
        ylabel="lane",
        title=f"{what}\n{a['sectors']} sector(s), {a['moved']} B moved: {how}",
    )


# --- drawings: 02 SMEM tiling --------------------------------------------------------------------


def draw_smem_tiling(BM: int, BN: int, BK: int, tiles: int = 4, block=(1, 2)) -> None:
    """A, B and C of a product ``tiles`` block tiles wide, at tile granularity: the C tile of block
    ``(by, bx)``, and the A and B tiles it stages through SMEM at each K step (same colour = same
    step: A's tile ``(by, t)`` and B's ``(t, bx)`` meet in SMEM at step ``t``)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    by, bx = block
    M, N = tiles * BM, tiles * BN
    K = tiles * BK * 2  # more K steps than tiles of C, as in a real product
    steps = K // BK
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(
        1, 3, figsize=(12, 4.2), gridspec_kw={"width_ratios": [K / BK, N / BN, N / BN]}
    )
    panels = [("A (M x K)", M, K, BM, BK), ("B (K x N)", K, N, BK, BN), ("C (M x N)", M, N, BM, BN)]
    for ax, (name, rows, cols, th, tw) in zip(axes, panels, strict=True):
        ax.set(xlim=(0, cols), ylim=(rows, 0), title=name, aspect="auto")
        ax.set_xticks(range(0, cols + 1, tw))
        ax.set_yticks(range(0, rows + 1, th))
        ax.tick_params(labelsize=6)
        ax.grid(True, color="0.7", lw=0.5)
    for t in range(steps):
        col = cmap(t / max(steps - 1, 1))
        axes[0].add_patch(Rectangle((t * BK, by * BM), BK, BM, color=col))
        axes[0].text(
            (t + 0.5) * BK,
            (by + 0.5) * BM,
            str(t),
            ha="center",
            va="center",
            color="white",
            fontsize=7,
        )
        axes[1].add_patch(Rectangle((bx * BN, t * BK), BN, BK, color=col))
        axes[1].text(
            (bx + 0.5) * BN,
            (t + 0.5) * BK,
            str(t),
            ha="center",
            va="center",
            color="white",
            fontsize=6,
        )
    axes[2].add_patch(Rectangle((bx * BN, by * BM), BN, BM, color="C3"))
    axes[2].text(
        (bx + 0.5) * BN,
        (by + 0.5) * BM,
        f"block\n({by}, {bx})",
        ha="center",
        va="center",
        color="white",
        fontsize=8,
    )
    axes[0].set_xlabel(f"K steps of BK = {BK}: tile t -> As ({BM} x {BK})")
    axes[1].set_ylabel(f"tile t -> Bs ({BK} x {BN})")
    axes[2].set_xlabel(f"C tile BM x BN = {BM} x {BN}: sum over the {steps} steps")
    fig.suptitle(
        f"one block's work: {steps} K steps; at step t, As and Bs hold the tiles numbered t"
    )
    fig.tight_layout()
    plt.show()


def draw_barriers() -> None:
    """Schematic: four warps of one block through two K steps, with both barriers, and without the
    second one (a fast warp then overwrites the tile a slow warp is still reading)."""
    import matplotlib.pyplot as plt

    store, fma = 1.0, [3.0, 3.4, 3.8, 5.0]  # schematic durations: warp 3 is the slow one
    fig, axes = plt.subplots(1, 2, figsize=(12, 2.8), sharey=True)
    for ax, second in zip(axes, (True, False), strict=True):
        t0 = [0.0] * 4
        for step in range(2):
            ends = [t + store for t in t0]
            for w in range(4):
                ax.barh(
                    w, store, left=t0[w], color="C0" if step == 0 else "C3", edgecolor="k", lw=0.4
                )
            bar1 = max(ends)
            ax.axvline(bar1, color="k", lw=1)
            for w in range(4):
                ax.barh(
                    w, fma[w], left=bar1, color="C2" if step == 0 else "C1", edgecolor="k", lw=0.4
                )
            done = [bar1 + f for f in fma]
            if second:
                bar2 = max(done)
                ax.axvline(bar2, color="k", lw=1, ls="--")
                t0 = [bar2] * 4
            else:
                t0 = done
        if not second:  # where warp 0's next store overlaps the others' reads
            bad0 = store + fma[0]  # warp 0's first FMAs end: it stores tile t+1 at once
            ax.axvspan(bad0, bad0 + store, color="red", alpha=0.25)
        ax.set(
            title="syncthreads after the stores (solid line) and after the FMAs (dashed)"
            if second
            else "without the second syncthreads: warp 0 stores tile t+1 (shaded) "
            "while warps 1-3 still read tile t",
            xlabel="time (schematic)",
        )
        ax.set_yticks(range(4), [f"warp {w}" for w in range(4)])
    axes[0].invert_yaxis()  # shared y axis: once
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C2", "C3", "C1")]
    fig.legend(
        handles,
        ["store tile t to SMEM", "FMAs on tile t", "store tile t+1", "FMAs on tile t+1"],
        loc="lower center",
        ncol=4,
        fontsize=7,
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plt.show()


# --- drawings: 03 blocktiling --------------------------------------------------------------------


def draw_thread_tiles(ax, BM: int, BN: int, TM: int, TN: int, title: str) -> None:
    """The BM x BN block tile cut into the TM x TN tiles of its threads (thread ``tid`` owns row
    ``tid // (BN/TN)``, column ``tid % (BN/TN)`` of thread tiles), coloured by warp; warp 0
    outlined, thread 0 black."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    per_row = BN // TN
    threads = (BM // TM) * per_row
    cmap = plt.get_cmap("tab20")
    for tid in range(threads):
        r, c = (tid // per_row) * TM, (tid % per_row) * TN
        warp = tid // 32
        ax.add_patch(
            Rectangle(
                (c, r),
                TN,
                TM,
                facecolor="black" if tid == 0 else cmap(warp % 20),
                edgecolor="white",
                lw=0.3,
            )
        )
    rows0 = sorted({(t // per_row) * TM for t in range(min(32, threads))})
    cols0 = sorted({(t % per_row) * TN for t in range(min(32, threads))})
    ax.add_patch(
        Rectangle(
            (cols0[0], rows0[0]),
            cols0[-1] + TN - cols0[0],
            rows0[-1] + TM - rows0[0],
            fill=False,
            edgecolor="red",
            lw=2,
        )
    )
    ax.set(
        xlim=(0, BN),
        ylim=(BM, 0),
        aspect="equal",
        title=title,
        xlabel="column in block tile",
        ylabel="row in block tile",
    )


def draw_outer_product(ax, TM: int, TN: int) -> None:
    """One k of a thread's tile: TM values of A's column and TN of B's row (registers) -> TM x TN
    FMAs into the accumulators."""
    from matplotlib.patches import Rectangle

    for i in range(TM):
        ax.add_patch(Rectangle((0, i + 1.5), 1, 1, facecolor="C0", edgecolor="white"))
    for j in range(TN):
        ax.add_patch(Rectangle((j + 1.5, 0), 1, 1, facecolor="C1", edgecolor="white"))
    for i in range(TM):
        for j in range(TN):
            ax.add_patch(Rectangle((j + 1.5, i + 1.5), 1, 1, facecolor="C2", edgecolor="white"))
    ax.text(0.5, 1.2, "reg_m", ha="center", fontsize=7)
    ax.text(TN + 1.7, 0.5, "reg_n", va="center", fontsize=7)
    ax.set(
        xlim=(-0.5, TN + 3.5),
        ylim=(TM + 2, -0.5),
        aspect="equal",
        title=f"per k: {TM} + {TN} SMEM loads -> {TM * TN} FMAs\n(thread_results: "
        f"{TM} x {TN} registers)",
    )
    ax.axis("off")


# --- drawings: 04 banks --------------------------------------------------------------------------

BANKS = 32  # SMEM banks, 4 bytes wide


def wavefronts(lane_words) -> int:
    """SMEM wavefronts of one warp instruction, modelled as the largest number of distinct 4-byte
    words any bank must deliver (equal words are broadcast). ``lane_words``: per lane, the word
    indices (byte address / 4) it accesses: 1 for 32-bit, 4 for 128-bit accesses."""
    per_bank: dict[int, set] = {}
    for words in lane_words:
        for w in words:
            per_bank.setdefault(w % BANKS, set()).add(w)
    return max(len(v) for v in per_bank.values())


def draw_banks(ax, lane_words, title: str) -> None:
    """The 32 banks (x) and, stacked in each, the distinct words one warp instruction asks of it,
    labelled with the lanes that ask: the height of the tallest stack is the number of
    wavefronts (:func:`wavefronts`)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    who: dict[int, list[int]] = {}
    for lane, words in enumerate(lane_words):
        for w in words:
            who.setdefault(w, []).append(lane)
    stacks: dict[int, list[int]] = {}
    for w in sorted(who):
        stacks.setdefault(w % BANKS, []).append(w)
    depth = max(len(v) for v in stacks.values())
    cmap = plt.get_cmap("tab20")
    for bank, words in stacks.items():
        for level, w in enumerate(words):
            lanes = who[w]
            ax.add_patch(
                Rectangle(
                    (bank, level), 1, 1, facecolor=cmap(lanes[0] % 20), edgecolor="black", lw=0.4
                )
            )
            text = ",".join(map(str, lanes[:2])) + ("+" if len(lanes) > 2 else "")
            ax.text(
                bank + 0.5,
                level + 0.5,
                text,
                ha="center",
                va="center",
                fontsize=5,
                rotation=90 if len(text) > 2 else 0,
            )
    ax.set(
        xlim=(0, BANKS),
        ylim=(0, max(depth, 2) + 0.2),
        xlabel="bank",
        ylabel="distinct words per bank",
        title=f"{title}: {depth} wavefront(s)",
    )
    ax.set_xticks(np.arange(0, BANKS, 4) + 0.5, [str(b) for b in range(0, BANKS, 4)])
    ax.set_yticks(range(max(depth, 2) + 1))


def draw_float4_copy(axes, BK: int, rows: int, a_row, a_col) -> None:
    """Which thread copies which float4 of the A tile (left: rows of A in GMEM, k across) and
    where its four values land in the transposed ``As[k, m]`` (right). ``a_row(tid)``,
    ``a_col(tid)``: the kernel's assignment of a thread to its float4 (first k of 4)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    cmap = plt.get_cmap("tab20")
    ax, bx = axes
    tid = 0
    while a_row(tid) < rows:
        r, c = a_row(tid), a_col(tid)
        for i in range(4):
            for x, y, a in ((c + i, r, ax), (r, c + i, bx)):
                a.add_patch(Rectangle((x, y), 1, 1, facecolor=cmap(tid % 20), edgecolor="white"))
                a.text(x + 0.5, y + 0.5, str(tid), ha="center", va="center", fontsize=6)
        tid += 1
    ax.set(
        xlim=(0, BK),
        ylim=(rows, 0),
        aspect="equal",
        xlabel="k",
        ylabel="m (row of A)",
        title=f"A tile in GMEM: one float4 (LDG.128) per thread\n(first {rows} rows)",
    )
    bx.set(
        xlim=(0, rows),
        ylim=(BK, 0),
        aspect="equal",
        xlabel="m",
        ylabel="k",
        title="As[k, m] in SMEM: each float4 scattered down a column\n(4 scalar stores)",
    )


# --- drawings: 05 warp tiles and pipelines -------------------------------------------------------


def draw_warp_tiles(cfg: dict, d: dict, lane: int = 0) -> None:
    """Left: the block tile cut into warp tiles (warps numbered). Right: warp 0's tile as
    WMITER x WNITER sub-tiles, the lanes' TM x TN thread tiles in the first one (lane numbers),
    and every tile of lane ``lane`` in black.

    Warp ``w`` takes warp-tile row ``w // (BN/WN)``, column ``w % (BN/WN)``; in each sub-tile,
    lane ``l`` takes thread-tile row ``l // (WSUBN/TN)``, column ``l % (WSUBN/TN)`` (the kernel's
    ``thread_origin``). ``d``: the stage's derived constants (WMITER, WSUBM, WSUBN, NUM_THREADS).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    BM, BN, WM, WN, TM, TN = (cfg[k] for k in ("BM", "BN", "WM", "WN", "TM", "TN"))
    WMITER, WNITER, WSUBM, WSUBN = d["WMITER"], cfg["WNITER"], d["WSUBM"], d["WSUBN"]
    warps_n = BN // WN
    lanes_n = WSUBN // TN
    cmap = plt.get_cmap("tab10")
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [BN / BM, WN / WM]}
    )
    for w in range(d["NUM_THREADS"] // 32):
        r, c = (w // warps_n) * WM, (w % warps_n) * WN
        ax.add_patch(
            Rectangle(
                (c, r), WN, WM, facecolor=cmap(w % 10), edgecolor="black", alpha=0.8 if w else 1
            )
        )
        ax.text(c + WN / 2, r + WM / 2, f"warp {w}", ha="center", va="center", fontsize=8)
    ax.set(
        xlim=(0, BN),
        ylim=(BM, 0),
        aspect="equal",
        xlabel="column",
        ylabel="row",
        title=f"block tile BM x BN = {BM} x {BN}: {d['NUM_THREADS'] // 32} warps of "
        f"WM x WN = {WM} x {WN}",
    )
    for i in range(WMITER):
        for j in range(WNITER):
            r0, c0 = i * WSUBM, j * WSUBN
            bx.add_patch(Rectangle((c0, r0), WSUBN, WSUBM, fill=False, edgecolor="C0", lw=2))
            for ln in range(32):
                r, c = r0 + (ln // lanes_n) * TM, c0 + (ln % lanes_n) * TN
                black = ln == lane
                bx.add_patch(
                    Rectangle(
                        (c, r),
                        TN,
                        TM,
                        facecolor="black" if black else "0.92",
                        edgecolor="0.6",
                        lw=0.4,
                    )
                )
                if i == 0 and j == 0:
                    bx.text(
                        c + TN / 2,
                        r + TM / 2,
                        str(ln),
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if black else "black",
                    )
    bx.set(
        xlim=(0, WN),
        ylim=(WM, 0),
        aspect="equal",
        xlabel="column in warp tile",
        ylabel="row in warp tile",
        title=f"warp 0: WMITER x WNITER = {WMITER} x {WNITER} sub-tiles of {WSUBM} x {WSUBN} "
        f"(blue);\n32 lanes x TM x TN = {TM} x {TN} each; lane {lane}'s tiles in black",
    )
    fig.tight_layout()
    plt.show()


def pipeline(kind: str, tiles: int, lat: float, math_t: float, sts: float, nbuf: int = 2):
    """Schematic schedule of one block's K loop: ``(loads, stores, fmas, barriers, end)`` where
    loads are ``(tile, start, end)`` of each tile's GMEM reads (to registers, or cp.async to
    SMEM), stores and fmas ``(tile, start, end)`` and barriers the times of ``syncthreads``.

    - ``warptiling``: load tile i, store it to SMEM, barrier, math, barrier;
    - ``double_buffering``: tile i+1's loads issued before tile i's math, stored after it (the
      store waits for the data), one barrier per tile;
    - ``multistage``: ``nbuf - 1`` tiles of cp.async in flight; wait for tile i, barrier, issue
      tile i + nbuf - 1, math.
    """
    loads, stores, fmas, bars = [], [], [], []
    t = 0.0
    if kind == "warptiling":
        for i in range(tiles):
            loads.append((i, t, t + lat))
            stores.append((i, t + lat, t + lat + sts))
            bars.append(t + lat + sts)
            fmas.append((i, t + lat + sts, t + lat + sts + math_t))
            t += lat + sts + math_t
            bars.append(t)
    elif kind == "double_buffering":
        loads.append((0, 0.0, lat))
        stores.append((0, lat, lat + sts))
        t = lat + sts
        bars.append(t)
        for i in range(tiles):
            if i + 1 < tiles:
                loads.append((i + 1, t, t + lat))
            fmas.append((i, t, t + math_t))
            if i + 1 < tiles:
                s0 = max(t + math_t, t + lat)
                stores.append((i + 1, s0, s0 + sts))
                t = s0 + sts
            else:
                t += math_t
            bars.append(t)
    elif kind == "multistage":
        ready = {}
        for i in range(min(nbuf - 1, tiles)):
            loads.append((i, 0.0, lat))
            ready[i] = lat
        for i in range(tiles):
            t = max(t, ready[i])
            bars.append(t)
            nxt = i + nbuf - 1
            if nxt < tiles:
                loads.append((nxt, t, t + lat))
                ready[nxt] = t + lat
            fmas.append((i, t, t + math_t))
            t += math_t
    else:
        raise ValueError(kind)
    return loads, stores, fmas, bars, t


def draw_pipelines(
    variants, tiles: int = 6, lat: float = 6.0, math_t: float = 4.0, sts: float = 0.6
) -> None:
    """Schematic timelines (:func:`pipeline`) of ``variants``, a list of ``(kind, nbuf)``: one
    row per tile in flight (GMEM loads or cp.async), one for SMEM stores and FMAs. Lengths are
    illustrative units (GMEM latency ``lat``, one K tile of math ``math_t``), not measurements."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(variants), 1, figsize=(12, 1.3 + 1.25 * len(variants)), sharex=True
    )
    for ax, (kind, nbuf) in zip(np.atleast_1d(axes), variants, strict=True):
        loads, stores, fmas, bars, end = pipeline(kind, tiles, lat, math_t, sts, nbuf)
        depth = max(1, nbuf - 1) if kind == "multistage" else 1
        for i, a, b in loads:
            ax.barh(
                i % depth,
                b - a,
                left=a,
                height=0.6,
                color="C4" if kind == "multistage" else "C0",
                edgecolor="black",
                lw=0.4,
            )
            ax.text(
                (a + b) / 2,
                i % depth,
                f"{'cp.async' if kind == 'multistage' else 'LDG'} {i}",
                ha="center",
                va="center",
                fontsize=6,
            )
        for _, a, b in stores:
            ax.barh(depth, b - a, left=a, height=0.6, color="C1", edgecolor="black", lw=0.4)
        for i, a, b in fmas:
            ax.barh(depth, b - a, left=a, height=0.6, color="C2", edgecolor="black", lw=0.4)
            ax.text((a + b) / 2, depth, f"FMA {i}", ha="center", va="center", fontsize=6)
        for x in bars:
            ax.axvline(x, color="black", lw=0.7, ls=":")
        name = f"{kind}, NBUF = {nbuf}" if kind == "multistage" else kind
        ax.set_title(
            f"{name}: {tiles} K tiles, {len(bars)} syncthreads, ends at {end:.3g}", loc="left"
        )
        what = "cp.async" if kind == "multistage" else "GMEM -> regs"
        ax.set_yticks(
            range(depth + 1),
            [f"{what} ({r})" if depth > 1 else what for r in range(depth)] + ["SMEM stores, FMA"],
        )
        ax.invert_yaxis()
    np.atleast_1d(axes)[-1].set_xlabel(
        f"time, schematic units (GMEM latency {lat:g}, the FMAs of one K tile {math_t:g}, SMEM "
        f"stores {sts:g}); dotted: syncthreads"
    )
    fig.tight_layout()
    plt.show()


# --- drawings: 06 waves and decompositions -------------------------------------------------------


def describe(cfg) -> str:
    """A tile configuration in one line (a dict, or the JSON of the results' ``config`` column,
    which also names the stage)."""
    c = json.loads(cfg) if isinstance(cfg, str) else dict(cfg)
    if not c:
        return "-"
    out = f"{c.pop('stage')} " if "stage" in c else ""
    if "NT" in c:  # results committed before the thread count was named THREADS
        c["THREADS"] = c.pop("NT")
    if "MT" in c:  # the skinny stage: rows x columns of C per block, threads, K chunk
        out += f"{c['MT']}x{c['BN']} rows x columns, {c['THREADS']} threads, KC {c['KC']}"
    elif "NB" in c:  # skinny_n: the same, and rows of A per warp
        out += (
            f"{c['THREADS'] // 32 * c['RW']}x{c['NB']} rows x columns, {c['RW']} rows per "
            f"warp, {c['THREADS']} threads, KC {c['KC']}"
        )
    else:
        out += (
            f"{c['BM']}x{c['BN']}x{c['BK']}, warp {c['WM']}x{c['WN']}, thread {c['TM']}x"
            f"{c['TN']}, WNITER {c['WNITER']}"
        )
    return out + "".join(f", {k} {c[k]}" for k in ("NBUF", "MINB", "SPLITK") if k in c)


def plot_space(spaces: dict, picked: dict) -> None:
    """The tuner's configuration space: per stage ``{name: (configs, copies)}`` (``copies(cfg)``:
    SMEM copies of the tiles the stage keeps), SMEM per block against accumulators per thread
    (jittered), marker size by threads per block; ``picked`` ``{label: (config, copies)}``
    starred."""
    import matplotlib.pyplot as plt

    from numba_gemm.kernels import _tunable as tun

    def point(cfg, copies):
        d = tun.derived(cfg)
        acc = d["WMITER"] * cfg["TM"] * cfg["WNITER"] * cfg["TN"]
        return copies(cfg) * d["TILE_SMEM_BYTES"] / 1024, acc, d["NUM_THREADS"]

    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, (name, (cfgs, copies)) in enumerate(spaces.items()):
        x, y, t = np.array([point(c, copies) for c in cfgs]).T
        ax.scatter(
            x,
            y * np.exp(rng.uniform(-0.08, 0.08, len(y))),
            s=t / 12,
            alpha=0.45,
            color=f"C{i}",
            label=f"{name}: {len(cfgs)} configurations",
        )
    for i, (label, (cfg, copies)) in enumerate(picked.items()):
        x, y, _ = point(cfg, copies)
        ax.scatter([x], [y], marker="*", s=160, color="black", zorder=3)
        ax.annotate(
            label,
            (x, y),
            textcoords="offset points",
            xytext=(8, -14 - 10 * i),
            fontsize=7,
            arrowprops=dict(arrowstyle="-", lw=0.5),
        )
    ax.set(
        yscale="log",
        xlabel="SMEM per block (KiB, all copies of the tiles)",
        ylabel="accumulators per thread (jittered)",
        title="configurations the tuner sweeps (marker size: threads per block); "
        "stars: committed winners",
    )
    ax.set_yticks([32, 64, 128], ["32", "64", "128"])
    ax.minorticks_off()
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    plt.show()


def draw_decompositions(tiles: int, iters: int, sms: int, splits: int = 2) -> None:
    """Schematic: how ``tiles`` output tiles of ``iters`` K iterations each are spread over
    ``sms`` SMs by data-parallel tiling (one tile per block), split-K (``splits`` slices per
    tile, then a reduction) and stream-K (every SM gets the same number of K iterations, tiles
    split where the shares cross them, partial tiles fixed up)."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab20")
    fig, axes = plt.subplots(1, 3, figsize=(12, 2.8), sharey=True)

    def unit(ax, sm, start, length, tile, part=""):
        ax.barh(sm, length, left=start, color=cmap(tile % 20), edgecolor="black", lw=0.4)
        ax.text(start + length / 2, sm, f"{tile}{part}", ha="center", va="center", fontsize=6)

    ax = axes[0]  # data-parallel: waves of whole tiles
    for t in range(tiles):
        unit(ax, t % sms, (t // sms) * iters, iters, t)
    dp = math.ceil(tiles / sms) * iters
    ax.set_title(
        f"data-parallel: {tiles} tiles on {sms} SMs = {math.ceil(tiles / sms)} waves, ends at {dp}",
        loc="left",
    )
    ax = axes[1]  # split-K: tiles x splits units of iters / splits, then a reduction
    per = iters // splits
    for u in range(tiles * splits):
        unit(ax, u % sms, (u // sms) * per, per, u // splits, "abcd"[u % splits])
    sk = math.ceil(tiles * splits / sms) * per
    ax.axvspan(sk, sk + 1, color="0.8")
    ax.text(sk + 0.5, -0.6, "reduce", ha="center", fontsize=6)
    ax.set_title(
        f"split-K {splits}: {tiles * splits} blocks, then a reduction; ends at {sk} + reduce",
        loc="left",
    )
    ax = axes[2]  # stream-K: equal shares of the tiles x iters iterations
    total = tiles * iters
    share = math.ceil(total / sms)
    for sm in range(sms):
        it, end = sm * share, min((sm + 1) * share, total)
        t0 = 0
        while it < end:
            tile = it // iters
            n = min(end, (tile + 1) * iters) - it
            whole = n == iters
            unit(ax, sm, t0, n, tile, "" if whole else "*")
            it += n
            t0 += n
    ax.set_title(
        f"stream-K: {share} iterations per SM, ends at {share} + fix-up\n"
        "(* = partial tile, fixed up)",
        loc="left",
    )
    for ax in axes:
        ax.set_yticks(range(sms), [f"SM {s}" for s in range(sms)])
        ax.set_xlabel("K iterations (schematic)")
    axes[0].invert_yaxis()
    fig.tight_layout()
    plt.show()


_quiet()

if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "resources":
    _resources_main(json.loads(sys.argv[2]), sys.argv[3], sys.argv[4] == "scalar")


# --- tensor cores (notebook 07) ------------------------------------------------------------------


def fragment_maps() -> dict:
    """Which lane holds which element, and in which register, for ``mma.m16n8k8`` TF32: the PTX
    ISA's maps as written in ``numba_gemm.ptx.mma``'s docstring (A, B) and its model (D), as
    ``{name: (shape, [(row, col, lane, register)])}``."""
    from numba_gemm.ptx import mma

    lanes = np.arange(32)
    g, q = lanes >> 2, lanes & 3
    a = [(g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4)]
    b = [(q, g), (q + 4, g)]
    d = list(mma._ACC)
    out = {}
    for name, shape, regs in (
        ("A (16x8)", (16, 8), a),
        ("B (8x8)", (8, 8), b),
        ("C, D (16x8)", (16, 8), d),
    ):
        out[name] = (
            shape,
            [(int(r[i]), int(c[i]), i, k) for k, (r, c) in enumerate(regs) for i in range(32)],
        )
    return out


def draw_fragments() -> None:
    """The three fragment maps of :func:`fragment_maps`: each element shows the lane that holds
    it and the register (``a0``..), coloured by the lane's group ``g = lane >> 2``."""
    import matplotlib.pyplot as plt

    maps = fragment_maps()
    fig, axes = plt.subplots(1, 3, figsize=(13, 5.2), gridspec_kw={"width_ratios": [8, 8, 8]})
    prefix = {"A (16x8)": "a", "B (8x8)": "b", "C, D (16x8)": "d"}
    for ax, (name, (shape, cells)) in zip(axes, maps.items(), strict=True):
        grid = np.full(shape, -1)
        for r, c, lane, k in cells:
            assert grid[r, c] == -1, f"{name}: element ({r}, {c}) held twice"
            grid[r, c] = lane
            ax.text(c, r, f"{lane}\n{prefix[name]}{k}", ha="center", va="center", fontsize=6)
        assert (grid >= 0).all(), f"{name}: an element nobody holds"
        ax.imshow(grid >> 2, cmap="tab10", alpha=0.45, vmin=0, vmax=9)
        ax.set(title=f"{name}: lane / register", xlabel="column", ylabel="row")
        ax.set_xticks(range(shape[1]))
        ax.set_yticks(range(shape[0]))
    fig.suptitle(
        "mma.sync.m16n8k8 (TF32): every element is in exactly one lane's register; "
        "colour = group g = lane >> 2",
        fontsize=10,
    )
    fig.tight_layout()
    plt.show()
