"""Experiment (not committed): swizzled transposed tiles, NN and NT, same configurations;
correctness against float64 first."""
import json, sys, time
import numpy as np
import torch
from numba import cuda
import numba_gemm
from numba_gemm.device import info
from numba_gemm.kernels import k09_double_buffering as k09, k10_multistage as k10
from numba_gemm.plan.autotune import time_plan
from numba_gemm.plan.choose import make_plan
from numba_gemm.plan.geometry import Geometry

dev = info(0)
base = dict(BK=16, TM=8, TN=4, WNITER=2, SPLITK=1)
CFG = {
    "db128": (k09, dict(base, BM=128, BN=128, MINB=1, WM=64, WN=64)),
    "db64m1": (k09, dict(base, BM=64, BN=128, MINB=1, WM=32, WN=64)),
    "db32m4": (k09, dict(base, BM=32, BN=128, MINB=4, WM=32, WN=32, WNITER=1)),
}
SHAPES = [(2048, 4096, 4096), (2000, 3584, 3584), (320, 12288, 4096)]
from numba_gemm.tools import precompile
from numba_gemm.kernels.stage import variant_key
jobs = [precompile.Job("double_buffering", tuple(sorted(c.items())), variant_key("vector", lay), dev.cc)
        for _, c in CFG.values() for lay in ("NN", "NT")]
t0 = time.time()
rng = np.random.default_rng(int(time.time()))
bad = 0
for name, (mod, cfg) in CFG.items():
    st = mod.make_stage(cfg)
    for lay in ("NN", "NT"):
        for (M, N, K) in [(301, 515, 333)]:
            a = rng.standard_normal((M, K)).astype(np.float32)
            b = rng.standard_normal((K, N)).astype(np.float32)
            db_ = cuda.to_device(np.ascontiguousarray(b.T)).T if lay == "NT" else cuda.to_device(b)
            out = cuda.to_device(np.full((M, N), np.nan, np.float32))
            numba_gemm.sgemm(cuda.to_device(a), db_, stage=st, out=out)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            c = out.copy_to_host()
            err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
            ok = np.isfinite(c).all() and err < 1e-5
            bad += not ok
            print(f"check {name} {lay} {M}x{N}x{K} err {err:.2e} {'ok' if ok else 'FAIL'}", flush=True)
out = open(sys.argv[1], "w")
for M, N, K in SHAPES:
    row = dict(shape=[M, N, K])
    for name, (mod, cfg) in CFG.items():
        for lay in ("NN", "NT"):
            g = Geometry.dense(M, N, K, lay)
            p = make_plan(g, mod.make_stage(cfg), "vector", dev, None, "x")
            row[f"{name}-{lay}"] = time_plan(p)[0]
    print(json.dumps(row), file=out, flush=True)
    fl = 2 * M * N * K / 1e9
    print(M, N, K, " ".join(f"{k}={fl/v:.1f}" for k, v in row.items() if k != "shape"), flush=True)
sys.exit(bad)
