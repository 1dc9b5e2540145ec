"""ncu helper: ``python prof_sk.py {cublas|ours} M [N K [CONFIG_JSON]]`` runs M x N x K four times
through cuBLAS FP32 (``torch.mm``, TF32 off) or ``sgemm`` (its pick, or the skinny stage with
CONFIG_JSON), then checks the last result against float64."""

import json
import sys

import torch

import numba_gemm
from numba_gemm.kernels import k15_skinny

torch.backends.cuda.matmul.allow_tf32 = False
M = int(sys.argv[2])
N = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
K = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
a = torch.randn(M, K, device="cuda")
b = torch.randn(K, N, device="cuda")
c = torch.empty(M, N, device="cuda")
st = k15_skinny.make_stage(json.loads(sys.argv[5])) if len(sys.argv) > 5 else None
for _ in range(4):
    if sys.argv[1] == "cublas":
        torch.mm(a, b, out=c)
    else:
        numba_gemm.sgemm(a, b, out=c, stage=st)
torch.cuda.synchronize()
ref = a.double() @ b.double()
print(sys.argv[1], M, (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item())
