"""``numba_gemm.tools.check`` (the validate-then-time harness) and ``numba_gemm.tools.timing``'s
end-to-end and host-time loops: validation catches unwritten and wrong results, the cuBLAS
reference is FP32 whatever ``CUPY_TF32`` says (CuPy's compute-type switch, exercised on a fake
CuPy), and the timers return one value per repeat."""

from __future__ import annotations

import types

import numpy as np
import pytest
from numba import cuda

from numba_gemm import plan_for
from numba_gemm.tools import check, timing
from numba_gemm.tools.reference import reference_f64, rel_error

# --- problems and validation -------------------------------------------------------------------


def test_make_problem_is_seeded_random_and_on_the_device():
    p = check.make_problem(13, 7, 5, seed=3, blas=None)
    q = check.make_problem(13, 7, 5, seed=3, blas=None)
    r = check.make_problem(13, 7, 5, seed=4, blas=None)
    assert p.shape == (13, 7, 5) and p.flop == 2 * 13 * 7 * 5
    assert p.a.shape == (13, 5) and p.b.shape == (5, 7) and p.C.shape == (13, 7)
    assert p.a.dtype == p.b.dtype == np.float32 and p.a.flags.c_contiguous
    assert np.array_equal(p.a, q.a) and np.array_equal(p.b, q.b)  # same seed, same operands
    assert not np.array_equal(p.a, r.a)
    assert np.count_nonzero(p.a) == p.a.size and np.count_nonzero(p.b) == p.b.size  # no zeros
    assert np.array_equal(p.A.copy_to_host(), p.a) and np.array_equal(p.B.copy_to_host(), p.b)
    assert p.reference == check.F64_LABEL and p.blas is None
    assert np.array_equal(p.ref, reference_f64(p.a, p.b))


def test_make_problem_rejects_empty_shapes():
    with pytest.raises(ValueError, match="M, N, K, batch >= 1"):
        check.make_problem(0, 3, 3)
    with pytest.raises(ValueError, match="batch=0"):
        check.make_problem(3, 3, 3, batch=0)


def _right(p):
    plan = plan_for(*p.shape, stage="naive")  # the cheapest stage on the simulator

    def run():
        plan.launch(p.A, p.B, p.C)

    return run


def test_validate_passes_a_right_result():
    p = check.make_problem(17, 19, 11, seed=1, blas=None)
    status, err, note = check.validate(_right(p), p, 1e-5)
    assert (status, note) == (check.OK, "") and err <= 1e-5


def test_validate_fails_an_unwritten_result():
    """A run that writes nothing leaves the NaN poison: relative error inf, FAILED."""
    p = check.make_problem(9, 8, 7, seed=1, blas=None)
    p.C.copy_to_device(p.ref.astype(np.float32))  # a right C from before must not count
    status, err, note = check.validate(lambda: None, p, 1e-5)
    assert status == check.FAILED and err == float("inf") and "rel. error inf" in note


def test_validate_fails_a_partly_written_result():
    p = check.make_problem(9, 8, 7, seed=1, blas=None)
    good = p.ref.astype(np.float32)

    def all_but_last_row():
        c = p.C.copy_to_host()  # the last row stays as found: poisoned
        c[:-1] = good[:-1]
        p.C.copy_to_device(c)

    status, err, _ = check.validate(all_but_last_row, p, 1e-5)
    assert status == check.FAILED and err == float("inf")


def test_validate_fails_garbage_and_reports_exceptions():
    p = check.make_problem(9, 8, 7, seed=1, blas=None)
    noise = np.random.default_rng(0).standard_normal(p.C.shape).astype(np.float32)
    status, err, note = check.validate(lambda: p.C.copy_to_device(noise), p, 1e-5)
    assert status == check.FAILED and err > 0.1 and note.startswith("rel. error")

    def boom():
        raise RuntimeError("kernel exploded\nsecond line")

    assert check.validate(boom, p, 1e-5) == (check.FAILED, None, "RuntimeError: kernel exploded")


def test_evaluate_times_only_what_validates():
    p = check.make_problem(12, 10, 8, seed=2, blas=None)
    ok = check.evaluate(_right(p), p, 1e-5, reps=2, warmup=0)
    assert ok.ok and ok.rel_error <= 1e-5 and len(ok.timing.ms) == 2
    e2e = check.evaluate(_right(p), p, 1e-5, reps=3, warmup=0, end_to_end=True)
    assert e2e.ok and len(e2e.timing.ms) == 3
    bad = check.evaluate(lambda: None, p, 1e-5, reps=2, warmup=0)
    assert not bad.ok and bad.timing is None


