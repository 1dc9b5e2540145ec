"""Tensor-core instructions (``numba_gemm.ptx.mma``): fragment ownership, ldmatrix, TF32 rounding.

Each test kernel writes out the PTX ISA's fragment map itself (not through the module's helpers)
and runs unchanged on the simulator (the plain-Python model) and on a GPU (the real instruction),
so the model and the hardware are checked against the same index expressions.
"""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest
from helpers import check_sgemm
from numba import cuda, float32
from numba.core.types import float16

import numba_gemm
from numba_gemm.ptx import mma
from numba_gemm.tools.reference import rel_error


def test_tf32_round_is_round_to_nearest_ties_away():
    one = np.float32(1.0)
    ulp = np.float32(2.0**-10)  # TF32's last mantissa bit at 1.0
    x = np.array(
        [
            one + ulp / 2,
            one + ulp / 2 - np.float32(2.0**-23),
            -(one + ulp / 2),
            one + ulp * 1.5,
            np.inf,
            -np.inf,
            3.0,
        ],
        dtype=np.float32,
    )
    want = np.array(
        [one + ulp, one, -(one + ulp), one + 2 * ulp, np.inf, -np.inf, 3.0], dtype=np.float32
    )
    np.testing.assert_array_equal(mma.tf32_round(x), want)
    assert np.isnan(mma.tf32_round(np.float32(np.nan)))


@cuda.jit
def _mma_tf32_kernel(A, B, C, D):
    lane = cuda.threadIdx.x
    g, q = lane >> 2, lane & 3
    d = mma.mma_tf32(
        mma.to_tf32(A[g, q]),
        mma.to_tf32(A[g + 8, q]),
        mma.to_tf32(A[g, q + 4]),
        mma.to_tf32(A[g + 8, q + 4]),
        mma.to_tf32(B[q, g]),
        mma.to_tf32(B[q + 4, g]),
        C[g, 2 * q],
        C[g, 2 * q + 1],
        C[g + 8, 2 * q],
        C[g + 8, 2 * q + 1],
    )
    D[g, 2 * q], D[g, 2 * q + 1], D[g + 8, 2 * q], D[g + 8, 2 * q + 1] = d


def test_mma_tf32_fragment_map(rng):
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 8), (16, 8)))
    d_D = cuda.to_device(np.full((16, 8), np.nan, np.float32))
    _mma_tf32_kernel[1, 32](cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), d_D)
    want = mma.tf32_round(A).astype(np.float64) @ mma.tf32_round(B).astype(np.float64) + C
    assert rel_error(d_D.copy_to_host(), want) < 1e-6


@cuda.jit
def _mma_f16_kernel(A, B, C, D):
    lane = cuda.threadIdx.x
    g, q = lane >> 2, lane & 3
    c = 2 * q
    d = mma.mma_f16(
        mma.pack_half2(A[g, c], A[g, c + 1]),
        mma.pack_half2(A[g + 8, c], A[g + 8, c + 1]),
        mma.pack_half2(A[g, c + 8], A[g, c + 9]),
        mma.pack_half2(A[g + 8, c + 8], A[g + 8, c + 9]),
        mma.pack_half2(B[c, g], B[c + 1, g]),
        mma.pack_half2(B[c + 8, g], B[c + 9, g]),
        C[g, c],
        C[g, c + 1],
        C[g + 8, c],
        C[g + 8, c + 1],
    )
    D[g, c], D[g, c + 1], D[g + 8, c], D[g + 8, c + 1] = d


def test_mma_f16_fragment_map(rng):
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((16, 16), (16, 8), (16, 8)))
    d_D = cuda.to_device(np.full((16, 8), np.nan, np.float32))
    _mma_f16_kernel[1, 32](cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), d_D)
    h = np.float16
    want = A.astype(h).astype(np.float64) @ B.astype(h).astype(np.float64) + C
    assert rel_error(d_D.copy_to_host(), want) < 1e-6


