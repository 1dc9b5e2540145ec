"""Asynchronous GMEM -> SMEM copies (``cp.async``, sm_80+) for Numba CUDA kernels.

``cp.async`` moves 4, 8 or 16 bytes from global to shared memory without passing through registers;
the copies of a thread are grouped (``commit``) and waited for (``wait(n)``: until at most ``n`` of
the thread's groups are still in flight). A ``cuda.syncthreads()`` after the wait makes the data
visible to the whole block. This is what lets a kernel keep several K tiles in flight (a
multistage pipeline) without spending registers on them.

- ``copy_async(dst, dr, dc, src, sr, sc, size, valid)``: ``size`` bytes (4 or 16, a literal) from
  ``src[sr, sc]`` (GMEM) to ``dst[dr, dc]`` (SMEM); when ``valid`` is False nothing is read and the
  destination is zero-filled (PTX ``src-size`` = 0). 16-byte copies use ``.cg`` (cached in L2 only)
  and need 16-byte aligned addresses on both sides; 4-byte copies use ``.ca``.
- ``commit()``: ``cp.async.commit_group``.
- ``wait(n)``: ``cp.async.wait_group n`` (``n`` a literal int).

Numba has no ``cp.async``: these are ``@intrinsic`` functions with inline PTX (llvmlite
``ir.InlineAsm``); with numba-cuda-mlir, device functions around
``cuda.experimental.inline_ptx``. The CUDA simulator cannot run inline PTX, so under
``NUMBA_ENABLE_CUDASIM=1`` they are plain Python functions that copy synchronously
(``commit``/``wait`` do nothing): the kernels that use them run unchanged on the simulator,
which checks their indexing and the zero-fill, not the asynchrony.

Source: PTX ISA, "Data Movement and Conversion Instructions: cp.async"; CUDA C++ Programming
Guide, "Asynchronous Data Copies" (``__pipeline_memcpy_async``).
"""

from __future__ import annotations

from ..backend import MLIR, float32
from ..device import SIMULATOR

if SIMULATOR:
    from .vecmem import check16

    def copy_async(dst, dr, dc, src, sr, sc, size, valid):
        """Simulator path: synchronous copy of ``size`` bytes (``size // itemsize`` elements),
        zeros when not ``valid``.

        The source address is bounds-checked even when nothing is read (the GPU computes it
        either way, and NumPy would wrap a negative index silently)."""
        n = size // src.itemsize
        if not (0 <= sr < src.shape[0] and 0 <= sc and sc + n <= src.shape[1]):
            raise IndexError(f"copy_async source [{sr}, {sc}:{sc + n}] outside {src.shape}")
        if size == 16:  # a 16-byte copy needs a 16-byte aligned source
            check16(src, sr, sc)
        for i in range(n):
            dst[dr, dc + i] = src[sr, sc + i] if valid else float32(0.0)

    def commit():
        """Simulator path: nothing to group."""

    def wait(n):
        """Simulator path: copies were synchronous."""

elif MLIR:
    # numba-cuda-mlir: inline PTX on the two elements' addresses (the data pointers of the views
    # from them: ``arr.strides`` does not lower there). The SMEM operand is the generic address
    # moved into the shared window (cvta.to.shared). wait's count must be a literal in the PTX
    # text: each count has its own instruction, folded to one when ``n`` is a constant (a count
    # above 7 waits for all groups). No ported stage calls these yet (docs/numba-cuda-mlir.md).
    from numba_cuda_mlir.types import ptr

    from ..backend import cuda, int32

    _TO_SHARED = "{ .reg .b64 s; cvta.to.shared.u64 s, %0; "
    _COPY16 = _TO_SHARED + "cp.async.cg.shared.global [s], [%1], 16, %2; }"
    _COPY4 = _TO_SHARED + "cp.async.ca.shared.global [s], [%1], 4, %2; }"

    @cuda.jit(device=True, forceinline=True)
    def copy_async(dst, dr, dc, src, sr, sc, size, valid):
        """Asynchronous copy of ``size`` bytes (16, else 4) from ``src[sr, sc]`` (GMEM) to
        ``dst[dr, dc]`` (SMEM), zero-filled when ``valid`` is False."""
        d = ptr(dst[dr:, dc:])
        s = ptr(src[sr:, sc:])
        if size == 16:
            n = int32(16) if valid else int32(0)
            cuda.experimental.inline_ptx(_COPY16, "l", d, "l", s, "r", n)
        else:
            n = int32(4) if valid else int32(0)
            cuda.experimental.inline_ptx(_COPY4, "l", d, "l", s, "r", n)

    @cuda.jit(device=True, forceinline=True)
    def commit():
        """``cp.async.commit_group``: close the group of this thread's copies issued so far."""
        cuda.experimental.inline_ptx("cp.async.commit_group;")

    @cuda.jit(device=True, forceinline=True)
    def wait(n):
        """``cp.async.wait_group n``: wait until at most ``n`` groups are pending."""
        if n == 0:
            cuda.experimental.inline_ptx("cp.async.wait_group 0;")
        elif n == 1:
            cuda.experimental.inline_ptx("cp.async.wait_group 1;")
        elif n == 2:
            cuda.experimental.inline_ptx("cp.async.wait_group 2;")
        elif n == 3:
            cuda.experimental.inline_ptx("cp.async.wait_group 3;")
        elif n == 4:
            cuda.experimental.inline_ptx("cp.async.wait_group 4;")
        elif n == 5:
            cuda.experimental.inline_ptx("cp.async.wait_group 5;")
        elif n == 6:
            cuda.experimental.inline_ptx("cp.async.wait_group 6;")
        elif n == 7:
            cuda.experimental.inline_ptx("cp.async.wait_group 7;")
        else:
            cuda.experimental.inline_ptx("cp.async.wait_all;")

