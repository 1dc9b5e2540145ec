"""The bench CLI (``python -m numba_gemm.bench``) and ``bench/results_table.py``.

The end-to-end run uses ``--simulator``: in-process when the suite already runs under the
simulator, in a subprocess with ``NUMBA_ENABLE_CUDASIM=1`` on a GPU machine.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

from numba_gemm import STAGES, bench, get_stage
from numba_gemm.bench import CSV_COLUMNS, META_KEYS, OVERHEAD_COLUMNS, parse_sizes, runner

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
    "spec",
    [
        "",
        " ",
        "abc",
        "0",
        "-4",
        "512..128",
        "100..200",
        "4x4",
        "4x4x4x4",
        "1.5",
        "16,,32",
        "8x0x8",
        "..64",
        "16..a",
    ],
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
    [
        ("NVIDIA H200", "nvidia-h200"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("NVIDIA GeForce RTX 4090 (Laptop)", "nvidia-geforce-rtx-4090-laptop"),
        ("simulator", "simulator"),
    ],
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
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.stdout.strip() == "True":
        pytest.skip("a CUDA GPU is visible even with CUDA_VISIBLE_DEVICES=''")
    res = subprocess.run(
        [sys.executable, "-m", "numba_gemm.bench", "--sizes", "16"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--simulator" in lines[0], res.stderr


# --- end to end on the simulator ----------------------------------------------------------------


def test_simulator_end_to_end(tmp_path, capfd):
    out = tmp_path / "run"
    stages = ["naive", "smem_tiling"]
    code = bench.main(
        [
            "--simulator",
            "--sizes",
            "16,24x20x12",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--stages",
            *stages,
            "--overhead-sizes",
            "4",
            "--out",
            str(out),
        ]
    )
    printed = capfd.readouterr().out
    assert code == 0, printed
    assert "SIMULATOR" in printed and "0 FAILED" in printed
    assert "host overhead per call" in printed and "sgemm-numba" in printed

    header, rows = _read_csv(out / "results.csv")
    assert header == list(CSV_COLUMNS)
    per_shape = [("auto", "kernel"), ("auto", "end_to_end")] + [(st, "kernel") for st in stages]
    assert [(r["M"], r["N"], r["K"], r["stage"], r["timing"]) for r in rows] == [
        (*map(str, shape), st, kind)
        for shape in [(16, 16, 16), (24, 20, 12)]
        for st, kind in per_shape
    ]
    assert {r["timing"] for r in rows} == {"kernel", "end_to_end"}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["mode"] == "simulator"
        assert float(r["rel_error"]) <= 1e-5
        assert float(r["median_ms"]) > 0 and float(r["gflops"]) > 0
        assert r["pct_cublas"] == ""  # no cuBLAS on the simulator
    for r in rows:
        if r["stage"] == "auto":  # the config names the stage the automatic choice ran
            assert r["label"] == "sgemm (auto)"
            assert json.loads(r["config"])["stage"] in {s.name for s in STAGES}

    doc = json.loads((out / "results.json").read_text())
    assert set(META_KEYS) <= set(doc["meta"])
    assert doc["meta"]["mode"] == "simulator" and doc["meta"]["gpu"] == "simulator"
    assert doc["meta"]["reps"] == 1 and doc["meta"]["seed"] == 0
    assert doc["meta"]["reference"] == "float64 NumPy"
    assert set(doc["meta"]["timings"]) == {"kernel", "end_to_end"}
    assert len(doc["rows"]) == len(rows)
    auto = next(r for r in doc["rows"] if r["stage"] == "auto")
    assert auto["plan"]["stage"] == auto["config"]["stage"] and auto["plan"]["reason"]
    for png in ("gflops_vs_size.png", "pct_cublas_largest.png", "end_to_end_vs_size.png"):
        assert (out / png).stat().st_size > 0

    header, overhead = _read_csv(out / "overhead.csv")
    assert header == list(OVERHEAD_COLUMNS) == ["impl", "size", "us_per_call"]
    assert [(r["impl"], r["size"]) for r in overhead] == [("sgemm-numba", "4")]
    assert float(overhead[0]["us_per_call"]) > 0
    assert doc["overhead"] == [
        dict(
            impl="sgemm-numba",
            size="4",
            us_per_call=pytest.approx(float(overhead[0]["us_per_call"]), rel=1e-5),
        )
    ]

    # the table script reads what the bench wrote
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{bench_markers()}\n{e2e_markers()}\nafter\n")
    res = subprocess.run(
        [sys.executable, str(RESULTS_TABLE), str(out / "results.csv"), "--readme", str(readme)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert "| 16 |" in text and "| 24x20x12 |" in text and "simulator run" in text
    kernel_part, e2e_part = text.split("<!-- e2e-table:start -->")
    assert "timing: kernel" in kernel_part and "sgemm (auto)" in kernel_part
    assert "timing: end to end" in e2e_part and "`sgemm-numba`" in e2e_part


def bench_markers(inside: str = "old table") -> str:
    return f"<!-- results-table:start -->\n{inside}\n<!-- results-table:end -->"


def e2e_markers(inside: str = "old e2e table") -> str:
    return f"<!-- e2e-table:start -->\n{inside}\n<!-- e2e-table:end -->"


class FakePlan:
    """A plan whose launch is ``launch(A, B, C)``: a broken kernel for the bench to catch."""

    def __init__(self, stage, launch):
        self.stage, self._launch = stage, launch
        self.variant, self.split_k, self.reason = "vector", 1, "a test's broken plan"

    def launch(self, A, B, C, alpha=1.0, beta=0.0, stream=0):
        self._launch(A, B, C)


def test_failed_stages_are_reported_not_timed(monkeypatch):
    """A stage that leaves C unwritten, one whose launch raises and one that cannot be planned
    are FAILED; the run goes on."""
    real = runner.plan_for
    naive = get_stage("naive")

    def one_thread(A, B, C):  # only C[0, 0] is written, the NaN poison stays
        naive.kernel[(1, 1), (1, 1)](A, B, C, np.float32(1.0), np.float32(0.0))

    def raising(A, B, C):
        raise RuntimeError("launch config exploded")

    def broken(M, N, K, *, stage=None, **kw):
        if stage == "naive":
            return FakePlan(naive, one_thread)
        if stage == "gmem_coalesce":
            return FakePlan(get_stage(stage), raising)
        if stage == "blocktiling_1d":
            raise ValueError("no plan for you")
        return real(M, N, K, stage=stage, **kw)

    monkeypatch.setattr(runner, "plan_for", broken)
    args = bench.build_parser().parse_args(
        [
            "--sizes",
            "8",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--baseline",
            "none",
            "--stages",
            "naive",
            "gmem_coalesce",
            "blocktiling_1d",
            "smem_tiling",
        ]
    )
    rows = bench.run(args)
    by = {(r["stage"], r["timing"]): r for r in rows}
    naive_row = by["naive", "kernel"]
    assert naive_row["status"] == "FAILED"
    assert naive_row["rel_error"] == float("inf"), naive_row["note"]
    assert naive_row["median_ms"] is None and "rel. error inf" in naive_row["note"]
    assert by["gmem_coalesce", "kernel"]["status"] == "FAILED"
    assert "launch config exploded" in by["gmem_coalesce", "kernel"]["note"]
    assert by["blocktiling_1d", "kernel"]["status"] == "FAILED"
    assert "no plan for you" in by["blocktiling_1d", "kernel"]["note"]
    assert (
        by["smem_tiling", "kernel"]["status"] == "ok" and by["smem_tiling", "kernel"]["gflops"] > 0
    )
    assert by["auto", "kernel"]["status"] == by["auto", "end_to_end"]["status"] == "ok"
    table = bench.format_table(rows)
    assert table.count("FAILED") == 3


class FakeBlas:
    """cuBLAS stand-in for the simulator: NumPy through host copies, FP32 already."""

    name, version = "FakeBLAS", "0"

    def wrap(self, d):
        return d

    def empty(self, M, N):
        return cuda.device_array((M, N), np.float32)

    def matmul(self, a, b, c):
        c.copy_to_device((a.copy_to_host() @ b.copy_to_host()).astype(np.float32))

    def to_host(self, c):
        return c.copy_to_host()

    def fp32_mode(self):
        return contextlib.nullcontext()

    def tf32_mode(self):
        return contextlib.nullcontext()


def test_peers_and_pct_cublas_per_timing(monkeypatch):
    """cuBLAS is the reference and a peer with both timings; % of cuBLAS of a kernel row is
    against cuBLAS's kernel row, of an end-to-end row against its end-to-end row (TF32: kernel)."""
    monkeypatch.setattr(runner, "make_baseline", lambda kind: FakeBlas())
    args = bench.build_parser().parse_args(
        [
            "--sizes",
            "8",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--stages",
            "naive",
            "--tf32",
            "--peers",
            "none",
        ]
    )
    rows = bench.run(args)
    by = {(r["stage"], r["timing"]): r for r in rows}
    assert list(by) == [
        ("cublas_fp32", "kernel"),
        ("cublas_fp32", "end_to_end"),
        ("cublas_tf32", "kernel"),
        ("auto", "kernel"),
        ("auto", "end_to_end"),
        ("naive", "kernel"),
    ]
    assert all(r["status"] == "ok" for r in rows), [r["note"] for r in rows]
    for kind in ("kernel", "end_to_end"):
        base = by["cublas_fp32", kind]
        assert base["pct_cublas"] == 1.0 and base["label"].startswith("cuBLAS FP32 (TF32 off)")
        assert by["auto", kind]["pct_cublas"] == pytest.approx(
            by["auto", kind]["gflops"] / base["gflops"]
        )
    assert by["cublas_tf32", "kernel"]["pct_cublas"] == pytest.approx(
        by["cublas_tf32", "kernel"]["gflops"] / by["cublas_fp32", "kernel"]["gflops"]
    )
    assert by["naive", "kernel"]["pct_cublas"] == pytest.approx(
        by["naive", "kernel"]["gflops"] / by["cublas_fp32", "kernel"]["gflops"]
    )