@cuda.jit
def _quad_kernel(words, x, out, packed):
    """Lane l publishes words 4 l .. 4 l + 3 and receives its quad's transpose; lane l also packs
    ``x[l]`` and ``x[l] + 1`` as FP16 and as BF16 (low half first)."""
    lane = cuda.threadIdx.x
    r = mma.quad_transpose(
        words[4 * lane], words[4 * lane + 1], words[4 * lane + 2], words[4 * lane + 3]
    )
    for i in range(4):
        out[lane, i] = r[i]
    packed[lane, 0] = mma.pack_half2(x[lane], x[lane] + 1)
    packed[lane, 1] = mma.pack_bf16x2(x[lane], x[lane] + 1)


def test_quad_transpose_and_packs(rng):
    """``quad_transpose``: lane ``4g + q`` gets word ``q`` of lanes ``4g .. 4g + 3``, in lane order
    (what the 16-byte C stores of stages 20 and 24 rely on); ``pack_half2`` / ``pack_bf16x2``
    round to FP16 / BF16 (nearest even) with the first value in the low half."""
    words = np.arange(128, dtype=np.int32) * 7 + 3
    x = rng.standard_normal(32).astype(np.float32)
    d_out = cuda.to_device(np.zeros((32, 4), np.int32))
    d_packed = cuda.to_device(np.zeros((32, 2), np.int32))
    _quad_kernel[1, 32](cuda.to_device(words), cuda.to_device(x), d_out, d_packed)
    got = d_out.copy_to_host()
    for lane in range(32):
        base, q = lane & ~3, lane & 3
        want = [words[4 * (base + p) + q] for p in range(4)]
        np.testing.assert_array_equal(got[lane], want, err_msg=f"lane {lane}")
    packed = d_packed.copy_to_host()
    pair = np.stack([x, x + np.float32(1)], axis=1)
    np.testing.assert_array_equal(packed[:, 0], pair.astype(np.float16).view(np.int32)[:, 0])
    bf = pair.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(packed[:, 1].view(np.uint32), bf[:, 0] | (bf[:, 1] << 16))


