"""Aligned staging: the vector (128-bit) kernels for a product whose rows are not 16-byte aligned.

A row of ``K`` floats starts on a 16-byte boundary only if ``K`` is a multiple of 4 (and the
base pointer is aligned); otherwise the plan's kernel is the scalar-GMEM variant, which costs
5-15 % at large sizes on an H200 (4095^3 ran at 88.5 % of cuBLAS against 93.5 % at 4096^3).
Staging copies the operands whose rows are unaligned into buffers with pitches rounded up to
4 floats, zero-filled (``kernels._pad.copy_padded``), runs the aligned plan of the padded product
``M x N4 x K4`` there, and copies the ``M x N`` result back:

- ``K % 4``: A ``(M, K)`` -> ``(M, K4)`` with zero columns and B ``(K, N)`` -> ``(K4, N4)`` with
  zero rows: the extra terms of each inner product are ``0 * 0``;
- ``N % 4``: B -> ``(K4, N4)`` and C through ``(M, N4)`` (its extra columns are dropped; with
  ``beta != 0`` C is copied in first);
- an operand whose base pointer alone is unaligned (a sliced view) is copied as it is.

B stored transposed (layout NT, ``x @ W.T`` with W a row-major ``(N, K)``) is padded the same way
in its own storage: W -> ``(N4, K4)``, and the inner plan is of that layout. A stored transposed
is not staged (its rows would need M padded too).

Nothing is padded in M. The copies move each staged operand once more through DRAM (read +
write), priced by :func:`copy_ms`; the plan (``plan.plan_for``, automatic choice only) stages a
product when its aligned plan plus the copies is predicted at least :data:`MIN_GAIN` faster
than the scalar kernel, i.e. for large products (a few MB of copies against milliseconds of
compute), not for the bandwidth-bound skinny ones (their copies cost as much as the product).

This is the launch layer's alternative to peeling inside every kernel (CUTLASS's answer is a
kernel per alignment, ``kAlignmentA/B/C``): one copy kernel serves every stage, at the price of
the extra traffic and a workspace per stream of ``M*K4 + K4*N4 + M*N4`` floats (grow-only, like
split-K's; :data:`MAX_BYTES` caps what a plan may ask for).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from . import tuning
from .devarray import F32, Operand, operand
from .device import DeviceInfo, cdiv
from .kernels import _pad, _splitk
from .launch import load_kernel
from .plan import Geometry, Plan, plan_for

#: Bytes read + written per millisecond by ``copy_padded``: 2.5-2.85 TB/s measured on an H100
#: (A of 4095^3 into rows of 4096 floats: 134 MB in 49.8 us; bench/results/nvidia-h100/
#: 2026-11-25-staging), 80 % of its 3.35 TB/s; the H200 is priced the same (conservative).
BYTES_PER_MS = 2.7e9
#: Fixed cost of each copy (ms): the launch's gap on the GPU.
COPY_LAUNCH_MS = 0.003
#: A product is staged only if predicted this much faster (fraction of the scalar plan's time).
MIN_GAIN = 0.05
#: The largest workspace a plan may use (bytes).
MAX_BYTES = 1 << 30


def round4(n: int) -> int:
    """``n`` rounded up to a multiple of 4 (floats: 16 bytes)."""
    return (n + 3) & ~3


class Staging(NamedTuple):
    """Which operands a product's shape sends through aligned copies, and the padded sizes."""

    a: bool  # A (M, K) -> (M, K4)
    b: bool  # B (K, N) -> (K4, N4)
    c: bool  # C (M, N) <- (M, N4)
    K4: int
    N4: int


def staging_for(M: int, N: int, K: int) -> Staging:
    """What the shape forces: ``K % 4`` stages A and B, ``N % 4`` stages B and C (none for an
    aligned shape: there only an operand with an unaligned base pointer is copied, at run
    time)."""
    del M
    K4, N4 = round4(K), round4(N)
    pad_k, pad_n = K4 != K, N4 != N
    return Staging(pad_k, pad_k or pad_n, pad_n, K4, N4)


def workspace_floats(M: int, s: Staging) -> int:
    """Floats of the three staging buffers, A' ``(M, K4)``, B' ``(K4, N4)``, C' ``(M, N4)`` (all
    three are kept: a misaligned base pointer may send any operand through)."""
    return M * s.K4 + s.K4 * s.N4 + M * s.N4


