"""The cost model's fit for ``x @ W.T`` (``tools.calibrate``, ``tuning.FIT_NT``): how the fit
is computed from probe rows, where it is written, and which products it reprices (no GPU)."""

from __future__ import annotations

import json
import math

import pytest

from numba_gemm.plan import tuning
from numba_gemm.plan.choose import _device_info, plan_for, ranked
from numba_gemm.plan.geometry import Alignment, Geometry
from numba_gemm.tools import calibrate
from numba_gemm.tools.bench import sizes

CFG = dict(BM=128, BN=128, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1)
SHAPE = [4096, 4096, 4096]


def record(cfg, ms, ms_nt):
    return dict(config=cfg, ms=ms, shape=SHAPE, blocks_per_sm=1, ms_nt=ms_nt, blocks_per_sm_nt=1)


@pytest.fixture
def two_stages(monkeypatch, tmp_path, fake_gpu):
    """A large class of two stages on a fake GPU: multistage priced faster with B transposed
    (3.0 against 3.25 ms at 4096^3), double_buffering faster with B row-major."""
    path = tmp_path / "t.json"
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(path))
    monkeypatch.setattr(tuning, "DEFAULTS_DIR", tmp_path)
    fake_gpu("Fake GPU", (9, 0), sms=132)
    data = tuning.load(path)
    tuning.record(
        data, "Fake GPU", (9, 0), "large", "multistage", record(dict(CFG, NBUF=2), 3.3, 3.0)
    )
    tuning.record(data, "Fake GPU", (9, 0), "large", "double_buffering", record(CFG, 3.2, 3.25))
    tuning.save(data, path)
    return path


def fit_multistage(path, fit):
    data = tuning.load(path)
    res = data["gpus"]["Fake GPU"]["classes"]["large"]["multistage"]
    res[tuning.FIT_NT] = [
        {"config": {k: v for k, v in res["config"].items() if k != "SPLITK"}, "fit": fit, "n": 3}
    ]
    tuning.save(data, path)


def test_a_fit_reprices_its_configuration_with_b_transposed_only(two_stages):
    """Fitted at 1.5, the multistage candidate's NT price is 1.5x the model's and the pick moves
    to double_buffering; row-major B (NN, TN), unaligned rows (the scalar kernel) and the
    model's own price (``fitted=False``, what the probe records) are not fitted."""
    nt = Geometry.dense(4096, 4096, 4096, "NT")
    assert plan_for(4096, 4096, 4096, geometry=nt).stage.name == "multistage"
    fit_multistage(two_stages, 1.5)

    def price(g, aligned=True, fitted=True):
        picks = ranked(g, aligned, _device_info(None), "fp32", Alignment.ALL, fitted=fitted)
        return {st.name: ms for ms, st, _ in picks if ms is not None}

    fitted, model = price(nt), price(nt, fitted=False)
    assert fitted["multistage"] == pytest.approx(1.5 * model["multistage"])
    assert fitted["double_buffering"] == model["double_buffering"]
    assert plan_for(4096, 4096, 4096, geometry=nt).stage.name == "double_buffering"
    for layout in ("NN", "TN"):
        g = Geometry.dense(4096, 4096, 4096, layout)
        assert price(g) == price(g, fitted=False)
    odd = Geometry.dense(4095, 4095, 4095, "NT")
    assert price(odd, aligned=False) == price(odd, aligned=False, fitted=False)


def rows(gpu="Fake GPU"):
    base = dict(gpu=gpu, layout="NT", where="the large class", stage="multistage",
                config=dict(CFG, NBUF=2, SPLITK=4), variant="vector")  # fmt: skip
    return [
        dict(base, ms=2.0, model_ms=1.0),
        dict(base, config=dict(CFG, NBUF=2, SPLITK=1), ms=8.0, model_ms=1.0),  # any split alike
        dict(base, where="the measured shape 128x4096x4096", ms=9.0, model_ms=1.0),
        dict(base, layout="NN", ms=9.0, model_ms=1.0),
        dict(base, variant="scalar", ms=9.0, model_ms=1.0),
        dict(base, stage="double_buffering", config=CFG, ms=1.0, model_ms=2.0),
    ]


def test_factors_are_shrunk_geomeans_of_class_candidates_with_b_transposed():
    fits = calibrate.factors(rows())
    key = tuning.fit_key(dict(CFG, NBUF=2))
    assert fits == {
        ("Fake GPU", "large", "multistage", key): (pytest.approx(16 ** (1 / 3)), 2),
        ("Fake GPU", "large", "double_buffering", tuning.fit_key(CFG)): (
            pytest.approx(0.5**0.5),
            1,
        ),
    }
    with pytest.raises(ValueError, match="row 0: needs gpu"):
        calibrate.factors([{k: v for k, v in rows()[0].items() if k != "model_ms"}])
    with pytest.raises(ValueError, match="must be positive"):
        calibrate.factors([dict(rows()[0], ms=0.0)])


