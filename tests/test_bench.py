"""The bench (``python -m numba_gemm.bench``, ``numba_gemm.tools.bench``): options, the
simulator's defaults, validation before timing, the rating of each stage against cuBLAS in its
own precision, the files and the plots. (``numba_gemm.tools.results_table``, which reads the
bench's CSV, is tested in ``test_tools.py``; here only on a real run's output.)

The end-to-end run uses ``--simulator``: in-process when the suite already runs under the
simulator, in a subprocess with ``NUMBA_ENABLE_CUDASIM=1`` on a GPU machine.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import HALF, to_host
from numba import cuda

from numba_gemm import STAGES, get_stage
from numba_gemm.kernels.stage import TOLERANCE
from numba_gemm.tools import bench
from numba_gemm.tools.bench import (
    CSV_COLUMNS,
    META_KEYS,
    OVERHEAD_COLUMNS,
    baselines,
    parse_sizes,
    plots,
    report,
    runner,
)

ROOT = Path(__file__).resolve().parents[1]


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
        assert r["mode"] == "simulator" and r["precision"] == "fp32"
        assert float(r["rel_error"]) <= 1e-5
        assert float(r["median_ms"]) > 0 and float(r["gflops"]) > 0
        assert r["pct_cublas"] == r["baseline"] == ""  # no cuBLAS on the simulator
    for r in rows:
        if r["stage"] == "auto":  # the config names the stage the automatic choice ran
            assert r["label"] == "sgemm (auto)"
            assert json.loads(r["config"])["stage"] in {s.name for s in STAGES}

    doc = json.loads((out / "results.json").read_text())
    assert set(META_KEYS) <= set(doc["meta"])
    assert doc["meta"]["mode"] == "simulator" and doc["meta"]["gpu"] == "simulator"
    assert doc["meta"]["reps"] == 1 and doc["meta"]["seed"] == 0
    assert doc["meta"]["reference"] == "float64 NumPy"
    assert doc["meta"]["baselines"] == dict.fromkeys(("fp32", "3xtf32", "tf32", "fp16", "bf16"))
    assert set(doc["meta"]["timings"]) == {"kernel", "end_to_end"}
    assert len(doc["rows"]) == len(rows)
    auto = next(r for r in doc["rows"] if r["stage"] == "auto")
    assert auto["plan"]["stage"] == auto["config"]["stage"] and auto["plan"]["reason"]
    for png in ("gflops_vs_size.png", "pct_cublas_largest.png", "end_to_end_vs_size.png"):
        assert (out / png).stat().st_size > 0

    header, overhead = _read_csv(out / "overhead.csv")
    assert header == list(OVERHEAD_COLUMNS) == ["impl", "size", "us_per_call"]
    assert [(r["impl"], r["size"]) for r in overhead] == [
        ("sgemm-numba", "4"),
        ("matmul-numba", "4"),
    ]
    assert all(float(r["us_per_call"]) > 0 for r in overhead)
    assert doc["overhead"] == [
        dict(impl=r["impl"], size="4", us_per_call=pytest.approx(float(r["us_per_call"]), rel=1e-5))
        for r in overhead
    ]

    # the table script reads what the bench wrote
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{bench_markers()}\n{e2e_markers()}\nafter\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "numba_gemm.tools.results_table",
            str(out / "results.csv"),
            "--readme",
            str(readme),
        ],
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
    """A stage that leaves C unwritten and one whose launch raises are FAILED; one the planner
    refuses (``ValueError``: it does not serve the problem) is SKIPPED with the planner's reason;
    the run goes on."""
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
    assert by["blocktiling_1d", "kernel"]["status"] == "SKIPPED"
    assert "no plan for you" in by["blocktiling_1d", "kernel"]["note"]
    assert (
        by["smem_tiling", "kernel"]["status"] == "ok" and by["smem_tiling", "kernel"]["gflops"] > 0
    )
    assert by["auto", "kernel"]["status"] == by["auto", "end_to_end"]["status"] == "ok"
    table = bench.format_table(rows)
    assert table.count("FAILED") == 2


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
    against cuBLAS's kernel row, of an end-to-end row against its end-to-end row; cuBLAS TF32
    (``--tf32``) is its own precision's baseline, not a fraction of cuBLAS FP32."""
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
        assert by["auto", kind]["baseline"] == "cublas_fp32"
    tf32 = by["cublas_tf32", "kernel"]
    assert tf32["pct_cublas"] == 1.0 and tf32["baseline"] == "cublas_tf32"
    assert by["naive", "kernel"]["pct_cublas"] == pytest.approx(
        by["naive", "kernel"]["gflops"] / by["cublas_fp32", "kernel"]["gflops"]
    )


