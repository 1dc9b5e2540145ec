"""``python -m numba_gemm.bench``: every SGEMM stage against cuBLAS FP32, validated, then timed.

For each size ``(M, N, K)`` (``--sizes``): random standard-normal float32 operands A ``(M, K)`` and
B ``(K, N)``, C-contiguous (row-major), drawn from ``numpy.random.default_rng(--seed)`` and copied
to the GPU once; then

1. baseline: cuBLAS FP32 (TF32 off) through CuPy ``cupy.matmul`` (or PyTorch, ``--baseline``),
   timed like the stages; its product is the reference for validation (without a baseline, and on
   the simulator: a float64 NumPy product). ``--tf32`` adds a cuBLAS TF32 line (not a reference).
2. validation of every selected stage before any is timed: the stage with its tuned configuration
   for the shape (``api.stage_for``) runs ``sgemm`` into a NaN-poisoned C; the stage FAILED at
   that size when the relative Frobenius error against the reference is not finite or exceeds
   the stage's bound (``Stage.rtol``), or when it raises. A FAILED stage is reported, not timed.
3. timing of every validated stage (``launch.time_stage``: CUDA events, one pair per repeat,
   after warm-up): median, min and max ms over ``--reps``. Slow stages are timed with fewer
   repeats or SKIPPED (``--max-ms``).

Units: times in milliseconds (ms); throughput in GFLOP/s = ``2*M*N*K / t / 1e9`` at the median
time ``t`` in seconds; ``pct_cublas`` is the fraction ``GFLOP/s / cuBLAS FP32 GFLOP/s``
(0.85 = 85 %), empty without a baseline.

Writes ``results.csv`` (columns :data:`CSV_COLUMNS`), ``results.json`` (``{"meta": ..., "rows":
...}``, meta keys :data:`META_KEYS`) and, unless ``--no-plot``, ``gflops_vs_size.png`` and
``pct_cublas_largest.png`` into ``--out`` (default ``bench/results/<gpu>/<UTC time>/``).

``--simulator`` re-runs the command under the Numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) to
check the pipeline on a CPU: host wall-clock times, not comparable with a GPU (``mode`` column).

Exit status: 0 when the benchmark ran, FAILED stages included (a summary line counts them);
2 for a usage error, no CUDA GPU without ``--simulator``, or ``CUPY_TF32`` set.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import importlib.metadata
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from numba import cuda

from ._version import __version__
from .api import get_stage, sgemm, stage_for
from .kernels import STAGES
from .launch import sm_count, time_launches, time_stage
from .reference import cupy_or_none, reference_f64, rel_error, tf32_enabled
from .registry import TOLERANCE
from .tuning import source as tuning_source
from .vecmem import SIMULATOR

PROG = "python -m numba_gemm.bench"

#: Columns of ``results.csv``, in order.
CSV_COLUMNS = (
    "M", "N", "K", "stage", "label", "status", "median_ms", "min_ms", "max_ms", "gflops",
    "pct_cublas", "rel_error", "config", "mode",
)
#: Keys of ``results.json``'s ``meta``: GPU name (``"simulator"`` there), compute capability,
#: SM count, display driver and SM clocks (nvidia-smi, read at the end of the run; null when it
#: is missing), CUDA driver API version, package versions, UTC date, ``command`` (to reproduce
#: the run) and ``argv`` (``sys.argv`` as received), reps, warmup, seed, mode (``gpu`` or
#: ``simulator``), the baseline used, ``--max-ms``, sizes, stages and the tuning file the tuned
#: configurations came from (``numba_gemm.tuning.source``).
META_KEYS = (
    "gpu", "compute_capability", "sm_count", "driver", "cuda_driver", "clocks", "versions",
    "date", "command", "argv", "reps", "warmup", "seed", "mode", "baseline", "max_ms", "sizes",
    "stages", "tuning",
)

OK, FAILED, SKIPPED = "ok", "FAILED", "SKIPPED"
CUBLAS_FP32, CUBLAS_TF32 = "cublas_fp32", "cublas_tf32"
FP32_LABEL, TF32_LABEL = "cuBLAS FP32 (TF32 off)", "cuBLAS TF32"

#: The simulator runs every GPU thread as a Python thread: larger sizes take hours.
SIM_MAX_DIM = 128
#: A stage estimated above ``--max-ms`` per call is timed with this many repeats ...
SLOW_REPS = 3
#: ... and SKIPPED above this many times ``--max-ms``.
SKIP_FACTOR = 5

SIZE_FORMS = (
    "accepted forms, comma-separated: A..B (every power of two from A to B, both powers of two, "
    "A <= B, e.g. 128..4096), N (square N x N x N, e.g. 1000), MxNxK (e.g. 4096x1024x512)"
)
NO_GPU_MESSAGE = (
    "numba_gemm.bench: no CUDA GPU found; use --simulator to run the pipeline on the CPU "
    "(timings not comparable)"
)


# --- sizes and names --------------------------------------------------------------------------


def _positive_int(text: str, item: str) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"bad size {item!r}: {text!r} is not a positive integer; {SIZE_FORMS}")
    n = int(text)
    if n <= 0:
        raise ValueError(f"bad size {item!r}: dimensions must be >= 1; {SIZE_FORMS}")
    return n


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def parse_sizes(spec: str) -> list[tuple[int, int, int]]:
    """GEMM shapes ``(M, N, K)`` from a ``--sizes`` spec, in order, duplicates dropped.

    ``"128..512"`` -> ``[(128,)*3, (256,)*3, (512,)*3]``; ``"1000"`` -> ``[(1000, 1000, 1000)]``;
    ``"4096x1024x512"`` -> ``[(4096, 1024, 512)]``; items joined by commas, spaces allowed.

    Raises:
        ValueError: an empty spec or item, a non-integer, zero or negative dimension, an ``A..B``
            whose ends are not powers of two or with ``A > B``, or an ``MxNxK`` without exactly
            three dimensions; the message names the bad item and the accepted forms.
    """
    if not spec.strip():
        raise ValueError(f"empty size spec; {SIZE_FORMS}")
    sizes: list[tuple[int, int, int]] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(f"empty item in size spec {spec!r}; {SIZE_FORMS}")
        if ".." in item:
            lo, _, hi = item.partition("..")
            a, b = _positive_int(lo.strip(), item), _positive_int(hi.strip(), item)
            if not (_is_pow2(a) and _is_pow2(b)):
                raise ValueError(f"bad size range {item!r}: both ends must be powers of two; "
                                 f"{SIZE_FORMS}")
            if a > b:
                raise ValueError(f"bad size range {item!r}: start {a} > end {b}; {SIZE_FORMS}")
            new = [(n, n, n) for n in (2**e for e in range(a.bit_length() - 1, b.bit_length()))]
        elif "x" in item.lower():
            dims = item.lower().split("x")
            if len(dims) != 3:
                raise ValueError(f"bad size {item!r}: MxNxK needs exactly 3 dimensions, got "
                                 f"{len(dims)}; {SIZE_FORMS}")
            M, N, K = (_positive_int(d.strip(), item) for d in dims)
            new = [(M, N, K)]
        else:
            n = _positive_int(item, item)
            new = [(n, n, n)]
        sizes += [s for s in new if s not in sizes]
    return sizes


def size_label(M: int, N: int, K: int) -> str:
    """``"MxNxK"``."""
    return f"{M}x{N}x{K}"


def gpu_slug(name: str) -> str:
    """Directory-safe GPU name: lowercase, spaces -> ``-``, only ``[a-z0-9._-]`` kept.

    ``"NVIDIA H200"`` -> ``"nvidia-h200"``; ``"simulator"`` stays ``"simulator"``.
    """
    slug = re.sub(r"[^a-z0-9._-]", "", name.strip().lower().replace(" ", "-"))
    return re.sub(r"-{2,}", "-", slug).strip("-") or "unknown-gpu"


def gpu_name() -> str:
    """Name of the current CUDA device; ``"simulator"`` under the CUDA simulator."""
    if SIMULATOR:
        return "simulator"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def gpu_available() -> bool:
    """True when a real CUDA GPU and its driver are usable (False under the simulator)."""
    if SIMULATOR:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install: treat as no GPU
        return False


# --- baselines: cuBLAS through CuPy or PyTorch -------------------------------------------------


class CupyBaseline:
    """cuBLAS SGEMM through ``cupy.matmul`` on the null stream (the stream the stages use).

    CuPy picks its cuBLAS compute type per dtype in ``cupy._core._routines_linalg``: FP32 by
    default, TF32 (``CUBLAS_COMPUTE_32F_FAST_TF32``) with ``CUPY_TF32=1`` or
    ``set_compute_type(float32, COMPUTE_TYPE_TF32)``; the two ``*_mode`` context managers set it
    explicitly and restore it.
    """

    name = "CuPy"

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.version = cp.__version__
        self._linalg = getattr(getattr(cp, "_core", None), "_routines_linalg", None)

    def wrap(self, d_x: Any) -> Any:
        return self.cp.asarray(d_x)  # zero-copy through __cuda_array_interface__

    def empty(self, M: int, N: int) -> Any:
        return self.cp.empty((M, N), dtype=self.cp.float32)

    def matmul(self, a: Any, b: Any, c: Any) -> None:
        self.cp.matmul(a, b, out=c)

    def to_host(self, c: Any) -> np.ndarray:
        return self.cp.asnumpy(c)

    def _compute_type(self, label: str) -> int | None:
        lin = self._linalg
        if lin is None or not all(hasattr(lin, f) for f in
                                  ("get_compute_type", "set_compute_type", "compute_type_to_str")):
            return None
        return next((k for k in range(16) if lin.compute_type_to_str(k) == label), None)

    @contextlib.contextmanager
    def _mode(self, label: str) -> Iterator[None]:
        code = self._compute_type(label)
        if code is None:
            raise RuntimeError(f"this CuPy ({self.version}) has no cupy._core._routines_linalg."
                               f"set_compute_type to select {label}")
        lin = self._linalg
        prev = lin.get_compute_type(np.float32)
        lin.set_compute_type(np.float32, code)
        try:
            yield
        finally:
            lin.set_compute_type(np.float32, prev)

    @contextlib.contextmanager
    def fp32_mode(self) -> Iterator[None]:
        if self._compute_type("COMPUTE_TYPE_DEFAULT") is None:
            yield  # old CuPy: FP32 unless CUPY_TF32 is set, which main() refuses
            return
        with self._mode("COMPUTE_TYPE_DEFAULT"):
            yield

    def tf32_mode(self) -> contextlib.AbstractContextManager:
        return self._mode("COMPUTE_TYPE_TF32")


class TorchBaseline:
    """cuBLAS SGEMM through ``torch.matmul`` on PyTorch's default (null) stream.

    TF32 is chosen with ``torch.set_float32_matmul_precision``: ``"highest"`` = FP32,
    ``"high"`` = TF32 tensor cores allowed.
    """

    name = "PyTorch"

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.version = torch.__version__

    def wrap(self, d_x: Any) -> Any:
        return self.torch.as_tensor(d_x, device="cuda")  # zero-copy (__cuda_array_interface__)

    def empty(self, M: int, N: int) -> Any:
        return self.torch.empty((M, N), dtype=self.torch.float32, device="cuda")

    def matmul(self, a: Any, b: Any, c: Any) -> None:
        self.torch.matmul(a, b, out=c)

    def to_host(self, c: Any) -> np.ndarray:
        return c.cpu().numpy()

    @contextlib.contextmanager
    def _precision(self, value: str) -> Iterator[None]:
        prev = self.torch.get_float32_matmul_precision()
        self.torch.set_float32_matmul_precision(value)
        try:
            yield
        finally:
            self.torch.set_float32_matmul_precision(prev)

    def fp32_mode(self) -> contextlib.AbstractContextManager:
        return self._precision("highest")

    def tf32_mode(self) -> contextlib.AbstractContextManager:
        return self._precision("high")


def _torch_or_none() -> Any:
    try:
        import torch
    except Exception:  # ImportError, or a CUDA library mismatch at import
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def make_baseline(kind: str) -> CupyBaseline | TorchBaseline | None:
    """The cuBLAS baseline for ``--baseline kind`` (``cupy``, ``torch`` or ``none``).

    Falls back to the other library when the requested one is missing or sees no GPU, printing
    one line; None (and a line) when neither works, and on the simulator.
    """
    if kind == "none":
        return None
    if SIMULATOR:
        print("numba_gemm.bench: simulator: no cuBLAS baseline; validating against a float64 "
              "NumPy product", file=sys.stderr)
        return None
    order = ["cupy", "torch"] if kind == "cupy" else ["torch", "cupy"]
    names = {"cupy": "CuPy", "torch": "PyTorch"}
    for lib in order:
        mod = cupy_or_none() if lib == "cupy" else _torch_or_none()
        if mod is not None:
            base = CupyBaseline(mod) if lib == "cupy" else TorchBaseline(mod)
            if lib != kind:
                print(f"numba_gemm.bench: {names[kind]} is not importable or sees no GPU; "
                      f"using {names[lib]} {base.version} for the cuBLAS baseline",
                      file=sys.stderr)
            return base
    print("numba_gemm.bench: neither CuPy nor PyTorch is importable with a GPU; running without "
          "the cuBLAS baseline (% of cuBLAS left empty; install cupy-cuda12x or cupy-cuda13x)",
          file=sys.stderr)
    return None


# --- one size: baseline, validation, timing ----------------------------------------------------


def _row(M: int, N: int, K: int, stage: str, label: str, status: str, mode: str, *,
         timing: Any = None, pct: float | None = None, err: float | None = None,
         config: dict | None = None, note: str = "") -> dict:
    g = timing.gflops(M, N, K) if timing is not None else None
    return dict(
        M=M, N=N, K=K, stage=stage, label=label, status=status,
        median_ms=timing.median if timing is not None else None,
        min_ms=timing.min if timing is not None else None,
        max_ms=timing.max if timing is not None else None,
        gflops=g, pct_cublas=pct, rel_error=err, config=config or {}, mode=mode, note=note,
    )


def _error_note(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:200]}"


def _baseline_rows(base: Any, tf32: bool, d_a: Any, d_b: Any, shape: tuple[int, int, int],
                   args: argparse.Namespace, mode: str) -> tuple[np.ndarray, float, list[dict]]:
    """Time cuBLAS FP32 (and TF32); return (reference product, FP32 GFLOP/s, rows)."""
    M, N, K = shape
    a, b, c = base.wrap(d_a), base.wrap(d_b), base.empty(M, N)
    with base.fp32_mode():
        base.matmul(a, b, c)
        ref = base.to_host(c)
        t = time_launches(lambda: base.matmul(a, b, c), warmup=args.warmup, reps=args.reps)
    fp32_gflops = t.gflops(M, N, K)
    rows = [_row(M, N, K, CUBLAS_FP32, f"{FP32_LABEL}, {base.name}", OK, mode, timing=t, pct=1.0,
                 note="the reference for validation")]
    if tf32:
        try:
            with base.tf32_mode():
                base.matmul(a, b, c)
                err = rel_error(base.to_host(c), ref)
                t = time_launches(lambda: base.matmul(a, b, c), warmup=args.warmup,
                                  reps=args.reps)
            status = OK if err <= TOLERANCE["tf32"] else FAILED
            rows.append(_row(M, N, K, CUBLAS_TF32, f"{TF32_LABEL}, {base.name}", status, mode,
                             timing=t, pct=t.gflops(M, N, K) / fp32_gflops, err=err,
                             note="not a reference: TF32 inputs (10-bit mantissa)"))
        except Exception as e:
            rows.append(_row(M, N, K, CUBLAS_TF32, TF32_LABEL, FAILED, mode, note=_error_note(e)))
    return ref, fp32_gflops, rows


def _validate(st: Any, d_a: Any, d_b: Any, d_c: Any, poison: np.ndarray, ref: np.ndarray,
              shape: tuple[int, int, int]) -> tuple[str, float | None, str]:
    """(status, rel. error, note) of one run of ``st`` into a NaN-poisoned C."""
    if not st.supports(*shape):
        return SKIPPED, None, "shape not supported by the stage"
    try:
        d_c.copy_to_device(poison)
        sgemm(d_a, d_b, stage=st, out=d_c)
        err = rel_error(d_c.copy_to_host(), ref)
    except Exception as e:
        return FAILED, None, _error_note(e)
    if not err <= st.rtol:  # also catches inf (NaN/Inf in C)
        return FAILED, err, f"rel. error {err:.3g} > {st.rtol:g}"
    return OK, err, ""


def _time(st: Any, d_a: Any, d_b: Any, d_c: Any, args: argparse.Namespace
          ) -> tuple[Any, str]:
    """(Timing or None when SKIPPED, note). On a GPU, one synchronized launch first estimates
    the time per call, for the ``--max-ms`` rule."""
    reps, warmup, note = args.reps, args.warmup, ""
    if not SIMULATOR:
        t0 = time.perf_counter()
        st.launch(d_a, d_b, d_c, np.float32(1.0), np.float32(0.0), 0)
        cuda.synchronize()
        est = (time.perf_counter() - t0) * 1e3
        if est > SKIP_FACTOR * args.max_ms:
            return None, f"~{est:.0f} ms per call > {SKIP_FACTOR} x --max-ms {args.max_ms:g}"
        if est > args.max_ms:
            reps, warmup = min(reps, SLOW_REPS), 0
            note = f"~{est:.0f} ms per call > --max-ms {args.max_ms:g}: {reps} repeats"
    return time_stage(st, d_a, d_b, d_c, warmup=warmup, reps=reps), note


def _performance_warnings() -> tuple[type[Warning], ...]:
    """Numba's low-occupancy warning classes: numba-cuda 0.30 raises its own
    ``numba.cuda.core.errors.NumbaPerformanceWarning``, not a subclass of numba's."""
    classes = []
    for mod in ("numba.core.errors", "numba.cuda.core.errors"):
        with contextlib.suppress(ImportError, AttributeError):
            classes.append(importlib.import_module(mod).NumbaPerformanceWarning)
    return tuple(classes)


