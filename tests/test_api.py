"""sgemm(): stage choice, degenerate sizes, streams, and every bad input (clear error, nothing
written)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import device_view, randn
from hypothesis import given
from hypothesis import strategies as st
from numba import cuda

import numba_gemm
from numba_gemm import STAGES, Stage, get_stage, matmul, sgemm
from numba_gemm.arrays import overlaps
from numba_gemm.tools.reference import reference_f64, rel_error


@pytest.fixture
def operands(rng):
    a, b = randn(rng, (9, 7)), randn(rng, (7, 5))
    return a, b, cuda.to_device(a), cuda.to_device(b)


def poisoned(shape, dtype=np.float32):
    return cuda.to_device(np.full(shape, np.nan, dtype))


def assert_untouched(d_out):
    assert np.isnan(d_out.copy_to_host()).all(), "output was written although the call failed"


def test_default_stage_new_output(operands):
    a, b, d_a, d_b = operands
    c = sgemm(d_a, d_b)
    assert c.shape == (9, 5) and c.dtype == np.float32
    assert rel_error(c.copy_to_host(), reference_f64(a, b)) <= 1e-5


def test_default_stage_without_tuning_is_top_of_ladder(operands, monkeypatch, tmp_path, fake_gpu):
    """No tuning data for this device (a GPU with no committed defaults): the last general FP32
    stage (the skinny stage serves few rows only, and is chosen by its tuned price)."""
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "none.json"))
    fake_gpu("Fake GPU", (9, 9))
    p = numba_gemm.plan_for(9, 5, 7)
    assert p.stage is [s for s in STAGES if s.precision == "fp32" and s.general][-1]
    assert p.stage.name == "multistage"
    assert "no tuning data" in p.reason and "no tuning data" in repr(p)


def test_stage_object_accepted(operands):
    a, b, d_a, d_b = operands
    c = sgemm(d_a, d_b, stage=STAGES[0])
    assert rel_error(c.copy_to_host(), reference_f64(a, b)) <= 1e-5


def test_new_output_ignores_beta(operands):
    a, b, d_a, d_b = operands
    c = sgemm(d_a, d_b, alpha=2.0, beta=3.0)
    assert rel_error(c.copy_to_host(), reference_f64(a, b, alpha=2.0)) <= 1e-5


@pytest.mark.parametrize("M, N", [(0, 5), (4, 0), (0, 0)])
def test_empty_result(M, N, rng):
    a, b = randn(rng, (M, 3)), randn(rng, (3, N))
    c = sgemm(cuda.to_device(a), cuda.to_device(b))
    assert c.shape == (M, N)


@pytest.mark.parametrize("beta", [0.0, 2.5])
def test_k_zero_gives_beta_c(beta, rng):
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 6), np.float32)
    c0 = randn(rng, (4, 6))
    d_c = cuda.to_device(c0)
    sgemm(cuda.to_device(a), cuda.to_device(b), out=d_c, beta=beta)
    np.testing.assert_array_equal(d_c.copy_to_host(), (np.float32(beta) * c0))
    fresh = sgemm(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    np.testing.assert_array_equal(fresh, np.zeros((4, 6), np.float32))


def test_k_zero_beta_zero_clears_nan():
    d_c = poisoned((3, 2))
    a, b = np.zeros((3, 0), np.float32), np.zeros((0, 2), np.float32)
    sgemm(cuda.to_device(a), cuda.to_device(b), out=d_c)
    np.testing.assert_array_equal(d_c.copy_to_host(), np.zeros((3, 2), np.float32))


def test_stream_argument(operands):
    a, b, d_a, d_b = operands
    s = cuda.stream()
    c = sgemm(d_a, d_b, stream=s)
    s.synchronize()
    assert rel_error(c.copy_to_host(), reference_f64(a, b)) <= 1e-5


# --- bad inputs


def test_host_array_rejected(operands):
    a, b, d_a, d_b = operands
    with pytest.raises(TypeError, match=r"numba\.cuda\.to_device"):
        sgemm(a, d_b)
    with pytest.raises(TypeError, match=r"numba\.cuda\.to_device"):
        sgemm(d_a, b)


def test_non_array_rejected(operands):
    _, _, d_a, _ = operands
    with pytest.raises(TypeError, match="device array"):
        sgemm(d_a, [[1.0]])


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32])
def test_wrong_dtype_rejected(dtype, operands):
    _, _, d_a, d_b = operands
    bad = cuda.to_device(np.ones((7, 5), dtype))
    with pytest.raises(TypeError, match="float32"):
        sgemm(d_a, bad)


@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize(
    "entry", [sgemm, matmul, numba_gemm.explain], ids=["sgemm", "matmul", "explain"]
)
def test_float16_operands_point_to_hgemm(entry, which, rng):
    """FP16 operands are hgemm's: the FP32 entry points say so, naming it."""
    x = {"a": randn(rng, (8, 8)), "b": randn(rng, (8, 8))}
    x[which] = x[which].astype(np.float16)
    d_c = poisoned((8, 8))
    with pytest.raises(
        TypeError,
        match=rf"{which} must be float32, got dtype float16: .*"
        r"numba_gemm\.hgemm",
    ):
        entry(cuda.to_device(x["a"]), cuda.to_device(x["b"]), out=d_c)
    assert_untouched(d_c)


