"""The Tensor Memory Accelerator and mbarriers (``numba_gemm.ptx.tma``, ``launch.tensormap``).

The copy kernel here asks for one box through a tensor map and writes SMEM out byte for byte, so
the test compares the landed layout with the model's (:func:`tma.box_offsets`, the 128-byte
swizzle): on the simulator that checks the kernels' use of the model, on an H100/H200 the model
itself against the hardware. A GEMM whose maps carry a wrong swizzle must then give a wrong
product on both; a barrier protocol that never completes a phase must fail on the simulator
(on a GPU it would hang).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from numba import cuda, float32, int64

from numba_gemm import device
from numba_gemm.kernels import k20_hgemm_tma as k20
from numba_gemm.launch import tensormap
from numba_gemm.ptx import tma, wgmma
from numba_gemm.ptx.vecmem import tile_view
from numba_gemm.tools.reference import rel_error

#: The box of the copy test: 32 floats (128 bytes, one swizzled row) x 16 rows.
BOX = (32, 16)


def _needs_hopper():
    if not device.SIMULATOR and device.info().cc != (9, 0):
        pytest.skip("the TMA needs compute capability 9.0")


def _spec(**change):
    base = dict(dtype="float32", dims=(64, 40), strides=(256,), box=BOX, swizzle=128, address=0)
    return tma.TensorMapSpec(**dict(base, **change))


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(dtype="float64"), "dtype"),
        (dict(strides=(250,)), "multiple of 16"),
        (dict(strides=(128,)), "shorter than a row"),
        (dict(box=(32, 300)), "box dimension 1 of 300"),
        (dict(box=(64, 16)), "at most the 128-byte swizzle span"),
        (dict(box=(3, 16), swizzle=0), "multiple of 16"),
        (dict(address=8), "16-byte aligned"),
        (dict(swizzle=256), "swizzle 256"),
        (dict(dims=(64, 40, 2), strides=(256,)), "one stride fewer"),
    ],
)
def test_tensor_map_rules_name_the_field(change, message):
    """Every rule of ``cuTensorMapEncodeTiled`` is checked before the driver (or the simulator's
    record) sees the map, with a message naming the field."""
    with pytest.raises(ValueError, match=message):
        tensormap.encode(_spec(**change))


def test_record_round_trip_and_row_major_spec():
    spec = tensormap.matrix_spec("float16", (40, 64), 128, (64, 8))
    assert spec.dims == (64, 40) and spec.strides == (128,) and spec.box == (64, 8)
    assert tma.decode_record(tma.encode_record(spec)) == spec
    batch = tensormap.matrix_spec("float32", (3, 40, 64), 256, (32, 8), batch_stride=40 * 256)
    assert batch.dims == (64, 40, 3) and batch.box == (32, 8, 1)
    assert tma.decode_record(tma.encode_record(batch)) == batch
    with pytest.raises(ValueError, match="not a simulator tensor-map record"):
        tma.decode_record(np.zeros(16, np.int64))


def test_box_offsets_are_the_wgmma_swizzle():
    """The TMA's 128-byte swizzle is the one the wgmma descriptors read (``SWIZZLE_128B``)."""
    off = tma.box_offsets(_spec()).reshape(-1)
    linear = np.arange(off.size) * 4
    assert np.array_equal(off, wgmma.swizzle_128b(linear))
    assert np.array_equal(tma.box_offsets(_spec(swizzle=0)).reshape(-1), linear)
    assert sorted(off) == list(linear)  # a permutation: every byte lands once


def test_read_box_zero_fills_outside():
    x = np.arange(40 * 64, dtype=np.float32).reshape(40, 64)
    got = tma.read_box(_spec(), x, (48, 30))  # columns 48..79, rows 30..45
    assert got.shape == (16, 32)
    assert np.array_equal(got[:10, :16], x[30:40, 48:64])
    assert not got[10:].any() and not got[:, 16:].any()


@functools.cache
def _copy_kernel(chunks: int):
    align = None if device.SIMULATOR else 1024

    @cuda.jit
    def copy_box(X, T, out, c0, c1, nbytes):
        smem = cuda.shared.array(0, float32, alignment=align)
        tiles = tile_view(smem, 0, (chunks, 4))
        bars = cuda.shared.array(1, int64)
        tid = cuda.threadIdx.x
        if tid == 0:
            tma.mbar_init(bars, 0, 1)
            tma.mbar_fence_init()
        cuda.syncthreads()  # the barrier exists before anyone waits on it
        if tid == 0:
            tma.mbar_expect_tx(bars, 0, nbytes)
            tma.tma_load(tiles, 0, T, X, bars, 0, c0, c1)
        tma.mbar_wait(bars, 0, 0)  # the box has landed
        for i in range(tid, chunks * 4, cuda.blockDim.x):
            out[i] = smem[i]

    return copy_box


