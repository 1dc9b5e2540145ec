"""The skinny stages on configurations that exercise their index maps. Stage 15 (few rows of A):
one to 16 rows per block, row blocks past MT, K split over the grid and over the k-groups,
several super-chunks of A in SMEM, ragged N (scalar variant); and the launch layer's split-K
choice. Stage 16 (few columns of B): column blocks past NB, K chunks and slices, the lanes'
reduce-scatter for 4 to 64 sums per lane."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_sgemm

import numba_gemm
from numba_gemm.device import SIMULATOR
from numba_gemm.kernels import k15_skinny, k16_skinny_n
from numba_gemm.plan.cost import SPLITS, split_options

CASES = [
    (dict(MT=1, BN=8, THREADS=32, KC=32, SPLITK=2, MINB=0, NBUF=0), (3, 9, 70)),  # 3 row blocks
    (dict(MT=2, BN=8, THREADS=32, KC=16, SPLITK=2, MINB=0, NBUF=0), (2, 13, 21)),
    # N ragged: scalar loads
    (dict(MT=4, BN=16, THREADS=32, KC=8, SPLITK=1, MINB=0, NBUF=0), (3, 37, 29)),
    (dict(MT=8, BN=16, THREADS=32, KC=8, SPLITK=3, MINB=0, NBUF=0), (9, 40, 50)),
    # 3 super-chunks of A; then K in two levels of slices (5 + 5 + 5 + 3)
    (dict(MT=16, BN=16, THREADS=32, KC=16, SPLITK=1, MINB=0, NBUF=0), (5, 16, 600)),
    (dict(MT=2, BN=8, THREADS=32, KC=16, SPLITK=18, MINB=0, NBUF=0), (3, 12, 150)),
    # a GEMV's B chunk loaded before A is staged: 2 super-chunks of A (4096 + 54), ragged N
    (dict(MT=1, BN=4, THREADS=32, KC=32, SPLITK=1, MINB=0, NBUF=0), (2, 5, 4150)),
    # 2-8 rows, chunks in two halves (the next half's loads before this half's FMAs): 3
    # super-chunks of A (512 + 512 + 76, the last chunk ragged), ragged N; then 128-bit loads
    (dict(MT=8, BN=16, THREADS=32, KC=16, SPLITK=1, MINB=0, NBUF=0), (6, 21, 1100)),
    (dict(MT=4, BN=16, THREADS=32, KC=32, SPLITK=2, MINB=0, NBUF=0), (4, 40, 600)),
    # B through a ring of NBUF chunks in SMEM (cp.async): 69 chunks round a ring of 3 over 3
    # super-chunks of A, ragged N (4-byte copies); 128-bit copies into a ring of 2 over two
    # slices; a ring of 4 deeper than each slice (3 + 3 + 1 chunks: empty groups), 3 row blocks
    (dict(MT=8, BN=16, THREADS=32, KC=16, SPLITK=1, MINB=0, NBUF=3), (6, 21, 1100)),
    (dict(MT=4, BN=16, THREADS=32, KC=32, SPLITK=2, MINB=0, NBUF=2), (4, 40, 600)),
    (dict(MT=1, BN=8, THREADS=32, KC=16, SPLITK=3, MINB=0, NBUF=4), (3, 12, 100)),
]


def with_betas(cases, name):
    """``cases`` with beta 0 (C NaN-poisoned and not read) and beta 0.5 (C read); on the
    simulator each case with one of them, in turn along the list, so that each beta meets
    unsplit K, split K (two levels included) and, for skinny, a ring of B chunks (the beta
    epilogue is the stage's, the same for every configuration; both betas per case on a GPU)."""
    return [
        pytest.param(cfg, shape, beta, id=f"{beta}-{name(cfg)}")
        for beta in (0.0, 0.5)
        for i, (cfg, shape) in enumerate(cases)
        if not SIMULATOR or i % 2 == (beta != 0.0)
    ]


@pytest.mark.parametrize(
    "cfg, shape, beta",
    with_betas(CASES, lambda c: f"MT{c['MT']}-S{c['SPLITK']}-NBUF{c['NBUF']}"),
)
def test_skinny_configs(cfg, shape, beta, rng):
    stage = numba_gemm.get_stage("skinny").with_config(cfg)
    err, out = check_sgemm(stage, rng, *shape, alpha=1.5, beta=beta)
    assert np.isfinite(out).all() and err <= 1e-5, f"{cfg} {shape}: rel. error {err:.3g}"


def test_skinny_rejects_bad_configs():
    st = numba_gemm.get_stage("skinny")
    for change, msg in [
        (dict(MT=3), "MT must be"),
        (dict(KC=20), "multiple of the k-group"),
        (dict(SPLITK=65), "SPLITK"),
        (dict(BM=64), "unknown"),
        (dict(NBUF=1), "NBUF must be"),
        (dict(BN=256, THREADS=256, KC=64, NBUF=4), "bytes of SMEM"),
    ]:
        with pytest.raises(ValueError, match=msg):
            st.with_config(dict(st.config, **change))
    assert not k15_skinny.supports(k15_skinny.MAX_M + 1, 8, 8)
    assert all(st.with_config(c).config == c for c in st.space)


def test_skinny_b_transposed_needs_registers_and_steps_of_four():
    """B stored transposed (layouts NT, TT) only with B in registers and KC / KG a multiple of 4:
    a ring configuration and one with two loads per chunk serve B row-major only, and asking
    for their transposed kernel says which layouts they serve."""
    base = dict(MT=8, BN=16, THREADS=32, KC=32, SPLITK=1, MINB=0)
    assert k15_skinny.make_stage(dict(base, NBUF=0)).layouts == k15_skinny.LAYOUTS
    for cfg in (dict(base, NBUF=3), dict(base, KC=16, NBUF=0)):  # a ring; KC / KG = 2
        st = k15_skinny.make_stage(cfg)
        assert st.layouts == ("NN", "TN")
        with pytest.raises(ValueError, match=r"serves layouts \(.NN., .TN.\), not .NT."):
            st.kernel_for("vector", "NT")


def test_split_options_fill_at_most_four_waves_of_resident_blocks():
    """The launch layer re-splits K only when the candidate's tiles fill less than one wave of its
    resident blocks (``blocks_per_sm``, or ``per_sm``), into any of SPLITS (not only powers of
    two) up to four such waves, never below MIN_SLICE_TILES K steps per slice; a candidate whose
    tiles are mostly empty (2 M < BM) keeps the old rule: only while most SMs are idle, up to one
    block a SM; a tensor-core stage's candidate keeps it, in powers of two."""
    cfg = dict(BM=128, BN=128, BK=16, SPLITK=1)
    cand = dict(stage="double_buffering", config=cfg, blocks_per_sm=2)
    assert split_options(cand, 4096, 4096, 4096, sms=132) == (1,)  # 1024 tiles: full
    assert split_options(cand, 256, 256, 65536, sms=132) == SPLITS  # 4 tiles
    assert split_options(cand, 256, 256, 65536, sms=132, per_sm=1) == SPLITS
    assert split_options(cand, 256, 256, 512, sms=132) == (1, 2, 3, 4)  # slices >= 8 x BK deep
    assert split_options(cand, 2000, 2000, 65536, sms=132) == (1, 2, 3, 4)  # 256 tiles: 4 waves
    assert split_options(cand, 2048, 2176, 65536, sms=132) == (1,)  # 272 tiles: past one wave
    assert split_options(dict(cand, config=dict(cfg, SPLITK=4)), 1024, 1024, 16384, sms=132) == (
        1,
        2,
        3,
        4,
        5,
        6,
        8,
        12,
        16,
    )  # 64 tiles: up to 1056 blocks
    # 16 rows of a 128-row tile: 32 tiles, at most one block a SM; 64 tiles, more than half busy
    assert split_options(cand, 16, 4096, 4096, sms=132) == (1, 2, 3, 4)
    assert split_options(cand, 16, 4096, 4096, sms=132, per_sm=2) == (1, 2, 3, 4, 5, 6, 8)  # sweep
    assert split_options(cand, 16, 8192, 4096, sms=132) == (1, 2)
    assert split_options(cand, 16, 16384, 4096, sms=132) == (1,)
    # a tensor-core stage keeps the old rule and powers of two (the wider splits ran on FP32 only)
    tc = dict(stage="tf32_wgmma", config=dict(BM=128, BN=128, BK=32, NBUF=4, SPLITK=1))
    assert split_options(dict(tc, blocks_per_sm=2), 256, 256, 65536, sms=132) == (
        1,
        2,
        4,
        8,
        16,
        32,
    )  # 4 tiles: one block a SM
    assert split_options(dict(tc, blocks_per_sm=2), 128, 4608, 3584, sms=132) == (
        1,
        2,
    )  # 36 tiles: 3 would fit


# --- stage 16, skinny N: the transpose (few columns of B, A streamed along K)

CASES_N = [
    (dict(NB=4, RW=1, THREADS=32, KC=128, SPLITK=1, MINB=0), (3, 5, 200)),  # 2 column blocks of 4
    (dict(NB=4, RW=2, THREADS=64, KC=128, SPLITK=2, MINB=0), (9, 4, 300)),  # 3 chunks over 2 slices
    (
        dict(NB=8, RW=4, THREADS=64, KC=128, SPLITK=3, MINB=0),
        (5, 12, 260),
    ),  # N ragged: scalar loads
    (dict(NB=16, RW=2, THREADS=128, KC=256, SPLITK=1, MINB=0), (7, 16, 132)),  # 32 sums per lane
    (dict(NB=16, RW=4, THREADS=64, KC=128, SPLITK=1, MINB=0), (4, 16, 64)),  # 64 sums, 2 per lane
    (dict(NB=4, RW=1, THREADS=64, KC=128, SPLITK=18, MINB=0), (3, 8, 2304)),  # 2 levels: 5+5+5+3
]


@pytest.mark.parametrize(
    "cfg, shape, beta",
    with_betas(CASES_N, lambda c: f"NB{c['NB']}-RW{c['RW']}-S{c['SPLITK']}"),
)
def test_skinny_n_configs(cfg, shape, beta, rng):
    stage = numba_gemm.get_stage("skinny_n").with_config(cfg)
    err, out = check_sgemm(stage, rng, *shape, alpha=1.5, beta=beta)
    assert np.isfinite(out).all() and err <= 1e-5, f"{cfg} {shape}: rel. error {err:.3g}"


@pytest.mark.parametrize("V", [4, 8, 16, 32, 64])
def test_skinny_n_lane_map_sums_every_value_once(V):
    """The reduce-scatter's index map, replayed in NumPy with the kernel's own exchange rule: the
    lanes that own totals cover each of the V sums exactly once, and each equals the sum over the
    32 lanes (a wrong ``lane_sums_owned`` or exchange order fails here, as in the kernel)."""
    rng = np.random.default_rng(V)
    vals = rng.integers(-1000, 1000, size=(32, V)).astype(np.int64)
    v = vals.copy()
    length = V
    for s in range(5):
        o = 16 >> s
        w = v.copy()
        for lane in range(32):
            p = lane ^ o
            if length >= 2:
                half = length // 2
                up = bool(lane & o)
                for i in range(half):
                    keep = w[lane, i + half] if up else w[lane, i]
                    got = w[p, i + half] if up else w[p, i]  # what the partner sends
                    v[lane, i] = keep + got
            else:
                v[lane, 0] = w[lane, 0] + w[p, 0]
        length = max(length // 2, 1)
    seen = np.zeros(V, int)
    for lane in range(32):
        first, count, owner = k16_skinny_n.lane_sums_owned(V, lane)
        assert count == max(V // 32, 1)
        if owner:
            seen[first : first + count] += 1
            assert (v[lane, :count] == vals[:, first : first + count].sum(axis=0)).all()
    assert (seen == 1).all(), seen


def test_skinny_n_rejects_bad_configs():
    st = numba_gemm.get_stage("skinny_n")
    for change, msg in [
        (dict(NB=2), "NB must be"),
        (dict(KC=192), "multiple of 128"),
        (dict(RW=8, NB=16), "64 partial sums"),
        (dict(RW=4, KC=512), "8 loads"),
        (dict(THREADS=64, KC=512), "8 float4s of the B tile"),
        (dict(SPLITK=65), "SPLITK"),
        (dict(BM=64), "unknown"),
    ]:
        with pytest.raises(ValueError, match=msg):
            st.with_config(dict(st.config, **change))
    assert not k16_skinny_n.supports(8, k16_skinny_n.MAX_N + 1, 8)
    assert all(st.with_config(c).config == c for c in st.space)