def run(args: argparse.Namespace) -> list[dict]:
    """Benchmark ``args.stages`` at ``args.sizes``; one row per (size, stage) and baseline.

    Each row has the keys of :data:`CSV_COLUMNS` (``config`` a dict) and ``note`` (why a stage
    FAILED or was SKIPPED). ``args`` is what ``main``'s parser returns.
    """
    with warnings.catch_warnings():
        # "Grid size 1 will likely result in GPU under-utilization": the timer's one-thread hold
        # kernel and small sizes; noise here.
        for cls in _performance_warnings():
            warnings.simplefilter("ignore", cls)
        return _run(args)


def _run(args: argparse.Namespace) -> list[dict]:
    mode = "simulator" if SIMULATOR else "gpu"
    stages = [get_stage(name) for name in args.stages]
    base = make_baseline(args.baseline)
    tf32 = args.tf32 and base is not None
    if args.tf32 and base is None:
        print("numba_gemm.bench: --tf32 needs a cuBLAS baseline (CuPy or PyTorch on a GPU); "
              "no TF32 line", file=sys.stderr)
    if tf32 and not SIMULATOR and cuda.get_current_device().compute_capability < (8, 0):
        print("numba_gemm.bench: TF32 needs compute capability >= 8.0; no TF32 line",
              file=sys.stderr)
        tf32 = False
    rng = np.random.default_rng(args.seed)
    bar = _progress(len(args.sizes) * len(stages))
    rows: list[dict] = []
    for M, N, K in args.sizes:
        shape = (M, N, K)
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        d_a, d_b = cuda.to_device(a), cuda.to_device(b)
        poison = np.full((M, N), np.nan, dtype=np.float32)
        d_c = cuda.to_device(poison)
        if bar is not None:
            bar.set_description(f"{size_label(*shape)} baseline")
        ref, cublas_gflops = None, None
        if base is not None:
            try:
                ref, cublas_gflops, base_rows = _baseline_rows(base, tf32, d_a, d_b, shape, args,
                                                               mode)
                rows += base_rows
            except Exception as e:  # the stages still run, validated against float64 NumPy
                rows.append(_row(M, N, K, CUBLAS_FP32, FP32_LABEL, FAILED, mode,
                                 note=_error_note(e)))
        if ref is None:
            ref = reference_f64(a, b)
        # validate every stage before timing any
        checked = []
        for stage in stages:
            if bar is not None:
                bar.set_description(f"{size_label(*shape)} validate {stage.name}")
            st = stage_for(stage.name, M, N, K)
            checked.append((st, *_validate(st, d_a, d_b, d_c, poison, ref, shape)))
        for st, status, err, note in checked:
            if bar is not None:
                bar.set_description(f"{size_label(*shape)} time {st.name}")
            timing = None
            if status == OK:
                try:
                    timing, note = _time(st, d_a, d_b, d_c, args)
                    status = OK if timing is not None else SKIPPED
                except Exception as e:
                    status, note = FAILED, f"timing: {_error_note(e)}"
            pct = (timing.gflops(M, N, K) / cublas_gflops
                   if timing is not None and cublas_gflops else None)
            rows.append(_row(M, N, K, st.name, st.label, status, mode, timing=timing, pct=pct,
                             err=err, config=dict(st.config), note=note))
            if bar is not None:
                bar.update(1)
        del d_a, d_b, d_c
    if bar is not None:
        bar.close()
    return rows


