"""The bench's output: rows, the printed tables, ``results.csv``, ``results.json``,
``overhead.csv`` and the run's metadata.

Units: times in milliseconds (ms), host overhead in microseconds (us); GFLOP/s =
``2*M*N*K / t / 1e9`` at the median time ``t`` in seconds; ``pct_cublas`` a fraction of the
GFLOP/s of cuBLAS in the row's own precision (:data:`BASELINE_OF`) under the same timing (0.85 =
85 %), named by the ``baseline`` column.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.metadata
import json
import math
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...kernels import STAGES
from .sizes import short_size, size_label

#: Columns of ``results.csv``, in order. ``timing`` is ``kernel`` (CUDA events around each
#: enqueued call, queued behind a hold kernel: GPU time alone) or ``end_to_end`` (the public call
#: made back to back: time per call of a loop, host overhead included). ``precision`` is the
#: arithmetic of the row (``Stage.precision``: ``fp32``, ``tf32``, ``3xtf32``, ``fp16``, ``bf16``);
#: ``baseline`` the ``stage`` key of the cuBLAS row that ``pct_cublas`` is a fraction of (empty
#: with an empty ``pct_cublas``). New columns go at the end: readers of older files index by name.
CSV_COLUMNS = (
    "M",
    "N",
    "K",
    "stage",
    "label",
    "status",
    "median_ms",
    "min_ms",
    "max_ms",
    "gflops",
    "pct_cublas",
    "rel_error",
    "config",
    "mode",
    "timing",
    "precision",
    "baseline",
)
#: Columns of ``overhead.csv``: implementation, size (``N`` for N x N x N), host microseconds per
#: call (median of 5 loops of 500 back-to-back calls, clock read before the final synchronize).
OVERHEAD_COLUMNS = ("impl", "size", "us_per_call")
#: Keys of ``results.json``'s ``meta``: GPU name (``"simulator"`` there), compute capability,
#: SM count, display driver and SM clocks (nvidia-smi, read at the end of the run; null when it
#: is missing), CUDA driver API version, package versions, UTC date, ``command`` (to reproduce
#: the run) and ``argv`` (``sys.argv`` as received), reps, warmup, seed, mode (``gpu`` or
#: ``simulator``), the baseline used (cuBLAS FP32's label), ``baselines`` (per precision, the label
#: of the cuBLAS row its stages are rated against, null when it was not measured), ``reference``
#: (what validation compared with), ``peers``
#: (the other implementations timed), ``timings`` (what ``kernel`` and ``end_to_end`` mean),
#: ``--max-ms``, sizes, stages, ``overhead`` (sizes and method of ``overhead.csv``, or null)
#: and the tuning file the tuned configurations came from (``numba_gemm.plan.tuning.source``).
META_KEYS = (
    "gpu",
    "compute_capability",
    "sm_count",
    "driver",
    "cuda_driver",
    "clocks",
    "versions",
    "date",
    "command",
    "argv",
    "reps",
    "warmup",
    "seed",
    "mode",
    "baseline",
    "baselines",
    "reference",
    "peers",
    "timings",
    "max_ms",
    "sizes",
    "stages",
    "overhead",
    "tuning",
)

OK, FAILED, SKIPPED = "ok", "FAILED", "SKIPPED"
KERNEL, END_TO_END = "kernel", "end_to_end"
#: ``stage`` keys of the rows that are not ladder stages.
CUBLAS_FP32, CUBLAS_TF32, CUBLAS_FP16 = "cublas_fp32", "cublas_tf32", "cublas_fp16"
CUBLAS_BF16 = "cublas_bf16"
TRITON, AUTO = "triton", "auto"
#: The cuBLAS rows: the baselines.
CUBLAS = (CUBLAS_FP32, CUBLAS_TF32, CUBLAS_FP16, CUBLAS_BF16)
PEERS = (*CUBLAS, TRITON)
FP32_LABEL, TF32_LABEL = "cuBLAS FP32 (TF32 off)", "cuBLAS TF32"
FP16_LABEL = "cuBLAS FP16 (FP32 accumulate)"
BF16_LABEL = "cuBLAS BF16 (FP32 accumulate)"
TRITON_LABEL = "Triton FP32 (optional peer)"
AUTO_LABEL = "sgemm (auto)"

#: The cuBLAS row each precision is rated against: cuBLAS doing the same arithmetic. A tensor-core
#: stage against FP32 cuBLAS reads 1000 % where cuBLAS on the same tensor cores is as fast, so
#: TF32 is rated against cuBLAS TF32, FP16 against cuBLAS FP16 and BF16 against cuBLAS BF16
#: (16-bit inputs, FP32 sums, as ``cublasGemmEx`` with ``CUBLAS_COMPUTE_32F``). 3xTF32 is
#: FP32-accurate (FP32's error bound, ``kernels.stage.TOLERANCE``): it competes with FP32 cuBLAS,
#: the call it replaces. Without that baseline in the run, the ratio stays empty, never taken
#: against another precision.
BASELINE_OF = MappingProxyType(
    {
        "fp32": CUBLAS_FP32,
        "3xtf32": CUBLAS_FP32,
        "tf32": CUBLAS_TF32,
        "fp16": CUBLAS_FP16,
        "bf16": CUBLAS_BF16,
    }
)
#: The precision of the non-stage rows (the stages' is ``Stage.precision``).
PEER_PRECISION = MappingProxyType(
    {
        CUBLAS_FP32: "fp32",
        CUBLAS_TF32: "tf32",
        CUBLAS_FP16: "fp16",
        CUBLAS_BF16: "bf16",
        TRITON: "fp32",
    }
)
#: Short names of the baselines, for tables and legends.
BASELINE_NAMES = MappingProxyType(
    {
        CUBLAS_FP32: "cuBLAS FP32",
        CUBLAS_TF32: "cuBLAS TF32",
        CUBLAS_FP16: "cuBLAS FP16",
        CUBLAS_BF16: "cuBLAS BF16",
    }
)


def precision_of(row: dict) -> str:
    """The row's ``precision``; for a row without one (a file from before the column), that of
    its peer or stage, else ``fp32``."""
    if row.get("precision"):
        return row["precision"]
    if row["stage"] in PEER_PRECISION:
        return PEER_PRECISION[row["stage"]]
    name = row["stage"]
    if name == AUTO and isinstance(row.get("config"), dict):  # auto's config names its stage
        name = row["config"].get("stage")
    return next((s.precision for s in STAGES if s.name == name), "fp32")


TIMINGS = {
    KERNEL: "CUDA events around each enqueued call, all queued behind a hold kernel (GPU time "
    "alone); median of --reps after --warmup",
    END_TO_END: "the public call made back to back: CUDA events around a loop of n calls (no "
    "hold kernel; n >= 20 and >= 2 ms, at most --max-ms per loop), time per call = elapsed / n; "
    "median of --reps loops after --warmup",
}


def make_row(
    M: int,
    N: int,
    K: int,
    stage: str,
    label: str,
    status: str,
    mode: str,
    *,
    timing_kind: str = KERNEL,
    timing: Any = None,
    pct: float | None = None,
    err: float | None = None,
    config: dict | None = None,
    note: str = "",
    plan: dict | None = None,
    precision: str = "fp32",
    baseline: str = "",
) -> dict:
    """One result row: the keys of :data:`CSV_COLUMNS` (``config`` a dict), ``note`` (why a row
    FAILED or was SKIPPED, or what it is) and, for the package's own rows, ``plan`` (what
    ``plan_for`` chose: stage, config, variant, split_k, reason), JSON only.

    ``pct`` is a fraction of the GFLOP/s of the cuBLAS row ``baseline`` (a :data:`CUBLAS` key,
    :data:`BASELINE_OF` of ``precision``); both None/empty when there is no ratio."""
    g = timing.gflops(M, N, K) if timing is not None else None
    row = dict(
        M=M,
        N=N,
        K=K,
        stage=stage,
        label=label,
        status=status,
        median_ms=timing.median if timing is not None else None,
        min_ms=timing.min if timing is not None else None,
        max_ms=timing.max if timing is not None else None,
        gflops=g,
        pct_cublas=pct,
        rel_error=err,
        config=config or {},
        mode=mode,
        timing=timing_kind,
        precision=precision,
        baseline=baseline if pct is not None else "",
        note=note,
    )
    if plan is not None:
        row["plan"] = plan
    return row


# --- printed tables ---------------------------------------------------------------------------


def _fmt(x: float | None, spec: str) -> str:
    if x is None:
        return ""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def _align(head: Sequence[str], body: list[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def format_table(rows: list[dict]) -> str:
    """The results as an aligned text table, one line per row; ``% cuBLAS`` is against the
    cuBLAS named in the ``vs`` column (the row's precision: :data:`BASELINE_OF`)."""
    head = (
        "size",
        "stage",
        "precision",
        "timing",
        "status",
        "median ms",
        "GFLOP/s",
        "% cuBLAS",
        "vs",
        "rel. error",
        "note",
    )
    body = [
        (
            size_label(r["M"], r["N"], r["K"]),
            r["stage"],
            r.get("precision") or "",
            r.get("timing") or KERNEL,
            r["status"],
            _fmt(r["median_ms"], ".4g"),
            _fmt(r["gflops"], ".0f" if (r["gflops"] or 0) >= 100 else ".3g"),
            _fmt(None if r["pct_cublas"] is None else 100 * r["pct_cublas"], ".1f"),
            BASELINE_NAMES.get(r.get("baseline") or "", ""),
            _fmt(r["rel_error"], ".2e"),
            r["note"][:70],
        )
        for r in rows
    ]
    return _align(head, body, {5, 6, 7, 9})


def format_overhead(rows: list[dict]) -> str:
    """``overhead.csv`` rows as a text table: one line per implementation, one column per size
    (host microseconds per call)."""
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    us = {(r["impl"], r["size"]): r["us_per_call"] for r in rows}
    head = ["impl", *[f"{s}: us/call" for s in sizes]]
    body = [[i, *[_fmt(us.get((i, s)), ".1f") or "-" for s in sizes]] for i in impls]
    return _align(head, body, set(range(1, len(head))))


# --- files --------------------------------------------------------------------------------------


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
            w.writerow([_csv_value(k, r.get(k)) for k in CSV_COLUMNS])


def write_overhead_csv(rows: list[dict], path: Path) -> None:
    """``overhead.csv``: a header of :data:`OVERHEAD_COLUMNS`, one line per (impl, size)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(OVERHEAD_COLUMNS)
        for r in rows:
            w.writerow([_csv_value(k, r[k]) for k in OVERHEAD_COLUMNS])


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "inf"/"nan": not valid JSON numbers
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def write_json(
    meta: dict, rows: list[dict], path: Path, overhead: list[dict] | None = None
) -> None:
    """``results.json``: ``{"meta": meta, "rows": rows}`` (and ``"overhead": [...]`` when
    measured)."""
    doc: dict[str, Any] = {"meta": meta, "rows": rows}
    if overhead:
        doc["overhead"] = overhead
    path.write_text(json.dumps(_json_safe(doc), indent=1) + "\n")


# --- metadata -----------------------------------------------------------------------------------


def _version(*dists: str) -> str | None:
    for d in dists:
        try:
            return importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _nvidia_smi(uuid: str | None) -> dict:
    """Driver version and SM clocks from nvidia-smi; empty when it is missing or fails."""
    query = [
        "nvidia-smi",
        "--query-gpu=driver_version,clocks.sm,clocks.max.sm",
        "--format=csv,noheader",
    ]
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


def gpu_name() -> str:
    """Name of the current CUDA device; ``"simulator"`` under the CUDA simulator."""
    from ...device import info

    return info().name


def collect_meta(
    args: argparse.Namespace,
    rows: list[dict],
    argv: Sequence[str],
    *,
    reference: str,
    peers: Sequence[str] = (),
    overhead: dict | None = None,
) -> dict:
    """Everything needed to read or reproduce the results (keys :data:`META_KEYS`)."""
    from ..._version import __version__
    from ...device import SIMULATOR, info
    from ...plan.tuning import source as tuning_source

    mode = "simulator" if SIMULATOR else "gpu"
    meta: dict[str, Any] = dict.fromkeys(META_KEYS)
    dev = info()
    meta.update(gpu=dev.name, mode=mode, sm_count=dev.sm_count)
    if not SIMULATOR:
        from numba import cuda

        meta["compute_capability"] = "{}.{}".format(*dev.cc)
        with contextlib.suppress(Exception):
            from numba.cuda.cudadrv import driver

            meta["cuda_driver"] = ".".join(map(str, driver.driver.get_version()))
        uuid = None
        with contextlib.suppress(Exception):
            uuid = str(cuda.get_current_device().uuid)
        meta.update(_nvidia_smi(uuid))  # clocks read after the run, at its end
    base = next((r["label"] for r in rows if r["stage"] == CUBLAS_FP32), None)
    measured = {r["stage"]: r["label"] for r in rows if r["stage"] in CUBLAS and r["status"] == OK}
    meta.update(
        versions=dict(
            python=platform.python_version(),
            numba=_version("numba"),
            numba_cuda=_version("numba-cuda"),
            numba_gemm=_version("numba-gemm") or __version__,
            numpy=_version("numpy"),
            cupy=_version("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"),
            torch=_version("torch"),
            triton=_version("triton"),
        ),
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=("NUMBA_ENABLE_CUDASIM=1 " if SIMULATOR else "")
        + shlex.join(["python", "-m", "numba_gemm.bench", *argv]),
        argv=list(sys.argv),
        reps=args.reps,
        warmup=args.warmup,
        seed=args.seed,
        max_ms=args.max_ms,
        sizes=[list(s) for s in args.sizes],
        stages=list(args.stages),
        baseline=base or "none (validation against a float64 NumPy product)",
        baselines={p: measured.get(b) for p, b in BASELINE_OF.items()},
        reference=reference,
        peers=list(peers),
        timings=dict(TIMINGS),
        overhead=overhead,
        tuning=tuning_source(),
    )
    return meta


def short_sizes(rows: list[dict]) -> list[str]:
    """Size names (``N`` or ``MxNxK``) of the rows, in order, once each."""
    return list(dict.fromkeys(short_size(r["M"], r["N"], r["K"]) for r in rows))