def test_fit_writes_the_classes_and_replaces_old_fits(two_stages, tmp_path):
    """``--fit`` writes each (class, stage) result's list, drops a fit no longer measured, and
    the plan reads it back; a probe of a GPU the file has no classes for is refused."""
    data = tuning.load(two_stages)
    data["gpus"]["Fake GPU"]["classes"]["large"]["double_buffering"][tuning.FIT_NT] = [
        {"config": {"BM": 64}, "fit": 9.0, "n": 1}
    ]
    tuning.save(data, two_stages)
    probe = tmp_path / "probe.jsonl"
    probe.write_text("".join(json.dumps(r) + "\n" for r in rows()[:2]))
    report = calibrate.fit([probe], two_stages)
    assert report.count("\n") == 1 and "large multistage" in report
    classes = tuning.load(two_stages)["gpus"]["Fake GPU"]["classes"]["large"]
    assert tuning.FIT_NT not in classes["double_buffering"]
    table = tuning.fit_table(classes["multistage"])
    assert table == {tuning.fit_key(dict(CFG, NBUF=2)): pytest.approx(16 ** (1 / 3), abs=1e-4)}
    nt = Geometry.dense(4096, 4096, 4096, "NT")
    assert plan_for(4096, 4096, 4096, geometry=nt).stage.name == "double_buffering"
    probe.write_text(json.dumps(rows("Other GPU")[0]) + "\n")
    with pytest.raises(ValueError, match="no classes for 'Other GPU'"):
        calibrate.fit([probe], two_stages)


def test_fit_table_drops_malformed_entries():
    good = {"config": dict(CFG), "fit": 1.25, "n": 4}
    bad = [{"config": CFG, "fit": -1.0}, {"fit": 2.0}, {"config": CFG, "fit": True}, "x"]
    with pytest.warns(UserWarning, match="malformed fit_nt"):
        table = tuning.fit_table({tuning.FIT_NT: [good, *bad]})
    assert table == {tuning.fit_key(CFG): 1.25}
    assert tuning.fit_key(dict(CFG, SPLITK=8)) == tuning.fit_key(CFG)


def test_committed_fits_name_class_candidates():
    """Every committed fit parses and is of a configuration its (class, stage) result runs: one
    of its candidates, at any split, with its own ``MINB`` or a pinned one."""
    for path in sorted(tuning.DEFAULTS_DIR.glob("sm_*.json")):
        for entry in tuning.load(path)["gpus"].values():
            for cls in entry["classes"].values():
                for name, res in cls.items():
                    table = tuning.fit_table(res)
                    runs = {
                        tuning.fit_key({k: v for k, v in c["config"].items() if k != "MINB"})
                        for c in tuning.candidates(res, name)
                    }
                    for key in table:
                        assert 0.5 < table[key] < 2.5
                        assert tuple(kv for kv in key if kv[0] != "MINB") in runs


def test_training_projections_are_a_fixed_draw_apart_from_the_held_out_ones():
    a, b = sizes.training_projections(40, 101), sizes.training_projections(40, 102)
    assert a == sizes.training_projections(40, 101) and a != b and len(a) == 40
    for M, N, K in a + b:
        assert M % 8 == 0 and N % 64 == 0 and K % 64 == 0 and M * N * K <= 2**37
        assert 24 <= M <= 3072 and 1536 <= N <= 32768 and 1536 <= K <= 16384
    held = {(M, N, K) for M, N, K, _ in sizes.heldout_random(40)}
    held |= {s for w in (1, 2, 3) for _, s in sizes.heldout_models(w)}
    assert not held & set(a + b)
    assert sizes.HELDOUT_SEED not in sizes.TRAINING_SEEDS
    # a narrower range of rows (a probe of the few-hundred-token products): the same draw's
    # kind, its rows in range; the default range gives the committed fit's list
    assert sizes.TRAINING_ROWS == (24, 3072)
    assert sizes.training_projections(40, 101, (24, 3072)) == a
    few = sizes.training_projections(30, 104, (128, 512))
    assert len(few) == 30 and all(128 <= M <= 512 and M % 8 == 0 for M, _, _ in few)
    assert not held & set(few)
    for rows in ((4, 64), (512, 128)):
        with pytest.raises(ValueError, match="rows must be"):
            sizes.training_projections(4, 101, rows)


def test_cli_needs_one_mode(tmp_path, capsys):
    for argv in ([], ["--probe", "--fit", "x"], ["--fit", str(tmp_path / "p.jsonl")]):
        with pytest.raises(SystemExit) as e:
            calibrate.main(argv)
        assert e.value.code == 2
    assert "--fit needs --into" in capsys.readouterr().err
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"gpu": "G"}\n')
    with pytest.raises(SystemExit) as e:
        calibrate.main(["--fit", str(bad), "--into", str(tmp_path / "t.json")])
    assert e.value.code == 2 and "probe row 0: needs gpu" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # refused before any GPU is looked for
        calibrate.main(["--probe", "--out", str(tmp_path), "--rows", "600", "100"])
    assert e.value.code == 2 and "--rows: rows must be (lo, hi) with 8 <= lo <= hi" in (
        capsys.readouterr().err
    )
    assert math.isclose(calibrate.TOP, 12)
