"""One launch each of sgemm and torch.mm at the given shapes, between
cudaProfilerStart/Stop, after warm-up; run as

    ncu --profile-from-start off --clock-control none --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \\
        --section LaunchStats python3 ncu_probe.py 1x3072x768,16x50257x768
"""
import sys

import torch

import numba_gemm

torch.backends.cuda.matmul.allow_tf32 = False
ops = []
for s in sys.argv[1].split(","):
    M, N, K = map(int, s.split("x"))
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c = torch.empty(M, N, device="cuda")
    ops.append((s, a, b, c))
    for _ in range(3):
        numba_gemm.sgemm(a, b, out=c)
        torch.mm(a, b, out=c)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _s, a, b, c in ops:
    numba_gemm.sgemm(a, b, out=c)
    torch.mm(a, b, out=c)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print(numba_gemm.explain(*ops[0][1:3], out=ops[0][3]))
