"""bfloat16: operands read from every array kind, stage 24 (``bf16_tma``) and the bfloat16 C.

The simulator runs stage 24's kernel (TMA and wgmma models reading the operands' bits as
bfloat16); the C store's rounding (``ptx.bf16``) is checked against ``ml_dtypes``' conversion,
bit for bit, and the whole product against float64.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import TMA_SIM_CONFIG, to_device, to_host, transposed_on_device

import numba_gemm
from numba_gemm import arrays
from numba_gemm.device import SIMULATOR
from numba_gemm.launch.launcher import numba_signature
from numba_gemm.plan.choose import plan_for
from numba_gemm.ptx.bf16 import bf16_bits, bf16_value
from numba_gemm.tools.reference import rel_error

BF = ml_dtypes.bfloat16


def _stage():
    return numba_gemm.get_stage("bf16_tma").with_config(TMA_SIM_CONFIG)


def test_bf16_rounding_model_matches_ml_dtypes(rng):
    """``bf16_bits`` rounds to nearest, ties to even (what ``cvt.rn.bf16.f32`` does): equal, bit
    for bit, to ``ml_dtypes``' conversion on random values, exact ties either way, the largest
    finite values, infinities and signed zeros; a NaN stays a NaN. ``bf16_value`` widens back
    exactly."""
    x = rng.standard_normal(4096).astype(np.float32) * np.float32(1e3)
    ties = (np.arange(64, dtype=np.uint32) << 16 | 0x3F800000 | 0x8000).view(np.float32)
    edge = np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-40], np.float32)
    for v in (x, ties, edge):
        assert np.array_equal(bf16_bits(v), v.astype(BF).view(np.uint16))
    assert np.isnan(bf16_value(bf16_bits(np.float32(np.nan))))
    assert np.array_equal(bf16_value(bf16_bits(x)), x.astype(BF).astype(np.float32))
    # ties go to the even neighbour: 1 + 2^-8 (a tie) rounds down to 1, 1 + 3 * 2^-8 up
    assert bf16_value(bf16_bits(np.float32(1 + 2**-8))) == 1.0
    assert bf16_value(bf16_bits(np.float32(1 + 3 * 2**-8))) == 1 + 2**-6


def test_bf16_operands_read_as_one_dtype():
    """Every reader turns bfloat16 into the one :data:`arrays.BF16`: a Numba array of
    ``ml_dtypes.bfloat16`` and a CUDA Array Interface type string ``"<V2"``; its itemsize counts
    in contiguity and byte spans."""
    d = to_device(np.zeros((3, 8), BF))
    op = arrays.operand(d)
    assert op.dtype is arrays.BF16 and op.is_c_contiguous() and op.nbytes == 48
    assert arrays._np_or_bf16("<V2") is arrays.BF16
    assert arrays._np_or_bf16("<f2") == np.float16
    assert "uint16[:, ::1]" in numba_signature("UUUMMff")


@pytest.mark.parametrize(
    "name, half, layout",
    [("bf16_tma", BF, "NN"), ("bf16_tma", BF, "NT"), ("hgemm_tma", np.float16, "NN")],
)
def test_16bit_gemm(name, half, layout, rng):
    """``hgemm`` on bfloat16 operands runs stage 24 (float16: stage 20; M short of the tile, N
    one tile and one column fragment, a K of three tiles through two buffers): the FP32 result
    is the float64 product of the 16-bit inputs to FP32 accuracy; a 16-bit C (written 16 bytes
    per lane after the quad transpose) is that same FP32 result rounded once to nearest even,
    bit for bit. (The store does not depend on B's layout: FP16 runs NN only.)"""
    M, N, K = 40, 72, 136
    a = rng.standard_normal((M, K)).astype(half)
    b = rng.standard_normal((K, N)).astype(half)
    d_a = to_device(a)
    d_b = to_device(b) if layout == "NN" else transposed_on_device(b)
    st = numba_gemm.get_stage(name).with_config(TMA_SIM_CONFIG)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c32 = to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.hgemm(d_a, d_b, out=c32, stage=st)
    c32 = to_host(c32)
    assert rel_error(c32, ref) < 1e-6
    c = numba_gemm.hgemm(d_a, d_b, out_dtype=np.dtype(half).name, stage=st)
    assert c.dtype == half and c.shape == (M, N)
    assert np.array_equal(to_host(c).view(np.uint16), c32.astype(half).view(np.uint16))


def test_bf16_alpha_beta_read_bf16_c(rng):
    """``beta != 0`` reads a bfloat16 C (widened exactly), both C variants: the 32-bit pair
    stores (N even, rows aligned) and, one element off the allocation, the element stores."""
    M, N, K = 24, 64, 64
    a = rng.standard_normal((M, K)).astype(BF)
    b = rng.standard_normal((K, N)).astype(BF)
    c0 = rng.standard_normal((M, N)).astype(BF)
    want = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) - 2.0 * c0.astype(np.float64)
    st = _stage()
    d_c = to_device(c0)
    numba_gemm.hgemm(to_device(a), to_device(b), out=d_c, alpha=0.5, beta=-2.0, stage=st)
    assert rel_error(to_host(d_c), want) < 4e-3
    buf = to_device(np.concatenate([np.zeros(1, BF), c0.reshape(-1)]))
    off = buf[1:].reshape(M, N)  # 2 bytes off: rows not 16-byte aligned
    numba_gemm.hgemm(to_device(a), to_device(b), out=off, alpha=0.5, beta=-2.0, stage=st)
    assert rel_error(to_host(off), want) < 4e-3