def _progress(total: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="step", leave=False, file=sys.stderr)


# --- output: table, CSV, JSON, plots -----------------------------------------------------------


def _fmt(x: float | None, spec: str) -> str:
    if x is None:
        return ""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def format_table(rows: list[dict]) -> str:
    """The results as an aligned text table, one line per row."""
    head = ("size", "stage", "status", "median ms", "GFLOP/s", "% cuBLAS", "rel. error", "note")
    body = [(size_label(r["M"], r["N"], r["K"]), r["stage"], r["status"],
             _fmt(r["median_ms"], ".4g"),
             _fmt(r["gflops"], ".0f" if (r["gflops"] or 0) >= 100 else ".3g"),
             _fmt(None if r["pct_cublas"] is None else 100 * r["pct_cublas"], ".1f"),
             _fmt(r["rel_error"], ".2e"), r["note"][:70]) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    right = {3, 4, 5, 6}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def _csv_value(key: str, v: Any) -> str:
    if v is None:
        return ""
    if key == "config":
        return json.dumps(v, separators=(",", ":"), sort_keys=True) if v else ""
    if isinstance(v, float):
        return format(v, ".6g")
    return str(v)


def write_csv(rows: list[dict], path: Path) -> None:
    """``results.csv``: a header of :data:`CSV_COLUMNS`, one line per row; empty = not measured."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in rows:
            w.writerow([_csv_value(k, r[k]) for k in CSV_COLUMNS])


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "inf"/"nan": not valid JSON numbers
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def write_json(meta: dict, rows: list[dict], path: Path) -> None:
    """``results.json``: ``{"meta": meta, "rows": rows}``."""
    path.write_text(json.dumps(_json_safe({"meta": meta, "rows": rows}), indent=1) + "\n")


def _version(*dists: str) -> str | None:
    for d in dists:
        try:
            return importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _nvidia_smi(uuid: str | None) -> dict:
    """Driver version and SM clocks from nvidia-smi; empty when it is missing or fails."""
    query = ["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm",
             "--format=csv,noheader"]
    for cmd in ([*query, f"--id={uuid}"], query) if uuid else (query,):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True)
        except (OSError, subprocess.SubprocessError):
            continue
        lines = out.stdout.strip().splitlines()
        fields = [x.strip() for x in lines[0].split(",")] if lines else []
        if len(fields) == 3:
            return dict(driver=fields[0], clocks=dict(sm=fields[1], max_sm=fields[2]))
    return {}


def collect_meta(args: argparse.Namespace, rows: list[dict], argv: Sequence[str]) -> dict:
    """Everything needed to read or reproduce the results (keys :data:`META_KEYS`)."""
    mode = "simulator" if SIMULATOR else "gpu"
    meta: dict[str, Any] = dict.fromkeys(META_KEYS)
    meta.update(gpu=gpu_name(), mode=mode, sm_count=sm_count())
    if not SIMULATOR:
        dev = cuda.get_current_device()
        meta["compute_capability"] = "{}.{}".format(*dev.compute_capability)
        with contextlib.suppress(Exception):
            from numba.cuda.cudadrv import driver

            meta["cuda_driver"] = ".".join(map(str, driver.driver.get_version()))
        uuid = None
        with contextlib.suppress(Exception):
            uuid = str(dev.uuid)
        meta.update(_nvidia_smi(uuid))  # clocks read after the run, at its end
    base = next((r["label"] for r in rows if r["stage"] == CUBLAS_FP32), None)
    meta.update(
        versions=dict(
            python=platform.python_version(), numba=_version("numba"),
            numba_cuda=_version("numba-cuda"), numba_gemm=_version("numba-gemm") or __version__,
            numpy=_version("numpy"),
            cupy=_version("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"),
            torch=_version("torch"),
        ),
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=("NUMBA_ENABLE_CUDASIM=1 " if SIMULATOR else "")
        + shlex.join(["python", "-m", "numba_gemm.bench", *argv]),
        argv=list(sys.argv), reps=args.reps, warmup=args.warmup,
        seed=args.seed, max_ms=args.max_ms, sizes=[list(s) for s in args.sizes],
        stages=list(args.stages),
        baseline=base or "none (validation against a float64 NumPy product)",
        tuning=tuning_source(),
    )
    return meta


def _series(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["stage"], []).append(r)
    return out


def plot(rows: list[dict], out_dir: Path, *, gpu: str, mode: str) -> list[Path]:
    """``gflops_vs_size.png`` and ``pct_cublas_largest.png`` in ``out_dir``; returns their paths.

    GFLOP/s per stage (and cuBLAS) against the size, as ``(M*N*K)^(1/3)`` on a log2 axis; % of
    cuBLAS FP32 per stage at the largest size (GFLOP/s when there is no baseline).
    Uses matplotlib's Agg canvas through ``matplotlib.figure.Figure`` (no pyplot, no display).
    """
    from matplotlib.figure import Figure

    on = "the CUDA simulator" if mode == "simulator" else gpu
    sim = " (host wall-clock, not comparable with a GPU)" if mode == "simulator" else ""
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))
    x_of = {s: (s[0] * s[1] * s[2]) ** (1 / 3) for s in shapes}
    names = {s: str(s[0]) if s[0] == s[1] == s[2] else size_label(*s) for s in shapes}
    paths = []

    fig = Figure(figsize=(9, 5.5))
    ax = fig.subplots()
    plotted = False
    for stage, rs in _series(rows).items():
        pts = sorted((x_of[(r["M"], r["N"], r["K"])], r["gflops"]) for r in rs
                     if r["status"] == OK and r["gflops"] and r["gflops"] > 0)
        if not pts:
            continue
        baseline = stage in (CUBLAS_FP32, CUBLAS_TF32)
        ax.plot(*zip(*pts, strict=True), marker="o",
                linestyle={CUBLAS_FP32: "--", CUBLAS_TF32: ":"}.get(stage, "-"),
                color="black" if baseline else None,
                linewidth=2.5 if baseline else 1.5, label=rs[0]["label"])
        plotted = True
    ax.set_xscale("log", base=2)
    ticks = sorted(set(x_of.values()))
    ax.set_xticks(ticks, [" / ".join(sorted({names[s] for s in shapes if x_of[s] == t}))
                          for t in ticks], rotation=30, ha="right")
    ax.minorticks_off()
    if plotted:
        ax.set_yscale("log")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel("size: N for N x N x N, else M x N x K (axis: (M*N*K)^(1/3), log2)")
    ax.set_ylabel("GFLOP/s = 2*M*N*K / median time")
    ax.set_title(f"SGEMM throughput on {on}{sim}", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    paths.append(out_dir / "gflops_vs_size.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")

    largest = max(shapes, key=lambda s: (s[0] * s[1] * s[2], s))
    at = [r for r in rows if (r["M"], r["N"], r["K"]) == largest]
    base = {r["stage"]: r for r in at if r["stage"] in (CUBLAS_FP32, CUBLAS_TF32)}
    stage_rows = [r for r in at if r["stage"] not in base]
    has_pct = CUBLAS_FP32 in base and base[CUBLAS_FP32]["status"] == OK
    key, scale = ("pct_cublas", 100.0) if has_pct else ("gflops", 1.0)
    heights = [(r[key] or 0.0) * scale if r["status"] == OK else 0.0 for r in stage_rows]
    fig = Figure(figsize=(9, 5))
    ax = fig.subplots()
    bars = ax.bar(range(len(stage_rows)), heights, color="tab:blue")
    ax.bar_label(bars, labels=[(f"{h:.0f}%" if has_pct else f"{h:.3g}") if r["status"] == OK
                               else r["status"] for h, r in zip(heights, stage_rows, strict=True)],
                 fontsize="small")
    ax.set_xticks(range(len(stage_rows)), [r["stage"] for r in stage_rows], rotation=30,
                  ha="right")
    title = f"{size_label(*largest)} on {on}{sim}"
    if has_pct:
        ax.axhline(100.0, color="black", linestyle="--", label=base[CUBLAS_FP32]["label"])
        ax.set_ylim(0, 1.2 * max([100.0, *heights]))
        ax.legend(fontsize="small", loc="upper left")
        ax.set_ylabel("% of cuBLAS FP32 GFLOP/s")
        tf = base.get(CUBLAS_TF32)
        if tf is not None and tf["status"] == OK and tf["pct_cublas"]:
            title += f"; cuBLAS TF32: {100 * tf['pct_cublas']:.0f}%"
        ax.set_title(f"% of cuBLAS FP32 at {title}", fontsize="medium")
    else:
        ax.set_ylabel("GFLOP/s = 2*M*N*K / median time")
        ax.set_title(f"GFLOP/s at {title} (no cuBLAS baseline)", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    paths.append(out_dir / "pct_cublas_largest.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    return paths


# --- command line ------------------------------------------------------------------------------


def _sizes_arg(text: str) -> list[tuple[int, int, int]]:
    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _number_arg(kind: type, low: float, what: str) -> Any:
    def conv(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not v >= low:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return v

    return conv


def build_parser() -> argparse.ArgumentParser:
    names = [s.name for s in STAGES]
    ap = argparse.ArgumentParser(
        prog=PROG, allow_abbrev=False,
        description="Validate, then time every SGEMM stage of numba_gemm against cuBLAS FP32 "
        "(TF32 off) measured in the same process; print a table and write results.csv, "
        "results.json and plots. GFLOP/s = 2*M*N*K / median time. Exit status: 0 when it ran "
        "(FAILED stages included), 2 for a usage error or no GPU.",
    )
    ap.add_argument("--sizes", type=_sizes_arg, default="128..4096", metavar="SPEC",
                    help="GEMM sizes (default 128..4096): comma-separated items, each A..B "
                    "(every power of two from A to B), N (square N x N x N) or MxNxK "
                    "(A: M x K, B: K x N), e.g. '128..1024,1000,4096x1024x512'")
    ap.add_argument("--stages", nargs="+", default=names, choices=names, metavar="NAME",
                    help=f"stages to run, in ladder order by default (all): {', '.join(names)}")
    ap.add_argument("--reps", type=_number_arg(int, 1, ">= 1"), default=20,
                    help="timed repeats per stage and size; the median is reported (default 20)")
    ap.add_argument("--warmup", type=_number_arg(int, 0, ">= 0"), default=3,
                    help="untimed calls before the repeats (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random operands (default 0)")
    ap.add_argument("--max-ms", type=_number_arg(float, 1e-9, "> 0"), default=200.0,
                    metavar="MS", dest="max_ms",
                    help="keeps a full sweep short (default 200): after validation, one "
                    "synchronized launch estimates each stage's time per call; above MS the "
                    f"stage is timed with {SLOW_REPS} repeats and no extra warm-up, above "
                    f"{SKIP_FACTOR} x MS it is SKIPPED (not timed). Ignored on the simulator")
    ap.add_argument("--baseline", choices=("cupy", "torch", "none"), default="cupy",
                    help="library that runs cuBLAS for the FP32 baseline (default cupy); when it "
                    "is missing or sees no GPU the other one is used, else none (%% of cuBLAS "
                    "left empty, validation against float64 NumPy)")
    ap.add_argument("--tf32", action="store_true",
                    help="also time cuBLAS with TF32 tensor cores ('cuBLAS TF32' line; needs "
                    "compute capability >= 8.0) through the baseline library: CuPy's float32 "
                    "compute type (cupy._core._routines_linalg.set_compute_type) or PyTorch's "
                    "set_float32_matmul_precision('high'); reset to FP32 afterwards")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="output directory (default bench/results/<gpu-name>/<UTC "
                    "YYYYmmdd-HHMMSS>/, relative to the current directory)")
    ap.add_argument("--no-plot", action="store_true", dest="no_plot",
                    help="do not draw gflops_vs_size.png and pct_cublas_largest.png")
    ap.add_argument("--simulator", action="store_true",
                    help="run the pipeline on the CPU: re-runs this command with "
                    f"NUMBA_ENABLE_CUDASIM=1; every dimension must be <= {SIM_MAX_DIM}; "
                    "timings are host wall-clock (mode 'simulator'), not comparable with a GPU")
    return ap


def _rerun_on_simulator(argv: Sequence[str]) -> int:
    # NUMBA_ENABLE_CUDASIM is read when numba is imported, which already happened here.
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    rest = [a for a in argv if a != "--simulator"]
    return subprocess.run([sys.executable, "-m", "numba_gemm.bench", *rest], env=env).returncode


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see ``--help``); returns the exit status (0 ran, 2 usage/no GPU).

    ``argv`` defaults to ``sys.argv[1:]``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        simulate = args.simulator or SIMULATOR
        big = [size_label(*s) for s in args.sizes if max(s) > SIM_MAX_DIM]
        if simulate and big:
            parser.error(f"the simulator runs every GPU thread as a Python thread: every "
                         f"dimension must be <= {SIM_MAX_DIM}, got {', '.join(big)} "
                         f"(try --sizes 16..64)")
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else 2
    if args.simulator and not SIMULATOR:
        return _rerun_on_simulator(argv)
    if not SIMULATOR and not gpu_available():
        print(NO_GPU_MESSAGE, file=sys.stderr)
        return 2
    if not SIMULATOR and args.baseline != "none" and tf32_enabled():
        print("numba_gemm.bench: CUPY_TF32 is set, so CuPy's float32 matmul would use TF32 "
              "tensor cores and the cuBLAS FP32 baseline would be wrong; unset it (--tf32 adds "
              "a separate TF32 line)", file=sys.stderr)
        return 2

    mode = "simulator" if SIMULATOR else "gpu"
    gpu = gpu_name()
    out = args.out or (Path("bench") / "results" / gpu_slug(gpu)
                       / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"))
    rows = run(args)
    out.mkdir(parents=True, exist_ok=True)
    meta = collect_meta(args, rows, argv)
    write_csv(rows, out / "results.csv")
    write_json(meta, rows, out / "results.json")
    if not args.no_plot:
        try:
            plot(rows, out, gpu=gpu, mode=mode)
        except ImportError:
            print("numba_gemm.bench: matplotlib is not installed: no plots "
                  "(pip install 'numba-gemm[bench]')", file=sys.stderr)

    print(f"GPU: {gpu}   mode: {mode}   baseline: {meta['baseline']}")
    print(f"timing: {'CUDA events' if mode == 'gpu' else 'host wall clock'}, median of "
          f"{args.reps} after {args.warmup} warm-up; GFLOP/s = 2*M*N*K / median time")
    if mode == "simulator":
        print("SIMULATOR: NUMBA_ENABLE_CUDASIM=1, host wall-clock times of Python threads: "
              "checks the pipeline, NOT comparable with a GPU")
    print(format_table(rows))
    stage_rows = [r for r in rows if r["stage"] not in (CUBLAS_FP32, CUBLAS_TF32)]
    counts = {s: sum(r["status"] == s for r in stage_rows) for s in (OK, FAILED, SKIPPED)}
    print(f"{len(stage_rows)} stage runs: {counts[OK]} ok, {counts[FAILED]} FAILED, "
          f"{counts[SKIPPED]} SKIPPED; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
