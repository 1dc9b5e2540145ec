"""``python -m numba_gemm.tools.results_table``: README's results tables from a bench run.

Usage::

    python -m numba_gemm.tools.results_table [CSV] [--readme README.md] [--all-sizes]

Paths are relative to the current directory (the repository root, as for the bench's ``--out``):
CSV defaults to the newest ``bench/results/<gpu>/<UTC YYYYmmdd-HHMMSS>/results.csv`` (newest by
the timestamp directory's name), the README to ``README.md``. Each block (a source line naming
the precision, GPU, CSV, timing and what a cell holds, then the table) is printed and written
into the README between its markers (markers kept); a block whose markers the README lacks is
printed only, and markers whose block the CSV cannot fill are left as they were (a note on
stderr says which). The tables show the sizes of :data:`README_SIZES` that the run has (all of
the run's sizes with ``--all-sizes``, or when it has none of them: a simulator run, a run of other
sizes); the CSV and the bench's plots keep every size:

- ``<!-- results-table:<p>:start -->`` / ``<!-- results-table:<p>:end -->``, one pair per
  precision group ``<p>`` (:data:`GROUPS`, grouped as the bench plots' panels): ``fp32`` (the
  FP32 stages, ``sgemm (auto)`` and Triton), ``tf32`` (the TF32 and 3xTF32 stages), ``fp16``
  (the FP16 stages). **Kernel time** (the CSV's ``timing == "kernel"`` rows). One row per shown
  size that the group has a non-cuBLAS row at (``N`` for a square N x N x N product, else
  ``MxNxK``); the GFLOP/s of the cuBLAS rows that the group is rated against (FP32: cuBLAS FP32,
  TF32 off; TF32 / 3xTF32: cuBLAS TF32 and cuBLAS FP32; FP16: cuBLAS FP16); then one column per
  implementation (``sgemm (auto)``, Triton, then the group's stages in the CSV's order), each
  cell ``GFLOP/s (pct%)`` with pct = the row's ``pct_cublas``, the % of the cuBLAS row that its
  ``baseline`` column names at that size (FP32 and 3xTF32: cuBLAS FP32; TF32: cuBLAS TF32; FP16:
  cuBLAS FP16; ``tools.bench.report.BASELINE_OF``); FAILED and SKIPPED shown as such (a stage
  SKIPPED at every size gets no column). A group has a table when the CSV has a kernel row of its
  precisions other than cuBLAS's, and a row per size that one of them took. A README from before
  these markers may hold the FP32 table between ``<!-- results-table:start -->`` and ``<!--
  results-table:end -->`` instead.
- ``<!-- e2e-table:start -->`` / ``<!-- e2e-table:end -->``: **end-to-end time** of the public
  call made back to back (``timing == "end_to_end"``, FP32 rows): per shown size, cuBLAS FP32's
  and ``sgemm (auto)``'s GFLOP/s (and Triton's), the % of cuBLAS FP32, auto's kernel-time
  GFLOP/s and the stage it picked; then, when ``overhead.csv`` lies next to the CSV, the host
  overhead per call (microseconds): one row per size of that file, one column per
  implementation.

Older CSVs: without the ``timing`` column every row is kernel time; without the ``precision``
and ``baseline`` columns every ``pct_cublas`` is against cuBLAS FP32, so only the ``fp32`` group
is written, from the rows whose stage is an FP32 stage of ``STAGES`` (and the peers).

GFLOP/s = 2*M*N*K / median time.

Exit status: 0 on success; 1 when there is no CSV, it cannot be read, or the README has the
markers of none of the CSV's groups (the README is then left unchanged).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .bench.report import AUTO, BASELINE_OF, CUBLAS, CUBLAS_FP32, SKIPPED, TRITON, precision_of

#: Where the bench writes its runs, relative to the current directory (the repository root).
RESULTS_DIR = Path("bench") / "results"
#: The precision groups, in README order: (marker key, title, precisions of its rows). The bench's
#: plot panels (``tools.bench.plots.PANELS``) group the same way; 3xTF32 sits with TF32 (both
#: built on the TF32 MMA) though it is rated against cuBLAS FP32, whose column that table then
#: shows beside cuBLAS TF32's.
GROUPS = (
    ("fp32", "FP32", ("fp32",)),
    ("tf32", "TF32 / 3xTF32", ("tf32", "3xtf32")),
    ("fp16", "FP16", ("fp16",)),
)
#: How the tables name a precision.
PRECISION_NAMES = {"fp32": "FP32", "tf32": "TF32", "3xtf32": "3xTF32", "fp16": "FP16"}
#: The markers of the single table of READMEs from before the per-precision ones: the FP32
#: table's place where the README lacks the ``fp32`` pair.
LEGACY_MARKERS = ("<!-- results-table:start -->", "<!-- results-table:end -->")
E2E_START = "<!-- e2e-table:start -->"
E2E_END = "<!-- e2e-table:end -->"
NEEDED = ("M", "N", "K", "stage", "label", "status", "gflops", "pct_cublas", "mode")
#: Columns a CSV has from the per-precision baselines on; without them: only the FP32 group.
PRECISION_COLUMNS = ("precision", "baseline")
OVERHEAD_NEEDED = ("impl", "size", "us_per_call")
#: The sizes README's tables show where the run has them (``N`` for N x N x N, else ``MxNxK``): a
#: small and a medium product and the large powers of two, so that a table reads at a glance; the
#: plots (ragged sizes included) and the CSV keep every size of the run.
README_SIZES = ("128", "512", "1024", "2048", "4096")


def markers(group: str) -> tuple[str, str]:
    """The start and end markers of a precision group's table (``fp32``, ``tf32``, ``fp16``)."""
    return f"<!-- results-table:{group}:start -->", f"<!-- results-table:{group}:end -->"


