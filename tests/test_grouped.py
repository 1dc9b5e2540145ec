"""Grouped products (``grouped_mm``, ``launch.grouped``): one persistent launch over every
group's tiles, groups given by their end rows on the device; empty groups, both layouts of the
experts' matrices, shared weights, unaligned rows; the errors of bad arguments."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from helpers import device_view, randn, to_device
from numba import cuda

import numba_gemm
from numba_gemm.tools.reference import rel_error


def _reference(a, b, ends):
    want = np.full((a.shape[0], b.shape[2]), np.nan)
    start = 0
    for g, end in enumerate(ends):
        end = min(max(int(end), start), a.shape[0])
        want[start:end] = a[start:end].astype(np.float64) @ b[g].astype(np.float64)
        start = end
    return want


# (group sizes, K, N, layout of b): an empty group, rows not a multiple of any tile; K and N
# not multiples of 4 (the scalar variant); b stored (E, N, K), as x @ W_g.T
CASES = [
    ([10, 0, 20, 7], 20, 24, "NN"),
    ([3, 5, 0], 13, 9, "NN"),
    ([6, 0, 0, 11, 2], 16, 20, "NT"),
]


@pytest.mark.parametrize("sizes, K, N, layout", CASES, ids=lambda x: str(x))
def test_grouped_matches_float64(rng, sizes, K, N, layout):
    T, E = sum(sizes), len(sizes)
    ends = np.cumsum(sizes).astype(np.int32)
    a = randn(rng, (T, K))
    if layout == "NN":
        b = randn(rng, (E, K, N))
        d_b = to_device(b)
    else:  # the experts' (N, K) weights, read as (E, K, N) without a copy
        w = randn(rng, (E, N, K))
        b = w.transpose(0, 2, 1)
        d_b = device_view(to_device(w), (E, K, N), (4 * N * K, 4, 4 * K))
    out = to_device(np.full((T, N), np.nan, np.float32))
    got = numba_gemm.grouped_mm(to_device(a), d_b, to_device(ends), out=out)
    assert got is out
    assert rel_error(out.copy_to_host(), _reference(a, b, ends)) < 1e-5


def test_shared_weights_clamped_ends_and_a_new_output(rng):
    """One matrix for every group (batch stride 0), ends past T clamped to T and a decreasing
    end making an empty group; rows past the last end are not written; a new output."""
    T, K, N = 21, 12, 16
    a, w = randn(rng, (T, K)), randn(rng, (K, N))
    ends = np.array([5, 3, 15], np.int32)  # the second group is empty (3 < 5)
    d_b = device_view(to_device(w), (3, K, N), (0, 4 * N, 4))
    out = to_device(np.full((T, N), np.nan, np.float32))
    numba_gemm.grouped_mm(to_device(a), d_b, to_device(ends), out=out)
    got = out.copy_to_host()
    assert rel_error(got[:15], a[:15].astype(np.float64) @ w) < 1e-5
    assert np.isnan(got[15:]).all()  # past the last group's end: not written
    new = numba_gemm.grouped_mm(to_device(a), d_b, to_device(np.array([2, 9, 30], np.int32)))
    assert new.shape == (T, N)
    assert rel_error(new.copy_to_host(), a.astype(np.float64) @ w) < 1e-5  # clamped to T


def test_bad_grouped_arguments_raise_and_write_nothing(rng):
    T, K, N, E = 8, 4, 6, 2
    d_a, d_b = to_device(randn(rng, (T, K))), to_device(randn(rng, (E, K, N)))
    ends = to_device(np.array([3, 8], np.int32))
    poison = np.full((T, N), np.nan, np.float32)
    bad = [
        ((d_a, d_b, to_device(np.array([3, 8], np.int64))), TypeError, "offsets must be int32"),
        ((d_a, d_b, to_device(np.array([3, 5, 8], np.int32))), ValueError, "one end row per"),
        ((d_a, to_device(randn(rng, (K, N))), ends), ValueError, "b must be 3-D"),
        ((d_a, to_device(randn(rng, (E, K + 1, N))), ends), ValueError, "inner|K = "),
        ((to_device(randn(rng, (T, K)).astype(np.float16)), d_b, ends), TypeError, "float32"),
    ]
    for args, error, words in bad:
        d_c = to_device(poison)
        with pytest.raises(error, match=words):
            numba_gemm.grouped_mm(*args, out=d_c)
        assert np.isnan(d_c.copy_to_host()).all()
    with pytest.raises(ValueError, match="out must be a C-contiguous"):
        numba_gemm.grouped_mm(d_a, d_b, ends, out=cuda.to_device(np.zeros((T, N + 1), np.float32)))


def test_bench_splits_tokens_unevenly_with_empty_experts():
    """``tools.grouped``'s uneven splits: the asked total, a quarter of the experts (not all)
    empty, the same split for the same seed; its CLI parses without PyTorch."""
    from numba_gemm.tools import grouped

    for experts, mean in ((8, 1), (8, 16), (64, 512), (1, 3), (2, 1)):
        sizes = grouped.group_sizes(experts, mean, seed=3)
        assert len(sizes) == experts and sum(sizes) == experts * mean
        assert min(sizes) >= 0 and any(sizes)
        if experts >= 4:
            assert sizes.count(0) >= experts // 4
        assert sizes == grouped.group_sizes(experts, mean, seed=3)
    with pytest.raises(SystemExit) as e:
        grouped.main(["--help"])
    assert e.value.code == 0


def test_sweep_configs_are_valid_and_apart_from_the_benchmarked_layers():
    """``tools.grouped --sweep``: every configuration is a valid multistage, double_buffering or
    skinny one, every fixed configuration the automatic choice takes is among them, and no swept
    shape is one the bench reports."""
    from numba_gemm.kernels import k09_double_buffering, k10_multistage, k15_skinny
    from numba_gemm.launch import grouped as launch
    from numba_gemm.tools import grouped

    for cfg in grouped.SWEEP_CONFIGS.values():
        k10_multistage.check_config(cfg)
    for cfg in grouped.SWEEP_DOUBLE.values():
        k09_double_buffering.check_config(cfg)
    for cfg in grouped.SWEEP_SKINNY.values():
        k15_skinny.check_config(cfg)
    assert launch.FEW_ROWS_CONFIG in grouped.SWEEP_CONFIGS.values()
    for _, layouts, cfg in launch.SKINNY_RULE:
        assert cfg in grouped.SWEEP_SKINNY.values()
        assert all(x in k15_skinny.layouts_of(cfg) for x in layouts)
    assert not set(grouped.SWEEP_LAYERS) & set(grouped.LAYERS.values())


# mean rows a group -> MT (skinny) or BM (multistage) of the automatic choice, by layout
# (docs/design.md §3.2); None: the planner's tiles
TILE_TABLE = {
    "NN": {1: 4, 2: 4, 3: 8, 8: 8, 9: 32, 16: 32, 28: 32, 29: 32, 255: 32, 256: None},
    "NT": {1: 4, 2: 4, 3: 8, 8: 8, 9: 16, 16: 16, 28: 16, 29: None, 255: None, 256: None},
}


@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_grouped_tiles_follow_the_mean_group(layout):
    """The automatic choice (``launch.grouped.few_rows_choice``, ``dispatch.grouped_runner``):
    skinny tiles of 4, 8 (and with B transposed 16) rows for a mean group of a handful of rows,
    with B row-major 32-row multistage tiles below ``FEW_ROWS``, the planner's tiles from there
    on (with B transposed, past the skinny tiles)."""
    from numba_gemm import dispatch
    from numba_gemm.launch import grouped as launch

    cuda.current_context()  # (a runner loads its kernel: on a GPU, in the current context)
    for rows, want in TILE_TABLE[layout].items():
        choice = launch.few_rows_choice(rows, layout)
        if want is None:
            assert choice is None and (layout == "NT" or rows >= launch.FEW_ROWS)
            continue
        name, items = choice
        cfg = dict(items)
        if want in (4, 8, 16):
            assert name == "skinny" and cfg["MT"] == want, (rows, cfg)
        else:
            ms = launch.FEW_ROWS_CONFIG
            assert name == "multistage" and cfg == ms and cfg["BM"] == want, (rows, cfg)
        r = dispatch.grouped_runner(rows * 8, 40, 24, 8, layout, True, 0)
        assert (r.stage.name, dict(r.stage.config)) == (name, cfg)


@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_planned_grouped_stage_is_the_cheapest_plan_of_its_layouts_stages(monkeypatch, layout):
    """Groups of many rows take the planner's tiles for the mean group without split-K: with B
    row-major multistage's plan, with B transposed the cheaper of multistage's and
    double_buffering's (unpriced, without tuning data: multistage's)."""
    from numba_gemm import dispatch, get_stage

    asked = []

    def plan_for(M, N, K, stage, device, geometry):
        asked.append(stage)
        st = get_stage(stage).with_config(dict(get_stage(stage).config, SPLITK=2))
        ms = {"multistage": 2.0, "double_buffering": 1.0}[stage] if prices else None
        return SimpleNamespace(stage=st, predicted_ms=ms, device="dev")

    monkeypatch.setattr(dispatch, "plan_for", plan_for)
    for prices in (True, False):
        asked.clear()
        stage, dev = dispatch.planned_grouped_stage(300, 512, 256, layout, 0)
        assert asked == list(dispatch.GROUPED_PLANNED[layout]) and dev == "dev"
        want = "double_buffering" if layout == "NT" and prices else "multistage"
        assert stage.name == want and stage.config["SPLITK"] == 1


def _check_two_blocks(rng, stage, sizes, K, N, layout, vec):
    """``stage``'s grouped kernel on groups ``sizes`` (the last row in no group) with a
    persistent grid of two blocks, each running many units: every group's rows against float64,
    the last row unwritten."""
    from numba_gemm import device
    from numba_gemm.arrays import operand
    from numba_gemm.launch.grouped import GroupedRunner

    T, E = sum(sizes), len(sizes)
    ends = np.cumsum(sizes).astype(np.int32)
    ends[-1] -= 1  # the last row belongs to no group
    a = randn(rng, (T, K))
    if layout == "NN":
        b = randn(rng, (E, K, N))
        d_b = to_device(b)
    else:
        w = randn(rng, (E, N, K))
        b = w.transpose(0, 2, 1)
        d_b = device_view(to_device(w), (E, K, N), (4 * N * K, 4, 4 * K))
    out = to_device(np.full((T, N), np.nan, np.float32))
    runner = GroupedRunner(stage, layout, vec, device.info(0))
    runner.slots = 2  # a persistent grid of two blocks, each running many units
    ops = [operand(x) for x in (to_device(a), d_b, out, to_device(ends))]
    runner.run(*ops, 0)
    got = out.copy_to_host()
    assert rel_error(got[:-1], _reference(a, b, ends)[:-1]) < 1e-5
    assert np.isnan(got[-1]).all()


# stage 15's forms at simulator sizes: B in registers (either layout), one row (B's first chunk
# before A), 2 rows (the chunk in halves), a cp.async ring of B (row-major only)
SKINNY_GROUPED = [
    dict(MT=4, BN=16, THREADS=32, KC=32, SPLITK=1, MINB=0, NBUF=0),
    dict(MT=1, BN=8, THREADS=32, KC=64, SPLITK=1, MINB=0, NBUF=0),
    dict(MT=2, BN=16, THREADS=32, KC=16, SPLITK=1, MINB=0, NBUF=0),
    dict(MT=8, BN=16, THREADS=32, KC=16, SPLITK=1, MINB=0, NBUF=3),
]


@pytest.mark.parametrize("cfg", SKINNY_GROUPED, ids=lambda c: f"MT{c['MT']}-NBUF{c['NBUF']}")
@pytest.mark.parametrize(
    "sizes, K, N, layout, vec",
    [([10, 0, 20, 7, 1], 20, 36, "NN", True), ([6, 0, 0, 11, 2], 13, 35, "NT", False)],
    ids=["NN-vector", "NT-scalar"],
)
def test_grouped_skinny_tiles_match_float64(rng, cfg, sizes, K, N, layout, vec):
    """Stage 15's grouped kernel (the tiles of groups of a few rows): a group of more than MT
    rows takes several tiles, an empty one none; rows past the last end stay unwritten. Two
    blocks walk the work list (3 or 5 column tiles a row of tiles, so a block's units change
    column), on the GPU too."""
    from numba_gemm import get_stage

    stage = get_stage("skinny").with_config(cfg)
    if layout not in stage.layouts:
        pytest.skip(f"this configuration does not serve B transposed ({stage.config})")
    _check_two_blocks(rng, stage, sizes, K, N, layout, vec)


# the tiled stages' grouped kernels at one warp a block (simulator sizes): stage 9 (B staged
# through registers) and stage 10 (cp.async ring), 32 x 32 tiles
TILED_GROUPED = {
    "double_buffering": dict(BM=32, BN=32, BK=16, WM=32, WN=32, WNITER=1, TM=8, TN=4, MINB=0),
    "multistage": dict(BM=32, BN=32, BK=16, WM=32, WN=32, WNITER=1, TM=8, TN=4, MINB=0, NBUF=3),
}


@pytest.mark.parametrize("name", list(TILED_GROUPED))
@pytest.mark.parametrize(
    "sizes, K, N, layout, vec",
    [([40, 0, 7, 33], 36, 72, "NN", True), ([6, 0, 0, 45, 2], 29, 37, "NT", False)],
    ids=["NN-vector", "NT-scalar"],
)
def test_grouped_tiled_kernels_match_float64(rng, name, sizes, K, N, layout, vec):
    """The grouped kernels of stages 9 and 10 (the tiles of groups of many rows): a group's rows
    end inside a tile (the next group's rows are not written by it), an empty group has no
    tiles, rows past the last end stay unwritten; two blocks walk the work list, so a block's
    units change group and column, and each unit's SMEM fill follows the last unit's reads."""
    from numba_gemm import get_stage

    stage = get_stage(name).with_config(dict(TILED_GROUPED[name], SPLITK=1))
    _check_two_blocks(rng, stage, sizes, K, N, layout, vec)


def _pairs_reference(a_list, b_list):
    return [
        a.astype(np.float64) @ b.astype(np.float64) for a, b in zip(a_list, b_list, strict=True)
    ]


def test_list_form_uses_consecutive_rows_and_stacked_matrices_in_place(rng, monkeypatch):
    """Row blocks of one array and ``list(w)`` of one ``(E, K, N)`` array go in as they lie (no
    copy), an empty product included; the products come back as row blocks of one new array."""
    from numba_gemm import dispatch

    monkeypatch.setattr(dispatch, "copy_matrix", lambda *a: pytest.fail(f"copied: {a!r}"))
    sizes, K, N = [9, 0, 14, 5], 12, 20
    a, w = randn(rng, (sum(sizes), K)), randn(rng, (len(sizes), K, N))
    d_a, d_w = to_device(a), to_device(w)
    ends = np.cumsum(sizes)
    a_list = [d_a[e - m : e] for m, e in zip(sizes, ends, strict=True)]
    got = numba_gemm.grouped_mm(a_list, [d_w[i] for i in range(len(sizes))])
    want = _pairs_reference([a[e - m : e] for m, e in zip(sizes, ends, strict=True)], list(w))
    assert [g.shape for g in got] == [(m, N) for m in sizes]
    for g, x in zip(got, want, strict=True):
        assert rel_error(g.copy_to_host(), x) < 1e-5


def test_list_form_copies_what_does_not_lie_as_one_array(rng, monkeypatch):
    """Rows of A and outputs with gaps between them go through the workspace, the weights (stored
    ``(N, K)``, as ``x @ W_i.T``, at irregular places) are stacked with a warning; the outputs
    are written in place."""
    from numba_gemm import dispatch

    copies = []
    real = dispatch.copy_matrix
    monkeypatch.setattr(dispatch, "copy_matrix", lambda *a: copies.append(a) or real(*a))
    sizes, K, N = [7, 3, 0, 11], 9, 13  # K and N not multiples of 4: the scalar variant
    rows = [0, 10, 14, 20]  # row blocks with gaps between them
    a_pool, w_pool = randn(rng, (40, K)), randn(rng, (12 * N * K,))
    offs = [0, 2 * N * K + 3, 3 * N * K + 8, 7 * N * K + 1]  # no one stride apart
    d_a, d_w = to_device(a_pool), to_device(w_pool)
    c_pool = to_device(np.full((40, N), np.nan, np.float32))
    a_list = [d_a[r : r + m] for r, m in zip(rows, sizes, strict=True)]
    d_b = [device_view(d_w[o : o + N * K], (K, N), (4, 4 * K)) for o in offs]
    outs = [c_pool[r : r + m] for r, m in zip(rows, sizes, strict=True)]
    with pytest.warns(RuntimeWarning, match="one stride apart"):
        got = numba_gemm.grouped_mm(a_list, d_b, out=outs)
    assert got is outs and len(copies) == 3 * len(sizes)  # rows of A, weights, outputs
    want = _pairs_reference(
        [a_pool[r : r + m] for r, m in zip(rows, sizes, strict=True)],
        [w_pool[o : o + N * K].reshape(N, K).T for o in offs],
    )
    c = c_pool.copy_to_host()
    for r, m, x in zip(rows, sizes, want, strict=True):
        assert rel_error(c[r : r + m], x) < 1e-5
    assert np.isnan(c[7:10]).all() and np.isnan(c[31:]).all()  # the gaps are not written


def test_bad_list_forms_raise_and_write_nothing(rng):
    K, N = 8, 12
    a = [to_device(randn(rng, (5, K))), to_device(randn(rng, (3, K)))]
    b = [to_device(randn(rng, (K, N))), to_device(randn(rng, (K, N)))]
    outs = [
        to_device(np.full((5, N), np.nan, np.float32)),
        to_device(np.full((3, N), np.nan, np.float32)),
    ]
    ends = to_device(np.array([5, 8], np.int32))
    bad = [
        (ValueError, "offsets=None", lambda: numba_gemm.grouped_mm(a, b, ends, out=outs)),
        (ValueError, "one non-zero length", lambda: numba_gemm.grouped_mm(a, b[:1], out=outs)),
        (
            ValueError,
            "K = 8 columns",
            lambda: numba_gemm.grouped_mm([a[0], to_device(randn(rng, (3, K + 1)))], b, out=outs),
        ),
        (
            ValueError,
            r"b\[1\] must be a 2-D \(K, N\)",
            lambda: numba_gemm.grouped_mm(a, [b[0], to_device(randn(rng, (K, N + 1)))], out=outs),
        ),
        (
            ValueError,
            "stored alike",
            lambda: numba_gemm.grouped_mm(
                a,
                [b[0], device_view(to_device(randn(rng, (N, K))), (K, N), (4, 4 * K))],
                out=outs,
            ),
        ),
        (
            ValueError,
            r"out\[1\] must be a C-contiguous \(3, 12\)",
            lambda: numba_gemm.grouped_mm(
                a, b, out=[outs[0], to_device(np.zeros((4, N), np.float32))]
            ),
        ),
        (
            TypeError,
            r"a\[1\]",
            lambda: numba_gemm.grouped_mm([a[0], to_device(np.zeros((3, K)))], b, out=outs),
        ),
        (TypeError, "offsets .* is required", lambda: numba_gemm.grouped_mm(a[0], b[0])),
        (
            ValueError,
            r"out\[0\] overlaps b\[0\]",
            lambda: numba_gemm.grouped_mm(
                a, b, out=[device_view(b[0], (5, N), (4 * N, 4)), outs[1]]
            ),
        ),
    ]
    for exc, match, call in bad:
        with pytest.raises(exc, match=match):
            call()
    for o in outs:
        assert np.isnan(o.copy_to_host()).all()