def _cheap_stage_impl(problem, name, plan_for, half=None):
    """Stage ``name``'s record (label, precision, bound) running FakeBlas's product instead of
    the kernel: the rating is under test, not the kernels (the simulator runs them for
    minutes)."""
    st = get_stage(name)

    def run():
        FakeBlas().matmul(problem.A, problem.B, problem.C)

    return baselines.Impl(name, st.label, run, rtol=st.rtol, precision=st.precision)


def _fake_fp16_gemm(lib, A16, B16, C, precision="fp16"):
    """cuBLAS FP16 / BF16 stand-in: 16-bit inputs, FP32 products and sums, 16-bit C; widened
    into C."""
    half = HALF[precision]
    c16 = {}

    def run():
        a, b = (to_host(x).astype(np.float32) for x in (A16, B16))
        c16["c"] = (a @ b).astype(half)

    def widen():
        C.copy_to_device(c16["c"].astype(np.float32))

    return run, widen, contextlib.nullcontext


@pytest.mark.parametrize("fp16_baseline", [True, False], ids=["fp16-baseline", "no-fp16-baseline"])
def test_each_stage_is_rated_against_cublas_in_its_precision(monkeypatch, tmp_path, fp16_baseline):
    """FP32 and 3xTF32 stages against cuBLAS FP32, TF32 against cuBLAS TF32, FP16 (BF16) against
    cuBLAS FP16 (BF16) (16-bit inputs, FP32 sums), each timed because such a stage runs (no
    ``--tf32``); the ``baseline`` column names it. Without cuBLAS FP16 and BF16 the 16-bit
    ratios are empty, never taken
    against FP32."""
    monkeypatch.setattr(runner, "make_baseline", lambda kind: FakeBlas())
    monkeypatch.setattr(runner, "stage_impl", _cheap_stage_impl)
    if fp16_baseline:  # else FakeBlas has no FP16 path: cuBLAS FP16 FAILED
        monkeypatch.setattr(baselines, "fp16_gemm", _fake_fp16_gemm)
    by_precision = {}
    for s in STAGES:
        by_precision.setdefault(s.precision, s.name)
    stages = list(by_precision.values())
    assert {"fp32", "tf32", "3xtf32", "fp16", "bf16"} <= set(by_precision)
    args = bench.build_parser().parse_args(
        ["--sizes", "8", "--reps", "1", "--warmup", "0", "--peers", "none", "--stages", *stages]
    )
    rows = bench.run(args)
    by = {(r["stage"], r["timing"]): r for r in rows}
    kernel = {r["stage"]: r for r in rows if r["timing"] == "kernel"}
    assert [r["stage"] for r in rows][:5] == [
        "cublas_fp32",
        "cublas_fp32",
        "cublas_tf32",
        "cublas_fp16",
        "cublas_bf16",
    ]
    expected = {"fp32": "cublas_fp32", "3xtf32": "cublas_fp32", "tf32": "cublas_tf32"}
    for half in ("fp16", "bf16"):
        base = kernel[f"cublas_{half}"]
        assert base["label"].startswith(f"cuBLAS {half.upper()}") and base["precision"] == half
        assert base["status"] == ("ok" if fp16_baseline else "FAILED"), base["note"]
        if fp16_baseline:
            assert base["rel_error"] <= TOLERANCE[half] and base["pct_cublas"] == 1.0
            expected[half] = f"cublas_{half}"
    for precision, name in by_precision.items():
        r = kernel[name]
        assert r["status"] == "ok" and r["precision"] == precision, r
        if precision in expected:
            base = kernel[expected[precision]]
            assert r["baseline"] == base["stage"]
            assert r["pct_cublas"] == pytest.approx(r["gflops"] / base["gflops"])
        else:  # no cuBLAS of its own precision: no ratio at all
            assert r["pct_cublas"] is None and r["baseline"] == ""
    assert by["auto", "end_to_end"]["baseline"] == "cublas_fp32"

    table = bench.format_table(rows)
    assert "vs" in table.splitlines()[0] and "cuBLAS TF32" in table
    bench.write_csv(rows, tmp_path / "results.csv")
    _, got = _read_csv(tmp_path / "results.csv")
    assert [(r["stage"], r["precision"], r["baseline"]) for r in got] == [
        (r["stage"], r["precision"], r["baseline"]) for r in rows
    ]


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


