"""Temporary: kernel time of the auto pick (forced scalar-variant shapes) for one package copy."""
import sys, json
import torch
import numba_gemm
from numba_gemm.check import time_kernel
torch.backends.cuda.matmul.allow_tf32 = False
out = {}
for s in sys.argv[2].split(","):
    M, N, K = map(int, s.split("x"))
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g); b = torch.randn(K, N, device="cuda", generator=g)
    c = torch.full((M, N), float("nan"), device="cuda")
    pl = numba_gemm.plan_for(M, N, K, stage=sys.argv[3]) if len(sys.argv) > 3 else numba_gemm.explain(a, b, out=c)
    pl.launch(a, b, c)
    ref = a.double() @ b.double()
    err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
    ms = [time_kernel(lambda: pl.launch(a, b, c), reps=30).median for _ in range(3)]
    cub = time_kernel(lambda: torch.mm(a, b, out=c), reps=30).median
    out[s] = dict(variant=pl.variant, stage=pl.stage.name, cfg=dict(pl.stage.config), err=err, ms=ms, cublas_ms=cub)
    print(sys.argv[1], s, pl.variant, pl.stage.name, f"err {err:.2e}", " ".join(f"{x*1e3:.1f}" for x in ms), f"cublas {cub*1e3:.1f}", flush=True)
