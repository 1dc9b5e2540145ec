"""The inline-PTX intrinsics (128-bit vector loads, ``cp.async``, ``mma.sync`` and ``ldmatrix``,
``wgmma``) and their plain-Python models for the CUDA simulator. Every ``@intrinsic`` with
``ir.InlineAsm`` lives here, so a change of compiler backend touches this folder only.

Each module has up to three forms of its wrappers: the simulator's models, numba-cuda's
``@intrinsic`` functions with llvmlite ``ir.InlineAsm``, and numba-cuda-mlir's
(``cuda.experimental.inline_ptx``; ``numba_gemm.backend``). A wrapper not yet ported to
numba-cuda-mlir is :func:`unported`."""

from __future__ import annotations


def unported(module: str, name: str):
    """A stand-in for wrapper ``name`` of ``module`` under numba-cuda-mlir, not ported yet: a
    kernel that calls it fails to compile (typing: an untyped global of that name), and a
    call from Python raises NotImplementedError. docs/numba-cuda-mlir.md says what is ported."""

    def stand_in(*args, **kwargs):
        raise NotImplementedError(
            f"numba_gemm.ptx.{module}.{name} is not ported to numba-cuda-mlir "
            "(docs/numba-cuda-mlir.md); build with numba-cuda (NUMBA_GEMM_BACKEND=numba-cuda)"
        )

    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in


def unported_all(module: str, names: str) -> dict:
    """``{name: unported(module, name)}`` for each of the space-separated ``names``: a module's
    wrappers under numba-cuda-mlir, before their port (``globals().update(...)``)."""
    return {name: unported(module, name) for name in names.split()}
