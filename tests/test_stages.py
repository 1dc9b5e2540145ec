"""Every stage in STAGES, on every shape, against a float64 reference (relative error)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHAPES, requires_gpu
from helpers import (
    HALF,
    check_sgemm,
    randn,
    sim_sized,
    to_device,
    to_host,
    transposed_on_device,
)
from numba import cuda

import numba_gemm
from numba_gemm import STAGES
from numba_gemm.device import SIMULATOR
from numba_gemm.kernels import k15_skinny, k16_skinny_n
from numba_gemm.plan import tuning

stage_ids = [s.name for s in STAGES]
#: Stages that take a bounded number of rows or columns.
LIMIT = {"skinny": f"M > {k15_skinny.MAX_M}", "skinny_n": f"N > {k16_skinny_n.MAX_N}"}


def _one_and_a_part(x: int, block: int) -> int:
    """``x`` cut to one whole ``block`` and a partial one (``x`` if it is at most two blocks),
    keeping ``x % 4`` (a multiple-of-4 ``block``): the 128-bit or scalar variant is unchanged."""
    return x if x <= 2 * block else block + (x % block or block)


def sim_shape(stage, M: int, N: int, K: int) -> tuple[int, int, int]:
    """The shape a stage runs for ``(M, N, K)``: as given on a GPU; on the simulator M and N
    cut to one whole block and a partial one of the stage's simulator-sized tile
    (:func:`helpers.sim_sized`, :func:`_one_and_a_part`). Each shape keeps its idea there (K,
    ragged or aligned rows, a whole and a partial block along M and N, tall or wide for the
    128-wide tiles) without the further blocks, which run the same code: each block is tens to
    a thousand Python threads (the skinny stages' blocks are 4-8 rows and their warp shuffles
    are modelled thread by thread: 131 x 6 x 9 was 33 skinny_n blocks, 20 s on a CI core)."""
    if not SIMULATOR:
        return M, N, K
    BM, BN = sim_sized(stage).tile
    return _one_and_a_part(M, BM), _one_and_a_part(N, BN), K


@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_stage_matches_reference(stage, shape, rng):
    """Every stage on every shape of ``SHAPES`` (on the simulator cut to two blocks along M and
    N: :func:`sim_shape`)."""
    M, N, K = shape
    if not stage.supports(M, N, K):
        pytest.skip(f"{stage.name} does not take {shape} ({LIMIT.get(stage.name)})")
    if "NN" not in stage.layouts and N == 1:
        pytest.skip(f"{stage.name} takes B stored transposed; one column of B is row-major too")
    run = sim_shape(stage, M, N, K)
    err, out = check_sgemm(sim_sized(stage), rng, *run)
    assert np.isfinite(out).all(), f"{run}: unwritten (NaN) or non-finite elements in C"
    assert err <= stage.rtol, f"{stage.name} {run}: rel. error {err:.3g} > {stage.rtol}"


@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
@pytest.mark.parametrize(
    "alpha, beta",
    [(-1.5, 2.0), (0.0, 0.75)],  # both scalars applied (C read); alpha 0: only beta * C
    ids=["alpha-beta", "alpha0"],
)
def test_stage_alpha_beta(stage, alpha, beta, rng):
    err, _ = check_sgemm(
        sim_sized(stage), rng, *sim_shape(stage, 37, 42, 19), alpha=alpha, beta=beta
    )
    assert err <= stage.rtol, f"{stage.name} alpha={alpha} beta={beta}: rel. error {err:.3g}"


@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
def test_stage_launch_config_covers_c(stage):
    """The grid of ``launch_config`` covers C with the stage's block tile, with no block wholly
    outside C (the kernels' NaN-poison tests then check each block writes its whole tile)."""
    assert stage.tile is not None, f"{stage.name} does not declare its block tile"
    BM, BN = stage.tile
    for M, N, K in [(1, 1, 1), (129, 257, 3), (4096, 4096, 4096), (4095, 4097, 33), (7, 3000, 5)]:
        grid, block = stage.launch_config(M, N, K)
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        if stage.persistent:  # blocks walk the tiles: no more blocks than tiles
            assert 1 <= gx <= -(-M // BM) * -(-N // BN) and gy == 1, f"{(M, N)}: grid {grid}"
        else:
            assert gx * BN >= N and gy * BM >= M, f"{(M, N)}: grid {grid} x tile {stage.tile}"
            assert (gx - 1) * BN < N and (gy - 1) * BM < M, f"{(M, N)}: empty blocks in {grid}"
        assert gz == stage.split_k
        assert all(b >= 1 for b in block) and np.prod(block) <= 1024, f"block {block}"


def test_stage_names_unique_and_ordered():
    names = [s.name for s in STAGES]
    assert len(set(names)) == len(names)
    assert names[:3] == ["naive", "gmem_coalesce", "smem_tiling"]
    for s in STAGES:
        assert numba_gemm.get_stage(s.name) is s


def _structure(config):
    """A configuration as the suite runs it: at most two K slices (``SPLITK`` is a launch
    parameter the plan varies anyway, :func:`numba_gemm.plan.split_options`; deep splits are
    tested on small tiles in test_skinny and test_layouts; stream-K, 0, stays), and on the
    simulator ``MINB`` dropped (ptxas launch bounds, which the simulator ignores). On a GPU
    ``MINB`` stays: it is what caps a 512- or 1024-thread block's registers at what fits the
    register file (without it a 512-thread skinny kernel took 121 registers and failed with
    ``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``)."""
    cfg = dict(config)
    if "MINB" in cfg and SIMULATOR:
        cfg["MINB"] = 0
    if "SPLITK" in cfg:
        cfg["SPLITK"] = min(cfg["SPLITK"], 2)
    return cfg


def _committed_configs():
    """The tile structure (:func:`_structure`) of every (stage, config) of the committed tuning
    defaults: winners and alternatives, and the measured shapes' candidates."""
    out = {}

    def add(name, config):
        cfg = _structure(config)
        out[(name, str(sorted(cfg.items())))] = (name, cfg)

    for path in sorted(tuning.DEFAULTS_DIR.glob("sm_*.json")):
        for entry in tuning.load(path)["gpus"].values():
            for classes in entry["classes"].values():
                for name, res in classes.items():
                    for c in tuning.candidates(res, name):
                        add(name, c["config"])
            for rec in entry.get("shapes", []):  # the measured shapes' candidates
                for c in rec["candidates"]:
                    add(c["stage"], c["config"])
    return list(out.values())


#: On the simulator, at most this many committed structures per stage, spread evenly over its
#: list (every one of them runs on a GPU: ``make test-gpu``). Each is a kernel of 64-256 Python
#: threads a block; all 141 took about half of the test command's time on two cores.
SIM_CONFIGS_PER_STAGE = 8
#: The TMA stages' blocks are 256-640 Python threads, and their configurations differ only in
#: the tile constants (the pipeline is one code path; tests/test_tma.py and the stage tests
#: cover it): three each.
SIM_CONFIGS_TMA = 3


def _sampled(configs):
    by_stage: dict = {}
    for name, cfg in configs:
        by_stage.setdefault(name, []).append((name, cfg))
    out = []
    for name, group in by_stage.items():
        most = SIM_CONFIGS_TMA if numba_gemm.get_stage(name).tensor_maps else SIM_CONFIGS_PER_STAGE
        step = max(1, -(-len(group) // most))
        out += group[::step]
    return out


COMMITTED = _committed_configs()
if SIMULATOR:
    COMMITTED = _sampled(COMMITTED)


def _sim_shapes(name, config):
    """A ragged shape (scalar variant) and one with 16-byte aligned rows (vector variant); for
    skinny each is one whole block and a partial one along M: the simulator's time grows with
    the blocks. skinny_n's blocks (256-512 threads, every lane's reduce-scatter of shuffles
    modelled thread by thread) took 6-7 s each on a CI core whatever their rows, so its shapes
    are one partial column block (the aligned one: 4 columns short, or NB = 4 whole) and rows
    for two warps and part of a third (the block's other warps idle)."""
    if name == "skinny":
        m = config["MT"] + 1
        return [(m, 45, 21), (m, 36, 24)]
    if name == "skinny_n":
        nb, m = config["NB"], 2 * config["RW"] + 1
        return [(m, nb - 1, 21), (m, max(4, nb - 4), 24)]
    return [(37, 45, 21), (20, 36, 24)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, config", COMMITTED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(COMMITTED)]
)
def test_committed_tuned_configs_run(name, config, rng):
    """The configurations sgemm picks on the GPU they were tuned on (their tile structure:
    :func:`_structure`), run here on a ragged shape and on a shape with aligned rows (scalar and
    vector variants). On the simulator each configuration runs one of the two, in turn along the
    list, so both variants of every stage run and the test command stays short."""
    stage = numba_gemm.get_stage(name).with_config(config)
    shapes = _sim_shapes(name, config)
    if SIMULATOR:
        shapes = [shapes[COMMITTED.index((name, config)) % 2]]
    for M, N, K in shapes:
        err, out = check_sgemm(stage, rng, M, N, K)
        assert np.isfinite(out).all(), f"{name} {config} {(M, N, K)}: unwritten elements"
        assert err <= stage.rtol, f"{name} {config} {(M, N, K)}: rel. error {err:.3g}"


#: 32-column tiles, which the skinny_n class holds since it was re-tuned with them (N of 17-32 in
#: one column of tiles, docs/design.md §4.17); the simulator's sample of the committed structures
#: above need not include double_buffering's.
NARROW_N_TILES = [
    ("double_buffering", dict(BM=128, BN=32, BK=16, WM=32, WN=32, WNITER=1, TM=4, TN=4, SPLITK=2)),
    (
        "multistage",
        dict(BM=128, BN=32, BK=16, WM=64, WN=16, WNITER=1, TM=8, TN=4, SPLITK=2, NBUF=3),
    ),
]


@pytest.mark.parametrize("name, config", NARROW_N_TILES, ids=[n for n, _ in NARROW_N_TILES])
def test_narrow_n_tiles(name, config, rng):
    """A 32-column tile on products narrower than it: a ragged one (scalar variant, 26 columns)
    and one with aligned rows (vector variant, 20 columns), C NaN-poisoned, against float64."""
    stage = numba_gemm.get_stage(name).with_config(dict(config, MINB=0))
    for M, N, K in [(37, 26, 21), (20, 20, 24)]:
        err, out = check_sgemm(stage, rng, M, N, K)
        assert np.isfinite(out).all(), f"{name} {(M, N, K)}: unwritten elements"
        assert err <= stage.rtol, f"{name} {(M, N, K)}: rel. error {err:.3g}"


@requires_gpu
@pytest.mark.parametrize("stage", STAGES, ids=stage_ids)
def test_stage_4096_matches_cublas(stage, rng):
    """Acceptance check on a GPU: 4096^3 against CuPy's cuBLAS SGEMM (TF32 off; for a 16-bit
    stage, SGEMM of the same FP16 / BF16 values)."""
    cp = pytest.importorskip("cupy", reason="CuPy (cuBLAS) is needed for this check")
    from numba_gemm.tools.reference import rel_error

    m = n = k = 4096
    if not stage.supports(m, n, k):  # the skinny stages: a few rows, or a few columns
        m, n = (16, n) if stage.supports(16, n, k) else (m, 16)
    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    half = HALF.get(stage.precision)
    if half is not None:  # hgemm on 16-bit operands; the reference: their FP32 product
        a, b = a.astype(half), b.astype(half)
        out = to_host(numba_gemm.hgemm(to_device(a), to_device(b), stage=stage))
        a, b = a.astype(np.float32), b.astype(np.float32)
    else:
        # a stage without row-major B (tf32_tma) gets B stored transposed: x @ W.T
        d_b = cuda.to_device(b) if "NN" in stage.layouts else transposed_on_device(b)
        out = numba_gemm.sgemm(cuda.to_device(a), d_b, stage=stage).copy_to_host()
    ref = (cp.asarray(a) @ cp.asarray(b)).get()
    err = rel_error(out, ref)
    assert err <= stage.rtol, f"{stage.name} 4096^3 vs cuBLAS: rel. error {err:.3g}"
