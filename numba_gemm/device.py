"""One home for device facts: the simulator flag, the GPUs, their SM count and SMEM limits.

Everything here is read once per process and device, then memoized: a call of ``sgemm`` must not
ask the driver what it already said. Under the Numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)
there is one pretend device, ``SIMULATED``, that runs every stage.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

from . import backend
from .backend import cuda

#: True under the Numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, numba-cuda only: see
#: ``numba_gemm.backend``): kernels run as Python threads.
SIMULATOR: bool = False
if backend.NAME == backend.NUMBA_CUDA:
    from numba import config

    SIMULATOR = bool(config.ENABLE_CUDASIM)

#: Threads per warp (every NVIDIA GPU so far).
WARP_SIZE = 32
#: SMEM per block without the opt-in attribute (more needs dynamic SMEM and
#: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``; CUDA C Programming Guide, "Shared Memory").
SMEM_STATIC_LIMIT = 48 * 1024
#: Most SMEM one block may use with the opt-in on sm_80 / sm_90 (227 KB of the SM's 228 KB; CUDA
#: C Programming Guide, "Compute Capabilities", table of technical specifications).
SMEM_OPTIN_LIMIT = 227 * 1024
#: CUDA's grid limits (x, y, z) for compute capability 3.0 and up.
MAX_GRID = (2**31 - 1, 65535, 65535)


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative ints: the number of ``b``-tiles covering ``a``."""
    return -(-a // b)


def tile_grid(M: int, N: int, BM: int, BN: int) -> tuple[int, int]:
    """Grid of ``(BM x BN)`` C tiles: ``x`` walks the N (column) tiles, ``y`` the M (row) tiles."""
    return cdiv(N, BN), cdiv(M, BM)


def check_grid(grid: tuple, what: str) -> None:
    """Raise ``ValueError`` (before anything is launched) when ``grid`` exceeds CUDA's limits."""
    if any(g > lim for g, lim in zip(grid, MAX_GRID, strict=False)):
        raise ValueError(
            f"{what}: grid {tuple(grid)} exceeds CUDA's limits {MAX_GRID}; the "
            "product is too large for this kernel (split it)"
        )


@dataclass(frozen=True)
class DeviceInfo:
    """What the plan and the launcher need to know about one GPU.

    Attributes:
        id: CUDA device ordinal (0 on the simulator).
        name: e.g. ``"NVIDIA H200"``; ``"simulator"`` on the simulator.
        cc: compute capability, e.g. ``(9, 0)``; ``(99, 99)`` on the simulator (runs every stage).
        sm_count: streaming multiprocessors (1 on the simulator).
        smem_optin: most dynamic SMEM one block may ask for, in bytes, after the opt-in.
        simulated: True for the simulator's pretend device.
    """

    id: int
    name: str
    cc: tuple[int, int]
    sm_count: int
    smem_optin: int
    simulated: bool = False


#: The compute capability the simulator pretends to have: every stage runs there.
SIMULATED_CC = (99, 99)
SIMULATED = DeviceInfo(0, "simulator", SIMULATED_CC, 1, SMEM_OPTIN_LIMIT, simulated=True)


def gpu_available() -> bool:
    """True when a real CUDA GPU and its driver are usable (False under the simulator)."""
    if SIMULATOR:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install counts as no GPU
        return False


#: Serialises this library's first touch of numba-cuda's driver, device list and each device's
#: context: their lazy initialisation is not thread-safe (eight host threads making their first
#: ``sgemm`` at once in a fresh process failed with ``AssertionError: key already in dictionary:
#: 0`` from ``cuda.gpus[id]``). Each first touch (the current device, or device ``id``) happens
#: once per process under the lock; later calls only read ``_touched``.
_first_touch = threading.Lock()
_touched: set = set()


def _touch(device_id: int | None) -> None:
    with _first_touch:
        if device_id not in _touched:
            if device_id is None:
                cuda.get_current_device()
            else:
                with cuda.gpus[device_id]:
                    pass
            _touched.add(device_id)


def current_id() -> int:
    """Ordinal of the current CUDA device (0 on the simulator)."""
    if SIMULATOR:
        return 0
    if None not in _touched:
        _touch(None)
    return int(cuda.get_current_device().id)


def info(device_id: int | None = None) -> DeviceInfo:
    """Facts about GPU ``device_id`` (default: the current one); memoized per device.

    Raises:
        numba.cuda.CudaSupportError: no usable GPU (on a real-GPU path).
    """
    if SIMULATOR:
        return SIMULATED
    return _info(current_id() if device_id is None else int(device_id))


@functools.cache
def _info(device_id: int) -> DeviceInfo:
    if device_id not in _touched:
        _touch(device_id)
    with cuda.gpus[device_id]:
        dev = cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        return DeviceInfo(
            id=device_id,
            name=name,
            cc=tuple(dev.compute_capability),
            sm_count=int(dev.MULTIPROCESSOR_COUNT),
            smem_optin=int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        )


def sm_count() -> int:
    """Multiprocessors of the current GPU (1 on the simulator)."""
    return info().sm_count
