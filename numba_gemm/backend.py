"""The CUDA Python compiler the kernels are built with: numba-cuda or numba-cuda-mlir.

Every kernel module and every PTX wrapper imports its CUDA API from here (``cuda``, the scalar
types, ``intrinsic``), so a stage module is written once for both compilers:

- ``numba-cuda`` (``numba.cuda``, the 0.30 line): the default when installed, and the only one
  with the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` always selects it). In maintenance mode
  since 2026-06 (NVIDIA/numba-cuda#902); it supports NumPy < 2.5.
- ``numba-cuda-mlir`` (``numba_cuda_mlir.cuda``): its successor, the same kernel API
  (``cuda.jit``, ``cuda.shared.array``, ``cuda.local.array``, ``cuda.syncthreads``); extensions
  lower to MLIR rather than llvmlite IR, so the PTX wrappers (``numba_gemm.ptx``) have their own
  forms for it. It has no simulator.

``NUMBA_GEMM_BACKEND`` (``numba-cuda`` or ``numba-cuda-mlir``) chooses; unset, the installed one
(numba-cuda first). Read once at import: the kernels are built with one compiler per process.
:data:`NAME` says which. docs/numba-cuda-mlir.md lists what each supports.
"""

from __future__ import annotations

import importlib.util
import os

#: The two compilers, by their distribution names.
NUMBA_CUDA = "numba-cuda"
NUMBA_CUDA_MLIR = "numba-cuda-mlir"
BACKENDS = (NUMBA_CUDA, NUMBA_CUDA_MLIR)
#: The environment variable that chooses one.
ENV = "NUMBA_GEMM_BACKEND"


def select(env: dict | None = None, installed=None) -> str:
    """The backend to build with: ``env[ENV]`` if set (one of :data:`BACKENDS`), else numba-cuda
    when installed, else numba-cuda-mlir. The simulator (``NUMBA_ENABLE_CUDASIM=1``) is
    numba-cuda's: asking for numba-cuda-mlir with it is an error.

    Raises:
        ValueError: ``env[ENV]`` names no backend, or numba-cuda-mlir with the simulator.
        ImportError: the chosen backend (or, unset, either) is not installed.
    """
    env = os.environ if env is None else env
    installed = installed or (lambda mod: importlib.util.find_spec(mod) is not None)
    modules = {NUMBA_CUDA: "numba.cuda", NUMBA_CUDA_MLIR: "numba_cuda_mlir"}
    asked = env.get(ENV, "").strip()
    simulator = env.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    if asked and asked not in BACKENDS:
        raise ValueError(f"{ENV}={asked!r}: expected one of {', '.join(BACKENDS)}")
    if asked == NUMBA_CUDA_MLIR and simulator:
        raise ValueError(
            f"{ENV}={NUMBA_CUDA_MLIR} with NUMBA_ENABLE_CUDASIM=1: the CUDA simulator is "
            f"numba-cuda's (numba-cuda-mlir has none); unset one of them"
        )
    for name in [asked] if asked else ([NUMBA_CUDA] if simulator else list(BACKENDS)):
        if installed(modules[name].split(".")[0]):
            return name
    want = asked or " or ".join(BACKENDS)
    raise ImportError(
        f"numba_gemm needs {want}: install numba-gemm[cu12] (numba-cuda) or numba-gemm[mlir]"
    )


#: The backend of this process.
NAME: str = select()

if NAME == NUMBA_CUDA:
    from numba import cuda, float32, int32, int64, types
    from numba.core.types import float16
    from numba.cuda.extending import intrinsic
else:
    from numba_cuda_mlir import cuda, types
    from numba_cuda_mlir.extending import intrinsic
    from numba_cuda_mlir.types import float16, float32, int32, int64

#: True with numba-cuda-mlir: code generators of ``intrinsic`` get MLIR builders, not llvmlite's.
MLIR: bool = NAME == NUMBA_CUDA_MLIR

__all__ = [
    "BACKENDS",
    "ENV",
    "MLIR",
    "NAME",
    "NUMBA_CUDA",
    "NUMBA_CUDA_MLIR",
    "cuda",
    "float16",
    "float32",
    "int32",
    "int64",
    "intrinsic",
    "select",
    "types",
]
