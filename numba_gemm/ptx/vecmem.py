"""128-bit (float4-width) loads and stores for Numba CUDA kernels.

Numba has no ``float4`` view of a float32 array, and NVVM does not merge four scalar loads of a
global array into one: it cannot prove the 16-byte alignment that ``ld.global.v4.f32`` needs. These
helpers take a 2D C-contiguous float32 array (GMEM or SMEM) and an element index ``(r, c)`` and move
``arr[r, c:c+4]`` as one vector:

- ``load4(arr, r, c) -> (x0, x1, x2, x3)``: an LLVM ``load <4 x float>, align 16``; NVVM infers the
  address space, so it becomes ``ld.global.v4.f32`` on GMEM and ``ld.shared.v4.f32`` on SMEM.
- ``store4(arr, r, c, x0, x1, x2, x3)``: the matching ``st.global.v4.f32`` / ``st.shared.v4.f32``.
- ``load2`` / ``store2``: the same for ``arr[r, c:c+2]`` of a float32 (64 bits, 8-byte aligned)
  or 16-bit array (float16, or uint16 bfloat16 bits: 32 bits, 4-byte aligned).
- ``store_words4(arr, r, c, w0, w1, w2, w3)``: four 32-bit words (each two packed 16-bit
  elements, the first in the low half) to ``arr[r, c:c+8]`` of a 16-bit array, one 128-bit store
  (``st.global.v4.b32``).

Precondition (the caller's, unchecked on the GPU): the address of ``arr[r, c]`` is a multiple of 16
bytes, i.e. the array base is 16-byte aligned, the row pitch (``arr.shape[1]``) is a multiple of 4
and ``c`` is a multiple of 4. A misaligned vector access is a CUDA "misaligned address" error.
SMEM tiles meant for these helpers are declared with
``cuda.shared.array(shape, float32, alignment=SMEM_ALIGN)`` (16 bytes on the GPU, None on the
simulator, which rejects the argument).

A third helper carves dynamic SMEM (one 1D ``cuda.shared.array(0, float32)``) into tiles:

- ``tile_view(buf, offset, shape)``: the C-contiguous array of literal ``shape`` (a tuple of ints)
  starting at ``buf[offset]``. Numba's own ``reshape`` calls a runtime helper
  (``numba_attempt_nocopy_reshape``) that ptxas cannot resolve in an offline compile; this view
  is pure address arithmetic.

They are Numba ``@intrinsic`` functions, which the CUDA simulator cannot run: under
``NUMBA_ENABLE_CUDASIM=1`` the same names are plain Python functions doing four scalar accesses, so
that every stage runs, unchanged, on the simulator (which checks indexing, not vector width; on
device memory ``load4`` and ``store4`` also check the 16-byte alignment the GPU needs).
The PTX evidence (vector instructions present, no local memory) is checked by
``numba_gemm.tools.resources`` and its test.
"""

from __future__ import annotations

import numpy as np

from ..backend import MLIR
from ..device import SIMULATOR
from . import unported

#: Byte alignment requested for SMEM tiles that are read or written with 128-bit accesses.
#: ``None`` on the simulator, which rejects the ``alignment=`` argument.
SMEM_ALIGN = None if SIMULATOR else 16

