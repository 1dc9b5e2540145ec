"""``python -m numba_gemm.bench``: the bench's command line (``numba_gemm.tools.bench``)."""