def _readme_markers(text: str, group: str) -> tuple[str, str] | None:
    """The markers of ``group``'s table in ``text`` (for ``fp32``, else the legacy pair); None
    when it has neither."""
    for pair in (markers(group), LEGACY_MARKERS) if group == "fp32" else (markers(group),):
        if has_markers(text, *pair):
            return pair
    return None


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
    """``path`` relative to the current directory where it lies under it (the README's source
    lines name repository paths), else as given."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _timing(row: dict) -> str:
    return row.get("timing") or "kernel"  # CSVs from before the column: kernel time


def _has_precisions(rows: list[dict]) -> bool:
    """Whether the rows come from a CSV with the ``precision`` and ``baseline`` columns."""
    return all(c in rows[0] for c in PRECISION_COLUMNS)


def _baseline(row: dict) -> str:
    """The ``stage`` key of the cuBLAS row that the row's ``pct_cublas`` is against; empty
    without a ratio. A CSV from before the ``baseline`` column rated every row against cuBLAS
    FP32."""
    if "baseline" in row:
        return row["baseline"] or ""
    return CUBLAS_FP32 if row["pct_cublas"] else ""


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


def _shown_shapes(
    shapes: list[tuple[str, str, str]], sizes: Sequence[str] | None
) -> list[tuple[str, str, str]]:
    """The ``(M, N, K)`` of ``shapes`` whose size (:func:`_size`) is in ``sizes``, in the run's
    order; all of them where ``sizes`` is None or none of them is in it."""
    if sizes is None:
        return shapes
    shown = [s for s in shapes if _size(*s) in sizes]
    return shown or shapes


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    rule = "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"
    return ["| " + " | ".join(head) + " |", rule] + ["| " + " | ".join(c) + " |" for c in body]


def _short(label: str) -> str:
    """A cuBLAS row's label without its library: "cuBLAS FP32 (TF32 off), CuPy" -> "cuBLAS FP32
    (TF32 off)"."""
    return label.split(",")[0]


