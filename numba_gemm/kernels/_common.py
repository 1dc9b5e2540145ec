"""Pieces every stage shares: the jit wrappers that drop GPU-only options on the simulator, and
the C epilogue ``C = alpha * acc + beta * C``.
"""

from numba import cuda

from ..vecmem import SIMULATOR

#: Options the CUDA simulator's ``cuda.jit`` does not accept; they only tune code generation.
_GPU_ONLY = ("launch_bounds", "max_registers", "forceinline", "lineinfo")


def kernel_jit(**options):
    """``cuda.jit(**options)`` for a kernel; GPU-only options are dropped on the simulator."""
    if SIMULATOR:
        options = {k: v for k, v in options.items() if k not in _GPU_ONLY}
    return cuda.jit(**options)


def device_jit(fn):
    """A device function, force-inlined at the NVVM level on the GPU."""
    if SIMULATOR:
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)


@device_jit
def store_c(C, row, col, acc, alpha, beta):
    """Epilogue for one element: ``C[row, col] = alpha * acc + beta * C[row, col]``.

    C is not read when ``beta == 0`` (BLAS convention: NaN or garbage in C must not leak).
    """
    if beta == 0:
        C[row, col] = alpha * acc
    else:
        C[row, col] = alpha * acc + beta * C[row, col]
