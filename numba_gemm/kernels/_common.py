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


def unroll(n, body):
    """A device function ``f(*args)`` that runs ``body(0, *args); ...; body(n - 1, *args)``.

    Numba has no ``#pragma unroll`` and NVVM leaves a loop rolled once its unrolled body looks
    large (a BK loop around an 8x8 outer product is): then every SMEM address is recomputed in
    every iteration and the inner loop runs at about half FFMA density (checked in SASS: 512 FFMA
    with ~65 address instructions per 64 FFMA rolled, vs 512 FFMA + 80 LDS and nothing else
    unrolled). Here each step is its own closure in which the step index ``i`` is a compile-time
    constant, so after force-inlining every index into SMEM and register arrays is a constant:
    the loop is unrolled by construction. ``body`` must be a device function taking the step
    index first.
    """
    step = _no_op
    for i in range(n):
        step = _then(step, body, i)
    return step


@device_jit
def _no_op(*args):
    return


def _then(before, body, i):
    @device_jit
    def step(*args):
        before(*args)
        body(i, *args)

    return step
