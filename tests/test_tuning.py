"""The tuner's constraint filtering, its validate-then-time step, and the cache round trip that
``sgemm(stage=None)`` relies on, on tiny configurations (simulator-friendly)."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from conftest import requires_gpu
from helpers import randn
from numba import cuda

import numba_gemm
from numba_gemm import STAGES, get_stage
from numba_gemm.plan import tuning
from numba_gemm.plan.choose import plan_for
from numba_gemm.plan.cost import estimate_ms, sm_rate
from numba_gemm.plan.geometry import Alignment
from numba_gemm.tools.reference import reference_f64, rel_error
from numba_gemm.tools.tune import (
    Problem,
    _alternatives,
    _order,
    evaluate,
    knob_variants,
    split_variants,
)

#: The tiled stages the tuner sweeps (FP32 with the ``_tunable`` keys; the tensor-core stages
#: and the skinny stage have other configuration keys).
TUNABLE = [s for s in STAGES if s.tunable and s.precision == "fp32" and "BM" in s.config]
#: The mma.sync stages (warp tiles); the wgmma stages' configurations: tests/test_wgmma.py.
TENSOR_CORE = [s for s in STAGES if s.tunable and s.precision != "fp32" and s.arch is None]

#: One warp: 32x32 block tile, 2x1 sub-tiles of 16x32, 4x4 per thread.
#: The stages whose contract (``Stage.block``, ``Stage.threads``) the cost model's tests use.
DB, SKINNY = get_stage("double_buffering"), get_stage("skinny")
TINY = dict(BM=32, BN=32, BK=8, WM=32, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=1)


def tiny(stage):
    extra = {"NBUF": 3} if "NBUF" in stage.config else {}
    return dict(TINY, **extra)


@pytest.mark.parametrize("stage", TUNABLE, ids=[s.name for s in TUNABLE])
def test_space_is_valid_and_nonempty(stage):
    assert stage.space, "a tunable stage needs candidates"
    for cfg in stage.space:
        stage.check_config(cfg)  # raises if invalid


@pytest.mark.parametrize("stage", TUNABLE, ids=[s.name for s in TUNABLE])
@pytest.mark.parametrize(
    "change, message",
    [
        (dict(WM=48), "warp tiles must divide"),
        (dict(TM=6), "multiples of 4"),
        (dict(WNITER=3), "WNITER must divide WN"),
        (dict(BM=512, BN=512, WM=32, WN=32), "NUM_THREADS"),
        (dict(SPLITK=-1), "SPLITK"),
        (dict(MINB=9), "MINB"),
        (dict(BK=0), "positive"),
    ],
)
def test_invalid_configs_rejected(stage, change, message):
    with pytest.raises(ValueError, match=message):
        stage.with_config(dict(stage.config, **change))


@pytest.mark.parametrize("stage", TENSOR_CORE, ids=[s.name for s in TENSOR_CORE])
@pytest.mark.parametrize(
    "change, message",
    [
        (dict(WM=48), "warp tiles must tile the block"),
        (dict(BK=12), "BK be a multiple of"),
        (dict(BM=512, BN=512, WM=16, WN=16), "threads"),
        (dict(NBUF=1), "NBUF"),
        (dict(BM=256, BN=256, BK=64, WM=64, WN=64, NBUF=4), "SMEM"),
        (dict(TM=4), "exactly the keys"),
    ],
)
def test_tensor_core_configs_rejected(stage, change, message):
    with pytest.raises(ValueError, match=message):
        stage.with_config(dict(stage.config, **change))
    assert stage.space and all(stage.with_config(c).config == c for c in stage.space)


@pytest.mark.parametrize("stage", TUNABLE, ids=[s.name for s in TUNABLE])
def test_unknown_and_missing_keys_rejected(stage):
    with pytest.raises(ValueError, match="unknown"):
        stage.with_config(dict(stage.config, XX=1))
    cfg = dict(stage.config)
    cfg.pop("BK")
    with pytest.raises(ValueError, match="missing"):
        stage.with_config(cfg)


def test_static_smem_limit_enforced():
    wt = numba_gemm.get_stage("double_buffering")
    with pytest.raises(ValueError, match="SMEM"):
        wt.with_config(dict(wt.config, BM=256, BN=256, BK=16, WM=64, WN=64, WNITER=4, TM=4, TN=4))


def test_fixed_stage_takes_no_config():
    with pytest.raises(TypeError, match="takes no configuration"):
        numba_gemm.get_stage("naive").with_config({})


def test_order_and_knobs():
    space = numba_gemm.get_stage("warptiling").space
    ordered = _order(space)
    assert sorted(map(str, ordered)) == sorted(map(str, space))
    assert knob_variants(TINY, "large") == [dict(TINY, MINB=1), dict(TINY, MINB=2)]
    big = dict(TINY, BM=128, BN=128, WM=64, WN=64, WNITER=2)  # 128 accumulators: no MINB=2
    assert knob_variants(big, "large") == [dict(big, MINB=1)]
    shapes = [(c["BM"], c["BN"]) for c in ordered[:5]]
    assert len(set(shapes)) == 5, "the first configs must cover every block shape"
    assert dict(TINY, SPLITK=4) in knob_variants(TINY, "small")


def test_alternatives_keep_each_tiles_fastest_unsplit_and_split(rng):
    """Per block tile, the fastest unsplit and the fastest split configuration: the plan prices
    a candidate at splits that start from its own (a split one is not priced unsplit where the
    tiles fill the SMs), and a second split of one tile would only crowd out another tile."""
    st = numba_gemm.get_stage("double_buffering")
    prob = Problem(21, 19, 13, rng, cp=None)
    wide = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=8, TN=4, MINB=0, SPLITK=1)
    thin = dict(wide, BM=32, WM=32, WN=32, WNITER=1)
    results = [
        (dict(wide, SPLITK=4), dict(ms=1.0, shape=[21, 19, 13])),
        (dict(wide, SPLITK=2), dict(ms=1.5, shape=[21, 19, 13])),
        (wide, dict(ms=2.0, shape=[21, 19, 13])),
        (thin, dict(ms=3.0, shape=[21, 19, 13])),
    ]
    alts = _alternatives(results, st, prob, "skinny")
    assert [a["config"] for a in alts] == [dict(wide, SPLITK=4), wide, thin]
    # a class without split-K keeps no split one
    assert [a["config"] for a in _alternatives(results, st, prob, "large")] == [wide, thin]


def test_split_variants_time_every_tile_at_the_splits_the_plan_offers():
    """Phase 2 times the fastest unsplit configuration of each block tile at the powers of two
    that ``split_options`` offers at the class's shape (one block an SM), not only the top
    three at 2 and 4: a tile kept unsplit was mispriced at its splits elsewhere."""
    wide = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=8, TN=4, MINB=0, SPLITK=1)
    thin = dict(wide, BM=32, WM=32, WN=32, WNITER=1)
    slower_thin = dict(thin, TM=4, TN=8)
    res = {"ms": 1.0}
    results = [(dict(wide, SPLITK=4), res), (wide, res), (thin, res), (slower_thin, res)]
    got = split_variants("double_buffering", results, "skinny", (16, 4096, 4096), 132)
    # 64 x 128 at 16 rows is mostly empty: split only up to one block an SM (4 x 32 tiles);
    # 4 was timed. 32 x 128: up to four waves of 132 blocks (16 x 32 tiles), each slice >= 8
    # K tiles; the slower 32 x 128 configuration is not the tile's fastest
    assert got == [dict(wide, SPLITK=2)] + [dict(thin, SPLITK=s) for s in (2, 4, 8, 16)]
    assert split_variants("double_buffering", results, "large", (4096, 4096, 4096), 132) == []
    st = numba_gemm.get_stage("double_buffering")
    assert all(st.with_config(c).split_k == c["SPLITK"] for c in got)
    skinny = dict(numba_gemm.get_stage("skinny").config, SPLITK=1)  # its space sweeps splits
    assert split_variants("skinny", [(skinny, res)], "skinny", (16, 4096, 4096), 132) == []


def test_order_and_knobs_of_the_wgmma_stages():
    """The TF32 wgmma stages: the largest block tiles first (a budget that ends early must have
    timed the 256 x 128 default: the large class once kept 128 x 128 at 211 against 293
    TFLOP/s), then split-K 2 and 4 in the split-K classes only."""
    st = numba_gemm.get_stage("tf32_wgmma")
    ordered = _order(st.space)
    assert sorted(map(str, ordered)) == sorted(map(str, st.space))
    areas = [c["BM"] * c["BN"] for c in ordered]
    assert areas[0] == max(areas) and dict(st.config) in ordered[:3]
    cfg = dict(st.config)
    assert knob_variants(cfg, "large") == []
    assert knob_variants(cfg, "skinny") == [dict(cfg, SPLITK=2), dict(cfg, SPLITK=4)]
    assert all(st.with_config(c).split_k == c["SPLITK"] for c in knob_variants(cfg, "small"))


@pytest.mark.parametrize("stage", TUNABLE, ids=[s.name for s in TUNABLE])
def test_evaluate_validates_then_times(stage, rng):
    prob = Problem(37, 29, 45, rng, cp=None)
    res = evaluate(stage.with_config(tiny(stage)), prob, reps=1, warmup=0)
    assert res["ok"], res
    assert res["err"] <= 1e-5 and res["gflops"] > 0


@pytest.mark.parametrize("splits", [2, 3, 20])  # 20: two levels (4 groups of 5)
def test_split_k_matches_reference(splits, rng):
    st = numba_gemm.get_stage("double_buffering").with_config(dict(TINY, SPLITK=splits))
    a, b, c0 = randn(rng, (33, 21)), randn(rng, (21, 35)), randn(rng, (33, 35))
    d_c = cuda.to_device(c0)
    numba_gemm.sgemm(cuda.to_device(a), cuda.to_device(b), stage=st, out=d_c, alpha=0.5, beta=-2.0)
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b, c0, 0.5, -2.0)) <= 1e-5
    # one kernel: the last slice of each tile sums; it leaves every tile counter at 0, so the
    # next call on the stream (fresh data, NaN-poisoned output) counts from 0 again
    from numba_gemm.kernels._splitk import counters_per_tile
    from numba_gemm.launch.workspace import split_buffers as buffers

    p = numba_gemm.explain(cuda.to_device(a), cuda.to_device(b), stage=st)
    assert p.split_k == splits and p.tiles == 4  # 2 x 2 tiles of 32 x 32
    assert not buffers(1, 1, p.tiles * counters_per_tile(splits), 0)[1].copy_to_host().any()
    a2 = randn(rng, (33, 21))
    d_c = cuda.to_device(np.full((33, 35), np.nan, np.float32))
    numba_gemm.sgemm(cuda.to_device(a2), cuda.to_device(b), stage=st, out=d_c)
    assert rel_error(d_c.copy_to_host(), reference_f64(a2, b)) <= 1e-5


def test_spread_shares_cover_each_tile_once():
    """The spread sum's chunks: chunk j of a tile is items [j * share, (j + 1) * share), so the
    tile's SPLITK chunks cover every item once."""
    from numba_gemm.kernels._splitk import share_of

    for bm, bn in [(32, 32), (64, 128), (128, 256), (8, 32), (1, 256), (128, 8)]:
        items = bm * bn // 4
        for s in [2, 3, 5, 12, 24, 64, 96, items, items + 3]:
            share = share_of(bm, bn, s)
            got = [o for z in range(s) for o in range(z * share, min((z + 1) * share, items))]
            assert got == list(range(items)), (bm, bn, s)  # (the last shares may be empty)


