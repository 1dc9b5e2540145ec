"""Aligned staging (``numba_gemm.plan.staging``): unaligned products on the vector kernels between
zero-filling copies. The copy kernel and the staged plan run on the simulator with small ragged
shapes; the choice is checked offline against the committed H200 data."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import randn, transposed_on_device
from numba import cuda

import numba_gemm
from numba_gemm import plan_for
from numba_gemm.arrays import F32, operand
from numba_gemm.kernels import _pad
from numba_gemm.launch import launcher, workspace
from numba_gemm.launch.launcher import runner, strided_array
from numba_gemm.plan import choose, staging, tuning
from numba_gemm.plan.geometry import Alignment, Geometry
from numba_gemm.tools.reference import reference_f64, rel_error

NONE = Alignment.NONE

#: A small double_buffering tile (64 threads) with two K slices: the inner plan then also uses
#: split-K's workspace, beside the staging one.
SMALL = dict(BM=32, BN=32, BK=8, WM=16, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=2)


def _copy(dst, src):
    """``copy_padded`` on the Numba dispatcher over 2-D arrays (any pitch)."""
    d, s = operand(dst), operand(src)
    as3 = [
        strided_array(type(x)(x.obj, x.ptr, (1, *x.shape), (0, *x.strides), x.dtype, x.device))
        for x in (d, s)
    ]
    grid = launcher._pad_grid(d)
    _pad.copy_padded[grid, (_pad.BLOCK, 1, 1)](*as3)
    cuda.synchronize()


def test_copy_widens_with_zeros_and_narrows(rng):
    src = randn(rng, (5, 7))
    dst = cuda.to_device(np.full((9, 12), np.nan, dtype=np.float32))
    _copy(dst, cuda.to_device(src))
    want = np.zeros((9, 12), np.float32)
    want[:5, :7] = src
    np.testing.assert_array_equal(dst.copy_to_host(), want)
    # back: a narrower destination takes its own extent only, through a row pitch of 12
    back = cuda.to_device(np.full((5, 7), np.nan, dtype=np.float32))
    _copy(back, dst)
    np.testing.assert_array_equal(back.copy_to_host(), src)


def test_copy_walks_rows_past_the_grid(rng, monkeypatch):
    """More rows than ``gridDim.y * ROWS``: the grid strides over them."""
    monkeypatch.setattr(_pad, "MAX_GRID_Y", 1)
    src = randn(rng, (2 * _pad.ROWS + 3, 3))
    dst = cuda.to_device(np.full((src.shape[0], 4), np.nan, dtype=np.float32))
    _copy(dst, cuda.to_device(src))
    got = dst.copy_to_host()
    np.testing.assert_array_equal(got[:, :3], src)
    assert not got[:, 3].any()


@pytest.mark.parametrize(
    "M, N, K", [(19, 13, 11), (19, 12, 11), (19, 13, 12)], ids=["K-and-N", "K", "N"]
)
def test_staging_for_pads_what_the_shape_needs(M, N, K):
    s = staging.staging_for(M, N, K)
    assert (s.K4, s.N4) == (staging.round4(K), staging.round4(N))
    assert s.a == (K % 4 != 0) and s.c == (N % 4 != 0) and s.b == (s.a or s.c)
    assert s.K4 % 4 == 0 and s.N4 % 4 == 0 and s.K4 - K < 4 and s.N4 - N < 4


def _staged(M, N, K, layout="NN"):
    st = numba_gemm.get_stage("double_buffering").with_config(SMALL)
    s = staging.staging_for(M, N, K)
    inner = plan_for(M, s.N4, s.K4, stage=st, geometry=Geometry.dense(M, s.N4, s.K4, layout))
    assert inner.variant == "vector"
    return choose.staged_plan(M, N, K, s, inner, scalar_ms=1.0)


def _b_on_device(b, layout):
    """B (K, N) on the GPU, stored as ``layout`` says (NT: the transpose of a row-major W)."""
    return transposed_on_device(b) if layout[1] == "T" else cuda.to_device(b)


@pytest.mark.parametrize(
    "M, N, K, beta, layout",
    [
        (37, 45, 21, 0.0, "NN"),
        (33, 36, 23, 0.5, "NN"),
        (35, 43, 24, -1.0, "NN"),
        (37, 45, 21, 0.0, "NT"),
        (33, 36, 23, 0.5, "NT"),
        (35, 43, 24, -1.0, "NT"),
    ],
    ids=["K-and-N", "K-beta", "N-beta", "NT-K-and-N", "NT-K-beta", "NT-N-beta"],
)
def test_staged_plan_matches_reference(M, N, K, beta, layout, rng):
    """The staged product against float64, out in the middle of a buffer whose other elements
    must stay as they were; NaN in C is not read when beta == 0. B stored transposed (NT) is
    padded in its own storage, W (N, K) -> (N4, K4)."""
    p = _staged(M, N, K, layout)
    assert p.geometry == Geometry.dense(M, N, K, layout)
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    c0 = randn(rng, (M, N))
    if beta == 0.0:
        c0[:] = np.nan
    guard = np.full(M * N + 8, 7.0, dtype=np.float32)
    guard[4:-4] = c0.ravel()
    buf = cuda.to_device(guard)
    d_c = buf[4:-4].reshape(M, N)  # 16-byte offset: C's base stays aligned
    runner(p).run(
        operand(cuda.to_device(a)), operand(_b_on_device(b, layout)), operand(d_c), 1.5, beta, 0
    )
    cuda.synchronize()
    got = buf.copy_to_host()
    assert (got[:4] == 7).all() and (got[-4:] == 7).all(), "wrote outside C"
    want = 1.5 * reference_f64(a, b) + (beta * c0.astype(np.float64) if beta else 0.0)
    out = got[4:-4].reshape(M, N)
    assert np.isfinite(out).all()
    assert rel_error(out, want) <= p.stage.rtol


class _Counting:
    """A kernel's stand-in that records the source (second array) of each launch."""

    def __init__(self, kernel):
        self.kernel, self.sources = kernel, []

    def launch(self, grid, block, stream, arrays, scalars):
        self.sources.append(arrays[1].ptr)
        self.kernel.launch(grid, block, stream, arrays, scalars)


