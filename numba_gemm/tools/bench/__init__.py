"""``python -m numba_gemm.bench``: sgemm, every SGEMM stage and their peers, validated, then timed.

For each size ``(M, N, K)`` (``--sizes``): random standard-normal float32 operands A ``(M, K)``
and B ``(K, N)``, C-contiguous (row-major), drawn from ``numpy.random.default_rng(--seed)`` and
copied to the GPU once (``numba_gemm.tools.check.make_problem``); then

1. the reference: cuBLAS FP32 with TF32 forced off (whatever ``CUPY_TF32`` says) through CuPy
   (or PyTorch, ``--baseline``); without either, and on the simulator, a float64 NumPy product.
2. validation of everything before anything is timed (``numba_gemm.tools.check.validate``): cuBLAS
   FP32, cuBLAS TF32 (with ``--tf32`` or a TF32 stage), cuBLAS FP16 and BF16 (16-bit inputs, FP32
   sums; with a stage of that precision; BF16 through PyTorch only), Triton (optional peer,
   ``--peers``), ``sgemm``'s automatic choice (``auto``: ``plan_for(M, N, K)`` and the public
   call ``sgemm(a, b, out=c)``), and every selected stage with its tuned configuration
   (``plan_for(M, N, K, stage=name)``), each into a NaN-poisoned C; FAILED when the relative
   Frobenius error is not finite or exceeds the bound (``Stage.rtol``), or when it raises. A
   FAILED one is not timed.
3. two timings (the ``timing`` column), median, min and max ms over ``--reps``:
   ``kernel`` for all: CUDA events around each enqueued call, queued behind a hold kernel
   (``numba_gemm.tools.timing.time_launches``: GPU time alone); ``end_to_end`` for ``auto`` and the
   peers: the public call made back to back as a user makes it, events around a loop of ``n``
   calls (``n >= 20`` and ``>= 2 ms``; ``numba_gemm.tools.timing.time_calls``), time per call =
   elapsed / n. Slow implementations get fewer repeats or are SKIPPED (``--max-ms``).
4. the host overhead per call (``overhead.csv``, sizes ``--overhead-sizes``, default 64, 128,
   256): wall clock of 500 back-to-back calls with ``out=`` / 500, read before the synchronize,
   median of 5 loops, for sgemm on Numba/PyTorch/CuPy arrays, torch.mm, cupy.matmul and Triton.

Units: times in milliseconds (ms), overhead in microseconds (us); throughput in GFLOP/s =
``2*M*N*K / t / 1e9`` at the median time ``t`` in seconds; ``pct_cublas`` is the fraction
``GFLOP/s / cuBLAS GFLOP/s`` under the same timing (0.85 = 85 %), against cuBLAS in the row's
precision (FP32 and 3xTF32: cuBLAS FP32; TF32: cuBLAS TF32; FP16, BF16: cuBLAS FP16, BF16),
which the ``baseline`` column names; empty when that cuBLAS was not measured, never taken
against another precision.

Writes ``results.csv`` (columns :data:`CSV_COLUMNS`), ``results.json`` (``{"meta": ..., "rows":
..., "overhead": ...}``, meta keys :data:`META_KEYS`), ``overhead.csv`` (columns
:data:`OVERHEAD_COLUMNS`) and, unless ``--no-plot``, ``gflops_vs_size.png``,
``pct_cublas_largest.png`` and ``end_to_end_vs_size.png`` (one panel per precision) into
``--out`` (default ``bench/results/<gpu>/<UTC time>/``).

``--simulator`` re-runs the command under the Numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) to
check the pipeline on a CPU: host wall-clock times, not comparable with a GPU (``mode`` column).
There the options left out default to a run of about a minute on two cores
(``runner.resolve``: one ragged size, a stage or two per precision, one repeat, no warm-up, no
overhead table).

Modules: ``cli`` (options, main), ``sizes`` (``--sizes``, names), ``baselines`` (what is run:
peers, auto, stages), ``triton_matmul`` (the optional Triton peer), ``runner`` (validate, then
time), ``overhead`` (host cost per call), ``report`` (tables, CSV, JSON, metadata), ``plots``.
Importing this package loads only ``sizes`` and ``report``; the rest on first use.

Exit status: 0 when the benchmark ran, FAILED stages included (a summary line counts them);
2 for a usage error, or no CUDA GPU without ``--simulator``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .report import CSV_COLUMNS, META_KEYS, OVERHEAD_COLUMNS
from .sizes import gpu_slug, parse_sizes, size_label

#: Names loaded on first use (``from numba_gemm.bench import main`` works): name -> module.
_LAZY = {
    "main": "cli",
    "build_parser": "cli",
    "run": "runner",
    "format_table": "report",
    "format_overhead": "report",
    "write_csv": "report",
    "write_json": "report",
    "write_overhead_csv": "report",
    "collect_meta": "report",
    "plot": "plots",
    "make_baseline": "baselines",
}

__all__ = [
    "CSV_COLUMNS",
    "META_KEYS",
    "OVERHEAD_COLUMNS",
    "gpu_slug",
    "parse_sizes",
    "size_label",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