@pytest.mark.parametrize(
    "name, splits, together",
    [
        ("double_buffering", 2, True),
        ("double_buffering", 5, True),
        ("multistage", 3, True),
        ("double_buffering", 3, False),  # every block but the last stops waiting
    ],
)
def test_spread_split_k_sum_matches_reference(monkeypatch, name, splits, together, rng):
    """A grid resident at once (the simulator made to run its blocks together): every block of a
    tile waits for the tile's partials, then the blocks take the tile's chunks until none is
    left; results against float64 with alpha and beta, then a second call on a NaN-poisoned C
    (the counters are back at 0). With the blocks run one after another, each but the last
    stops waiting (a short ``SPIN_LIMIT`` here) and the last sums every chunk."""
    from helpers import resident_grid

    from numba_gemm.kernels import _splitk
    from numba_gemm.kernels._splitk import counters_per_tile
    from numba_gemm.launch.launcher import runner
    from numba_gemm.launch.workspace import split_buffers as buffers

    licensed = resident_grid(monkeypatch, together)
    if not together:
        monkeypatch.setattr(_splitk, "SPIN_LIMIT", 20)
    taken, take = [], _splitk.spread_take

    def recorded(L, c, slot):  # the chunks taken, (tile's counters, chunk) by the blocks
        j = take(L, c, slot)
        if threading.current_thread().threadIdx.x == 0 and j < splits:
            taken.append((c, j, threading.current_thread().blockIdx.z))
        return j

    monkeypatch.setattr(_splitk, "spread_take", recorded)
    st = get_stage(name)
    st = st.with_config(dict(tiny(st), SPLITK=splits))
    M, N, K = 33, 35, 41
    a, b, c0 = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, (M, N))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_c = cuda.to_device(c0)
    numba_gemm.sgemm(d_a, d_b, stage=st, out=d_c, alpha=0.5, beta=-2.0)
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b, c0, 0.5, -2.0)) <= 1e-5
    r = runner(numba_gemm.explain(d_a, d_b, stage=st))
    assert r.plan.split_k == splits and licensed == [math.prod(r.grid)]
    tiles = r.grid[0] * r.grid[1]
    assert not buffers(1, 1, tiles * counters_per_tile(splits) + 1, 0)[1].copy_to_host().any()
    # the spread sum ran: every chunk of every tile taken once; in turn, all by the last slice
    per_tile = counters_per_tile(splits)
    want = {(t * per_tile, j) for t in range(tiles) for j in range(splits)}
    assert sorted((c, j) for c, j, _ in taken) == sorted(want)
    assert together or {z for *_, z in taken} == {splits - 1}
    a2 = randn(rng, (M, K))
    d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.sgemm(cuda.to_device(a2), d_b, stage=st, out=d_c)
    assert rel_error(d_c.copy_to_host(), reference_f64(a2, b)) <= 1e-5


def test_split_k_sums_never_add_an_unwritten_workspace(monkeypatch, rng):
    """The tile sums read a workspace row's padding (N rounded up to 4) with its data, 128 bits
    at a time, and add it; a workspace allocated over signaling-NaN garbage must still give
    finite sums (on the simulator such an add raises), so it is zeroed when allocated."""
    from numba_gemm.launch import workspace

    def garbage(n, dtype=np.float32, **kw):  # what uninitialized memory may hold
        return cuda.to_device(np.full(n, 0x7FA00000, np.uint32).view(np.float32))

    monkeypatch.setattr(workspace, "_split", {})
    monkeypatch.setattr(workspace, "generation", workspace.generation + 1)
    monkeypatch.setattr(workspace.cuda, "device_array", garbage)
    st = numba_gemm.get_stage("double_buffering").with_config(dict(TINY, SPLITK=2))
    a, b = randn(rng, (33, 21)), randn(rng, (21, 35))  # N = 35: rows padded to 36
    d_c = cuda.to_device(np.full((33, 35), np.nan, np.float32))
    numba_gemm.sgemm(cuda.to_device(a), cuda.to_device(b), stage=st, out=d_c)
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= 1e-5


@requires_gpu
@pytest.mark.parametrize(
    "name, splits, shape",
    [
        ("warptiling", 8, (512, 384, 8192)),
        ("double_buffering", 5, (300, 260, 6000)),  # ragged tiles, uneven slices
        ("double_buffering", 32, (200, 300, 40000)),  # two levels, several items a round
        ("multistage", 16, (256, 512, 16384)),
        ("skinny", 16, (16, 4096, 4096)),
        ("skinny_n", 8, (4096, 16, 4096)),
    ],
)
def test_split_k_is_deterministic_on_the_gpu(name, splits, shape, rng):
    """Many tiles whose slices race for the counters: the last slice of each tile (or group)
    sums in slice order, so repeated calls give the same bits, and the counters end at 0."""
    from numba_gemm.kernels._splitk import counters_per_tile
    from numba_gemm.launch.workspace import split_buffers as buffers

    M, N, K = shape
    st = numba_gemm.get_stage(name)
    st = st.with_config(dict(st.config, SPLITK=splits))
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    p = numba_gemm.explain(d_a, d_b, stage=st)
    assert p.split_k == splits
    first = None
    for _ in range(5):
        d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
        numba_gemm.sgemm(d_a, d_b, stage=st, out=d_c)
        got = d_c.copy_to_host()
        if first is None:
            first = got
            assert rel_error(got, reference_f64(a, b)) <= 1e-5
        assert np.array_equal(got, first)
    assert not buffers(1, 1, p.tiles * counters_per_tile(splits), 0)[1].copy_to_host().any()


@requires_gpu
def test_spread_split_k_sums_on_concurrent_streams(rng):
    """Split-K products whose grids are each resident alone, launched on four streams at once:
    together they do not fit, so blocks of one wait on blocks that cannot start until another
    grid ends. The spread sum's wait is bounded (``_splitk.spread_arrive``): every call ends,
    right, and the counters are back at 0."""
    from numba_gemm.kernels._splitk import counters_per_tile
    from numba_gemm.launch.launcher import runner
    from numba_gemm.launch.workspace import split_buffers as buffers

    M, N, K = 200, 300, 40000
    st = numba_gemm.get_stage("double_buffering")
    st = st.with_config(dict(st.config, SPLITK=16))  # 128 x 128 tiles: 6 x 16 = 96 blocks
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    r = runner(numba_gemm.explain(d_a, d_b, stage=st))
    resident = r.plan.device.sm_count * r.kernel().blocks_per_sm(math.prod(r.plan.block))
    if math.prod(r.grid) > resident:
        pytest.skip(f"{math.prod(r.grid)} blocks are not resident at once on this GPU")
    assert r._spread and math.prod(r.grid) * 4 > resident
    streams = [cuda.stream() for _ in range(4)]
    outs = [cuda.to_device(np.full((M, N), np.nan, np.float32)) for _ in streams]
    for _ in range(3):
        for s, out in zip(streams, outs, strict=True):
            numba_gemm.sgemm(d_a, d_b, stage=st, out=out, stream=s)
    cuda.synchronize()
    want = reference_f64(a, b)
    for s, out in zip(streams, outs, strict=True):
        assert rel_error(out.copy_to_host(), want) <= 1e-5
        tiles = r.grid[0] * r.grid[1]
        assert not buffers(1, 1, tiles * counters_per_tile(16) + 1, s)[1].copy_to_host().any()


def test_shape_classes():
    assert tuning.shape_class(1024, 1024, 1024) == "small"
    assert tuning.shape_class(2048, 2048, 64) == "medium"
    assert tuning.shape_class(4096, 4096, 4096) == "large"
    assert tuning.shape_class(300, 10**7, 1) == "shallow"  # K <= 32: C's writes bound it
    assert tuning.shape_class(300, 10**7, 33) == "large"
    assert tuning.shape_class(2048, 8192, 8) == "shallow"
    # the regimes: few rows, then up to 256 rows, then deep K
    assert tuning.shape_class(1, 10**7, 1) == "skinny"
    assert tuning.shape_class(64, 4096, 4096) == "skinny"
    assert tuning.shape_class(128, 4096, 4096) == "narrow"
    assert tuning.shape_class(256, 50257, 768) == "narrow"
    assert tuning.shape_class(1024, 1024, 16384) == "deep"
    assert tuning.shape_class(256, 256, 65536) == "deep"
    assert tuning.shape_class(4096, 4096, 65536) == "large"  # deep, but too many outputs
    # and few columns: the transposes of skinny and narrow (few rows come first)
    assert tuning.shape_class(4096, 1, 4096) == "gemv_n"
    assert tuning.shape_class(4096, 4, 4096) == "gemv_n"
    assert tuning.shape_class(4096, 5, 4096) == "skinny_n"
    assert tuning.shape_class(4096, 64, 4096) == "skinny_n"
    assert tuning.shape_class(1024, 16, 16384) == "skinny_n"
    assert tuning.shape_class(4096, 128, 4096) == "narrow_n"
    assert tuning.shape_class(10**6, 256, 8) == "shallow"
    assert tuning.shape_class(10**6, 256, 33) == "narrow_n"
    assert tuning.shape_class(10**6, 64, 8) == "skinny_n"  # few columns come first
    assert tuning.shape_class(16, 16, 4096) == "skinny"
    assert tuning.shape_class(128, 64, 4096) == "skinny_n"
    assert tuning.fallback_class(4096, 128, 4096) == "small"
    assert tuning.shape_class(16, 4096, 4096, batch=4) == "batched"
    assert tuning.fallback_class(16, 4096, 4096) == "small"
    assert tuning.fallback_class(1024, 1024, 16384) == "small"
    # batches of small matrices have their own class; larger ones count batch * M rows
    assert tuning.shape_class(512, 512, 512, batch=64) == "batched"
    assert tuning.shape_class(1024, 1024, 64, batch=2) == "batched"
    assert tuning.shape_class(2048, 2048, 64, batch=2) == "medium"
    assert tuning.shape_class(2048, 2048, 64, batch=4) == "large"
    assert tuning.shape_class(512, 512, 512, batch=1) == "small"
    assert tuning.fallback_class(512, 512, 512, batch=64) == "large"