def test_staged_plan_copies_a_misaligned_view(rng):
    """An aligned shape whose A starts 4 bytes into its allocation: only A is copied (B and C
    are used in place), and the result is right."""
    M, N, K = 20, 24, 16
    p = _staged(M, N, K)
    assert p.staging[:3] == (False, False, False)  # the shape forces nothing
    assert p.copy_ms == pytest.approx(
        staging.copy_ms(  # but all three are priced
            M, N, K, staging.Staging(True, True, True, K, N)
        )
    )
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a = cuda.to_device(np.concatenate([[np.float32(3)], a.ravel()]))[1:].reshape(M, K)
    assert operand(d_a).ptr & 15
    d_c = cuda.to_device(np.full((M, N), np.nan, dtype=np.float32))
    r = runner(p)
    r.kernel()
    counted = _Counting(r._copy(F32))
    r._copies["S"] = counted
    r.run(operand(d_a), operand(cuda.to_device(b)), operand(d_c), 1.0, 0.0, 0)
    assert counted.sources == [operand(d_a).ptr]  # one copy, of A; the product went into C
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= p.stage.rtol


@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_sgemm_runs_a_staged_plan(layout, rng, monkeypatch):
    """The public call with a staged plan chosen (the choice itself needs measured data: the
    next test): a new output and ``out=`` with beta; ``explain`` says what runs; B stored
    transposed too (``x @ W.T``)."""
    M, N, K = 21, 30, 19
    staged = _staged(M, N, K, layout)
    monkeypatch.setattr(choose, "_staged", lambda *a: staged)
    monkeypatch.setattr(numba_gemm.dispatch, "PLANS", {})
    # staging is considered only when the scalar plan has a prediction: give it one
    monkeypatch.setattr(
        choose,
        "_choose",
        lambda g, stage, aligned, dev, compute="fp32", tma_ok=True, pointers=None: (
            staged.stage,
            1.0,
            "test",
        ),
    )
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a, d_b = cuda.to_device(a), _b_on_device(b, layout)
    assert numba_gemm.explain(d_a, d_b) is staged
    assert "through aligned copies" in repr(staged) and "staged" in staged.reason
    got = numba_gemm.sgemm(d_a, d_b).copy_to_host()
    assert rel_error(got, reference_f64(a, b)) <= staged.stage.rtol
    c0 = randn(rng, (M, N))
    d_c = cuda.to_device(c0)
    numba_gemm.sgemm(d_a, d_b, out=d_c, alpha=-1.0, beta=2.0)
    want = -reference_f64(a, b) + 2.0 * c0.astype(np.float64)
    assert rel_error(d_c.copy_to_host(), want) <= staged.stage.rtol
    # a repeated plain call takes the fast lane, through the staged plan's copies
    monkeypatch.setattr(numba_gemm.checks, "validate", None)  # the general path would fail
    d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    assert numba_gemm.sgemm(d_a, d_b, out=d_c) is d_c
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= staged.stage.rtol