else:
    from llvmlite import ir
    from numba.cuda import cgutils

    from ..backend import intrinsic, types

    _I32 = ir.IntType(32)
    _I64 = ir.IntType(64)

    def _element_pointer(context, builder, aryty, ary, rty, r, cty, c):
        ary = context.make_array(aryty)(context, builder, value=ary)
        r = context.cast(builder, r, rty, types.intp)
        c = context.cast(builder, c, cty, types.intp)
        return cgutils.get_item_pointer(context, builder, aryty, ary, [r, c], wraparound=False)

    def _is_matrix(t):
        return (
            isinstance(t, types.Array) and t.ndim == 2 and t.dtype in (types.float32, types.float16)
        )

    @intrinsic
    def copy_async(typingctx, dst, dr, dc, src, sr, sc, size, valid):
        """Asynchronous copy of ``size`` bytes from ``src[sr, sc]`` (GMEM) to ``dst[dr, dc]``
        (SMEM), zero-filled when ``valid`` is False."""
        if not (_is_matrix(dst) and _is_matrix(src) and dst.dtype == src.dtype):
            raise TypeError(
                f"copy_async needs 2D float32 or float16 arrays of one dtype, got {dst}, {src}"
            )
        if not isinstance(size, types.IntegerLiteral):
            return None  # Numba retries with literal argument types
        if size.literal_value not in (4, 16):
            raise TypeError(f"copy_async size must be the literal 4 or 16, got {size}")
        nbytes = size.literal_value
        cache = "cg" if nbytes == 16 else "ca"
        sig = types.void(dst, dr, dc, src, sr, sc, size, valid)

        def codegen(context, builder, sig, args):
            dstty, drty, dcty, srcty, srty, scty, _, validty = sig.args
            d_ptr = _element_pointer(context, builder, dstty, args[0], drty, args[1], dcty, args[2])
            s_ptr = _element_pointer(context, builder, srcty, args[3], srty, args[4], scty, args[5])
            # SMEM operand: 32-bit address in the shared window
            d_shared = builder.addrspacecast(d_ptr, ir.PointerType(d_ptr.type.pointee, 3))
            d_addr = builder.ptrtoint(d_shared, _I32)
            s_addr = builder.ptrtoint(s_ptr, _I64)
            valid = context.cast(builder, args[7], validty, types.boolean)
            src_size = builder.select(valid, ir.Constant(_I32, nbytes), ir.Constant(_I32, 0))
            asm = ir.InlineAsm(
                ir.FunctionType(ir.VoidType(), [_I32, _I64, _I32]),
                f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;",
                "r,l,r",
                side_effect=True,
            )
            builder.call(asm, [d_addr, s_addr, src_size])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def commit(typingctx):
        """``cp.async.commit_group``: close the group of this thread's copies issued so far."""
        sig = types.void()

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(
                ir.FunctionType(ir.VoidType(), []), "cp.async.commit_group;", "", side_effect=True
            )
            builder.call(asm, [])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def wait(typingctx, n):
        """``cp.async.wait_group n``: wait until at most ``n`` groups are pending (literal n)."""
        if not isinstance(n, types.IntegerLiteral):
            return None  # Numba retries with literal argument types
        count = n.literal_value
        sig = types.void(n)

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(
                ir.FunctionType(ir.VoidType(), []),
                f"cp.async.wait_group {count};",
                "~{memory}",
                side_effect=True,
            )
            builder.call(asm, [])
            return context.get_dummy_value()

        return sig, codegen


__all__ = ["commit", "copy_async", "wait"]
