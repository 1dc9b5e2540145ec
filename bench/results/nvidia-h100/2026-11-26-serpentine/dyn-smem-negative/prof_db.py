"""ncu helper: ``python prof_db.py {cublas|CONFIG_JSON} [n]``: n^3 four times through cuBLAS FP32
(torch.mm, TF32 off) or double_buffering with the given configuration; checks the last result."""
import json
import sys

import torch

import numba_gemm

torch.backends.cuda.matmul.allow_tf32 = False
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
a = torch.randn(n, n, device="cuda")
b = torch.randn(n, n, device="cuda")
c = torch.empty(n, n, device="cuda")
st = None
if sys.argv[1] != "cublas":
    st = numba_gemm.get_stage("double_buffering").with_config(json.loads(sys.argv[1]))
for _ in range(4):
    if st is None:
        torch.mm(a, b, out=c)
    else:
        numba_gemm.sgemm(a, b, out=c, stage=st)
torch.cuda.synchronize()
ref = a.double() @ b.double()
print(sys.argv[1], (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item())