@pytest.mark.parametrize("stage", TUNABLE, ids=[s.name for s in TUNABLE])
def test_evaluate_times_a_batch_and_records_its_occupancy(stage, rng):
    """The batched class's problem is a 3-D batch; the tuner validates each matrix of it (NaN
    poisoned, float64 reference) and records the batch with the candidate."""
    prob = Problem(21, 19, 13, rng, cp=None, batch=3)
    assert prob.batch == 3 and prob.shape == (21, 19, 13) and prob.flop == 2 * 3 * 21 * 19 * 13
    cfg = tiny(stage)
    res = evaluate(stage.with_config(cfg), prob, reps=1, warmup=0)
    assert res["ok"], res
    assert res["err"] <= 1e-5 and res["batch"] == 3 and res["shape"] == [21, 19, 13]
    alts = _alternatives([(cfg, res)], stage, prob, "batched")
    # occupancy: 1 on the simulator, the CUDA occupancy API's answer on a GPU
    occ = {k: alts[0].pop(k) for k in ("blocks_per_sm", "blocks_per_sm_scalar")}
    assert all(isinstance(v, int) and v >= 1 for v in occ.values()), occ
    # (measured by this tree's kernels: split-K's spread sum, tuning.SPREAD_SUM)
    assert alts == [dict(config=cfg, ms=res["ms"], shape=[21, 19, 13], batch=3, spread_sum=True)]


def test_batch_candidates_price_by_their_batch(monkeypatch, tmp_path, fake_gpu):
    """A candidate tuned on 64 x 512^3 prices a batch of 128 at twice its time; the batched class
    is what a batch of small matrices is planned from, and without it the batch falls back to the
    single-matrix class of ``batch * M`` rows."""
    small = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
    big = dict(BM=128, BN=128, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
    rec = dict(result(small, ms=0.4, shape=(512, 512, 512), blocks_per_sm=2), batch=64)
    assert estimate_ms(rec, 512, 512, 512, sms=132, batch=64) == pytest.approx(0.4)
    assert estimate_ms(rec, 512, 512, 512, sms=132, batch=128) == pytest.approx(0.8, rel=0.02)
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "t.json"))
    fake_gpu("Fake GPU", (1, 0), sms=132)
    from numba_gemm.plan.geometry import Geometry

    g = Geometry(64, 512, 512, 512, "NN", 512, 512, 512, 512 * 512, 512 * 512, 512 * 512)
    data = tuning.load(tmp_path / "t.json")
    tuning.record(
        data,
        "Fake GPU",
        (9, 0),
        "large",
        "double_buffering",
        result(big, ms=3.0, shape=(4096, 4096, 4096)),
    )
    tuning.save(data, tmp_path / "t.json")
    p = plan_for(512, 512, 512, geometry=g)
    assert dict(p.stage.config) == big and "large class" in p.reason  # the fallback class
    tuning.record(data, "Fake GPU", (9, 0), "batched", "double_buffering", rec)
    tuning.save(data, tmp_path / "t.json")
    p = plan_for(512, 512, 512, geometry=g)
    assert dict(p.stage.config) == small and p.predicted_ms == pytest.approx(0.4)
    assert "batched class" in p.reason


def result(
    cfg,
    ms=1.0,
    shape=(1024, 1024, 1024),
    blocks_per_sm=1,
    alternatives=(),
    stage="double_buffering",
):
    """A tuner record as ``numba_gemm.tools.tune`` writes it, with its stage's name (what
    ``tuning.candidates`` adds to each candidate for the cost model)."""
    return dict(
        stage=stage,
        config=cfg,
        ms=ms,
        shape=list(shape),
        blocks_per_sm=blocks_per_sm,
        gflops=2e-6 * shape[0] * shape[1] * shape[2] / ms,
        alternatives=list(alternatives),
    )


def test_wave_model_prefers_finer_tiles_for_ragged_sizes(monkeypatch, tmp_path, fake_gpu):
    """Two candidates tuned at 4096^3 on 132 SMs: 128x256 tiles (1 block/SM: 512 tiles in 3.9
    waves, so 4; faster there) and 64x128 tiles (3 blocks/SM: 2048 tiles in 5.2 waves, so 6).
    At 4097 the big tiles need a 5th wave (561 tiles); the fine ones still fit 6 (2145 tiles)."""
    big = dict(BM=128, BN=256, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=0, SPLITK=1)
    fine = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=4, TN=4, MINB=0, SPLITK=1)
    shape = (4096, 4096, 4096)
    rec = result(
        big,
        ms=3.0,
        shape=shape,
        blocks_per_sm=1,
        alternatives=[dict(config=fine, ms=3.1, shape=list(shape), blocks_per_sm=3)],
    )
    assert estimate_ms(rec, *shape, sms=132) == 3.0
    ragged = estimate_ms(rec, 4097, 4097, 4097, sms=132)
    assert ragged == pytest.approx(3.0 * 5 / 4 * 257 / 256)  # 5 waves instead of 4; BK = 16
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "t.json"))
    fake_gpu("Fake GPU", (1, 0), sms=132)
    data = tuning.load(tmp_path / "t.json")
    tuning.record(data, "Fake GPU", (9, 0), "large", "warptiling", rec)
    tuning.save(data, tmp_path / "t.json")
    assert dict(plan_for(4096, 4096, 4096, stage="warptiling").stage.config) == big
    assert dict(plan_for(4097, 4097, 4097, stage="warptiling").stage.config) == fine


def test_transposed_b_is_priced_from_its_own_times(monkeypatch, tmp_path, fake_gpu):
    """A class candidate re-timed with B stored transposed (``tools.tune --retime NT``) prices
    ``x @ W.T`` from those times and occupancies; row-major B, and candidates without them, keep
    ``ms``. Two stages tuned at 4096^3: multistage faster with row-major B, double_buffering with
    B transposed (multistage copies a transposed tile 4 bytes at a time): the pick follows the
    layout."""
    from numba_gemm.plan.geometry import Geometry

    cfg = dict(BM=128, BN=128, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
    shape = (4096, 4096, 4096)
    ms_rec = dict(
        result(dict(cfg, NBUF=2), ms=3.0, shape=shape, stage="multistage"),
        ms_nt=4.2,
        blocks_per_sm_nt=1,
        ms_scalar=3.3,
        ms_scalar_nt=5.0,
    )
    db_rec = dict(result(cfg, ms=3.2, shape=shape), ms_nt=3.25, blocks_per_sm_nt=1)
    assert estimate_ms(ms_rec, *shape, sms=132) == 3.0
    assert estimate_ms(ms_rec, *shape, sms=132, layout="NT") == 4.2
    assert estimate_ms(ms_rec, *shape, sms=132, layout="TT") == 4.2
    assert estimate_ms(ms_rec, *shape, sms=132, layout="TN") == 3.0  # B row-major
    assert estimate_ms(ms_rec, *shape, sms=132, aligned=False, layout="NT") == 5.0
    # without a scalar NT time: the scalar time scaled by NT over NN
    no_scalar = {k: v for k, v in db_rec.items() if k != "ms_scalar_nt"}
    no_scalar["ms_scalar"] = 3.6
    unaligned = estimate_ms(no_scalar, *shape, sms=132, aligned=False, layout="NT")
    assert unaligned == pytest.approx(3.6 * 3.25 / 3.2)
    # the waves count NT's own occupancy: at 4097^3 (33^2 tiles) 9 waves of 132 for 8 at 4096^3,
    # but 5 waves of 264 for 4
    k = 257 / 256
    assert estimate_ms(db_rec, *(4097,) * 3, sms=132, layout="NT") == pytest.approx(
        3.25 * 9 / 8 * k
    )
    two = dict(db_rec, blocks_per_sm_nt=2)
    assert estimate_ms(two, *(4097,) * 3, sms=132, layout="NT") == pytest.approx(3.25 * 5 / 4 * k)
    # and the rate of the tuned shape's SMs (blocks 1 or 2 at a time) against one part-filled
    # wave of a block an SM (132 tiles of 128 x 128)
    assert estimate_ms(db_rec, 1408, 1536, 4096, sms=132, layout="NT") == pytest.approx(3.25 / 8)
    assert estimate_ms(two, 1408, 1536, 4096, sms=132, layout="NT") == pytest.approx(
        3.25 / 8 * sm_rate(2) / sm_rate(1)
    )

    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "t.json"))
    monkeypatch.setattr(tuning, "DEFAULTS_DIR", tmp_path)  # (multistage needs 8.0+: no defaults)
    fake_gpu("Fake GPU", (9, 0), sms=132)
    data = tuning.load(tmp_path / "t.json")
    for name, rec in (("multistage", ms_rec), ("double_buffering", db_rec)):
        rec = {k: v for k, v in rec.items() if k != "stage"}
        tuning.record(data, "Fake GPU", (9, 0), "large", name, rec)
    tuning.save(data, tmp_path / "t.json")
    assert plan_for(4096, 4096, 4096).stage.name == "multistage"
    nt = plan_for(4096, 4096, 4096, geometry=Geometry.dense(4096, 4096, 4096, "NT"))
    assert nt.stage.name == "double_buffering" and nt.predicted_ms == pytest.approx(3.25)