def test_wrong_ndim_rejected(operands):
    _, _, d_a, _ = operands
    with pytest.raises(ValueError, match="2-D .* or 3-D"):
        sgemm(d_a, cuda.to_device(np.ones(7, np.float32)))
    with pytest.raises(ValueError, match="2-D .* or 3-D"):
        sgemm(cuda.to_device(np.ones((2, 2, 9, 7), np.float32)), d_a)


def test_inner_dimension_mismatch_names_both_shapes(operands):
    _, _, d_a, _ = operands
    d_b = cuda.to_device(np.ones((6, 5), np.float32))
    with pytest.raises(ValueError, match=r"\(9, 7\).*\(6, 5\)"):
        sgemm(d_a, d_b)


def test_no_unit_stride_rejected(rng):
    # a strided view (every other column): neither row- nor column-major, so not read in place
    d_wide = cuda.to_device(randn(rng, (8, 16)))
    d_v = d_wide[:, ::2]
    d_x = cuda.to_device(randn(rng, (8, 8)))
    assert d_v.shape == (8, 8) and not d_v.is_c_contiguous()
    with pytest.raises(ValueError, match="no unit stride.*contiguous"):
        sgemm(d_v, d_x)
    with pytest.raises(ValueError, match="no unit stride"):
        sgemm(d_x, d_v)
    d_c = poisoned((8, 16))
    with pytest.raises(ValueError, match="no unit stride"):
        sgemm(d_x, d_x, out=d_c[:, ::2])
    assert_untouched(d_c)


def test_out_wrong_shape_rejected(operands):
    _, _, d_a, d_b = operands
    d_c = poisoned((5, 9))
    with pytest.raises(ValueError, match=r"out has shape \(5, 9\).*\(9, 5\)"):
        sgemm(d_a, d_b, out=d_c)
    assert_untouched(d_c)


def test_out_wrong_dtype_rejected(operands):
    _, _, d_a, d_b = operands
    d_c = poisoned((9, 5), np.float64)
    with pytest.raises(ValueError, match="float32"):
        sgemm(d_a, d_b, out=d_c)
    assert_untouched(d_c)


def test_out_aliasing_input_rejected(rng):
    x = randn(rng, (6, 6))
    d_x = cuda.to_device(x)
    d_y = cuda.to_device(randn(rng, (6, 6)))
    for args in ((d_x, d_y), (d_y, d_x)):
        with pytest.raises(ValueError, match="overlaps"):
            sgemm(*args, out=d_x)
    np.testing.assert_array_equal(d_x.copy_to_host(), x)


