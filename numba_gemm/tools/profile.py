"""``python -m numba_gemm.tools.profile``: Nsight Compute metrics of each stage's kernels, as data.

For every stage named (and cuBLAS in FP32, TF32 and FP16 where asked), one child process builds
the bench's problem at one size (:func:`numba_gemm.tools.check.make_problem`, the stage's tuned
plan through :func:`numba_gemm.tools.bench.baselines.stage_impl`), calls it once to compile and
warm up, and calls it once more between ``cuda.profile_start()`` and ``cuda.profile_stop()``.
The parent runs each child under

    ncu --clock-control none --profile-from-start off --csv --page raw --section ...

so that only that call's kernels are measured (a split-K fix-up or a padding copy shows up as a
kernel of its own), and keeps the metrics whose names start with :data:`KEEP` in one long table,
``ncu.csv``: ``target, kernel, id, metric, unit, value``. ``--sass`` also writes each stage's SASS
(``sass/<stage>.sass.gz``), disassembled from the cubin that ``ptxas`` makes of its PTX, where
``nvdisasm`` is installed. Needs a GPU and ``ncu`` on ``PATH``; the notebooks read the results.

Sections (what each measures: Nsight Compute's "Kernel Profiling Guide", sections and metrics):
SpeedOfLight (SM and memory throughput as % of peak, duration), MemoryWorkloadAnalysis and its
tables (DRAM bytes, L1/L2 hit rates, shared-memory wavefronts and bank conflicts), Occupancy
(theoretical and achieved), LaunchStats (registers, SMEM, waves), WarpStateStats (the average
cycles a warp spends stalled, per reason, per issued instruction), ComputeWorkloadAnalysis
(pipe utilization) and InstructionStats.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from numba import cuda

from .. import plan_for
from ..kernels import STAGES, get_stage
from ..launch.launcher import numba_signature
from .bench.baselines import cublas_impls, half_operands, stage_impl
from .check import make_problem
from .resources import assemble, compile_kernel_ptx, target_of

SECTIONS = (
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Tables",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "ComputeWorkloadAnalysis",
    "InstructionStats",
)

#: Prefixes of the raw metrics kept in ``ncu.csv`` (the rest of the raw page is dropped).
KEEP = (
    "dram__",
    "gpu__time_duration",
    "gpu__compute_memory_throughput",
    "sm__throughput",
    "sm__warps_active",
    "sm__maximum_warps",
    "sm__pipe_",
    "sm__inst_executed_pipe_",
    "smsp__average_warp",
    "smsp__issue_active",
    "smsp__inst_executed.",
    "smsp__inst_executed_op_shared",
    "smsp__inst_executed_op_global",
    "launch__",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared",
    "l1tex__t_sectors_pipe_lsu_mem_global_op",
    "l1tex__t_requests_pipe_lsu_mem_global_op",
    "l1tex__t_sector_hit_rate",
    "lts__t_sector_hit_rate",
    "lts__t_bytes.",
)

#: Targets besides the stages: cuBLAS in each precision (PyTorch's ``torch.mm``).
CUBLAS_TARGETS = ("cublas_fp32", "cublas_tf32", "cublas_fp16")


def _child(target: str, M: int, N: int, K: int) -> None:
    """Build the problem, warm ``target`` up, then call it once inside the profiled range."""
    problem = make_problem(M, N, K, seed=0, blas="torch")
    if target in CUBLAS_TARGETS:
        half = {"fp16": half_operands(problem, "fp16")} if target == "cublas_fp16" else None
        impls = cublas_impls(problem, tf32=target == "cublas_tf32", half=half)
        impl = next(i for i in impls if i.stage == target)
    else:
        precision = get_stage(target).precision
        half = (
            {precision: half_operands(problem, precision)}
            if precision in ("fp16", "bf16")
            else None
        )
        impl = stage_impl(problem, target, plan_for, half)
    if impl.run is None:
        raise SystemExit(f"{target}: {impl.skip or impl.error or impl.note}")
    with impl.mode():
        for _ in range(2):
            impl.run()
        cuda.synchronize()
        cuda.profile_start()
        impl.run()
        cuda.synchronize()
        cuda.profile_stop()
    print(json.dumps({"target": target, "config": impl.config, "plan": impl.plan}))


def parse_raw(text: str, target: str) -> list[dict]:
    """The rows of ``ncu --csv --page raw`` output (a header line, a units line, one line per
    kernel) as ``{target, kernel, id, metric, unit, value}``, metrics filtered by :data:`KEEP`."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    head, units, body = table[0], table[1], table[2:]
    out = []
    for row in body:
        rec = dict(zip(head, row, strict=False))
        for name, unit, value in zip(head, units, row, strict=False):
            if not name.startswith(KEEP):
                continue
            try:
                v = float(value.replace(",", ""))
            except ValueError:
                continue
            out.append(
                dict(
                    target=target,
                    kernel=rec.get("Kernel Name", ""),
                    id=int(rec.get("ID", 0)),
                    metric=name,
                    unit=unit,
                    value=v,
                )
            )
    return out


