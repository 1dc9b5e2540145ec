"""Stream-K (``kernels._streamk``): the decomposition on the host, the tunable stages' kernels with
a stream-K grid on the simulator (or a GPU), and its place in the plan."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from helpers import randn
from numba import cuda

import numba_gemm
from numba_gemm import device
from numba_gemm.kernels import _streamk
from numba_gemm.kernels._tunable import STREAM_K
from numba_gemm.launch.launcher import runner
from numba_gemm.plan import choose as plan
from numba_gemm.plan.cost import _touched, split_options
from numba_gemm.tools.reference import reference_f64, rel_error

#: One 64 x 64 tile of 4 warps: 130 x 70 has 3 x 2 tiles.
SMALL = dict(BM=64, BN=64, BK=8, WM=32, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=STREAM_K)
TILED = ("warptiling", "double_buffering", "multistage")


def small(name: str):
    return numba_gemm.get_stage(name).with_config(
        dict(SMALL, **({"NBUF": 3} if name == "multistage" else {}))
    )


def test_decomposition_covers_every_iteration_once():
    """Every (tile, K tile) is computed by exactly one unit; a shared tile's units hold its slots
    ``first .. first + count - 1`` (distinct across tiles, below ``partial_slots``), a whole one
    writes C; stream-K ranges differ by at most one K tile; whole-tile waves come first."""
    for T, I, G in itertools.product(range(1, 26), range(1, 10), range(1, 31)):
        seen, slots, units_of = {}, set(), {}
        work = [0] * G
        for c in range(G):
            for u in range(_streamk.units(c, T, I, G)):
                t, ib, ie, slot, first, count, counter = _streamk.unit(c, u, T, I, G)
                assert 0 <= ib < ie <= I and 0 <= t < T
                for i in range(ib, ie):
                    assert (t, i) not in seen
                    seen[t, i] = c
                units_of.setdefault(t, []).append((slot, first, count, counter))
                if t >= _streamk.dp_tiles(T, G):
                    work[c] += ie - ib
        assert len(seen) == T * I
        for us in units_of.values():
            count = us[0][2]
            assert all(x[2] == count for x in us) and len(us) == count
            if count > 1:
                first = us[0][1]
                assert sorted(x[0] for x in us) == list(range(first, first + count))
                assert not slots & {x[0] for x in us}
                slots |= {x[0] for x in us}
                assert max(slots) < _streamk.partial_slots(T - _streamk.dp_tiles(T, G), G)
                assert len({x[3] for x in us}) == 1
        q = _streamk.quantum(T, I, G)  # every block's share but the last busy one's
        busy = [w for w in work if w]
        assert all(w == q for w in busy[:-1]) and (not busy or busy[-1] <= q)


def test_price_counts_the_busiest_blocks_units():
    """The cost model's count of the most shared tiles one block touches (``cost._touched``,
    closed form or a walk over the grid's start offsets) against the decomposition itself: never
    fewer, and one more only where the block of that offset is the last, whose range is cut
    short."""
    rng = np.random.default_rng(7)
    exact = 0
    for _ in range(400):
        G = int(rng.integers(1, 300))
        T, I = int(rng.integers(G, 4 * G + 1)), int(rng.integers(1, 700))
        dp = _streamk.dp_tiles(T, G)
        q = -(-(T - dp) * I // G)
        most = max(_streamk.units(c, T, I, G) for c in range(G)) - dp // G
        got = _touched(q, I, G, T - dp)
        assert most <= got <= most + 1, (T, I, G)
        exact += got == most
    assert exact >= 390


def test_hybrid_schedule():
    """Whole-tile waves only when the tiles fill two waves or more: 4097^3 in 128 x 128 tiles on
    264 slots runs 3 whole waves and shares the last 297 tiles; 36 tiles on 132 are all shared."""
    assert _streamk.dp_tiles(33 * 33, 264) == 3 * 264
    assert _streamk.dp_tiles(36, 132) == 0
    assert _streamk.dp_tiles(1024, 256) == 1024  # whole waves: nothing to share
    assert _streamk.blocks(4, 2, 132) == 8  # never more blocks than iterations


def _run(st, M, N, K, sms, rng, calls=((1.0, 0.0), (1.5, 0.5))):
    dev = dataclasses.replace(
        device.SIMULATED if device.SIMULATOR else device.info(0), sm_count=sms
    )
    p = plan.plan_for(M, N, K, stage=st, device=dev)
    assert p.split_k == STREAM_K and p.grid[1:] == (1, 1)
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    for alpha, beta in calls:  # the second call finds the counters back at 0
        c0 = np.full((M, N), np.nan, np.float32) if beta == 0 else randn(rng, (M, N))
        d_c = cuda.to_device(c0)
        p.launch(d_a, d_b, d_c, alpha, beta)
        assert rel_error(d_c.copy_to_host(), reference_f64(a, b, c0, alpha, beta)) <= 1e-5
    return p


#: The stages of :func:`test_stream_k_kernels`. On the simulator not double_buffering: the units
#: and their fix-up are ``_tunable``'s, one code for the three stages, run here by warptiling and
#: multistage (its own K loop); double_buffering's K loop over part of a tile's K runs in
#: test_tuning's split-K test, and its stream-K grid in :func:`test_stream_k_hybrid_kernel`.
SHARED_TILES = ("warptiling", "multistage") if device.SIMULATOR else TILED


@pytest.mark.parametrize("name", SHARED_TILES)
def test_stream_k_kernels(name, rng):
    """2 tiles of 13 K tiles shared by 3 blocks (a tile with 2 contributors, one with 3 ... and
    ragged edges in M, N and K)."""
    p = _run(small(name), 70, 100, 100, 3, rng)
    if device.SIMULATOR:  # one resident block per SM there: the runner clamps the plan's grid
        assert runner(p).grid == (3, 1, 1)


def test_stream_k_hybrid_kernel(rng):
    """6 tiles on 2 blocks: two whole-tile waves, then 2 tiles shared; the unaligned shape runs
    the scalar kernel."""
    _run(small("double_buffering"), 130, 70, 100, 2, rng)
    st = small("multistage")
    _run(st, 130, 71, 33, 2, rng, calls=((1.0, 0.0),))


def test_stream_k_configs():
    """SPLITK = STREAM_K is a valid configuration of the tiled stages; a batch cannot take it."""
    st = small("warptiling")
    assert st.split_k == STREAM_K
    g = plan.Geometry(2, 64, 64, 64, "NN", 64, 64, 64, 64 * 64, 64 * 64, 64 * 64)
    assert "not a batch" in plan.serves(st, g)
    with pytest.raises(ValueError, match="SPLITK"):
        numba_gemm.get_stage("warptiling").with_config(dict(SMALL, SPLITK=-1))


def test_stream_k_not_picked_automatically(fake_gpu):
    """The wave model cannot rank stream-K (it mispicked it on an H200, docs/design.md): no K
    split it offers is stream-K (only a candidate with a measured twin is priced as one,
    ``cost.stream_k_ms``: test_tuning); a stream-K grid is one block per resident slot."""
    cfg = dict(BM=128, BN=128, BK=16, WM=64, WN=64, WNITER=2, TM=4, TN=8, MINB=1, SPLITK=1)
    cand = dict(
        stage="double_buffering", config=cfg, shape=(4096, 4096, 4096), ms=3.0, blocks_per_sm=2
    )
    assert STREAM_K not in split_options(cand, 4097, 4097, 4097, sms=132)
    assert STREAM_K not in split_options(cand, 256, 256, 4096, sms=132)
    dev = fake_gpu("Fake GPU", (9, 0), sms=132)
    st = numba_gemm.get_stage("double_buffering").with_config(dict(cfg, SPLITK=STREAM_K))
    p = plan.plan_for(4097, 4097, 4097, stage=st, device=dev)
    assert p.split_k == STREAM_K and p.tiles == 33 * 33
    assert p.grid == (132 * 2, 1, 1)  # 8 warps per SM of 4 (clamped again when loaded)
