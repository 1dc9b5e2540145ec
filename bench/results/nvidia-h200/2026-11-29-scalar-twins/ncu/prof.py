"""Profile one configured stage at one shape: warm-up, then one call between profile_start/stop."""
import sys, ast
import numpy as np
from numba import cuda
import numba_gemm
name, cfg, shape, lay = sys.argv[1], ast.literal_eval(sys.argv[2]), sys.argv[3], sys.argv[4]
M, N, K = map(int, shape.split("x"))
rng = np.random.default_rng(0)
a = cuda.to_device(rng.standard_normal((M, K), dtype=np.float32))
if lay == "NT":
    b = cuda.to_device(rng.standard_normal((N, K), dtype=np.float32)).T
else:
    b = cuda.to_device(rng.standard_normal((K, N), dtype=np.float32))
st = numba_gemm.get_stage(name).with_config(cfg)
c = cuda.device_array((M, N), np.float32)
numba_gemm.sgemm(a, b, out=c, stage=st); cuda.synchronize()
cuda.profile_start()
numba_gemm.sgemm(a, b, out=c, stage=st); cuda.synchronize()
cuda.profile_stop()
