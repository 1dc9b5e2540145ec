"""Transposed operands, row pitches, batches and ``matmul``: every layout and batch case against a
float64 reference, NaN-poisoned outputs, and each bad input (clear error, nothing written).

On the simulator the tunable stages run with a small tile configuration (128 threads) so that the
many cases stay quick; one case per stage also runs its default tiles. The same tests run on a
GPU, where PyTorch and CuPy (if installed) check that a tensor gives a tensor and a CuPy array a
CuPy array.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import device_view, randn, sim_sized
from numba import cuda

import numba_gemm
from numba_gemm import get_stage, matmul, sgemm
from numba_gemm.device import SIMULATOR
from numba_gemm.tools.reference import rel_error

TUNABLE = ["warptiling", "double_buffering", "multistage"]
#: A small configuration that serves all four layouts (4 warps of 32 x 32, 4 x 4 thread tiles).
SMALL = dict(BM=64, BN=64, BK=8, WM=32, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=1)
LAYOUTS = ["NN", "NT", "TN", "TT"]


#: The skinny stage with B stored transposed (``x @ W.T``): (config, (M, N, K), layout, pitch).
SKINNY_T = [
    # 3 row blocks, K not a multiple of 4: scalar loads along K, two slices
    (dict(MT=1, BN=8, THREADS=32, KC=64, SPLITK=2, MINB=0, NBUF=0), (3, 9, 70), "NT", 0),
    # A transposed too, row pitches: scalar
    (dict(MT=4, BN=16, THREADS=32, KC=32, SPLITK=1, MINB=0, NBUF=0), (3, 37, 29), "TT", 3),
    # 2 row blocks, 3 K slices, 128-bit loads, two steps of 4 k per chunk (KC / KG = 8)
    (dict(MT=8, BN=16, THREADS=32, KC=64, SPLITK=3, MINB=0, NBUF=0), (9, 40, 200), "NT", 0),
    # 3 super-chunks of A (256 + 256 + 88 k), ragged N, two steps per chunk
    (dict(MT=16, BN=16, THREADS=32, KC=64, SPLITK=1, MINB=0, NBUF=0), (5, 21, 600), "NT", 0),
    # two warps: 16 k-groups, each warp 8 of them over two column groups; pitched rows
    (dict(MT=8, BN=16, THREADS=64, KC=128, SPLITK=2, MINB=0, NBUF=0), (6, 20, 600), "NT", 4),
    # K odd, two steps of 4 k a chunk (KC / KG = 8), each step's 4 k KG apart (scalar): 3
    # super-chunks of A (512 + 512 + 75 k, the last chunk ragged), 16 k-groups over two warps
    (dict(MT=8, BN=16, THREADS=64, KC=128, SPLITK=1, MINB=0, NBUF=0), (6, 20, 1099), "NT", 0),
    # A stored transposed with rows of 3 (copied element by element either way), W's rows
    # aligned, odd N: vector_loads
    (dict(MT=4, BN=16, THREADS=32, KC=32, SPLITK=1, MINB=0, NBUF=0), (3, 37, 32), "TT", 0),
    # odd N, rows of A and W aligned: 128-bit loads, 32-bit stores of C (vector_loads), 3 slices
    (dict(MT=8, BN=16, THREADS=32, KC=64, SPLITK=3, MINB=0, NBUF=0), (9, 41, 200), "NT", 0),
]


def variant_for(M: int, N: int, K: int, layout: str, pitch: int = 0, free: str = "") -> str:
    """The kernel variant the plan must run for dense operands in ``layout`` (row pitches
    ``pitch`` floats longer than the rows) on a stage that copies the operands ``free``
    element by element in every variant (``Stage.free_rows``: their rows do not count)."""
    ra, rb = (K if layout[0] == "N" else M), (N if layout[1] == "N" else K)  # rows stored
    ea = 0 if "A" in free else ra | (ra + pitch)  # each row's length and pitch
    eb = 0 if "B" in free else rb | (rb + pitch)
    if not (ea % 4 or eb % 4 or N % 4):
        return "vector"
    return "vector_loads" if layout[1] == "T" and not (ea % 4 or eb % 4) else "scalar"


@pytest.mark.parametrize(
    "cfg, shape, layout, pitch",
    SKINNY_T,
    ids=[f"MT{c['MT']}-{lay}-p{p}" for c, _, lay, p in SKINNY_T],
)
def test_skinny_with_b_transposed(cfg, shape, layout, pitch, rng):
    """The skinny stage reading B stored transposed (rows of W along K, A staged as As[m, k]):
    every row block, K slice, super-chunk of A and k-group summed once, with C read (beta)."""
    M, N, K = shape
    st = get_stage("skinny").with_config(cfg)
    assert layout in st.layouts
    a, b, c = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, (M, N))
    da, db = stored(a, layout[0] == "T", pitch), stored(b, True, pitch)
    plan = numba_gemm.explain(da, db, stage=st)
    want = variant_for(M, N, K, layout, pitch, st.free_rows(layout))
    assert (plan.geometry.layout, plan.variant) == (layout, want)
    d_c = cuda.to_device(c)
    sgemm(da, db, stage=st, out=d_c, alpha=1.5, beta=0.5)
    assert_close(d_c.copy_to_host(), ref(a, b, c, alpha=1.5, beta=0.5))


def small(name: str, **over):
    cfg = dict(SMALL, **over)
    if name == "multistage":
        cfg.setdefault("NBUF", 3)
    return get_stage(name).with_config(cfg)


def permuted(d, axes):
    """A zero-copy view of device array ``d`` with its axes permuted (Numba's ``.T`` on a GPU
    array makes a contiguous copy, which would test nothing)."""
    return view(d, tuple(d.shape[i] for i in axes), tuple(d.strides[i] for i in axes))


view = device_view


def tr(d):
    """The transposed view of the last two axes of ``d`` (no copy)."""
    n = len(d.shape)
    return permuted(d, tuple(range(n - 2)) + (n - 1, n - 2))


def stored(x: np.ndarray, transposed: bool, pitch: int = 0):
    """``x`` on the device, row-major, or column-major (a transposed view of its transpose), with
    ``pitch`` extra elements at the end of each storage row."""
    s = x.T if transposed else x
    if pitch:
        big = np.full((s.shape[0], s.shape[1] + pitch), np.nan, np.float32)
        big[:, : s.shape[1]] = s
        d = cuda.to_device(big)[:, : s.shape[1]]
    else:
        d = cuda.to_device(np.ascontiguousarray(s))
    return tr(d) if transposed else d


def ref(a, b, c=None, alpha=1.0, beta=0.0):
    r = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64))
    return r + beta * c.astype(np.float64) if beta else r


def assert_close(out, expect, rtol=1e-5):
    assert np.isfinite(out).all(), "an element was not written (NaN)"
    assert rel_error(out, expect) <= rtol


#: ragged: scalar; /4: vector; only N ragged: vector_loads with B transposed, else scalar
LAYOUT_SHAPES = [(67, 70, 13), (68, 72, 24), (68, 70, 24)]


def _layout_cases():
    """Every tunable stage in every layout on every shape of :data:`LAYOUT_SHAPES`; on the
    simulator double_buffering runs one shape per layout (NN vector, NT vector_loads, TN scalar,
    TT vector): its GMEM movers for each layout are warptiling's (``make_parts``), which runs
    them all, and its own part, the pipeline, is the same in every layout."""
    cases = []
    for i, (M, N, K) in enumerate(LAYOUT_SHAPES):
        for name in TUNABLE:
            for j, layout in enumerate(LAYOUTS):
                if SIMULATOR and name == "double_buffering" and i != (j + 1) % 3:
                    continue
                cases.append(pytest.param(name, layout, M, N, K, id=f"{M}-{N}-{K}-{name}-{layout}"))
    return cases


@pytest.mark.parametrize("name, layout, M, N, K", _layout_cases())
def test_layouts(name, layout, M, N, K, rng):
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    da, db = stored(a, layout[0] == "T"), stored(b, layout[1] == "T")
    st = small(name)
    plan = numba_gemm.explain(da, db, stage=st)
    assert plan.geometry.layout == layout
    assert plan.variant == variant_for(M, N, K, layout, free=st.free_rows(layout))
    c0 = randn(rng, (M, N))
    d_c = cuda.to_device(c0)
    sgemm(da, db, stage=st, out=d_c, alpha=0.5, beta=-2.0)
    assert_close(d_c.copy_to_host(), ref(a, b, c0, 0.5, -2.0))


@pytest.mark.parametrize("name", TUNABLE)
def test_default_tiles_transposed(name, rng):
    a, b = randn(rng, (33, 20)), randn(rng, (20, 19))
    c = sgemm(stored(a, True), stored(b, True), stage=name)
    assert_close(c.copy_to_host(), ref(a, b))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_row_pitch(layout, rng):
    """Leading dimensions larger than the row length, for A, B and C (vector path: the pitches
    are multiples of 4)."""
    M, N, K = 36, 40, 24
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    da, db = stored(a, layout[0] == "T", pitch=8), stored(b, layout[1] == "T", pitch=4)
    big = np.full((M, N + 12), np.nan, np.float32)
    d_big = cuda.to_device(big)
    sgemm(da, db, stage=small("multistage"), out=d_big[:, :N])
    host = d_big.copy_to_host()
    assert_close(host[:, :N], ref(a, b))
    assert np.isnan(host[:, N:]).all(), "wrote past the row length into the pitch"


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_split_k_with_pitched_out(layout, rng):
    M, N, K = 20, 28, 70
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    st = small("warptiling", SPLITK=3)
    big = cuda.to_device(np.full((M, N + 4), np.nan, np.float32))
    sgemm(stored(a, layout[0] == "T"), stored(b, layout[1] == "T"), stage=st, out=big[:, :N])
    host = big.copy_to_host()
    assert_close(host[:, :N], ref(a, b))
    assert np.isnan(host[:, N:]).all()


@pytest.mark.parametrize("name", ["double_buffering", "skinny"])
def test_unaligned_out_with_b_transposed_runs_vector_loads(name, rng):
    """``x @ W.T`` into an ``out`` that starts one float into its buffer (its rows not 16-byte
    aligned; x's and W's are): the plan runs the vector_loads variant, through the general path
    and then the fast lane, and writes only ``out`` (split-K: the workspace takes C's order)."""
    M, N, K = 8, 24, 136
    st = (
        small(name, SPLITK=2)
        if name != "skinny"
        else get_stage("skinny").with_config(
            dict(MT=8, BN=16, THREADS=32, KC=64, SPLITK=2, MINB=0, NBUF=0)
        )
    )
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    da, db = stored(a, False), stored(b, True)
    big = cuda.to_device(np.full((M, N + 1), np.nan, np.float32))
    out = big[:, 1:]
    assert numba_gemm.explain(da, db, stage=st, out=out).variant == "vector_loads"
    for _ in range(2):
        sgemm(da, db, stage=st, out=out)
        host = big.copy_to_host()
        assert_close(host[:, 1:], ref(a, b))
        assert np.isnan(host[:, 0]).all()


def test_batch(rng):
    a, b = randn(rng, (3, 21, 13)), randn(rng, (3, 13, 18))
    c = sgemm(cuda.to_device(a), cuda.to_device(b), stage=small("double_buffering"))
    assert c.shape == (3, 21, 18)
    assert_close(c.copy_to_host(), ref(a, b))


@pytest.mark.parametrize("which", ["a", "b"])
def test_batch_broadcast_2d_operand(which, rng):
    a = randn(rng, (21, 13)) if which == "a" else randn(rng, (3, 21, 13))
    b = randn(rng, (3, 13, 18)) if which == "a" else randn(rng, (13, 18))
    c = sgemm(cuda.to_device(a), cuda.to_device(b), stage=small("multistage"))
    assert c.shape == (3, 21, 18)
    assert_close(c.copy_to_host(), ref(a, b))


def test_batch_of_one_broadcasts_and_strided_batches(rng):
    """A batch of 1 broadcast against 4; B every other matrix of a bigger batch (batch stride of
    two matrices), transposed; C a pitched batch with alpha and beta."""
    a = randn(rng, (1, 12, 16))
    bb = randn(rng, (8, 20, 16))  # B[i] = bb[2 i].T: (16, 20), column-major
    d_bb = cuda.to_device(bb)
    db = tr(d_bb[::2])
    b = bb[::2].transpose(0, 2, 1)
    c0 = randn(rng, (4, 12, 24))
    d_c0 = cuda.to_device(c0)
    sgemm(
        cuda.to_device(a), db, out=d_c0[:, :, :20], stage=small("warptiling"), alpha=2.0, beta=1.0
    )
    host = d_c0.copy_to_host()
    assert_close(host[:, :, :20], ref(a, b, c0[:, :, :20], 2.0, 1.0))
    np.testing.assert_array_equal(host[:, :, 20:], c0[:, :, 20:])


def test_batch_k_zero_scales_c(rng):
    c0 = randn(rng, (2, 5, 6))
    d_c = cuda.to_device(c0)
    empty_a = cuda.to_device(np.zeros((2, 5, 0), np.float32))
    empty_b = cuda.to_device(np.zeros((2, 0, 6), np.float32))
    sgemm(empty_a, empty_b, out=d_c, beta=3.0)
    np.testing.assert_allclose(d_c.copy_to_host(), 3.0 * c0, rtol=1e-6)


def test_auto_plan_avoids_teaching_stages_for_other_layouts(rng):
    a, b = randn(rng, (9, 7)), randn(rng, (7, 5))
    da, db = stored(a, True), stored(b, False)
    assert numba_gemm.explain(da, db).stage.batched
    assert_close(sgemm(da, db).copy_to_host(), ref(a, b))


@pytest.mark.parametrize("stage", ["naive", "smem_tiling", "bank_conflict_free"])
def test_teaching_stage_rejects_other_layouts(stage, rng):
    a, b = randn(rng, (9, 7)), randn(rng, (7, 5))
    out = cuda.to_device(np.full((9, 5), np.nan, np.float32))
    for da, db in [
        (stored(a, True), stored(b, False)),
        (stored(a, False, pitch=3), stored(b, False)),
    ]:
        with pytest.raises(ValueError, match="teaching form only.*stage=None"):
            sgemm(da, db, stage=stage, out=out)
    with pytest.raises(ValueError, match="teaching form only"):
        sgemm(cuda.to_device(randn(rng, (2, 9, 7))), stored(b, False), stage=stage)
    assert np.isnan(out.copy_to_host()).all()


def test_layout_support_is_declared():
    """Every configuration of every tunable stage's search space serves all four layouts (the
    movers' constraints are symmetric); a teaching stage serves NN only and says so."""
    from numba_gemm.kernels._tunable import layout_problem

    for name in TUNABLE:
        st = get_stage(name)
        assert st.layouts == tuple(LAYOUTS) and st.batched
        assert all(layout_problem(cfg, lay) is None for cfg in st.space for lay in LAYOUTS)
    assert "layout must be one of" in layout_problem(SMALL, "XY")
    naive = get_stage("naive")
    assert naive.layouts == ("NN",) and not naive.batched
    with pytest.raises(ValueError, match="serves layouts"):
        naive.kernel_for("vector", "TN")


# --- bad input: clear error, nothing written ---------------------------------------------------


def poisoned(shape):
    return cuda.to_device(np.full(shape, np.nan, np.float32))


def test_batch_sizes_differ(rng):
    out = poisoned((3, 4, 5))
    with pytest.raises(ValueError, match="batch sizes differ: a has 3 matrices and b has 2"):
        sgemm(cuda.to_device(randn(rng, (3, 4, 6))), cuda.to_device(randn(rng, (2, 6, 5))), out=out)
    assert np.isnan(out.copy_to_host()).all()


def test_column_major_out_rejected_with_the_fix(rng):
    a, b = randn(rng, (6, 4)), randn(rng, (4, 5))
    out_t = cuda.to_device(np.full((5, 6), np.nan, np.float32))
    out = tr(out_t)
    with pytest.raises(ValueError, match=r"row-major.*sgemm\(b\.T, a\.T, out=out\.T\)"):
        sgemm(cuda.to_device(a), cuda.to_device(b), out=out)
    assert np.isnan(out_t.copy_to_host()).all()
    sgemm(tr(cuda.to_device(b)), tr(cuda.to_device(a)), out=out_t)  # the suggested call works
    assert_close(out_t.copy_to_host().T, ref(a, b))


def test_out_with_overlapping_matrices_rejected(rng):
    a, b = randn(rng, (2, 4, 3)), randn(rng, (2, 3, 5))
    d = cuda.to_device(np.full((40,), np.nan, np.float32))
    out = view(d, (2, 4, 5), (8, 20, 4))  # matrices 2 elements apart
    with pytest.raises(ValueError, match="out's matrices overlap"):
        sgemm(cuda.to_device(a), cuda.to_device(b), out=out)
    assert np.isnan(d.copy_to_host()).all()


def test_out_wrong_batch_shape_rejected(rng):
    out = poisoned((2, 4, 5))
    with pytest.raises(ValueError, match=r"out has shape \(2, 4, 5\), expected \(3, 4, 5\)"):
        sgemm(cuda.to_device(randn(rng, (3, 4, 6))), cuda.to_device(randn(rng, (6, 5))), out=out)
    assert np.isnan(out.copy_to_host()).all()


def test_negative_strides_rejected(rng):
    if not numba_gemm.device.SIMULATOR:
        pytest.skip("Numba device arrays have no negative-stride views on a GPU")
    d = cuda.to_device(randn(rng, (6, 4)))
    with pytest.raises(ValueError, match="negative"):
        sgemm(d[::-1], cuda.to_device(randn(rng, (4, 3))))


# --- matmul: numpy.matmul's shape rules ----------------------------------------------------------


def batch_stage(*shapes):
    """The stage for a ``matmul`` of operands of ``shapes``: the automatic choice, except for
    batches on the simulator: the small warptiling tiles there (the automatic plan's tuned tiles,
    256 threads of 128 x 256 outputs, take ~1.5 s a matrix; the batch rules, what these tests
    check, are the same code for every stage)."""
    return small("warptiling") if SIMULATOR and max(map(len, shapes)) > 2 else None


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((5, 7), (7, 3)),
        ((7,), (7, 3)),
        ((5, 7), (7,)),
        ((7,), (7,)),
        ((2, 3, 5, 7), (7, 4)),
        ((2, 1, 5, 7), (3, 7, 4)),
        ((1, 5, 7), (2, 3, 7, 4)),
        ((4, 5, 7), (4, 7, 3)),
    ],
)
def test_matmul_matches_numpy(sa, sb, rng):
    """NumPy's shapes and values. The error is bounded against ``|a| @ |b|`` (the FP32 sum's
    own bound, Higham's): a single 7-term dot product can cancel to 1e-3 of its terms, where a
    bound relative to the result fails one random draw in a few hundred (it did in CI)."""
    a, b = randn(rng, sa), randn(rng, sb)
    c = matmul(cuda.to_device(a), cuda.to_device(b), stage=batch_stage(sa, sb))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    expect = np.matmul(a64, b64)
    assert c.shape == expect.shape
    out = np.asarray(c.copy_to_host())
    assert np.isfinite(out).all(), "an element was not written (NaN)"
    scale = np.linalg.norm(np.matmul(np.abs(a64), np.abs(b64)))
    assert np.linalg.norm(out - expect) <= 1e-5 * scale