def test_stream_k_is_priced_from_its_measured_twin(monkeypatch, tmp_path, fake_gpu):
    """A class candidate whose stream-K twin was timed (``tools.tune --retime SK``) is offered as
    stream-K where its tiles fill the grid: its time scales with the K steps (and units) of the
    busiest block, counted by hand here. 128 x 128 tiles of 128 threads, 2 a SM: G = 264.

    - at 2049 x 4100 x 1024 (the twin's shape): 17 x 33 = 561 tiles of 64 steps; 264 run whole
      (one a block), the other 297 share 297 * 64 / 264 = 72 steps a block; block c starts
      72 c steps in, 8 k + 0..56 steps into a tile, so a range touches at most (56 + 71) // 64 + 1
      = 2 tiles: 64 + 72 + 3 * (1 + 2) = 145;
    - at 4096^3: 1024 tiles of 256 steps, 528 whole (2 a block), 496 shared (481 steps a block,
      starting up to 255 steps into a tile: 3 tiles): 512 + 481 + 3 * (2 + 3) = 1008;
    - at 4100^3: 1089 tiles of 257 steps, 792 whole, 297 shared (290 steps, 3 tiles): 771 + 290
      + 18 = 1079;
    - with the twin one block a SM (G = 132): at its shape 396 whole (3 a block), 165 shared (80
      steps, starting 16 k + 0..48 in: 2 tiles): 192 + 80 + 15 = 287; at 4096^3 792 whole (6),
      232 shared (450 steps, starting 2 k + 0..254 in: 3 tiles): 1536 + 450 + 27 = 2013.

    The data-parallel grid runs 4096^3 in 4 waves (its own time) and 4100^3 in 5: the plan keeps
    it at 4096^3, where the twin is priced 5 % slower, and takes the twin at 4100^3."""
    from numba_gemm.kernels._tunable import STREAM_K
    from numba_gemm.plan.cost import stream_k_fixup_ms, stream_k_ms

    cfg = dict(BM=128, BN=128, BK=16, WM=64, WN=64, WNITER=2, TM=4, TN=8, MINB=1, SPLITK=1)
    fix = stream_k_fixup_ms(128, 128, 128, 264)
    sk_ms = fix + (3.0 * 1.05 - fix) * 145 / 1008  # the twin 5 % slower than DP at 4096^3
    rec = dict(
        result(cfg, ms=3.0, shape=(4096, 4096, 4096), blocks_per_sm=2),
        ms_nt=3.3,
        ms_sk=sk_ms,
        blocks_per_sm_sk=2,
        shape_sk=[2049, 4100, 1024],
    )
    assert stream_k_ms(rec, 2049, 4100, 1024, sms=132) == pytest.approx(sk_ms)
    assert stream_k_ms(rec, *(4096,) * 3, sms=132) == pytest.approx(3.15)
    at_4100 = fix + (sk_ms - fix) * 1079 / 145
    assert stream_k_ms(rec, *(4100,) * 3, sms=132) == pytest.approx(at_4100)
    dp_4100 = estimate_ms(rec, *(4100,) * 3, sms=132)
    assert dp_4100 == pytest.approx(3.0 * 5 / 4 * 257 / 256) and at_4100 < 0.92 * dp_4100
    # the twin's own occupancy sets the grid
    one = dict(rec, blocks_per_sm_sk=1)
    fix1 = stream_k_fixup_ms(128, 128, 128, 132)
    assert stream_k_ms(one, *(4096,) * 3, sms=132) == pytest.approx(
        fix1 + (sk_ms - fix1) * 2013 / 287
    )
    # rows not aligned: the main loop at what the scalar variant costs the data-parallel kernel
    # (1.2x at equal occupancy, or the stage's factor where it was not timed)
    scalar = dict(rec, ms_scalar=3.6, ms_scalar_nt=4.5)
    got = stream_k_ms(scalar, *(4100,) * 3, sms=132, aligned=False)
    assert got == pytest.approx(fix + (sk_ms - fix) * 1.2 * 1079 / 145)
    got = stream_k_ms(rec, *(4100,) * 3, sms=132, aligned=False, scalar_factor=1.3)
    assert got == pytest.approx(fix + (sk_ms - fix) * 1.3 * 1079 / 145)
    # a variant of lower occupancy: its grid and rate (2 -> 1 a SM)
    slow = dict(scalar, blocks_per_sm_scalar=1)
    got = stream_k_ms(slow, 4096, 4096, 4096, sms=132, aligned=False)
    ratio = estimate_ms(slow, 2049, 4100, 1024, sms=132, aligned=False) / estimate_ms(
        slow, 2049, 4100, 1024, sms=132
    )
    expected = fix1 + (sk_ms - fix) * ratio * 2013 / 145 * sm_rate(2) / sm_rate(1)
    assert got == pytest.approx(expected)
    # B stored transposed (or A): only the NN twin is timed, and NT twins priced from it ran
    # 1.5x their price, so no other layout is offered one
    for layout in ("NT", "TN", "TT"):
        assert stream_k_ms(rec, *(4100,) * 3, sms=132, layout=layout) is None
    # not offered: no twin (or no occupancy of it); tiles short of the grid (64 < 264); mostly
    # empty tiles; shallow K
    for key in ("ms_sk", "blocks_per_sm_sk"):
        assert stream_k_ms({k: v for k, v in rec.items() if k != key}, *(4100,) * 3, 132) is None
    assert stream_k_ms(rec, 1024, 1024, 4096, sms=132) is None
    assert stream_k_ms(rec, 60, 65536, 4096, sms=132) is None
    assert stream_k_ms(rec, 4100, 4100, 100, sms=132) is None  # 7 K steps
    # a malformed twin is dropped with its candidate
    bad = {k: v for k, v in dict(rec, ms_sk=-1.0).items() if k != "stage"}
    with pytest.warns(UserWarning, match="malformed"):
        assert tuning.candidates(bad, "double_buffering") == []

    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "t.json"))
    monkeypatch.setattr(tuning, "DEFAULTS_DIR", tmp_path)  # (no measured shapes of the defaults)
    fake_gpu("Fake GPU", (9, 0), sms=132)
    data = tuning.load(tmp_path / "t.json")
    rec = {k: v for k, v in rec.items() if k != "stage"}
    tuning.record(data, "Fake GPU", (9, 0), "large", "double_buffering", rec)
    tuning.save(data, tmp_path / "t.json")
    at_4096 = plan_for(4096, 4096, 4096, stage="double_buffering")
    assert at_4096.split_k == 1 and at_4096.predicted_ms == pytest.approx(3.0)
    at_4100 = plan_for(4100, 4100, 4100, stage="double_buffering")
    assert at_4100.split_k == STREAM_K and at_4100.grid == (264, 1, 1)
    assert at_4100.predicted_ms == pytest.approx(fix + (sk_ms - fix) * 1079 / 145)
    # and the kernels compiled ahead for this GPU include the twin
    from numba_gemm.tools import precompile

    jobs = precompile.plan((9, 0), "Fake GPU", stages=["double_buffering"])
    assert tuple(sorted(dict(cfg, SPLITK=STREAM_K).items())) in {j.config for j in jobs}


def test_retime_adds_the_stream_k_twins(rng, monkeypatch):
    """``tools.tune --retime SK`` times each distinct tile configuration's stream-K twin once,
    at its one shape, and gives every stored candidate of that tile its time, occupancy and
    shape; a stage without a stream-K body (skinny_n) is not touched. (A small stand-in shape:
    the simulator runs every thread.)"""
    from numba_gemm.kernels._tunable import STREAM_K
    from numba_gemm.tools import tune as tune_cli

    cfg = tiny(get_stage("multistage"))
    rec = result(cfg, ms=1.0, shape=(12, 20, 16), stage="multistage")
    rec.pop("stage")
    wide = dict(cfg, BM=64)  # another tile: two warps
    rec["alternatives"] = [
        dict(config=dict(cfg, SPLITK=2), ms=1.5, shape=[12, 20, 16]),
        dict(config=wide, ms=1.2, shape=[12, 20, 16]),
    ]
    data = {"format": tuning.FORMAT, "gpus": {}}
    tuning.record(data, "G", (9, 0), "small", "multistage", rec)
    tuning.record(data, "G", (9, 0), "large", "multistage", dict(rec, alternatives=[]))
    skinny_n = dict(config=dict(get_stage("skinny_n").config), ms=1.0, shape=[4096, 16, 4096])
    tuning.record(data, "G", (9, 0), "small", "skinny_n", skinny_n)
    timed = []
    real = tune_cli._time_only
    monkeypatch.setattr(
        tune_cli, "_time_only", lambda st, *a: timed.append(dict(st.config)) or real(st, *a)
    )
    done = tune_cli.retime_stream_k(
        data,
        "G",
        (9, 0),
        ["small", "large"],
        ["multistage", "skinny_n"],
        rng,
        None,
        1,
        0,
        shape=(40, 36, 20),
    )
    assert len(done) == 4  # the winner, its two alternatives, and the large class's copy
    classes = data["gpus"]["G"]["classes"]
    small = classes["small"]["multistage"]
    for r in (small, *small["alternatives"], classes["large"]["multistage"]):
        assert set(tuning.STREAM_K_KEYS) <= set(r), r
        assert r["ms_sk"] > 0 and r["blocks_per_sm_sk"] >= 1 and r["shape_sk"] == [40, 36, 20]
    # one twin for the three records of one tile (SPLITK 1 and 2), validated; the other tile's
    # twin timed on the same operands, NaN-poisoned C checked
    assert small["ms_sk"] == small["alternatives"][0]["ms_sk"]
    assert timed == [dict(wide, SPLITK=STREAM_K)]
    assert not set(tuning.STREAM_K_KEYS) & set(classes["small"]["skinny_n"])


def _small_class_data(monkeypatch, ms, alt_ms, **winner):
    """Tuning data of a tiny multistage candidate (time ``ms``, keys ``winner``) and its split
    alternative (``alt_ms``) in the small class, whose shape becomes 12 x 20 x 16 (the simulator
    runs every thread), and a copy of the winner alone in the large class."""
    small_shape = tuple(
        c._replace(shape=(12, 20, 16)) if c.name == "small" else c for c in tuning.CLASSES
    )
    monkeypatch.setattr(tuning, "CLASSES", small_shape)
    cfg = tiny(get_stage("multistage"))
    rec = result(cfg, ms=ms, shape=(12, 20, 16), stage="multistage")
    rec.pop("stage")
    rec.update(winner)
    rec["alternatives"] = [dict(config=dict(cfg, SPLITK=2), ms=alt_ms, shape=[12, 20, 16])]
    data = {"format": tuning.FORMAT, "gpus": {}}
    tuning.record(data, "G", (9, 0), "small", "multistage", rec)
    tuning.record(data, "G", (9, 0), "large", "multistage", dict(rec, alternatives=[]))
    return data


def test_retime_adds_the_transposed_b_times(rng, monkeypatch, capsys):
    """``tools.tune --retime NT`` times every stored candidate of a class (winner and
    alternatives) with B stored transposed, on the class's shape and its unaligned twin, and
    adds the keys the cost model reads; other records are left alone. (Here on a small stand-in
    for the class's shape: the simulator runs every thread.)"""
    from numba_gemm.tools import tune as tune_cli

    data = _small_class_data(monkeypatch, ms=1.0, alt_ms=1.5)
    small = data["gpus"]["G"]["classes"]["small"]["multistage"]
    small[tuning.FIT_NT] = [{"config": {"BM": 32}, "fit": 1.5, "n": 2}]  # of the old times
    done = tune_cli.retime(data, "G", (9, 0), ["small"], ["multistage"], rng, None, 1, 0)
    assert len(done) == 2 and tuning.FIT_NT not in small
    for r in (small, small["alternatives"][0]):
        assert set(tuning.TRANSPOSED_B_KEYS) <= set(r), r
        assert r["ms_nt"] > 0 and r["ms_scalar_nt"] > 0 and r["blocks_per_sm_nt"] >= 1
    assert "ms_nt" not in data["gpus"]["G"]["classes"]["large"]["multistage"]


def test_a_split_measured_with_the_spread_sum_is_priced_at_its_own_time(fake_gpu):
    """A split candidate whose grid was resident where it was tuned is priced there at its own
    time if it was measured with the spread sum (``tuning.SPREAD_SUM``: the tuner writes it); one
    measured before (no key: the committed data's older records) has a last-block sum taken out
    and the spread one put back, below its time. A grid that was not resident ran a last-block
    sum either way."""
    from numba_gemm.plan.cost import reduce_ms
    from numba_gemm.plan.tuning import SPREAD_SUM

    tile = dict(TINY, BM=64, BN=128, WM=32, WN=64, SPLITK=8)
    shape = (256, 256, 8192)  # 4 x 2 tiles x 8 slices: resident on 132 SMs
    assert reduce_ms(8, *shape[:2], tile, DB, spread=True) < reduce_ms(8, *shape[:2], tile, DB)
    old = result(tile, ms=0.05, shape=shape)
    new = dict(old, **{SPREAD_SUM: True})
    assert estimate_ms(new, *shape, sms=132) == pytest.approx(0.05, rel=1e-12)
    assert estimate_ms(old, *shape, sms=132) < 0.05
    big = (4096, 4096, 8192)  # 2048 tiles x 8 slices: not resident
    old, new = result(tile, ms=5.0, shape=big), result(tile, ms=5.0, shape=big)
    new[SPREAD_SUM] = True
    assert estimate_ms(new, *big, sms=132) == estimate_ms(old, *big, sms=132) == pytest.approx(5.0)


