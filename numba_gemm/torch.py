"""PyTorch operators: ``numba_gemm``'s products as ``torch.library`` custom ops, with autograd and
an ``nn.Linear`` drop-in, so ``torch.compile(fullgraph=True)`` traces through them.

Import this module to register them (``import numba_gemm.torch``); ``import numba_gemm`` alone
never imports PyTorch (CuPy and Numba users keep the plain functions)::

    import torch, numba_gemm.torch as ngt
    layer = ngt.Linear(768, 3072, activation="gelu", device="cuda")   # an nn.Linear
    y = layer(x)                                     # numba_gemm::linear, bias and GELU fused
    y = torch.compile(layer, fullgraph=True)(x)      # the op is opaque to the compiler
    y.sum().backward()                               # dX, dW through the same kernels

Operators (``torch.ops.numba_gemm.*``; each has a fake implementation for tracing, which gives
the output's shape and dtype without running anything):

- ``linear(x, weight, bias, activation, compute)``: :func:`numba_gemm.linear`,
  ``activation(x @ weight.T + bias)``. Autograd: ``dZ = dY * activation'(Z)``, ``dX = dZ @ W``,
  ``dW = dZ.T @ X`` (both :func:`numba_gemm.matmul` / :func:`numba_gemm.hgemm`, as the
  ``matmul`` operator), ``dbias = dZ.sum(0)``. ReLU's derivative reads the output; GELU's and
  SiLU's need ``Z = x @ W.T + b``, which the backward recomputes with one more product (the
  forward stores only the activated output: the fused epilogue's saving).
- ``matmul(a, b, compute)``: :func:`numba_gemm.matmul` (float32, ``numpy.matmul``'s shape rules,
  batches broadcast); 2-D float16 / bfloat16 operands: :func:`numba_gemm.hgemm` (a result of their
  dtype, FP32 sums). Autograd: ``dA = dC @ B^T``, ``dB = A^T @ dC``, summed over broadcast
  batch dimensions.
- ``grouped_mm(a, b, offsets)``: :func:`numba_gemm.grouped_mm` (float32). Autograd: ``dA`` by
  the grouped kernel on B's transposed view (one launch), each ``dB_g = A_g^T dC_g`` by a
  ``matmul`` per non-empty group (the offsets read on the host: a synchronization).

Launches go on PyTorch's current CUDA stream, so they order with the surrounding PyTorch work
(the default stream takes the library's fast lane). An eager call of :func:`linear`,
:func:`matmul` or :class:`Linear` on plain CUDA tensors that need no gradient (inference) runs
the kernel without the dispatcher, whose Python autograd kernel costs microseconds a call;
calls that need a gradient, and calls under a compiler, ``torch.jit.trace``, a dispatch mode
or a functorch transform go through the operators. No forward-mode AD (NotImplementedError).
CUDA graph capture is not supported: a first call of a shape may load a kernel or build a TMA
descriptor, which synchronizes.

Tensors must be CUDA tensors; under the Numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, the test
suite) CPU tensors run the same kernels on the simulator instead (copied into simulator arrays
and back).

Shapes, dtypes and errors are those of the functions named above (TypeError / ValueError, raised
before anything runs); a CPU tensor outside the simulator is a TypeError.
"""

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (PyTorch's own alias)
from numba import cuda

from . import api
from .device import SIMULATOR
from .kernels._epilogue import ACTIVATIONS

__all__ = ["Linear", "grouped_mm", "linear", "matmul"]

_HALF = (torch.float16, torch.bfloat16)

#: The operators' namespace. Defined and implemented through ``torch.library.Library`` rather
#: than ``torch.library.custom_op``: the latter wraps every call in a dynamo-disable context,
#: microseconds of host time per call (docs/design.md §3.3).
_LIB = torch.library.Library("numba_gemm", "DEF")
#: where the implementations run: CUDA tensors (CPU tensors: the simulator, else a clear error)
_KEYS = ("CUDA", "CPU")


def _define(name: str, schema: str, impl: Any, fake: Any) -> None:
    """Define ``numba_gemm::<name>`` with ``schema``, ``impl`` for :data:`_KEYS` and ``fake``
    (shapes and dtypes for tracing)."""
    _LIB.define(name + schema)
    for key in _KEYS:
        _LIB.impl(name, impl, key)
    torch.library.register_fake(f"numba_gemm::{name}", fake, lib=_LIB)


def _stream(t: torch.Tensor) -> int:
    """The handle of PyTorch's current stream on ``t``'s GPU (0: the default stream): the raw
    handle inductor's generated code reads, without building a ``torch.cuda.Stream``."""
    return torch._C._cuda_getCurrentRawStream(t.get_device())


def _simulated(fn: Any, tensors: tuple, **kwargs: Any) -> torch.Tensor:
    """``fn(*tensors, **kwargs)`` for CPU tensors: under the simulator, through simulator arrays
    (None entries pass through); elsewhere a TypeError (the operators run on CUDA tensors)."""
    if not SIMULATOR:
        raise TypeError(
            f"numba_gemm operators run on CUDA tensors, got a tensor on {tensors[0].device}: move "
            "the inputs to the GPU (tensor.cuda())"
        )
    if any(t is not None and t.dtype is torch.bfloat16 for t in tensors):
        raise TypeError("bfloat16 CPU tensors cannot enter the CUDA simulator (no NumPy dtype)")
    sim = tuple(None if t is None else cuda.to_device(_host(t)) for t in tensors)
    return torch.from_numpy(np.array(fn(*sim, **kwargs).copy_to_host(), order="C"))


def _host(t: torch.Tensor) -> np.ndarray:
    """``t``'s NumPy view, copied C-contiguous unless it is C- or F-contiguous (the simulator's
    ``to_device`` copies one memory block)."""
    a = t.detach().numpy()
    return a if a.flags.c_contiguous or a.flags.f_contiguous else np.ascontiguousarray(a)


def _check_activation(activation: str | None) -> None:
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None or one of {ACTIVATIONS}, got {activation!r}")


# --- linear ---------------------------------------------------------------------------------


def _linear_impl(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None,
    compute: str | None,
) -> torch.Tensor:
    if bias is not None and bias.dtype is torch.bfloat16:
        bias = bias.float()  # the 16-bit kernels read a float32 or float16 bias (N values)
    if x.is_cuda:
        return api.linear(x, weight, bias, activation, compute=compute, stream=_stream(x))
    return _simulated(api.linear, (x, weight, bias), activation=activation, compute=compute)


def _linear_fake(x: torch.Tensor, weight: torch.Tensor, *_: Any) -> torch.Tensor:
    """(bias, activation, compute: the output's shape and dtype do not depend on them)"""
    torch._check(x.dim() >= 2, lambda: f"linear: x must have at least 2 dimensions, got {x.dim()}")
    torch._check(weight.dim() == 2, lambda: "linear: weight must be 2-D (out, in features)")
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _linear_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, weight, bias, activation, compute = inputs
    ctx.activation, ctx.compute = activation, compute
    ctx.save_for_backward(x, weight, bias, output if activation == "relu" else None)


def _linear_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    x, weight, bias, y = ctx.saved_tensors
    act = ctx.activation
    if act is None:
        gz = grad
    elif act == "relu":
        gz = torch.ops.aten.threshold_backward(grad, y, 0)
    else:  # Z recomputed: the fused forward kept only activation(Z)
        z = torch.ops.numba_gemm.linear.default(x, weight, bias, None, ctx.compute)
        if act == "silu":
            gz = torch.ops.aten.silu_backward(grad, z)
        else:
            approximate = "tanh" if act == "gelu_tanh" else "none"
            gz = torch.ops.aten.gelu_backward(grad, z, approximate=approximate)
    n, k = weight.shape
    g2 = gz.reshape(-1, n).contiguous()
    mm = torch.ops.numba_gemm.matmul.default
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = mm(g2, weight, ctx.compute).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        dw = mm(g2.t(), x.reshape(-1, k), ctx.compute)
    if bias is not None and ctx.needs_input_grad[2]:
        db = g2.sum(0, dtype=torch.float32).to(bias.dtype)
    return dx, dw, db, None, None


_define(
    "linear",
    "(Tensor x, Tensor weight, Tensor? bias, str? activation, str? compute) -> Tensor",
    _linear_impl,
    _linear_fake,
)
torch.library.register_autograd(
    "numba_gemm::linear", _linear_backward, setup_context=_linear_setup, lib=_LIB
)


# --- matmul ---------------------------------------------------------------------------------


def _half_operands(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """hgemm's operands for 16-bit ``a (M, K) @ b (K, N)``: K and N zero-padded to multiples of
    8 (the product's first N columns are unchanged), A C-contiguous, B C-contiguous or the
    transpose of one; copies only where one of these does not hold (a backward's ``dZ.T``, a
    batch of rows that is not a multiple of 8)."""
    K, N = b.shape
    pk, pn = -K % 8, -N % 8
    if pk:
        a, b = F.pad(a, (0, pk)), F.pad(b, (0, 0, 0, pk))
    if pn:
        b = F.pad(b, (0, pn))
    k8, n8 = K + pk, N + pn
    if a.stride() != (k8, 1):  # (stride checks: is_contiguous() accepts any stride of a size-1 dim)
        a = torch.empty_like(a, memory_format=torch.contiguous_format).copy_(a)
    if b.stride() != (n8, 1) and b.stride() != (1, k8):
        b = torch.empty_like(b, memory_format=torch.contiguous_format).copy_(b)
    return a, b


def _hgemm(a: Any, b: Any, stream: Any = 0) -> Any:
    out_dtype = "bfloat16" if getattr(a, "dtype", None) is torch.bfloat16 else "float16"
    return api.hgemm(a, b, out_dtype=out_dtype, stream=stream)


def _matmul_impl(a: torch.Tensor, b: torch.Tensor, compute: str | None) -> torch.Tensor:
    if a.dtype in _HALF and a.dim() == 2 and b.dim() == 2:
        if compute is not None:
            raise ValueError(f"matmul: compute is for float32 operands, got {compute!r}")
        if a.dtype != b.dtype or a.shape[1] != b.shape[0]:  # hgemm's own message
            return _hgemm(a, b) if a.is_cuda else _simulated(_hgemm, (a, b))
        M, N = a.shape[0], b.shape[1]
        if a.shape[1] == 0 or M == 0 or N == 0:
            return a.new_zeros((M, N))
        a, b = _half_operands(a, b)
        c = _hgemm(a, b, stream=_stream(a)) if a.is_cuda else _simulated(_hgemm, (a, b))
        return c if c.shape[1] == N else c[:, :N].contiguous()
    if a.is_cuda:
        return api.matmul(a, b, compute=compute, stream=_stream(a))
    return _simulated(api.matmul, (a, b), compute=compute)


def _matmul_shape(a: torch.Tensor, b: torch.Tensor) -> list:
    """``numpy.matmul``'s result shape (1-D operands promoted, then their dimension removed)."""
    torch._check(a.dim() >= 1 and b.dim() >= 1, lambda: "matmul: 0-D operands are not matrices")
    sa = (1, *a.shape) if a.dim() == 1 else tuple(a.shape)
    sb = (*b.shape, 1) if b.dim() == 1 else tuple(b.shape)
    torch._check(sa[-1] == sb[-2], lambda: f"matmul: inner dimensions differ: {sa} @ {sb}")
    shape = [*torch.broadcast_shapes(sa[:-2], sb[:-2]), sa[-2], sb[-1]]
    if b.dim() == 1:
        shape.pop(-1)
    if a.dim() == 1:
        shape.pop(-1 if b.dim() == 1 else -2)
    return shape


def _matmul_fake(a: torch.Tensor, b: torch.Tensor, compute: str | None) -> torch.Tensor:
    return a.new_empty(_matmul_shape(a, b))


def _matmul_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    a, b, compute = inputs
    ctx.compute = compute
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors
    # as matrices: a 1-D a is a row (1, K), a 1-D b a column (K, 1); grad regains those dims
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g2 = grad.unsqueeze(-1) if b.dim() == 1 else grad
    g2 = g2.unsqueeze(-2) if a.dim() == 1 else g2
    g2 = g2.contiguous()
    mm = torch.ops.numba_gemm.matmul.default
    da = db = None
    if ctx.needs_input_grad[0]:
        da = mm(g2, b2.mT, ctx.compute).sum_to_size(a2.shape).reshape(a.shape)
    if ctx.needs_input_grad[1]:
        db = mm(a2.mT, g2, ctx.compute).sum_to_size(b2.shape).reshape(b.shape)
    return da, db, None


_define("matmul", "(Tensor a, Tensor b, str? compute) -> Tensor", _matmul_impl, _matmul_fake)
torch.library.register_autograd(
    "numba_gemm::matmul", _matmul_backward, setup_context=_matmul_setup, lib=_LIB
)


# --- grouped_mm -----------------------------------------------------------------------------


def _grouped_mm_impl(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    if a.is_cuda:
        return api.grouped_mm(a, b, offsets, stream=_stream(a))
    return _simulated(api.grouped_mm, (a, b, offsets))


def _grouped_mm_fake(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    torch._check(a.dim() == 2 and b.dim() == 3, lambda: "grouped_mm: a (T, K) and b (E, K, N)")
    return a.new_empty((a.shape[0], b.shape[2]))


_define(
    "grouped_mm",
    "(Tensor a, Tensor b, Tensor offsets) -> Tensor",
    _grouped_mm_impl,
    _grouped_mm_fake,
)


def _grouped_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    a, b, offsets = inputs
    ctx.save_for_backward(a, b, offsets)


def _grouped_mm_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    """``dA`` by the grouped kernel itself, ``dA[rows of g] = dC[rows of g] @ B_g^T`` (B's
    transposed view, one launch; rows past the last group's end are zero, as they took no part);
    ``dB_g = A_g^T @ dC_g`` sums over the group's rows, which the grouped kernel does not
    compute: one ``matmul`` per non-empty group, after reading the offsets on the host (a
    synchronization)."""
    a, b, offsets = ctx.saved_tensors
    g = grad.contiguous()
    T = a.shape[0]
    da = db = None
    if ctx.needs_input_grad[0]:
        da = _OPS.grouped_mm.default(g, b.transpose(1, 2), offsets)
        last = offsets.max().clamp(0, T) if offsets.numel() else offsets.new_zeros(())
        rows = torch.arange(T, device=da.device) < last.to(da.device)
        da = torch.where(rows[:, None], da, da.new_zeros(()))
    if ctx.needs_input_grad[1]:
        ends = offsets.clamp(0, T).cummax(0).values.tolist() if offsets.numel() else []
        db = b.new_zeros(b.shape)
        start = 0
        for e, end in enumerate(ends):
            if end > start:
                db[e] = _OPS.matmul.default(a[start:end].T, g[start:end], None)
            start = max(start, end)
    return da, db, None


torch.library.register_autograd(
    "numba_gemm::grouped_mm", _grouped_mm_backward, setup_context=_grouped_setup, lib=_LIB
)


# --- the Python entry points ---------------------------------------------------------------

_OPS = torch.ops.numba_gemm
#: the types an eager call may hand to the kernel directly (a module's weights are Parameters)
_PLAIN = frozenset((torch.Tensor, torch.nn.Parameter))
_is_compiling = torch.compiler.is_compiling
_is_tracing = torch.jit.is_tracing
_dispatch_modes = torch._C._len_torch_dispatch_stack  # FakeTensorMode, make_fx, FlopCounter...
_functorch_level = torch._C._functorch.peek_interpreter_stack  # vmap, grad, jvp
_forward_ad = torch.autograd.forward_ad


def _direct(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether an eager call may run the kernel without the dispatcher: plain CUDA tensors (no
    subclass, no fake or batched tensor), none needing a gradient, and nothing recording or
    transforming the call (no compile, ``torch.jit.trace``, dispatch mode or functorch
    transform). The dispatcher's Python autograd kernel costs microseconds per call
    (docs/design.md §3.3); the result is the same."""
    if _is_compiling() or _is_tracing() or _dispatch_modes() or _functorch_level() is not None:
        return False
    if type(x) not in _PLAIN or type(weight) not in _PLAIN:
        return False
    if bias is not None and type(bias) not in _PLAIN:
        return False
    if torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    ):
        return False
    return x.is_cuda


def _no_forward_ad() -> None:
    """Forward-mode AD (``torch.autograd.forward_ad``, ``torch.func.jvp``) has no formula here:
    raise rather than let the operators' tangents read as zeros."""
    if _forward_ad._current_level >= 0:
        raise NotImplementedError(
            "numba_gemm operators have no forward-mode AD (jvp) formula; use reverse mode "
            "(backward) or torch's own ops under forward AD"
        )


def _linear_call(x: torch.Tensor, *args: Any) -> torch.Tensor:
    """``linear(x, weight, bias, activation, compute)`` for the entry points: a 1-D ``x`` as one
    row, a non-contiguous ``x`` of more than two dimensions copied (as
    ``torch.nn.functional.linear`` accepts both), then the kernel directly (:func:`_direct`) or
    the operator."""
    _no_forward_ad()
    if x.dim() == 1:
        return _linear_call(x.unsqueeze(0), *args).squeeze(0)
    if x.dim() > 2 and not x.is_contiguous():
        x = x.contiguous()
    if _direct(x, args[0], args[1]):
        return _linear_impl(x, *args)
    return _OPS.linear.default(x, *args)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    *,
    compute: str | None = None,
) -> torch.Tensor:
    """``activation(x @ weight.T + bias)`` as the differentiable operator
    ``torch.ops.numba_gemm.linear`` (:func:`numba_gemm.linear`'s dtypes and errors; ``x`` of
    any shape ``(..., in_features)``, 1-D included, as ``torch.nn.functional.linear``). An
    eager call on CUDA tensors that need no gradient runs the kernel without going through the
    dispatcher (the same result, microseconds less); traced, transformed and differentiated
    calls go through the operator.

    Raises:
        ValueError: an unknown ``activation`` (the valid names listed); others as
            :func:`numba_gemm.linear`.
        NotImplementedError: under forward-mode AD (no jvp formula).
    """
    _check_activation(activation)
    return _linear_call(x, weight, bias, activation, compute)


def matmul(a: torch.Tensor, b: torch.Tensor, *, compute: str | None = None) -> torch.Tensor:
    """``a @ b`` as the differentiable operator ``torch.ops.numba_gemm.matmul`` (float32:
    :func:`numba_gemm.matmul`; 2-D float16 / bfloat16: :func:`numba_gemm.hgemm`, any K and N,
    zero-padded to multiples of 8 where they are not).

    Raises:
        NotImplementedError: under forward-mode AD (no jvp formula).
    """
    _no_forward_ad()
    if _direct(a, b, None):
        return _matmul_impl(a, b, compute)
    return _OPS.matmul.default(a, b, compute)


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """:func:`numba_gemm.grouped_mm` as the operator ``torch.ops.numba_gemm.grouped_mm`` (a new
    ``(T, N)`` float32 result; rows past ``offsets[-1]`` are left unwritten; a backward through
    it raises NotImplementedError)."""
    return _OPS.grouped_mm.default(a, b, offsets)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` computed by ``numba_gemm::linear``, optionally with a fused activation:
    the same constructor (positional arguments included), parameters (``weight (out_features,
    in_features)``, ``bias (out_features,)``), initialization and ``state_dict``, so it loads an
    ``nn.Linear``'s weights; inputs ``(..., in_features)`` as :func:`linear` takes them.

    Args:
        in_features, out_features, bias, device, dtype: as ``torch.nn.Linear``.
        activation: None, ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or ``"silu"``, applied in the
            product's epilogue (``Linear(..., activation="gelu")`` is ``nn.Linear`` then
            ``nn.GELU()``).
        compute: the float32 arithmetic (``numba_gemm.COMPUTE``: ``"fp32"``, ``"tf32"``,
            ``"3xtf32"``) or None.

    Not served: ``torch.autocast`` (the input and the weights must share a dtype), forward-mode
    AD. Code that replaces modules by ``isinstance(m, nn.Linear)`` (quantization, LoRA) keeps
    the weights but not the fused activation.

    Raises:
        ValueError: an unknown ``activation``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        activation: str | None = None,
        compute: str | None = None,
    ) -> None:
        _check_activation(activation)
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation, self.compute = activation, compute

    @classmethod
    def from_linear(
        cls, module: torch.nn.Linear, activation: str | None = None, compute: str | None = None
    ) -> "Linear":
        """A :class:`Linear` sharing ``module``'s parameters (no copy) and training mode."""
        _check_activation(activation)
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = module.in_features, module.out_features
        new.register_parameter("weight", module.weight)
        new.register_parameter("bias", module.bias)  # (None: registered as no parameter)
        new.activation, new.compute = activation, compute
        return new.train(module.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _linear_call(x, self.weight, self.bias, self.activation, self.compute)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation}, compute={self.compute}"
