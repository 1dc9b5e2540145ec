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
is not padded (its rows would need M padded too); for the TF32 wgmma kernels, which need A
K-major, it is copied row-major instead (``Staging.at``, ``choose._transposed``; the same copy
kernel reading the transposed view).

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

from typing import NamedTuple

from ..arrays import DTYPES
from ..device import DeviceInfo
from . import tuning

#: Bytes read + written per millisecond by ``copy_padded``: 2.5-2.85 TB/s measured on an H100
#: (A of 4095^3 into rows of 4096 floats: 134 MB in 49.8 us; docs/design.md), 80 % of its
#: 3.35 TB/s; the H200 is priced the same (conservative).
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


#: Bytes of an element of each type the copies move (``Staging.ab_type``, ``Staging.c_type``).
ITEMSIZE = {name: dtype.itemsize for name, dtype in DTYPES.items()}


def round16(n: int, itemsize: int = 4) -> int:
    """``n`` elements of ``itemsize`` bytes rounded up to a whole number of 16 bytes."""
    per = 16 // itemsize
    return -(-n // per) * per


class Staging(NamedTuple):
    """Which operands a product's shape sends through aligned copies, and the padded sizes
    (``K4``, ``N4``: K and N rounded up to rows of 16 bytes, 4 floats or 8 16-bit values)."""

    a: bool  # A (M, K) -> (M, K4)
    b: bool  # B (K, N) -> (K4, N4)
    c: bool  # C (M, N) <- (M, N4)
    K4: int
    N4: int
    #: A stored transposed (dense ``(K, M)``) is copied into a row-major A' (the TF32 wgmma
    #: kernels need A K-major in SMEM, and their element-wise transposing copies bind them)
    at: bool = False
    #: The element types of A and B, and of C (:data:`ITEMSIZE`'s keys): ``hgemm`` stages
    #: 16-bit operands (its TMA stages need rows of a multiple of 8 of them).
    ab_type: str = "float32"
    c_type: str = "float32"


def staging_for(
    M: int,
    N: int,
    K: int,
    transpose_a: bool = False,
    ab_type: str = "float32",
    c_type: str = "float32",
    layout: str = "NN",
) -> Staging:
    """What the shape forces: K not a whole number of 16-byte rows stages A and B, N stages B
    and C (none for an aligned shape: there only an operand with an unaligned base pointer is
    copied, at run time); ``transpose_a``: A, stored transposed, is copied row-major whatever
    the shape. For 16-bit operands (``ab_type``) rows are rounded to 8 elements, and B stored
    transposed (``layout`` ``?T``: rows of K) is not copied for N alone (C's rows then take
    the stage's element stores, not a copy of a weight)."""
    del M
    size = ITEMSIZE[ab_type]
    K4, N4 = round16(K, size), round16(N, size)
    pad_k, pad_n = K4 != K, N4 != N
    if size == 2 and layout[1] == "T":
        N4, pad_n = N, False
    return Staging(
        pad_k or transpose_a, pad_k or pad_n, pad_n, K4, N4, transpose_a, ab_type, c_type
    )


def workspace_bytes(M: int, s: Staging) -> int:
    """Bytes of the three staging buffers, A' ``(M, K4)``, B' ``(K4, N4)``, C' ``(M, N4)`` (all
    three are kept: a misaligned base pointer may send any operand through)."""
    return ITEMSIZE[s.ab_type] * (M * s.K4 + s.K4 * s.N4) + ITEMSIZE[s.c_type] * M * s.N4


def copy_ms(M: int, N: int, K: int, s: Staging, beta: bool = False) -> float:
    """Predicted time (ms) of the copies: each staged operand read and written once (C twice
    with ``beta``: in and out), at :data:`BYTES_PER_MS`, plus :data:`COPY_LAUNCH_MS` each. For
    an aligned shape (a misaligned base pointer: any operand may be it) all three are priced."""
    a, b, c = s[:3] if any(s[:3]) else (True, True, True)
    ab, cs = ITEMSIZE[s.ab_type], ITEMSIZE[s.c_type]
    nbytes, copies = 0, 0
    if a:
        nbytes, copies = nbytes + ab * (M * K + M * s.K4), copies + 1
    if b:
        nbytes, copies = nbytes + ab * (K * N + s.K4 * s.N4), copies + 1
    if c:
        n = 2 if beta else 1
        nbytes, copies = nbytes + n * cs * (M * N + M * s.N4), copies + n
    return nbytes / BYTES_PER_MS + copies * COPY_LAUNCH_MS


def feasible(
    M: int,
    N: int,
    K: int,
    dev: DeviceInfo,
    scalar_ms: float | None,
    layout: str = "NN",
    measured: bool = True,
) -> Staging | None:
    """The :class:`Staging` of an unaligned ``M x N x K`` product (dense operands stored as
    ``layout`` says: NN or NT) if staging may pay, else None: without a prediction of the scalar
    plan (``scalar_ms``) to compare, for A stored transposed, past :data:`MAX_BYTES` of
    workspace, or when the two prices would not be alike (:func:`like_priced`): the classes'
    extrapolation is often optimistic (256 x 50260 x 768 priced at 0.17 ms from the narrow
    class, where cuBLAS takes 0.41 ms on an H200), and would win against a measured scalar time
    for no reason. ``measured=False`` (the TF32 wgmma stages, whose 4-byte copies run at a fifth
    of the 128-bit kernel's speed) drops that last condition: their classes' prices suffice."""
    if scalar_ms is None or layout[0] != "N":
        return None
    s = staging_for(M, N, K)
    if workspace_bytes(M, s) > MAX_BYTES or (measured and not like_priced(M, N, K, s, dev, layout)):
        return None
    return s


def like_priced(M: int, N: int, K: int, s: Staging, dev: DeviceInfo, layout: str) -> bool:
    """Whether the aligned plan of the padded product and the scalar plan of ``M x N x K`` are
    priced alike, so that comparing them is fair: the padded one near an aligned measured shape
    (``tuning.nearest_shape``), or neither product near a measured shape of its alignment (nor,
    for a few rows, ``tuning.nearest_rows_shape``), both then priced from the shape classes,
    whose candidates were timed in both variants at the class's shape (``ms``, ``ms_scalar``)."""
    if tuning.nearest_shape(M, s.N4, s.K4, True, dev, layout) is not None:
        return True
    return (
        tuning.nearest_shape(M, N, K, False, dev, layout) is None
        and tuning.nearest_rows_shape(M, N, K, False, dev, layout) is None
        and tuning.nearest_rows_shape(M, s.N4, s.K4, True, dev, layout) is None
    )


def worth(
    M: int, N: int, K: int, s: Staging, inner_ms: float | None, scalar_ms: float
) -> float | None:
    """The copies' predicted time (ms) if the aligned plan of the padded shape (``inner_ms``)
    plus the copies is predicted at least :data:`MIN_GAIN` faster than ``scalar_ms``, else
    None."""
    if inner_ms is None:
        return None
    copy = copy_ms(M, N, K, s)
    return copy if inner_ms + copy <= (1.0 - MIN_GAIN) * scalar_ms else None


def copied(s: Staging) -> str:
    """What a staged plan copies, in words."""
    names = [n for n, on in zip("ABC", s[:3], strict=True) if on]
    if s.at:
        names[0] = "A (transposed to row-major)"
    return ", ".join(names) if names else "the operands with an unaligned base pointer"


__all__ = [
    "MAX_BYTES",
    "Staging",
    "staging_for",
    "feasible",
    "like_priced",
    "worth",
    "copy_ms",
    "copied",
    "round4",
    "round16",
    "workspace_bytes",
]
