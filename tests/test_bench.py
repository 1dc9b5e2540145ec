"""The bench CLI (``python -m numba_gemm.bench``) and ``bench/results_table.py``.

The end-to-end run uses ``--simulator``: in-process when the suite already runs under the
simulator, in a subprocess with ``NUMBA_ENABLE_CUDASIM=1`` on a GPU machine.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numba_gemm import bench
from numba_gemm.api import stage_for
from numba_gemm.bench import CSV_COLUMNS, META_KEYS, parse_sizes

ROOT = Path(__file__).resolve().parents[1]
RESULTS_TABLE = ROOT / "bench" / "results_table.py"


def _env(**changes: str | None) -> dict:
    env = dict(os.environ)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


# --- parse_sizes, gpu_slug ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("128..512", [(128, 128, 128), (256, 256, 256), (512, 512, 512)]),
        ("64..64", [(64, 64, 64)]),
        ("16,24,1000", [(16, 16, 16), (24, 24, 24), (1000, 1000, 1000)]),
        ("4096x1024x512", [(4096, 1024, 512)]),
        (" 1..4 , 7x5x3, 100 ,2", [(1, 1, 1), (2, 2, 2), (4, 4, 4), (7, 5, 3), (100, 100, 100)]),
        ("8X4X2", [(8, 4, 2)]),
    ],
)
def test_parse_sizes(spec, expected):
    assert parse_sizes(spec) == expected


@pytest.mark.parametrize(
    "spec", ["", " ", "abc", "0", "-4", "512..128", "100..200", "4x4", "4x4x4x4", "1.5",
             "16,,32", "8x0x8", "..64", "16..a"],
)
def test_parse_sizes_rejects(spec):
    with pytest.raises(ValueError, match="accepted forms") as info:
        parse_sizes(spec)
    msg = str(info.value)
    bad_items = [s.strip() for s in spec.split(",") if s.strip()]
    if bad_items and "empty" not in msg:
        assert any(repr(item) in msg for item in bad_items), msg  # names the bad item


@pytest.mark.parametrize(
    "name, slug",
    [("NVIDIA H200", "nvidia-h200"), ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
     ("NVIDIA GeForce RTX 4090 (Laptop)", "nvidia-geforce-rtx-4090-laptop"),
     ("simulator", "simulator")],
)
def test_gpu_slug(name, slug):
    assert bench.gpu_slug(name) == slug


# --- command line errors ----------------------------------------------------------------------


def test_bad_sizes_is_a_usage_error(capsys):
    assert bench.main(["--sizes", "100..200"]) == 2
    err = capsys.readouterr().err
    assert "'100..200'" in err and "accepted forms" in err


def test_unknown_stage_lists_valid_names(capsys):
    assert bench.main(["--stages", "naive", "fastest"]) == 2
    err = capsys.readouterr().err
    assert "'fastest'" in err and "smem_tiling" in err


def test_simulator_refuses_large_sizes(capsys):
    assert bench.main(["--simulator", "--sizes", "256", "--out", "unused"]) == 2
    err = capsys.readouterr().err
    assert "256x256x256" in err and "<= 128" in err


def test_no_gpu_without_simulator():
    """Without a GPU (CUDA_VISIBLE_DEVICES hides any) and without --simulator: one line, exit 2."""
    env = _env(NUMBA_ENABLE_CUDASIM=None, CUDA_VISIBLE_DEVICES="")
    probe = subprocess.run(
        [sys.executable, "-c", "from numba import cuda; print(cuda.is_available())"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    if probe.stdout.strip() == "True":
        pytest.skip("a CUDA GPU is visible even with CUDA_VISIBLE_DEVICES=''")
    res = subprocess.run(
        [sys.executable, "-m", "numba_gemm.bench", "--sizes", "16"],
        env=env, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--simulator" in lines[0], res.stderr


# --- end to end on the simulator ----------------------------------------------------------------


def test_simulator_end_to_end(tmp_path, capfd):
    out = tmp_path / "run"
    stages = ["naive", "smem_tiling"]
    code = bench.main(["--simulator", "--sizes", "16,24x20x12", "--reps", "1", "--warmup", "0",
                       "--stages", *stages, "--out", str(out)])
    printed = capfd.readouterr().out
    assert code == 0, printed
    assert "SIMULATOR" in printed and "0 FAILED" in printed

    header, rows = _read_csv(out / "results.csv")
    assert header == list(CSV_COLUMNS)
    assert [(r["M"], r["N"], r["K"], r["stage"]) for r in rows] == [
        (*map(str, shape), st) for shape in [(16, 16, 16), (24, 20, 12)] for st in stages
    ]
    for r in rows:
        assert r["status"] == "ok", r
        assert r["mode"] == "simulator"
        assert float(r["rel_error"]) <= 1e-5
        assert float(r["median_ms"]) > 0 and float(r["gflops"]) > 0
        assert r["pct_cublas"] == ""  # no cuBLAS on the simulator

    doc = json.loads((out / "results.json").read_text())
    assert set(META_KEYS) <= set(doc["meta"])
    assert doc["meta"]["mode"] == "simulator" and doc["meta"]["gpu"] == "simulator"
    assert doc["meta"]["reps"] == 1 and doc["meta"]["seed"] == 0
    assert len(doc["rows"]) == len(rows)
    for png in ("gflops_vs_size.png", "pct_cublas_largest.png"):
        assert (out / png).stat().st_size > 0

    # the table script reads what the bench wrote
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{bench_markers()}\nafter\n")
    res = subprocess.run([sys.executable, str(RESULTS_TABLE), str(out / "results.csv"),
                          "--readme", str(readme)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert "| 16 |" in text and "| 24x20x12 |" in text and "simulator run" in text


def bench_markers(inside: str = "old table") -> str:
    return f"<!-- results-table:start -->\n{inside}\n<!-- results-table:end -->"


def test_failed_stages_are_reported_not_timed(monkeypatch):
    """A stage that leaves C unwritten, and one that raises, are FAILED; the run goes on."""

    def raising(M, N, K):
        raise RuntimeError("launch config exploded")

    def broken(name, M, N, K):
        st = stage_for(name, M, N, K)
        if name == "naive":  # one thread: only C[0, 0] is written, the NaN poison stays
            return dataclasses.replace(st, launch_config=lambda M, N, K: ((1, 1), (1, 1)))
        if name == "gmem_coalesce":
            return dataclasses.replace(st, launch_config=raising)
        return st

    monkeypatch.setattr(bench, "stage_for", broken)
    args = bench.build_parser().parse_args(
        ["--sizes", "8", "--reps", "1", "--warmup", "0", "--baseline", "none",
         "--stages", "naive", "gmem_coalesce", "smem_tiling"])
    rows = {r["stage"]: r for r in bench.run(args)}
    assert rows["naive"]["status"] == "FAILED"
    assert rows["naive"]["rel_error"] == float("inf"), rows["naive"]["note"]
    assert rows["naive"]["median_ms"] is None and "rel. error inf" in rows["naive"]["note"]
    assert rows["gmem_coalesce"]["status"] == "FAILED"
    assert "launch config exploded" in rows["gmem_coalesce"]["note"]
    assert rows["smem_tiling"]["status"] == "ok" and rows["smem_tiling"]["gflops"] > 0
    table = bench.format_table(list(rows.values()))
    assert table.count("FAILED") == 2


def test_plots_with_a_baseline(tmp_path):
    """The plots with cuBLAS rows (which the simulator never has), a FAILED and a TF32 line."""

    def row(M, stage, status, gflops, pct):
        r = dict.fromkeys(CSV_COLUMNS)
        r.update(M=M, N=M, K=M, stage=stage, label=stage, status=status, gflops=gflops,
                 pct_cublas=pct, mode="gpu", config={}, note="")
        return r

    rows = [
        row(512, "cublas_fp32", "ok", 20000.0, 1.0), row(512, "cublas_tf32", "ok", 40000.0, 2.0),
        row(512, "naive", "ok", 300.0, 0.015), row(512, "warptiling", "ok", 15000.0, 0.75),
        row(1024, "cublas_fp32", "ok", 40000.0, 1.0), row(1024, "cublas_tf32", "ok", 90000.0, 2.25),
        row(1024, "naive", "SKIPPED", None, None), row(1024, "warptiling", "FAILED", None, None),
    ]
    paths = bench.plot(rows, tmp_path, gpu="NVIDIA H200", mode="gpu")
    assert [p.name for p in paths] == ["gflops_vs_size.png", "pct_cublas_largest.png"]
    assert all(p.stat().st_size > 0 for p in paths)


# --- bench/results_table.py ----------------------------------------------------------------------


def _write_results(path: Path) -> None:
    path.parent.mkdir(parents=True)
    lines = [
        ",".join(CSV_COLUMNS),
        "1024,1024,1024,cublas_fp32,\"cuBLAS FP32 (TF32 off), CuPy\",ok,0.1,0.1,0.1,20000,1,,,gpu",
        "1024,1024,1024,naive,1: naive,ok,10,10,10,200,0.01,1e-7,,gpu",
        "1024,1024,1024,warptiling,8: warptiling,ok,0.2,0.2,0.2,10000,0.5,1e-7,"
        "\"{\"\"BM\"\":128}\",gpu",
        "4096,1024,512,cublas_fp32,\"cuBLAS FP32 (TF32 off), CuPy\",ok,0.1,0.1,0.1,40000,1,,,gpu",
        "4096,1024,512,naive,1: naive,SKIPPED,,,,,,1e-7,,gpu",
        "4096,1024,512,warptiling,8: warptiling,FAILED,,,,,,inf,,gpu",
    ]
    path.write_text("\n".join(lines) + "\n")


def _results_table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RESULTS_TABLE), *args], capture_output=True,
                          text=True, timeout=60)


def test_results_table_fills_readme(tmp_path):
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# numba_gemm\n\nintro\n\n{bench_markers()}\n\n## Use\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert "old table" not in text
    assert text.startswith("# numba_gemm\n\nintro\n\n<!-- results-table:start -->\n")
    assert text.endswith("<!-- results-table:end -->\n\n## Use\n")
    table = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(table) == 4  # header, rule, 2 sizes
    assert "1: naive" in table[0] and "8: warptiling" in table[0]
    assert table[2].startswith("| 1024 | 20,000 | 200 (1%) | 10,000 (50%) |")
    assert table[3] == "| 4096x1024x512 | 40,000 | SKIPPED | FAILED |"
    assert "nvidia-h200" in text and "results.csv" in text  # the GPU and source line
    assert "| 1024 |" in res.stdout  # printed too

    # idempotent: a second run gives the same README
    assert _results_table(str(csv_path), "--readme", str(readme)).returncode == 0
    assert readme.read_text() == text


def test_results_table_needs_markers(tmp_path):
    csv_path = tmp_path / "r" / "gpu" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    readme = tmp_path / "README.md"
    readme.write_text("# no markers here\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode != 0
    assert "results-table:start" in res.stderr
    assert readme.read_text() == "# no markers here\n"


def test_results_table_missing_csv(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(bench_markers())
    res = _results_table(str(tmp_path / "nope.csv"), "--readme", str(readme))
    assert res.returncode != 0 and "nope.csv" in res.stderr


def test_results_table_default_is_newest(tmp_path):
    spec = importlib.util.spec_from_file_location("results_table", RESULTS_TABLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for gpu, stamp in [("a-gpu", "20260102-000000"), ("b-gpu", "20251231-235959"),
                       ("a-gpu", "20250101-000000")]:
        p = tmp_path / gpu / stamp / "results.csv"
        p.parent.mkdir(parents=True)
        p.write_text("x\n")
    assert mod.newest_csv(tmp_path) == tmp_path / "a-gpu" / "20260102-000000" / "results.csv"
    with pytest.raises(FileNotFoundError):
        mod.newest_csv(tmp_path / "empty")
