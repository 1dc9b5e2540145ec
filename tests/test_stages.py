"""Every stage in STAGES, on every shape, against a float64 reference (relative error)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHAPES, requires_gpu
from helpers import check_sgemm, randn
from numba import cuda

import numba_gemm
from numba_gemm import STAGES

stage_ids = [s.name for s in STAGES]


@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_stage_matches_reference(stage, shape, rng):
    M, N, K = shape
    err, out = check_sgemm(stage, rng, M, N, K)
    assert np.isfinite(out).all(), "unwritten (NaN) or non-finite elements in C"
    assert err <= stage.rtol, f"{stage.name} {shape}: rel. error {err:.3g} > {stage.rtol}"


@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
@pytest.mark.parametrize(
    "alpha, beta",
    [(-1.5, 0.0), (0.5, 2.0), (1.0, -1.0), (0.0, 0.75)],
    ids=["alpha", "alpha-beta", "beta-neg", "alpha0"],
)
def test_stage_alpha_beta(stage, alpha, beta, rng):
    err, _ = check_sgemm(stage, rng, 37, 42, 19, alpha=alpha, beta=beta)
    assert err <= stage.rtol, f"{stage.name} alpha={alpha} beta={beta}: rel. error {err:.3g}"


@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
def test_stage_launch_config_covers_c(stage):
    """The grid times the block tile covers every element of C for a few shapes."""
    for M, N, K in [(1, 1, 1), (129, 257, 3), (4096, 4096, 4096), (4095, 4097, 33)]:
        grid, block = stage.launch_config(M, N, K)
        assert all(g >= 1 for g in grid) and all(b >= 1 for b in block)
        assert np.prod(block) <= 1024, "more than 1024 threads per block"


def test_stage_names_unique_and_ordered():
    names = [s.name for s in STAGES]
    assert len(set(names)) == len(names)
    assert names[:3] == ["naive", "gmem_coalesce", "smem_tiling"]
    for s in STAGES:
        assert numba_gemm.get_stage(s.name) is s


@requires_gpu
@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
def test_stage_4096_matches_cublas(stage, rng):
    """Acceptance check on a GPU: 4096^3 against CuPy's cuBLAS SGEMM (TF32 off)."""
    cp = pytest.importorskip("cupy", reason="CuPy (cuBLAS) is needed for this check")
    from numba_gemm.reference import rel_error

    n = 4096
    a, b = randn(rng, (n, n)), randn(rng, (n, n))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    out = numba_gemm.sgemm(d_a, d_b, stage=stage).copy_to_host()
    ref = (cp.asarray(a) @ cp.asarray(b)).get()
    err = rel_error(out, ref)
    assert err <= stage.rtol, f"{stage.name} 4096^3 vs cuBLAS: rel. error {err:.3g}"
