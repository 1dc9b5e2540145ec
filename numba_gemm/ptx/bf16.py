"""bfloat16 results: the epilogue's conversions for a C stored as bfloat16 bits.

Numba CUDA 0.30 has no bfloat16 array type, so a bfloat16 C reaches a kernel as a ``uint16``
array of its bits (launch spec ``U``). The epilogue helpers (``kernels._common.store_c`` and
``store_c2``) go through these two functions, which act on the *type* of C, so one kernel source
serves float32, float16 and bfloat16 C:

- ``to_c(C, v)``: the float32 ``v`` as C stores it: for a ``uint16`` C, the bits of ``v``
  rounded to bfloat16 (``cvt.rn.bf16.f32``: to nearest, ties to even; NaN stays NaN); for any
  other C, ``v`` itself (the store converts it, as before).
- ``from_c(C, x)``: an element ``x`` read from C as float32: for a ``uint16`` C, the bfloat16 bits
  widened (the high half of a float32, exact); else ``x``.

For float32 and float16 C both are the identity, so those kernels' code is unchanged.

A 16-bit C can also be written 16 bytes per lane (the epilogue of ``k20_hgemm_tma.make_kernel``):

- ``c_bytes(C)``: C's element size, a compile-time constant (4, 2) that selects the epilogue;
- ``pack_c(C, x, y)``: float32 ``x`` and ``y`` rounded to C's 16-bit type and packed in one
  int32, ``x`` in the low half (``cvt.rn.f16x2.f32`` or ``cvt.rn.bf16x2.f32``; a float32 C, for
  which the 16-byte epilogue is dead code, gets FP16).

On the GPU they are ``@intrinsic`` functions that pick their code from C's type; under the CUDA
simulator, plain Python with the same semantics (``ptx.mma.bf16_bits``, ``bf16_value``).

Source: PTX ISA 8.x, "cvt" (``.bf16`` destination, sm_80+); bfloat16 is the high 16 bits of an
IEEE float32 (Wang and Kanwar, "BFloat16: The secret to high performance on Cloud TPUs", 2019).
"""

from __future__ import annotations

import numpy as np

from ..backend import MLIR
from ..device import SIMULATOR
from . import unported
from .mma import bf16_bits, bf16_value, pack_bf16x2, pack_half2

if SIMULATOR:

    def _is_bits(C) -> bool:
        return np.dtype(C.dtype) == np.uint16

    def c_bytes(C):
        """Simulator model of :func:`c_bytes`."""
        return np.dtype(C.dtype).itemsize

    def pack_c(C, x, y):
        """Simulator model of :func:`pack_c`."""
        if _is_bits(C):
            return pack_bf16x2(x, y)
        return pack_half2(x, y)

    def to_c(C, v):
        """Simulator model of :func:`to_c`."""
        return bf16_bits(v)[()] if _is_bits(C) else v

    def from_c(C, x):
        """Simulator model of :func:`from_c`."""
        return bf16_value(x)[()] if _is_bits(C) else x

elif MLIR:
    from ..backend import intrinsic, types

    def _float_c(name, C):
        if not (isinstance(C, types.Array) and C.dtype in (types.float32, types.float16)):
            raise TypeError(
                f"{name}: under numba-cuda-mlir C must be a float32 or float16 array, got {C} "
                "(a bfloat16 C is not ported: docs/numba-cuda-mlir.md)"
            )

    def _identity(lower, target, args, kws):
        """numba-cuda-mlir's code generator of an intrinsic: ``target = args[1]``."""
        lower.store_var(target, lower.load_var(args[1]))

    @intrinsic
    def to_c(typingctx, C, v):
        """``v`` itself, which the store converts to C's float32 or float16."""
        _float_c("to_c", C)
        return v(C, v), _identity

    @intrinsic
    def from_c(typingctx, C, x):
        """An element ``x`` of a float32 or float16 C, itself (widened where it is used)."""
        _float_c("from_c", C)
        return x(C, x), _identity

    c_bytes = unported("bf16", "c_bytes")
    pack_c = unported("bf16", "pack_c")

else:
    from llvmlite import ir

    from ..backend import cuda, intrinsic, types

    def _bits(C) -> bool:
        if not isinstance(C, types.Array):
            raise TypeError(f"to_c / from_c take C (an array) first, got {C}")
        return C.dtype == types.uint16

    def _same(context, builder, sig, args):
        return args[1]

    @intrinsic
    def c_bytes(typingctx, C):
        """C's element size in bytes, a constant of its type (no instruction)."""
        if not isinstance(C, types.Array):
            raise TypeError(f"c_bytes takes an array, got {C}")
        size = C.dtype.bitwidth // 8

        def codegen(context, builder, sig, args):
            return context.get_constant(types.intp, size)

        return types.intp(C), codegen

    @intrinsic
    def _is_bf16(typingctx, C):
        if not isinstance(C, types.Array):
            raise TypeError(f"pack_c takes C (an array) first, got {C}")
        flag = C.dtype == types.uint16

        def codegen(context, builder, sig, args):
            return context.get_constant(types.boolean, flag)

        return types.boolean(C), codegen

    @cuda.jit(device=True, forceinline=True)
    def pack_c(C, x, y):
        """``x`` (low half) and ``y`` rounded to C's 16-bit type, in one int32: BF16 for a
        ``uint16`` C (``cvt.rn.bf16x2.f32``), else FP16 (``cvt.rn.f16x2.f32``)."""
        if _is_bf16(C):
            return pack_bf16x2(x, y)
        return pack_half2(x, y)

    @intrinsic
    def to_c(typingctx, C, v):
        """``v`` (float32) as ``C`` stores it: a ``uint16`` C gets its bfloat16 bits
        (``cvt.rn.bf16.f32``), any other C ``v`` itself."""
        if not _bits(C):
            return v(C, v), _same

        def codegen(context, builder, sig, args):
            x = context.cast(builder, args[1], sig.args[1], types.float32)
            asm = ir.InlineAsm(
                ir.FunctionType(ir.IntType(16), [ir.FloatType()]), "cvt.rn.bf16.f32 $0, $1;", "=h,f"
            )
            return builder.call(asm, [x])

        return types.uint16(C, v), codegen

    @intrinsic
    def from_c(typingctx, C, x):
        """An element ``x`` of ``C`` as float32: a ``uint16`` C's bfloat16 bits widened (exact),
        any other C's ``x`` itself."""
        if not _bits(C):
            return x(C, x), _same

        def codegen(context, builder, sig, args):
            i32 = ir.IntType(32)
            wide = builder.shl(builder.zext(args[1], i32), ir.Constant(i32, 16))
            return builder.bitcast(wide, ir.FloatType())

        return types.float32(C, x), codegen


__all__ = ["bf16_bits", "bf16_value", "c_bytes", "from_c", "pack_c", "to_c"]
