"""Hopper warpgroup MMA (``numba_gemm.ptx.wgmma``): descriptors, SMEM core-matrix layouts,
fragments.

The kernels here lay their operands out in SMEM with the PTX ISA's no-swizzle layout written out
in the test (not through the module's helpers), in two arrangements (core matrices neighbouring
along K, or along M/N), and read the accumulators back through the D fragment map. They run on
the simulator (the plain-Python model) and, unchanged, on an H100/H200 (the real instruction):
a descriptor, layout or fragment map that the model gets wrong fails on the GPU, one that a
kernel gets wrong fails on both.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import sim_sized
from numba import cuda, float32
from numba.core.types import float16
from test_layouts import assert_close, ref, stored, tr

import numba_gemm
from numba_gemm import device, get_stage, plan_for
from numba_gemm.ptx import mma, wgmma
from numba_gemm.tools.reference import rel_error


def _needs_hopper():
    if not device.SIMULATOR and device.info().cc != (9, 0):
        pytest.skip("wgmma needs compute capability 9.0 (sm_90a)")


def test_descriptor_round_trip_and_limits():
    d = wgmma.encode_desc(0x1230, 128, 4096)
    assert d == (0x123 | 8 << 16 | 256 << 32)
    assert wgmma.decode_desc(d) == (0x1230, 128, 4096, 0)
    assert wgmma.decode_desc(d + (256 >> 4)) == (0x1330, 128, 4096, 0)  # moving the start
    assert wgmma.decode_desc(d | wgmma.SWIZZLE_128B) == (0x1230, 128, 4096, 128)
    assert wgmma.encode_desc(0x1230, 128, 4096, 128) == d | wgmma.SWIZZLE_128B
    for bad in ((8, 128, 128), (0, 100, 128), (0, 128, 1 << 18), (-16, 0, 0)):
        with pytest.raises(ValueError, match="multiple of 16"):
            wgmma.encode_desc(*bad)
    with pytest.raises(ValueError, match="swizzle"):
        wgmma.encode_desc(0, 16, 16, 64)
    with pytest.raises(ValueError, match="modelled"):
        wgmma.decode_desc(d | 2 << 62)  # the 64-byte swizzle


def test_operand_offsets_follow_core_matrices():
    # K-major FP16: element (r, k) sits in core matrix (r // 8, k // 8), row r % 8, byte 2 (k % 8)
    off = wgmma.operand_offsets(wgmma.encode_desc(256, 128, 1024), 16, 16, 2, mn_major=False)
    assert off[0, 0] == 256 and off[0, 1] == 258 and off[1, 0] == 256 + 16
    assert off[0, 8] == 256 + 128 and off[8, 0] == 256 + 1024 and off[9, 9] == 256 + 1024 + 128 + 18
    # MN-major FP16: element (n, k) at byte 2 (n % 8) of core row k % 8
    off = wgmma.operand_offsets(wgmma.encode_desc(0, 512, 128), 16, 16, 2, mn_major=True)
    assert off[1, 0] == 2 and off[0, 1] == 16 and off[8, 0] == 128 and off[0, 8] == 512
    # TF32 (4-byte elements): four per 16-byte core row
    off = wgmma.operand_offsets(wgmma.encode_desc(0, 128, 256), 8, 8, 4, mn_major=False)
    assert off[0, 3] == 12 and off[0, 4] == 128 and off[1, 0] == 16


def test_swizzle_128b_permutes_chunks_within_rows():
    rows = np.arange(16)[:, None] * 128 + np.arange(8)[None, :] * 16  # 16 rows x 8 chunks
    sw = wgmma.swizzle_128b(rows)
    assert (sw // 128 == rows // 128).all()  # a chunk stays in its row
    assert ((sw % 128) // 16 == np.arange(8)[None, :] ^ (np.arange(16)[:, None] % 8)).all()
    # K-major through a descriptor: element (r, k) of FP16 at row r, chunk (k // 8) ^ (r % 8)
    off = wgmma.operand_offsets(wgmma.encode_desc(0, 16, 1024, 128), 16, 16, 2, mn_major=False)
    assert off[3, 9] == 3 * 128 + (1 ^ 3) * 16 + 2 and off[9, 0] == 1024 + 128 + 16


def test_owned_covers_d_once():
    for n in (8, 64, 256):
        seen = np.zeros((64, n), int)
        for warp in range(4):
            for lane in range(32):
                r, c = wgmma.owned(warp, lane, n)
                assert len(r) == n // 2
                np.add.at(seen, (r, c), 1)
        assert (seen == 1).all()


# --- one product per launch, on the simulator and on the GPU ---------------------------------


@cuda.jit(device=True)
def _operands_ready(tid):
    """Fence this thread's SMEM stores for the tensor cores, wait for the block; return the
    lane's first D row and column ``(16 w + g, 2 q)``."""
    wgmma.fence_proxy_async()
    cuda.syncthreads()
    lane = tid % 32
    return 16 * (tid // 32) + (lane >> 2), 2 * (lane & 3)


@cuda.jit(device=True)
def _write_d(D, acc, r, c, frags):
    """The D fragment map, written out: ``acc[4 i .. 4 i + 3]`` of lane (g, q) of warp w are
    ``D[r, 8 i + c : + 2]`` and ``D[r + 8, 8 i + c : + 2]`` (``r = 16 w + g``, ``c = 2 q``)."""
    for i in range(frags):
        D[r, 8 * i + c], D[r, 8 * i + c + 1] = acc[4 * i], acc[4 * i + 1]
        D[r + 8, 8 * i + c], D[r + 8, 8 * i + c + 1] = acc[4 * i + 2], acc[4 * i + 3]


#: Arrangements of core matrices: ``"k"``: neighbours along K adjacent (``lbo`` = 128 bytes),
#: ``"mn"``: neighbours along M/N adjacent (``sbo`` = 128 bytes).
ARRANGEMENTS = ("k", "mn")


def _offsets(rows, k_elems, itemsize, arrangement):
    """(lbo, sbo) for an operand of ``rows`` (M or N) x ``k_elems``, core matrices adjacent along
    the arrangement's dimension (no padding)."""
    k_cores = k_elems // (16 // itemsize)
    if arrangement == "k":
        return 128, 128 * k_cores
    return 128 * (rows // 8), 128


@functools.cache
def _f16_kernel(n, trans_b, a_lbo, a_sbo, b_lbo, b_sbo):
    a_elems, b_elems, half = 64 * 16, n * 16, n // 2
    a_rows, b_rows = a_elems // 8, b_elems // 8

    @cuda.jit
    def kernel(A, B, C, D, scale_d):
        # SMEM as rows of 16 bytes (8 halves): element e of the buffer is [e // 8, e % 8]
        As = cuda.shared.array((a_rows, 8), float16)
        Bs = cuda.shared.array((b_rows, 8), float16)
        tid = cuda.threadIdx.x
        for i in range(tid, a_elems, 128):  # A[m, k], K-major
            m, k = i // 16, i % 16
            e = ((m // 8) * a_sbo + (m % 8) * 16 + (k // 8) * a_lbo + (k % 8) * 2) // 2
            As[e // 8, e % 8] = A[m, k]
        for i in range(tid, b_elems, 128):  # B[k, j]
            k, j = i // n, i % n
            if trans_b:  # MN-major: N along each 16-byte core row, K along the 8 rows
                e = ((j // 8) * b_sbo + (j % 8) * 2 + (k // 8) * b_lbo + (k % 8) * 16) // 2
            else:  # K-major
                e = ((j // 8) * b_sbo + (j % 8) * 16 + (k // 8) * b_lbo + (k % 8) * 2) // 2
            Bs[e // 8, e % 8] = B[k, j]
        r, c = _operands_ready(tid)
        acc = cuda.local.array(half, float32)
        for i in range(n // 8):
            acc[4 * i], acc[4 * i + 1] = C[r, 8 * i + c], C[r, 8 * i + c + 1]
            acc[4 * i + 2], acc[4 * i + 3] = C[r + 8, 8 * i + c], C[r + 8, 8 * i + c + 1]
        wgmma.fence()
        wgmma.mma_f16(
            acc,
            n,
            As,
            wgmma.smem_desc(As, 0, 0, a_lbo, a_sbo),
            Bs,
            wgmma.smem_desc(Bs, 0, 0, b_lbo, b_sbo),
            scale_d,
            trans_b,
        )
        wgmma.commit()
        wgmma.wait(0, acc, n)
        _write_d(D, acc, r, c, n // 8)

    return kernel


@pytest.mark.parametrize("n", [8, 64, 256])
@pytest.mark.parametrize("trans_b", [1, 0], ids=["B-mn-major", "B-k-major"])
@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
@pytest.mark.parametrize("scale_d", [1, 0], ids=["accumulate", "overwrite"])
def test_mma_f16_product(n, trans_b, arrangement, scale_d, rng):
    _needs_hopper()
    if device.SIMULATOR and n == 256 and (arrangement, scale_d, trans_b) != ("mn", 1, 1):
        pytest.skip("simulator: one N = 256 case is enough")
    a_lbo, a_sbo = _offsets(64, 16, 2, arrangement)
    b_lbo, b_sbo = _offsets(n, 16, 2, arrangement)
    A = rng.standard_normal((64, 16)).astype(np.float16)
    B = rng.standard_normal((16, n)).astype(np.float16)
    C = rng.standard_normal((64, n)).astype(np.float32)
    d_D = cuda.to_device(np.full((64, n), np.nan, np.float32))
    kernel = _f16_kernel(n, trans_b, a_lbo, a_sbo, b_lbo, b_sbo)
    kernel[1, 128](cuda.to_device(A), cuda.to_device(B), cuda.to_device(C), d_D, np.int32(scale_d))
    want = A.astype(np.float64) @ B.astype(np.float64) + (C if scale_d else 0)
    assert rel_error(d_D.copy_to_host(), want) < 1e-6


@functools.cache
def _f16_swizzled_kernel(n, step):
    """A (64 x 64 halves, K-major) and B (64 x n, MN-major) in the 128-byte swizzle; one product
    of k-slice ``step`` (16 deep): A's descriptor 32 bytes along its rows, B's 16 rows down."""
    a_rows, b_rows, half = 64 * 64 // 8, 64 * n // 8, n // 2
    b_lbo = 64 * 128  # 64-column blocks of B: 64 rows (k) of 128 bytes

    @cuda.jit
    def kernel(A, B, D):
        As = cuda.shared.array((a_rows, 8), float16, alignment=_ALIGN)
        Bs = cuda.shared.array((b_rows, 8), float16, alignment=_ALIGN)
        tid = cuda.threadIdx.x
        for i in range(tid, 64 * 64, 128):  # A[m, k]: row m, byte 2 k, swizzled
            m, k = i // 64, i % 64
            e = wgmma_swizzle(m * 128 + k * 2) // 2
            As[e // 8, e % 8] = A[m, k]
        for i in range(tid, 64 * n, 128):  # B[k, j]: row k of block j // 64, byte 2 (j % 64)
            k, j = i // n, i % n
            e = wgmma_swizzle((j // 64) * b_lbo + k * 128 + (j % 64) * 2) // 2
            Bs[e // 8, e % 8] = B[k, j]
        r, c = _operands_ready(tid)
        acc = cuda.local.array(half, float32)
        da = wgmma.smem_desc(As, 0, 0, 16, 1024) | wgmma.SWIZZLE_128B
        db = wgmma.smem_desc(Bs, 0, 0, b_lbo, 1024) | wgmma.SWIZZLE_128B
        wgmma.fence()
        wgmma.mma_f16(acc, n, As, da + step * 2, Bs, db + step * 128, 0, 1)
        wgmma.commit()
        wgmma.wait(0, acc, n)
        _write_d(D, acc, r, c, n // 8)

    return kernel


_ALIGN = None if device.SIMULATOR else 1024


@cuda.jit(device=True)
def wgmma_swizzle(byte):
    """The 128-byte swizzle, written out (bits 4-6 ^= bits 7-9)."""
    return byte ^ (((byte >> 7) & 7) << 4)


@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("step", [0, 3])
def test_mma_f16_swizzled_product(n, step, rng):
    _needs_hopper()
    A = rng.standard_normal((64, 64)).astype(np.float16)
    B = rng.standard_normal((64, n)).astype(np.float16)
    d_D = cuda.to_device(np.full((64, n), np.nan, np.float32))
    _f16_swizzled_kernel(n, step)[1, 128](cuda.to_device(A), cuda.to_device(B), d_D)
    k = slice(16 * step, 16 * step + 16)
    want = A[:, k].astype(np.float64) @ B[k].astype(np.float64)
    assert rel_error(d_D.copy_to_host(), want) < 1e-6


@functools.cache
def _tf32_rs_kernel(n, b_lbo, b_sbo):
    b_elems, half = n * 8, n // 2
    b_rows = b_elems // 4

    @cuda.jit
    def kernel(A, B, D):
        Bs = cuda.shared.array((b_rows, 4), float32)  # rows of 16 bytes
        tid = cuda.threadIdx.x
        for i in range(tid, b_elems, 128):  # B[k, j], K-major: 4 K per 16-byte core row
            k, j = i // n, i % n
            e = ((j // 8) * b_sbo + (j % 8) * 16 + (k // 4) * b_lbo + (k % 4) * 4) // 4
            Bs[e // 4, e % 4] = B[k, j]
        r, c = _operands_ready(tid)
        q = c // 2  # the A fragment: rows r, r + 8, columns q, q + 4
        acc = cuda.local.array(half, float32)
        wgmma.fence()
        wgmma.mma_tf32_rs(
            acc,
            n,
            mma.to_tf32(A[r, q]),
            mma.to_tf32(A[r + 8, q]),
            mma.to_tf32(A[r, q + 4]),
            mma.to_tf32(A[r + 8, q + 4]),
            Bs,
            wgmma.smem_desc(Bs, 0, 0, b_lbo, b_sbo),
            0,
        )
        wgmma.commit()
        wgmma.wait(0, acc, n)
        _write_d(D, acc, r, c, n // 8)

    return kernel


@pytest.mark.parametrize("n", [8, 128])
@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_mma_tf32_register_a_product(n, arrangement, rng):
    _needs_hopper()
    b_lbo, b_sbo = _offsets(n, 8, 4, arrangement)
    A = rng.standard_normal((64, 8)).astype(np.float32)
    # B already TF32: the tensor cores' own reduction of an FP32 SMEM operand is not under test
    B = mma.tf32_round(rng.standard_normal((8, n)).astype(np.float32))
    d_D = cuda.to_device(np.full((64, n), np.nan, np.float32))
    _tf32_rs_kernel(n, b_lbo, b_sbo)[1, 128](cuda.to_device(A), cuda.to_device(B), d_D)
    want = mma.tf32_round(A).astype(np.float64) @ B.astype(np.float64)
    assert rel_error(d_D.copy_to_host(), want) < 1e-6


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(BM=96), "BM must be 64, 128, 192 or 256"),
        (dict(BN=96), "BN in 64..256"),
        (dict(BK=32), "multiples of 64"),
        (dict(NBUF=2), "NBUF"),
        (dict(BM=256, BN=256), "accumulators per thread"),
        (dict(BK=128, NBUF=4), "SMEM"),
        (dict(WM=64), "config keys must be"),
    ],
)
def test_hgemm_wgmma_configs_rejected(change, message):
    st = get_stage("hgemm_wgmma")
    with pytest.raises(ValueError, match=message):
        st.with_config(dict(st.config, **change))
    assert st.space and all(st.with_config(c).config == c for c in st.space)
    assert st.config in st.space


def test_wgmma_stages_run_on_hopper_only(fake_gpu):
    st = get_stage("hgemm_wgmma")
    assert st.runs_on((9, 0)) and st.runs_on(device.SIMULATED_CC)
    assert not st.runs_on((8, 0)) and not st.runs_on((10, 0)) and not st.runs_on((9, 1))
    assert get_stage("hgemm_mma").runs_on((10, 0))
    wgmma = {"fp16": "hgemm_wgmma", "tf32": "tf32_wgmma", "3xtf32": "tf32x3_wgmma"}
    mma = {"fp16": "hgemm_mma", "tf32": "tf32_mma_multistage", "3xtf32": "tf32x3_mma"}
    for cc in ((8, 0), (10, 0)):  # elsewhere each arithmetic falls back to its mma.sync stage...
        fake_gpu(f"Fake sm_{cc[0]}{cc[1]}", cc)
        for compute, name in wgmma.items():
            assert plan_for(256, 256, 256, compute=compute).stage.name == mma[compute]
            with pytest.raises(ValueError, match=r"9\.0 exactly"):  # ...and refuses wgmma's
                plan_for(256, 256, 256, stage=name, compute=compute)
    fake_gpu("Fake H100", (9, 0))
    # each arithmetic's default without tuning data: its TMA-fed stage for row-major B
    auto = {"fp16": "hgemm_tma", "tf32": "tf32_tma_rs", "3xtf32": "tf32x3_tma"}
    for compute, name in auto.items():
        assert plan_for(256, 256, 256, compute=compute).stage.name == name


@pytest.mark.parametrize(
    "name, change, message",
    [
        ("tf32_wgmma", dict(BN=96), "BN must be 64, 128, 192 or 256"),
        ("tf32_wgmma", dict(BM=320), "BM in 64..256"),
        ("tf32_wgmma", dict(BK=16), "multiple of 32"),
        ("tf32_wgmma", dict(NBUF=2), "NBUF"),
        ("tf32_wgmma", dict(BM=256, BN=256), "accumulators per thread"),
        ("tf32_wgmma", dict(BK=64), "SMEM"),
        ("tf32x3_wgmma", dict(BM=256), "accumulators per thread"),  # two sets of BM / 2
        ("tf32x3_wgmma", dict(WM=64), "config keys must be"),
    ],
)
def test_tf32_wgmma_configs_rejected(name, change, message):
    st = get_stage(name)
    with pytest.raises(ValueError, match=message):
        st.with_config(dict(st.config, **change))
    assert st.space and all(st.with_config(c).config == c for c in st.space)
    assert st.config in st.space


# --- the TF32 wgmma stages in every layout and batch --------------------------------------------

#: (stage, layout, (M, N, K)): ragged shapes run the scalar variant (4-byte copies), shapes of
#: 16-byte rows the vector one; A stored transposed (TN, TT) is copied element by element into
#: the swizzled K-major tile, B stored transposed (NT, TT) lands as ``Bs[n, k]``.
TF32_LAYOUT_CASES = [
    ("tf32_wgmma", "NT", (70, 67, 45)),
    ("tf32_wgmma", "NT", (64, 72, 96)),
    ("tf32_wgmma", "TN", (70, 67, 45)),
    ("tf32_wgmma", "TT", (64, 72, 96)),
    ("tf32x3_wgmma", "TN", (64, 72, 96)),
]


@pytest.mark.parametrize("name, layout, shape", TF32_LAYOUT_CASES)
def test_tf32_wgmma_layouts(name, layout, shape, rng):
    _needs_hopper()
    M, N, K = shape
    st = sim_sized(get_stage(name))
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    da, db = stored(a, layout[0] == "T"), stored(b, layout[1] == "T")
    plan = numba_gemm.explain(da, db, stage=st)
    aligned = K % 4 == 0 and N % 4 == 0 and M % 4 == 0
    assert (plan.geometry.layout, plan.variant) == (layout, "vector" if aligned else "scalar")
    c0 = rng.standard_normal((M, N), np.float32)
    d_c = cuda.to_device(c0)
    numba_gemm.sgemm(da, db, stage=st, out=d_c, alpha=0.5, beta=-2.0)
    assert_close(d_c.copy_to_host(), ref(a, b, c0, 0.5, -2.0), rtol=st.rtol)


def test_tf32_wgmma_split_k(rng):
    """Split-K on the wgmma stages (``x @ W.T``): three K slices of a ragged product (the last
    one short), the partial sums through the workspace into C with alpha and beta, twice (the
    tile counters are left at 0 for the next call). 3xTF32 runs the same kernel."""
    _needs_hopper()
    layout = "NT"
    st = sim_sized(get_stage("tf32_wgmma"))
    st = st.with_config(dict(st.config, SPLITK=3))
    M, N, K = 40, 37, 150  # one tile, three slices
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    da, db = stored(a, layout[0] == "T"), stored(b, layout[1] == "T")
    assert numba_gemm.explain(da, db, stage=st).split_k == 3
    c0 = rng.standard_normal((M, N), np.float32)
    for _ in range(2):
        d_c = cuda.to_device(c0)
        numba_gemm.sgemm(da, db, stage=st, out=d_c, alpha=0.5, beta=-1.0)
        assert_close(d_c.copy_to_host(), ref(a, b, c0, 0.5, -1.0), rtol=st.rtol)


@pytest.mark.parametrize("layout", ["TN", "TT"])
def test_tf32_with_a_transposed_copies_a_row_major(layout, rng):
    """The automatic plan of a TF32 product with A stored transposed copies A row-major (and, for
    ragged K or N, pads what plan.staging pads), then runs the N? kernel: its own element-wise
    transposing copies are copy-bound (design.md §5.1). alpha and beta; C poisoned where not
    read."""
    _needs_hopper()
    # on a GPU a product large enough, and aligned, that the tensor cores win (at 37 x 21 x 13,
    # or with ragged rows priced at the scalar variants' speed, the tuning data pick FP32, which
    # compute="tf32" allows)
    M, N, K = (37, 21, 13) if device.SIMULATOR else (1000, 896, 1000)
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    da, db = stored(a, True), stored(b, layout[1] == "T")
    plan = numba_gemm.explain(da, db, compute="tf32")
    assert plan.geometry.layout == layout and plan.staging.at and plan.staging.a
    # the TMA-fed stage of the inner layout (the simulator, with no tuning data, plans it; a
    # GPU prices it against stage 18)
    inner = ("tf32_tma_rs" if layout[1] == "N" else "tf32_tma", "tf32_wgmma")
    assert plan.inner.geometry.layout == "N" + layout[1] and plan.inner.stage.name in inner
    assert "A stored transposed" in plan.reason
    c0 = rng.standard_normal((M, N), np.float32)
    d_c = cuda.to_device(c0)
    numba_gemm.sgemm(da, db, out=d_c, compute="tf32", alpha=0.5, beta=-1.0)
    assert_close(d_c.copy_to_host(), ref(a, b, c0, 0.5, -1.0), rtol=5e-3)


def test_tf32_wgmma_batch_broadcast(rng):
    """A batch of three ``x @ W.T`` with one W (batch stride 0), through ``matmul``."""
    _needs_hopper()
    st = sim_sized(get_stage("tf32_wgmma"))
    a, w = rng.standard_normal((3, 21, 40), np.float32), rng.standard_normal((18, 40), np.float32)
    out = numba_gemm.matmul(cuda.to_device(a), tr(cuda.to_device(w)), stage=st)
    assert out.shape == (3, 21, 18)
    assert_close(out.copy_to_host(), ref(a, w.T), rtol=st.rtol)


def test_tf32_served_in_every_layout_on_hopper_only(fake_gpu, rng):
    """compute="tf32"/"3xtf32" plan a wgmma stage for every layout and for batches on sm_90 (TF32
    with B stored transposed: the TMA-fed one); on
    sm_80, whose mma.sync stages take the teaching form only, they say so."""
    a, b = rng.standard_normal((96, 80), np.float32), rng.standard_normal((80, 72), np.float32)
    fake_gpu("Fake H100", (9, 0))
    for layout in ("NN", "NT", "TN", "TT"):
        da, db = stored(a, layout[0] == "T"), stored(b, layout[1] == "T")
        # B stored transposed (NT, and TT through a row-major copy of A): both operands
        # K-major, the TMA-fed TF32 stage; row-major B (NN, TN after the copy) from registers
        # (tf32_tma_rs) or SMEM (tf32_wgmma: at this one-tile shape the two are priced within
        # a few percent of each other, at about a microsecond); 3xTF32 likewise
        tf32 = ("tf32_tma",) if layout[1] == "T" else ("tf32_tma_rs", "tf32_wgmma")
        tf32x3 = ("tf32x3_wgmma",) if layout[1] == "T" else ("tf32x3_tma",)
        for compute, names in (("tf32", tf32), ("3xtf32", tf32x3)):
            plan = numba_gemm.explain(da, db, compute=compute)
            assert plan.stage.name in names and plan.geometry.layout == layout
    batch = cuda.to_device(rng.standard_normal((4, 96, 80), np.float32))
    plan = numba_gemm.explain(batch, cuda.to_device(b), compute="tf32")
    assert plan.stage.name == "tf32_wgmma" and plan.geometry.batch == 4
    fake_gpu("Fake A100", (8, 0))
    with pytest.raises(ValueError, match="mma.sync.*teaching form"):
        numba_gemm.explain(stored(a, False), stored(b, True), compute="tf32")


def test_tf32_allows_fp32_and_stages_unaligned_rows(fake_gpu):
    """compute="tf32" *allows* TF32 (as cuBLAS's FAST_TF32 does): with the committed H200 classes
    the plan takes the FP32 skinny_n stage for a matrix-vector product (bandwidth-bound: no
    tensor core helps), tf32_wgmma split along K for a few rows, the TMA-fed tf32_tma_rs for a
    large product, and for rows not 16-byte aligned the aligned TF32 plan between zero-padded
    copies (stage 18's scalar 4-byte copies run at a fifth of the speed; the TMA needs aligned
    rows)."""
    fake_gpu("NVIDIA H200", (9, 0))
    gemv = plan_for(4096, 1, 4096, compute="tf32")
    assert gemv.stage.name == "skinny_n" and gemv.stage.precision == "fp32"
    assert "auto: cheapest of" in gemv.reason
    few = plan_for(8, 4096, 4096, compute="tf32")  # the TF32 stage split along K
    assert few.stage.name == "tf32_wgmma" and few.split_k > 1
    big = plan_for(4096, 4096, 4096, compute="tf32")
    assert big.stage.name == "tf32_tma_rs" and big.staging is None
    ragged = plan_for(4095, 4095, 4095, compute="tf32")
    assert ragged.staging is not None and ragged.inner.stage.name == "tf32_tma_rs"
    assert ragged.inner.variant == "vector"
    assert plan_for(4096, 4096, 4096, compute="3xtf32").stage.name == "tf32x3_tma"


@pytest.mark.parametrize(
    "out_dtype",
    [
        pytest.param(
            np.float32,
            marks=pytest.mark.skipif(
                device.SIMULATOR, reason="GPU only: the simulator runs the same kernel with FP16 C"
            ),
        ),
        np.float16,
    ],
)
def test_hgemm_wgmma_b_transposed(out_dtype, rng):
    """``hgemm(x, W.T)``: B stored transposed is copied K-major like A and read without
    trans-b; FP16 C (and FP32 on a GPU), alpha and beta, ragged M."""
    _needs_hopper()
    st = sim_sized(get_stage("hgemm_wgmma"))
    M, N, K = 70, 72, 136
    a = rng.standard_normal((M, K)).astype(np.float16)
    w = rng.standard_normal((N, K)).astype(np.float16)
    c0 = rng.standard_normal((M, N)).astype(out_dtype)
    d_c = cuda.to_device(c0)
    b = tr(cuda.to_device(w))  # (K, N), the transpose of a C-contiguous (N, K)
    numba_gemm.hgemm(cuda.to_device(a), b, out=d_c, stage=st, alpha=0.5, beta=-1.0)
    want = 0.5 * (a.astype(np.float64) @ w.astype(np.float64).T) - c0.astype(np.float64)
    assert rel_error(d_c.copy_to_host().astype(np.float64), want) <= st.rtol


def test_hgemm_b_transposed_refused_where_no_stage_takes_it(rng):
    """The mma.sync FP16 stage takes row-major B only, and B with no unit stride is refused by
    ``hgemm`` with what it takes; nothing is written."""
    a = cuda.to_device(rng.standard_normal((16, 32)).astype(np.float16))
    w = cuda.to_device(rng.standard_normal((24, 32)).astype(np.float16))
    out = cuda.to_device(np.full((16, 24), np.nan, np.float32))
    with pytest.raises(ValueError, match="teaching form only.*one of 'hgemm_wgmma', 'hgemm_tma'$"):
        numba_gemm.hgemm(a, tr(w), out=out, stage="hgemm_mma")
    wide = cuda.to_device(rng.standard_normal((32, 48)).astype(np.float16))
    with pytest.raises(ValueError, match="transpose of a C-contiguous"):
        numba_gemm.hgemm(a, wide[:, ::2], out=out)
    assert np.isnan(out.copy_to_host()).all()