def test_unknown_stage_lists_valid_names(operands):
    _, _, d_a, d_b = operands
    d_c = poisoned((9, 5))
    with pytest.raises(ValueError, match="valid stages: naive, gmem_coalesce"):
        sgemm(d_a, d_b, stage="fastest", out=d_c)
    assert_untouched(d_c)
    with pytest.raises(ValueError, match="valid stages"):
        get_stage("nope")


def test_bad_stage_type_rejected(operands):
    _, _, d_a, d_b = operands
    with pytest.raises(TypeError, match="stage must be"):
        sgemm(d_a, d_b, stage=3)


def test_stage_not_supporting_shape_rejected(operands):
    _, _, d_a, d_b = operands
    picky = Stage(
        name="picky",
        label="picky",
        kernel=STAGES[0].kernel,
        launch_config=STAGES[0].launch_config,
        supports=lambda M, N, K: M % 128 == 0,
    )
    d_c = poisoned((9, 5))
    with pytest.raises(ValueError, match="does not support M=9, N=5, K=7"):
        sgemm(d_a, d_b, stage=picky, out=d_c)
    assert_untouched(d_c)


@pytest.mark.parametrize("bad", [1e300, -1e39, float("nan"), float("inf"), 10**400])
def test_non_finite_scalars_rejected(bad, operands):
    _, _, d_a, d_b = operands
    d_c = poisoned((9, 5))
    for name in ("alpha", "beta"):
        with pytest.raises(ValueError, match=f"{name} must be finite"):
            sgemm(d_a, d_b, out=d_c, **{name: bad})
    assert_untouched(d_c)


def test_bad_stream_rejected(operands):
    _, _, d_a, d_b = operands
    for bad in ("0", 1.5, True, object()):
        with pytest.raises(TypeError, match="stream must be"):
            sgemm(d_a, d_b, stream=bad)


def test_host_out_rejected(operands):
    _, _, d_a, d_b = operands
    host = np.full((9, 5), np.nan, np.float32)
    with pytest.raises(TypeError, match=r"numba\.cuda\.to_device"):
        sgemm(d_a, d_b, out=host)
    assert np.isnan(host).all()


@pytest.mark.parametrize("bad", ["2", None, 1j, True])
def test_bad_scalars_rejected(bad, operands):
    _, _, d_a, d_b = operands
    d_c = poisoned((9, 5))
    with pytest.raises(TypeError, match="real number"):
        sgemm(d_a, d_b, out=d_c, alpha=bad)
    with pytest.raises(TypeError, match="real number"):
        sgemm(d_a, d_b, out=d_c, beta=bad)
    assert_untouched(d_c)


# --- the fast lane (api._plain_call): repeated plain calls skip the general path


@pytest.fixture
def plan_runs(monkeypatch):
    """The runners run through ``Runner.run`` (which the fast lane reaches through
    ``Runner.run_plain`` on the simulator), in order (each runner's ``plan`` is its record)."""
    from numba_gemm.launch.launcher import Runner

    runs, run = [], Runner.run

    def spy(self, *args):
        runs.append(self)
        run(self, *args)

    monkeypatch.setattr(Runner, "run", spy)
    return runs


def _no_general_path(monkeypatch):
    def boom(*args):
        raise AssertionError("the general path ran")

    for name in ("validate", "validate_operands", "validate_general"):
        monkeypatch.setattr(numba_gemm.checks, name, boom)
    monkeypatch.setattr(numba_gemm.dispatch, "run", boom)


def _record_pointer_launches(p, plan_runs, monkeypatch):
    """On a GPU the runner's pointer launcher replaces ``run_plain`` after the first call (no
    longer through ``Runner.run``): record its launches in ``plan_runs`` too."""
    launcher = p.__dict__.get("run_plain")
    if launcher is not None:

        def recorded(*args):
            plan_runs.append(p)
            launcher(*args)

        monkeypatch.setattr(p, "run_plain", recorded)