def test_plots_with_a_baseline(tmp_path):
    """The plots with cuBLAS rows (which the simulator never has), a FAILED, a TF32 line, a
    Triton peer and end-to-end rows."""

    def row(M, stage, status, gflops, pct, timing="kernel"):
        r = dict.fromkeys(CSV_COLUMNS)
        r.update(
            M=M,
            N=M,
            K=M,
            stage=stage,
            label=stage,
            status=status,
            gflops=gflops,
            pct_cublas=pct,
            mode="gpu",
            config={},
            note="",
            timing=timing,
        )
        return r

    rows = [
        row(512, "cublas_fp32", "ok", 20000.0, 1.0),
        row(512, "cublas_tf32", "ok", 40000.0, 2.0),
        row(512, "cublas_fp32", "ok", 15000.0, 1.0, "end_to_end"),
        row(512, "triton", "ok", 12000.0, 0.6),
        row(512, "auto", "ok", 15000.0, 0.75),
        row(512, "auto", "ok", 9000.0, 0.6, "end_to_end"),
        row(512, "naive", "ok", 300.0, 0.015),
        row(512, "warptiling", "ok", 15000.0, 0.75),
        row(1024, "cublas_fp32", "ok", 40000.0, 1.0),
        row(1024, "cublas_tf32", "ok", 90000.0, 2.25),
        row(1024, "cublas_fp32", "ok", 39000.0, 1.0, "end_to_end"),
        row(1024, "triton", "ok", 30000.0, 0.75),
        row(1024, "auto", "ok", 38000.0, 0.95),
        row(1024, "auto", "ok", 37000.0, 0.95, "end_to_end"),
        row(1024, "naive", "SKIPPED", None, None),
        row(1024, "warptiling", "FAILED", None, None),
    ]
    paths = bench.plot(rows, tmp_path, gpu="NVIDIA H200", mode="gpu")
    assert [p.name for p in paths] == [
        "gflops_vs_size.png",
        "pct_cublas_largest.png",
        "end_to_end_vs_size.png",
    ]
    assert all(p.stat().st_size > 0 for p in paths)


