"""One-call GPU calibration: correctness and timing of every stage against cuBLAS, register counts
on the device against the offline ptxas report, and a small config sweep of the tunable stages.

Usage (on the GPU machine, see ../shared/device/README.md):
    python bench/probe.py --out $OUT [--sizes 1024,2048,4095,4096,4097,8192] [--configs FILE]

Writes ``probe.json`` and prints a table. Timing: CUDA events, median of repeats after warm-up,
cuBLAS FP32 (CuPy, TF32 off) in the same process (numba_gemm.timing.time_launches).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numba import cuda  # noqa: E402

import numba_gemm  # noqa: E402
from numba_gemm import STAGES  # noqa: E402
from numba_gemm.reference import rel_error  # noqa: E402
from numba_gemm.resources import kernel_resources  # noqa: E402
from numba_gemm.timing import time_launches, time_stage  # noqa: E402


def log(*a):
    print(*a, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--sizes", default="1024,2048,4095,4096,4097,8192")
    ap.add_argument("--fast-from", default="vectorize")
    ap.add_argument("--configs", help="JSON file: list of {stage, config} to sweep at 4096")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-ladder", action="store_true", help="skip the all-stages table at 4096")
    ap.add_argument("--best", action="store_true", help="also time sgemm's default (tuned) stage")
    args = ap.parse_args()
    import cupy as cp

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    assert os.environ.get("CUPY_TF32", "0") in ("", "0"), "TF32 must be off for the baseline"
    dev = cuda.get_current_device()
    smi = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit",
            "--format=csv,noheader",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    info = dict(
        gpu=dev.name.decode() if isinstance(dev.name, bytes) else dev.name,
        smi=smi,
        python=platform.python_version(),
        numpy=np.__version__,
        cupy=cp.__version__,
    )
    log(info)
    res: dict = dict(info=info, stages=[], sizes=[], sweep=[], regs=[])
    rng = np.random.default_rng(1)

    def operands(M, N, K):
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        return cp.asarray(a), cp.asarray(b)

    def cublas_ms(ca, cb, reps):
        cc = cp.empty((ca.shape[0], cb.shape[1]), cp.float32)
        return time_launches(lambda: cp.matmul(ca, cb, out=cc), warmup=3, reps=reps)

    def run_stage(stage, ca, cb, ref, reps):
        d_a, d_b = cuda.as_cuda_array(ca), cuda.as_cuda_array(cb)
        d_c = cuda.to_device(np.full((ca.shape[0], cb.shape[1]), np.nan, np.float32))
        numba_gemm.sgemm(d_a, d_b, stage=stage, out=d_c)
        err = rel_error(d_c.copy_to_host(), ref)
        t = time_stage(stage, d_a, d_b, d_c, warmup=2, reps=reps)
        return err, t

    # --- every stage at 4096
    n = 4096 if not args.no_ladder else 0
    if n:
        ca, cb = operands(n, n, n)
        ref = (ca @ cb).get()
        tb = cublas_ms(ca, cb, args.reps)
        cub = tb.gflops(n, n, n)
        log(
            f"cuBLAS 4096: {tb.median:.3f} ms {cub:.0f} GFLOP/s (min {tb.min:.3f} max {tb.max:.3f})"
        )
    for st in STAGES if n else ():
        t0 = time.time()
        err, t = run_stage(st, ca, cb, ref, 5 if st.name in ("naive",) else args.reps)
        g = t.gflops(n, n, n)
        row = dict(
            stage=st.name,
            size=n,
            ms=t.median,
            gflops=g,
            pct=g / cub,
            err=err,
            wall=time.time() - t0,
        )
        res["stages"].append(row)
        log(f"{st.name:20s} {t.median:9.3f} ms {g:8.0f} GFLOP/s {g / cub:6.1%}  err {err:.2e}")
    if n:
        tb2 = cublas_ms(ca, cb, args.reps)
        log(f"cuBLAS 4096 again: {tb2.median:.3f} ms")
        res["cublas4096"] = [tb.median, tb2.median]

    # --- register counts: device vs offline ptxas
    for st in STAGES if n else ():
        for kern, variant in ((st.kernel, "vector"), (st.scalar_kernel, "scalar")):
            if kern is None:
                continue
            try:
                dev_regs = list(kern.get_regs_per_thread().values()) if kern.overloads else []
            except Exception as e:  # noqa: BLE001
                dev_regs = [f"err {e}"]
            off = kernel_resources(st, kern, variant).registers
            res["regs"].append(dict(stage=st.name, variant=variant, device=dev_regs, offline=off))
            log(f"regs {st.name}/{variant}: device {dev_regs} offline {off}")

    # --- fast stages over sizes
    fast = [
        s
        for s in STAGES
        if [x.name for x in STAGES].index(s.name) >= [x.name for x in STAGES].index(args.fast_from)
    ]
    for size in [int(x) for x in args.sizes.split(",")]:
        ca, cb = operands(size, size, size)
        ref = (ca @ cb).get()
        tb = cublas_ms(ca, cb, args.reps)
        cub = tb.gflops(size, size, size)
        log(f"-- {size}: cuBLAS {tb.median:.3f} ms {cub:.0f} GFLOP/s")
        todo = [numba_gemm.plan_for(size, size, size, stage=s.name).stage for s in fast]
        if args.best:
            todo.append(numba_gemm.plan_for(size, size, size).stage)
        for st in todo:
            err, t = run_stage(st, ca, cb, ref, args.reps)
            g = t.gflops(size, size, size)
            res["sizes"].append(
                dict(
                    stage=st.name,
                    size=size,
                    ms=t.median,
                    gflops=g,
                    pct=g / cub,
                    err=err,
                    cublas=cub,
                    config=dict(st.config),
                )
            )
            log(
                f"   {st.name:20s} {t.median:9.3f} ms {g:8.0f} GFLOP/s {g / cub:6.1%} "
                f"err {err:.1e} {dict(st.config) or ''}"
            )

    # --- config sweep at 4096
    if args.configs:
        n = 4096
        ca, cb = operands(n, n, n)
        ref = (ca @ cb).get()
        cub = cublas_ms(ca, cb, args.reps).gflops(n, n, n)
        for item in json.loads(Path(args.configs).read_text()):
            st = numba_gemm.get_stage(item["stage"]).with_config(item["config"])
            t0 = time.time()
            try:
                err, t = run_stage(st, ca, cb, ref, args.reps)
            except Exception as e:  # noqa: BLE001
                log(f"   FAILED {item}: {e}")
                continue
            g = t.gflops(n, n, n)
            regs = list(st.kernel.get_regs_per_thread().values())
            res["sweep"].append(
                dict(item, gflops=g, pct=g / cub, err=err, regs=regs, wall=time.time() - t0)
            )
            log(
                f"   {item['stage']:17s} {item['config']} {g:8.0f} GFLOP/s {g / cub:6.1%} "
                f"err {err:.1e} regs {regs} ({time.time() - t0:.1f}s)"
            )
    (out / "probe.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
