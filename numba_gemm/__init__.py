"""numba_gemm: FP32 GEMM (SGEMM) kernels for NVIDIA GPUs, written in Python with Numba CUDA.

The ladder of stages (``STAGES``, slowest first) goes from a naive kernel to cuBLAS-class tiling;
``sgemm(a, b)`` runs the fastest one on device arrays (Numba, CuPy, PyTorch); ``hgemm(a, b)`` does
the same for FP16 operands on tensor cores (FP32 accumulation)::

    from numba import cuda
    import numpy as np, numba_gemm
    d_a = cuda.to_device(np.random.rand(1024, 512).astype(np.float32))
    d_b = cuda.to_device(np.random.rand(512, 768).astype(np.float32))
    d_c = numba_gemm.sgemm(d_a, d_b)                      # (1024, 768) device array
    numba_gemm.sgemm(d_a, d_b, stage="smem_tiling", out=d_c, alpha=2.0, beta=1.0)
    print(numba_gemm.explain(d_a, d_b))                   # what runs, and why

A call is validate -> plan (chosen once per shape, ``plan_for``) -> launch.
"""

from ._version import __version__
from .device import SIMULATOR

if SIMULATOR:  # numba-cuda's CUDA simulator, with its block barrier and SMEM lookup repaired
    from .ptx import simulator as _simulator

    _simulator.install()

from .api import (  # noqa: E402
    COMPUTE,
    autotune,
    explain,
    grouped_mm,
    hgemm,
    linear,
    matmul,
    sgemm,
)
from .kernels import STAGES, get_stage  # noqa: E402
from .kernels.stage import Stage  # noqa: E402
from .plan.choose import Plan, plan_for  # noqa: E402

__all__ = [
    "COMPUTE",
    "STAGES",
    "Plan",
    "Stage",
    "__version__",
    "autotune",
    "explain",
    "get_stage",
    "grouped_mm",
    "hgemm",
    "linear",
    "matmul",
    "plan_for",
    "sgemm",
]