def test_h200_stages_large_ragged_products_only(fake_gpu):
    """With the committed H200 data: 4095^3 and 4097^3 are staged (the aligned plan from the
    measured 4096^3, plus the copies, is predicted faster than the measured scalar kernel); a
    skinny product (its copies cost as much as the product), a named stage, and a shape whose
    scalar kernel was measured near it but whose padded product was not are not."""
    dev = fake_gpu("NVIDIA H200", (9, 0))
    for n in (4095, 4097):
        p = plan_for(n, n, n, alignment=NONE, device=dev)
        assert p.staging is not None, repr(p)
        scalar = plan_for(n, n, n, stage=p.stage.name, alignment=NONE, device=dev)
        assert scalar.variant == "scalar" and scalar.staging is None
        assert p.variant == "vector" and p.inner.variant == "vector"
        assert (p.inner.M, p.inner.N, p.inner.K) == (n, staging.round4(n), staging.round4(n))
        assert p.predicted_ms == pytest.approx(p.inner.predicted_ms + p.copy_ms)
        assert p.copy_ms > 0.05  # 3 x 67 MB read and written
    assert plan_for(16, 50257, 768, alignment=NONE, device=dev).staging is None
    assert plan_for(999, 1001, 1000, alignment=NONE, device=dev).staging is None
    # the scalar kernel timed near 256 x 50257 x 768, the padded product priced by a class only
    assert plan_for(256, 50257, 768, alignment=NONE, device=dev).staging is None
    # x @ W.T: staged too, W padded in its own storage and the inner plan of that layout; A
    # stored transposed is not (its rows would need M padded)
    for n in (4095, 4097):
        nt = plan_for(n, n, n, alignment=NONE, device=dev, geometry=Geometry.dense(n, n, n, "NT"))
        assert nt.staging is not None, repr(nt)
        assert nt.inner.geometry == Geometry.dense(n, staging.round4(n), staging.round4(n), "NT")
        tn = plan_for(n, n, n, alignment=NONE, device=dev, geometry=Geometry.dense(n, n, n, "TN"))
        assert tn.staging is None


def test_h200_stages_class_priced_products_by_class_prices(fake_gpu):
    """Far from every measured shape, the scalar plan and the padded product's aligned plan are
    both priced from the shape classes (each candidate timed in both variants there), so the
    comparison is fair and staging is taken where it is predicted cheaper: 9001 x 3001 x 3001.
    Where only the scalar kernel was measured near (256 x 50257 x 768), the prices are not alike
    and nothing is staged; likewise for a few rows, priced from measured shapes of nearby rows."""
    dev = fake_gpu("NVIDIA H200", (9, 0))
    M, N, K = 9001, 3001, 3001
    s = staging.staging_for(M, N, K)
    assert tuning.nearest_shape(M, s.N4, s.K4, True, dev) is None
    assert tuning.nearest_shape(M, N, K, False, dev) is None
    assert staging.like_priced(M, N, K, s, dev, "NN")
    p = plan_for(M, N, K, alignment=NONE, device=dev)
    assert p.staging is not None, repr(p)
    assert p.inner.variant == "vector" and (p.inner.N, p.inner.K) == (s.N4, s.K4)
    assert p.predicted_ms == pytest.approx(p.inner.predicted_ms + p.copy_ms)
    wide = staging.staging_for(256, 50257, 768)
    assert not staging.like_priced(256, 50257, 768, wide, dev, "NN")
    few = staging.staging_for(8, 1001, 20001)
    assert tuning.nearest_shape(8, few.N4, few.K4, True, dev) is None
    assert not staging.like_priced(8, 1001, 20001, few, dev, "NN")


def test_copy_cost_counts_each_staged_operand():
    s = staging.staging_for(100, 10, 11)  # K and N: A, B, C
    full = staging.copy_ms(100, 10, 11, s)
    only_n = staging.copy_ms(100, 10, 12, staging.staging_for(100, 10, 12))  # B, C
    assert full > only_n > 0
    assert staging.copy_ms(100, 10, 11, s, beta=True) > full  # C in as well


def test_staging_workspace_grows_between_plans(rng, monkeypatch):
    """A small staged product, a larger one on the same stream (the workspace is replaced by a
    larger buffer), then the small one again: each result right, the small plan's views now in
    the new buffer."""
    monkeypatch.setattr(workspace, "_staging", {})
    small, big = _staged(9, 13, 11), _staged(40, 45, 23)

    def run(p):
        a, b = randn(rng, (p.M, p.K)), randn(rng, (p.K, p.N))
        d_c = cuda.to_device(np.full((p.M, p.N), np.nan, dtype=np.float32))
        runner(p).run(
            operand(cuda.to_device(a)), operand(cuda.to_device(b)), operand(d_c), 1.0, 0.0, 0
        )
        assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= p.stage.rtol

    run(small)
    first = workspace.staging_buffers(small.M, small.staging, 0, 0)[0].ptr
    run(big)
    run(small)
    assert workspace.staging_buffers(small.M, small.staging, 0, 0)[0].ptr != first
    assert len(workspace._staging) == 1
