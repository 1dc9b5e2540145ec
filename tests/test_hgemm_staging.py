"""``hgemm`` on rows its 16-bit TMA stages cannot read in place: K (or N for row-major B) not a
multiple of 8, a base pointer off 16 bytes, A stored transposed (TN, TT). The plan copies the
operands into zero-padded buffers (``plan.choose.half_staged``, ``launch.launcher.StagedRunner``
with the copy kernel compiled per element type) and runs the aligned product there; each result
is checked against float64 with a NaN-poisoned C, on the simulator (stage 20's models) and on
a GPU alike.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import to_device, to_host, transposed_on_device

import numba_gemm
from numba_gemm import dispatch
from numba_gemm.device import SIMULATOR
from numba_gemm.plan import staging
from numba_gemm.plan.choose import half_staged
from numba_gemm.tools.check import device_view
from numba_gemm.tools.reference import rel_error

BF = ml_dtypes.bfloat16
# ragged dimensions on the simulator (it runs every thread); on a GPU also a large one
SHAPES = [(9, 10, 13), (20, 24, 30)] + ([] if SIMULATOR else [(1000, 1000, 1001)])


def _operands(rng, M, N, K, half, layout):
    a = rng.standard_normal((M, K)).astype(half)
    b = rng.standard_normal((K, N)).astype(half)
    d_a = transposed_on_device(a) if layout[0] == "T" else to_device(a)
    d_b = transposed_on_device(b) if layout[1] == "T" else to_device(b)
    return a, b, d_a, d_b


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_hgemm_any_rows_and_layout(layout, shape, rng):
    """FP16 into a float32 C and a float16 C (rounded once: the FP32 result's rounding, within
    a float16 ulp), every layout, ragged K and N. (The tensor cores' FP32 sums lose a little
    more than IEEE FP32's: 1.2e-6 at K = 1001 on an H200.)"""
    M, N, K = shape
    a, b, d_a, d_b = _operands(rng, M, N, K, np.float16, layout)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c32 = to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.hgemm(d_a, d_b, out=c32)
    c32 = to_host(c32)
    assert rel_error(c32, ref) < 1e-6 * max(1.0, (K / 256) ** 0.5)
    c16 = to_host(numba_gemm.hgemm(d_a, d_b, out_dtype="float16"))
    assert c16.dtype == np.float16 and rel_error(c16, ref) < 1e-3


def test_bf16_ragged_with_alpha_beta(rng):
    """BF16 with K and N not multiples of 8, ``alpha`` and ``beta`` reading a bfloat16 C that
    is copied in and out of the padded buffer."""
    M, N, K = 12, 11, 21
    a, b, d_a, d_b = _operands(rng, M, N, K, BF, "NN")
    c0 = rng.standard_normal((M, N)).astype(BF)
    want = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) - 2.0 * c0.astype(np.float64)
    d_c = to_device(c0)
    numba_gemm.hgemm(d_a, d_b, out=d_c, alpha=0.5, beta=-2.0)
    assert rel_error(to_host(d_c).astype(np.float64), want) < 8e-3


def test_unaligned_base_pointer_is_copied(rng):
    """A and C one element off their allocations (rows of 16 elements: aligned lengths, so only
    the pointers send them through the copies)."""
    M, N, K = 8, 16, 16
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    d_a = to_device(np.concatenate([np.zeros(1, np.float16), a.reshape(-1)]))[1:].reshape(M, K)
    d_c = to_device(np.full(M * N + 1, np.nan, np.float32))[1:].reshape(M, N)
    numba_gemm.hgemm(d_a, to_device(b), out=d_c)
    assert rel_error(to_host(d_c), a.astype(np.float64) @ b.astype(np.float64)) < 1e-6
    staged = [p for k, p in dispatch.PLANS.items() if k[:5] == ("fp16", 0, M, N, K)]
    assert any(getattr(p, "plan", p).staging is not None for p in staged)


