"""Test helpers: random operands, NaN-poisoned outputs, one checked sgemm run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import traceback

import ml_dtypes
import numpy as np
from numba import cuda

import numba_gemm
from numba_gemm.tools.check import device_view
from numba_gemm.tools.reference import reference_f64, rel_error


def randn(rng, shape) -> np.ndarray:
    """Standard-normal float32 (never zeros: they hide unwritten outputs and bad indexing)."""
    return rng.standard_normal(shape, dtype=np.float32)


#: The tunable tensor-core stages on the simulator: one warp (32x32 block tile, one mma deep).
#: Their warp-collective mma/ldmatrix models exchange fragments between the simulator's threads,
#: which is slow with 256; ``tests/test_mma.py`` runs the default (multi-warp) tiles once.
TC_SIM_CONFIG = dict(BM=32, BN=32, BK=8, WM=32, WN=32, NBUF=3, MINB=1)
TC_SIM_CONFIG_F16 = dict(TC_SIM_CONFIG, BK=16)  # m16n8k16: K steps of 16


#: The wgmma stages on the simulator: one warpgroup, 64 x 64 x 64 tiles (whole swizzled rows).
WGMMA_SIM_CONFIG = dict(BM=64, BN=64, BK=64, NBUF=3)
#: tf32x3_wgmma on the simulator: K tiles of 32 (one 128-byte swizzled row of TF32, as its GPU
#: default), three products each modelled lane by lane (BK = 64 took 1.6x as long); tf32_wgmma,
#: the same kernel (``k18``), keeps 64, so both K-tile widths run.
WGMMA_SIM_CONFIG_TF32X3 = dict(WGMMA_SIM_CONFIG, BK=32)

#: The TMA stages on the simulator: one consumer warpgroup (and the producer's), 64 x 64 tiles,
#: two buffers (a K of three tiles or more makes the producer wait for a released buffer).
TMA_SIM_CONFIG = dict(BM=64, BN=64, BK=64, NBUF=2)

#: The skinny stage on the simulator: 64 threads (its default has 256 and 8 K slices).
SKINNY_SIM_CONFIG = dict(MT=8, BN=32, THREADS=64, KC=16, SPLITK=2, MINB=0, NBUF=0)
#: The skinny_n stage on the simulator: two warps (its default has eight).
SKINNY_N_SIM_CONFIG = dict(NB=8, RW=2, THREADS=64, KC=128, SPLITK=2, MINB=0)


def sim_sized(stage):
    """``stage``, or on the simulator a tunable tensor-core stage with :data:`TC_SIM_CONFIG`
    (:data:`WGMMA_SIM_CONFIG` for the wgmma stages, :data:`WGMMA_SIM_CONFIG_TF32X3` for
    tf32x3_wgmma) and the skinny stages with :data:`SKINNY_SIM_CONFIG` and
    :data:`SKINNY_N_SIM_CONFIG`."""
    from numba_gemm.device import SIMULATOR

    if SIMULATOR and stage.name == "skinny":
        return stage.with_config(SKINNY_SIM_CONFIG)
    if SIMULATOR and stage.name == "skinny_n":
        return stage.with_config(SKINNY_N_SIM_CONFIG)
    if SIMULATOR and stage.tensor_maps is not None:  # the TMA stages: no split-K
        return stage.with_config(TMA_SIM_CONFIG)
    if SIMULATOR and stage.arch is not None:
        tf32x3 = stage.name == "tf32x3_wgmma"
        cfg = WGMMA_SIM_CONFIG_TF32X3 if tf32x3 else WGMMA_SIM_CONFIG
        # the TF32 ones take split-K's SPLITK too
        return stage.with_config(cfg if stage.precision in HALF else dict(cfg, SPLITK=1))
    if SIMULATOR and stage.tunable and stage.precision != "fp32":
        return stage.with_config(TC_SIM_CONFIG_F16 if stage.precision == "fp16" else TC_SIM_CONFIG)
    return stage


#: The 16-bit precisions and their NumPy types (bfloat16: ``ml_dtypes``').
HALF = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def to_device(x):
    """``cuda.to_device(x)``, bfloat16 included: Numba copies host memory through a
    ``memoryview``, which has no bfloat16 (on a GPU: "cannot include dtype 'E' in a buffer"), so
    its bits go as uint16 and the device array is viewed back as bfloat16."""
    if x.dtype == ml_dtypes.bfloat16:
        return cuda.to_device(np.ascontiguousarray(x).view(np.uint16)).view(x.dtype)
    return cuda.to_device(x)


def to_host(d):
    """``d.copy_to_host()``, bfloat16 included (its bits, as :func:`to_device`)."""
    if d.dtype == ml_dtypes.bfloat16:
        return d.view(np.uint16).copy_to_host().view(d.dtype)
    return d.copy_to_host()


def fp16_shape(N, K):
    """``(N, K)`` rounded up to multiples of 8, as ``hgemm`` needs (16-byte rows)."""
    return -(-N // 8) * 8, -(-K // 8) * 8


def check_sgemm(stage, rng, M, N, K, *, alpha=1.0, beta=0.0, poison=True, out_dtype=None):
    """Run ``sgemm`` with ``stage`` on fresh random inputs; return (rel. error, output).
    A stage that does not take row-major B (``tf32_tma``) gets B stored transposed. A TMA stage
    in FP32 gets K (and, B row-major, N) rounded up to a multiple of 4: its tensor maps need
    16-byte aligned rows.

    C is NaN-poisoned when ``beta == 0`` (an unwritten element, or a kernel that reads C when it
    must not, shows as NaN) and random otherwise. A 16-bit stage runs through ``hgemm`` on FP16
    (BF16) copies of the inputs (the reference is the product of those), with N and K rounded up
    to multiples of 8 (:func:`fp16_shape`) and C of ``out_dtype`` (default float32; for a 16-bit
    C, the operands' type).
    """
    half = HALF.get(stage.precision)
    f16 = half is not None
    if f16:
        N, K = fp16_shape(N, K)
    if stage.tensor_maps is not None and not f16:  # TMA: A's and B's rows 16-byte aligned
        K = -(-K // 4) * 4
        if "NN" in stage.layouts:  # B row-major: rows of N
            N = -(-N // 4) * 4
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    c0 = np.full((M, N), np.nan, np.float32) if (poison and beta == 0) else randn(rng, (M, N))
    if f16:
        a, b = a.astype(half), b.astype(half)
        c0 = c0.astype(np.float32 if out_dtype in (None, np.float32, "float32") else half)
    d_c = to_device(c0)
    gemm = numba_gemm.hgemm if f16 else numba_gemm.sgemm
    d_b = to_device(b) if "NN" in stage.layouts else transposed_on_device(b)
    res = gemm(to_device(a), d_b, stage=stage, out=d_c, alpha=alpha, beta=beta)
    assert res is d_c
    out = to_host(d_c)
    ref = reference_f64(a, b, c0, alpha, beta)
    return rel_error(out, ref), out


def transposed_on_device(x):
    """``x`` on the GPU as the transpose of a row-major copy of ``x.T`` (column-major, zero-copy:
    what ``w.T`` of a PyTorch weight is)."""
    d = to_device(np.ascontiguousarray(x.T))
    return device_view(d, x.shape, (d.strides[1], d.strides[0]))


def off_simulator(args: list, *, timeout: int, **env: str) -> subprocess.CompletedProcess:
    """``python *args`` in a process of its own with the CUDA simulator off (compiling without a
    GPU: the simulator is chosen at import) and ``env`` added to this one's environment;
    output captured as text, the exit status not checked."""
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full.update(env)
    return subprocess.run(
        [sys.executable, *args], env=full, capture_output=True, text=True, timeout=timeout
    )


def split_sum_loads(stage) -> int:
    """128-bit loads in the PTX of ``stage``'s split-K sum (``kernels._splitk.make_fixup``), in
    every variant: the workspace's rows are aligned whatever C's are, so the scalar variant reads
    partials 128 bits at a time too. The sum's loads are unrolled: ``depth`` partials of
    ``items_per_round`` items a round, in one sum (one level) or two (the groups', then the
    tile's)."""
    from numba_gemm.kernels._splitk import FIXUP_DEPTH, groups, items_per_round

    S = stage.config.get("SPLITK", 1)
    if S <= 1:
        return 0
    (bm, bn, _), nt = stage.block(stage.config), stage.threads(stage.config)
    gs, g = groups(S)
    ipr = items_per_round(bm, bn, nt, S, stage.wide_fixup)
    return min(max(gs, g), FIXUP_DEPTH) * ipr * (1 if g == 1 else 2)


def resident_grid(monkeypatch, together: bool = True) -> list:
    """Make the simulator run a grid as a GPU runs a resident one, every block at once (it runs
    them one after another), and let the launcher license split-K's spread sum, whose blocks
    wait for the other slices of their tile (``launch.launcher.grid_resident``); returns the list
    of the licensed grids' sizes in blocks. ``together=False``: the licence only, the blocks
    still one after another (each waits in vain, then leaves its chunks to the last). Each block's
    manager runs in a thread of its own; the last block's joins them all, inside the launch.
    Each block gets SMEM of its own (the simulator keys an allocation by its source line only,
    one array for the whole grid)."""
    # the simulator's modules: imported only where the suite runs on it
    from numba.cuda.simulator import kernel as sim
    from numba.cuda.simulator import kernelapi

    from numba_gemm.launch import launcher

    lock = threading.Lock()

    def shared_array(self, shape, dtype, alignment=None):
        dtype = np.dtype(getattr(dtype, "name", dtype))
        where = traceback.extract_stack(sys._getframe())[-2][0:2]  # the kernel's line
        key = (tuple(threading.current_thread().blockIdx), where, shape == 0)
        with lock:
            mine = self.__dict__.setdefault("_per_block", {})
            got = mine.get(key)
            if got is None:
                if shape == 0:  # dynamic SMEM: all of the block's requests share one buffer
                    buf = mine.setdefault(key[:1], np.zeros(self._dynshared_size, np.byte))
                    got = np.frombuffer(buf.data, dtype, self._dynshared_size // dtype.itemsize)
                else:
                    got = np.empty(shape, dtype)
                mine[key] = got
        return got

    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", shared_array)

    base = sim.BlockManager
    running: list = []

    class Concurrent(base):
        def run(self, grid_point, *args):
            errors: list = []

            def block():
                try:
                    base.run(self, grid_point, *args)
                except BaseException as e:  # noqa: BLE001 - re-raised by the last block
                    errors.append(e)

            t = threading.Thread(target=block, daemon=True)
            t.start()
            running.append((t, errors))
            if tuple(grid_point) == tuple(d - 1 for d in self._grid_dim):
                done = list(running)
                running.clear()
                for t, _ in done:
                    t.join(600)
                    assert not t.is_alive(), "a simulated block never finished"
                for _, errs in done:
                    if errs:
                        raise errs[0]

    def licensed(blocks, sms, bps):
        grids.append(blocks)
        return True

    grids: list = []
    if together:
        monkeypatch.setattr(sim, "BlockManager", Concurrent)
    monkeypatch.setattr(launcher, "grid_resident", licensed)
    return grids