def test_retime_nn_replaces_the_swept_times(rng, monkeypatch, capsys, tmp_path):
    """``tools.tune --retime NN`` (after a kernel change) times every stored candidate again as
    swept and replaces its times and occupancies (and the winner's GFLOP/s), leaving the other
    keys and other classes alone; the table says what each time was."""
    import argparse

    from numba_gemm.tools import tune as tune_cli

    data = _small_class_data(
        monkeypatch,
        ms=123.0,
        alt_ms=150.0,
        gflops=1.0,
        ms_scalar=456.0,
        ms_nt=7.0,
        blocks_per_sm_scalar=9,
    )
    monkeypatch.setattr(tune_cli.tuning, "load", lambda path: data)
    monkeypatch.setattr(tune_cli.tuning, "save", lambda d, path: None)
    monkeypatch.setattr(tune_cli.check, "blas_library", lambda name: None)
    args = argparse.Namespace(
        out=tmp_path / "t.json",
        seed=0,
        classes=["small"],
        stages=["multistage"],
        reps=1,
        warmup=0,
        jobs=1,
        retime="NN",
    )
    assert tune_cli.retime_main(args, "G", (9, 0)) == 0
    table = capsys.readouterr().out
    small = data["gpus"]["G"]["classes"]["small"]["multistage"]
    for r, was in ((small, 123.0), (small["alternatives"][0], 150.0)):
        assert r["ms"] != was and r["ms_scalar"] != 456.0, r
        assert r["blocks_per_sm"] >= 1 and r["blocks_per_sm_scalar"] >= 1
        assert f"{was:8.4f}" in table
    assert small["blocks_per_sm_scalar"] != 9  # (the occupancy API's, not the stored one)
    assert small["gflops"] != 1.0 and small["ms_nt"] == 7.0  # NT's times are another key's
    assert small["spread_sum"] and small["alternatives"][0]["spread_sum"]  # this tree's sums
    assert data["gpus"]["G"]["classes"]["large"]["multistage"]["ms"] == 123.0
    assert "spread_sum" not in data["gpus"]["G"]["classes"]["large"]["multistage"]
    with pytest.raises(ValueError, match="layout must be 'NN' or 'NT'"):
        tune_cli.retime(data, "G", (9, 0), ["small"], ["multistage"], rng, None, layout="TN")


def test_retime_refuses_a_gpu_without_its_own_classes(tmp_path, capsys):
    """Re-timing needs this GPU's own row-major times: the committed defaults' main entry (the
    H200's) is not re-timed on another GPU, and nothing is written."""
    import argparse

    from numba_gemm.tools import tune as tune_cli

    out = tmp_path / "t.json"
    args = argparse.Namespace(out=out, seed=0, classes=["small"], stages=["multistage"])
    assert tune_cli.retime_main(args, "Another GPU", (9, 0)) == 1
    assert "no class candidates for Another GPU" in capsys.readouterr().err
    assert not out.exists()


def test_cache_round_trip_drives_sgemm(tmp_path, monkeypatch, rng, fake_gpu):
    """A winner written to the cache is what plan_for (by name and automatic) and
    sgemm(stage=None) run; the plan says where it came from."""
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    fake_gpu("Fake GPU", (1, 0))
    data = tuning.load(path)
    assert data == {"format": tuning.FORMAT, "gpus": {}}
    cfg = dict(TINY, SPLITK=2)
    tuning.record(data, "Fake GPU", (9, 0), "small", "double_buffering", result(cfg, ms=1.0))
    tuning.record(data, "Fake GPU", (9, 0), "small", "warptiling", result(TINY, ms=20.0))
    tuning.save(data, path)
    assert tuning.load(path) == data

    p = plan_for(40, 30, 20, stage="double_buffering")
    # K = 20 is too shallow to split (plan.split_options): the launch layer runs the tiles whole
    assert dict(p.stage.config) == dict(cfg, SPLITK=1) and p.split_k == 1
    assert "tuned candidate" in p.reason
    deep = plan_for(40, 30, 4096, stage="double_buffering")  # one block: K is split
    assert dict(deep.stage.config, SPLITK=2) == cfg and deep.split_k > 1
    other = plan_for(4096, 4096, 4096, stage="double_buffering")  # other class: no data
    assert dict(other.stage.config) == dict(numba_gemm.get_stage("double_buffering").config)
    best = plan_for(40, 30, 20)
    assert best.stage.name == "double_buffering" and dict(best.stage.config) == p.stage.config
    assert "auto" in best.reason and str(path) in best.reason

    a, b = randn(rng, (40, 20)), randn(rng, (20, 30))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    got = numba_gemm.explain(d_a, d_b).stage
    assert (got.name, dict(got.config)) == (best.stage.name, dict(best.stage.config))
    out = numba_gemm.sgemm(d_a, d_b).copy_to_host()
    assert rel_error(out, reference_f64(a, b)) <= 1e-5


def test_split_k_reduction_is_priced(fake_gpu):
    """A tuned split-K candidate pays its reduction (the last slices' tail and the partials'
    traffic): worth it where it was tuned, not at a tiny shape where the fixed cost dominates."""
    from numba_gemm.plan.cost import REDUCE_LEVEL_MS, REDUCE_ROUND_MS, reduce_ms

    split = result(dict(TINY, SPLITK=4), ms=0.05)
    plain = result(TINY, ms=0.06)
    assert reduce_ms(1, 1024, 1024, TINY, DB) == 0.0
    assert reduce_ms(4, 128, 128, TINY, DB) > REDUCE_LEVEL_MS
    assert estimate_ms(split, 1024, 1024, 1024, sms=132) == pytest.approx(0.05)
    assert estimate_ms(split, 64, 64, 64, sms=132) > REDUCE_LEVEL_MS
    assert estimate_ms(plain, 64, 64, 64, sms=132) < estimate_ms(split, 64, 64, 64, sms=132)
    # the last blocks' sums: 64 slices in one level would take 4 rounds of 16 loads, in two
    # levels (8 groups of 8) one round each; a 128 x 128 tile of 4 warps: 32 items a thread, one
    # a round (128 accumulators a thread: _splitk.items_per_round)
    big = dict(TINY, BM=128, BN=128, WM=64, WN=64)
    traffic = 2 * 64 * 256 * 256 * 4 / 2.5e9
    assert reduce_ms(64, 256, 256, big, DB) == pytest.approx(
        2 * REDUCE_LEVEL_MS + 2 * 32 * REDUCE_ROUND_MS + traffic
    )
    # with 8 warps, 64 accumulators a thread: 3 items a round (24 partials in flight), 6 rounds
    wide = dict(big, WM=32)
    assert reduce_ms(64, 256, 256, wide, DB) == pytest.approx(
        2 * REDUCE_LEVEL_MS + 2 * 6 * REDUCE_ROUND_MS + traffic
    )
    # spread over the slices (the grid resident): one level, a chunk of the tile a block; a
    # 64 x 128 tile of 4 warps at 24 slices: 86 items a chunk, one a thread, 2 rounds of 16 and
    # 8 loads (the last-block sum: two levels of 4 rounds of 4 items)
    tile = dict(TINY, BM=64, BN=128, WM=32, WN=64)
    traffic = 2 * 24 * 200 * 100 * 4 / 2.5e9
    spread = reduce_ms(24, 200, 100, tile, DB, spread=True)
    assert spread == pytest.approx(REDUCE_LEVEL_MS + 2 * REDUCE_ROUND_MS + traffic)
    assert reduce_ms(24, 200, 100, tile, DB) == pytest.approx(
        2 * REDUCE_LEVEL_MS + 2 * 4 * REDUCE_ROUND_MS + traffic
    )
    # the skinny stages' sums do not spread (Stage.wide_fixup)
    sk = SKINNY.config
    assert reduce_ms(8, 16, 4096, sk, SKINNY, spread=True) == reduce_ms(8, 16, 4096, sk, SKINNY)


def test_a_resplit_kernel_is_pinned_to_its_tiles_occupancy():
    """At a split other than its own, a tiled FP32 candidate without launch bounds, or with
    bounds that cap no register, runs with MINB = the most blocks an SM its variant's stored
    kernels reached, and is priced there; not at its own split, not with a MINB of its own that
    caps registers, not where the pin caps no register, not for the skinny stages
    (docs/design.md §4.5)."""
    from numba_gemm.plan.cost import pinned_occupancy, split_config

    ms_cfg = dict(BM=64, BN=128, BK=16, WM=32, WN=64, WNITER=2, TM=8, TN=4, NBUF=2, MINB=0)
    cand = dict(
        stage="multistage",
        config=dict(ms_cfg, SPLITK=1),
        ms=0.5,
        ms_nt=0.6,
        shape=[2048, 2048, 2048],
        blocks_per_sm=3,
        blocks_per_sm_nt=2,
        blocks_per_sm_scalar=2,
        blocks_per_sm_scalar_nt=3,
    )
    assert pinned_occupancy(cand, 8) == 3  # the vector kernels' best: 3 (NN) over 2 (NT)
    assert split_config(cand, 8, pinned_occupancy(cand, 8)) == dict(ms_cfg, SPLITK=8, MINB=3)
    assert pinned_occupancy(cand, 8, aligned=False) == 3  # the scalar kernels' best
    # 2 an SM of 128 threads leaves 256 registers a thread: a bound that binds nothing
    assert pinned_occupancy(dict(cand, blocks_per_sm=2), 8) is None
    assert pinned_occupancy(cand, 1) is None and split_config(cand, 1, None) == cand["config"]
    # MINB 1 or 2 of 128 threads (512 or 256 registers a thread) caps nothing: pinned as MINB 0
    # (narrow_n's multistage 64 x 128 with MINB 1: 207 registers at 12 slices, 2 an SM)
    for own in (1, 2):
        loose = dict(cand, config=dict(cand["config"], MINB=own))
        assert pinned_occupancy(loose, 8) == 3
        assert split_config(loose, 8, 3) == dict(ms_cfg, SPLITK=8, MINB=3)
    # MINB 3 of 128 threads (170 registers) binds: it runs as measured
    bounded = dict(cand, config=dict(cand["config"], MINB=3), blocks_per_sm=4)
    assert pinned_occupancy(bounded, 8) is None
    assert split_config(bounded, 8, pinned_occupancy(bounded, 8)) == dict(ms_cfg, SPLITK=8, MINB=3)
    # 256 threads at 2 an SM: 128 registers a thread, a bound that binds
    wide = dict(cand, config=dict(ms_cfg, BM=128, SPLITK=1), blocks_per_sm=2)
    assert pinned_occupancy(wide, 8) == 2
    skinny = dict(
        stage="skinny",
        config=dict(MT=4, BN=256, THREADS=256, KC=64, SPLITK=1, MINB=0, NBUF=0),
        ms=0.05,
        shape=[16, 4096, 4096],
        blocks_per_sm=3,
    )
    assert pinned_occupancy(skinny, 4) is None
    # 48 x 3584 x 7168 in 12 slices: 336 blocks, one wave of 3 an SM, two of 2 (NT's own)
    at = dict(M=48, N=3584, K=7168, sms=132, splits=12, layout="NT")
    pinned = estimate_ms(cand, **at, per_sm=3)
    assert pinned < 0.75 * estimate_ms(cand, **at)  # as measured: 2 an SM (blocks_per_sm_nt)
    assert estimate_ms(cand, **at, per_sm=2) == estimate_ms(cand, **at)