def _sass(stage_name: str, out: Path) -> None:
    """SASS of a stage's default kernel: its PTX (``tools.resources``), ptxas, nvdisasm."""
    nvdisasm = shutil.which("nvdisasm")
    if nvdisasm is None:
        print("no nvdisasm on PATH: no SASS", file=sys.stderr)
        return
    stage = get_stage(stage_name)
    cc, arch = target_of(stage)
    cubin, _ = assemble(
        compile_kernel_ptx(stage.kernel, cc=cc, sig=numba_signature(stage.args)), arch
    )
    with tempfile.TemporaryDirectory() as tmp:  # nvdisasm reads a file
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run(
            [nvdisasm, "-c", "-g", str(path)], check=True, capture_output=True, text=True
        ).stdout
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stage_name}.sass.gz").write_bytes(gzip.compress(sass.encode(), mtime=0))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="stage names or cublas_fp32/tf32/fp16 (all)")
    parser.add_argument("--size", default="4096x4096x4096", help="MxNxK (default 4096^3)")
    parser.add_argument("--out", type=Path, default=Path("profile"), help="output folder")
    parser.add_argument("--sass", action="store_true", help="also write each stage's SASS")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    M, N, K = (int(x) for x in args.size.lower().split("x"))
    if args.child:
        _child(args.targets[0], M, N, K)
        return 0

    targets = args.targets or [*CUBLAS_TARGETS, *(s.name for s in STAGES)]
    ncu = shutil.which("ncu")
    if ncu is None:
        parser.error("ncu (Nsight Compute) is not on PATH")
    args.out.mkdir(parents=True, exist_ok=True)
    rows, plans = [], {}
    for t in targets:
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv"]
        cmd += ["--page", "raw"]
        for s in SECTIONS:
            cmd += ["--section", s]
        cmd += [sys.executable, "-m", __spec__.name, "--child", t, "--size", args.size]
        res = subprocess.run(cmd, capture_output=True, text=True)
        got = parse_raw(res.stdout, t)
        for ln in res.stdout.splitlines():
            if ln.startswith('{"target"'):
                plans[t] = json.loads(ln)
        kernels = len({r["id"] for r in got})
        print(f"{t}: {kernels} kernel(s), {len(got)} metrics (exit {res.returncode})", flush=True)
        if res.returncode or not got:
            print(res.stderr[-2000:], file=sys.stderr)
        rows += got
        with open(args.out / "ncu.csv", "w", newline="") as f:  # after each target: a cut run keeps
            w = csv.DictWriter(f, fieldnames=["target", "kernel", "id", "metric", "unit", "value"])
            w.writeheader()
            w.writerows(rows)
        if args.sass and t not in CUBLAS_TARGETS:
            try:
                _sass(t, args.out / "sass")
            except Exception as e:  # evidence, not a gate: say it and go on
                print(f"{t}: no SASS ({type(e).__name__}: {e})", file=sys.stderr)
    meta = dict(size=[M, N, K], sections=list(SECTIONS), command=" ".join(sys.argv), plans=plans)
    (args.out / "ncu.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
