"""References that the tests, the bench and the tuner compare the stages with.

- ``reference_f64``: ``alpha * A @ B + beta * C`` in float64 with NumPy, on the host.
- ``rel_error``: ``||out - ref||_F / ||ref||_F``, inf when ``out`` has NaN or Inf.
- ``cublas``: CuPy's ``a @ b`` (cuBLAS SGEMM) when CuPy is installed, TF32 off unless asked.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def reference_f64(
    a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, alpha: float = 1.0, beta: float = 0.0
) -> np.ndarray:
    """``alpha * a @ b + beta * c`` computed in float64 from host arrays; shape ``(M, N)``."""
    ref = float(alpha) * (a.astype(np.float64) @ b.astype(np.float64))
    if c is not None and beta != 0:
        ref += float(beta) * c.astype(np.float64)
    return ref


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative Frobenius-norm error ``||out - ref|| / ||ref||``; ``inf`` if ``out`` is not finite.

    An all-zero reference compares by the absolute norm of ``out``.
    """
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        raise ValueError(f"shapes differ: out {out.shape}, ref {ref.shape}")
    if out.size == 0:
        return 0.0
    if not np.isfinite(out).all():
        return float("inf")
    den = np.linalg.norm(ref)
    num = np.linalg.norm(out - ref)
    return float(num / den) if den > 0 else float(num)


def cupy_or_none() -> Any:
    """The ``cupy`` module, or None when it is missing or cannot see a GPU."""
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA library mismatch at import
        return None
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return None
    return cupy


def tf32_enabled() -> bool:
    """True when CuPy would run float32 matmul on TF32 tensor cores (``CUPY_TF32=1``)."""
    return os.environ.get("CUPY_TF32", "0") not in ("", "0")
