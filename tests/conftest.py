"""Shared fixtures: fresh random inputs per test (seed reported on failure), device copies."""

from __future__ import annotations

import os
import secrets

import numpy as np
import pytest

from numba_gemm import device
from numba_gemm.device import SIMULATOR, DeviceInfo
from numba_gemm.plan import tuning

# Shapes (M, N, K) every stage must handle, one per idea: 1x1x1, K = 1, primes crossing a BK =
# 8/16/32 K tile, an exact multiple of the small tiles, tall (two 128-row block tiles), wide (two
# 128-column block tiles), multiples of 4 (the vector path) but of no tile. Kept few and small:
# on the simulator every thread of every block is a Python thread, and this list runs for every
# stage (the test command's largest share of time); there each shape is also cut to one whole and
# one partial block along M and N of the stage's tile (``test_stages.sim_shape``).
SHAPES = [
    (1, 1, 1),
    (33, 31, 1),  # K = 1
    (61, 67, 71),  # primes, crosses one BK=32/BK=16/BK=8 K tile boundary
    (64, 64, 64),  # exact multiple of the small tiles
    (131, 6, 9),  # tall, more than one 128-row block tile
    (5, 133, 18),  # wide, more than one 128-column block tile
    (36, 44, 20),  # multiples of 4 (vector path) but not of any tile
]


@pytest.fixture
def rng(request):
    """A fresh ``numpy.random.Generator``; its seed is printed when the test fails."""
    seed = secrets.randbits(32)
    request.node.user_properties.append(("seed", seed))
    print(f"rng seed = {seed}")
    return np.random.default_rng(seed)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (``make test``) on the simulator: one worker more than the CPUs. A simulated
    kernel's threads hand the GIL to each other at every barrier and warp exchange, and the CPU
    idles in each hand-off: with one worker per CPU the suite kept 2 CPUs 84 % busy, with three
    workers 95 % (891 -> 770 s on 2 cores). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides
    where set, and xdist's own count applies on a GPU."""
    if not SIMULATOR or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Keep ``--dist loadgroup`` (``make test``) grouping by ``xdist_group``: the scheduler reads
    a test's group from its node id (``...::test@group``), which pytest-xdist 3.8 writes into
    ``item._nodeid``; pytest 9.2 keeps the id in ``item._id``, so the suffix was lost and the
    group's tests spread over the workers (one of them then idled minutes on the resource
    report's lock, tests/test_resources.py). Runs after xdist's own hook and adds the suffix only
    where it is missing; ``test_resources.py::test_one_worker_runs_the_report`` checks it."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        if item.nodeid.endswith(suffix):
            continue
        nodeid = item.nodeid + suffix
        if hasattr(item, "_id"):  # pytest >= 9.2: a structured NodeId, its string kept as given
            item._id = type(item._id).parse(nodeid)
        else:
            item._nodeid = nodeid


@pytest.fixture(scope="session")
def on_simulator() -> bool:
    return SIMULATOR


requires_gpu = pytest.mark.skipif(
    SIMULATOR, reason="needs a real GPU (large sizes / cuBLAS); the simulator is too slow"
)


@pytest.fixture(autouse=True)
def fresh_plans():
    """Every test starts with no tuning data read and no plan chosen (a test may change
    ``NUMBA_GEMM_TUNING`` or pretend to be another GPU)."""
    tuning.reload()
    yield
    tuning.reload()


@pytest.fixture
def fake_gpu(monkeypatch):
    """``fake_gpu(name, cc, sms=132)``: the plan sees a GPU of that name and compute capability
    (tuning data is looked up for it); kernels still run where the suite runs."""

    def make(name: str = "Fake GPU", cc: tuple[int, int] = (9, 0), sms: int = 132) -> DeviceInfo:
        dev = DeviceInfo(0, name, cc, sms, 227 * 1024)
        if not SIMULATOR:  # kernels are still compiled for and loaded on the real GPU
            from numba_gemm.launch import launcher

            real = device.info(0)
            load = launcher.load_kernel
            monkeypatch.setattr(
                launcher, "load_kernel", lambda *a, device, **k: load(*a, device=real, **k)
            )
            monkeypatch.setattr(launcher, "_aux", {})
        monkeypatch.setattr(device, "info", lambda device_id=None: dev)
        tuning.reload()
        return dev

    return make