def _unit(own: list[dict], labels: dict) -> str:
    """What a cell holds: GFLOP/s and the % of the cuBLAS rows the group's rows are rated
    against (by their ``baseline``)."""
    of: dict[str, list[str]] = {}
    for r in own:
        b = _baseline(r)
        if r["pct_cublas"] and b:
            names = of.setdefault(b, [])
            p = PRECISION_NAMES.get(precision_of(r), precision_of(r))
            if p not in names:
                names.append(p)
    if not of:
        return "GFLOP/s (no cuBLAS baseline in this run)"
    if len(of) == 1:
        (b,) = of
        return f"GFLOP/s, in parentheses the % of {_short(labels.get(b, b))} at that size"
    parts = [f"{_short(labels.get(b, b))} for {', '.join(ps)}" for b, ps in of.items()]
    return (
        "GFLOP/s, in parentheses the % of cuBLAS in the stage's precision at that size: "
        + "; ".join(parts)
    )


def _group_table(
    csv_path: Path,
    rows: list[dict],
    title: str,
    precisions: tuple[str, ...],
    sizes: Sequence[str] | None = README_SIZES,
) -> str | None:
    """The kernel-time block of one precision group (a source line that names the group, then
    the table), from the CSV's kernel rows: one line per shown size (:func:`_shown_shapes`) the
    group has a non-cuBLAS row at; None when it has none."""
    own = [r for r in rows if r["stage"] not in CUBLAS and precision_of(r) in precisions]
    if not own:
        return None
    wanted = list(dict.fromkeys(BASELINE_OF[p] for p in precisions))
    own_ids = {id(r) for r in own}
    mine = [r for r in rows if r["stage"] in wanted or id(r) in own_ids]
    labels = {r["stage"]: r["label"] for r in mine}
    baselines = [b for b in wanted if b in labels]
    first = [s for s in (AUTO, TRITON) if s in labels]
    impls = first + [s for s in dict.fromkeys(r["stage"] for r in own) if s not in first]
    # a stage that took none of the sizes (the few-rows stages on squares) gets no column
    impls = [s for s in impls if any(r["stage"] == s and r["status"] != SKIPPED for r in own)]
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in own if r["status"] != SKIPPED))
    shapes = _shown_shapes(shapes, sizes)
    by = {(r["M"], r["N"], r["K"], r["stage"]): r for r in mine}

    head = ["size"]
    head += [f"{_short(labels[b])} GFLOP/s" for b in baselines]
    head += [labels[s] for s in impls]
    body = []
    for M, N, K in shapes:
        cells = [_size(M, N, K)] + [_cell(by.get((M, N, K, b)), False) for b in baselines]
        cells += [_cell(by.get((M, N, K, s)), True) for s in impls]
        body.append(cells)

    source = (
        f"**{title}** · GPU: **{_gpu_of(csv_path)}** · source: `{_shown(csv_path)}` · timing: "
        f"kernel (CUDA events behind a hold kernel) · cells: {_unit(own, labels)}"
    )
    if any(r["mode"] == "simulator" for r in mine):
        source += " · **simulator run: host wall-clock times, not comparable with a GPU**"
    return source + "\n\n" + "\n".join(_table(head, body))


def markdown_tables(csv_path: Path, sizes: Sequence[str] | None = README_SIZES) -> dict[str, str]:
    """The kernel-time Markdown blocks of one ``results.csv``, by group key (:data:`GROUPS`, in
    that order): one for each group the CSV has rows of; ``fp32`` only for a CSV from before the
    ``precision`` and ``baseline`` columns. Rows: the run's sizes in ``sizes`` (None: all;
    :func:`_shown_shapes`).

    Raises:
        OSError, ValueError: as :func:`read_rows`; also a CSV with no kernel-time rows, or none
        but cuBLAS's.
    """
    rows = [r for r in read_rows(csv_path) if _timing(r) == "kernel"]
    if not rows:
        raise ValueError(f"{csv_path} has no kernel-time rows")
    groups = GROUPS if _has_precisions(rows) else GROUPS[:1]
    blocks = {}
    for key, title, precisions in groups:
        block = _group_table(csv_path, rows, title, precisions, sizes)
        if block is not None:
            blocks[key] = block
    if not blocks:
        raise ValueError(f"{csv_path} has no kernel-time rows but cuBLAS's")
    return blocks


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
    """Host microseconds per call: one row per size, one column per implementation (fewer
    sizes than implementations, so the table is short)."""
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    us = {(r["impl"], r["size"]): r["us_per_call"] for r in rows}
    body = []
    for s in sizes:
        cells = [s]
        for impl in impls:
            v = us.get((impl, s))
            cells.append(f"{float(v):.1f}" if v else "-")
        body.append(cells)
    return "\n".join(_table(["size"] + [f"`{impl}`" for impl in impls], body))