@pytest.mark.parametrize("M, N, K, offset", [(9, 5, 7, 0), (12, 8, 16, 0), (12, 8, 16, 1)])
def test_fast_lane_runs_the_general_paths_plan(M, N, K, offset, rng, monkeypatch, plan_runs):
    """The second call of a shape (aligned, odd sizes, or an A whose base is 4 bytes past a
    16-byte boundary) takes the fast lane: the plan the first call made, fresh operands read
    anew, alpha and beta applied; ``out=None`` returns a new array."""
    monkeypatch.setattr(numba_gemm.checks, "SCALARS", {1.0: 1.0})  # 1.5, 0.5 unseen so far
    monkeypatch.setattr(numba_gemm.api, "SCALARS", numba_gemm.checks.SCALARS)  # the lane's name
    buf = cuda.to_device(randn(rng, (offset + M * K,)))
    d_a, d_b = buf[offset:].reshape(M, K), cuda.to_device(randn(rng, (K, N)))
    sgemm(d_a, d_b, out=poisoned((M, N)), alpha=1.5, beta=0.5)
    assert len(plan_runs) == 1
    p = plan_runs[0]
    _record_pointer_launches(p, plan_runs, monkeypatch)
    with monkeypatch.context() as m:
        _no_general_path(m)
        a, b, c = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, (M, N))
        buf.copy_to_device(np.concatenate([randn(rng, (offset,)), a.ravel()]))
        d_b.copy_to_device(b)
        d_c = cuda.to_device(c)
        assert sgemm(d_a, d_b, out=d_c, alpha=1.5, beta=0.5) is d_c
        want = reference_f64(a, b, alpha=1.5, beta=0.5, c=c)
        assert rel_error(d_c.copy_to_host(), want) <= 1e-5
        new = sgemm(d_a, d_b, alpha=1.5, beta=0.5)  # beta ignored: a new output
        assert new.shape == (M, N) and new is not d_c
        assert rel_error(new.copy_to_host(), reference_f64(a, b, alpha=1.5)) <= 1e-5
    assert plan_runs[1:] == [plan_runs[0]] * 2
    assert plan_runs[0].plan.variant == ("vector" if (K | N) & 3 == 0 and not offset else "scalar")


@pytest.mark.parametrize("layout", ["NT", "TN", "TT"])
def test_fast_lane_takes_transposed_operands(layout, rng, monkeypatch, plan_runs):
    """The second call with the transpose of a plain operand as A or B (``x @ w.T``, as
    ``torch.nn.Linear`` passes its weight) takes the fast lane: the plan the general path made
    for that layout, fresh operands read anew; a transposed view that is not dense does not."""
    M, N, K = 9, 12, 8

    def on_device(x, t):  # t == "T": a transposed view of a row-major copy of x.T
        d = cuda.to_device(np.ascontiguousarray(x.T) if t == "T" else x)
        return device_view(d, x.shape, (d.strides[1], d.strides[0])) if t == "T" else d

    sgemm(
        on_device(randn(rng, (M, K)), layout[0]),
        on_device(randn(rng, (K, N)), layout[1]),
        out=poisoned((M, N)),
    )
    assert len(plan_runs) == 1
    p = plan_runs[0]
    assert p.plan.geometry.layout == layout
    _record_pointer_launches(p, plan_runs, monkeypatch)
    with monkeypatch.context() as m:
        _no_general_path(m)
        a, b = randn(rng, (M, K)), randn(rng, (K, N))
        d_c = poisoned((M, N))
        assert sgemm(on_device(a, layout[0]), on_device(b, layout[1]), out=d_c) is d_c
        assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= 1e-5
    assert plan_runs[1:] == [p]
    w = cuda.to_device(randn(rng, (N, K + 4)))  # B transposed, row pitch K + 4
    wide = device_view(w, (K, N), (w.strides[1], w.strides[0]))
    assert (
        numba_gemm.api._plain_call(on_device(a, layout[0]), wide, poisoned((M, N)), None, 1.0, 0.0)
        is None
    )


