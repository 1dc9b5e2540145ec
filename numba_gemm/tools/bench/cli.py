"""``python -m numba_gemm.bench``: the command line (options, output directory, printed tables).

See the package docstring (``numba_gemm.bench``) for what is measured and written.

Exit status: 0 when the benchmark ran, FAILED stages included (a summary line counts them);
2 for a usage error or no CUDA GPU without ``--simulator``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ... import sgemm
from ...device import SIMULATOR, gpu_available
from ...kernels import STAGES
from . import overhead, report, runner
from .baselines import triton_module
from .report import FAILED, OK, SKIPPED
from .runner import (
    GPU_REPS,
    GPU_SIZES,
    GPU_WARMUP,
    SIM_MAX_DIM,
    SIM_REPS,
    SIM_SIZES,
    SIM_STAGES,
    SIM_WARMUP,
    SKIP_FACTOR,
    SLOW_REPS,
)
from .sizes import SUITE, gpu_slug, parse_sizes, size_label, suite_shapes

PROG = "python -m numba_gemm.bench"
DEFAULT_OVERHEAD_SIZES = "64,128,256"
NO_GPU_MESSAGE = (
    "numba_gemm.bench: no CUDA GPU found; use --simulator to run the pipeline on the CPU "
    "(timings not comparable)"
)


def _sizes_arg(text: str) -> list[tuple[int, int, int]]:
    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _number_arg(kind: type, low: float, what: str) -> Any:
    def conv(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not v >= low:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return v

    return conv


def build_parser() -> argparse.ArgumentParser:
    names = [s.name for s in STAGES]
    ap = argparse.ArgumentParser(
        prog=PROG,
        allow_abbrev=False,
        description="Validate, then time sgemm's automatic choice, every SGEMM stage of "
        "numba_gemm and its peers (cuBLAS in each stage's precision: FP32 with TF32 off, TF32, "
        "FP16, BF16; optional Triton) in the same process: kernel time (CUDA events behind a hold "
        "kernel) for all, end-to-end time of the public call made back to back for sgemm and "
        "the peers, and the host overhead per call at small sizes. Prints tables and writes "
        "results.csv, results.json, overhead.csv and plots. GFLOP/s = 2*M*N*K / median time; "
        "%% of cuBLAS against cuBLAS in the stage's precision (FP32 and 3xTF32: cuBLAS FP32; "
        "TF32: cuBLAS TF32; FP16, BF16: cuBLAS FP16, BF16), named in the 'baseline' column. "
        "Exit status: 0 when it ran (FAILED stages included), 2 for a usage error or no GPU.",
    )
    ap.add_argument(
        "--sizes",
        type=_sizes_arg,
        default=None,
        metavar="SPEC",
        help=f"GEMM sizes (default {GPU_SIZES}; on the simulator {SIM_SIZES}): "
        "comma-separated items, each A..B "
        "(every power of two from A to B), N (square N x N x N) or MxNxK "
        "(A: M x K, B: K x N), e.g. '128..1024,1000,4096x1024x512'",
    )
    ap.add_argument(
        "--suite",
        nargs="*",
        default=None,
        choices=list(SUITE),
        metavar="GROUP",
        help="run the shape suite instead of the default sizes: squares, ragged, "
        "skinny (few rows or columns), deep K, small K and the projection GEMMs of GPT-2 and "
        f"Llama 3 8B; optionally only these groups ({', '.join(SUITE)}); shapes given by "
        "--sizes are added to it. Every dimension stays as listed (no simulator)",
    )
    ap.add_argument(
        "--stages",
        nargs="+",
        default=None,
        choices=names,
        metavar="NAME",
        help=f"stages to run, in ladder order by default (all; on the simulator "
        f"{', '.join(SIM_STAGES)}): {', '.join(names)}; "
        "sgemm's automatic choice ('auto') is always run",
    )
    ap.add_argument(
        "--reps",
        type=_number_arg(int, 1, ">= 1"),
        default=None,
        help="timed repeats (kernel) or loops (end to end) per implementation and "
        f"size; the median is reported (default {GPU_REPS}; on the simulator {SIM_REPS})",
    )
    ap.add_argument(
        "--warmup",
        type=_number_arg(int, 0, ">= 0"),
        default=None,
        help=f"untimed calls before the repeats (default {GPU_WARMUP}; on the simulator "
        f"{SIM_WARMUP})",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the random operands (default 0)")
    ap.add_argument(
        "--max-ms",
        type=_number_arg(float, 1e-9, "> 0"),
        default=200.0,
        metavar="MS",
        dest="max_ms",
        help="keeps a full sweep short (default 200): after validation, one "
        "synchronized call estimates each implementation's time per call; above MS "
        f"it is timed with {SLOW_REPS} repeats and no extra warm-up, above "
        f"{SKIP_FACTOR} x MS it is SKIPPED (not timed); an end-to-end loop holds at "
        "most MS of calls. Ignored on the simulator",
    )
    ap.add_argument(
        "--baseline",
        choices=("cupy", "torch", "none"),
        default="cupy",
        help="library that runs cuBLAS for the baselines and the reference "
        "(default cupy), forced to FP32 (TF32 off) whatever CUPY_TF32 says; when it "
        "is missing or sees no GPU the other one is used, else none (%% of cuBLAS "
        "left empty, validation against float64 NumPy)",
    )
    ap.add_argument(
        "--peers",
        choices=("auto", "triton", "none"),
        default="auto",
        help="optional peers besides cuBLAS: 'auto' (default) adds Triton (a "
        "standard FP32 Triton matmul, autotuned) when Triton and PyTorch are "
        "installed on a GPU and says nothing otherwise; 'triton' asks for it and "
        "says why when it cannot run; 'none' leaves it out",
    )
    ap.add_argument(
        "--tf32",
        action="store_true",
        help="also time cuBLAS with TF32 tensor cores ('cuBLAS TF32' line, kernel "
        "time; needs compute capability >= 8.0) through the baseline library: "
        "CuPy's float32 compute type (cupy._core._routines_linalg.set_compute_type) "
        "or PyTorch's set_float32_matmul_precision('high'); reset to FP32 "
        "afterwards. Timed anyway when a TF32 stage runs (its baseline), as cuBLAS FP16 "
        "and BF16 (16-bit inputs, FP32 sums) are when a stage of theirs runs",
    )
    ap.add_argument(
        "--overhead-sizes",
        type=_sizes_arg,
        default=None,
        metavar="SPEC",
        dest="overhead_sizes",
        help=f"sizes of the host-overhead table overhead.csv (default "
        f"{DEFAULT_OVERHEAD_SIZES}; same forms as --sizes): host microseconds per "
        "call of sgemm on Numba/PyTorch/CuPy arrays, torch.mm, cupy.matmul and "
        "Triton, each with out= (median of 5 loops of 500 calls, clock read before "
        "the synchronize). On the simulator only when given (2 calls, 1 loop: the "
        "pipeline, not the numbers)",
    )
    ap.add_argument(
        "--no-overhead",
        action="store_true",
        dest="no_overhead",
        help="do not measure the host-overhead table",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="output directory (default bench/results/<gpu-name>/<UTC "
        "YYYYmmdd-HHMMSS>/, relative to the current directory)",
    )
    ap.add_argument("--no-plot", action="store_true", dest="no_plot", help="do not draw the plots")
    ap.add_argument(
        "--simulator",
        action="store_true",
        help="run the pipeline on the CPU: re-runs this command with "
        f"NUMBA_ENABLE_CUDASIM=1; every dimension must be <= {SIM_MAX_DIM}; "
        "timings are host wall-clock (mode 'simulator'), not comparable with a "
        "GPU. The options left out default to a run of about a minute on 2 cores: "
        f"--sizes {SIM_SIZES}, --stages {' '.join(SIM_STAGES)}, --reps {SIM_REPS}, "
        f"--warmup {SIM_WARMUP}, no overhead table",
    )
    return ap


def _rerun_on_simulator(argv: Sequence[str]) -> int:
    # NUMBA_ENABLE_CUDASIM is read when numba is imported, which already happened here. The child
    # sees no GPU: the simulator needs none, and a baseline library (PyTorch) initialising CUDA
    # beside the simulator's threads crashed the child on a GPU machine (SIGSEGV).
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", CUDA_VISIBLE_DEVICES="")
    rest = [a for a in argv if a != "--simulator"]
    return subprocess.run([sys.executable, "-m", "numba_gemm.bench", *rest], env=env).returncode


def _overhead_sizes(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """The overhead table's sizes: none with ``--no-overhead``, and on the simulator unless
    given; else ``--overhead-sizes`` or the default."""
    if args.no_overhead:
        return []
    if args.overhead_sizes is None:
        return [] if SIMULATOR else parse_sizes(DEFAULT_OVERHEAD_SIZES)
    return args.overhead_sizes


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see ``--help``); returns the exit status (0 ran, 2 usage/no GPU).

    ``argv`` defaults to ``sys.argv[1:]``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.suite is not None:
            shapes = [s for _, s in suite_shapes(args.suite or None)]
            args.sizes = shapes + [s for s in (args.sizes or []) if s not in shapes]
        simulate = args.simulator or SIMULATOR
        runner.resolve(args, simulate)
        every = list(args.sizes) + list(args.overhead_sizes or [])
        big = [size_label(*s) for s in every if max(s) > SIM_MAX_DIM]
        if simulate and big:
            parser.error(
                f"the simulator runs every GPU thread as a Python thread: every "
                f"dimension must be <= {SIM_MAX_DIM}, got {', '.join(big)} "
                f"(leave --sizes out for {SIM_SIZES}, or try --sizes 16..32)"
            )
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else 2
    if args.simulator and not SIMULATOR:
        return _rerun_on_simulator(argv)
    if not SIMULATOR and not gpu_available():
        print(NO_GPU_MESSAGE, file=sys.stderr)
        return 2

    mode = "simulator" if SIMULATOR else "gpu"
    gpu = report.gpu_name()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("bench") / "results" / gpu_slug(gpu) / stamp
    rows = runner.run(args)
    oh_sizes = _overhead_sizes(args)
    oh_rows: list[dict] = []
    oh_meta = None
    if oh_sizes:
        triton = triton_module() if args.peers != "none" else None
        counts = (
            (overhead.SIM_CALLS, overhead.SIM_LOOPS, overhead.SIM_WARMUP)
            if SIMULATOR
            else (overhead.CALLS, overhead.LOOPS, overhead.WARMUP)
        )
        oh_rows = overhead.measure(
            oh_sizes,
            sgemm=sgemm,
            triton=triton,
            seed=args.seed,
            calls=counts[0],
            loops=counts[1],
            warmup=counts[2],
        )
        oh_meta = dict(
            sizes=[list(s) for s in oh_sizes],
            calls=counts[0],
            loops=counts[1],
            warmup=counts[2],
            unit="us per call (host wall clock, median of loops)",
        )
    out.mkdir(parents=True, exist_ok=True)
    ref = next(
        (r["label"] for r in rows if r["stage"] == report.CUBLAS_FP32 and r["status"] == report.OK),
        "float64 NumPy",
    )
    peers = list(dict.fromkeys(r["label"] for r in rows if r["stage"] in report.PEERS))
    meta = report.collect_meta(args, rows, argv, reference=ref, peers=peers, overhead=oh_meta)
    report.write_csv(rows, out / "results.csv")
    report.write_json(meta, rows, out / "results.json", overhead=oh_rows)
    if oh_rows:
        report.write_overhead_csv(oh_rows, out / "overhead.csv")
    if not args.no_plot:
        try:
            from .plots import plot

            plot(rows, out, gpu=gpu, mode=mode)
        except ImportError:
            print(
                "numba_gemm.bench: matplotlib is not installed: no plots "
                "(pip install 'numba-gemm[bench]')",
                file=sys.stderr,
            )

    print(f"GPU: {gpu}   mode: {mode}   baseline: {meta['baseline']}")
    print(
        f"timing: {'CUDA events' if mode == 'gpu' else 'host wall clock'}; kernel = each call "
        f"behind a hold kernel, end_to_end = the public call back to back (time per call of "
        f"a loop); median of {args.reps} after {args.warmup} warm-up; GFLOP/s = 2*M*N*K / "
        "median time"
    )
    if mode == "simulator":
        print(
            "SIMULATOR: NUMBA_ENABLE_CUDASIM=1, host wall-clock times of Python threads: "
            "checks the pipeline, NOT comparable with a GPU"
        )
    print(report.format_table(rows))
    if oh_rows:
        print(
            "\nhost overhead per call (us; median of loops of back-to-back calls with out=, "
            "clock read before the synchronize):"
        )
        print(report.format_overhead(oh_rows))
    elif SIMULATOR and not args.no_overhead:
        print(
            "\nhost-overhead table skipped on the simulator (its host times mean nothing; "
            "--overhead-sizes 4 runs the pipeline)"
        )
    kernel_rows = [
        r for r in rows if r["stage"] not in report.PEERS and r["timing"] == report.KERNEL
    ]
    n = {s: sum(r["status"] == s for r in kernel_rows) for s in (OK, FAILED, SKIPPED)}
    print(
        f"{len(kernel_rows)} stage runs (auto included): {n[OK]} ok, {n[FAILED]} FAILED, "
        f"{n[SKIPPED]} SKIPPED; results in {out}"
    )
    return 0