def test_overhead_csv_columns(tmp_path):
    rows = [
        dict(impl="sgemm-numba", size="64", us_per_call=9.5),
        dict(impl="torch.mm", size="64", us_per_call=4.25),
    ]
    bench.write_overhead_csv(rows, tmp_path / "overhead.csv")
    header, got = _read_csv(tmp_path / "overhead.csv")
    assert header == ["impl", "size", "us_per_call"]
    assert got == [
        dict(impl="sgemm-numba", size="64", us_per_call="9.5"),
        dict(impl="torch.mm", size="64", us_per_call="4.25"),
    ]
    table = bench.format_overhead(rows)
    assert "64: us/call" in table and "torch.mm" in table and "9.5" in table


def test_overhead_measure_validates_first():
    """An implementation that writes nothing is validated once, never timed, and left out."""
    from numba_gemm.bench import overhead
    from numba_gemm.check import torch_or_none
    from numba_gemm.reference import cupy_or_none

    calls = []

    def lazy_sgemm(a, b, out):
        calls.append(1)

    rows = overhead.measure([(4, 4, 4)], sgemm=lazy_sgemm, calls=1, loops=1, warmup=0)
    assert not [r for r in rows if r["impl"].startswith("sgemm-")]
    n_sgemm = 1 + (torch_or_none() is not None) + (cupy_or_none() is not None)
    assert len(calls) == n_sgemm  # sgemm on Numba (and PyTorch, CuPy) arrays: once each
    assert {r["impl"] for r in rows} <= {"torch.mm", "cupy.matmul"}  # the peers still measured