def e2e_markdown(csv_path: Path, sizes: Sequence[str] | None = README_SIZES) -> str | None:
    """The end-to-end Markdown block of the FP32 rows (source line, table, and the host-overhead
    table when ``overhead.csv`` lies next to the CSV); None when the CSV has no FP32 end-to-end
    rows. Rows: the run's sizes in ``sizes`` (None: all; :func:`_shown_shapes`); the overhead
    table keeps every size of ``overhead.csv``."""
    rows = [r for r in read_rows(csv_path) if precision_of(r) == "fp32"]
    e2e = [r for r in rows if _timing(r) == "end_to_end"]
    if not e2e:
        return None
    kern = {(r["M"], r["N"], r["K"], r["stage"]): r for r in rows if _timing(r) == "kernel"}
    by = {(r["M"], r["N"], r["K"], r["stage"]): r for r in e2e}
    shapes = _shown_shapes(list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in e2e)), sizes)
    labels = {r["stage"]: r["label"] for r in e2e}
    others = [s for s in labels if s not in (CUBLAS_FP32, AUTO)]
    with_base = CUBLAS_FP32 in labels
    head = ["size"]
    if with_base:
        head.append(f"{_short(labels[CUBLAS_FP32])} GFLOP/s")
    head += [f"{labels[s]} GFLOP/s" for s in [AUTO, *others] if s in labels]
    head += ["sgemm (auto) kernel-time GFLOP/s", "auto picked"]
    body = []
    for M, N, K in shapes:
        cells = [_size(M, N, K)]
        if with_base:
            cells.append(_cell(by.get((M, N, K, CUBLAS_FP32)), False))
        cells += [_cell(by.get((M, N, K, s)), True) for s in [AUTO, *others] if s in labels]
        auto_k = kern.get((M, N, K, AUTO))
        cells.append(_cell(auto_k, True))
        picked = "-"
        if auto_k is not None:
            try:
                picked = f"`{json.loads(auto_k.get('config') or '{}')['stage']}`"
            except (ValueError, KeyError, TypeError):
                pass
        cells.append(picked)
        body.append(cells)
    unit = "GFLOP/s (% of cuBLAS FP32 end to end)" if with_base else "GFLOP/s (no cuBLAS baseline)"
    source = (
        f"**FP32** · GPU: **{_gpu_of(csv_path)}** · source: `{_shown(csv_path)}` · timing: end "
        f"to end (the public call with `out=`, back to back: CUDA events around a loop of calls, "
        f"time per call = elapsed / calls) · cells: {unit}"
    )
    if any(r["mode"] == "simulator" for r in e2e):
        source += " · **simulator run: host wall-clock times, not comparable with a GPU**"
    block = source + "\n\n" + "\n".join(_table(head, body))
    overhead = read_overhead(csv_path.with_name("overhead.csv"))
    if overhead:
        how = _meta(csv_path).get("overhead") or {}
        n, loops = how.get("calls", 500), how.get("loops", 5)
        block += (
            f"\n\nHost overhead per call, `{_shown(csv_path.with_name('overhead.csv'))}` · cells: "
            f"microseconds of host time per call with `out=` at that size (wall clock of {n} "
            f"back-to-back calls / {n}, read before the synchronize; median of {loops} loops)\n\n"
            + overhead_table(overhead)
        )
    return block


