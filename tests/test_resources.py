"""The no-GPU resource report: every stage compiles for sm_90, and from blocktiling_1d on none
spills or touches local memory; the vectorized stages really use 128-bit instructions."""

from __future__ import annotations

import fcntl
import json
import os

import pytest
from helpers import off_simulator, split_sum_loads

import numba_gemm
from numba_gemm import STAGES
from numba_gemm.kernels.stage import variant_key
from numba_gemm.tools.resources import occupancy_sm90

FIRST_REGISTER_TILED = [s.name for s in STAGES].index("blocktiling_1d")


#: One xdist worker runs this module (``make test``: ``--dist loadgroup``), so the report below
#: (every stage compiled for sm_90, minutes on a CI core) is made once per run, not per worker,
#: while the other worker runs the rest of the suite.
pytestmark = pytest.mark.xdist_group("resources")


def test_one_worker_runs_the_report(request):
    """Under ``--dist loadgroup`` this module is one xdist group: its node ids end in
    ``@resources``, the scheduler's key (``tests/conftest.py`` writes it where pytest 9.2 keeps
    the id; without it the module's tests were spread over both workers, and the second one
    idled ~3 minutes on the report's lock)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker of --dist loadgroup (make test)")
    assert request.node.nodeid.endswith("@resources"), request.node.nodeid


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """``python -m numba_gemm.tools.resources --json`` run once per test run, with the simulator
    off: the first xdist worker to get here writes it into the run's shared temporary folder
    under a file lock, any other one waits and reads it (every stage compiled for sm_90 and
    ptxas run on it: minutes on a CI core)."""
    # one folder for all of this run's xdist workers (each has basetemp/popen-gwN); a run
    # without xdist uses its own basetemp: the parent then holds every run's, and a report
    # left there by an earlier run (of other sources) would be read as this one's
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / "resources-report.json"
    with open(shared / "resources-report.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            part = out.with_suffix(".part")
            res = off_simulator(
                ["-m", "numba_gemm.tools.resources", "--json", str(part)], timeout=900
            )
            assert res.returncode == 0, f"resource report failed:\n{res.stdout}\n{res.stderr}"
            print(res.stdout)
            part.rename(out)
    return {(r["stage"], r["variant"]): r for r in json.loads(out.read_text())}


def test_every_stage_and_variant_reported(report):
    for s in STAGES:
        variants = ["vector", "scalar"] if s.scalar_kernel is not None else ["-"]
        for v in variants:
            r = report[(s.name, variant_key(v, "NN" if "NN" in s.layouts else s.layouts[0]))]
            assert 0 < r["registers"] <= 255 and r["threads"] >= 32
            assert r["blocks_per_sm"] >= 1, f"{s.name}/{v} cannot launch on sm_90"


@pytest.mark.parametrize("stage", [s.name for s in STAGES[FIRST_REGISTER_TILED:]])
def test_no_spills_or_local_memory(report, stage):
    tensor_core = numba_gemm.get_stage(stage).precision != "fp32"
    for (name, variant), r in report.items():
        if name != stage or (tensor_core and variant == "scalar"):
            continue  # known: the tensor-core stages' 4-byte-copy variants spill 64-192 B (NOTES)
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, f"{name}/{variant} spills: {r}"
        assert r["stack_frame"] == 0, f"{name}/{variant} uses {r['stack_frame']} B of local memory"
        assert r["ptx_local"] == 0, f"{name}/{variant} has ld/st.local in its PTX"


@pytest.mark.parametrize(
    "stage",
    [
        s.name
        for s in STAGES  # tensor-core stages: cp.async, ldmatrix
        if s.scalar_kernel is not None and s.precision == "fp32"
    ],
)
def test_vector_stages_emit_128bit_accesses(report, stage):
    vec, scalar = report[(stage, "vector")], report[(stage, "scalar")]
    assert vec["ptx_ld_global_v4"] >= 2, "A and B tiles must be loaded with ld.global.v4.f32"
    assert vec["ptx_ld_shared_v4"] >= 4, "fragments must be read with ld.shared.v4.f32"
    assert vec["ptx_st_global_v4"] >= 1, "C must be written with st.global.v4.f32"
    # the scalar fallback reads A and B 4 bytes at a time: its only 128-bit loads are the
    # split-K sum's, of the workspace
    sum_loads = split_sum_loads(numba_gemm.get_stage(stage))
    assert scalar["ptx_ld_global_v4"] == sum_loads, (
        "the scalar fallback must not use vector GMEM loads"
    )


@pytest.mark.parametrize("stage", [s.name for s in STAGES])
def test_tensor_cores_only_in_tensor_core_stages(report, stage):
    """The report's evidence: mma.sync in every kernel of a tensor-core stage (ldmatrix from
    stage 12 on) or wgmma in the Hopper stages (operands from SMEM: no ldmatrix), none in the
    FP32 (FFMA) stages."""
    st = numba_gemm.get_stage(stage)
    for (name, variant), r in report.items():
        if name != stage:
            continue
        if st.precision == "fp32":
            assert r["ptx_mma"] == 0 and r["ptx_ldmatrix"] == 0, f"{name}/{variant}: {r}"
            assert r["ptx_wgmma"] == 0, f"{name}/{variant}: {r}"
        elif st.arch is not None:
            assert r["ptx_wgmma"] > 0 and r["ptx_mma"] == 0, f"{name}/{variant}: {r}"
        else:
            assert r["ptx_mma"] > 0, f"{name}/{variant}: no mma.sync in the PTX"
            assert r["ptx_ldmatrix"] > 0 or name == "tf32_mma", f"{name}/{variant}: no ldmatrix"


def test_occupancy_model():
    # 256 threads, 128 regs, 16 KB: 2 blocks by registers (65536 / (128 * 256))
    assert occupancy_sm90(128, 16 * 1024, 256) == (2, 0.25)
    # register allocation unit: 129 regs round up to 136 per thread -> 1 block
    assert occupancy_sm90(129, 0, 256)[0] == 1
    # SMEM-bound: 100 KB per block -> 2 blocks in 228 KB
    assert occupancy_sm90(32, 100 * 1024, 128)[0] == 2
    # thread-bound: 1024 threads, few registers -> 2 blocks
    assert occupancy_sm90(16, 0, 1024) == (2, 1.0)
    # over the per-block SMEM maximum: cannot launch
    assert occupancy_sm90(32, 230 * 1024, 128)[0] == 0
