"""Stages 1-7 under this process's backend (NUMBA_GEMM_BACKEND): error vs float64 and kernel
time (CUDA events, median of back-to-back runs). Usage: python parity.py OUT.json"""
import json, os, sys, time, statistics
import numpy as np
import torch
from numba_gemm import backend
from numba_gemm.kernels import get_stage

cuda = backend.cuda
STAGES = ["naive", "gmem_coalesce", "smem_tiling", "blocktiling_1d", "blocktiling_2d",
          "vectorize", "bank_conflict_free"]
SHAPES = [(4096, 4096, 4096), (2048, 2048, 2048), (1024, 1024, 1024), (4095, 4095, 4095),
          (768, 3072, 1024), (1000, 3000, 500)]
rows = []
torch.manual_seed(0)
print("backend", backend.NAME, "numpy", np.__version__, flush=True)
for (M, N, K) in SHAPES:
    A = torch.randn(M, K, device="cuda"); B = torch.randn(K, N, device="cuda")
    ref = (A.double() @ B.double())
    C = torch.full((M, N), float("nan"), device="cuda")
    dA, dB, dC = cuda.as_cuda_array(A), cuda.as_cuda_array(B), cuda.as_cuda_array(C)
    for name in STAGES:
        st = get_stage(name)
        kinds = [("-", st.kernel)]
        if st.scalar_kernel is not None:
            kinds = [("vector", st.kernel), ("scalar", st.scalar_kernel)]
        for variant, kern in kinds:
            if variant == "vector" and (K % 4 or N % 4):
                continue
            if name in ("naive", "gmem_coalesce") and M * N * K > 2**34:
                pass
            grid, block = st.launch_config(M, N, K)
            row = dict(backend=backend.NAME, stage=name, variant=variant, M=M, N=N, K=K)
            try:
                C.fill_(float("nan")); torch.cuda.synchronize()
                t0 = time.perf_counter()
                kern[grid, block](dA, dB, dC, np.float32(1.0), np.float32(0.0))
                torch.cuda.synchronize()
                row["first_s"] = time.perf_counter() - t0
                row["err"] = float(((C.double() - ref).abs().max() / ref.abs().max()).item())
                # time: events around a run of back-to-back launches (the GPU never waits on the
                # host), median of 5 runs; and the host's time per launch call
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(); kern[grid, block](dA, dB, dC, np.float32(1.0), np.float32(0.0)); e1.record()
                torch.cuda.synchronize(); one = e0.elapsed_time(e1)
                reps = max(2, min(50, int(60.0 / max(one, 1e-3))))
                ts = []
                for _ in range(5):
                    e0.record()
                    for _ in range(reps):
                        kern[grid, block](dA, dB, dC, np.float32(1.0), np.float32(0.0))
                    e1.record(); torch.cuda.synchronize(); ts.append(e0.elapsed_time(e1) / reps)
                row["ms"] = statistics.median(ts); row["reps"] = reps
                if one < 2.0:
                    torch.cuda.synchronize(); t0 = time.perf_counter()
                    for _ in range(20):
                        kern[grid, block](dA, dB, dC, np.float32(1.0), np.float32(0.0))
                    row["host_us_per_launch"] = (time.perf_counter() - t0) / 20 * 1e6
                    torch.cuda.synchronize()
                row["gflops"] = 2.0 * M * N * K / row["ms"] / 1e6
            except Exception as e:  # noqa
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            try:
                r = kern.get_regs_per_thread() if hasattr(kern, "get_regs_per_thread") else None
                row["regs"] = sorted(set(r.values())) if isinstance(r, dict) else r
            except Exception:
                row["regs"] = None
            rows.append(row)
            print(json.dumps(row), flush=True)
    del A, B, C, ref, dA, dB, dC
    torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[1], "w"), indent=1)
