"""The comparison run for cmp.txt: kernel time of the automatic pick at shapes whose rows are not
16-byte aligned (the scalar variant), for the package copy on PYTHONPATH, cuBLAS FP32 beside.

    python cmp_scalar.py LABEL 256x50257x768,4097x1023x4095,4096x50257x768
"""

import sys

import torch

import numba_gemm
from numba_gemm.check import time_kernel

torch.backends.cuda.matmul.allow_tf32 = False


def main(label: str, shapes: str) -> None:
    for s in shapes.split(","):
        M, N, K = map(int, s.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", generator=g)
        b = torch.randn(K, N, device="cuda", generator=g)
        c = torch.full((M, N), float("nan"), device="cuda")
        pl = numba_gemm.explain(a, b, out=c)
        pl.launch(a, b, c)
        ref = a.double() @ b.double()
        err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
        ms = [time_kernel(lambda: pl.launch(a, b, c), reps=30).median for _ in range(3)]  # noqa: B023
        cub = time_kernel(lambda: torch.mm(a, b, out=c), reps=30).median  # noqa: B023
        print(label, s, pl.variant, pl.stage.name, f"err {err:.2e}",
              " ".join(f"{x * 1e3:.1f}" for x in ms), f"cublas {cub * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
