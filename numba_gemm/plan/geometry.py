"""Where the operands of a product lie and what that allows: the :class:`Geometry` (batch,
layout, pitches, batch strides) and the :class:`Alignment` of its rows, the one rule that picks
the vector (128-bit GMEM), ``vector_loads`` or scalar kernel variant.

A row of floats allows 128-bit accesses when it starts on a 16-byte boundary: the base pointer
aligned and every pitch, batch stride and contiguous extent a multiple of 4 floats (CUDA C
Programming Guide, "Device Memory Accesses": a vector access must be naturally aligned).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple

from ..arrays import F32, Operand
from ..kernels import STAGES
from ..kernels.stage import Stage


class Alignment(IntEnum):
    """Which operands' rows allow 128-bit GMEM accesses (16-byte aligned rows).

    ``ALL``: A, B and C (the vector variant); ``AB``: A and B but not C (the ``vector_loads``
    variant where a stage has it, for ``x @ W.T`` with an odd N; else scalar); ``NONE``: the
    scalar-GMEM variant, or staging (``plan.staging``).
    """

    NONE = 0
    AB = 1
    ALL = 2

    @classmethod
    def of_pointers(cls, a: int, b: int, c: int) -> Alignment:
        """The alignment the base pointers allow (rows also need :meth:`Geometry.alignment`)."""
        if (a | b) & 15:
            return cls.NONE
        return cls.AB if c & 15 else cls.ALL


class Geometry(NamedTuple):
    """How the operands of a (batched) product lie in memory, in elements (float32).

    ``C[b] = A[b] @ B[b]`` for ``b < batch``, A ``(M, K)``, B ``(K, N)``, C ``(M, N)`` each.
    ``layout`` says, as in BLAS, whether A and B are stored transposed: ``"NN"`` (both
    row-major), ``"NT"`` (B stored as a row-major ``(N, K)``, i.e. column-major), ``"TN"``,
    ``"TT"``; C is row-major. ``lda``, ``ldb``, ``ldc``: the row pitch of each operand's storage
    (``>=`` its storage row length); ``stride_a``, ``stride_b``, ``stride_c``: elements between
    consecutive matrices of the batch (0: one matrix broadcast to the whole batch).
    """

    batch: int
    M: int
    N: int
    K: int
    layout: str = "NN"
    lda: int = 0
    ldb: int = 0
    ldc: int = 0
    stride_a: int = 0
    stride_b: int = 0
    stride_c: int = 0

    @classmethod
    def plain(cls, M: int, N: int, K: int) -> Geometry:
        """One row-major, C-contiguous product (the ladder's teaching form)."""
        return cls(1, M, N, K, "NN", K, N, N, 0, 0, 0)

    @classmethod
    def dense(cls, M: int, N: int, K: int, layout: str = "NN") -> Geometry:
        """One contiguous product with A and B stored as ``layout`` says (A as a row-major
        ``(K, M)`` when transposed, B as a row-major ``(N, K)``: ``x @ W.T``)."""
        return cls(
            1,
            M,
            N,
            K,
            layout,
            K if layout[0] == "N" else M,
            N if layout[1] == "N" else K,
            N,
            0,
            0,
            0,
        )

    @property
    def is_plain(self) -> bool:
        return self == Geometry.plain(self.M, self.N, self.K)

    def alignment(self, pointers: Alignment = Alignment.ALL, free: str = "") -> Alignment:
        """The rows' :class:`Alignment`: ``pointers`` (the base pointers') lowered to what the
        pitches, batch strides and contiguous extents allow. ``free``: the operands (``"A"``,
        ``"B"``) whose rows are left out, those a stage copies element by element in every
        variant (``Stage.free_rows``); their base pointers still count."""
        if pointers == Alignment.ALL and self.shape_aligned(free):
            return Alignment.ALL
        if pointers >= Alignment.AB and self.loads_aligned(free):
            return Alignment.AB
        return Alignment.NONE

    def shape_aligned(self, free: str = "") -> bool:
        """The alignment rule (``arrays.rows_aligned``) on everything but the base pointers:
        every pitch and batch stride, and the length of each operand's contiguous dimension
        (the vector kernels clamp a float4 inside it), are multiples of 4 floats; ``free`` as in
        :meth:`alignment`."""
        return self.loads_aligned(free) and not ((self.ldc | self.stride_c | self.N) & 3)

    def loads_aligned(self, free: str = "") -> bool:
        """:meth:`shape_aligned` for A and B alone: whether, with their base pointers 16-byte
        aligned, every row of A and B allows 128-bit loads (the ``"vector_loads"`` variant,
        whatever C's pitch; ``kernels.stage.VECTOR_LOADS``); ``free`` as in :meth:`alignment`."""
        a = (
            0
            if "A" in free
            else self.lda | self.stride_a | (self.K if self.layout[0] == "N" else self.M)
        )
        b = (
            0
            if "B" in free
            else self.ldb | self.stride_b | (self.N if self.layout[1] == "N" else self.K)
        )
        return not ((a | b) & 3)

    def arrays(self, A: Any, B: Any, C: Any) -> tuple[Operand, Operand, Operand]:
        """The kernel arguments of a strided-batch stage (spec ``S``): A ``(batch, M, K)``,
        B ``(batch, K, N)``, C ``(batch, M, N)`` with byte strides, over the operands' memory
        (``A``, ``B``, ``C``: objects with ``ptr`` and ``obj``)."""
        b, M, N, K = self.batch, self.M, self.N, self.K
        sa = (
            (4 * self.stride_a, 4 * self.lda, 4)
            if self.layout[0] == "N"
            else (4 * self.stride_a, 4, 4 * self.lda)
        )
        sb = (
            (4 * self.stride_b, 4 * self.ldb, 4)
            if self.layout[1] == "N"
            else (4 * self.stride_b, 4, 4 * self.ldb)
        )
        return (
            Operand(A.obj, A.ptr, (b, M, K), sa, F32, 0),
            Operand(B.obj, B.ptr, (b, K, N), sb, F32, 0),
            Operand(C.obj, C.ptr, (b, M, N), (4 * self.stride_c, 4 * self.ldc, 4), F32, 0),
        )


def serves(st: Stage, g: Geometry) -> str | None:
    """Why stage ``st`` cannot run geometry ``g`` (None: it can)."""
    if g.is_plain and "NN" in st.layouts:
        return None
    if not st.batched:
        dense = g.batch == 1 and g == Geometry.dense(g.M, g.N, g.K, g.layout)
        if dense and g.layout in st.layouts:
            return None  # a 2-D stage given the dense storage of a layout it takes (hgemm: NT)
        if dense and "NN" not in st.layouts:
            return (
                f"stage {st.name!r} serves layouts {st.layouts} (2-D, dense), not {g.layout}: "
                "use stage=None"
            )
        others = [
            repr(s.name)
            for s in STAGES
            if s.precision == st.precision and (s.batched or (dense and g.layout in s.layouts))
        ]
        return (
            f"stage {st.name!r} takes the ladder's teaching form only (2-D, row-major, "
            f"C-contiguous A and B); this product has layout {g.layout}, batch {g.batch} and "
            f"row pitches ({g.lda}, {g.ldb}, {g.ldc}): use stage=None"
            + (" or one of " + ", ".join(others) if others else "")
        )
    if g.layout not in st.layouts:
        return f"stage {st.name!r} with config {dict(st.config)} serves layouts {st.layouts}"
    if st.split_k != 1 and g.batch > 1:
        return "split-K and stream-K are for one matrix, not a batch"
    return None
