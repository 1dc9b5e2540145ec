"""Register limits and instruction kinds of single kernels, compiled for sm_90 without a GPU
(each test in a process of its own, simulator off). Kept apart from ``test_resources.py``, whose
module is one xdist group on one worker (the whole-package report): these tests do not read that
report, so ``make test`` schedules them on the other workers."""

from __future__ import annotations

import json

from helpers import off_simulator, split_sum_loads

import numba_gemm


def test_skinny_n_blocks_of_512_threads_launch():
    """skinny_n's 512-thread configurations keep to the 128 registers a thread of such a block
    can have, in every variant and layout (without the block size told to ptxas, the one the
    plan picks at 4096 x 16 x 4096 took 140 registers with B stored transposed, 151-153 in the
    scalar variant, and could not launch)."""
    code = """
import dataclasses, json, numba_gemm
from numba_gemm.tools import resources
st = numba_gemm.get_stage("skinny_n").with_config(
    dict(NB=16, RW=4, THREADS=512, KC=128, SPLITK=2, MINB=0))
print(json.dumps([dataclasses.asdict(resources.kernel_resources(st, st.kernel_for(v, lay), v, lay))
                  for v in ("vector", "scalar") for lay in ("NN", "NT")]
                 + [dataclasses.asdict(resources.kernel_resources(
                     st, st.kernel_for("vector_loads", "NT"), "vector_loads", "NT"))]))
"""
    res = off_simulator(["-c", code], timeout=900)
    assert res.returncode == 0, res.stderr
    reports = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(reports) == 5
    for r in reports:
        assert r["registers"] <= 128 and r["blocks_per_sm"] >= 1, r


def test_vector_loads_variant_loads_128_bits_and_stores_32():
    """The vector_loads variant (``registry.VECTOR_LOADS``, x @ W.T with an odd N) of the tiled
    and the few-rows stage, B stored transposed: ld.global.v4 for A and W, no st.global.v4 (C's
    rows are not aligned), and (the tiled stage) no fewer blocks an SM than the scalar twin it
    replaces."""
    code = """
import dataclasses, json, numba_gemm
from numba_gemm.tools import resources
def report(st, v):
    return dataclasses.asdict(resources.kernel_resources(st, st.kernel_for(v, "NT"), v, "NT"))
print(json.dumps([report(st, v) for st in map(numba_gemm.get_stage, ("double_buffering", "skinny"))
                  for v in ("vector_loads", "scalar")]))
"""
    res = off_simulator(["-c", code], timeout=900)
    assert res.returncode == 0, res.stderr
    reports = json.loads(res.stdout.strip().splitlines()[-1])
    for name, (loads, scalar) in zip(
        ("double_buffering", "skinny"), (reports[:2], reports[2:]), strict=True
    ):
        assert loads["ptx_ld_global_v4"] >= 2 and loads["ptx_st_global_v4"] == 0, loads
        # 4-byte loads of A and B; 128-bit ones only in the split-K sum (aligned workspace)
        assert scalar["ptx_ld_global_v4"] == split_sum_loads(numba_gemm.get_stage(name)), scalar
        if name == "double_buffering":
            assert loads["blocks_per_sm"] >= scalar["blocks_per_sm"], (loads, scalar)
        # the skinny stage's scalar twin reads a transposed B spread along K (docs/design.md
        # 4.18): 126 registers at the default tile, 2 blocks an SM, where vector_loads keeps 146
        # and 1; which of the two runs faster with N odd is not measured (docs/design.md 9)


def test_resource_reports_are_stored_and_keyed(tmp_path):
    """``tools.resources.kernel_resources`` stores each report under the kernel cache's folder
    and reads it back instead of compiling again, only for the same kernel and ptxas: another
    ptxas version, a corrupt file or ``cache=False`` compiles again (and a corrupt file is
    rewritten)."""
    code = """
import json, os, pathlib, numba_gemm
from numba_gemm.tools import resources
compiled = []
real = resources._compile_report
def counting(*args):
    compiled.append(args[0].name)
    return real(*args)
resources._compile_report = counting
st = numba_gemm.get_stage("naive")
first = resources.kernel_resources(st, st.kernel, "-")
again = resources.kernel_resources(st, st.kernel, "-")
assert again == first and compiled == ["naive"], compiled
stored = pathlib.Path(os.environ["NUMBA_GEMM_CACHE_DIR"], "resources")
files = list(stored.glob("*.json"))
assert len(files) == 1, files
resources.kernel_resources(st, st.kernel, "-", cache=False)
assert len(compiled) == 2, compiled
files[0].write_text("{not json")
assert resources.kernel_resources(st, st.kernel, "-") == first and len(compiled) == 3
assert json.loads(files[0].read_text())["report"]["registers"] == first.registers
resources._ptxas_version = lambda: "another ptxas"
assert resources.kernel_resources(st, st.kernel, "-") == first and len(compiled) == 4
assert len(list(stored.glob("*.json"))) == 2
print("ok")
"""
    res = off_simulator(["-c", code], timeout=600, NUMBA_GEMM_CACHE_DIR=str(tmp_path))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]
