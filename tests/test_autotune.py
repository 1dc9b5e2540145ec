"""Autotuning that persists (``plan.autotune``): the first call of a bucket times the cost model's
top candidates and runs the fastest; the store survives the process, is keyed by the version and
the kernel sources, and is consulted only when autotuning is on. On the simulator the timer is a
stand-in (the kernels still run, and their results are checked); on a GPU it times for real."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import requires_gpu
from helpers import randn
from numba import cuda

import numba_gemm
from numba_gemm.plan import autotune, tuning
from numba_gemm.tools.reference import reference_f64, rel_error

SHAPE = (37, 45, 21)  # ragged: the scalar variant, one block of any tuned tile


@pytest.fixture
def store(tmp_path, monkeypatch, fake_gpu):
    """Autotuning on, its store (and the kernel cache) in a fresh directory, an H200 as the plan
    sees it (the committed sm_90 data prices the candidates); off again afterwards."""
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "no-user-tuning.json"))
    monkeypatch.delenv(tuning.AUTOTUNE_ENV, raising=False)
    fake_gpu("NVIDIA H200", (9, 0), 132)
    autotune.timed.clear()
    numba_gemm.autotune(True)
    yield tmp_path / "cache" / "autotune.json"
    numba_gemm.autotune(None)


class Timer:
    """A stand-in for ``autotune.time_plan``: the ``fastest``-th candidate timed is the fastest;
    remembers what it timed."""

    def __init__(self, fastest: int = 1, fail: int | None = None):
        self.fastest, self.fail, self.plans = fastest, fail, []

    def __call__(self, plan):
        i = len(self.plans)
        self.plans.append(plan)
        if i == self.fail:
            raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        return (0.5 if i == self.fastest else 1.0 + i), 1


def _key(plan):
    return plan.stage.name, dict(plan.stage.config)


def _run(rng, shape=SHAPE):
    M, N, K = shape
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.sgemm(d_a, d_b, out=d_c)
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= 1e-5
    return d_a, d_b


def test_first_call_of_a_bucket_runs_the_fastest_timed_candidate(store, rng, monkeypatch):
    """The model's order is timed (at most CANDIDATES, every one a candidate the model weighs);
    the call runs the fastest, which is not the model's own pick here, and its result is right;
    the store holds the timings under this version's key."""
    timer = Timer(fastest=1)
    monkeypatch.setattr(autotune, "time_plan", timer)
    d_a, d_b = _run(rng)
    assert 2 <= len(timer.plans) <= autotune.CANDIDATES
    assert len({str(_key(p)) for p in timer.plans}) == len(timer.plans)
    assert numba_gemm.explain(d_a, d_b).stage.name == timer.plans[1].stage.name
    assert _key(numba_gemm.explain(d_a, d_b)) == _key(timer.plans[1])
    data = json.loads(store.read_text())
    assert data["key"] == tuning.autotune_key()
    (rec,) = data["gpus"]["NVIDIA H200"]["shapes"]
    assert tuple(rec["shape"]) == SHAPE and rec["aligned"] is False
    assert [c["ms"] for c in rec["candidates"]] == sorted(c["ms"] for c in rec["candidates"])
    assert rec["candidates"][0]["config"] == dict(timer.plans[1].stage.config)
    # timed with split-K's spread sum: priced at their own times where the store is consulted
    assert all(c[tuning.SPREAD_SUM] is True for c in rec["candidates"])
    _run(rng)  # the same bucket again: nothing timed
    assert len(timer.plans) == len(rec["candidates"])


def test_a_later_process_runs_the_stored_winner_without_timing(store, rng, monkeypatch):
    """A new process (nothing in memory) with autotuning on: the stored winner, zero timings, for
    the tuned shape and for one in its bucket; with autotuning off the store is not read."""
    first = Timer(fastest=2)
    monkeypatch.setattr(autotune, "time_plan", first)
    _run(rng)
    winner = _key(first.plans[2])
    tuning.reload()  # what a fresh process starts from
    monkeypatch.setattr(autotune, "time_plan", Timer(fail=0))  # timing would fail the call
    later = Timer()
    monkeypatch.setattr(autotune, "time_plan", later)
    d_a, d_b = _run(rng)
    assert later.plans == [] and _key(numba_gemm.explain(d_a, d_b)) == winner
    _run(rng, (40, 45, 21))  # in the bucket (closer than tuning.NEAR)
    assert later.plans == []
    numba_gemm.autotune(False)
    assert "autotune" not in numba_gemm.explain(d_a, d_b).reason
    assert "the measured shape 37x45x21" in _explained_with(True, d_a, d_b)


def _explained_with(on, d_a, d_b):
    numba_gemm.autotune(on)
    return numba_gemm.explain(d_a, d_b).reason