def test_overhead_skipped_on_the_simulator_by_default():
    args = bench.build_parser().parse_args([])
    sizes = bench.cli._overhead_sizes(args)
    assert sizes == ([] if runner.SIMULATOR else [(64, 64, 64), (128, 128, 128), (256,) * 3])
    args = bench.build_parser().parse_args(["--overhead-sizes", "4", "--no-overhead"])
    assert bench.cli._overhead_sizes(args) == []


# --- bench/results_table.py ----------------------------------------------------------------------


def _write_results(path: Path, *, timing: bool = True) -> None:
    """A results.csv; ``timing=False`` writes one from before the ``timing`` column."""
    path.parent.mkdir(parents=True)
    fp32 = '"cuBLAS FP32 (TF32 off), CuPy"'
    lines = [
        "1024,1024,1024,cublas_fp32," + fp32 + ",ok,0.1,0.1,0.1,20000,1,,,gpu",
        "1024,1024,1024,naive,1: naive,ok,10,10,10,200,0.01,1e-7,,gpu",
        '1024,1024,1024,warptiling,8: warptiling,ok,0.2,0.2,0.2,10000,0.5,1e-7,"{""BM"":128}",gpu',
        "4096,1024,512,cublas_fp32," + fp32 + ",ok,0.1,0.1,0.1,40000,1,,,gpu",
        "4096,1024,512,naive,1: naive,SKIPPED,,,,,,1e-7,,gpu",
        "4096,1024,512,warptiling,8: warptiling,FAILED,,,,,,inf,,gpu",
    ]
    if timing:
        lines = [ln + ",kernel" for ln in lines]
        lines += [
            "1024,1024,1024,cublas_fp32," + fp32 + ",ok,0.2,0.2,0.2,10000,1,,,gpu,end_to_end",
            "1024,1024,1024,auto,sgemm (auto),ok,0.2,0.2,0.2,9000,0.45,1e-7,"
            '"{""stage"":""warptiling""}",gpu,kernel',
            "1024,1024,1024,auto,sgemm (auto),ok,0.3,0.3,0.3,8000,0.8,1e-7,"
            '"{""stage"":""warptiling""}",gpu,end_to_end',
        ]
    header = CSV_COLUMNS if timing else CSV_COLUMNS[:-1]
    path.write_text("\n".join([",".join(header), *lines]) + "\n")


