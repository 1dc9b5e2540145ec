"""The command-line tools of ``numba_gemm.tools`` that need no GPU for what is tested here:
``results_table`` (README's tables from a bench run), ``shapes`` (the shape race: its candidate
lists, ``--fold`` and ``--summarize``) and ``tensor_cores`` (which configurations ``--sweep``
times). Their GPU runs (the race, the sweeps) are exercised on a GPU, not here.

CLIs run as ``python -m numba_gemm.tools.<tool>`` in a subprocess, as the Makefile runs them;
everything else imports the module.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from numba_gemm import STAGES, get_stage
from numba_gemm.tools import results_table, shapes, tensor_cores
from numba_gemm.tools.bench import CSV_COLUMNS
from numba_gemm.tools.bench.report import BASELINE_OF


def _tool(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"numba_gemm.tools.{name}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


# --- results_table -------------------------------------------------------------------------------


def table_markers(group: str = "fp32", inside: str = "old table") -> str:
    return f"<!-- results-table:{group}:start -->\n{inside}\n<!-- results-table:{group}:end -->"


def all_markers() -> str:
    return "\n\n".join(table_markers(g, f"old {g} table") for g in ("fp32", "tf32", "fp16"))


def e2e_markers(inside: str = "old e2e table") -> str:
    return f"<!-- e2e-table:start -->\n{inside}\n<!-- e2e-table:end -->"


#: Per stage of the test CSV: label, precision, config.
RESULT_STAGES = {
    "cublas_fp32": ("cuBLAS FP32 (TF32 off), CuPy", "fp32", ""),
    "cublas_tf32": ("cuBLAS TF32, CuPy", "tf32", ""),
    "cublas_fp16": ("cuBLAS FP16 (FP32 accumulate), CuPy", "fp16", ""),
    "auto": ("sgemm (auto)", "fp32", '{"stage":"warptiling"}'),
    "naive": ("1: naive", "fp32", ""),
    "warptiling": ("8: warptiling", "fp32", '{"BM":128}'),
    "tf32_mma": ("11: TF32 mma", "tf32", ""),
    "tf32x3_mma": ("13: 3xTF32 mma", "3xtf32", ""),
    "hgemm_mma": ("14: FP16 mma", "fp16", ""),
}
SQUARE, RAGGED = (1024, 1024, 1024), (4096, 1024, 512)
#: (M, N, K, stage, status, GFLOP/s, pct_cublas, timing)
RESULT_ROWS = [
    (*SQUARE, "cublas_fp32", "ok", 20000, 1, "kernel"),
    (*SQUARE, "cublas_tf32", "ok", 100000, 1, "kernel"),
    (*SQUARE, "cublas_fp16", "ok", 200000, 1, "kernel"),
    (*SQUARE, "naive", "ok", 200, 0.01, "kernel"),
    (*SQUARE, "warptiling", "ok", 10000, 0.5, "kernel"),
    (*SQUARE, "tf32_mma", "ok", 50000, 0.5, "kernel"),
    (*SQUARE, "tf32x3_mma", "ok", 30000, 1.5, "kernel"),
    (*SQUARE, "hgemm_mma", "ok", 100000, 0.5, "kernel"),
    (*RAGGED, "cublas_fp32", "ok", 40000, 1, "kernel"),
    (*RAGGED, "naive", "SKIPPED", "", "", "kernel"),
    (*RAGGED, "warptiling", "FAILED", "", "", "kernel"),
    (*SQUARE, "cublas_fp32", "ok", 10000, 1, "end_to_end"),
    (*SQUARE, "auto", "ok", 9000, 0.45, "kernel"),
    (*SQUARE, "auto", "ok", 8000, 0.8, "end_to_end"),
]


def _write_results(path: Path, *, timing: bool = True, precision: bool = True) -> None:
    """A results.csv of :data:`RESULT_ROWS`, each rated against cuBLAS in its precision.
    ``precision=False``: one from before the ``precision`` and ``baseline`` columns (the other
    precisions' rows kept, but for cuBLAS FP16's); ``timing=False``: also from before the
    ``timing`` column (kernel rows only)."""
    path.parent.mkdir(parents=True)
    dropped = set() if precision else {"precision", "baseline"}
    if not timing:
        dropped.add("timing")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, [c for c in CSV_COLUMNS if c not in dropped], extrasaction="ignore")
        w.writeheader()
        for M, N, K, stage, status, g, pct, kind in RESULT_ROWS:
            if (not timing and kind != "kernel") or (not precision and stage == "cublas_fp16"):
                continue
            label, prec, config = RESULT_STAGES[stage]
            ms = 2e-6 * M * N * K / g if g else ""
            row = dict(M=M, N=N, K=K, stage=stage, label=label, status=status, median_ms=ms)
            row.update(min_ms=ms, max_ms=ms, gflops=g, pct_cublas=pct, rel_error="")
            row.update(config=config, mode="gpu", timing=kind, precision=prec)
            w.writerow(dict(row, baseline=BASELINE_OF[prec] if pct else ""))


def _results_table(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return _tool("results_table", *args, cwd=cwd)


def _block(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end)]


def _group(text: str, group: str) -> list[str]:
    """The table lines between a precision group's markers."""
    start, end = (f"<!-- results-table:{group}:{x} -->" for x in ("start", "end"))
    return [ln for ln in _block(text, start, end).splitlines() if ln.startswith("|")]