@cuda.jit
def _ldmatrix_kernel(A, out):
    """A 16x8 K-major tile in SMEM; lane l gives row l % 16 at k (l // 16) * 4; the four results
    must be the lane's TF32 A fragment (bit patterns)."""
    tile = cuda.shared.array((16, 12), float32)  # pitch 12: rows 16-byte aligned
    lane = cuda.threadIdx.x
    for i in range(4):
        e = lane * 4 + i
        tile[e // 8, e % 8] = A[e // 8, e % 8]
    cuda.syncthreads()
    r = mma.ldmatrix_x4(tile, lane & 15, (lane >> 4) * 4)
    for i in range(4):
        out[lane, i] = r[i]


def test_ldmatrix_x4_gives_the_tf32_a_fragment(rng):
    A = rng.standard_normal((16, 8)).astype(np.float32)
    d_out = cuda.to_device(np.zeros((32, 4), np.int32))
    _ldmatrix_kernel[1, 32](cuda.to_device(A), d_out)
    got = d_out.copy_to_host().view(np.float32)
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        want = [A[g, q], A[g + 8, q], A[g, q + 4], A[g + 8, q + 4]]
        np.testing.assert_array_equal(got[lane], np.array(want, np.float32), err_msg=f"{lane}")


@cuda.jit
def _ldmatrix_trans_kernel(B, out):
    """A 16x8 N-major FP16 tile (B[k, n]); lanes 0-15 give row k = lane; the two results must be
    the lane's FP16 B fragment: (B[2q, g], B[2q+1, g]) and (B[2q+8, g], B[2q+9, g])."""
    tile = cuda.shared.array((16, 8), float16)
    lane = cuda.threadIdx.x
    for i in range(4):
        e = lane * 4 + i
        tile[e // 8, e % 8] = B[e // 8, e % 8]
    cuda.syncthreads()
    r = mma.ldmatrix_x2_trans(tile, lane & 15, 0)
    out[lane, 0] = r[0]
    out[lane, 1] = r[1]


@cuda.jit
def _ldmatrix_x4_trans_kernel(B, out):
    """A 16x16 N-major FP16 tile (B[k, n]); lane l gives row k = l % 16 at n = (l // 16) * 8:
    the four results must be the FP16 B fragments of columns 0-7, then 8-15."""
    tile = cuda.shared.array((16, 16), float16)
    lane = cuda.threadIdx.x
    for i in range(8):
        e = lane * 8 + i
        tile[e // 16, e % 16] = B[e // 16, e % 16]
    cuda.syncthreads()
    r = mma.ldmatrix_x4_trans(tile, lane & 15, (lane >> 4) * 8)
    for i in range(4):
        out[lane, i] = r[i]


def test_ldmatrix_x4_trans_gives_two_f16_b_fragments(rng):
    B = rng.standard_normal((16, 16)).astype(np.float16)
    d_out = cuda.to_device(np.zeros((32, 4), np.int32))
    _ldmatrix_x4_trans_kernel[1, 32](cuda.to_device(B), d_out)
    got = d_out.copy_to_host().view(np.float16).reshape(32, 8)
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        want = [B[k, n + g] for n in (0, 8) for k in (2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9)]
        np.testing.assert_array_equal(got[lane], np.array(want, np.float16), err_msg=f"{lane}")


def test_ldmatrix_x2_trans_gives_the_f16_b_fragment(rng):
    B = rng.standard_normal((16, 8)).astype(np.float16)
    d_out = cuda.to_device(np.zeros((32, 2), np.int32))
    _ldmatrix_trans_kernel[1, 32](cuda.to_device(B), d_out)
    got = d_out.copy_to_host().view(np.float16).reshape(32, 4)
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        want = [B[2 * q, g], B[2 * q + 1, g], B[2 * q + 8, g], B[2 * q + 9, g]]
        np.testing.assert_array_equal(got[lane], np.array(want, np.float16), err_msg=f"{lane}")


@cuda.jit
def _split_kernel(x, big, small, rbig, rsmall, rounded):
    i = cuda.threadIdx.x
    big[i], small[i] = mma.split_tf32(x[i])
    rounded[i] = mma.round_tf32_bits(mma.to_tf32(x[i]))
    rbig[i], rsmall[i] = mma.split_tf32_bits(rounded[i])


class _FakeManager:
    """Stands in for the simulator's per-block ``BlockManager`` (what ``_warp_slot`` reads)."""

    _block_dim = (32, 1, 1)


def _run_warp(mgr, values, op):
    """Each of 32 threads (posing as one simulated block's warp of ``mgr``) calls
    ``mma._warp_op(values[lane], op)``; returns the 32 results."""
    block = type("Dim3", (), {"x": 0, "y": 0, "z": 0})()
    got = [None] * 32

    def lane(i):
        got[i] = mma._warp_op(values[i], op)

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(32)]
    for i, t in enumerate(threads):
        t._manager, t.blockIdx, t.thread_id = mgr, block, i
        t.start()
    for t in threads:
        t.join()
    return got


@pytest.mark.skipif(not mma.SIMULATOR, reason="the simulator's warp exchange")
def test_warp_exchange_state_dies_with_its_launch():
    """A launch whose block manager sits at a freed one's address must not get the old
    launch's results (CI read garbage from an ldmatrix test when the slots were keyed by
    ``id(manager)``). The slots live on the manager itself, so they die with it; the next
    manager runs at the freed address where CPython hands it out again (it usually does,
    not always: CI once saw no reuse in 10,000 allocations), else at another."""
    first = _FakeManager()
    assert _run_warp(first, list(range(32)), lambda v: [x + 1 for x in v]) == list(range(1, 33))
    assert first.__dict__.get("_numba_gemm_warp_slots"), "the slots must live on the manager"
    assert "_numba_gemm_warp_slots" not in vars(_FakeManager)  # not shared through the class
    address = id(first)
    del first
    held = []  # allocate until CPython hands out the freed address again, or give up
    while len(held) < 10_000:
        held.append(_FakeManager())
        if id(held[-1]) == address:
            break
    got = _run_warp(held[-1], list(range(100, 132)), lambda v: [-x for x in v])
    assert got == [-x for x in range(100, 132)]


def test_split_tf32_recovers_fp32(rng):
    x = rng.standard_normal(32).astype(np.float32)
    outs = [cuda.to_device(np.zeros(32, np.int32)) for _ in range(5)]
    _split_kernel[1, 32](cuda.to_device(x), *outs)
    big, small, rbig, rsmall, rounded = (o.copy_to_host().view(np.float32) for o in outs)
    np.testing.assert_array_equal(big, mma.tf32_round(x))
    np.testing.assert_array_equal(small, mma.tf32_round(x - big))
    np.testing.assert_array_equal(rounded, big)  # rounding an already-TF32 value: unchanged
    np.testing.assert_array_equal(rbig, big)
    assert np.all(rsmall == 0)

    def rel(y):
        return (np.abs(y - x.astype(np.float64)) / np.abs(x)).max()

    assert rel(big.astype(np.float64) + small) < 2.0**-20  # ~21 bits with the small part
    assert rel(big.astype(np.float64)) > 2.0**-20  # TF32's 11 bits alone are not enough


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tf32_mma_multistage", "tf32x3_mma", "hgemm_mma"])
def test_tensor_core_stage_default_tiles(name, rng):
    """The default (multi-warp, 3-buffer) configuration on a ragged shape crossing K tiles: the
    parametrized stage tests run these stages with one warp on the simulator."""
    stage = numba_gemm.get_stage(name)
    err, out = check_sgemm(stage, rng, 61, 67, 71)
    assert np.isfinite(out).all() and err <= stage.rtol, err


def test_3xtf32_is_fp32_accurate_and_tf32_is_not(rng):
    tf32 = numba_gemm.get_stage("tf32_mma_multistage").with_config(
        dict(BM=32, BN=32, BK=8, WM=32, WN=32, NBUF=2, MINB=1)
    )
    x3 = numba_gemm.get_stage("tf32x3_mma").with_config(dict(tf32.config))
    e1, _ = check_sgemm(tf32, rng, 20, 24, 16)
    e3, _ = check_sgemm(x3, rng, 20, 24, 16)
    assert 1e-5 < e1 < 5e-3 and e3 < 1e-6, (e1, e3)


def test_compute_argument_picks_the_arithmetic(rng):
    from helpers import randn

    a, b = randn(rng, (9, 8)), randn(rng, (8, 12))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    from numba_gemm import device

    # the top stages of each arithmetic: on wgmma where it runs (9.0; the simulator runs all),
    # the TMA-fed ones first (the simulator, with no tuning data, plans those)
    hopper = device.info().cc[:2] in ((9, 0), device.SIMULATED_CC)
    if hopper:
        tf32, x3 = ("tf32_tma_rs", "tf32_wgmma"), ("tf32x3_tma", "tf32x3_wgmma")
    else:
        tf32, x3 = ("tf32_mma_multistage",), ("tf32x3_mma",)
    assert numba_gemm.explain(d_a, d_b).stage.precision == "fp32"
    assert numba_gemm.explain(d_a, d_b, compute="tf32").stage.name in tf32
    assert numba_gemm.explain(d_a, d_b, compute="3xtf32").stage.name in x3
    assert numba_gemm.explain(d_a, d_b, stage="tf32_mma").stage.precision == "tf32"
    with pytest.raises(ValueError, match="compute must be one of"):
        numba_gemm.sgemm(d_a, d_b, compute="bf16")
    with pytest.raises(ValueError, match="computes 'fp32', not compute='tf32'"):
        numba_gemm.sgemm(d_a, d_b, stage="naive", compute="tf32")
    d_a3 = cuda.to_device(np.stack([a, a]))
    if hopper:  # the wgmma stages take batches and every layout (test_wgmma)
        assert numba_gemm.explain(d_a3, d_b, compute="tf32").geometry.batch == 2
    else:  # the mma.sync ones the teaching form only
        with pytest.raises(ValueError, match="teaching form"):
            numba_gemm.sgemm(d_a3, d_b, compute="tf32")


F16_SIM = dict(BM=32, BN=32, BK=16, WM=32, WN=32, NBUF=2, MINB=1)


@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
def test_hgemm_output_dtypes(out_dtype, rng):
    """FP32 output: the FP32 sums of FP16 products (exact in FP32), so ~1e-7 off float64; FP16
    output: the same rounded once to FP16 (~2^-11 relative). alpha and beta apply in FP32."""
    stage = numba_gemm.get_stage("hgemm_mma").with_config(F16_SIM)
    err, out = check_sgemm(stage, rng, 21, 24, 40, alpha=0.5, beta=-1.5, out_dtype=out_dtype)
    assert out.dtype == out_dtype
    assert err < (1e-6 if out_dtype == np.float32 else 2e-3), err
    a = cuda.to_device(rng.standard_normal((5, 16)).astype(np.float16))
    b = cuda.to_device(rng.standard_normal((16, 8)).astype(np.float16))
    name = "float16" if out_dtype == np.float16 else "float32"
    c = numba_gemm.hgemm(a, b, out_dtype=name, stage=stage)
    assert c.dtype == out_dtype and c.shape == (5, 8)
    want = a.copy_to_host().astype(np.float64) @ b.copy_to_host().astype(np.float64)
    assert rel_error(c.copy_to_host(), want) < 2e-3


def test_hgemm_c_off_its_alignment(rng):
    """A C one float off its allocation (rows not 16-byte aligned): a stage with only pair
    stores of C (``hgemm_mma``) is refused by name, with nothing written; the automatic plan
    runs a stage's element stores (the sim models the GPU's misaligned-store fault)."""
    a = cuda.to_device(rng.standard_normal((8, 16)).astype(np.float16))
    b = cuda.to_device(rng.standard_normal((16, 8)).astype(np.float16))
    buf = cuda.to_device(np.full(65, 7.0, np.float32))
    c = buf[1:].reshape(8, 8)
    with pytest.raises(ValueError, match="column pairs together: out's rows must be 16-byte"):
        numba_gemm.hgemm(a, b, out=c, stage="hgemm_mma")
    assert (buf.copy_to_host() == 7.0).all()
    numba_gemm.hgemm(a, b, out=c)
    want = a.copy_to_host().astype(np.float64) @ b.copy_to_host().astype(np.float64)
    assert rel_error(c.copy_to_host(), want) < 1e-6


def test_hgemm_rejects_bad_input(rng):
    h = np.float16
    a = cuda.to_device(rng.standard_normal((8, 16)).astype(h))
    b = cuda.to_device(rng.standard_normal((16, 8)).astype(h))
    c = np.full((8, 8), 7.0, np.float32)
    d_c = cuda.to_device(c)
    cases = [
        (TypeError, "a must be float16", dict(a=cuda.to_device(np.ones((8, 16), np.float32)))),
        (ValueError, "inner dimensions differ", dict(b=cuda.to_device(np.ones((8, 8), h)))),
        (ValueError, r"out must be \(2, 8, 8\)", dict(a=cuda.to_device(np.ones((2, 8, 16), h)))),
        (ValueError, "2-D or 3-D", dict(a=cuda.to_device(np.ones((1, 2, 8, 16), h)))),
        (ValueError, "2-D, C-contiguous or", dict(a=cuda.to_device(np.ones((8, 32), h))[:, :16])),
        (ValueError, "out_dtype must be .float32. or .float16.", dict(out_dtype="bfloat16")),
        (ValueError, "out is float32 but out_dtype", dict(out=d_c, out_dtype="float16")),
        (
            ValueError,
            r"C-contiguous \(8, 8\)",
            dict(out=cuda.to_device(np.ones((8, 9), np.float32))),
        ),
        (
            TypeError,
            "out must be float32 or float16",
            dict(out=cuda.to_device(np.ones((8, 8), np.float64))),
        ),
        (ValueError, "computes 'fp32', not compute='fp16'", dict(stage="naive")),
        (ValueError, "out overlaps a", dict(out=a.view(np.float32))),
        (
            ValueError,
            "K == 0",
            dict(a=cuda.to_device(np.ones((8, 0), h)), b=cuda.to_device(np.ones((0, 8), h))),
        ),
    ]
    for error, match, kw in cases:
        args = dict(a=a, b=b, out=d_c) | kw
        with pytest.raises(error, match=match):
            numba_gemm.hgemm(args.pop("a"), args.pop("b"), **args)
    np.testing.assert_array_equal(d_c.copy_to_host(), c)  # nothing was written
    with pytest.raises(ValueError, match="takes float16 operands: call numba_gemm.hgemm"):
        numba_gemm.sgemm(
            cuda.to_device(np.ones((8, 16), np.float32)),
            cuda.to_device(np.ones((16, 8), np.float32)),
            stage="hgemm_mma",
        )