# --- the reference: cuBLAS FP32 whatever CUPY_TF32 says ----------------------------------------

_NAMES = ["TBD", "DEFAULT", "PEDANTIC", "FP16", "FP32", "FP64", "BF16", "TF32"]


class FakeLinalg:
    """``cupy._core._routines_linalg``'s compute-type switch, as CuPy implements it: the float32
    compute type starts undecided (TBD) and resolves to TF32 on first use when ``CUPY_TF32`` is
    set, else DEFAULT (``CUBLAS_COMPUTE_32F``)."""

    def __init__(self, env: dict):
        self.env, self.types = env, {}

    def compute_type_to_str(self, k):
        return f"COMPUTE_TYPE_{_NAMES[k]}" if 0 <= k < len(_NAMES) else k

    def set_compute_type(self, dtype, k):
        self.types[np.dtype(dtype).char] = k

    def get_compute_type(self, dtype):
        char = np.dtype(dtype).char
        if self.types.get(char, 0) == 0:
            tf32 = int(self.env.get("CUPY_TF32", "0"))
            self.types[char] = _NAMES.index("TF32" if tf32 else "DEFAULT")
        return self.types[char]


def _tf32(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to TF32 (10-bit mantissa), as tensor cores read float32 inputs."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def fake_cupy(env: dict, linalg: bool = True):
    """A CuPy stand-in on host arrays whose ``matmul`` runs TF32 when the compute type says so,
    and records the compute type of every call."""
    lin = FakeLinalg(env) if linalg else types.SimpleNamespace()
    seen = []

    def matmul(a, b, out):
        k = lin.get_compute_type(np.float32) if linalg else (7 if env.get("CUPY_TF32") else 1)
        seen.append(_NAMES[k])
        if _NAMES[k] == "TF32":
            a, b = _tf32(a), _tf32(b)
        np.matmul(a, b, out=out)

    cp = types.SimpleNamespace(
        __version__="0.fake",
        float32=np.float32,
        matmul=matmul,
        asarray=lambda x: x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x),
        empty=lambda shape, dtype: np.empty(shape, dtype),
        asnumpy=np.asarray,
        _core=types.SimpleNamespace(_routines_linalg=lin),
    )
    return cp, lin, seen


@pytest.mark.parametrize("env_tf32", ["0", "1"])
def test_cublas_reference_is_fp32_whatever_cupy_tf32_says(monkeypatch, env_tf32):
    monkeypatch.setenv("CUPY_TF32", env_tf32)
    env = {"CUPY_TF32": env_tf32}
    cp, lin, seen = fake_cupy(env)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((33, 70), dtype=np.float32)
    b = rng.standard_normal((70, 21), dtype=np.float32)

    ref = check.cublas_reference(a, b, blas=check.CupyBlas(cp))
    assert seen == ["DEFAULT"]  # FP32 during the product ...
    assert rel_error(ref, reference_f64(a, b)) <= 1e-6
    resolved = "TF32" if env_tf32 == "1" else "DEFAULT"
    assert _NAMES[lin.types["f"]] == resolved  # ... and CuPy's own setting restored after it

    cp.matmul(a, b, out=np.empty((33, 21), np.float32))  # outside: what CUPY_TF32 asks for
    assert seen[-1] == resolved
    if env_tf32 == "1":  # which is why the harness forces FP32: a TF32 product is 1e-3 off
        tf32 = np.empty((33, 21), np.float32)
        cp.matmul(a, b, out=tf32)
        assert rel_error(tf32, reference_f64(a, b)) > 1e-4


def test_cupy_modes_switch_and_restore(monkeypatch):
    monkeypatch.delenv("CUPY_TF32", raising=False)
    cp, lin, seen = fake_cupy({})
    blas = check.CupyBlas(cp)
    a = np.ones((2, 2), np.float32)
    with blas.tf32_mode():
        cp.matmul(a, a, out=np.empty((2, 2), np.float32))
        with blas.fp32_mode():
            cp.matmul(a, a, out=np.empty((2, 2), np.float32))
        cp.matmul(a, a, out=np.empty((2, 2), np.float32))
    cp.matmul(a, a, out=np.empty((2, 2), np.float32))
    assert seen == ["TF32", "DEFAULT", "TF32", "DEFAULT"]