@pytest.mark.parametrize("M, N, K", [(9, 12, 1), (1, 12, 8), (9, 1, 8)])
def test_fast_lane_finds_the_plan_of_a_dimension_of_one(M, N, K, rng, monkeypatch, plan_runs):
    """``x @ w.T`` with a dimension of extent 1 (K = 1: ``w.T`` of an ``(N, 1)`` weight has
    strides ``(4, 4)``; M = 1 or N = 1 likewise for A and C): a stride that does not count makes
    the operand no less row-major, to the general path and the fast lane alike, so the second
    call finds the first call's plan (before, every call of K = 1 took the general path: H200,
    77 x 17597 x 1, 11.6 us of kernel in 35.9 us a call)."""

    def nt(w):  # the transposed view x @ w.T passes, strides (4, 4 * K)
        d = cuda.to_device(w)
        return device_view(d, (w.shape[1], w.shape[0]), (d.strides[1], d.strides[0]))

    sgemm(cuda.to_device(randn(rng, (M, K))), nt(randn(rng, (N, K))), out=poisoned((M, N)))
    assert len(plan_runs) == 1
    p = plan_runs[0]
    _record_pointer_launches(p, plan_runs, monkeypatch)
    with monkeypatch.context() as m:
        _no_general_path(m)
        a, w = randn(rng, (M, K)), randn(rng, (N, K))
        d_c = poisoned((M, N))
        assert sgemm(cuda.to_device(a), nt(w), out=d_c) is d_c
        assert rel_error(d_c.copy_to_host(), reference_f64(a, w.T)) <= 1e-5
    assert plan_runs[1:] == [p]


@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_matmul_of_2d_operands_takes_sgemms_fast_lane(layout, rng, monkeypatch, plan_runs):
    """``matmul`` of two 2-D operands is ``sgemm(a, b, out=out)``: its first call makes the
    plan sgemm makes (sgemm's later calls launch it), and its later calls with plain operands
    (B transposed too: ``x @ w.T``) take sgemm's fast lane, with that plan."""
    M, N, K = 9, 12, 8

    def on_device(x, t):  # t == "T": a transposed view of a row-major copy of x.T
        d = cuda.to_device(np.ascontiguousarray(x.T) if t == "T" else x)
        if t == "T":
            d = device_view(d, x.shape, (d.strides[1], d.strides[0]))
        return d

    matmul(
        on_device(randn(rng, (M, K)), "N"),
        on_device(randn(rng, (K, N)), layout[1]),
        out=poisoned((M, N)),
    )
    assert len(plan_runs) == 1
    p = plan_runs[0]
    _record_pointer_launches(p, plan_runs, monkeypatch)
    with monkeypatch.context() as m:
        _no_general_path(m)
        a, b = randn(rng, (M, K)), randn(rng, (K, N))
        d_a, d_b, d_c = on_device(a, "N"), on_device(b, layout[1]), poisoned((M, N))
        assert matmul(d_a, d_b, out=d_c) is d_c
        assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= 1e-5
        new = matmul(d_a, d_b)
        assert new.shape == (M, N)
        assert rel_error(new.copy_to_host(), reference_f64(a, b)) <= 1e-5
        sgemm(d_a, d_b, out=poisoned((M, N)))
    assert plan_runs[1:] == [p] * 3