def test_bf16_plan_takes_fp16_tuning(fake_gpu):
    """On an H200 without BF16 tuning data, stage 24 is priced with stage 20's tuned classes
    (``Stage.tuned_as``): the same configuration as FP16 for the same shape; a bfloat16 C is its
    ``U`` argument."""
    fake_gpu("NVIDIA H200", (9, 0))
    for shape in ((4096, 4096, 4096), (1024, 1024, 16384), (512, 8192, 2048)):
        bf = plan_for(*shape, compute="bf16", out_dtype="bfloat16")
        f16 = plan_for(*shape, compute="fp16")
        assert bf.stage.name == "bf16_tma" and "class" in bf.reason, bf.reason
        assert dict(bf.stage.config) == dict(f16.stage.config), shape
        assert bf.stage.args == "UUUMMff"


def test_bf16_rejects_bad_input(rng):
    """Mixed 16-bit types, an output of the other 16-bit type, an FP16 stage by name: clear
    errors, nothing written."""
    a = to_device(rng.standard_normal((8, 16)).astype(BF))
    b = to_device(rng.standard_normal((16, 8)).astype(BF))
    h = to_device(np.ones((16, 8), np.float16))
    a16 = to_device(np.ones((8, 16), np.float16))
    c = np.full((8, 8), 7.0, np.float32)
    d_c = to_device(c)
    cases = [
        (TypeError, "b must be bfloat16, got dtype float16 .a is bfloat16", dict(b=h)),
        (TypeError, "b must be float16, got dtype bfloat16", dict(a=a16)),
        (TypeError, "a must be float16 or bfloat16", dict(a=to_device(np.ones((8, 16))))),
        (TypeError, "out must be float32 or bfloat16", dict(out=to_device(c.astype("f2")))),
        (ValueError, "out_dtype must be 'float32' or 'bfloat16'", dict(out_dtype="float16")),
        (ValueError, "computes 'fp16', not compute='bf16'", dict(stage="hgemm_tma")),
    ]
    for error, match, kw in cases:
        args = dict(a=a, b=b, out=d_c) | kw
        with pytest.raises(error, match=match):
            numba_gemm.hgemm(args.pop("a"), args.pop("b"), **args)
    np.testing.assert_array_equal(to_host(d_c), c)


@pytest.mark.parametrize("layout, out_dtype", [("NN", "bfloat16"), ("NT", "float32")])
def test_hgemm_fast_lane(monkeypatch, layout, out_dtype, rng):
    """A second ``hgemm`` of a planned shape (same layout, C type and alignment) takes the fast
    lane (``api._half_call``) and writes the same product as the general path; an ``out`` that
    overlaps A leaves the lane and is refused; a call it does not take (``out`` one element off
    its allocation) goes the general way."""
    from numba_gemm import dispatch

    if not SIMULATOR:
        pytest.skip("the fast lane reads Numba arrays on the simulator only (arrays.HALF)")
    M, N, K = 24, 64, 64
    st = _stage()
    a = rng.standard_normal((M, K)).astype(BF)
    b = rng.standard_normal((K, N)).astype(BF)
    d_a = to_device(a)
    d_b = to_device(b) if layout == "NN" else transposed_on_device(b)
    half = np.float32 if out_dtype == "float32" else BF
    c = to_device(np.full((M, N), np.nan, half))
    numba_gemm.hgemm(d_a, d_b, out=c, stage=st)  # the general path plans it
    want = to_host(c)
    general = dispatch.run_fp16

    def refuse(*args, **kwargs):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(dispatch, "run_fp16", refuse)
    c2 = to_device(np.full((M, N), np.nan, half))
    assert numba_gemm.hgemm(d_a, d_b, out=c2, stage=st) is c2
    assert np.array_equal(to_host(c2).view(np.uint8), want.view(np.uint8))
    new = numba_gemm.hgemm(d_a, d_b, out_dtype=out_dtype, stage=st)  # a new C: same plan
    assert np.array_equal(to_host(new).view(np.uint8), want.view(np.uint8))
    if out_dtype == "bfloat16":  # A as C (same shape, K == N): refused, nothing written
        with pytest.raises(ValueError, match="out overlaps a"):
            numba_gemm.hgemm(d_a, d_b, out=d_a, stage=st)
        assert np.array_equal(to_host(d_a).view(np.uint16), a.view(np.uint16))
    monkeypatch.setattr(dispatch, "run_fp16", general)
    buf = to_device(np.full(M * N + 1, np.nan, half))
    off = buf[1:].reshape(M, N)
    numba_gemm.hgemm(d_a, d_b, out=off, stage=st)
    assert np.array_equal(to_host(off).view(np.uint8), want.view(np.uint8))