def test_cupy_without_the_switch(monkeypatch):
    """An old CuPy without ``set_compute_type``: FP32 unless CUPY_TF32 is set, then an error
    rather than a TF32 reference."""
    cp, _, _ = fake_cupy({}, linalg=False)
    blas = check.CupyBlas(cp)
    monkeypatch.delenv("CUPY_TF32", raising=False)
    with blas.fp32_mode():
        pass
    monkeypatch.setenv("CUPY_TF32", "1")
    with pytest.raises(RuntimeError, match="CUPY_TF32"), blas.fp32_mode():
        pass
    with pytest.raises(RuntimeError, match="set_compute_type"), blas.tf32_mode():
        pass


def test_torch_precision_switch_and_restore():
    state = {"p": "high"}  # as after torch.set_float32_matmul_precision("high")
    seen = []
    torch = types.SimpleNamespace(
        __version__="0.fake",
        get_float32_matmul_precision=lambda: state["p"],
        set_float32_matmul_precision=lambda v: state.update(p=v),
        mm=lambda a, b, out: seen.append(("mm", state["p"])),
        bmm=lambda a, b, out: seen.append(("bmm", state["p"])),
    )
    blas = check.TorchBlas(torch)
    mat, batch = types.SimpleNamespace(dim=lambda: 2), types.SimpleNamespace(dim=lambda: 3)
    with blas.fp32_mode():
        blas.matmul(mat, mat, None)
        blas.matmul(batch, batch, None)
    assert seen == [("mm", "highest"), ("bmm", "highest")] and state["p"] == "high"
    with blas.tf32_mode():
        blas.matmul(mat, mat, None)
    assert seen[-1] == ("mm", "high")


def test_reference_without_a_library_is_float64(monkeypatch):
    a = np.random.default_rng(1).standard_normal((5, 4), dtype=np.float32)
    b = np.random.default_rng(2).standard_normal((4, 3), dtype=np.float32)
    ref = check.cublas_reference(a, b, blas=None)
    assert ref.dtype == np.float64 and np.array_equal(ref, reference_f64(a, b))
    with pytest.raises(ValueError, match="inner dimensions"):
        check.cublas_reference(a, a)
    with pytest.raises(ValueError, match="unknown cuBLAS library"):
        check.blas_library("mkl")
    assert check.blas_library("none") is None
    if check.SIMULATOR:
        assert check.blas_library("auto") is None
        assert np.array_equal(check.cublas_reference(a, b), ref)


# --- timers ----------------------------------------------------------------------------------


def _work():
    d = cuda.to_device(np.ones(4, np.float32))
    return lambda: d.copy_to_host()


def test_time_calls_returns_reps_values():
    t = timing.time_calls(_work(), calls=3, reps=4, warmup=1)
    assert len(t.ms) == 4 and all(x > 0 for x in t.ms)
    t = timing.time_calls(_work(), reps=2, warmup=0)  # calls picked by calibration
    assert len(t.ms) == 2 and t.median > 0


def test_time_calls_paired_takes_the_loops_in_turn():
    """Each call's warm-up and calibration first, then one timed loop of each in turn."""
    log = []
    work = _work()

    def call(name):
        def fn():
            log.append(name)
            work()

        return fn

    a, b = timing.time_calls_paired([call("a"), call("b")], reps=3, warmup=2)
    assert len(a.ms) == len(b.ms) == 3 and a.min > 0 and b.min > 0
    # on the simulator a loop is one call and nothing is calibrated: warm-ups, then a, b, ...
    timed = log[-6:] if check.SIMULATOR else None
    assert timed is None or timed == ["a", "b"] * 3, log
    with pytest.raises(ValueError, match="at least one call"):
        timing.time_calls_paired([])
    with pytest.raises(ValueError):
        timing.time_calls_paired([call("a")], reps=0)


def test_time_host_returns_reps_values():
    t = timing.time_host(_work(), calls=5, reps=3, warmup=1)
    assert len(t.ms) == 3 and t.min > 0


@pytest.mark.parametrize("fn", [timing.time_calls, timing.time_host])
def test_timers_reject_bad_counts(fn):
    for kw in (dict(reps=0), dict(warmup=-1), dict(calls=0)):
        with pytest.raises(ValueError):
            fn(lambda: None, **kw)


def test_calls_per_loop():
    assert timing.calls_per_loop(0.01) == 200  # 2 ms of 10 us calls
    assert timing.calls_per_loop(1.0) == 20  # at least 20 calls
    assert timing.calls_per_loop(1e-6) == timing.MAX_CALLS
    assert timing.calls_per_loop(30.0, max_loop_ms=200.0) == 6  # at most --max-ms per loop
    assert timing.calls_per_loop(500.0, max_loop_ms=200.0) == 1