@pytest.mark.parametrize("coords", [(0, 0), (32, 8), (48, 30)], ids=["origin", "inner", "edge"])
@pytest.mark.parametrize("swizzle", [128, 0])
def test_tma_lands_the_box_as_modelled(coords, swizzle, rng):
    """One box through a tensor map: SMEM holds exactly the model's bytes (swizzled rows, zeros
    past the matrix's edge)."""
    _needs_hopper()
    x = rng.standard_normal((40, 64), dtype=np.float32)
    d_x = cuda.to_device(x)
    addr = 0 if device.SIMULATOR else d_x.device_ctypes_pointer.value
    spec = tensormap.matrix_spec("float32", x.shape, 256, BOX, addr, swizzle=swizzle)
    n = BOX[0] * BOX[1]
    out = cuda.to_device(np.full(n, np.nan, np.float32))
    _copy_kernel(n // 4)[1, 64, 0, 4 * n](
        d_x, tensormap.device_map(spec), out, coords[0], coords[1], spec.box_bytes
    )
    want = np.full(n, np.nan, np.float32)
    want[tma.box_offsets(spec).reshape(-1) // 4] = tma.read_box(spec, x, coords).reshape(-1)
    assert np.array_equal(out.copy_to_host(), want)


def test_gemm_with_a_wrong_swizzle_fails(rng):
    """``hgemm_tma``'s kernel given maps that land the tiles unswizzled (a valid map, the wrong
    one for its descriptors) computes a wrong product; with the right maps, the right one."""
    _needs_hopper()
    cfg = dict(BM=64, BN=64, BK=64, NBUF=2)
    kern = k20.make_kernel(tuple(sorted(cfg.items())), "NN")
    a = rng.standard_normal((64, 128)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    box_a, box_b = k20.boxes(cfg, "NN")
    d = k20.derived(cfg)

    def run(swizzle):
        def ptr(x):
            return 0 if device.SIMULATOR else x.device_ctypes_pointer.value

        ta = tensormap.matrix_spec("float16", a.shape, 256, box_a, ptr(d_a), swizzle=swizzle)
        tb = tensormap.matrix_spec("float16", b.shape, 128, box_b, ptr(d_b), swizzle=swizzle)
        c = cuda.to_device(np.full((64, 64), np.nan, np.float32))
        kern[(1, 1), d["NUM_THREADS"], 0, d["SMEM_BYTES"]](
            d_a,
            d_b,
            c,
            tensormap.device_map(ta),
            tensormap.device_map(tb),
            np.float32(1),
            np.float32(0),
        )
        return rel_error(c.copy_to_host(), want)

    assert run(128) <= 1e-2
    assert not run(0) <= 0.1  # NaN or far off, never close


@pytest.mark.skipif(not device.SIMULATOR, reason="on a GPU a phase that never completes hangs")
def test_a_phase_that_never_completes_fails(monkeypatch):
    """A barrier waiting for two arrivals that gets one: the simulator raises (a deadlock on the
    GPU); and an arrival past a phase's count is an error."""
    monkeypatch.setattr(tma, "SIM_DEADLOCK_S", 0.5)

    @cuda.jit
    def one_short(out):
        bars = cuda.shared.array(1, int64)
        if cuda.threadIdx.x == 0:
            tma.mbar_init(bars, 0, 2)
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            tma.mbar_arrive(bars, 0)
        tma.mbar_wait(bars, 0, 0)
        out[cuda.threadIdx.x] = 1

    with pytest.raises(RuntimeError, match="never completed"):
        one_short[1, 2](cuda.to_device(np.zeros(2, np.int32)))

    @cuda.jit
    def too_many(out):
        bars = cuda.shared.array(1, int64)
        if cuda.threadIdx.x == 0:
            tma.mbar_init(bars, 0, 1)
            tma.mbar_expect_tx(bars, 0, 64)  # the phase waits for 64 bytes: no flip yet
            tma.mbar_arrive(bars, 0)
        out[0] = 1

    with pytest.raises(RuntimeError, match="more arrivals than its count"):
        too_many[1, 1](cuda.to_device(np.zeros(1, np.int32)))


def test_unaligned_rows_never_reach_a_tma_stage(rng):
    """A TMA stage needs A's and B's rows 16-byte aligned (its tensor maps' strides): with K = 13
    the automatic TF32 plan of ``x @ W.T`` takes another stage (or copies the rows), and the TMA
    stage by name is refused before anything runs."""
    from helpers import transposed_on_device

    import numba_gemm

    a = rng.standard_normal((8, 13), np.float32)
    w = rng.standard_normal((13, 24), np.float32)
    d_a, d_w = cuda.to_device(a), transposed_on_device(w)
    plan = numba_gemm.explain(d_a, d_w, compute="tf32")
    assert plan.stage.tensor_maps is None or plan.staging is not None
    out = numba_gemm.sgemm(d_a, d_w, compute="tf32")
    assert rel_error(out.copy_to_host(), a.astype(np.float64) @ w) <= 5e-3
    with pytest.raises(ValueError, match="tensor maps, whose rows must be 16-byte aligned"):
        numba_gemm.sgemm(d_a, d_w, stage="tf32_tma", compute="tf32")


def test_rs_fragment_loads_are_bank_conflict_free():
    """Stage 22's choice of columns per lane (``k22.lane_chunk``): each half-warp's 64-bit
    fragment loads from a 128-byte-swizzled B box (rows k = q and k = q + 4) touch 16 different
    8-byte bank pairs, and the four warps of a warpgroup cover its 64 columns once each."""
    from numba_gemm.kernels import k22_tf32_tma_rs as k22

    for w in range(4):
        for half in (range(4), range(4, 8)):
            for dk in (0, 4):
                pairs = set()
                for g in half:
                    for q in range(4):
                        k, ch = q + dk, k22.lane_chunk(w, g)
                        byte = k * 128 + (ch ^ (k % 8)) * 16 + 8 * (g & 1)
                        pairs.add(byte // 8 % 16)
                assert len(pairs) == 16, (w, list(half), dk)
    cols = sorted(
        32 * (w >> 1) + 4 * k22.lane_chunk(w, g) + 2 * (g & 1) + i
        for w in range(4)
        for g in range(8)
        for i in (0, 1)
    )
    assert cols == list(range(64))


def test_setmaxnreg_stays_within_the_launch_allocation():
    """A block's registers never grow: the consumers' ``setmaxnreg.inc`` must fit what the launch
    gave one warp of each warpgroup, less the producer's (a BN = 256 tile asking for 112 per
    consumer thread of the 4 x 96 + 96 hung on an H200); and every configuration of the
    register-operand stages fits its accumulators and fragments in what its consumers get."""
    from numba_gemm.kernels import k22_tf32_tma_rs as k22

    for c in range(1, 5):
        launch = min(255, 65536 // ((c + 1) * 128)) // 8 * 8
        regs = k20.consumer_registers(c)
        assert regs % 8 == 0 and c * regs + k20.PRODUCER_REGS <= (c + 1) * launch, c
    assert [k20.consumer_registers(c) for c in range(1, 5)] == [240, 232, 152, 104]
    for mode in ("tf32", "3xtf32"):
        for cfg in k22.space(mode):
            d = k22.derived(cfg, mode)
            assert d["REGS"] <= d["CONSUMER_REGS"] == k20.consumer_registers(d["CONSUMERS"]), cfg


@pytest.mark.parametrize("name", ["tf32_tma", "hgemm_tma"])
def test_c_off_its_alignment_runs_the_element_stores(name, rng):
    """``x @ W.T`` into a C one float off its allocation (its rows not 16-byte aligned, N even):
    the plan runs the TMA stage's scalar variant, which stores C element by element (the vector
    one stores column pairs 64 bits at a time, which would fault there); the product is right."""
    from helpers import sim_sized, transposed_on_device

    import numba_gemm
    from numba_gemm.plan.choose import plan_for
    from numba_gemm.plan.geometry import Alignment, Geometry

    st = sim_sized(numba_gemm.get_stage(name))
    f16 = st.precision == "fp16"
    M, N, K = 40, 64, 64
    plan = plan_for(
        M, N, K, stage=st, geometry=Geometry.dense(M, N, K, "NT"), alignment=Alignment.AB,
        compute=st.precision,
    )  # fmt: skip
    assert plan.variant == "scalar"
    a = rng.standard_normal((M, K)).astype(np.float16 if f16 else np.float32)
    w = rng.standard_normal((N, K)).astype(a.dtype)
    buf = cuda.to_device(np.full(M * N + 1, np.nan, np.float32))
    c = buf[1:].reshape(M, N)
    gemm = numba_gemm.hgemm if f16 else numba_gemm.sgemm
    gemm(cuda.to_device(a), transposed_on_device(w.T), out=c, stage=st)
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    assert rel_error(c.copy_to_host(), want) <= st.rtol


@pytest.mark.parametrize("slices", [2, 4])
def test_3xtf32_tile_products_in_slices(slices, rng):
    """Stage 23's per-tile products made in slices of the A tile's rows (what lets tiles past
    128 x 128 fit their registers): each slice's products land in its own accumulators and the
    result keeps 3xTF32's FP32 accuracy (a slice reading the wrong rows of the tile, or added
    into the wrong sums, gives a wrong product). Three K tiles wrap the small parts' ring. (One
    slice: every test of stage 23 at its simulator tile.)"""
    _needs_hopper()
    from numba_gemm.kernels import k22_tf32_tma_rs as k22
    from numba_gemm.launch.launcher import allow_dynamic_smem

    cfg = dict(BM=64, BN=64, BK=32, NBUF=2)
    kern = k22.make_kernel(tuple(sorted(cfg.items())), "3xtf32", True, slices)
    M, N, K = 50, 60, 96
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    box_a, box_b = k20.boxes(cfg, "NN", "tf32")
    d = k22.derived(cfg, "3xtf32")

    def ptr(x):
        return 0 if device.SIMULATOR else x.device_ctypes_pointer.value

    ta = tensormap.matrix_spec("float32", a.shape, 4 * K, box_a, ptr(d_a), swizzle=128)
    tb = tensormap.matrix_spec("float32", b.shape, 4 * N, box_b, ptr(d_b), swizzle=128)
    c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    args = (d_a, d_b, c, tensormap.device_map(ta), tensormap.device_map(tb))
    args += (np.float32(1), np.float32(0))
    allow_dynamic_smem(kern, args, d["SMEM_BYTES"])  # 56 KB: past a launch's default 48
    kern[(1, 1), d["NUM_THREADS"], 0, d["SMEM_BYTES"]](*args)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert rel_error(c.copy_to_host(), want) <= 1e-5


@pytest.mark.parametrize("name", ["hgemm_tma", "tf32x3_tma"])
def test_dependent_launches_see_the_product_before(name, rng):
    """The TMA stages are launched with programmatic dependent launch: a kernel may start while
    the one ahead of it in the stream still runs, and must wait (``griddepcontrol.wait``) before
    it reads GMEM. A chain of products, each reading the C the one before wrote, back to back:
    every link is right (without the wait, a link reads a half-written C on the GPU: the 3xTF32
    chain's error was inf). GPU only: the simulator runs launches one after another."""
    if device.SIMULATOR:
        pytest.skip("the simulator runs launches one after another; nothing can overlap")
    import numba_gemm

    st = numba_gemm.get_stage(name)
    f16 = st.precision == "fp16"
    dt = np.float16 if f16 else np.float32
    n = 1024
    b = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(dt)
    d_b = cuda.to_device(b)
    outs = [cuda.to_device(rng.standard_normal((n, n)).astype(dt))]
    outs += [cuda.device_array((n, n), dt) for _ in range(3)]
    gemm = numba_gemm.hgemm if f16 else numba_gemm.sgemm
    for x, y in itertools.pairwise(outs):  # plans and tensor maps made (copies wait for the GPU)
        gemm(x, d_b, stage=st, out=y)
    for y in outs[1:]:
        y.copy_to_device(np.full((n, n), np.nan, dt))
    cuda.synchronize()
    for x, y in itertools.pairwise(outs):  # back to back: each product reads the last one's C
        gemm(x, d_b, stage=st, out=y)
    for x, y in itertools.pairwise(outs):
        x64 = x.copy_to_host().astype(np.float64)
        assert rel_error(y.copy_to_host(), x64 @ b.astype(np.float64)) <= st.rtol


def test_dependent_launch_config_matches_cuda_h():
    """``cuLaunchKernelEx``'s structures as ``cuda.h`` (CUDA 12-13) lays them out on a 64-bit
    host: ``CUlaunchConfig`` 56 bytes (the stream at 32, the attributes at 40, their count at
    48), ``CUlaunchAttribute`` 72 (an id padded to 8, then a 64-byte value); a wrong layout
    would hand the driver garbage, which only a GPU would notice. Every TMA stage (they all wait
    for the kernel ahead before touching GMEM) is launched that way."""
    import ctypes

    from numba_gemm import STAGES
    from numba_gemm.launch import driver

    assert [s.name for s in STAGES if s.dependent_launch] == [
        s.name for s in STAGES if s.tensor_maps is not None
    ]

    cfg, attr = driver.LaunchConfig, driver.LaunchAttribute
    assert (ctypes.sizeof(cfg), ctypes.sizeof(attr)) == (56, 72)
    offsets = [getattr(cfg, f).offset for f in ("smem", "stream", "attrs", "count")]
    assert offsets == [24, 32, 40, 48]
    assert attr.value.offset == 8
    assert driver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION == 6