def copy_ms(M: int, N: int, K: int, s: Staging, beta: bool = False) -> float:
    """Predicted time (ms) of the copies: each staged operand read and written once (C twice
    with ``beta``: in and out), at :data:`BYTES_PER_MS`, plus :data:`COPY_LAUNCH_MS` each. For
    an aligned shape (a misaligned base pointer: any operand may be it) all three are priced."""
    a, b, c = s[:3] if any(s[:3]) else (True, True, True)
    nbytes, copies = 0, 0
    if a:
        nbytes, copies = nbytes + 4 * (M * K + M * s.K4), copies + 1
    if b:
        nbytes, copies = nbytes + 4 * (K * N + s.K4 * s.N4), copies + 1
    if c:
        n = 2 if beta else 1
        nbytes, copies = nbytes + n * 4 * (M * N + M * s.N4), copies + n
    return nbytes / BYTES_PER_MS + copies * COPY_LAUNCH_MS


def consider(M: int, N: int, K: int, dev: DeviceInfo, scalar_ms: float | None,
             layout: str = "NN") -> StagedPlan | None:
    """The staged plan of an unaligned ``M x N x K`` product (dense operands stored as
    ``layout`` says: NN or NT) if it is predicted at least :data:`MIN_GAIN` faster than
    ``scalar_ms`` (the unaligned plan's prediction), else None: also without a prediction to
    compare, past :data:`MAX_BYTES` of workspace, for A stored transposed, or when no aligned
    shape near the padded one was measured (``tuning.nearest_shape``): the classes'
    extrapolation is often optimistic (256 x 50260 x 768 priced at 0.17 ms from the narrow
    class, where cuBLAS takes 0.41 ms on an H200), and would win against a measured scalar
    time for no reason."""
    if scalar_ms is None or layout[0] != "N":
        return None
    s = staging_for(M, N, K)
    if 4 * workspace_floats(M, s) > MAX_BYTES or tuning.nearest_shape(
            M, s.N4, s.K4, True, dev, layout) is None:
        return None
    inner = plan_for(M, s.N4, s.K4, aligned=True, device=dev,
                     geometry=Geometry.dense(M, s.N4, s.K4, layout))
    if inner.predicted_ms is None:
        return None
    cost = inner.predicted_ms + copy_ms(M, N, K, s)
    if cost > (1.0 - MIN_GAIN) * scalar_ms:
        return None
    return StagedPlan(M, N, K, inner, s, scalar_ms)


# --- the workspace ------------------------------------------------------------------------------

_workspaces: dict = {}
_lock = threading.Lock()


def buffers(M: int, s: Staging, stream: Any, device: int, bt: bool = False
            ) -> tuple[Operand, Operand, Operand]:
    """A' ``(M, K4)``, B' ``(K4, N4)`` (``bt``, B stored transposed: ``(N4, K4)``), C'
    ``(M, N4)``: C-contiguous float32 operands (storage views) in this stream's workspace on GPU
    ``device`` (grow-only; the views are memoized per shape)."""
    key = (device, *_splitk.stream_key(stream))
    need = workspace_floats(M, s)
    entry = _workspaces.get(key)
    if entry is None or entry[0].size < need:
        with _lock, cuda.gpus[device]:
            entry = _workspaces.get(key)  # another thread on this stream may have grown it
            if entry is None or entry[0].size < need:
                arr = cuda.device_array(need, dtype=np.float32)
                entry = _workspaces[key] = (arr, operand(arr).ptr, {})
    arr, base, views = entry
    got = views.get((M, s, bt))
    if got is None:
        shapes = ((M, s.K4), (s.N4, s.K4) if bt else (s.K4, s.N4), (M, s.N4))
        got, off = [], 0
        for rows, cols in shapes:
            got.append(Operand(arr, base + 4 * off, (rows, cols), (4 * cols, 4), F32, device))
            off += rows * cols
        got = views[(M, s, bt)] = tuple(got)
    return got


def _storage(x: Operand, rows: int, cols: int) -> Operand:
    """The dense row-major ``(rows, cols)`` storage at ``x.ptr`` as the copy kernel's
    ``(1, rows, cols)`` strided array (B stored transposed: ``(N, K)``, whatever view of it
    ``x`` describes)."""
    return Operand(x.obj, x.ptr, (1, rows, cols), (0, 4 * cols, 4), F32, x.device)


def _as3(x: Operand) -> Operand:
    """A C-contiguous 2-D operand (a workspace view) as the copy kernel's array."""
    return _storage(x, *x.shape)


def _grid(x: Operand) -> tuple[int, int, int]:
    rows, cols = x.shape[-2:]
    return (cdiv(cols, _pad.BLOCK), min(cdiv(rows, _pad.ROWS), _pad.MAX_GRID_Y), 1)


