"""First calls from several host threads at once, in a fresh process (nothing touched first)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# Each thread makes its first sgemm at the same moment. On a GPU the operands are PyTorch (or
# CuPy) tensors made in the main thread, so numba-cuda's driver and device list are first touched
# by the library's calls themselves; without either, each thread makes Numba arrays under a lock
# (and on the simulator that is all there is).
SCRIPT = textwrap.dedent("""
    import contextlib
    import threading
    import numpy as np
    import numba_gemm
    from numba_gemm.device import SIMULATOR

    THREADS, M, N, K = 8, 37, 29, 19
    rng = np.random.default_rng()
    hosts = [(rng.standard_normal((M, K), dtype=np.float32),
              rng.standard_normal((K, N), dtype=np.float32)) for _ in range(THREADS)]
    lib = None
    if not SIMULATOR:
        try:
            import torch
            lib = "torch"
            ops = [(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()) for a, b in hosts]
        except ImportError:
            try:
                import cupy
                lib = "cupy"
                ops = [(cupy.asarray(a), cupy.asarray(b)) for a, b in hosts]
            except ImportError:
                pass
    make, launch, nothing = threading.Lock(), threading.Lock(), contextlib.nullcontext()
    start = threading.Barrier(THREADS)
    errors, results = [], [None] * THREADS

    def work(i):
        try:
            if lib is None:
                from numba import cuda
                with make:
                    a, b = (cuda.to_device(x) for x in hosts[i])
            else:
                a, b = ops[i]
            start.wait()
            with launch if SIMULATOR else nothing:  # the simulator runs one kernel at a time
                c = numba_gemm.sgemm(a, b)
            results[i] = c.cpu().numpy() if lib == "torch" else (
                c.get() if lib == "cupy" else c.copy_to_host())
        except BaseException as e:  # reported by the parent
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (a, b), c in zip(hosts, results):
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        assert err < 1e-5, err
    print("ok", lib)
""")


def test_first_calls_from_eight_threads_at_once():
    """Eight threads' first ``sgemm`` at once in a fresh process all succeed with the right
    product (numba-cuda's lazy driver initialisation is not thread-safe; the library serialises
    its first device touch: ``device._touch``)."""
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.startswith("ok"), res.stdout
