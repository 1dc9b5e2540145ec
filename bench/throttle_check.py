"""Is the host-overhead loop host-bound or GPU-bound? (diagnostic for the GPU)

For sizes 64 and 128 and Numba/PyTorch operands: per-loop host us per call of ``sgemm(a, b,
out=c)`` for loops of 100, 500 and 2000 calls (clock read before the synchronize), and the GPU
time per call (CUDA events around a 500-call loop, after it synchronizes). If a loop's host time
per call approaches the GPU time, the launch queue is full and the loop is GPU-bound.
"""

import numpy as np
import torch
from numba import cuda

import numba_gemm
from numba_gemm.timing import time_host

for n in (64, 128):
    rng = np.random.default_rng(0)
    host = [rng.standard_normal((n, n), dtype=np.float32) for _ in range(3)]
    for kind, (a, b, c) in {"numba": [cuda.to_device(x) for x in host],
                            "torch": [torch.from_numpy(x).cuda() for x in host]}.items():
        line = []
        for _ in range(50):  # warm-up (plan, kernel load)
            numba_gemm.sgemm(a, b, out=c)
        for calls in (100, 500, 2000):
            t = time_host(lambda a=a, b=b, c=c: numba_gemm.sgemm(a, b, out=c), calls=calls,
                          reps=5, warmup=0)
            line.append(f"{calls}: " + " ".join(f"{v * 1e3:.1f}" for v in t.ms))
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        for _ in range(500):
            numba_gemm.sgemm(a, b, out=c)
        e1.record()
        e1.synchronize()
        gpu = cuda.event_elapsed_time(e0, e1) / 500 * 1e3
        print(f"{n} {kind}: host us/call per loop [{' | '.join(line)}]  GPU us/call {gpu:.1f}")