def test_results_table_one_table_per_precision(tmp_path):
    """One kernel-time table per precision group, each cell against cuBLAS in the row's own
    precision (its ``baseline``): FP32 (cuBLAS FP32, auto, the FP32 stages), TF32 / 3xTF32
    (cuBLAS TF32 and FP32, TF32 against TF32, 3xTF32 against FP32), FP16; cuBLAS is a column of
    its own, never a stage column."""
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# numba_gemm\n\nintro\n\n{all_markers()}\n\n## Use\n")
    res = _results_table(str(csv_path), "--readme", str(readme), "--all-sizes")
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert not any(f"old {g} table" in text for g in ("fp32", "tf32", "fp16"))
    assert text.startswith("# numba_gemm\n\nintro\n\n<!-- results-table:fp32:start -->\n")
    assert text.endswith("<!-- results-table:fp16:end -->\n\n## Use\n")

    fp32 = _group(text, "fp32")
    assert fp32 == [
        "| size | cuBLAS FP32 (TF32 off) GFLOP/s | sgemm (auto) | 1: naive | 8: warptiling |",
        "|---|---:|---:|---:|---:|",
        "| 1024 | 20,000 | 9,000 (45%) | 200 (1%) | 10,000 (50%) |",  # auto: its kernel row
        "| 4096x1024x512 | 40,000 | - | SKIPPED | FAILED |",
    ]
    assert _group(text, "tf32") == [
        "| size | cuBLAS TF32 GFLOP/s | cuBLAS FP32 (TF32 off) GFLOP/s | 11: TF32 mma | "
        "13: 3xTF32 mma |",
        "|---|---:|---:|---:|---:|",
        "| 1024 | 100,000 | 20,000 | 50,000 (50%) | 30,000 (150%) |",  # only its sizes
    ]
    assert _group(text, "fp16") == [
        "| size | cuBLAS FP16 (FP32 accumulate) GFLOP/s | 14: FP16 mma |",
        "|---|---:|---:|",
        "| 1024 | 200,000 | 100,000 (50%) |",
    ]
    tf32 = _block(text, "results-table:tf32:start", "results-table:tf32:end")
    assert "cuBLAS TF32 for TF32; cuBLAS FP32 (TF32 off) for 3xTF32" in tf32
    for group in ("fp32", "tf32", "fp16"):
        block = _block(text, f"results-table:{group}:start", f"results-table:{group}:end")
        assert "GPU: **nvidia-h200**" in block and "results.csv" in block
        assert "timing: kernel" in block
    assert "| 1024 | 20,000 |" in res.stdout and "| 1024 | 200,000 |" in res.stdout  # printed
    assert "end to end" in res.stdout  # printed even without the README's e2e markers

    # idempotent: a second run gives the same README
    assert _results_table(str(csv_path), "--readme", str(readme), "--all-sizes").returncode == 0
    assert readme.read_text() == text


