"""Regenerate README's results table from a bench ``results.csv``.

Usage::

    python bench/results_table.py [CSV] [--readme README.md]

CSV defaults to the newest ``bench/results/<gpu>/<UTC YYYYmmdd-HHMMSS>/results.csv`` (newest by
the timestamp directory's name). The Markdown table has one row per size (``N`` for a square
N x N x N product, else ``MxNxK``), the cuBLAS FP32 (TF32 off) GFLOP/s, then one column per stage
with ``GFLOP/s (pct%)``, pct = % of cuBLAS FP32 at that size; FAILED and SKIPPED stages are shown
as such. GFLOP/s = 2*M*N*K / median time. The table replaces the text between
``<!-- results-table:start -->`` and ``<!-- results-table:end -->`` in the README (markers kept)
and is printed.

Exit status: 0 on success; 1 when there is no CSV, it cannot be read, or the README lacks the
markers (the README is then left unchanged).
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
BASELINES = ("cublas_fp32", "cublas_tf32")
NEEDED = ("M", "N", "K", "stage", "label", "status", "gflops", "pct_cublas", "mode")


def newest_csv(results_dir: Path) -> Path:
    """The ``results.csv`` under ``results_dir/<gpu>/<timestamp>/`` with the newest timestamp.

    Raises:
        FileNotFoundError: there is none.
    """
    found = sorted(results_dir.glob("*/*/results.csv"), key=lambda p: (p.parent.name, str(p)))
    if not found:
        raise FileNotFoundError(f"no {results_dir}/*/*/results.csv: run `python -m "
                                "numba_gemm.bench` first, or name a CSV")
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


def _gpu_of(csv_path: Path, rows: list[dict]) -> str:
    meta_path = csv_path.with_name("results.json")
    try:
        return json.loads(meta_path.read_text())["meta"]["gpu"]
    except (OSError, ValueError, KeyError, TypeError):
        return csv_path.parent.parent.name or "unknown GPU"


def markdown_table(csv_path: Path) -> str:
    """The Markdown block (a source line and the table) for one ``results.csv``."""
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    missing = set(NEEDED) - set(reader.fieldnames or ())
    if missing:
        raise ValueError(f"{csv_path} is not a bench results.csv: no column(s) "
                         f"{', '.join(sorted(missing))}")
    if not rows:
        raise ValueError(f"{csv_path} has no rows")
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))
    stages = list(dict.fromkeys(r["stage"] for r in rows if r["stage"] not in BASELINES))
    labels = {r["stage"]: r["label"] for r in rows}
    by = {(r["M"], r["N"], r["K"], r["stage"]): r for r in rows}
    baselines = [b for b in BASELINES if b in labels]
    with_pct = "cublas_fp32" in labels

    # "cuBLAS FP32 (TF32 off), CuPy" -> "cuBLAS FP32 (TF32 off) GFLOP/s"
    head = (["size"] + [f"{labels[b].split(',')[0]} GFLOP/s" for b in baselines]
            + [labels[s] for s in stages])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (
        len(head) - 1)) + "|"]
    for M, N, K in shapes:
        size = M if M == N == K else f"{M}x{N}x{K}"
        cells = [size] + [_cell(by.get((M, N, K, b)), False) for b in baselines]
        cells += [_cell(by.get((M, N, K, s)), with_pct) for s in stages]
        lines.append("| " + " | ".join(cells) + " |")

    try:
        shown = csv_path.resolve().relative_to(ROOT)
    except ValueError:
        shown = csv_path
    unit = ("GFLOP/s (% of cuBLAS FP32, TF32 off)" if with_pct
            else "GFLOP/s (no cuBLAS baseline in this run)")
    source = f"GPU: **{_gpu_of(csv_path, rows)}** · source: `{shown}` · cells: {unit}"
    if any(r["mode"] == "simulator" for r in rows):
        source += " · **simulator run: host wall-clock times, not comparable with a GPU**"
    return source + "\n\n" + "\n".join(lines)


def replace_between_markers(text: str, block: str) -> str:
    """``text`` with everything between :data:`START` and :data:`END` replaced by ``block``.

    Raises:
        ValueError: a marker is missing, or END comes before START.
    """
    i = text.find(START)
    j = text.find(END, i + len(START)) if i >= 0 else -1
    if i < 0 or j < 0:
        raise ValueError(f"the README needs the markers {START} and {END} (in that order) "
                         "around the place for the results table")
    return text[: i + len(START)] + "\n\n" + block + "\n\n" + text[j:]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python bench/results_table.py",
        description="Put the results table of a bench results.csv into README.md, between "
        f"{START} and {END}, and print it.",
    )
    ap.add_argument("csv", nargs="?", type=Path, default=None,
                    help="results.csv (default: the newest bench/results/*/*/results.csv)")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md",
                    help="README to update (default: the repository's README.md)")
    args = ap.parse_args(argv)
    try:
        csv_path = args.csv or newest_csv(ROOT / "bench" / "results")
        block = markdown_table(csv_path)
        readme = args.readme.read_text()
        args.readme.write_text(replace_between_markers(readme, block))
    except (OSError, ValueError) as e:
        print(f"results_table: {e}", file=sys.stderr)
        return 1
    print(block)
    print(f"\n(written into {args.readme})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
