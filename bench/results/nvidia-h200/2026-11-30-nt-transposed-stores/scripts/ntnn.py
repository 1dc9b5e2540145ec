"""Experiment (not committed): the same configuration timed NN and NT, and cuBLAS NN and NT."""
import json, sys, time
import torch
from numba_gemm.device import info
from numba_gemm.kernels.stage import variant_key
from numba_gemm.kernels import k09_double_buffering as k09, k10_multistage as k10
from numba_gemm.plan.autotune import time_plan
from numba_gemm.plan.choose import make_plan
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools import precompile
from numba_gemm.tools.check import time_kernel

torch.backends.cuda.matmul.allow_tf32 = False
dev = info(0)
base = dict(BK=16, TM=8, TN=4, WNITER=2, SPLITK=1)
CFG = {
    "db128": (k09, dict(base, BM=128, BN=128, MINB=1, WM=64, WN=64)),
    "db64m1": (k09, dict(base, BM=64, BN=128, MINB=1, WM=32, WN=64)),
    "db64m3": (k09, dict(base, BM=64, BN=128, MINB=3, WM=32, WN=64)),
    "db256": (k09, dict(base, BK=8, BM=256, BN=128, MINB=0, TM=4, WM=64, WN=64)),
    "ms64": (k10, dict(base, BM=64, BN=128, MINB=0, NBUF=2, WM=32, WN=64)),
}
SHAPES = [(4096, 4096, 4096), (2048, 4096, 4096), (1500, 5120, 14336), (2000, 3584, 3584),
          (1000, 2560, 2560), (320, 12288, 4096), (200, 3072, 3072), (128, 4544, 4544)]
jobs = []
for name, (mod, cfg) in CFG.items():
    for lay in ("NN", "NT"):
        jobs.append(precompile.Job(mod.make_stage(cfg).name, tuple(sorted(cfg.items())), variant_key("vector", lay), dev.cc))
t0 = time.time()
precompile.run(jobs, 16)
print(f"compiled in {time.time()-t0:.0f} s", file=sys.stderr)
out = open(sys.argv[1], "w")
for M, N, K in SHAPES:
    a = torch.randn(M, K, device="cuda"); b = torch.randn(K, N, device="cuda"); w = torch.randn(N, K, device="cuda")
    c = torch.empty(M, N, device="cuda")
    cub = {"NN": time_kernel(lambda: torch.mm(a, b, out=c), reps=10).median,
           "NT": time_kernel(lambda: torch.mm(a, w.t(), out=c), reps=10).median}
    row = dict(shape=[M, N, K], cublas=cub)
    for name, (mod, cfg) in CFG.items():
        for lay in ("NN", "NT"):
            g = Geometry.dense(M, N, K, lay)
            st = mod.make_stage(cfg)
            p = make_plan(g, st, "vector", dev, None, "x")
            row[f"{name}-{lay}"] = time_plan(p)[0]
    print(json.dumps(row), file=out, flush=True)
    fl = 2 * M * N * K / 1e9
    print(M, N, K, " ".join(f"{k}={fl/v:.1f}" for k, v in cub.items()),
          " ".join(f"{k}={fl/v:.1f}" for k, v in row.items() if k not in ("shape", "cublas")), flush=True)
