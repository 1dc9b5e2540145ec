import sys, time, os
import torch
import numba_gemm
torch.backends.cuda.matmul.allow_tf32 = False
M, N, K = 1, 336, 1035
a = torch.randn(M, K, device="cuda"); w = torch.randn(N, K, device="cuda"); c = torch.empty(M, N, device="cuda")
b = w.t()
numba_gemm.sgemm(a, b, out=c); torch.cuda.synchronize()
err = (c - a @ b).abs().max().item()
res = []
for rep in range(5):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(500):
        numba_gemm.sgemm(a, b, out=c)
    host = (time.perf_counter() - t0) / 500
    torch.cuda.synchronize()
    e2e = (time.perf_counter() - t0) / 500
    res.append((host, e2e))
h = sorted(r[0] for r in res)[2]; e = sorted(r[1] for r in res)[2]
print(f"{sys.argv[1]:10s} {numba_gemm.__file__} host {h*1e6:.1f} us/call e2e {e*1e6:.1f} us/call err {err:.2e}")
if len(sys.argv) > 2:
    import cProfile, pstats
    pr = cProfile.Profile(); pr.enable()
    for _ in range(2000):
        numba_gemm.sgemm(a, b, out=c)
    pr.disable(); torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(14)
