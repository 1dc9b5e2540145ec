"""Shared fixtures: fresh random inputs per test (seed reported on failure), device copies."""

from __future__ import annotations

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
# stage (the test command's largest share of time).
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