def _results_table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RESULTS_TABLE), *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("timing", [True, False], ids=["with-timing", "old-csv"])
def test_results_table_fills_readme(tmp_path, timing):
    """The README table is kernel time; a CSV from before the timing column is all kernel time."""
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path, timing=timing)
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
    if timing:  # the auto column holds its kernel row, not its end-to-end one
        assert table[0].endswith("| 8: warptiling | sgemm (auto) |")
        assert table[2] == "| 1024 | 20,000 | 200 (1%) | 10,000 (50%) | 9,000 (45%) |"
        assert table[3] == "| 4096x1024x512 | 40,000 | SKIPPED | FAILED | - |"
    else:
        assert table[2] == "| 1024 | 20,000 | 200 (1%) | 10,000 (50%) |"
        assert table[3] == "| 4096x1024x512 | 40,000 | SKIPPED | FAILED |"
    assert "nvidia-h200" in text and "results.csv" in text  # the GPU and source line
    assert "timing: kernel" in text
    assert "| 1024 |" in res.stdout  # printed too
    assert ("end to end" in res.stdout) == timing  # printed even without the README markers

    # idempotent: a second run gives the same README
    assert _results_table(str(csv_path), "--readme", str(readme)).returncode == 0
    assert readme.read_text() == text


def test_results_table_end_to_end_and_overhead(tmp_path):
    csv_path = tmp_path / "results" / "nvidia-h200" / "20260101-000000" / "results.csv"
    _write_results(csv_path)
    (csv_path.parent / "overhead.csv").write_text(
        "impl,size,us_per_call\nsgemm-numba,64,9.5\ntorch.mm,64,4.25\nsgemm-numba,128,9.75\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{bench_markers()}\n\n{e2e_markers()}\n\n## Use\n")
    res = _results_table(str(csv_path), "--readme", str(readme))
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert "old table" not in text and "old e2e table" not in text
    e2e = text[text.index("<!-- e2e-table:start -->") : text.index("<!-- e2e-table:end -->")]
    lines = [ln for ln in e2e.splitlines() if ln.startswith("|")]
    assert lines[0] == (
        "| size | cuBLAS FP32 (TF32 off) GFLOP/s | sgemm (auto) GFLOP/s | "
        "sgemm (auto) kernel-time GFLOP/s | auto picked |"
    )
    assert lines[2] == "| 1024 | 10,000 | 8,000 (80%) | 9,000 (45%) | `warptiling` |"
    assert lines[3] == "| implementation | 64: us/call | 128: us/call |"
    assert lines[5:] == ["| `sgemm-numba` | 9.5 | 9.8 |", "| `torch.mm` | 4.2 | - |"]
    assert "timing: end to end" in e2e and "overhead.csv" in e2e
    assert _results_table(str(csv_path), "--readme", str(readme)).returncode == 0
    assert readme.read_text() == text  # idempotent


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
    for gpu, stamp in [
        ("a-gpu", "20260102-000000"),
        ("b-gpu", "20251231-235959"),
        ("a-gpu", "20250101-000000"),
    ]:
        p = tmp_path / gpu / stamp / "results.csv"
        p.parent.mkdir(parents=True)
        p.write_text("x\n")
    assert mod.newest_csv(tmp_path) == tmp_path / "a-gpu" / "20260102-000000" / "results.csv"
    with pytest.raises(FileNotFoundError):
        mod.newest_csv(tmp_path / "empty")


# --- bench/shapes.py --fold ----------------------------------------------------------------------


