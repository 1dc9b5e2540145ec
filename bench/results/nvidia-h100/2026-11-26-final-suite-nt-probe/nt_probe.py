"""Probe (issue 9): few-row products with B stored transposed (layout NT), sgemm's pick against
torch.mm (cuBLAS FP32, TF32 off): kernel-time-ish median of CUDA events over loops of calls."""
import sys

import torch

import numba_gemm

torch.backends.cuda.matmul.allow_tf32 = False


def per_call(f, calls=50, reps=7):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            f()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / calls)
    return sorted(out)[reps // 2]


for spec in sys.argv[1:]:
    M, N, K = map(int, spec.split("x"))
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(N, K, device="cuda").T  # (K, N), column-major: layout NT
    c = torch.empty(M, N, device="cuda")
    numba_gemm.sgemm(a, b, out=c)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
    ours = per_call(lambda a=a, b=b, c=c: numba_gemm.sgemm(a, b, out=c))
    cub = per_call(lambda a=a, b=b, c=c: torch.mm(a, b, out=c))
    why = numba_gemm.explain(a, b, out=c)
    print(f"{spec} NT ours {ours * 1e3:.1f} us cublas {cub * 1e3:.1f} us ratio {cub / ours:.2f} "
          f"err {err:.1e} | {str(why)[:150]}", flush=True)