if SIMULATOR:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    def check16(arr, r, c, width=4):
        """A GPU's precondition, checked: ``arr[r, c:c+width]`` of a global-memory array (a
        simulated device array; SMEM tiles are aligned by construction) is aligned to its size
        (``width`` elements: 16 bytes for four floats) and its row contiguous, else the
        "misaligned address" error the GPU would raise, as ValueError. A plan that runs a vector
        variant on rows that do not allow it fails on the CPU."""
        t = type(arr)
        if t is FakeWithinKernelCUDAArray:  # a device array as a kernel sees it
            arr, t = arr.__dict__["_item"], FakeCUDAArray
        if t is FakeCUDAArray:
            a = arr._ary
            if a.strides[1] != a.itemsize or (a.ctypes.data + r * a.strides[0] + c * a.itemsize) % (
                width * a.itemsize
            ):
                raise ValueError(
                    f"misaligned {8 * width * a.itemsize}-bit access at [{r}, {c}] of a "
                    f"{a.shape} array with strides {a.strides}"
                )

    def load4(arr, r, c):
        """Simulator path of :func:`load4`: four scalar loads of ``arr[r, c:c+4]`` (alignment
        checked on GMEM: :func:`check16`)."""
        check16(arr, r, c)
        return arr[r, c], arr[r, c + 1], arr[r, c + 2], arr[r, c + 3]

    def load2(arr, r, c):
        """Simulator path of :func:`load2`: two scalar loads of ``arr[r, c:c+2]`` (alignment
        checked on GMEM: :func:`check16`)."""
        check16(arr, r, c, 2)
        return arr[r, c], arr[r, c + 1]

    def store2(arr, r, c, x0, x1):
        """Simulator path of :func:`store2`: two scalar stores to ``arr[r, c:c+2]`` (alignment
        checked on GMEM: :func:`check16`)."""
        check16(arr, r, c, 2)
        arr[r, c] = x0
        arr[r, c + 1] = x1

    def store4(arr, r, c, x0, x1, x2, x3):
        """Simulator path of :func:`store4`: four scalar stores to ``arr[r, c:c+4]`` (alignment
        checked on GMEM: :func:`check16`)."""
        check16(arr, r, c)
        arr[r, c] = x0
        arr[r, c + 1] = x1
        arr[r, c + 2] = x2
        arr[r, c + 3] = x3

    def store_words4(arr, r, c, w0, w1, w2, w3):
        """Simulator path of :func:`store_words4`: eight 16-bit elements from the words' bits
        (alignment checked on GMEM: :func:`check16`)."""
        check16(arr, r, c, 8)
        bits = np.array([w0, w1, w2, w3], dtype=np.int64).astype(np.uint32).view(np.uint16)
        vals = bits.view(np.dtype(arr.dtype)) if np.dtype(arr.dtype).itemsize == 2 else bits
        for i in range(8):
            arr[r, c + i] = vals[i]

    def tile_view(buf, offset, shape):
        """Simulator path of :func:`tile_view`: a NumPy reshape of a slice."""
        size = 1
        for n in shape:
            size *= n
        return buf[offset : offset + size].reshape(shape)

    def rows_view(x, b):
        """Simulator path of :func:`rows_view`: the logical matrix ``x[b]`` (same indexing)."""
        return x[b]

    def cols_view(x, b):
        """Simulator path of :func:`cols_view`: the logical matrix ``x[b]``, transposed."""
        return x[b].T

elif MLIR:
    # numba-cuda-mlir lowers no llvmlite code: the two accesses as inline PTX on the address of
    # arr[r, c] (C-contiguous rows of arr.shape[1] floats). Generic addresses (ld.v4.f32 /
    # st.v4.f32, one helper for GMEM and SMEM, as numba-cuda's NVVM inference gives): naming the
    # state space in each block (cvta.to.global / .shared) took stages 6-7 from 128-133 to
    # 181-219 registers offline (docs/numba-cuda-mlir.md).
    from numba_cuda_mlir.types import ptr

    from ..backend import cuda, float32

    _LD4 = "{ .reg .b64 a; mov.b64 a, %4; ld.v4.f32 {%0, %1, %2, %3}, [a]; }"
    _ST4 = "{ .reg .b64 a; mov.b64 a, %0; st.v4.f32 [a], {%1, %2, %3, %4}; }"

    @cuda.jit(device=True, forceinline=True)
    def load4(arr, r, c):
        """``arr[r, c:c+4]`` as four float32, in one 128-bit load (16-byte aligned)."""
        z = float32(0.0)
        at = ptr(arr) + (r * arr.shape[1] + c) * 4
        return cuda.experimental.inline_ptx(_LD4, "=f", z, "=f", z, "=f", z, "=f", z, "l", at)

    @cuda.jit(device=True, forceinline=True)
    def store4(arr, r, c, x0, x1, x2, x3):
        """Store four float32 values to ``arr[r, c:c+4]`` in one 128-bit store (16-byte aligned)."""
        at = ptr(arr) + (r * arr.shape[1] + c) * 4
        cuda.experimental.inline_ptx(_ST4, "l", at, "f", x0, "f", x1, "f", x2, "f", x3)

    load2 = unported("vecmem", "load2")
    store2 = unported("vecmem", "store2")
    store_words4 = unported("vecmem", "store_words4")
    tile_view = unported("vecmem", "tile_view")
    rows_view = unported("vecmem", "rows_view")
    cols_view = unported("vecmem", "cols_view")

