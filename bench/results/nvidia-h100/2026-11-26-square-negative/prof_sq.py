"""ncu helper (issue 9): ``python prof_sq.py {cublas|ours} [n]`` runs n^3 (default 4096) four
times through cuBLAS FP32 (``torch.mm``, TF32 off) or ``sgemm``'s pick, then checks the last
result against float64."""

import sys

import torch

import numba_gemm

torch.backends.cuda.matmul.allow_tf32 = False
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
a = torch.randn(n, n, device="cuda")
b = torch.randn(n, n, device="cuda")
c = torch.empty(n, n, device="cuda")
for _ in range(4):
    if sys.argv[1] == "cublas":
        torch.mm(a, b, out=c)
    else:
        numba_gemm.sgemm(a, b, out=c)
torch.cuda.synchronize()
ref = a.double() @ b.double()
print(sys.argv[1], (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item())