def test_matmul_non_collapsible_batch_and_out(rng):
    """Batch dimensions that do not fold into one stride (a permuted batch): one launch per
    leading index; ``out`` written in place."""
    a = randn(rng, (3, 2, 5, 7))
    d_a = cuda.to_device(a)
    view = permuted(d_a, (1, 0, 2, 3))
    b = randn(rng, (2, 3, 7, 4))
    out = poisoned((2, 3, 5, 4))
    res = matmul(view, cuda.to_device(b), out=out, stage=batch_stage(a.shape, b.shape))
    assert res is out
    assert_close(out.copy_to_host(), np.matmul(a.transpose(1, 0, 2, 3).astype(np.float64), b))


def test_matmul_bad_broadcast(rng):
    with pytest.raises(ValueError, match="do not broadcast"):
        matmul(cuda.to_device(randn(rng, (2, 5, 7))), cuda.to_device(randn(rng, (3, 7, 4))))
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul(cuda.to_device(randn(rng, (5, 7))), cuda.to_device(randn(rng, (6, 4))))


# --- the caller's array type (GPU: PyTorch, CuPy) ------------------------------------------------


@pytest.mark.gpu
def test_torch_in_torch_out_every_layout(rng):
    torch = pytest.importorskip("torch")
    if numba_gemm.device.SIMULATOR or not torch.cuda.is_available():
        pytest.skip("needs PyTorch on a GPU")
    a, b = randn(rng, (3, 70, 50)), randn(rng, (3, 50, 60))
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    for x, y in [
        (ta, tb),
        (ta.transpose(1, 2).contiguous().transpose(1, 2), tb),
        (ta, tb.transpose(1, 2).contiguous().transpose(1, 2)),
    ]:
        c = sgemm(x, y)
        assert isinstance(c, torch.Tensor) and c.device == ta.device and c.shape == (3, 70, 60)
        assert_close(c.cpu().numpy(), ref(a, b))
    c = matmul(ta[0], tb)
    assert isinstance(c, torch.Tensor) and c.shape == (3, 70, 60)