else:
    from llvmlite import ir
    from numba.cuda import cgutils

    from ..backend import intrinsic, types

    def _check(name, arr, r, c, dtypes=(types.float32,)):
        if not (
            isinstance(arr, types.Array)
            and arr.ndim == 2
            and arr.layout == "C"
            and arr.dtype in dtypes
        ):
            kinds = " or ".join(str(t) for t in dtypes)
            raise TypeError(f"{name} needs a 2D C-contiguous {kinds} array, got {arr}")
        if not (isinstance(r, types.Integer) and isinstance(c, types.Integer)):
            raise TypeError(f"{name} needs integer indices, got {r}, {c}")

    def _vector_pointer(context, builder, aryty, ary, rty, r, cty, c, vty):
        """Pointer to ``ary[r, c]`` cast to ``vty*`` (an LLVM vector type)."""
        ary = context.make_array(aryty)(context, builder, value=ary)
        r = context.cast(builder, r, rty, types.intp)
        c = context.cast(builder, c, cty, types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [r, c], wraparound=False)
        return builder.bitcast(ptr, vty.as_pointer())

    _PAIR_TYPES = (types.float32, types.float16, types.uint16)  # uint16: bfloat16 bits

    def _vty(context, aryty, width):
        return ir.VectorType(context.get_value_type(aryty.dtype), width)

    def _load_codegen(width):
        def codegen(context, builder, sig, args):
            aryty, rty, cty = sig.args
            vty = _vty(context, aryty, width)
            vptr = _vector_pointer(
                context, builder, aryty, args[0], rty, args[1], cty, args[2], vty
            )
            vec = builder.load(vptr, align=aryty.dtype.bitwidth // 8 * width)
            items = [
                builder.extract_element(vec, ir.Constant(ir.IntType(32), i)) for i in range(width)
            ]
            return context.make_tuple(builder, sig.return_type, items)

        return codegen

    def _store_codegen(width):
        def codegen(context, builder, sig, args):
            aryty, rty, cty = sig.args[:3]
            vty = _vty(context, aryty, width)
            vptr = _vector_pointer(
                context, builder, aryty, args[0], rty, args[1], cty, args[2], vty
            )
            vec = ir.Constant(vty, ir.Undefined)
            for i, (val, valty) in enumerate(zip(args[3:], sig.args[3:], strict=True)):
                val = context.cast(builder, val, valty, aryty.dtype)
                vec = builder.insert_element(vec, val, ir.Constant(ir.IntType(32), i))
            builder.store(vec, vptr, align=aryty.dtype.bitwidth // 8 * width)
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def load4(typingctx, arr, r, c):
        """``arr[r, c:c+4]`` as a 4-tuple of float32, in one 128-bit load (16-byte aligned)."""
        _check("load4", arr, r, c)
        return types.UniTuple(types.float32, 4)(arr, r, c), _load_codegen(4)

    @intrinsic
    def load2(typingctx, arr, r, c):
        """``arr[r, c:c+2]`` (float32, float16 or uint16) as a pair, in one 64-bit (32-bit) load."""
        _check("load2", arr, r, c, _PAIR_TYPES)
        return types.UniTuple(arr.dtype, 2)(arr, r, c), _load_codegen(2)

    @intrinsic
    def store4(typingctx, arr, r, c, x0, x1, x2, x3):
        """Store four float32 values to ``arr[r, c:c+4]`` in one 128-bit store (16-byte aligned)."""
        _check("store4", arr, r, c)
        return types.void(arr, r, c, x0, x1, x2, x3), _store_codegen(4)

    @intrinsic
    def store2(typingctx, arr, r, c, x0, x1):
        """Store two values to ``arr[r, c:c+2]`` (float32, float16 or uint16, converted to its
        dtype) in one 64-bit (32-bit) store."""
        _check("store2", arr, r, c, _PAIR_TYPES)
        return types.void(arr, r, c, x0, x1), _store_codegen(2)

    @intrinsic
    def store_words4(typingctx, arr, r, c, w0, w1, w2, w3):
        """Store four int32 words to ``arr[r, c:c+8]`` of a 16-bit array (float16 or uint16:
        two elements per word, the first in the low half) in one 128-bit store (16-byte
        aligned). A float32 array takes ``arr[r, c:c+4]`` (kernels only reach that in code
        that a constant :func:`~numba_gemm.ptx.bf16.c_bytes` makes dead)."""
        _check("store_words4", arr, r, c, _PAIR_TYPES)
        sig = types.void(arr, r, c, w0, w1, w2, w3)

        def codegen(context, builder, sig, args):
            aryty, rty, cty = sig.args[:3]
            i32 = ir.IntType(32)
            vty = ir.VectorType(i32, 4)
            ary, r, c = args[:3]
            vptr = _vector_pointer(context, builder, aryty, ary, rty, r, cty, c, vty)
            vec = ir.Constant(vty, ir.Undefined)
            for i, (val, valty) in enumerate(zip(args[3:], sig.args[3:], strict=True)):
                val = context.cast(builder, val, valty, types.int32)
                vec = builder.insert_element(vec, val, ir.Constant(i32, i))
            builder.store(vec, vptr, align=16)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def tile_view(typingctx, buf, offset, shape):
        """C-contiguous view of literal ``shape`` starting at ``buf[offset]`` (1D float32 or
        float16 buf)."""
        if not (
            isinstance(buf, types.Array)
            and buf.ndim == 1
            and buf.dtype in (types.float32, types.float16)
        ):
            raise TypeError(f"tile_view needs a 1D float32 or float16 array, got {buf}")
        if not isinstance(offset, types.Integer):
            raise TypeError(f"tile_view needs an integer offset, got {offset}")
        if not (
            isinstance(shape, types.BaseTuple)
            and all(isinstance(t, types.IntegerLiteral) for t in shape)
        ):
            return None  # Numba retries with literal argument types
        dims = [t.literal_value for t in shape]
        retty = types.Array(buf.dtype, len(dims), "C")
        itemsize = 2 if buf.dtype == types.float16 else 4
        sig = retty(buf, offset, shape)

        def codegen(context, builder, sig, args):
            bufty, offty, _ = sig.args
            src = context.make_array(bufty)(context, builder, value=args[0])
            off = context.cast(builder, args[1], offty, types.intp)
            data = builder.gep(src.data, [off])
            strides, stride = [], itemsize
            for n in reversed(dims):
                strides.insert(0, stride)
                stride *= n
            intp = lambda v: context.get_constant(types.intp, v)  # noqa: E731
            view = context.make_array(sig.return_type)(context, builder)
            context.populate_array(
                view,
                data=data,
                shape=[intp(n) for n in dims],
                strides=[intp(x) for x in strides],
                itemsize=intp(itemsize),
                meminfo=None,
            )
            return view._getvalue()

        return sig, codegen

    def _matrix_view(typingctx, x, b, axis):
        if not (isinstance(x, types.Array) and x.ndim == 3 and x.dtype == types.float32):
            raise TypeError(f"a batch view needs a 3-D float32 array, got {x}")
        if not isinstance(b, types.Integer):
            raise TypeError(f"a batch view needs an integer batch index, got {b}")
        retty = types.Array(types.float32, 2, "C")
        sig = retty(x, b)

        def codegen(context, builder, sig, args):
            xty, bty = sig.args
            src = context.make_array(xty)(context, builder, value=args[0])
            shape = cgutils.unpack_tuple(builder, src.shape, 3)
            strides = cgutils.unpack_tuple(builder, src.strides, 3)
            bi = context.cast(builder, args[1], bty, types.intp)
            # GEP on bytes (not int <-> pointer): NVVM keeps seeing a kernel-argument pointer and
            # still emits ld.global / cp.async from it
            raw = builder.bitcast(src.data, ir.IntType(8).as_pointer())
            data = builder.bitcast(builder.gep(raw, [builder.mul(bi, strides[0])]), src.data.type)
            pitch = strides[axis]  # bytes between consecutive storage rows
            intp = lambda v: context.get_constant(types.intp, v)  # noqa: E731
            view = context.make_array(sig.return_type)(context, builder)
            context.populate_array(
                view,
                data=data,
                shape=[shape[axis], builder.ashr(pitch, intp(2))],
                strides=[pitch, intp(4)],
                itemsize=intp(4),
                meminfo=None,
            )
            return view._getvalue()

        return sig, codegen

    @intrinsic
    def rows_view(typingctx, x, b):
        """Matrix ``b`` of a row-major batch ``x`` as a C-contiguous ``(rows, pitch)`` view."""
        return _matrix_view(typingctx, x, b, 1)

    @intrinsic
    def cols_view(typingctx, x, b):
        """Matrix ``b`` of a column-major batch ``x``, transposed: a ``(cols, pitch)`` view."""
        return _matrix_view(typingctx, x, b, 2)


__all__ = [
    "SIMULATOR",
    "SMEM_ALIGN",
    "cols_view",
    "load2",
    "load4",
    "rows_view",
    "store2",
    "store4",
    "tile_view",
]