def test_items_per_round_only_for_two_level_sums_of_wide_threads():
    from numba_gemm.kernels._splitk import ROUND_LOADS, items_per_round

    assert ROUND_LOADS == 24
    assert items_per_round(64, 128, 128, 32, wide=True) == 4  # groups of 6: 24 // 6
    assert items_per_round(64, 128, 128, 64, wide=True) == 3  # groups of 8
    assert items_per_round(64, 128, 128, 16, wide=True) == 1  # one level
    assert items_per_round(64, 128, 128, 32, wide=False) == 1  # the skinny stages
    assert items_per_round(8, 16, 32, 32, wide=True) == 1  # one item per thread
    assert items_per_round(128, 256, 256, 64, wide=True) == 1  # 128 accumulators a thread


def test_tuning_is_read_once_until_reload(tmp_path, monkeypatch, fake_gpu):
    """Tuning data is memoized: a file written behind the process's back is not seen until
    ``tuning.reload()`` (``tuning.save`` reloads by itself)."""
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    fake_gpu("Fake GPU", (1, 0))
    first = dict(plan_for(40, 30, 20, stage="warptiling").stage.config)
    assert first != TINY
    data = tuning.load(path)
    tuning.record(data, "Fake GPU", (9, 0), "small", "warptiling", result(TINY, ms=2.0))
    path.write_text(__import__("json").dumps(data))  # another process's write
    assert dict(plan_for(40, 30, 20, stage="warptiling").stage.config) == first
    tuning.reload()
    assert dict(plan_for(40, 30, 20, stage="warptiling").stage.config) == TINY


def test_bad_cache_file_rejected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a numba_gemm tuning file"):
        tuning.load(bad)


def test_stale_cached_config_falls_back_with_warning(tmp_path, monkeypatch, fake_gpu):
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    fake_gpu("Fake GPU", (1, 0))
    data = tuning.load(path)
    tuning.record(data, "Fake GPU", (9, 0), "small", "warptiling", result(dict(TINY, TM=6)))
    tuning.save(data, path)
    with pytest.warns(UserWarning, match="ignoring tuned config"):
        st = plan_for(10, 10, 10, stage="warptiling").stage
    assert st is numba_gemm.get_stage("warptiling")


def test_committed_defaults_are_valid():
    """Every winner and alternative builds, and is a complete candidate for the wave model."""
    paths = sorted(tuning.DEFAULTS_DIR.glob("sm_*.json"))
    assert paths, "committed defaults missing"
    for path in paths:
        data = tuning.load(path)
        for entry in data["gpus"].values():
            for winners in entry["classes"].values():
                for name, res in winners.items():
                    cands = tuning.candidates(res, name)
                    assert len(cands) == 1 + len(res.get("alternatives", []))
                    for c in cands:
                        numba_gemm.get_stage(name).with_config(c["config"])
                        assert estimate_ms(c, 4097, 4097, 4097, sms=132) > 0


def test_malformed_cache_is_tolerated(tmp_path, monkeypatch, rng, fake_gpu):
    """A candidate without ms/shape (hand-edited, or another version's file) is dropped with a
    warning; sgemm still runs (here: the stage default)."""
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    dev = fake_gpu("Fake GPU", (1, 0))
    data = tuning.load(path)
    tuning.record(data, "Fake GPU", (1, 0), "small", "warptiling", dict(config=TINY, ms=0))
    tuning.save(data, path)
    with pytest.warns(UserWarning, match="malformed"):
        st = plan_for(40, 30, 20, stage="warptiling").stage
    assert st is numba_gemm.get_stage("warptiling")
    path.write_text('{"format": 1, "gpus": []}')
    tuning.reload()
    with pytest.warns(UserWarning, match="ignoring tuning file"):
        assert tuning.winners("small", dev) == {}
    tuning.reload()
    with pytest.warns(UserWarning):
        a, b = cuda.to_device(randn(rng, (9, 4))), cuda.to_device(randn(rng, (4, 5)))
        out = numba_gemm.sgemm(a, b, stage="warptiling")
    assert out.shape == (9, 5)


def test_user_cache_overrides_defaults_per_stage(tmp_path, monkeypatch, fake_gpu):
    """Tuning one stage must not hide the committed defaults of the others."""
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    dev = fake_gpu("NVIDIA H200", (9, 0))
    data = tuning.load(path)
    tuning.record(
        data,
        "NVIDIA H200",
        (9, 0),
        "large",
        "warptiling",
        result(TINY, ms=9.0, shape=(4096, 4096, 4096)),
    )
    tuning.save(data, path)
    won = tuning.winners("large", dev)
    assert won["warptiling"]["config"] == TINY
    assert {"double_buffering", "multistage"} <= set(won)
    won["multistage"]["ms"] = -1  # a copy: the cache is not mutated
    assert tuning.winners("large", dev)["multistage"]["ms"] > 0
    # the plan's view: the same entries, merged once, read-only, and read again after a save
    view = tuning.class_view("large", dev)
    assert dict(view) == tuning.winners("large", dev) and tuning.class_view("large", dev) is view
    with pytest.raises(TypeError):
        view["warptiling"] = {}
    tuning.record(data, "NVIDIA H200", (9, 0), "large", "warptiling", result(TINY, ms=8.0))
    tuning.save(data, path)
    assert tuning.class_view("large", dev)["warptiling"]["ms"] == 8.0


def test_split_k_groups_cover_the_slices():
    from numba_gemm.kernels._splitk import counters_per_tile, groups

    assert groups(16) == (16, 1) and counters_per_tile(16) == 3  # the spread sum's three
    assert groups(64) == (8, 8) and counters_per_tile(64) == 9
    for s in range(1, 130):
        gs, g = groups(s)
        assert gs * (g - 1) < s <= gs * g  # every slice in one group, no empty group
        assert s <= 16 or gs + g < s  # two levels read fewer partials on the last block


def test_split_k_buffers_per_stream():
    """Split-K's workspace and tile counters: grow-only per stream, zeroed counters, never
    shared across streams."""
    from numba_gemm.arrays import operand
    from numba_gemm.launch.workspace import split_buffers as buffers

    def ptr(x):
        return operand(x).ptr

    s1, s2 = cuda.stream(), cuda.stream()
    w1, c1 = buffers(4, 5, 3, s1)
    assert c1.copy_to_host().tolist() == [0, 0, 0] and str(c1.dtype) == "int32"
    # zeros: the tile sums add a row's padding (N rounded up to 4), which no call writes first
    assert w1.shape == (4, 5) and not w1.copy_to_host().any()
    w, c = buffers(2, 3, 2, s1)
    assert (ptr(w), ptr(c)) == (ptr(w1), ptr(c1))  # reused on the same stream
    assert buffers(4, 5, 3, s1)[0] is w1  # the view itself is memoized
    assert ptr(buffers(4, 5, 3, s2)[0]) != ptr(w1)  # never shared across streams
    w, c = buffers(4, 5, 9, s1)  # more tiles: new counters, zeroed
    assert c.size >= 9 and not c.copy_to_host().any()


def test_stages_above_the_gpu_compute_capability_are_skipped(tmp_path, monkeypatch, rng, fake_gpu):
    """multistage needs cp.async (sm_80+): never the default on an older GPU, and a clear error
    when asked for by name (nothing written)."""
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "none.json"))
    fake_gpu("Old GPU", (7, 5))
    assert numba_gemm.get_stage("multistage").min_cc == (8, 0)
    assert plan_for(64, 64, 64).stage.name == "double_buffering"
    d_c = cuda.to_device(np.full((5, 6), np.nan, np.float32))
    with pytest.raises(ValueError, match=r"needs compute capability 8\.0\+.*7\.5"):
        numba_gemm.sgemm(
            cuda.to_device(randn(rng, (5, 3))),
            cuda.to_device(randn(rng, (3, 6))),
            stage="multistage",
            out=d_c,
        )
    assert np.isnan(d_c.copy_to_host()).all()


def test_nearest_measured_shape(tmp_path, monkeypatch, fake_gpu):
    """A measured shape prices the products near it (same alignment, within ``tuning.NEAR``);
    the nearest wins, recording a shape again replaces it, malformed candidates are dropped."""
    path = tmp_path / "t.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    dev = fake_gpu("Fake GPU", (1, 0))
    data = tuning.load(path)
    cand = dict(stage="double_buffering", config=TINY, ms=1.0, blocks_per_sm=2)
    for shape in [(256, 4096, 4096), (512, 4096, 4096)]:
        tuning.record_shape(data, "Fake GPU", (9, 0), shape, True, [cand])
    tuning.record_shape(
        data, "Fake GPU", (9, 0), (256, 4096, 4096), False, [dict(cand, ms=2.0), dict(cand, ms=0)]
    )
    tuning.record_shape(data, "Fake GPU", (9, 0), (512, 4096, 4096), True, [dict(cand, ms=3.0)])
    tuning.save(data, path)
    assert len(tuning.measured_shapes(dev)) == 3
    assert tuning.shape_distance((256, 4096, 4096), (512, 2048, 4096)) == pytest.approx(2.0)
    rec = tuning.nearest_shape(300, 4096, 4096, True, dev)
    assert rec["shape"] == [256, 4096, 4096] and rec["distance"] == pytest.approx(
        math.log2(300 / 256)
    )
    assert tuning.nearest_shape(480, 4096, 4096, True, dev)["candidates"][0]["ms"] == 3.0
    with pytest.warns(UserWarning, match="malformed measured-shape"):
        scalar = tuning.nearest_shape(256, 4095, 4095, False, dev)
    assert [c["ms"] for c in scalar["candidates"]] == [2.0]
    assert tuning.nearest_shape(256, 4096, 4096 * 3, True, dev) is None  # log2(3) + 0 > NEAR
    assert tuning.nearest_shape(64, 4096, 4096, True, dev) is None  # 2 octaves away
    assert tuning.nearest_shape(128, 4096, 4096, True, dev) is None  # 1 octave: not closer