def test_fast_lane_defers_every_error_to_the_general_path(rng):
    """With the plan of a shape made, calls that are wrong get the general path's errors and
    write nothing: out aliasing a or b, out of another dtype or shape, b of another K; so do
    calls the lane does not take (scalars never seen, a stream, a compute mode)."""
    n = 6
    d_x, d_y = cuda.to_device(randn(rng, (n, n))), cuda.to_device(randn(rng, (n, n)))
    x = d_x.copy_to_host()
    sgemm(d_x, d_y, out=poisoned((n, n)))
    for args in ((d_x, d_y), (d_y, d_x)):
        assert numba_gemm.api._plain_call(*args, d_x, None, 1.0, 0.0) is None
        with pytest.raises(ValueError, match="overlaps"):
            sgemm(*args, out=d_x)
    np.testing.assert_array_equal(d_x.copy_to_host(), x)
    for out, match in (
        (poisoned((n, n), np.float64), "float32"),
        (poisoned((n, n + 1)), "out has shape"),
    ):
        assert numba_gemm.api._plain_call(d_x, d_y, out, None, 1.0, 0.0) is None
        with pytest.raises(ValueError, match=match):
            sgemm(d_x, d_y, out=out)
        assert np.isnan(out.copy_to_host()).all()
    with pytest.raises(ValueError, match="inner dimensions"):
        sgemm(d_x, cuda.to_device(randn(rng, (n + 1, n))))
    d_c = poisoned((n, n))
    for kw in (dict(alpha=0.123456), dict(beta=7), dict(stage=3)):
        if "stage" in kw:
            with pytest.raises(TypeError, match="stage must be"):
                sgemm(d_x, d_y, out=d_c, **kw)
        else:
            assert (
                numba_gemm.api._plain_call(
                    d_x, d_y, d_c, None, kw.get("alpha", 1.0), kw.get("beta", 0.0)
                )
                is None
            )
    assert_untouched(d_c)


def test_a_warm_call_crosses_three_modules(rng, monkeypatch):
    """A repeated plain ``sgemm`` (and ``matmul``) runs Python code of three of the package's
    modules: ``api`` (the fast lane), ``arrays`` (the operand readers), ``launch.launcher`` (the
    runner). On the simulator the launch itself runs the simulator's kernel path, so the trace
    stops at the runner's pointer launch there; on a GPU it covers the whole call."""
    import sys

    from numba_gemm.device import SIMULATOR
    from numba_gemm.launch.launcher import Runner

    d_a, d_b = cuda.to_device(randn(rng, (9, 7))), cuda.to_device(randn(rng, (7, 5)))
    d_c = poisoned((9, 5))
    sgemm(d_a, d_b, out=d_c)
    sgemm(d_a, d_b, out=d_c)  # a GPU runner binds its pointer launcher on its first call
    if SIMULATOR:
        monkeypatch.setattr(Runner, "run_plain", lambda self, *args: None)
    seen: set = set()

    def profile(frame, event, arg):
        name = frame.f_globals.get("__name__", "")
        if event == "call" and name.startswith("numba_gemm"):
            seen.add(name)

    sys.setprofile(profile)
    try:
        sgemm(d_a, d_b, out=d_c)
        matmul(d_a, d_b, out=d_c)
        sgemm(d_a, d_b)
    finally:
        sys.setprofile(None)
    three = {"numba_gemm.api", "numba_gemm.arrays", "numba_gemm.launch.launcher"}
    assert seen == (three - {"numba_gemm.launch.launcher"} if SIMULATOR else three)


# --- helpers


class _View:
    """Looks like a device array to ``overlaps`` (array interfaces, shape, strides) over host
    memory, so that address ranges can be laid out at will."""

    def __init__(self, arr):
        self.__cuda_array_interface__ = self.__array_interface__ = arr.__array_interface__
        self.shape, self.strides = arr.shape, arr.strides
        self.size, self.dtype = arr.size, arr.dtype


@given(
    off=st.integers(-60, 60),
    n=st.integers(0, 20),
    m=st.integers(0, 20),
    step=st.sampled_from([1, 3, -1]),
)
def test_overlaps_agrees_with_numpy(off, n, m, step):
    """Exact for contiguous ranges; for strided ones never misses a real overlap."""
    base = np.zeros(200, np.float32)
    x = base[70 : 70 + n]
    y = base[70 + off : 70 + off + m * abs(step)][::step]
    shares = bool(np.shares_memory(x, y))
    got = overlaps(_View(x), _View(y))
    if step == 1:
        assert got is shares
    elif shares:
        assert got is True
