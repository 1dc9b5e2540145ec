"""``C = beta * C``: what a product with ``K == 0`` leaves (BLAS and NumPy agree).

Shapes: C ``(batch, M, N)``, float32, any strides (a batch of row-pitched matrices); launched on a
grid of 16 x 16 blocks, ``x`` over the columns (coalesced), ``z`` over the batch. ``beta == 0``
writes exact zeros without reading C (NaN in C must not leak).
"""

from ..backend import cuda, float32

BLOCK = (16, 16)


@cuda.jit
def scale_c(C, beta):
    j = cuda.blockIdx.x * BLOCK[0] + cuda.threadIdx.x
    i = cuda.blockIdx.y * BLOCK[1] + cuda.threadIdx.y
    b = cuda.blockIdx.z
    if i < C.shape[1] and j < C.shape[2]:
        C[b, i, j] = beta * C[b, i, j] if beta != 0 else float32(0.0)
