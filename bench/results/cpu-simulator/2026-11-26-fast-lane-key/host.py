"""Host time per call of the fast lane, launch stubbed (simulator arrays; CPU only): README.txt."""

import statistics
import sys
import time

import numpy as np
from numba import cuda
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

import numba_gemm
from numba_gemm import plan as P

P.Plan.run = lambda self, *a, **k: None
P.Plan.run_plain = lambda self, *a, **k: None
rng = np.random.default_rng(0)
M, N, K = 16, 768, 768
a = cuda.to_device(rng.standard_normal((M, K)).astype(np.float32))
b = cuda.to_device(rng.standard_normal((K, N)).astype(np.float32))
w = cuda.to_device(rng.standard_normal((N, K)).astype(np.float32))
wt = FakeCUDAArray(w._ary.T)  # x @ W.T: a transposed view, no copy
c = cuda.to_device(np.zeros((M, N), np.float32))
res = {}
for name, bb in (("NN", b), ("NT", wt)):
    numba_gemm.sgemm(a, bb, out=c)  # the general path makes the plan
    runs = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(20000):
            numba_gemm.sgemm(a, bb, out=c)
        runs.append((time.perf_counter() - t) / 20000 * 1e6)
    res[name] = runs
print(sys.argv[1], {k: f"{min(v):.2f}-{statistics.median(v):.2f} us" for k, v in res.items()})