@pytest.mark.gpu
def test_cupy_in_cupy_out(rng):
    cupy = pytest.importorskip("cupy")
    if numba_gemm.device.SIMULATOR:
        pytest.skip("needs CuPy on a GPU")
    a, b = randn(rng, (40, 30)), randn(rng, (30, 20))
    c = sgemm(cupy.asarray(a).T.copy().T, cupy.asarray(b))
    assert isinstance(c, cupy.ndarray)
    assert_close(cupy.asnumpy(c), ref(a, b))


@pytest.mark.parametrize("name, layout", [("skinny", "TN"), ("skinny_n", "NT"), ("skinny_n", "NN")])
@pytest.mark.parametrize(
    "M, N, K, pitch", [(5, 12, 150, 0), (8, 8, 136, 0), (6, 10, 140, 3), (8, 9, 136, 0)]
)
def test_regime_stages_layouts(name, layout, M, N, K, pitch, rng):
    """The few-rows and few-columns stages in the layouts they declare (the small operand staged
    element-wise: either storage order, with row pitches), ragged (scalar), aligned (vector) and
    only C ragged (vector_loads with B transposed)."""
    st = sim_sized(get_stage(name))
    assert layout in st.layouts
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    da = stored(a, layout[0] == "T", pitch)
    db = stored(b, layout[1] == "T", pitch)
    plan = numba_gemm.explain(da, db, stage=st)
    want = variant_for(M, N, K, layout, pitch, st.free_rows(layout))
    assert (plan.geometry.layout, plan.variant) == (layout, want)
    d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    sgemm(da, db, stage=st, out=d_c, alpha=1.5)
    assert_close(d_c.copy_to_host(), ref(a, b, alpha=1.5))
