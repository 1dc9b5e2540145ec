"""The skinny stage (few rows of A) on configurations that exercise its index maps: one to 16 rows
per block, row blocks past MT, K split over the grid and over the k-groups, several super-chunks
of A in SMEM, ragged N (scalar variant); and the launch layer's split-K choice."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_sgemm

import numba_gemm
from numba_gemm.kernels import k15_skinny
from numba_gemm.plan import split_options

CASES = [
    (dict(MT=1, BN=8, NT=32, KC=32, SPLITK=2, MINB=0), (3, 9, 70)),  # 3 row blocks of 1
    (dict(MT=2, BN=8, NT=32, KC=16, SPLITK=2, MINB=0), (2, 13, 21)),
    (dict(MT=4, BN=16, NT=32, KC=8, SPLITK=1, MINB=0), (3, 37, 29)),  # N ragged: scalar loads
    (dict(MT=8, BN=16, NT=32, KC=8, SPLITK=3, MINB=0), (9, 40, 50)),
    (dict(MT=16, BN=16, NT=32, KC=16, SPLITK=1, MINB=0), (5, 16, 600)),  # 3 super-chunks of A
    (dict(MT=2, BN=8, NT=32, KC=16, SPLITK=18, MINB=0), (3, 12, 150)),  # 2 levels: 5+5+5+3
]


@pytest.mark.parametrize("cfg, shape", CASES, ids=[f"MT{c['MT']}-S{c['SPLITK']}" for c, _ in CASES])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_skinny_configs(cfg, shape, beta, rng):
    stage = numba_gemm.get_stage("skinny").with_config(cfg)
    err, out = check_sgemm(stage, rng, *shape, alpha=1.5, beta=beta)
    assert np.isfinite(out).all() and err <= 1e-5, f"{cfg} {shape}: rel. error {err:.3g}"


def test_skinny_rejects_bad_configs():
    st = numba_gemm.get_stage("skinny")
    for change, msg in [(dict(MT=3), "MT must be"), (dict(KC=20), "multiple of the k-group"),
                        (dict(SPLITK=65), "SPLITK"), (dict(BM=64), "unknown")]:
        with pytest.raises(ValueError, match=msg):
            st.with_config(dict(st.config, **change))
    assert not k15_skinny.supports(k15_skinny.MAX_M + 1, 8, 8)
    assert all(st.with_config(c).config == c for c in st.space)


def test_split_options_only_for_idle_sms():
    """The launch layer re-splits K only when the candidate's blocks leave most SMs idle, and
    never below MIN_SLICE_TILES K steps per slice or past one block per SM."""
    cfg = dict(BM=128, BN=128, BK=16, SPLITK=1)
    cand = dict(config=cfg, blocks_per_sm=2)
    assert split_options(cand, 4096, 4096, 4096, sms=132) == (1,)  # 1024 tiles: full
    assert split_options(cand, 256, 256, 65536, sms=132) == (1, 2, 4, 8, 16, 32)  # 4 tiles
    assert split_options(cand, 256, 256, 512, sms=132) == (1, 2, 4)  # slices >= 8 x BK deep
    assert split_options(dict(cand, config=dict(cfg, SPLITK=4)), 1024, 1024, 16384,
                         sms=132) == (4,)  # 64 tiles x 4: more than half the SMs busy
