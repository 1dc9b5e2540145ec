import sys, time, torch, numpy as np
import numba_gemm
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
def e2e(fn, n=20, reps=5):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n): fn()
        e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / n)
    return sorted(ts)[len(ts) // 2]
print(torch.cuda.get_device_name(), flush=True)
for (M, N, K, lay) in [(4096, 4096, 4096, "NN"), (4095, 4095, 4095, "NN"), (4096, 4096, 4100, "NN"),
                       (4096, 4096, 4096, "TN"), (4096, 4096, 4096, "TT"), (2000, 4100, 4100, "NT")]:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16, generator=g)
    if lay[0] == "T": a = a.t().contiguous().t()
    if lay[1] == "T": b = b.t().contiguous().t()
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    c2 = torch.empty_like(c)
    t0 = time.time(); numba_gemm.hgemm(a, b, out=c); torch.cuda.synchronize(); first = time.time() - t0
    torch.mm(a, b, out=c2)
    ref = (a.double() @ b.double())
    err = ((c.double() - ref).norm() / ref.norm()).item(); errc = ((c2.double() - ref).norm() / ref.norm()).item()
    ours = e2e(lambda: numba_gemm.hgemm(a, b, out=c)); cub = e2e(lambda: torch.mm(a, b, out=c2))
    tf = 2 * M * N * K / ours / 1e9
    print(f"{M}x{N}x{K} {lay}: ours {ours*1e3:.1f} us ({tf:.0f} TFLOP/s), cuBLAS FP16 {cub*1e3:.1f} us, ratio {cub/ours:.3f}, err {err:.2e} (cuBLAS {errc:.2e}), first call {first:.1f} s", flush=True)
