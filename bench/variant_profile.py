"""One double_buffering kernel variant launched a few times, for ``ncu`` to profile (issue 9).

Usage: ``python bench/variant_profile.py M N K VARIANT``, run under
``ncu --clock-control none --kernel-name regex:sgemm_double --launch-skip 2 --launch-count 1``:
the configuration of ``bench/alignment_probe.py`` (the H100's pick at 256 x 50257 x 768), its
``vector`` or ``scalar`` kernel, on fresh random operands; relative error against float64 checked
once (rtol 1e-5). Run on copies of the package with the hybrid variants (the probe's docstring)
to compare the counters of the variants.
"""

from __future__ import annotations

import sys

import torch
from alignment_probe import CONFIG

import numba_gemm
from numba_gemm.kernels import k09_double_buffering as db


def main() -> None:
    M, N, K = (int(x) for x in sys.argv[1:4])
    variant = sys.argv[4]
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=gen)
    b = torch.randn(K, N, device="cuda", generator=gen)
    c = torch.full((M, N), float("nan"), device="cuda")
    p = numba_gemm.plan_for(M, N, K, stage=db.make_stage(CONFIG), aligned=variant == "vector")
    assert p.variant == variant, (p.variant, variant)
    for _ in range(4):
        p.launch(a, b, c)
    ref = a.double() @ b.double()
    err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-5, err
    torch.cuda.synchronize()
    print(f"{M}x{N}x{K} {variant}: err {err:.2e}")


if __name__ == "__main__":
    main()
