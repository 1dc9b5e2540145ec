"""A 2-D copy with zero fill: how ``numba_gemm.plan.staging`` gives the vector kernels aligned rows.

``copy_padded(dst, src)``: ``dst[0, i, j] = src[0, i, j]`` where ``(i, j)`` lies inside ``src``,
``0`` elsewhere, for every element of ``dst``. Both are float32 ``(1, rows, cols)`` arrays with any
row pitch (spec ``SS``), so one kernel widens a matrix into a buffer with a pitch of a multiple of
four floats (zero columns and rows appended) and narrows the product back. ``src`` is read only
inside its own extent.

Launch: :data:`BLOCK` threads along the columns (a warp reads 32 consecutive floats: coalesced),
``grid = (ceil(cols / BLOCK), min(ceil(rows / ROWS), MAX_GRID_Y))``; each thread loads
:data:`ROWS` rows of its column into registers before it stores any (the loads are independent,
so ``ROWS`` of them are in flight per thread: a copy is bound by DRAM latency otherwise, since
the compiler cannot move a load past a store to memory it cannot prove disjoint), and the grid
walks the rows in strides of ``gridDim.y * ROWS``.
"""

from ..backend import cuda, float32

BLOCK = 256
ROWS = 8
MAX_GRID_Y = 4096


@cuda.jit
def copy_padded(dst, src):
    j = cuda.blockIdx.x * BLOCK + cuda.threadIdx.x
    rows, cols = dst.shape[1], dst.shape[2]
    if j >= cols:
        return
    src_rows = src.shape[1]
    inside = j < src.shape[2]
    vals = cuda.local.array(ROWS, float32)
    i0 = cuda.blockIdx.y * ROWS
    while i0 < rows:
        for r in range(ROWS):
            i = i0 + r
            vals[r] = src[0, i, j] if inside and i < src_rows else float32(0.0)
        for r in range(ROWS):
            i = i0 + r
            if i < rows:
                dst[0, i, j] = vals[r]
        i0 += cuda.gridDim.y * ROWS
