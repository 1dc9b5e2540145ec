"""The GPU-wide memory fence (PTX ``membar.gl``, CUDA C++'s ``__threadfence()``) for both
compilers: split-K's and stream-K's arrival (``kernels/_splitk.py``) orders each thread's partial
writes before its block counts itself in.

- numba-cuda and its simulator: ``cuda.threadfence``, in a device function (numba-cuda types
  it as an attribute of ``cuda`` only).
- numba-cuda-mlir 0.6.0 types ``cuda.threadfence`` but has no lowering for it (an internal
  compiler error), so there it is inline PTX.

Source: PTX ISA, "Parallel Synchronization and Communication Instructions: membar / fence".
"""

from __future__ import annotations

from ..backend import MLIR, cuda
from ..device import SIMULATOR

if MLIR:

    @cuda.jit(device=True, forceinline=True)
    def threadfence():
        """``membar.gl``: this thread's earlier writes are seen GPU-wide before its later ones."""
        cuda.experimental.inline_ptx("membar.gl;")

else:  # numba-cuda types cuda.threadfence as an attribute of cuda, not as a global: a wrapper

    @cuda.jit(device=True, **({} if SIMULATOR else {"forceinline": True}))
    def threadfence():
        """``cuda.threadfence()`` (``membar.gl``)."""
        cuda.threadfence()


__all__ = ["threadfence"]