def has_markers(text: str, start: str, end: str) -> bool:
    """Whether ``text`` has ``start`` followed by ``end``."""
    i = text.find(start)
    return i >= 0 and text.find(end, i + len(start)) >= 0


def replace_between_markers(text: str, block: str, start: str, end: str) -> str:
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


def fill_readme(text: str, blocks: dict[str, str], e2e: str | None) -> tuple[str, list[str]]:
    """``text`` with each block of :func:`markdown_tables` (and the end-to-end block) between
    its markers, and notes on what was not written: a block without markers in the README (it
    is printed only), markers without a block (left as they were).

    Raises:
        ValueError: the README has the markers of none of the blocks.
    """
    notes = []
    written = []
    for key, title, _ in GROUPS:
        start, end = markers(key)
        there = _readme_markers(text, key)
        if key in blocks and there:
            text = replace_between_markers(text, blocks[key], *there)
            written.append(key)
        elif key in blocks:
            notes.append(f"the README has no {start} ... {end}: the {title} table printed only")
        elif there:
            notes.append(
                f"no {title} table from this CSV: {there[0]} ... {there[1]} left as it was"
            )
    if not written:
        wanted = "; ".join(" and ".join(markers(k)) for k in blocks)
        raise ValueError(
            f"the README needs the markers of at least one of the CSV's tables ({wanted}, in "
            "that order) around the place for the table"
        )
    if has_markers(text, E2E_START, E2E_END):
        if e2e is not None:
            text = replace_between_markers(text, e2e, E2E_START, E2E_END)
        else:
            notes.append(f"no FP32 end-to-end rows: {E2E_START} ... {E2E_END} left as it was")
    elif e2e is not None:
        notes.append(f"the README has no {E2E_START} ... {E2E_END}: end-to-end table printed only")
    return text, notes


def main(argv: Sequence[str] | None = None) -> int:
    groups = ", ".join(k for k, *_ in GROUPS)
    ap = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.results_table",
        description="Put the kernel-time tables of a bench results.csv, one per precision "
        f"({groups}), into README.md between <!-- results-table:<precision>:start --> and "
        f"<!-- results-table:<precision>:end --> where the README has them, the FP32 end-to-end "
        f"and host-overhead tables between {E2E_START} and {E2E_END}, and print them all.",
    )
    ap.add_argument(
        "csv",
        nargs="?",
        type=Path,
        default=None,
        help=f"results.csv (default: the newest {RESULTS_DIR}/*/*/results.csv)",
    )
    ap.add_argument(
        "--all-sizes",
        action="store_true",
        help="a row for every size of the run (default: the sizes of README_SIZES that it has, "
        f"{', '.join(README_SIZES)}; all when it has none of them)",
    )
    ap.add_argument(
        "--readme",
        type=Path,
        default=Path("README.md"),
        help="README to update (default: README.md in the current directory)",
    )
    args = ap.parse_args(argv)
    try:
        csv_path = args.csv or newest_csv(RESULTS_DIR)
        sizes = None if args.all_sizes else README_SIZES
        blocks = markdown_tables(csv_path, sizes)
        e2e = e2e_markdown(csv_path, sizes)
        text, notes = fill_readme(args.readme.read_text(), blocks, e2e)
        args.readme.write_text(text)
    except (OSError, ValueError) as e:
        print(f"results_table: {e}", file=sys.stderr)
        return 1
    titles = {key: title for key, title, _ in GROUPS}
    print("\n\n".join(f"{titles[k]}, kernel time:\n\n{b}" for k, b in blocks.items()))
    if e2e is not None:
        print("\nFP32, end to end:\n\n" + e2e)
    if not _has_precisions(read_rows(csv_path)):
        notes.append(
            f"{csv_path} has no precision and baseline columns (a CSV from before them): "
            "FP32 table only"
        )
    for note in notes:
        print(f"results_table: {note}", file=sys.stderr)
    print(f"\n(written into {args.readme})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