def _ladder_rows():
    """Kernel rows at two sizes: every stage, auto, Triton and the three cuBLAS baselines, each
    rated against its precision's cuBLAS (a TF32 stage at 90 % of cuBLAS TF32, not 900 % of
    cuBLAS FP32)."""
    peers = [
        ("cublas_fp32", "cuBLAS FP32 (TF32 off), CuPy", "fp32", 1.0),
        ("cublas_tf32", "cuBLAS TF32, CuPy", "tf32", 1.0),
        ("cublas_fp16", "cuBLAS FP16 (FP32 accumulate), CuPy", "fp16", 1.0),
        ("cublas_bf16", "cuBLAS BF16 (FP32 accumulate), PyTorch", "bf16", 1.0),
        ("triton", "Triton FP32 (optional peer)", "fp32", 0.8),
        ("auto", "sgemm (auto)", "fp32", 0.95),
    ]
    ladder = [(s.name, s.label, s.precision, 0.9) for s in STAGES]
    rows = []
    for M in (256, 512):
        for stage, label, precision, pct in peers + ladder:
            r = report.make_row(M, M, M, stage, label, "ok", "gpu", precision=precision)
            base = report.BASELINE_OF[precision]
            r.update(gflops=1000.0 * pct * M, pct_cublas=pct, baseline=base)
            rows.append(r)
    return rows


def test_plots_have_one_panel_per_precision_and_distinct_lines():
    """GFLOP/s: one panel per precision group, its stages each with a colour and marker of their
    own, the cuBLAS its stages are rated against drawn in it; % of cuBLAS: the same panels, bars
    at each stage's ratio against its own precision's cuBLAS."""
    rows = _ladder_rows()
    fig = plots.throughput_figure(rows, title="t", ylabel="GFLOP/s")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["FP32", "TF32 / 3xTF32", "FP16", "BF16"]
    label = {r["stage"]: r["label"] for r in rows}
    cublas = {
        "FP32": {"cublas_fp32"},
        "TF32 / 3xTF32": {"cublas_tf32", "cublas_fp32"},
        "FP16": {"cublas_fp16"},
        "BF16": {"cublas_bf16"},
    }
    groups = dict(plots.PANELS)
    for ax in fig.axes:
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        stages = [s.name for s in STAGES if s.precision in groups[ax.get_title()]]
        if ax.get_title() == "FP32":
            stages += ["triton", "auto"]
        assert set(lines) == {label[s] for s in stages} | {label[b] for b in cublas[ax.get_title()]}
        styles = [
            (ln.get_color(), ln.get_marker(), ln.get_linestyle())
            for name, ln in lines.items()
            if not name.startswith("cuBLAS")
        ]
        assert len(set(styles)) == len(styles) == len(stages)
        assert len({(c, m) for c, m, _ in styles}) == len(styles)  # colour + marker alone
        assert all(lines[label[b]].get_color() == "black" for b in cublas[ax.get_title()])
    pairs = [(st["color"], st["marker"]) for st in map(plots.line_style, range(70))]
    assert len(set(pairs)) == 70

    at = [r for r in rows if r["M"] == 512]
    fig = plots.pct_figure(at, title="t")
    assert [ax.get_title() for ax in fig.axes] == titles
    for ax in fig.axes:
        names = [t.get_text() for t in ax.get_xticklabels()]
        assert not [n for n in names if n.startswith("cublas")]
        pct = {r["stage"]: 100 * r["pct_cublas"] for r in at}
        assert [b.get_height() for b in ax.patches] == pytest.approx([pct[n] for n in names])