def test_results_of_another_version_are_discarded_with_a_warning(store, rng, monkeypatch):
    store.parent.mkdir(parents=True)
    old = {"format": tuning.FORMAT, "key": {"numba_gemm": "0.0.1", "sources": "0" * 64}}
    old["gpus"] = {"NVIDIA H200": {"compute_capability": [9, 0], "classes": {}, "shapes": []}}
    store.write_text(json.dumps(old))
    with pytest.warns(UserWarning, match="discarding the autotuned results"):
        assert tuning.load_autotuned()["gpus"] == {}
    timer = Timer()
    monkeypatch.setattr(autotune, "time_plan", timer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(rng)
    assert timer.plans, "the shape is tuned again"
    assert json.loads(store.read_text())["key"] == tuning.autotune_key()


def test_a_candidate_that_fails_is_skipped_and_the_budget_bounds_the_timing(
    store, rng, monkeypatch
):
    """A candidate that cannot launch is recorded as failed, not chosen; with no time budget
    left, two candidates are timed."""
    monkeypatch.setattr(autotune, "BUDGET_S", 0.0)
    timer = Timer(fastest=1, fail=0)
    monkeypatch.setattr(autotune, "time_plan", timer)
    d_a, d_b = _run(rng)
    assert len(timer.plans) == 2
    (rec,) = json.loads(store.read_text())["gpus"]["NVIDIA H200"]["shapes"]
    assert len(rec["candidates"]) == 1 and "OUT_OF_RESOURCES" in rec["failed"][0]
    assert _key(numba_gemm.explain(d_a, d_b)) == _key(timer.plans[1])


def test_off_explain_batches_and_named_stages_time_nothing(tmp_path, rng, monkeypatch, fake_gpu):
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path))
    fake_gpu("NVIDIA H200", (9, 0), 132)
    timer = Timer()
    monkeypatch.setattr(autotune, "time_plan", timer)
    numba_gemm.autotune(False)
    _run(rng)
    numba_gemm.autotune(True)
    try:
        d_a, d_b = (cuda.to_device(randn(rng, s)) for s in ((3, 50, 40), (3, 40, 30)))
        numba_gemm.explain(d_a[0], d_b[0])
        numba_gemm.sgemm(d_a, d_b)  # a batch
        numba_gemm.sgemm(d_a[0], d_b[0], stage="warptiling")
    finally:
        numba_gemm.autotune(None)
    assert timer.plans == [] and not (tmp_path / "autotune.json").exists()


def test_autotune_switch_and_environment(monkeypatch):
    with pytest.raises(TypeError, match="enabled must be True, False or None"):
        numba_gemm.autotune("yes")
    monkeypatch.setenv(tuning.AUTOTUNE_ENV, "1")
    numba_gemm.autotune(None)
    assert tuning.autotune_enabled()
    numba_gemm.autotune(False)
    assert not tuning.autotune_enabled()
    numba_gemm.autotune(None)
    monkeypatch.setenv(tuning.AUTOTUNE_ENV, "0")
    assert not tuning.autotune_enabled()


@requires_gpu
def test_autotune_times_on_the_gpu(tmp_path, rng, monkeypatch):
    """On a GPU: real timings, positive and ordered; a fresh process's plan is the stored
    winner."""
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path))
    numba_gemm.autotune(True)
    try:
        d_a, d_b = _run(rng, (300, 700, 500))
        store = json.loads((tmp_path / "autotune.json").read_text())
        (rec,) = store["gpus"].popitem()[1]["shapes"]
        ms = [c["ms"] for c in rec["candidates"]]
        assert all(t > 0 for t in ms) and ms == sorted(ms)
        tuning.reload()
        plan = numba_gemm.explain(d_a, d_b)
        assert plan.stage.name == rec["candidates"][0]["stage"]
    finally:
        numba_gemm.autotune(None)


def test_heldout_problems_are_fixed_by_their_seed_and_in_range():
    from numba_gemm.tools.bench.sizes import HELDOUT_LAYERS, heldout_models, heldout_random

    a = heldout_random(40)
    assert a == heldout_random(40) and a != heldout_random(40, seed=1)
    assert all(1 <= d <= 23170 for M, N, K, _ in a for d in (M, N, K))
    assert all(2**18 <= M * N * K <= 2**37 for M, N, K, _ in a)
    assert {lay for *_, lay in a} == {"NN", "NT"}
    models = heldout_models()
    assert len(models) == 3 * sum(len(v) for v in HELDOUT_LAYERS.values())
    assert ("qwen2.5-7b", (8, 4608, 3584)) in models  # tokens x fused QKV x d_model
    second, third = heldout_models(2), heldout_models(3)
    assert len(second) == 60 and ("qwen2-1.5b", (320, 2048, 1536)) in second
    assert len(third) == 60 and ("yi-6b", (200, 22016, 4096)) in third
    # no set shares a product with another
    sets = [{s for _, s in m} for m in (models, second, third)]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    with pytest.raises(ValueError, match="1, 2 or 3"):
        heldout_models(4)


def test_tune_shapes_cli_autotunes_each_product(monkeypatch, capsys, tmp_path):
    """``tools.tune --shapes``: each product through ``autotune.tune`` in its layout, forced on
    request; a product with nothing to time fails the run (exit 1)."""
    from numba_gemm.tools import tune as tune_cli

    calls = []

    def fake(g, aligned, dev, force=False, pointers=None):
        calls.append((g.M, g.N, g.K, g.layout, aligned, force))
        if g.M == 7:
            return None
        cand = {"stage": "multistage", "config": {"BM": 128}, "ms": 0.5, "rank": 1}
        return {"candidates": [cand, dict(cand, ms=0.7, rank=0)], "seconds": 0.2}

    monkeypatch.setattr(tune_cli.tuning, "current_device", lambda: ("Fake GPU", (9, 0)))
    monkeypatch.setattr(autotune, "tune", fake)
    shapes = tmp_path / "model.txt"
    shapes.write_text("64x128x256  # qkv\n7x9x11\n")
    assert tune_cli.main(["--shapes", str(shapes), "--layout", "NT", "--force"]) == 1
    assert calls == [(64, 128, 256, "NT", True, True), (7, 9, 11, "NT", False, True)]
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "64,128,256,NT,True,multistage,BM=128,0.5,0.7,0.2"
    assert out[2].startswith("7,9,11,NT,False,none")