@pytest.mark.parametrize("timing", [True, False], ids=["no-precision", "no-timing"])
def test_results_table_reads_older_csvs(tmp_path, timing):
    """A CSV from before the ``precision`` and ``baseline`` columns (every ``pct_cublas`` then
    against cuBLAS FP32) fills the FP32 table only, from its FP32 stages: the other precisions'
    markers are left as they were; one from before the ``timing`` column too is all kernel
    time."""
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path, timing=timing, precision=False)
    header = csv_path.read_text().splitlines()[0].split(",")
    assert "precision" not in header and ("timing" in header) == timing
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{all_markers()}\n")
    res = _results_table(str(csv_path), "--readme", str(readme), "--all-sizes")
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert _group(text, "fp32") == [
        "| size | cuBLAS FP32 (TF32 off) GFLOP/s | sgemm (auto) | 1: naive | 8: warptiling |",
        "|---|---:|---:|---:|---:|",
        "| 1024 | 20,000 | 9,000 (45%) | 200 (1%) | 10,000 (50%) |",
        "| 4096x1024x512 | 40,000 | - | SKIPPED | FAILED |",
    ]
    assert "old tf32 table" in text and "old fp16 table" in text
    assert "TF32" not in res.stdout.replace("TF32 off", "")  # no TF32 column or stage
    assert "tf32:start" in res.stderr and "FP32 table only" in res.stderr
    assert ("end to end" in res.stdout) == timing


def test_results_table_prints_the_tables_without_markers(tmp_path):
    """A table whose markers the README lacks is printed only; at least one must be written."""
    csv_path = tmp_path / "r" / "gpu" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{table_markers('tf32')}\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode == 0, res.stderr
    assert len(_group(readme.read_text(), "tf32")) == 3
    assert "| 1024 | 200,000 | 100,000 (50%) |" in res.stdout  # FP16: printed only
    assert "results-table:fp32:start" in res.stderr and "results-table:fp16:start" in res.stderr

    # an older CSV has only the FP32 table: a README with no FP32 markers is an error
    old = tmp_path / "old" / "gpu" / "20260101-000000" / "results.csv"
    _write_results(old, precision=False)
    before = readme.read_text()
    res = _results_table(str(old), "--readme", str(readme))
    assert res.returncode == 1 and "results-table:fp32:start" in res.stderr
    assert readme.read_text() == before


def test_results_table_legacy_markers_hold_the_fp32_table(tmp_path):
    """A README from before the per-precision markers: its single table is the FP32 one."""
    csv_path = tmp_path / "r" / "gpu" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- results-table:start -->\nold\n<!-- results-table:end -->\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode == 0, res.stderr
    block = _block(readme.read_text(), "results-table:start", "results-table:end")
    assert "**FP32**" in block and "| 1024 | 20,000 | 9,000 (45%) |" in block
    assert "TF32 GFLOP/s" not in block and "\nold\n" not in block


def test_results_table_shows_the_readme_sizes(tmp_path):
    """By default the tables keep the sizes of ``README_SIZES`` that the run has (kernel and end
    to end alike); a run with none of them shows all of its sizes; ``--all-sizes`` shows all."""
    sizes = results_table.README_SIZES
    assert "1024" in sizes and "4096x1024x512" not in sizes  # the test CSV's two sizes
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{table_markers()}\n\n{e2e_markers()}\n")
    assert _results_table(str(csv_path), "--readme", str(readme)).returncode == 0
    text = readme.read_text()
    assert [ln.split(" | ")[0] for ln in _group(text, "fp32")[2:]] == ["| 1024"]
    e2e = _block(text, "<!-- e2e-table:start -->", "<!-- e2e-table:end -->")
    assert "| 1024 |" in e2e and "4096x1024x512" not in text
    assert _results_table(str(csv_path), "--readme", str(readme), "--all-sizes").returncode == 0
    assert "| 4096x1024x512 |" in readme.read_text()

    blocks = results_table.markdown_tables(csv_path, sizes=("2048",))  # none of the run's sizes
    assert "| 1024 |" in blocks["fp32"] and "| 4096x1024x512 |" in blocks["fp32"]