def test_simulator_defaults_are_small_and_representative():
    """Left out on the simulator: one small ragged size that every default stage (FP16's N, K
    multiples of 8 included) supports, a stage or two of every precision of the ladder, one
    repeat, no warm-up. Given options stay; a GPU run keeps its defaults."""
    parse = bench.build_parser().parse_args
    sim = runner.resolve(parse([]), simulator=True)
    assert (sim.reps, sim.warmup) == (1, 0)
    ((M, N, K),) = sim.sizes
    assert max(M, N, K) <= runner.SIM_MAX_DIM and M % 16 and N % 16 and N % 8 == K % 8 == 0
    assert sim.stages == list(runner.SIM_STAGES) and len(sim.stages) <= 6
    assert {get_stage(n).precision for n in sim.stages} == {s.precision for s in STAGES}
    assert all(get_stage(n).supports(M, N, K) for n in sim.stages)
    assert runner.resolve(sim, simulator=False) is sim and sim.reps == 1  # idempotent

    gpu = runner.resolve(parse([]), simulator=False)
    assert gpu.sizes == parse_sizes("128..4096") and gpu.stages == [s.name for s in STAGES]
    assert (gpu.reps, gpu.warmup) == (20, 3)

    given = ["--sizes", "16..32", "--stages", "naive", "--reps", "2", "--warmup", "1"]
    got = runner.resolve(parse(given), simulator=True)
    assert (got.sizes, got.stages, got.reps, got.warmup) == (
        [(16,) * 3, (32,) * 3],
        ["naive"],
        2,
        1,
    )


def test_make_bench_sim_uses_the_simulator_defaults():
    """``make bench-sim`` runs the simulator's defaults (a minute on 2 cores), not a size list
    that takes longer than ten minutes."""
    text = (ROOT / "Makefile").read_text()
    recipe = text[text.index("\nbench-sim:") :].split("\n")[2]
    assert "numba_gemm.bench --simulator" in recipe and "--sizes" not in recipe


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
    from numba_gemm.tools.bench import overhead
    from numba_gemm.tools.check import torch_or_none
    from numba_gemm.tools.reference import cupy_or_none

    calls = []

    def lazy_sgemm(a, b, out):
        calls.append(1)

    rows = overhead.measure([(4, 4, 4)], sgemm=lazy_sgemm, calls=1, loops=1, warmup=0)
    assert not [r for r in rows if r["impl"].startswith("sgemm-")]
    n_sgemm = 1 + (torch_or_none() is not None) + (cupy_or_none() is not None)
    assert len(calls) == n_sgemm  # sgemm on Numba (and PyTorch, CuPy) arrays: once each
    # the peers (and the library's own matmul) still measured
    assert {r["impl"] for r in rows} <= {"torch.mm", "cupy.matmul", "matmul-numba", "matmul-torch"}


def test_overhead_skipped_on_the_simulator_by_default():
    args = bench.build_parser().parse_args([])
    sizes = bench.cli._overhead_sizes(args)
    assert sizes == ([] if runner.SIMULATOR else [(64, 64, 64), (128, 128, 128), (256,) * 3])
    args = bench.build_parser().parse_args(["--overhead-sizes", "4", "--no-overhead"])
    assert bench.cli._overhead_sizes(args) == []


def test_stage_impl_runs_an_nt_only_stage_on_b_stored_transposed():
    """``tf32_tma`` serves only B stored ``(N, K)`` (``x @ W.T``): the bench multiplies the same
    B stored transposed and notes it, and the product is still A @ B."""
    from numba_gemm import plan_for
    from numba_gemm.tools.check import make_problem

    problem = make_problem(32, 32, 32, seed=1, blas=None)
    impl = baselines.stage_impl(problem, "tf32_tma", plan_for)
    assert impl.run is not None and "transposed" in impl.note
    impl.run()
    c = to_host(problem.C)
    err = np.linalg.norm(c - problem.ref) / np.linalg.norm(problem.ref)
    assert err <= TOLERANCE["tf32"], err


def test_stage_impl_skips_a_stage_the_planner_refuses():
    """A TMA stage at rows that are not 16-byte aligned is SKIPPED with the planner's reason, not
    FAILED (nothing is wrong with it: it does not serve the problem)."""
    from numba_gemm import plan_for
    from numba_gemm.tools.check import make_problem

    problem = make_problem(31, 30, 29, seed=1, blas=None)
    impl = baselines.stage_impl(problem, "tf32x3_tma", plan_for)
    assert impl.run is None and not impl.error
    assert "16-byte" in impl.skip or "aligned" in impl.skip