def test_measured_shape_drives_the_pick(tmp_path, monkeypatch, fake_gpu):
    """Near a measured shape the plan prices that sweep's candidates (scaled by the wave model)
    and not the class's, whose extrapolation would have looked cheaper; a stream-K candidate
    only at its very shape; a stage named by the caller takes its measured candidate too; far
    from every measured shape the classes price again."""
    from numba_gemm.kernels._tunable import STREAM_K

    path = tmp_path / "t.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    fake_gpu("Fake GPU", (1, 0), sms=132)
    fine = dict(TINY, BM=64, BN=128, WM=32, WN=64)
    data = tuning.load(path)
    tuning.record(
        data,
        "Fake GPU",
        (9, 0),
        "narrow",
        "double_buffering",
        result(TINY, ms=0.01, shape=(128, 4096, 4096)),
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (256, 4096, 4096),
        True,
        [
            dict(
                stage="double_buffering",
                config=dict(fine, SPLITK=STREAM_K),
                ms=0.18,
                blocks_per_sm=1,
            ),
            dict(stage="warptiling", config=dict(fine, SPLITK=2), ms=0.2, blocks_per_sm=2),
        ],
    )
    tuning.save(data, path)
    at = plan_for(256, 4096, 4096)
    assert at.stage.name == "double_buffering" and at.split_k == STREAM_K
    assert at.predicted_ms == pytest.approx(0.18) and "measured shape 256x4096x4096" in at.reason
    # 5 x 32 tiles: 2 slices run two waves of 264 blocks (at 256 rows, 256 blocks: one), each
    # half of K deep; 3 slices two waves a third deep
    near = plan_for(300, 4096, 4096)
    assert near.stage.name == "warptiling" and dict(near.stage.config)["SPLITK"] == 3
    assert near.predicted_ms == pytest.approx(0.2 * 2 * 2 / 3, rel=0.05)
    named = plan_for(256, 4096, 4096, stage="warptiling")
    assert dict(named.stage.config) == dict(fine, SPLITK=2) and "measured" in named.reason
    far = plan_for(128, 4096, 4096)  # one octave away: not closer than NEAR
    assert dict(far.stage.config)["BM"] == TINY["BM"] and "narrow class" in far.reason


def test_few_rows_far_from_measured_shapes_take_the_skinny_stage_by_its_bytes(
    tmp_path, monkeypatch, fake_gpu
):
    """A product of at most ``SKINNY_ROWS`` rows far from every measured shape is priced from the
    measured shape of M to 2M rows nearest to it (rows counted twice), by the bytes of B the
    skinny stage's candidates read there (:func:`plan.stream_ms`), not by the classes; never from
    a shape of fewer rows, and not past ``SKINNY_ROWS``."""
    from numba_gemm.plan.cost import reduce_ms, stream_ms
    from numba_gemm.plan.geometry import Geometry

    path = tmp_path / "t.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    dev = fake_gpu("Fake GPU", (1, 0), sms=132)
    ring = dict(MT=8, BN=128, THREADS=256, KC=16, SPLITK=8, MINB=0, NBUF=4)
    row = dict(ring, MT=1)
    tile = dict(TINY, BM=64, BN=128, WM=32, WN=64, SPLITK=8)
    data = tuning.load(path)
    tuning.record(
        data,
        "Fake GPU",
        (9, 0),
        "skinny",
        "skinny",
        result(dict(ring, MT=16), ms=0.5, shape=(16, 4096, 4096)),
    )
    tuning.record(
        data,
        "Fake GPU",
        (9, 0),
        "skinny",
        "double_buffering",
        result(tile, ms=0.5, shape=(16, 4096, 4096)),
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (8, 4096, 4096),
        True,
        [
            dict(stage="skinny", config=ring, ms=0.03, blocks_per_sm=2),
            dict(stage="double_buffering", config=tile, ms=0.05, blocks_per_sm=2),
        ],
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (16, 768, 768),
        True,
        [dict(stage="skinny", config=dict(ring, BN=64), ms=0.01, blocks_per_sm=2)],
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (1, 8192, 8192),
        True,
        [dict(stage="skinny", config=row, ms=0.09, blocks_per_sm=4)],
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (16, 50257, 768),
        False,
        [  # tiles won there
            dict(stage="double_buffering", config=tile, ms=0.08, blocks_per_sm=2),
            dict(stage="skinny", config=dict(ring, MT=16), ms=0.09, blocks_per_sm=2),
        ],
    )
    tuning.save(data, path)

    assert tuning.nearest_shape(8, 8192, 8192, True, dev) is None  # two octaves: too far
    assert tuning.nearest_rows_shape(8, 8192, 8192, True, dev)["shape"] == [8, 4096, 4096]
    assert tuning.nearest_rows_shape(5, 1024, 1024, True, dev)["shape"] == [8, 4096, 4096]
    # rows counted twice: 16 x 768^2 is 1 + 1 away from 8 x 768^2, 8 x 4096^2 4.8
    assert tuning.nearest_rows_shape(8, 768, 768, True, dev)["shape"] == [16, 768, 768]
    assert tuning.nearest_rows_shape(2, 8192, 8192, True, dev) is None  # 1 row: fewer than M
    assert tuning.nearest_rows_shape(17, 4096, 4096, True, dev) is None  # past SKINNY_ROWS
    assert tuning.nearest_rows_shape(8, 8192, 8192, False, dev)["shape"] == [16, 50257, 768]

    # four times the bytes at a full grid; 1/8 of the bytes at 8 x 512 x 4096, whose 32 blocks
    # fill 32 of the 132 SMs; twice the reads of B at 16 rows (two row blocks of 8)
    cand = dict(stage="skinny", config=ring, ms=0.03, blocks_per_sm=2, shape=(8, 4096, 4096))
    main = 0.03 - reduce_ms(8, 8, 4096, ring, SKINNY)
    assert stream_ms(cand, 8, 8192, 8192, 132) == pytest.approx(
        4 * main + reduce_ms(8, 8, 8192, ring, SKINNY)
    )
    assert stream_ms(cand, 8, 512, 4096, 132) == pytest.approx(
        main / 8 / (32 / 132) + reduce_ms(8, 8, 512, ring, SKINNY)
    )
    assert stream_ms(cand, 16, 4096, 4096, 132) == pytest.approx(
        2 * main + reduce_ms(8, 16, 4096, ring, SKINNY)
    )

    far = plan_for(8, 8192, 8192)  # not the class's 16-row tile nor its tiled stage
    assert far.stage.name == "skinny" and dict(far.stage.config) == ring
    assert far.predicted_ms == pytest.approx(stream_ms(cand, 8, 8192, 8192, 132))
    assert "8x4096x4096 (rows near)" in far.reason and "bytes of B" in far.reason
    assert "skinny class" in plan_for(2, 8192, 8192).reason  # no shape of 2-4 rows: the classes
    # a shape of 2-4 rows whose only candidate is malformed (dropped): the classes again
    data = tuning.load(path)
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (3, 8192, 8192),
        True,
        [dict(stage="skinny", config=ring, ms=0, blocks_per_sm=2)],
    )
    tuning.save(data, path)
    tuning.reload()
    with pytest.warns(UserWarning, match="malformed measured-shape"):
        assert "skinny class" in plan_for(2, 8192, 4096).reason
    assert "measured shape 1x8192x8192" in plan_for(1, 8192, 8192).reason  # an exact one
    # odd N far from 16 x 50257 x 768, where the tiled stages won: the classes, not its skinny
    assert "skinny class" in plan_for(12, 50257, 4096, alignment=Alignment.NONE).reason
    # B stored transposed: no measured candidate serves it (these skinny configurations stream
    # B through a ring, which reads it row-major), so the classes price it, not the ladder's
    # default tiles
    for M in (8, 1):
        nt = Geometry.plain(M, 8192, 8192)._replace(layout="NT", ldb=8192)
        picked = plan_for(M, 8192, 8192, geometry=nt)
        assert picked.stage.name == "double_buffering" and "skinny class" in picked.reason
    # 24 rows: 16 x 768^2 is near (log2 1.5 < NEAR) but its sweep kept only the skinny stage,
    # which loses to tiles past SKINNY_ROWS; a class prices the product, and the 16-row shape
    # prices no more rows, nor does a shape of more rows price 16
    assert tuning.nearest_shape(24, 768, 768, True, dev) is None
    assert "measured shape" not in plan_for(24, 768, 768).reason
    tuning.record_shape(data, "Fake GPU", (9, 0), (20, 768, 768), True, [dict(cand, ms=0.01)])
    tuning.save(data, path)
    tuning.reload()
    assert tuning.nearest_shape(16, 768, 768, True, dev)["shape"] == [16, 768, 768]
    assert tuning.nearest_shape(12, 768, 768, True, dev)["shape"] == [16, 768, 768]
    assert tuning.nearest_shape(24, 768, 768, True, dev)["shape"] == [20, 768, 768]


def test_few_rows_away_from_their_measured_shape_split_k_to_fill_the_gpu(
    tmp_path, monkeypatch, fake_gpu
):
    """Priced from a measured shape of nearby rows, a skinny candidate whose split leaves at
    least half of the SMs idle here is also priced at each wider split up to one block a SM
    (``stream_splits``), and one whose slices would hold less than a chunk at the widest split
    below it that holds one; one that fills the GPU keeps the split its sweep chose."""
    from numba_gemm.plan.cost import stream_ms, stream_splits

    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "none.json"))  # the committed data
    fake_gpu("NVIDIA H200", (9, 0), sms=132)
    row = dict(MT=1, BN=128, THREADS=256, KC=16, SPLITK=8, MINB=0, NBUF=4)
    cand = dict(stage="skinny", config=row, ms=0.09, blocks_per_sm=4, shape=(1, 8192, 8192))
    # 2 tiles x 8 slices = 16 blocks: wider splits up to 64 (128 blocks; none is wider)
    assert stream_splits(cand, 1, 256, 8192, 132) == (8, 12, 16, 24, 32, 48, 64)
    assert stream_ms(cand, 1, 256, 8192, 132, 64) < stream_ms(cand, 1, 256, 8192, 132) / 3
    # 3 tiles: 24 blocks at 8 slices; stops at 48 (144 blocks, one a SM)
    assert stream_splits(cand, 1, 384, 8192, 132)[-1] == 48
    # 32 tiles x 8 = 256 blocks: the sweep's split stands
    assert stream_splits(cand, 1, 4096, 8192, 132) == (8,)
    # K = 64 in 8 slices of 8 rows, under one chunk (KC = 16): 4 slices of 16 priced too
    assert stream_splits(cand, 1, 8192, 64, 132) == (4, 8)
    # the plan, from the committed measured shapes of 1 row (4 or 8 slices there): split to
    # fill the GPU
    narrow = plan_for(1, 256, 8192)
    assert narrow.split_k >= 16 and "rows near" in narrow.reason