def test_results_table_end_to_end_and_overhead(tmp_path):
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    (csv_path.parent / "overhead.csv").write_text(
        "impl,size,us_per_call\nsgemm-numba,64,9.5\ntorch.mm,64,4.25\nsgemm-numba,128,9.75\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{table_markers()}\n\n{e2e_markers()}\n\n## Use\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert "old table" not in text and "old e2e table" not in text
    e2e = _block(text, "<!-- e2e-table:start -->", "<!-- e2e-table:end -->")
    lines = [ln for ln in e2e.splitlines() if ln.startswith("|")]
    assert lines[0] == (
        "| size | cuBLAS FP32 (TF32 off) GFLOP/s | sgemm (auto) GFLOP/s | "
        "sgemm (auto) kernel-time GFLOP/s | auto picked |"
    )
    assert lines[2] == "| 1024 | 10,000 | 8,000 (80%) | 9,000 (45%) | `warptiling` |"
    assert lines[3] == "| size | `sgemm-numba` | `torch.mm` |"  # one row per size
    assert lines[5:] == ["| 64 | 9.5 | 4.2 |", "| 128 | 9.8 | - |"]
    assert "timing: end to end" in e2e and "overhead.csv" in e2e
    assert _results_table(str(csv_path), "--readme", str(readme)).returncode == 0
    assert readme.read_text() == text  # idempotent


def test_results_table_defaults_are_relative_to_the_current_directory(tmp_path):
    """Without arguments: the newest ``bench/results/*/*/results.csv`` and ``README.md`` of the
    current directory (the repository root), the source line naming the CSV's relative path."""
    for stamp in ("20260101-000000", "20260102-000000"):
        _write_results(tmp_path / "bench" / "results" / "nvidia-h200" / stamp / "results.csv")
    (tmp_path / "README.md").write_text(f"# x\n\n{table_markers()}\n")
    res = _results_table(cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "README.md").read_text()
    assert "source: `bench/results/nvidia-h200/20260102-000000/results.csv`" in text


def test_results_table_needs_markers(tmp_path):
    csv_path = tmp_path / "r" / "gpu" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text("# no markers here\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode != 0
    assert "results-table:fp32:start" in res.stderr
    assert readme.read_text() == "# no markers here\n"


def test_results_table_missing_csv(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(table_markers())
    res = _results_table(str(tmp_path / "nope.csv"), "--readme", str(readme))
    assert res.returncode != 0 and "nope.csv" in res.stderr


def test_results_table_default_is_newest(tmp_path):
    for gpu, stamp in [
        ("a-gpu", "20260102-000000"),
        ("b-gpu", "20251231-235959"),
        ("a-gpu", "20250101-000000"),
    ]:
        p = tmp_path / gpu / stamp / "results.csv"
        p.parent.mkdir(parents=True)
        p.write_text("x\n")
    newest = results_table.newest_csv(tmp_path)
    assert newest == tmp_path / "a-gpu" / "20260102-000000" / "results.csv"
    with pytest.raises(FileNotFoundError):
        results_table.newest_csv(tmp_path / "empty")


# --- shapes: --fold, --summarize, the sweep's candidates -----------------------------------------


def _write_sweep(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_shapes_fold_records_the_fastest_per_shape(tmp_path):
    """``--fold`` keeps each swept shape's candidates within 5 % of its best (failed rows and
    rows without an occupancy dropped, the occupancy of older sweeps taken from the tuning data),
    per alignment, in the tuning file; no GPU."""
    cfg = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
    large = {
        "double_buffering": {
            "config": cfg,
            "ms": 3.0,
            "shape": [4096, 4096, 4096],
            "blocks_per_sm": 2,
            "blocks_per_sm_scalar": 1,
        }
    }
    tun = {
        "format": 1,
        "gpus": {"NVIDIA H200": {"compute_capability": [9, 0], "classes": {"large": large}}},
    }
    into = tmp_path / "t.json"
    into.write_text(json.dumps(tun))
    rows = [  # M, N, K, config, kernel_ms, blocks_per_sm
        (256, 4096, 4096, dict(cfg, SPLITK=2), "0.20", "2"),
        (256, 4096, 4096, cfg, "0.21", ""),  # an older sweep's row: occupancy from the data
        (256, 4096, 4096, dict(cfg, SPLITK=4), "0.22", "2"),  # > 1.05 x the best
        (256, 4096, 4096, dict(cfg, BM=128), "", ""),  # failed
        (256, 4095, 4095, cfg, "0.25", ""),  # scalar: blocks_per_sm_scalar
    ]
    sweep = tmp_path / "sweep.csv"
    header = ["gpu", "group", "M", "N", "K", "stage", "config", "kernel_ms", "blocks_per_sm"]
    _write_sweep(
        sweep,
        header,
        [
            ["NVIDIA H200", "given", M, N, K, "double_buffering", str(c), ms, bps]
            for M, N, K, c, ms, bps in rows
        ],
    )
    fold = ("--out", str(tmp_path), "--fold", str(sweep), "--into", str(into))
    res = _tool("shapes", *fold)
    assert res.returncode == 0, res.stderr
    recs = {
        (tuple(r["shape"]), r["aligned"]): r["candidates"]
        for r in json.loads(into.read_text())["gpus"]["NVIDIA H200"]["shapes"]
    }
    assert set(recs) == {((256, 4096, 4096), True), ((256, 4095, 4095), False)}
    assert [
        (c["config"]["SPLITK"], c["ms"], c["blocks_per_sm"]) for c in recs[(256, 4096, 4096), True]
    ] == [(2, 0.2, 2), (1, 0.21, 2)]
    assert recs[(256, 4095, 4095), False][0]["blocks_per_sm"] == 1
    assert "256x4096x4096 NN aligned: 2 of 3" in (tmp_path / "fold.txt").read_text()

    # a sweep of another GPU model goes into an entry of its own, measured shapes only (the
    # H200's classes serve it: tuning._default_entries); the H200's records stay as they were
    _write_sweep(
        sweep,
        header,
        [
            [
                "NVIDIA H100",
                "given",
                64,
                4096,
                4096,
                "double_buffering",
                str(dict(cfg, SPLITK=8)),
                "0.065",
                "2",
            ]
        ],
    )
    res = _tool("shapes", *fold)
    assert res.returncode == 0, res.stderr
    gpus = json.loads(into.read_text())["gpus"]
    assert gpus["NVIDIA H100"]["classes"] == {}
    assert gpus["NVIDIA H100"]["compute_capability"] == [9, 0]
    assert [
        (r["shape"], r["candidates"][0]["config"]["SPLITK"]) for r in gpus["NVIDIA H100"]["shapes"]
    ] == [([64, 4096, 4096], 8)]
    assert len(gpus["NVIDIA H200"]["shapes"]) == 2

    # rows of another layout (x @ W.T) go into records of their own beside the NN ones
    skinny = dict(MT=8, BN=128, NT=256, KC=128, SPLITK=8, MINB=0, NBUF=0)
    _write_sweep(
        sweep,
        header[:5] + ["layout"] + header[5:],
        [
            ["NVIDIA H100", "given", 8, 4096, 4096, layout, "skinny", str(skinny), ms, "2"]
            for layout, ms in (("NT", "0.04"), ("NN", "0.03"))
        ],
    )
    res = _tool("shapes", *fold)
    assert res.returncode == 0, res.stderr
    recs = json.loads(into.read_text())["gpus"]["NVIDIA H100"]["shapes"]
    assert [(r["shape"][0], r.get("layout"), r["candidates"][0]["ms"]) for r in recs] == [
        (8, None, 0.03),
        (8, "NT", 0.04),
        (64, None, 0.065),
    ]
    assert "8x4096x4096 NT aligned: 1 of 1" in (tmp_path / "fold.txt").read_text()


def test_shapes_fold_needs_into(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        shapes.main(["--out", str(tmp_path), "--fold", str(tmp_path / "sweep.csv")])
    assert e.value.code == 2 and "--into" in capsys.readouterr().err


def test_shapes_summarize(tmp_path):
    """``--summarize``: one line per shape (its layout where not NN, the pick and its split),
    a failed pick's note, then the geometric mean and minimum of the end-to-end ratio; no GPU."""
    race = tmp_path / "race.csv"
    base = dict(gpu="g", group="skinny", M=8, N=4096, K=4096, layout="NN", auto_note="")
    rows = [
        dict(
            base,
            auto="skinny {'MT': 8} split_k=4",
            pct_cublas_kernel=40,
            pct_cublas_e2e=50,
            auto_kernel_ms=0.1,
            gbps_kernel=100,
        ),
        dict(
            base,
            M=16,
            layout="NT",
            auto="multistage {'BM': 64} split_k=1",
            pct_cublas_kernel=150,
            pct_cublas_e2e=200,
            auto_kernel_ms=0.05,
            gbps_kernel=200,
        ),
        dict(base, M=32, auto="skinny {}", auto_note="FAILED ValueError: x"),
    ]
    _write_sweep(race, list(rows[0]), [[r.get(k, "") for k in rows[0]] for r in rows])
    assert shapes.main(["--out", str(tmp_path / "out"), "--summarize", str(race)]) == 0
    lines = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert len(lines) == 4
    assert "8x 4096x 4096 kernel   40.0% e2e   50.0%     100.0 us" in lines[0]
    assert lines[0].endswith("skinny S=4")
    assert " NT kernel  150.0% e2e  200.0%" in lines[1] and lines[1].endswith("multistage S=1")
    assert lines[2].endswith("FAILED ValueError: x")
    assert lines[3] == "geomean e2e 1.000 min 0.500 over 2 shapes"


def test_shape_race_problems_come_from_the_held_out_sets_the_shapes_or_the_suite():
    """``tools.shapes``: what a race runs, with and without ``--heldout``."""

    def args(heldout=None, layout="NN", shapes=None):
        return argparse.Namespace(
            heldout=heldout, layout=layout, shapes=shapes, groups=None, count=40, seed=20261126
        )

    models, lay = shapes.problems(args("models3"))
    assert lay == "NT" and len(models) == 60 and ("phi-2", (48, 7680, 2560)) in models
    drawn, lay = shapes.problems(args("random", "NT"))
    assert lay == "NT" and drawn and all(g.startswith("heldout-") for g, _ in drawn)
    given, lay = shapes.problems(args(layout="TN", shapes="64x32x16"))
    assert given == [("given", (64, 32, 16))] and lay == "TN"
    suite, lay = shapes.problems(args())
    assert len(suite) > 20 and lay == "NN"


def test_shapes_sweeps_extra_candidates_with_their_splits(fake_gpu):
    """``--extra`` candidates are swept like the tuning data's: each with the K splits the plan
    may give it up to its ``blocks_per_sm``, and its stream-K twin; ``--extra-only`` sweeps
    nothing else."""
    from numba_gemm.kernels._tunable import STREAM_K
    from numba_gemm.plan import choose as plan

    dev = fake_gpu("NVIDIA H100 80GB HBM3")
    cfg = dict(BM=32, BN=256, BK=16, WM=32, WN=64, WNITER=1, TM=8, TN=4, MINB=0, SPLITK=1, NBUF=3)
    extra = [dict(stage="multistage", config=cfg, blocks_per_sm=2)]
    M, N, K = 32, 4096, 4096
    got = shapes.candidates(M, N, K, extra=extra, extra_only=True)
    splits = plan.split_options(extra[0], M, N, K, dev.sm_count, 2)
    assert len(splits) > 2
    assert sorted(c["SPLITK"] for _, c in got) == sorted({*splits, STREAM_K})
    assert all(n == "multistage" and dict(c, SPLITK=1) == cfg for n, c in got)
    everything = shapes.candidates(M, N, K, extra=extra)
    assert len(everything) > len(got) and all(g in everything for g in got)


def test_shapes_sweeps_only_the_candidates_that_serve_the_layout(fake_gpu):
    """``--layout NT`` (``x @ W.T``) sweeps the candidates that serve B stored transposed: of the
    skinny stage's space, the configurations with B in registers and whole steps of 4 k, none of
    its ring's (which reads B row-major); every one of them is in the NN sweep too."""
    from numba_gemm.kernels import k15_skinny

    fake_gpu("NVIDIA H100 80GB HBM3")
    nn = shapes.candidates(8, 4096, 4096, stages=["skinny"])
    nt = shapes.candidates(8, 4096, 4096, stages=["skinny"], layout="NT")
    assert len(nn) > len(nt) > 0 and all(c in nn for c in nt)
    assert all(k15_skinny.transposed_b_ok(c) for _, c in nt)
    assert all(("skinny", c) in nt for c in k15_skinny.SPACE if k15_skinny.transposed_b_ok(c))
    assert any(c["NBUF"] for _, c in nn) and not any(c["NBUF"] for _, c in nt)


# --- tensor_cores: what --sweep times ------------------------------------------------------------


def test_tensor_cores_sweeps_every_tunable_tensor_core_stage():
    """``SWEPT`` names every tunable tensor-core stage (a new one is swept without an edit here
    going unnoticed) under its own arithmetic, and each arithmetic has its cuBLAS baseline."""
    swept = {n: mode for mode, names in tensor_cores.SWEPT.items() for n in names}
    assert set(swept) == {s.name for s in STAGES if s.tunable and s.precision != "fp32"}
    assert all(get_stage(n).precision == mode for n, mode in swept.items())
    assert set(tensor_cores.BASELINE_OF) == set(tensor_cores.SWEPT)


def test_tensor_cores_sweep_stages_by_compute_capability():
    """The ``wgmma`` stages only where they run (9.0), ``--stages`` narrows the list."""
    on_hopper = tensor_cores.sweep_stages(None, (9, 0))
    on_ampere = tensor_cores.sweep_stages(None, (8, 0))
    assert len(on_hopper) == sum(map(len, tensor_cores.SWEPT.values()))
    assert on_ampere == [(m, n) for m, n in on_hopper if get_stage(n).runs_on((8, 0))]
    assert not any(n.endswith("wgmma") for _, n in on_ampere)
    assert tensor_cores.sweep_stages(["hgemm_mma"], (9, 0)) == [("fp16", "hgemm_mma")]


def test_tensor_cores_where_filters_the_space():
    """``--where KEY=VALUE``: the configurations that match; a key the stage lacks does not
    filter."""
    space = get_stage("hgemm_mma").space
    key, value = next(iter(space[0].items()))
    got = tensor_cores.swept("hgemm_mma", [f"{key}={value}"])
    assert got == [c for c in space if c[key] == value] and 0 < len(got) <= len(space)
    assert tensor_cores.swept("hgemm_mma", ["NO_SUCH_KEY=1"]) == list(space)


def test_cases_write_rows_as_json_lines(tmp_path, capsys):
    """``tools.cases``: rows written as they come, one JSON object a line, printed too; no
    worker processes when one job is asked."""
    import json

    from numba_gemm.tools import cases

    cases.warm_in_workers(_never, [1, 2], jobs=1)  # nothing to compile in workers
    path = tmp_path / "sub" / "rows.jsonl"
    cases.write_rows(path, ({"i": i, "x": i / 2} for i in range(3)))
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"i": 0, "x": 0.0},
        {"i": 1, "x": 0.5},
        {"i": 2, "x": 1.0},
    ]
    assert capsys.readouterr().out.count("\n") == 3


def _never(case):
    raise AssertionError("warm_in_workers ran a case with jobs=1")


def test_profile_keeps_the_listed_metrics_of_each_kernel():
    """``tools.profile.parse_raw`` reads ncu's ``--csv --page raw`` layout (a header, a units
    line, one line per kernel, amid ncu's own log lines) into long rows, numbers parsed (with
    thousands separators), other metrics dropped."""
    from numba_gemm.tools import profile

    text = "\n".join(
        [
            "==PROF== Connected to process 1",
            '"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","other__x.sum"',
            '"","","nsecond","byte",""',
            '"0","fixup","1,500","64","1"',
            '"1","main_kernel","2,690,000","341,900,000","2"',
            "==PROF== Disconnected",
        ]
    )
    rows = profile.parse_raw(text, "cublas_fp32")
    assert {(r["id"], r["metric"]) for r in rows} == {
        (0, "gpu__time_duration.sum"),
        (0, "dram__bytes_read.sum"),
        (1, "gpu__time_duration.sum"),
        (1, "dram__bytes_read.sum"),
    }
    main = {r["metric"]: r for r in rows if r["id"] == 1}
    assert main["gpu__time_duration.sum"]["value"] == 2.69e6
    assert main["dram__bytes_read.sum"]["unit"] == "byte"
    assert all(r["target"] == "cublas_fp32" and r["kernel"] for r in rows)
    assert profile.parse_raw("==PROF== no kernels", "x") == []
