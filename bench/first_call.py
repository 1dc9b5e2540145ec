"""Time a new process's first ``sgemm``: import, CUDA context, first call, later calls.

Usage (on a GPU)::

    python bench/first_call.py [--size 4096] [--runs 3] [--out first_call.json]

Each run starts a fresh Python process (``python bench/first_call.py --child``) that measures, in
seconds on the host clock:

- ``import_s``: ``import numba_gemm``;
- ``operands_s``: creating the operands on the GPU (``cuda.to_device``: the CUDA context is made
  here, as in any program that has data on the GPU before it calls ``sgemm``);
- ``first_call_s``: the first ``sgemm(a, b, out=c)`` followed by a synchronize (plan choice,
  kernel load from the on-disk cache or compilation, launch, the kernel itself);
- ``second_call_s``: the same call again (the kernel's own time plus the host path).

The first run uses whatever the cache holds; the issue's target is a warm cache (run
``python -m numba_gemm.precompile`` first, or let run 1 fill it). Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def child(size: int) -> dict:
    t0 = time.perf_counter()
    import numba_gemm  # noqa: F401 - timed

    t1 = time.perf_counter()
    import numpy as np
    from numba import cuda

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    t2 = time.perf_counter()
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_c = cuda.device_array((size, size), np.float32)
    cuda.synchronize()
    t3 = time.perf_counter()
    numba_gemm.sgemm(d_a, d_b, out=d_c)
    cuda.synchronize()
    t4 = time.perf_counter()
    numba_gemm.sgemm(d_a, d_b, out=d_c)
    cuda.synchronize()
    t5 = time.perf_counter()
    from numba_gemm import cache

    p = numba_gemm.explain(d_a, d_b, out=d_c)
    main = p.kernels()
    return dict(size=size, import_s=t1 - t0, operands_s=t3 - t2, first_call_s=t4 - t3,
                second_call_s=t5 - t4, from_cache=getattr(getattr(main, "compiled", None),
                                                           "from_cache", None),
                plan=repr(p), cache_dir=str(cache.cache_dir()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="also write the runs as JSON here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.size)))
        return 0
    runs = []
    for i in range(args.runs):
        res = subprocess.run([sys.executable, __file__, "--child", "--size", str(args.size)],
                             capture_output=True, text=True, check=False)
        if res.returncode:
            print(res.stdout, res.stderr, file=sys.stderr)
            return 1
        run = json.loads(res.stdout.strip().splitlines()[-1])
        run["run"] = i + 1
        runs.append(run)
        print(json.dumps(run))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