def test_measured_shapes_of_the_products_layout_come_first(tmp_path, monkeypatch, fake_gpu):
    """A product with B stored transposed (``x @ W.T``) is priced from the measurements of its
    own layout (the skinny configurations that read W, not the ring's), then of B stored alike,
    then the row-major ones; the few-rows search of its layout comes before a row-major shape
    however near; a row-major product keeps its own measurements."""
    from numba_gemm.plan.geometry import Geometry

    path = tmp_path / "t.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    dev = fake_gpu("Fake GPU", (1, 0), sms=132)
    ring = dict(MT=8, BN=128, THREADS=256, KC=16, SPLITK=8, MINB=0, NBUF=4)
    regs = dict(MT=8, BN=128, THREADS=256, KC=64, SPLITK=8, MINB=0, NBUF=0)  # 8 k a thread: NT too
    data = tuning.load(path)
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (8, 4096, 4096),
        True,
        [
            dict(stage="skinny", config=ring, ms=0.030, blocks_per_sm=2),
            dict(stage="skinny", config=regs, ms=0.031, blocks_per_sm=2),
        ],
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (8, 4096, 4096),
        True,
        [
            dict(stage="skinny", config=dict(regs, SPLITK=4), ms=0.035, blocks_per_sm=2),
            dict(stage="skinny", config=regs, ms=0.040, blocks_per_sm=2),
        ],
        layout="NT",
    )
    tuning.record_shape(
        data,
        "Fake GPU",
        (9, 0),
        (8, 8192, 8192),
        True,
        [dict(stage="skinny", config=ring, ms=0.1, blocks_per_sm=2)],
    )
    with pytest.raises(ValueError, match="layout must be one of"):
        tuning.record_shape(data, "Fake GPU", (9, 0), (8, 8192, 8192), True, [], layout="N")
    tuning.save(data, path)

    def near(layout, rank=None):
        rec = tuning.nearest_shape(8, 4096, 4096, True, dev, layout, rank)
        return tuning.layout_of(rec), rec["candidates"][0]["ms"]

    assert near("NN") == ("NN", 0.030) and near("TN") == ("NN", 0.030)  # B stored alike
    assert near("NT") == ("NT", 0.035) and near("TT") == ("NT", 0.035)
    assert near("NT", rank=2) == ("NN", 0.030) and near("TN", rank=1) == ("NN", 0.030)
    assert tuning.nearest_shape(8, 4096, 4096, True, dev, "TN", rank=0) is None

    def plan(M, N, K, layout):
        return plan_for(M, N, K, geometry=Geometry.dense(M, N, K, layout))

    assert dict(plan(8, 4096, 4096, "NN").stage.config) == ring
    nt = plan(8, 4096, 4096, "NT")
    assert dict(nt.stage.config) == dict(regs, SPLITK=4)
    assert "measured shape 8x4096x4096 (NT)" in nt.reason
    # 8 x 8192^2 NT: the NT shape of nearby rows, not the row-major one at this very shape
    # (whose ring configuration cannot read W)
    far = plan(8, 8192, 8192, "NT")
    assert dict(far.stage.config) == dict(regs, SPLITK=4)
    assert "8x4096x4096 (NT) (rows near)" in far.reason
    assert dict(plan(8, 8192, 8192, "NN").stage.config) == ring


def test_b_transposed_is_not_priced_from_a_sweep_of_row_major_b(tmp_path, monkeypatch, fake_gpu):
    """A tiled product with B stored transposed near a measured shape of row-major B only is
    priced from the classes (their NT times and fits), not from that sweep's row-major times;
    B stored alike (TN near NN) still takes the sweep."""
    from numba_gemm.plan.geometry import Geometry

    path = tmp_path / "t.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    monkeypatch.setattr(tuning, "DEFAULTS_DIR", tmp_path)
    fake_gpu("Fake GPU", (9, 0), sms=132)
    cfg = dict(BM=128, BN=128, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
    data = tuning.load(path)
    rec = dict(result(cfg, ms=3.2, shape=(4096, 4096, 4096)), ms_nt=3.25, blocks_per_sm_nt=1)
    tuning.record(data, "Fake GPU", (9, 0), "large", "double_buffering", rec)
    swept = [dict(stage="double_buffering", config=dict(cfg, BK=8), ms=2.9, blocks_per_sm=1)]
    tuning.record_shape(data, "Fake GPU", (9, 0), (4096, 4096, 4096), True, swept)
    tuning.save(data, path)

    def reason(layout):
        return plan_for(4096, 4096, 4096, geometry=Geometry.dense(4096, 4096, 4096, layout)).reason

    for layout in ("NN", "TN"):
        assert "the measured shape 4096x4096x4096" in reason(layout)
    for layout in ("NT", "TT"):
        assert "the large class" in reason(layout) and "measured" not in reason(layout)


def test_defaults_consult_this_gpus_entry_then_the_main_one(tmp_path, monkeypatch, fake_gpu):
    """In the committed defaults, the entry of the GPU's own name (shapes measured on that model)
    comes before the file's main entry (the most tuned classes), whose classes serve every GPU of
    the compute capability; another model's measured shapes stay out."""
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "user.json"))  # no user cache
    monkeypatch.setattr(tuning, "DEFAULTS_DIR", tmp_path)
    path = tuning.defaults_path((9, 0))
    data = tuning.load(path)
    cand = dict(stage="double_buffering", config=TINY, blocks_per_sm=2)
    # "GPU A" sorts first in the file but holds no classes: it is not the main entry
    tuning.record_shape(data, "GPU A", (9, 0), (256, 4096, 4096), True, [dict(cand, ms=1.0)])
    tuning.record(
        data,
        "GPU B",
        (9, 0),
        "large",
        "double_buffering",
        result(TINY, ms=2.0, shape=(4096, 4096, 4096)),
    )
    tuning.record_shape(data, "GPU B", (9, 0), (256, 4096, 4096), True, [dict(cand, ms=3.0)])
    tuning.save(data, path)

    def seen(dev):
        return (
            tuning.winners("large", dev)["double_buffering"]["ms"],
            [r["candidates"][0]["ms"] for r in tuning.measured_shapes(dev)],
            tuning.nearest_shape(256, 4096, 4096, True, dev)["candidates"][0]["ms"],
        )

    assert seen(fake_gpu("GPU A", (9, 0))) == (2.0, [1.0, 3.0], 1.0)  # its own shape wins a tie
    assert seen(fake_gpu("GPU B", (9, 0))) == (2.0, [3.0], 3.0)
    assert seen(fake_gpu("GPU C", (9, 0))) == (2.0, [3.0], 3.0)  # no entry: the main one


def test_committed_measured_shapes_are_valid():
    """Every committed measured shape's candidates build and price, and the shapes are distinct."""
    for path in sorted(tuning.DEFAULTS_DIR.glob("sm_*.json")):
        for entry in tuning.load(path)["gpus"].values():
            recs = entry.get("shapes", [])
            keys = [(tuple(r["shape"]), r["aligned"], tuning.layout_of(r)) for r in recs]
            assert len(set(keys)) == len(keys)
            for r in recs:
                assert r["candidates"]
                for c in r["candidates"]:
                    st = numba_gemm.get_stage(c["stage"]).with_config(c["config"])
                    assert tuning.layout_of(r) in st.layouts
                    assert tuning._valid_candidate(dict(c, shape=r["shape"]), stream_k=True)


@pytest.mark.parametrize(
    "depth, ipr, n, step, vec",
    [
        (2, 3, 5, 1, False),  # rounds of 3 items (the last round part-filled), a short last load
        (4, 1, 4, 2, True),  # every other slice
        (3, 2, 7, 1, True),
    ],
)
def test_tile_sum_adds_rounds_of_items_in_slice_order(depth, ipr, n, step, vec, rng):
    """``_splitk.make_tile_sum`` with ``ipr`` items per round: each element of the tile's part
    inside M x N is alpha times its partials added in slice order (the same bits as a float32 sum
    in that order); outside, nothing is written. The workspace's rows are N rounded up to whole
    16-byte units (read 128 bits at a time, ``vec`` or not: it says how D is written); its
    padding (NaN here) never reaches D."""
    from numba_gemm.kernels._splitk import make_tile_sum

    BM, BN, NT = 8, 16, 8  # 32 items, 4 per thread
    M, N = 13, 24 if vec else 22  # the tile at (8, 16) keeps 5 rows and 8 or 6 columns
    N4 = -(-N // 4) * 4
    S = n * step
    sum_tile = make_tile_sum(BM, BN, NT, depth, ipr)

    @cuda.jit
    def kernel(W, D):
        sum_tile(
            W,
            D,
            0,
            step,
            n,
            M,
            0,
            0,
            S * M,
            N4,
            0,
            8,
            16,
            M,
            N,
            np.float32(0.5),
            np.float32(0.0),
            vec,
            (),
        )

    W = np.full((S * M, N4), np.nan, np.float32)
    W[:, :N] = randn(rng, (S * M, N))
    d_d = cuda.to_device(np.full((M, N), np.nan, np.float32))
    kernel[1, NT](cuda.to_device(W), d_d)
    want = np.full((M, N), np.nan, np.float32)
    acc = np.zeros((5, N - 16), np.float32)
    for u in range(n):
        acc += W[u * step * M + 8 : u * step * M + 13, 16:N]
    want[8:, 16:] = np.float32(0.5) * acc
    assert np.array_equal(d_d.copy_to_host(), want, equal_nan=True)


def test_per_sm_wave_model_predicts_the_measured_shapes_from_each_other():
    """The committed H200 data's measured shapes, one configuration of the tiled stages timed at
    two of them (row-major B, aligned): each time predicted from the other comes within 25 % on
    94 % of the 734 pairs (the plain wave model: 66 %; docs/design.md §4.3). A guard on the
    model's form and ``SM_HALF_RATE_BLOCKS``, which were fitted on these data."""
    import json
    from pathlib import Path

    data = json.loads((Path(tuning.__file__).parents[1] / "tuning" / "sm_90.json").read_text())
    shapes = data["gpus"]["NVIDIA H200"]["shapes"]
    seen: dict = {}
    for rec in shapes:
        if rec.get("layout", "NN") != "NN" or not rec["aligned"]:
            continue
        for c in rec["candidates"]:
            if c["stage"] in ("double_buffering", "multistage", "warptiling") and c["config"].get(
                "SPLITK"
            ):
                key = (c["stage"], json.dumps(c["config"], sort_keys=True))
                seen.setdefault(key, []).append(dict(c, shape=rec["shape"]))
    errs = [
        abs(math.log(b["ms"] / estimate_ms(a, *b["shape"], sms=132)))
        for runs in seen.values()
        for a in runs
        for b in runs
        if a is not b
    ]
    assert len(errs) > 500
    assert sum(e < math.log(1.25) for e in errs) / len(errs) >= 0.9
