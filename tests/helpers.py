"""Test helpers: random operands, NaN-poisoned outputs, one checked sgemm run."""

from __future__ import annotations

import numpy as np
from numba import cuda

import numba_gemm
from numba_gemm.reference import reference_f64, rel_error


def randn(rng, shape) -> np.ndarray:
    """Standard-normal float32 (never zeros: they hide unwritten outputs and bad indexing)."""
    return rng.standard_normal(shape, dtype=np.float32)


#: The tunable tensor-core stages on the simulator: one warp (32x32x8 block tile). Their
#: warp-collective mma/ldmatrix models exchange fragments between the simulator's threads, which
#: is slow with 256; ``tests/test_mma.py`` runs the default (multi-warp) tiles once.
TC_SIM_CONFIG = dict(BM=32, BN=32, BK=8, WM=32, WN=32, NBUF=3, MINB=1)


def sim_sized(stage):
    """``stage``, or on the simulator a tunable tensor-core stage with :data:`TC_SIM_CONFIG`."""
    from numba_gemm.device import SIMULATOR

    if SIMULATOR and stage.tunable and stage.precision in ("tf32", "3xtf32"):
        return stage.with_config(TC_SIM_CONFIG)
    return stage


def check_sgemm(stage, rng, M, N, K, *, alpha=1.0, beta=0.0, poison=True):
    """Run ``sgemm`` with ``stage`` on fresh random inputs; return (rel. error, output).

    C is NaN-poisoned when ``beta == 0`` (an unwritten element, or a kernel that reads C when it
    must not, shows as NaN) and random otherwise.
    """
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    c0 = np.full((M, N), np.nan, np.float32) if (poison and beta == 0) else randn(rng, (M, N))
    d_c = cuda.to_device(c0)
    res = numba_gemm.sgemm(
        cuda.to_device(a), cuda.to_device(b), stage=stage, out=d_c, alpha=alpha, beta=beta
    )
    assert res is d_c
    out = d_c.copy_to_host()
    ref = reference_f64(a, b, c0, alpha, beta)
    return rel_error(out, ref), out