def test_half_staged_plans_what_the_rows_need():
    """The staged plan's copies: K ragged copies A and B; N ragged copies B and C for row-major
    B, and nothing of B stored transposed for N alone (its rows are K long: C then takes the
    stage's element stores); A stored transposed is always copied, row-major."""
    p = half_staged(9, 10, 13, "NN", None, "fp16", "float32")
    s = p.staging
    assert (s.a, s.b, s.c, s.K4, s.N4, s.ab_type) == (True, True, True, 16, 16, "float16")
    assert p.inner.geometry.layout == "NN" and (p.inner.N, p.inner.K) == (16, 16)
    nt = half_staged(9, 10, 16, "NT", None, "fp16", "float16").staging
    assert (nt.a, nt.b, nt.c, nt.N4) == (False, False, False, 10)
    tn = half_staged(9, 16, 16, "TN", None, "bf16", "bfloat16")
    assert tn.staging.at and tn.staging.a and not tn.staging.b
    assert tn.inner.geometry.layout == "NN" and tn.geometry.layout == "TN"
    assert "A stored transposed" in tn.reason
    # 16-bit rows round to 8 elements; the bytes copied count 2 a value
    assert staging.round16(13, 2) == 16 and staging.round16(13, 4) == 16
    assert staging.round16(9, 2) == 16 and staging.round16(9, 4) == 12
    assert staging.workspace_bytes(9, s) == 2 * (9 * 16 + 16 * 16) + 4 * 9 * 16


def test_bad_16bit_layouts_still_refused(rng):
    """An operand neither C-contiguous nor the transpose of one: a clear error, nothing
    written."""
    a = to_device(rng.standard_normal((8, 34)).astype(np.float16))[:, 1:17]  # pitch 34
    b = to_device(rng.standard_normal((16, 8)).astype(np.float16))
    c = np.full((8, 8), 7.0, np.float32)
    d_c = to_device(c)
    with pytest.raises(ValueError, match="a must be 2-D, C-contiguous or the transpose"):
        numba_gemm.hgemm(a, b, out=d_c)
    np.testing.assert_array_equal(to_host(d_c), c)


@pytest.mark.parametrize("half", [np.float16, BF], ids=["fp16", "bf16"])
def test_hgemm_batches_and_shared_matrices(half, rng):
    """A batch of products, one launch (or staged sequence) each: both operands 3-D, a 2-D
    ``b`` shared by every product (``x @ W`` for a batch of ``x``), a batch of one broadcast,
    a 3-D ``b`` whose matrices are stored transposed (FP16); ragged K and N; a NaN-poisoned
    float32 out, and a new 16-bit one."""
    G, M, N, K = 2, 9, 10, 13
    a = rng.standard_normal((G, M, K)).astype(half)
    b = rng.standard_normal((G, K, N)).astype(half)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    w = to_device(np.ascontiguousarray(b.transpose(0, 2, 1)))  # (G, N, K) row-major
    wt = device_view(w, (G, K, N), (2 * N * K, 2, 2 * K))  # each matrix W_g.T, zero-copy
    cases = [(to_device(a), to_device(b), a64 @ b64)]
    if half is np.float16:
        cases += [
            (to_device(a), to_device(b[0]), a64 @ b64[0]),
            (to_device(a[:1]), to_device(b), a64[:1] @ b64),
            (to_device(a), wt, a64 @ b64),
        ]
    for d_a, d_b, want in cases:
        out = to_device(np.full(want.shape, np.nan, np.float32))
        assert numba_gemm.hgemm(d_a, d_b, out=out) is out
        assert rel_error(to_host(out), want) < 1e-6
    d_a, d_b, want = cases[0]
    c = numba_gemm.hgemm(d_a, d_b, out_dtype=np.dtype(half).name)
    assert c.shape == want.shape and rel_error(to_host(c).astype(np.float64), want) < 8e-3


def test_hgemm_batch_errors_write_nothing(rng):
    """Batch sizes that differ, an ``out`` of another batch or whose matrices share memory, an
    ``out`` overlapping ``a``: clear errors, nothing written."""
    h = np.float16
    a = to_device(rng.standard_normal((3, 8, 16)).astype(h))
    b = to_device(rng.standard_normal((2, 16, 8)).astype(h))
    c = np.full((3, 8, 8), 7.0, np.float32)
    d_c = to_device(c)
    with pytest.raises(ValueError, match="batch sizes differ: a has 3 matrices and b has 2"):
        numba_gemm.hgemm(a, b, out=d_c)
    b3 = to_device(rng.standard_normal((3, 16, 8)).astype(h))
    with pytest.raises(ValueError, match=r"out must be \(3, 8, 8\)"):
        numba_gemm.hgemm(a, b3, out=to_device(np.zeros((2, 8, 8), np.float32)))
    shared = to_device(np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match="out's matrices overlap"):
        numba_gemm.hgemm(a, b3, out=device_view(shared, (3, 8, 8), (0, 32, 4)))
    np.testing.assert_array_equal(to_host(shared), 0)
    np.testing.assert_array_equal(to_host(d_c), c)