def test_shapes_fold_records_the_fastest_per_shape(tmp_path):
    """``--fold`` keeps each swept shape's candidates within 5 % of its best (failed rows and
    rows without an occupancy dropped, the occupancy of older sweeps taken from the tuning data),
    per alignment, in the tuning file; no GPU."""
    cfg = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
    tun = {"format": 1, "gpus": {"NVIDIA H200": {"compute_capability": [9, 0], "classes": {
        "large": {"double_buffering": {"config": cfg, "ms": 3.0, "shape": [4096, 4096, 4096],
                                       "blocks_per_sm": 2, "blocks_per_sm_scalar": 1}}}}}}
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
    with open(sweep, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["gpu", "group", "M", "N", "K", "stage", "config", "kernel_ms",
                    "blocks_per_sm"])
        for M, N, K, c, ms, bps in rows:
            w.writerow(["NVIDIA H200", "given", M, N, K, "double_buffering", str(c), ms, bps])
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "shapes.py"), "--out",
                          str(tmp_path), "--fold", str(sweep), "--into", str(into)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    recs = {(tuple(r["shape"]), r["aligned"]): r["candidates"]
            for r in json.loads(into.read_text())["gpus"]["NVIDIA H200"]["shapes"]}
    assert set(recs) == {((256, 4096, 4096), True), ((256, 4095, 4095), False)}
    assert [(c["config"]["SPLITK"], c["ms"], c["blocks_per_sm"])
            for c in recs[(256, 4096, 4096), True]] == [(2, 0.2, 2), (1, 0.21, 2)]
    assert recs[(256, 4095, 4095), False][0]["blocks_per_sm"] == 1
    assert "256x4096x4096 NN aligned: 2 of 3" in (tmp_path / "fold.txt").read_text()

    # a sweep of another GPU model goes into an entry of its own, measured shapes only (the
    # H200's classes serve it: tuning._default_entries); the H200's records stay as they were
    with open(sweep, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["gpu", "group", "M", "N", "K", "stage", "config", "kernel_ms",
                    "blocks_per_sm"])
        w.writerow(["NVIDIA H100", "given", 64, 4096, 4096, "double_buffering",
                    str(dict(cfg, SPLITK=8)), "0.065", "2"])
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "shapes.py"), "--out",
                          str(tmp_path), "--fold", str(sweep), "--into", str(into)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    gpus = json.loads(into.read_text())["gpus"]
    assert gpus["NVIDIA H100"]["classes"] == {}
    assert gpus["NVIDIA H100"]["compute_capability"] == [9, 0]
    assert [(r["shape"], r["candidates"][0]["config"]["SPLITK"])
            for r in gpus["NVIDIA H100"]["shapes"]] == [([64, 4096, 4096], 8)]
    assert len(gpus["NVIDIA H200"]["shapes"]) == 2

    # rows of another layout (x @ W.T) go into records of their own beside the NN ones
    skinny = dict(MT=8, BN=128, NT=256, KC=128, SPLITK=8, MINB=0, NBUF=0)
    with open(sweep, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["gpu", "group", "M", "N", "K", "layout", "stage", "config", "kernel_ms",
                    "blocks_per_sm"])
        for layout, ms in (("NT", "0.04"), ("NN", "0.03")):
            w.writerow(["NVIDIA H100", "given", 8, 4096, 4096, layout, "skinny", str(skinny), ms,
                        "2"])
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "shapes.py"), "--out",
                          str(tmp_path), "--fold", str(sweep), "--into", str(into)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    recs = json.loads(into.read_text())["gpus"]["NVIDIA H100"]["shapes"]
    assert [(r["shape"][0], r.get("layout"), r["candidates"][0]["ms"]) for r in recs] == [
        (8, None, 0.03), (8, "NT", 0.04), (64, None, 0.065)]
    assert "8x4096x4096 NT aligned: 1 of 1" in (tmp_path / "fold.txt").read_text()


def test_shapes_sweeps_extra_candidates_with_their_splits(fake_gpu):
    """``--extra`` candidates are swept like the tuning data's: each with the K splits the plan
    may give it up to its ``blocks_per_sm``, and its stream-K twin; ``--extra-only`` sweeps
    nothing else."""
    from numba_gemm import plan
    from numba_gemm.kernels._tunable import STREAM_K

    dev = fake_gpu("NVIDIA H100 80GB HBM3")
    spec = importlib.util.spec_from_file_location("shapes", ROOT / "bench" / "shapes.py")
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    cfg = dict(BM=32, BN=256, BK=16, WM=32, WN=64, WNITER=1, TM=8, TN=4, MINB=0, SPLITK=1,
               NBUF=3)
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
    spec = importlib.util.spec_from_file_location("shapes", ROOT / "bench" / "shapes.py")
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    nn = shapes.candidates(8, 4096, 4096, stages=["skinny"])
    nt = shapes.candidates(8, 4096, 4096, stages=["skinny"], layout="NT")
    assert len(nn) > len(nt) > 0 and all(c in nn for c in nt)
    assert all(k15_skinny.transposed_b_ok(c) for _, c in nt)
    assert all(("skinny", c) in nt for c in k15_skinny.SPACE if k15_skinny.transposed_b_ok(c))
    assert any(c["NBUF"] for _, c in nn) and not any(c["NBUF"] for _, c in nt)
