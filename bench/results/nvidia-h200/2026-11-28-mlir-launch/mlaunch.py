"""numba_gemm.sgemm(a, b, stage=s, out=c) for stages 1-7 under this process's backend: error vs
float64, end-to-end us per call (back to back, as a user calls it), kernel ms (CUDA events
around back-to-back calls). Usage: python mlaunch.py OUT.json"""
import json, sys, time, statistics
import numpy as np
import torch
import numba_gemm
from numba_gemm import backend

STAGES = ["naive", "gmem_coalesce", "smem_tiling", "blocktiling_1d", "blocktiling_2d",
          "vectorize", "bank_conflict_free"]
SHAPES = [(97, 131, 75), (1, 768, 3072), (1000, 3000, 500), (1023, 1001, 999), (4095, 4095, 4095),
          (4096, 4096, 4096)]
rows = []
torch.manual_seed(1)
print("backend", backend.NAME, "numpy", np.__version__, flush=True)
for (M, N, K) in SHAPES:
    A = torch.randn(M, K, device="cuda"); B = torch.randn(K, N, device="cuda")
    ref = A.double() @ B.double()
    scale = (A.double().abs() @ B.double().abs()).max()
    for name in STAGES:
        row = dict(backend=backend.NAME, stage=name, M=M, N=N, K=K)
        try:
            C = torch.full((M, N), float("nan"), device="cuda")
            torch.cuda.synchronize(); t0 = time.perf_counter()
            numba_gemm.sgemm(A, B, out=C, stage=name)
            torch.cuda.synchronize(); row["first_s"] = time.perf_counter() - t0
            row["err"] = float(((C.double() - ref).abs().max() / scale).item())
            row["nan"] = bool(torch.isnan(C).any().item())
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); numba_gemm.sgemm(A, B, out=C, stage=name); e1.record()
            torch.cuda.synchronize(); one = e0.elapsed_time(e1)
            reps = max(3, min(200, int(100.0 / max(one, 1e-3))))
            ks, es = [], []
            for _ in range(5):
                torch.cuda.synchronize(); t0 = time.perf_counter(); e0.record()
                for _ in range(reps):
                    numba_gemm.sgemm(A, B, out=C, stage=name)
                e1.record(); torch.cuda.synchronize()
                es.append((time.perf_counter() - t0) / reps * 1e6); ks.append(e0.elapsed_time(e1) / reps)
            row["e2e_us"] = statistics.median(es); row["events_ms"] = statistics.median(ks); row["reps"] = reps
            row["gflops_e2e"] = 2.0 * M * N * K / row["e2e_us"] / 1e3
        except Exception as e:  # noqa
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        rows.append(row); print(json.dumps(row), flush=True)
    del A, B, ref
    torch.cuda.empty_cache()
# the automatic choice must refuse clearly under numba-cuda-mlir
try:
    numba_gemm.sgemm(torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda"))
    rows.append(dict(backend=backend.NAME, auto="ran"))
except Exception as e:
    rows.append(dict(backend=backend.NAME, auto=f"{type(e).__name__}: {e}"))
print(json.dumps(rows[-1]), flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
