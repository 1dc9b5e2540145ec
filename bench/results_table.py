"""Regenerate README's results tables from a bench ``results.csv``.

Usage::

    python bench/results_table.py [CSV] [--readme README.md]

CSV defaults to the newest ``bench/results/<gpu>/<UTC YYYYmmdd-HHMMSS>/results.csv`` (newest by
the timestamp directory's name). Two blocks, each printed and written into the README between
its markers (markers kept):

- ``<!-- results-table:start -->`` / ``<!-- results-table:end -->`` (required): **kernel time**
  (the CSV's ``timing == "kernel"`` rows; a CSV from before the ``timing`` column is all kernel
  time). One row per size (``N`` for a square N x N x N product, else ``MxNxK``), the cuBLAS
  FP32 (TF32 off) GFLOP/s (and cuBLAS TF32), then one column per implementation (Triton,
  ``sgemm (auto)``, each stage) with ``GFLOP/s (pct%)``, pct = % of cuBLAS FP32 at that size;
  FAILED and SKIPPED shown as such.
- ``<!-- e2e-table:start -->`` / ``<!-- e2e-table:end -->`` (optional: written only when the
  README has both): **end-to-end time** of the public call made back to back (``timing ==
  "end_to_end"``): per size, cuBLAS FP32's and ``sgemm (auto)``'s GFLOP/s (and Triton's), the %
  of cuBLAS, auto's kernel-time GFLOP/s and the stage it picked; then, when ``overhead.csv``
  lies next to the CSV, the host overhead per call (microseconds) per implementation and size.

GFLOP/s = 2*M*N*K / median time.

Exit status: 0 on success; 1 when there is no CSV, it cannot be read, or the README lacks the
results-table markers (the README is then left unchanged).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = "<!-- results-table:start -->"
END = "<!-- results-table:end -->"
E2E_START = "<!-- e2e-table:start -->"
E2E_END = "<!-- e2e-table:end -->"
BASELINES = ("cublas_fp32", "cublas_tf32")
NEEDED = ("M", "N", "K", "stage", "label", "status", "gflops", "pct_cublas", "mode")
OVERHEAD_NEEDED = ("impl", "size", "us_per_call")


def newest_csv(results_dir: Path) -> Path:
    """The ``results.csv`` under ``results_dir/<gpu>/<timestamp>/`` with the newest timestamp.

    Raises:
        FileNotFoundError: there is none.
    """
    found = sorted(results_dir.glob("*/*/results.csv"), key=lambda p: (p.parent.name, str(p)))
    if not found:
        raise FileNotFoundError(
            f"no {results_dir}/*/*/results.csv: run `python -m numba_gemm.bench` first, or name "
            "a CSV"
        )
    return found[-1]


def _gflops(text: str) -> str:
    g = float(text)
    return f"{g:,.0f}" if g >= 100 else f"{g:.3g}"


def _cell(row: dict | None, with_pct: bool) -> str:
    if row is None:
        return "-"
    if row["status"] != "ok":
        return row["status"]
    if not row["gflops"]:
        return "-"
    cell = _gflops(row["gflops"])
    if with_pct and row["pct_cublas"]:
        cell += f" ({100 * float(row['pct_cublas']):.0f}%)"
    return cell


def _meta(csv_path: Path) -> dict:
    """``meta`` of the ``results.json`` next to the CSV; empty when there is none."""
    try:
        meta = json.loads(csv_path.with_name("results.json").read_text())["meta"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _gpu_of(csv_path: Path) -> str:
    return _meta(csv_path).get("gpu") or csv_path.parent.parent.name or "unknown GPU"


def _shown(path: Path) -> Path:
    try:
        return path.resolve().relative_to(ROOT)
    except ValueError:
        return path


def _timing(row: dict) -> str:
    return row.get("timing") or "kernel"  # CSVs from before the column: kernel time


def read_rows(csv_path: Path) -> list[dict]:
    """The rows of a bench ``results.csv``.

    Raises:
        OSError: it cannot be read.
        ValueError: it lacks a needed column or has no rows.
    """
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    missing = set(NEEDED) - set(reader.fieldnames or ())
    if missing:
        raise ValueError(
            f"{csv_path} is not a bench results.csv: no column(s) {', '.join(sorted(missing))}"
        )
    if not rows:
        raise ValueError(f"{csv_path} has no rows")
    return rows


def _size(M: str, N: str, K: str) -> str:
    return M if M == N == K else f"{M}x{N}x{K}"


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    rule = "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"
    return ["| " + " | ".join(head) + " |", rule] + ["| " + " | ".join(c) + " |" for c in body]


def markdown_table(csv_path: Path) -> str:
    """The kernel-time Markdown block (a source line and the table) for one ``results.csv``."""
    rows = [r for r in read_rows(csv_path) if _timing(r) == "kernel"]
    if not rows:
        raise ValueError(f"{csv_path} has no kernel-time rows")
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))
    stages = list(dict.fromkeys(r["stage"] for r in rows if r["stage"] not in BASELINES))
    labels = {r["stage"]: r["label"] for r in rows}
    by = {(r["M"], r["N"], r["K"], r["stage"]): r for r in rows}
    baselines = [b for b in BASELINES if b in labels]
    with_pct = "cublas_fp32" in labels

    # "cuBLAS FP32 (TF32 off), CuPy" -> "cuBLAS FP32 (TF32 off) GFLOP/s"
    head = ["size"]
    head += [f"{labels[b].split(',')[0]} GFLOP/s" for b in baselines]
    head += [labels[s] for s in stages]
    body = []
    for M, N, K in shapes:
        cells = [_size(M, N, K)] + [_cell(by.get((M, N, K, b)), False) for b in baselines]
        cells += [_cell(by.get((M, N, K, s)), with_pct) for s in stages]
        body.append(cells)

    unit = (
        "GFLOP/s (% of cuBLAS FP32, TF32 off)"
        if with_pct
        else "GFLOP/s (no cuBLAS baseline in this run)"
    )
    source = (
        f"GPU: **{_gpu_of(csv_path)}** · source: `{_shown(csv_path)}` · timing: kernel (CUDA "
        f"events behind a hold kernel) · cells: {unit}"
    )
    if any(r["mode"] == "simulator" for r in rows):
        source += " · **simulator run: host wall-clock times, not comparable with a GPU**"
    return source + "\n\n" + "\n".join(_table(head, body))


def read_overhead(path: Path) -> list[dict] | None:
    """The rows of an ``overhead.csv`` (``impl,size,us_per_call``), None when there is none.

    Raises:
        ValueError: it lacks a needed column.
    """
    if not path.exists():
        return None
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    missing = set(OVERHEAD_NEEDED) - set(reader.fieldnames or ())
    if missing:
        raise ValueError(f"{path} is not a bench overhead.csv: no column(s) {sorted(missing)}")
    return rows


def overhead_table(rows: list[dict]) -> str:
    """Host microseconds per call: one row per implementation, one column per size."""
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    us = {(r["impl"], r["size"]): r["us_per_call"] for r in rows}
    body = []
    for impl in impls:
        cells = [f"`{impl}`"]
        for s in sizes:
            v = us.get((impl, s))
            cells.append(f"{float(v):.1f}" if v else "-")
        body.append(cells)
    return "\n".join(_table(["implementation"] + [f"{s}: us/call" for s in sizes], body))


def e2e_markdown(csv_path: Path) -> str | None:
    """The end-to-end Markdown block (source line, table, and the host-overhead table when
    ``overhead.csv`` lies next to the CSV); None when the CSV has no end-to-end rows."""
    rows = read_rows(csv_path)
    e2e = [r for r in rows if _timing(r) == "end_to_end"]
    if not e2e:
        return None
    kern = {(r["M"], r["N"], r["K"], r["stage"]): r for r in rows if _timing(r) == "kernel"}
    by = {(r["M"], r["N"], r["K"], r["stage"]): r for r in e2e}
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in e2e))
    labels = {r["stage"]: r["label"] for r in e2e}
    others = [s for s in labels if s not in ("cublas_fp32", "auto")]
    with_pct = "cublas_fp32" in labels
    head = ["size"]
    if with_pct:
        head.append(f"{labels['cublas_fp32'].split(',')[0]} GFLOP/s")
    head += [f"{labels[s]} GFLOP/s" for s in ["auto", *others] if s in labels]
    head += ["sgemm (auto) kernel-time GFLOP/s", "auto picked"]
    body = []
    for M, N, K in shapes:
        cells = [_size(M, N, K)]
        if with_pct:
            cells.append(_cell(by.get((M, N, K, "cublas_fp32")), False))
        cells += [_cell(by.get((M, N, K, s)), with_pct) for s in ["auto", *others] if s in labels]
        auto_k = kern.get((M, N, K, "auto"))
        cells.append(_cell(auto_k, with_pct))
        picked = "-"
        if auto_k is not None:
            try:
                picked = f"`{json.loads(auto_k.get('config') or '{}')['stage']}`"
            except (ValueError, KeyError, TypeError):
                pass
        cells.append(picked)
        body.append(cells)
    unit = "GFLOP/s (% of cuBLAS FP32 end to end)" if with_pct else "GFLOP/s (no cuBLAS baseline)"
    source = (
        f"GPU: **{_gpu_of(csv_path)}** · source: `{_shown(csv_path)}` · timing: end to end (the "
        f"public call with `out=`, back to back: CUDA events around a loop of calls, time per "
        f"call = elapsed / calls) · cells: {unit}"
    )
    if any(r["mode"] == "simulator" for r in e2e):
        source += " · **simulator run: host wall-clock times, not comparable with a GPU**"
    block = source + "\n\n" + "\n".join(_table(head, body))
    overhead = read_overhead(csv_path.with_name("overhead.csv"))
    if overhead:
        how = _meta(csv_path).get("overhead") or {}
        n, loops = how.get("calls", 500), how.get("loops", 5)
        block += (
            f"\n\nHost overhead per call, `{_shown(csv_path.with_name('overhead.csv'))}`: "
            f"microseconds of host time per call with `out=` (wall clock of {n} back-to-back "
            f"calls / {n}, read before the synchronize; median of {loops} loops)\n\n"
            + overhead_table(overhead)
        )
    return block


def has_markers(text: str, start: str, end: str) -> bool:
    """Whether ``text`` has ``start`` followed by ``end``."""
    i = text.find(start)
    return i >= 0 and text.find(end, i + len(start)) >= 0


def replace_between_markers(text: str, block: str, start: str = START, end: str = END) -> str:
    """``text`` with everything between ``start`` and ``end`` replaced by ``block``.

    Raises:
        ValueError: a marker is missing, or ``end`` comes before ``start``.
    """
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0:
        raise ValueError(
            f"the README needs the markers {start} and {end} (in that order) around the place "
            "for the table"
        )
    return text[: i + len(start)] + "\n\n" + block + "\n\n" + text[j:]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python bench/results_table.py",
        description="Put the results tables of a bench results.csv into README.md, between "
        f"{START} and {END} (kernel time) and, when the README has them, {E2E_START} and "
        f"{E2E_END} (end to end, host overhead), and print them.",
    )
    ap.add_argument(
        "csv",
        nargs="?",
        type=Path,
        default=None,
        help="results.csv (default: the newest bench/results/*/*/results.csv)",
    )
    ap.add_argument(
        "--readme",
        type=Path,
        default=ROOT / "README.md",
        help="README to update (default: the repository's README.md)",
    )
    args = ap.parse_args(argv)
    notes = []
    try:
        csv_path = args.csv or newest_csv(ROOT / "bench" / "results")
        block = markdown_table(csv_path)
        e2e = e2e_markdown(csv_path)
        readme = args.readme.read_text()
        text = replace_between_markers(readme, block)
        if has_markers(text, E2E_START, E2E_END):
            if e2e is not None:
                text = replace_between_markers(text, e2e, E2E_START, E2E_END)
            else:
                notes.append(f"{csv_path} has no end-to-end rows: {E2E_START} left as it was")
        elif e2e is not None:
            notes.append(
                f"the README has no {E2E_START} ... {E2E_END}: end-to-end table printed only"
            )
        args.readme.write_text(text)
    except (OSError, ValueError) as e:
        print(f"results_table: {e}", file=sys.stderr)
        return 1
    print(block)
    if e2e is not None:
        print("\n" + e2e)
    for note in notes:
        print(f"results_table: {note}", file=sys.stderr)
    print(f"\n(written into {args.readme})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
