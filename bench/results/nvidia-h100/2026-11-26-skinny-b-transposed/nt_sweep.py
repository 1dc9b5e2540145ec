"""NT sweep (issue 9): the skinny stage with B stored transposed (``x @ W.T``, W row-major), every
configuration of its space that takes it, at a few products of 1-16 rows; the plan's pick and
cuBLAS (torch.mm, TF32 off) in the same process. Writes nt_sweep.csv and prints a summary.

    python nt_sweep.py OUT_DIR MxNxK ...
"""

import csv
import sys
from pathlib import Path

import torch

import numba_gemm
from numba_gemm import precompile
from numba_gemm.kernels import k15_skinny as sk
from numba_gemm.registry import variant_key
from numba_gemm.timing import time_calls

torch.backends.cuda.matmul.allow_tf32 = False


def per_call(f):
    """Median ms per call over 5 repeats of 20 back-to-back calls (``timing.time_calls``; the
    run of nt_sweep.txt timed with a loop of its own of the same shape: 3 calls of warm-up,
    CUDA events around 20 calls, median of 5)."""
    return time_calls(f, calls=20, reps=5).median


def run_shape(M, N, K, cfgs, rows):
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(N, K, device="cuda").T  # (K, N), column-major: layout NT
    c = torch.empty(M, N, device="cuda")
    ref = a.double() @ b.double()

    def err():
        torch.cuda.synchronize()
        return (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()

    def ours(st=None):
        numba_gemm.sgemm(a, b, out=c, stage=st)

    cub = per_call(lambda: torch.mm(a, b, out=c))
    c.fill_(float("nan"))
    ours()
    auto_err = err()
    auto = per_call(ours)
    pick = numba_gemm.explain(a, b, out=c)
    rows.append(dict(M=M, N=N, K=K, what="cublas", config="", ms=cub, err=0.0))
    rows.append(dict(M=M, N=N, K=K, what="auto", config=f"{pick.stage.name} "
                     f"{dict(pick.stage.config)}", ms=auto, err=auto_err))
    best, worst = None, auto_err
    for cfg in cfgs:
        st = sk.make_stage(cfg)
        c.fill_(float("nan"))
        ours(st)
        e = err()
        ms = per_call(lambda st=st: ours(st))
        rows.append(dict(M=M, N=N, K=K, what="skinny", config=str(cfg), ms=ms, err=e))
        worst = max(worst, e) if e == e else float("inf")
        if e < 1e-5 and (best is None or ms < best[0]):
            best = (ms, cfg)
    print(f"{M}x{N}x{K} NT cublas {cub * 1e3:.1f} us | auto {auto * 1e3:.1f} us "
          f"({cub / auto:.2f}x) {pick.stage.name} {dict(pick.stage.config)} | best "
          f"{best[0] * 1e3:.1f} us ({cub / best[0]:.2f}x) {best[1]} | auto/best "
          f"{auto / best[0]:.3f} | max err {worst:.1e}", flush=True)


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[2:]]
    cfgs = [c for c in sk.SPACE if sk.transposed_b_ok(c)]
    jobs = [precompile.Job("skinny", tuple(sorted(c.items())), variant_key("vector", "NT"),
                           (9, 0)) for c in cfgs]
    bad = [r for r in precompile.run(jobs, 16) if r[1] == "failed"]  # spawned: needs main()
    print(len(cfgs), "configurations;", len(bad), "failed to compile", bad[:2], flush=True)
    rows = []
    for shape in shapes:
        run_shape(*shape, cfgs, rows)
    with open(out / "nt_sweep.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)


if __name__ == "__main__":
    main()