def _copied(s: Staging) -> str:
    """What a staged plan copies, in words."""
    names = [n for n, on in zip("ABC", s[:3], strict=True) if on]
    return ", ".join(names) if names else "the operands with an unaligned base pointer"


class StagedPlan(Plan):
    """A plan that runs an unaligned product on the aligned plan of its padded shape
    (``inner``, ``M x N4 x K4``) between copies (module docstring). Same interface as
    :class:`~numba_gemm.plan.Plan`: ``run``, ``launch``, ``kernels``, ``stage``, ``variant``
    (``"vector"``: what runs), ``split_k``, ``grid``, ``block``, ``predicted_ms`` (the inner
    plan's and the copies'), ``reason``; ``staging`` says what is copied."""

    def __init__(self, M: int, N: int, K: int, inner: Plan, staging: Staging,
                 scalar_ms: float) -> None:  # not Plan.__init__: the kernel is inner's
        self.M, self.N, self.K = M, N, K
        self.geometry = Geometry.dense(M, N, K, inner.geometry.layout)
        self.inner, self.staging = inner, staging
        self.stage, self.variant, self.device = inner.stage, inner.variant, inner.device
        self.copy_ms = copy_ms(M, N, K, staging)
        inner_ms = inner.predicted_ms
        self.predicted_ms = None if inner_ms is None else inner_ms + self.copy_ms
        copied = _copied(staging)
        self.reason = (f"auto: rows not 16-byte aligned; staged: {copied} copied to rows of "
                       f"{staging.K4} / {staging.N4} floats ({self.copy_ms:.3g} ms predicted), "
                       f"then the aligned plan of {M}x{staging.N4}x{staging.K4}"
                       + (f" ({inner_ms:.3g} ms)" if inner_ms is not None else "")
                       + f": {inner.reason}; the scalar-GMEM plan was predicted at "
                       f"{scalar_ms:.3g} ms")
        self._copy = None
        self._kernels = None
        self._lock = threading.Lock()

    grid = property(lambda self: self.inner.grid)
    block = property(lambda self: self.inner.block)
    smem = property(lambda self: self.inner.smem)
    split_k = property(lambda self: self.inner.split_k)

    def kernels(self) -> Any:
        """The inner plan's main kernel (and the copy kernel), loaded on the first call."""
        if self._copy is None:
            with self._lock:
                if self._copy is None:
                    self._kernels = self.inner.kernels()
                    self._copy = load_kernel(_pad.copy_padded, name="copy_padded", spec="SS",
                                             device=self.device)
        return self._kernels

    def run(self, A: Operand, B: Operand, C: Operand, alpha: float, beta: float,
            stream: Any) -> None:
        """Enqueue the copies, the inner plan and the copy back on ``stream``. ``A``, ``B``,
        ``C``: dense ``(M, K)``, ``(K, N)``, ``(M, N)`` as ``geometry`` lays them out (only
        their base pointers count). An operand the shape does not force through a copy is used
        in place when its base pointer is aligned."""
        if self._copy is None:
            self.kernels()
        s, copy, M, N, K = self.staging, self._copy, self.M, self.N, self.K
        bt = self.geometry.layout[1] == "T"
        A2, B2, C2 = buffers(M, s, stream, self.device.id, bt)
        a = A2 if s.a or A.ptr & 15 else A
        b = B2 if s.b or B.ptr & 15 else B
        c = C2 if s.c or C.ptr & 15 else C
        block = (_pad.BLOCK, 1, 1)
        if a is not A:
            copy.launch(_grid(a), block, stream, (_as3(a), _storage(A, M, K)), ())
        if b is not B:
            copy.launch(_grid(b), block, stream,
                        (_as3(b), _storage(B, *((N, K) if bt else (K, N)))), ())
        if c is not C and beta != 0.0:
            copy.launch(_grid(c), block, stream, (_as3(c), _storage(C, M, N)), ())
        self.inner.run(a, b, c, alpha, beta, stream)
        if c is not C:
            out = _storage(C, M, N)
            copy.launch(_grid(out), block, stream, (out, _as3(c)), ())

    def __repr__(self) -> str:
        return (f"StagedPlan({self.M}x{self.N}x{self.K} on {self.device.name} (device "
                f"{self.device.id}): {_copied(self.staging)} through aligned copies "
                f"({self.copy_ms:.4g} ms predicted), then {self.inner!r})")


__all__ = ["StagedPlan", "Staging", "staging_for", "consider", "copy_ms", "round4"]
