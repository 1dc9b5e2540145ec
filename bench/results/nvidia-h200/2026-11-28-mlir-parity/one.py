"""Launch one stage kernel at 4096^3 twice (for ncu). Usage: one.py STAGE VARIANT"""
import sys
import numpy as np, torch
from numba_gemm import backend
from numba_gemm.kernels import get_stage
cuda = backend.cuda
st = get_stage(sys.argv[1]); kern = st.kernel if sys.argv[2] != "scalar" else st.scalar_kernel
M = N = K = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
A = torch.randn(M, K, device="cuda"); B = torch.randn(K, N, device="cuda"); C = torch.zeros(M, N, device="cuda")
g, b = st.launch_config(M, N, K)
for _ in range(2):
    kern[g, b](cuda.as_cuda_array(A), cuda.as_cuda_array(B), cuda.as_cuda_array(C), np.float32(1), np.float32(0))
torch.cuda.synchronize(); print("ok", backend.NAME)
