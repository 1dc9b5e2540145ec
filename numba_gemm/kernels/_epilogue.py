"""Fused epilogues: what a kernel does to each result between ``alpha * acc + beta * C`` and its
store, so that a bias, an activation or a user's own function costs no extra pass over C.

For each element of C at ``(row, col)`` the kernel stores ``finish(v, row, col, E)`` with
``v = alpha * acc + beta * C[row, col]`` (FP32) and

    finish = fn(act(v + bias), row, col, *operands)

each part optional, in that order: ``bias[col]`` (a vector per output column, length N: what
``x @ W.T + b`` broadcasts) or ``bias[row]`` (per row, length M); ``act`` one of
:data:`ACTIVATIONS`; ``fn`` a ``@cuda.jit(device=True)`` function of the FP32 value, its row and
column (within its matrix of a batch) and the call's extra operands, returning the value to store.

An :class:`Epilogue` is the compile-time half (which parts, the operands' array types): kernels
are built and cached per epilogue. The call passes the data as one more kernel argument, the
tuple ``E = (bias, *operands)`` before ``alpha, beta`` (launch spec ``"(...)"``, flattened by
Numba's ABI). A kernel with no epilogue passes ``()``, and its code is the same as before.

Stages whose kernels take an epilogue say so (``Stage.epilogue``); any other plan runs the product
and then :func:`make_apply`'s kernel over C (one more read and write of C).

Sources: GELU, Hendrycks and Gimpel, "Gaussian Error Linear Units" (2016), both its erf form and
its tanh approximation; SiLU, Elfwing et al. (2017) / Ramachandran et al., "Searching for
activation functions" (2017) as "swish". The fused-epilogue idea is CUTLASS's epilogue and
cuBLASLt's ``CUBLASLT_EPILOGUE_*``; a user function compiled into it is this package's.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from ..backend import cuda, float32, types
from ..ptx.bf16 import from_c, to_c
from ._common import PLAIN_STORES, device_jit, make_stores, no_epilogue

#: Activation names, in the order of :func:`make_finish`'s table.
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")

#: Array types an epilogue operand may have, as launch spec letters: float32 or float16, 1-D or
#: 2-D, C-contiguous.
OPERAND_SPECS = {("float32", 1): "V", ("float32", 2): "A", ("float16", 1): "h", ("float16", 2): "H"}

_SQRT1_2 = 0.7071067811865476
_SQRT_2_PI = 0.7978845608028654


@dataclass(frozen=True)
class Epilogue:
    """The compile-time description of a fused epilogue.

    Attributes:
        bias: ``"column"`` (``E[0]`` has N entries, one per column of C), ``"row"`` (M entries)
            or None.
        activation: one of :data:`ACTIVATIONS` or None.
        fn: the user's ``@cuda.jit(device=True)`` function ``fn(v, row, col, *operands)`` or
            None.
        operands: the launch spec of ``E`` (``OPERAND_SPECS`` letters): the bias's first, then
            ``fn``'s operands.
    """

    bias: str | None = None
    activation: str | None = None
    fn: Any = None
    operands: str = ""

    def __post_init__(self) -> None:
        # an inconsistent record would be typed into a kernel that never compiles (a bias with
        # no operand letter left Numba's typing of the kernel spinning); refuse it here
        if self.bias not in (None, "column", "row"):
            raise ValueError(f"Epilogue.bias must be 'column', 'row' or None, got {self.bias!r}")
        if self.activation not in (None, *ACTIVATIONS):
            raise ValueError(
                f"Epilogue.activation must be one of {ACTIVATIONS} or None, got {self.activation!r}"
            )
        letters = set(OPERAND_SPECS.values())
        if not isinstance(self.operands, str) or not set(self.operands) <= letters:
            raise ValueError(
                f"Epilogue.operands must be a string of the letters {sorted(letters)}, "
                f"got {self.operands!r}"
            )
        n_bias = 1 if self.bias else 0
        if self.bias and self.operands[:1] not in ("V", "h"):
            raise ValueError(
                f"Epilogue.operands must start with the bias's letter ('V' for float32, 'h' "
                f"for float16, 1-D), got {self.operands!r}"
            )
        extra = len(self.operands) - n_bias
        if self.fn is None and extra:
            raise ValueError(
                f"Epilogue.operands {self.operands!r} holds {extra} operand(s) past the bias "
                "but there is no function to take them"
            )
        if extra > MAX_OPERANDS:
            raise ValueError(
                f"an epilogue function takes at most {MAX_OPERANDS} operands, got {extra}"
            )

    @property
    def spec(self) -> str:
        """``E``'s part of a kernel's launch spec: ``"(" + operands + ")"``."""
        return f"({self.operands})"

    def describe(self) -> str:
        """The epilogue in words, for plans and messages (``"bias[col] + gelu + fn"``)."""
        parts = []
        if self.bias:
            parts.append("bias[col]" if self.bias == "column" else "bias[row]")
        if self.activation:
            parts.append(self.activation)
        if self.fn is not None:
            parts.append(getattr(self.fn, "__name__", "fn"))
        return " + ".join(parts)


# --- the device functions ------------------------------------------------------------------------


@device_jit
def _relu(v):
    return float32(0.0) if v < float32(0.0) else v  # NaN stays NaN (as torch.relu)


@device_jit
def _gelu(v):
    return float32(0.5) * v * (float32(1.0) + math.erf(v * float32(_SQRT1_2)))


@device_jit
def _gelu_tanh(v):
    u = float32(_SQRT_2_PI) * (v + float32(0.044715) * v * v * v)
    return float32(0.5) * v * (float32(1.0) + math.tanh(u))


@device_jit
def _silu(v):
    return v / (float32(1.0) + math.exp(-v))


@device_jit
def _same(v):
    return v


_ACT = {None: _same, "relu": _relu, "gelu": _gelu, "gelu_tanh": _gelu_tanh, "silu": _silu}


# the bias is indexed unsigned: a signed index costs each of its loads Numba's negative-index
# wraparound (a compare and a select per result)
@device_jit
def _bias_col(v, r, c, E):
    return v + float32(E[0][types.uint64(c)])


@device_jit
def _bias_row(v, r, c, E):
    return v + float32(E[0][types.uint64(r)])


@functools.cache
def stores_for(epi: Epilogue | None):
    """The C-writing helpers of kernels with epilogue ``epi`` (``_common.make_stores`` around
    :func:`make_finish`'s ``finish``; ``PLAIN_STORES`` for None), one set per epilogue."""
    return PLAIN_STORES if epi is None else make_stores(make_finish(epi))


def make_finish(epi: Epilogue):
    """The device function ``finish(v, r, c, E) -> float32`` of ``epi`` (module docstring)."""
    add = {"column": _bias_col, "row": _bias_row, None: no_epilogue}[epi.bias]
    act = _ACT[epi.activation]
    fn = epi.fn
    if fn is None:

        @device_jit
        def finish(v, r, c, E):
            return act(add(v, r, c, E))

        return finish
    first = 1 if epi.bias else 0  # fn's operands: E[first:]
    user = _user_call(fn, first, len(epi.operands) - first)

    @device_jit
    def finish_fn(v, r, c, E):
        return float32(user(act(add(v, r, c, E)), r, c, E))

    return finish_fn


def _user_call(fn: Any, first: int, n: int):
    """``call(v, r, c, E)`` -> ``fn(v, r, c, E[first], ..., E[first + n - 1])``: one device
    function per operand count (Numba types each call with a fixed number of arguments). The
    indices are plain closure constants: Numba indexes a tuple of several types only with a
    constant it can see (``E[i0]``, not ``E[first + 1]``)."""
    i0, i1, i2 = first, first + 1, first + 2
    if n == 0:

        @device_jit
        def call0(v, r, c, E):
            return fn(v, r, c)

        return call0
    if n == 1:

        @device_jit
        def call1(v, r, c, E):
            return fn(v, r, c, E[i0])

        return call1
    if n == 2:

        @device_jit
        def call2(v, r, c, E):
            return fn(v, r, c, E[i0], E[i1])

        return call2
    if n == 3:

        @device_jit
        def call3(v, r, c, E):
            return fn(v, r, c, E[i0], E[i1], E[i2])

        return call3
    raise ValueError(f"an epilogue function takes at most {MAX_OPERANDS} operands, got {n}")


#: Extra operands an epilogue function may take.
MAX_OPERANDS = 3


# --- the unfused path: C = finish(C) after the product ------------------------------------------

#: Threads per block of the apply kernel: x over columns (coalesced), y over rows.
APPLY_BLOCK = (32, 8)


@functools.cache
def make_apply(epi: Epilogue):
    """The kernel ``apply(C, E)`` that stores ``finish(C[b, r, c], r, c, E)`` over a strided batch
    C ``(batch, M, N)`` (float32, float16 or bfloat16 bits: ``ptx.bf16``), grid
    ``(cdiv(N, 32), cdiv(M, 8), batch)`` of :data:`APPLY_BLOCK`: the epilogue of a plan whose
    kernel does not take one (``v`` is then C as the product left it, rounded to C's type
    once more for a 16-bit C)."""
    finish = make_finish(epi)

    def apply(C, E):
        c = cuda.blockIdx.x * APPLY_BLOCK[0] + cuda.threadIdx.x
        r = cuda.blockIdx.y * APPLY_BLOCK[1] + cuda.threadIdx.y
        b = cuda.blockIdx.z
        if r < C.shape[1] and c < C.shape[2]:
            C[b, r, c] = to_c(C, finish(float32(from_c(C, C[b, r, c])), r, c, E))

    apply.__name__ = apply.__qualname__ = "epilogue_apply"
    return cuda.jit(apply)
