"""Tensor-core instructions for Numba CUDA kernels: warp-wide ``mma.sync``, ``ldmatrix``, TF32.

Numba has no WMMA or ``mma`` API. These are ``@intrinsic`` functions emitting inline PTX through
llvmlite's ``ir.InlineAsm``; they need compute capability 8.0 or higher (``compile_ptx`` with
``cc=(8, 0)`` or more). Each is executed by all 32 lanes of a warp together, every lane holding a
*fragment*: a few elements of the warp's tile, at positions fixed by the PTX ISA. With
``g = lane >> 2`` (the group, 0..7) and ``q = lane & 3`` (the thread in the group, 0..3):

``mma_tf32`` (``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``): ``D = A @ B + C``, A
16x8, B 8x8, C and D 16x8, FP32 accumulate. A lane holds

- A: ``a0 = A[g, q]``, ``a1 = A[g+8, q]``, ``a2 = A[g, q+4]``, ``a3 = A[g+8, q+4]``
  (TF32 bit patterns in int32, from :func:`to_tf32`);
- B: ``b0 = B[q, g]``, ``b1 = B[q+4, g]``;
- C and D: ``(c0, c1, c2, c3) = C[g, 2q], C[g, 2q+1], C[g+8, 2q], C[g+8, 2q+1]``.

``mma_f16`` (``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``): A 16x16, B 16x8, FP16
inputs, FP32 accumulate. A register holds two halves, the lower-indexed one in the low 16 bits:
``a0 = A[g, 2q:2q+2]``, ``a1 = A[g+8, 2q:2q+2]``, ``a2 = A[g, 2q+8:2q+10]``,
``a3 = A[g+8, 2q+8:2q+10]``; ``b0 = B[2q:2q+2, g]``, ``b1 = B[2q+8:2q+10, g]``; C and D as for TF32.

``ldmatrix_x4(arr, r, c)`` (``ldmatrix.sync.aligned.m8n8.x4.shared.b16``): four 8x8 matrices of
16-bit elements (8 rows of 16 bytes: 4 floats or 8 halves) from SMEM. Lane ``l`` gives the
address of row ``l % 8`` of matrix ``l // 8`` (``arr[r, c]``, 16-byte aligned) and receives, of
matrix ``i``, the 32-bit word ``q`` of row ``g`` as result ``i``. For a K-major (``[m, k]``) FP32
tile that is exactly the TF32 A fragment: matrices (rows 0-7, k 0-3), (rows 8-15, k 0-3),
(rows 0-7, k 4-7), (rows 8-15, k 4-7). ``ldmatrix_x2_trans`` loads two matrices transposed (16-bit
elements only): the FP16 B fragment from an N-major (``[k, n]``) tile; ``ldmatrix_x4_trans``
four, the B fragments of two neighbouring 8-column slices (lanes 16-31 address the second).

``to_tf32(x)`` (``cvt.rna.tf32.f32``): round a float32 to TF32 (10 mantissa bits, to nearest,
ties away from zero) and return its bit pattern. ``split_tf32(x)``: ``(big, small)`` with
``big = to_tf32(x)``, ``small = to_tf32(x - big)``: the 3xTF32 decomposition
(``x ~ big + small`` to about 21 mantissa bits; CUTLASS example 27,
"ampere_3xtf32_fast_accurate_tensorop_gemm"). ``round_tf32_bits(bits)`` and
``split_tf32_bits(bits)`` do the same from a float32's bit pattern (what ``ldmatrix`` returns) with
integer operations (``(bits + 0x1000) & ~0x1FFF``: the same rounding for finite values and
infinities; one integer add in SASS, as ptxas drops the mask the mma ignores, where
``cvt.rna.tf32.f32`` costs a compare and a predicated add on sm_90); ``float_bits(x)`` is the bit
pattern of a float32 (a bitcast) for them, ``bits_float(bits)`` the reverse (the float32 whose
bit pattern is the int32 ``bits``).
``pack_half2(x, y)`` packs two values as FP16 (x low), ``pack_bf16x2(x, y)`` as BF16
(``cvt.rn.bf16x2.f32``).

``quad_transpose(w0, w1, w2, w3)`` (warp-collective, 32-bit words): lane ``q`` of each group of
four lanes (a *quad*: lanes ``4g .. 4g+3``) gets word ``q`` of each of the quad's four lanes, in
lane order: ``(w_q of lane 4g, w_q of lane 4g+1, w_q of lane 4g+2, w_q of lane 4g+3)``. An mma or
wgmma D fragment spreads a row's 8 columns over a quad, two per lane; after packing each lane's
pair into a word (``pack_half2``), this transpose gives lane ``q`` all 8 columns of fragment ``q``
of four neighbouring fragments: 16 bytes, one 128-bit store (``vecmem.store_words4``). Three
``shfl.sync.bfly`` exchanges (lane ``q`` with ``q ^ 1``, ``q ^ 2``, ``q ^ 3``).

Warp-collective asm calls carry LLVM's ``convergent`` attribute, and ``ldmatrix`` is marked
side-effecting, so the compiler neither moves them across control flow nor across a
``cuda.syncthreads()``.

**On the simulator** (``NUMBA_ENABLE_CUDASIM=1``) the same names are plain-Python models of these
ownership rules: every lane publishes its fragment to its warp's slot, the block synchronizes
(all threads of a block call them together, as on the GPU the whole warp must), and each lane
assembles the tiles and takes its own elements of the result. A wrong fragment map in a kernel
gives a wrong product on the CPU. (The models sync the block, not the warp: the simulator has no
warp barrier, and a kernel whose warps made different numbers of calls would deadlock there.)

Sources: PTX ISA 8.x, "Warp-level matrix multiply-accumulate instructions: mma" (fragment
layouts of m16n8k8 .tf32 and m16n8k16 .f16), "ldmatrix", "cvt" (``.rna.tf32.f32``); CUTLASS
example 27 (3xTF32).
"""

from __future__ import annotations

import numpy as np

from ..backend import MLIR
from ..device import SIMULATOR
from . import unported_all

#: The fragment shape of each instruction: (M, N, K) of one warp-wide mma.
MMA_TF32 = (16, 8, 8)
MMA_F16 = (16, 8, 16)


# --- the plain-Python model (the simulator's versions below use it) ---------------------------


def tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32 as ``cvt.rna.tf32.f32`` does (to nearest, ties away from
    zero, on the 13 low mantissa bits), as float32. Inf and NaN pass through."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return np.where(finite, rounded, x.view(np.uint32)).view(np.float32)


def bf16_bits(v) -> np.ndarray:
    """The bfloat16 bits (uint16) of float32 ``v`` (scalar or array), rounded to nearest, ties to
    even; a NaN gives a quiet NaN of the same sign (the model of ``cvt.rn.bf16.f32``)."""
    f = np.asarray(v, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    quiet = (u >> 16) | 0x40
    return np.where(np.isnan(f), quiet, rounded).astype(np.uint16)


def bf16_value(bits) -> np.ndarray:
    """float32 values of bfloat16 ``bits`` (uint16, scalar or array): exact."""
    b = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return b.view(np.float32)


def _bits(x) -> int:
    """int32 bit pattern of a float32 scalar."""
    return int(np.float32(x).view(np.int32))


def _float(bits) -> np.float32:
    """float32 of an int32 bit pattern."""
    return np.int32(bits).view(np.float32)


_LANES = np.arange(32)
_G, _Q = _LANES >> 2, _LANES & 3
#: (rows, cols) of c0..c3 of every lane: index arrays of shape (32,) each.
_ACC = ((_G, 2 * _Q), (_G, 2 * _Q + 1), (_G + 8, 2 * _Q), (_G + 8, 2 * _Q + 1))


def _accumulators(frags: np.ndarray) -> np.ndarray:
    """C (16x8, float64) from column 6..9 of every lane's operands."""
    C = np.zeros((16, 8))
    for i, (r, c) in enumerate(_ACC):
        C[r, c] = frags[:, 6 + i].astype(np.float32)
    return C


def _scatter(D: np.ndarray) -> np.ndarray:
    """(32, 4) float32: d0..d3 of every lane from D (16x8)."""
    return np.stack([D[r, c] for r, c in _ACC], axis=1).astype(np.float32)


def _tf32_product(frags) -> np.ndarray:
    """``(32, 4)``: ``d0..d3`` of every lane for the m16n8k8 TF32 mma, from every lane's operands
    ``(a0..a3, b0, b1, c0..c3)`` (TF32 bit patterns as ints, float32 accumulators)."""
    f = np.array(frags, dtype=object)
    bits = f[:, :6].astype(np.int64).astype(np.uint32).view(np.float32).astype(np.float64)
    A = np.zeros((16, 8))
    B = np.zeros((8, 8))
    A[_G, _Q], A[_G + 8, _Q], A[_G, _Q + 4], A[_G + 8, _Q + 4] = bits[:, :4].T
    B[_Q, _G], B[_Q + 4, _G] = bits[:, 4:6].T
    return _scatter(A @ B + _accumulators(f))


def _f16_product(frags) -> np.ndarray:
    """As :func:`_tf32_product` for the m16n8k16 FP16 mma (operands: packed half2 registers)."""
    f = np.array(frags, dtype=object)
    halves = f[:, :6].astype(np.int64).astype(np.uint32).view(np.float16).astype(np.float64)
    lo, hi = halves[:, 0::2], halves[:, 1::2]  # (32, 6) each: the low and high half of a0..b1
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    c = 2 * _Q
    for reg, (r, col) in enumerate(((_G, c), (_G + 8, c), (_G, c + 8), (_G + 8, c + 8))):
        A[r, col], A[r, col + 1] = lo[:, reg], hi[:, reg]
    for reg, k in ((4, c), (5, c + 8)):
        B[k, _G], B[k + 1, _G] = lo[:, reg], hi[:, reg]
    return _scatter(A @ B + _accumulators(f))


def _ldmatrix(rows, trans: bool, count: int) -> list:
    """Per lane, the ``count`` 32-bit results of ldmatrix from the 8 rows (each 8 16-bit
    elements, as a uint16 array) of each matrix that the lanes supplied."""
    mats = [np.stack([rows[8 * i + r] for r in range(8)]) for i in range(count)]
    if trans:
        mats = [m.T.copy() for m in mats]
    out = []
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        out.append(tuple(int(m[g, 2 * q : 2 * q + 2].view(np.int32)[0]) for m in mats))
    return out


def _ldmatrix_x4(rows) -> list:
    return _ldmatrix(rows, False, 4)


def _ldmatrix_x2_trans(rows) -> list:
    return _ldmatrix(rows, True, 2)


def _ldmatrix_x4_trans(rows) -> list:
    return _ldmatrix(rows, True, 4)


if SIMULATOR:
    import threading

    from ..backend import float32, int32

    _slots_lock = threading.Lock()
    _local = threading.local()
    #: Seconds a lane waits for the rest of its warp: a kernel whose lanes do not all make the
    #: call (divergent control flow: undefined behaviour on the GPU) fails instead of hanging.
    WARP_TIMEOUT = 120.0

    def _warp_slot():
        """This thread's warp's exchange slot for the current launch, and its lane. (Plain
        Python called from a simulated kernel: the simulator's thread object holds its
        indices.)"""
        me = threading.current_thread()
        cached = getattr(_local, "slot", None)
        if cached is not None and cached[0] is me:
            return cached[1], me.thread_id % 32
        mgr = me._manager
        if int(np.prod(mgr._block_dim)) % 32:
            raise ValueError("warp-collective mma/ldmatrix need whole warps (threads % 32 == 0)")
        # The slots live on the launch's block manager, so they die with it and a launch never
        # meets the state of an earlier (perhaps aborted) one. (Keyed by ``id(mgr)`` in a module
        # dict they did not: a later launch's manager at a freed one's address found its warps'
        # finished results and returned them; seen in CI as an ldmatrix test reading garbage.)
        b = me.blockIdx
        key = (b.x, b.y, b.z, me.thread_id // 32)
        with _slots_lock:
            slots = mgr.__dict__.setdefault("_numba_gemm_warp_slots", {})
            slot = slots.get(key)
            if slot is None:
                slot = slots[key] = (
                    ([None] * 32, [None] * 32),
                    [(-1, None), (-1, None)],
                    threading.Barrier(32),
                    threading.Lock(),
                )
        _local.slot, _local.calls = (me, slot), 0
        return slot, me.thread_id % 32

    def _warp_op(value, op):
        """Publish this lane's ``value`` to its warp; once all 32 have, return this lane's entry
        of ``op(values)`` (32 results, one per lane; computed once per warp and call).

        The 32 lanes (threads of the simulator) meet at a barrier of their own, not the
        block's (whose polling costs ~0.1 s per call). The slot has two buffers used by
        alternate calls, so a lane that runs ahead into the next call cannot overwrite a value
        another lane has yet to read (two calls ahead needs the next barrier, which waits for
        everyone)."""
        (bufs, results, barrier, lock), lane = _warp_slot()
        n = _local.calls
        _local.calls += 1
        bufs[n % 2][lane] = value
        barrier.wait(WARP_TIMEOUT)  # every lane has published
        with lock:  # the first lane here computes the warp's results, the others take theirs
            done = results[n % 2]
            if done[0] != n:
                done = results[n % 2] = (n, op(bufs[n % 2]))
        return done[1][lane]

    def to_tf32(x):
        """Simulator model of :func:`to_tf32`: the TF32 bit pattern as int32."""
        return int32(_bits(tf32_round(np.float32(x))))

    def split_tf32(x):
        """Simulator model of :func:`split_tf32`."""
        big = tf32_round(np.float32(x))
        small = tf32_round(np.float32(x) - big)
        return int32(_bits(big)), int32(_bits(small))

    def float_bits(x):
        """Simulator model of :func:`float_bits`."""
        return int32(_bits(np.float32(x)))

    def bits_float(bits):
        """Simulator model of :func:`bits_float`."""
        return _float(np.int64(bits).astype(np.int32))

    def round_tf32_bits(bits):
        """Simulator model of :func:`round_tf32_bits`."""
        return int32(_bits(tf32_round(_float(bits))))

    def split_tf32_bits(bits):
        """Simulator model of :func:`split_tf32_bits`."""
        return split_tf32(_float(bits))

    def pack_half2(x, y):
        """Simulator model of :func:`pack_half2`: FP16 of x in the low half, y in the high."""
        return int32(np.array([x, y], dtype=np.float16).view(np.int32)[0])

    def pack_bf16x2(x, y):
        """Simulator model of :func:`pack_bf16x2`: BF16 of x in the low half, y in the high."""
        return int32(bf16_bits(np.array([x, y], dtype=np.float32)).view(np.int32)[0])

    def _quad_transpose(words):
        return [tuple(words[(lane & ~3) + p][lane & 3] for p in range(4)) for lane in range(32)]

    def quad_transpose(w0, w1, w2, w3):
        """Simulator model of :func:`quad_transpose` (warp-collective)."""
        return tuple(int32(v) for v in _warp_op((w0, w1, w2, w3), _quad_transpose))

    def mma_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        """Simulator model of :func:`mma_tf32` (warp-collective)."""
        d = _warp_op((a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _tf32_product)
        return float32(d[0]), float32(d[1]), float32(d[2]), float32(d[3])

    def mma_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        """Simulator model of :func:`mma_f16` (warp-collective)."""
        d = _warp_op((a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _f16_product)
        return float32(d[0]), float32(d[1]), float32(d[2]), float32(d[3])

    def _row16(arr, r, c):
        """The 16 bytes at ``arr[r, c]`` as eight uint16 (bounds- and alignment-checked)."""
        n = 16 // arr.itemsize
        if not (0 <= r < arr.shape[0] and 0 <= c and c + n <= arr.shape[1]):
            raise IndexError(f"ldmatrix row [{r}, {c}:{c + n}] outside {arr.shape}")
        if c % n:
            raise ValueError(f"ldmatrix row address [{r}, {c}] is not 16-byte aligned")
        return np.ascontiguousarray(arr[r, c : c + n]).view(np.uint16)

    def ldmatrix_x4(arr, r, c):
        """Simulator model of :func:`ldmatrix_x4` (warp-collective)."""
        return tuple(int32(v) for v in _warp_op(_row16(arr, r, c), _ldmatrix_x4))

    def ldmatrix_x2_trans(arr, r, c):
        """Simulator model of :func:`ldmatrix_x2_trans` (warp-collective; lanes 0-15 supply
        addresses, the others' are ignored as on the GPU, but must still be in bounds)."""
        return tuple(int32(v) for v in _warp_op(_row16(arr, r, c), _ldmatrix_x2_trans))

    def ldmatrix_x4_trans(arr, r, c):
        """Simulator model of :func:`ldmatrix_x4_trans` (warp-collective)."""
        return tuple(int32(v) for v in _warp_op(_row16(arr, r, c), _ldmatrix_x4_trans))

elif MLIR:  # not ported to numba-cuda-mlir yet (docs/numba-cuda-mlir.md)
    globals().update(
        unported_all(
            "mma",
            "to_tf32 split_tf32 float_bits bits_float round_tf32_bits "
            "split_tf32_bits pack_half2 pack_bf16x2 quad_transpose mma_tf32 mma_f16 "
            "ldmatrix_x4 ldmatrix_x2_trans ldmatrix_x4_trans",
        )
    )

else:
    from llvmlite import ir
    from numba.cuda import cgutils

    from ..backend import cuda, intrinsic, types

    _I32 = ir.IntType(32)
    _F32 = ir.FloatType()

    def _i32(context, builder, val, ty):
        return context.cast(builder, val, ty, types.int32)

    def _f32(context, builder, val, ty):
        return context.cast(builder, val, ty, types.float32)

    def _cvt_tf32(builder, x):
        asm = ir.InlineAsm(ir.FunctionType(_I32, [_F32]), "cvt.rna.tf32.f32 $0, $1;", "=r,f")
        return builder.call(asm, [x])

    def _numbers(*tys):
        return all(isinstance(t, (types.Integer, types.Float)) for t in tys)

    @intrinsic
    def to_tf32(typingctx, x):
        """``cvt.rna.tf32.f32``: TF32 bit pattern (int32) of float32 ``x``."""
        if not _numbers(x):
            return None
        sig = types.int32(x)

        def codegen(context, builder, sig, args):
            return _cvt_tf32(builder, _f32(context, builder, args[0], sig.args[0]))

        return sig, codegen

    @intrinsic
    def split_tf32(typingctx, x):
        """``(big, small)`` TF32 bit patterns: ``big = tf32(x)``, ``small = tf32(x - big)``."""
        if not _numbers(x):
            return None
        sig = types.UniTuple(types.int32, 2)(x)

        def codegen(context, builder, sig, args):
            xf = _f32(context, builder, args[0], sig.args[0])
            big = _cvt_tf32(builder, xf)
            small = _cvt_tf32(builder, builder.fsub(xf, builder.bitcast(big, _F32)))
            return context.make_tuple(builder, sig.return_type, [big, small])

        return sig, codegen

    @intrinsic
    def float_bits(typingctx, x):
        """The bit pattern of float32 ``x`` as int32 (a bitcast: no instruction)."""
        if not _numbers(x):
            return None
        sig = types.int32(x)

        def codegen(context, builder, sig, args):
            return builder.bitcast(_f32(context, builder, args[0], sig.args[0]), _I32)

        return sig, codegen

    @intrinsic
    def bits_float(typingctx, bits):
        """The float32 whose bit pattern is int32 ``bits`` (a bitcast: no instruction)."""
        if not isinstance(bits, types.Integer):
            return None
        sig = types.float32(bits)

        def codegen(context, builder, sig, args):
            return builder.bitcast(_i32(context, builder, args[0], sig.args[0]), _F32)

        return sig, codegen

    def _round_bits(builder, bits):
        up = builder.add(bits, ir.Constant(_I32, 0x1000))
        return builder.and_(up, ir.Constant(_I32, -0x2000))

    @intrinsic
    def round_tf32_bits(typingctx, bits):
        """``(bits + 0x1000) & ~0x1FFF``: TF32 rounding (to nearest, ties away) of the float32
        whose bit pattern is ``bits``."""
        if not isinstance(bits, types.Integer):
            return None
        sig = types.int32(bits)

        def codegen(context, builder, sig, args):
            return _round_bits(builder, _i32(context, builder, args[0], sig.args[0]))

        return sig, codegen

    @intrinsic
    def split_tf32_bits(typingctx, bits):
        """``(big, small)`` of the float32 whose bit pattern is ``bits`` (see module)."""
        if not isinstance(bits, types.Integer):
            return None
        sig = types.UniTuple(types.int32, 2)(bits)

        def codegen(context, builder, sig, args):
            x = _i32(context, builder, args[0], sig.args[0])
            big = _round_bits(builder, x)
            rest = builder.fsub(builder.bitcast(x, _F32), builder.bitcast(big, _F32))
            small = _round_bits(builder, builder.bitcast(rest, _I32))
            return context.make_tuple(builder, sig.return_type, [big, small])

        return sig, codegen

    def _pack2(cvt):
        """An intrinsic ``(x, y) -> int32``: ``cvt`` (``cvt.rn.f16x2.f32``, ...) of ``x`` into
        the low 16 bits and ``y`` into the high ones."""

        def typer(typingctx, x, y):
            if not _numbers(x, y):
                return None
            sig = types.int32(x, y)

            def codegen(context, builder, sig, args):
                lo = _f32(context, builder, args[0], sig.args[0])
                hi = _f32(context, builder, args[1], sig.args[1])
                asm = ir.InlineAsm(
                    ir.FunctionType(_I32, [_F32, _F32]), cvt + " $0, $1, $2;", "=r,f,f"
                )
                return builder.call(asm, [hi, lo])  # the first source goes to the upper half

            return sig, codegen

        return typer

    @intrinsic
    def pack_half2(typingctx, x, y):
        """``cvt.rn.f16x2.f32``: FP16 of ``x`` (low 16 bits) and ``y`` (high) in one int32."""
        return _pack2("cvt.rn.f16x2.f32")(typingctx, x, y)

    @intrinsic
    def pack_bf16x2(typingctx, x, y):
        """``cvt.rn.bf16x2.f32``: BF16 of ``x`` (low 16 bits) and ``y`` (high) in one int32
        (to nearest even)."""
        return _pack2("cvt.rn.bf16x2.f32")(typingctx, x, y)

    @cuda.jit(device=True, forceinline=True)
    def _pick(i, w0, w1, w2, w3):
        if i == 0:
            return w0
        if i == 1:
            return w1
        if i == 2:
            return w2
        return w3

    @cuda.jit(device=True, forceinline=True)
    def quad_transpose(w0, w1, w2, w3):
        """Lane ``q`` of each quad gets word ``q`` of the quad's four lanes, in lane order (see
        the module): three butterfly shuffles, each lane sending the word its partner needs."""
        q = cuda.laneid & 3
        mine = _pick(q, w0, w1, w2, w3)  # slot q: this lane's own word q; the others are
        o0 = o1 = o2 = o3 = mine  # each overwritten by exactly one exchange below
        for k in (1, 2, 3):
            p = q ^ k  # the partner: it needs this lane's word p, this lane needs its word q
            got = cuda.shfl_xor_sync(0xFFFFFFFF, _pick(p, w0, w1, w2, w3), k)
            o0 = got if p == 0 else o0
            o1 = got if p == 1 else o1
            o2 = got if p == 2 else o2
            o3 = got if p == 3 else o3
        return o0, o1, o2, o3

    def _mma(shape_ptx):
        """An intrinsic ``(a0..a3, b0, b1, c0..c3) -> UniTuple(float32, 4)`` for one mma."""

        def typer(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
            args = (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)
            if not _numbers(*args):
                return None
            sig = types.UniTuple(types.float32, 4)(*args)

            def codegen(context, builder, sig, args):
                ints = [
                    _i32(context, builder, v, t)
                    for v, t in zip(args[:6], sig.args[:6], strict=True)
                ]
                floats = [
                    _f32(context, builder, v, t)
                    for v, t in zip(args[6:], sig.args[6:], strict=True)
                ]
                ret = ir.LiteralStructType([_F32] * 4)
                asm = ir.InlineAsm(
                    ir.FunctionType(ret, [_I32] * 6 + [_F32] * 4),
                    f"mma.sync.aligned.{shape_ptx} {{$0,$1,$2,$3}}, {{$4,$5,$6,$7}}, "
                    "{$8,$9}, {$10,$11,$12,$13};",
                    "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f",
                )
                res = builder.call(asm, ints + floats, attrs=("convergent",))
                vals = [builder.extract_value(res, i) for i in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return typer

    mma_tf32 = intrinsic(_mma("m16n8k8.row.col.f32.tf32.tf32.f32"))
    mma_tf32.__doc__ = "``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` (see module)."
    mma_f16 = intrinsic(_mma("m16n8k16.row.col.f32.f16.f16.f32"))
    mma_f16.__doc__ = "``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (see module)."

    def _shared_address(context, builder, aryty, ary, rty, r, cty, c):
        ary = context.make_array(aryty)(context, builder, value=ary)
        idx = [context.cast(builder, r, rty, types.intp), context.cast(builder, c, cty, types.intp)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        shared = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, 3))
        return builder.ptrtoint(shared, _I32)

    def _ldmatrix(count, trans):
        suffix = ".trans" if trans else ""
        regs = ",".join(f"${i}" for i in range(count))

        def typer(typingctx, arr, r, c):
            if not (
                isinstance(arr, types.Array)
                and arr.ndim == 2
                and arr.dtype in (types.float32, types.float16)
            ):
                raise TypeError(f"ldmatrix needs a 2-D float32 or float16 SMEM array, got {arr}")
            if trans and arr.dtype != types.float16:
                raise TypeError("ldmatrix .trans moves 16-bit elements: use a float16 array")
            sig = types.UniTuple(types.int32, count)(arr, r, c)

            def codegen(context, builder, sig, args):
                addr = _shared_address(
                    context,
                    builder,
                    sig.args[0],
                    args[0],
                    sig.args[1],
                    args[1],
                    sig.args[2],
                    args[2],
                )
                ret = ir.LiteralStructType([_I32] * count)
                asm = ir.InlineAsm(
                    ir.FunctionType(ret, [_I32]),
                    f"ldmatrix.sync.aligned.m8n8.x{count}{suffix}.shared.b16 {{{regs}}}, "
                    f"[${count}];",
                    ",".join(["=r"] * count) + ",r,~{memory}",
                    side_effect=True,
                )
                res = builder.call(asm, [addr], attrs=("convergent",))
                vals = [builder.extract_value(res, i) for i in range(count)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return typer

    ldmatrix_x4 = intrinsic(_ldmatrix(4, False))
    ldmatrix_x4.__doc__ = "``ldmatrix.sync.aligned.m8n8.x4.shared.b16`` (see module)."
    ldmatrix_x2_trans = intrinsic(_ldmatrix(2, True))
    ldmatrix_x2_trans.__doc__ = "``ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16`` (see module)."
    ldmatrix_x4_trans = intrinsic(_ldmatrix(4, True))
    ldmatrix_x4_trans.__doc__ = "``ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`` (see module)."


__all__ = [
    "MMA_F16",
    "MMA_TF32",
    "bf16_bits",
    "bf16_value",
    "bits_float",
    "float_bits",
    "ldmatrix_x2_trans",
    "ldmatrix_x4",
    "ldmatrix_x4_trans",
    "mma_f16",
    "mma_tf32",
    "pack_bf16x2",
    "pack_half2",
    "quad_transpose",
    "round_tf32_bits",
    "split_tf32",
    "split_tf32_bits",
    "tf32_round",
    "to_tf32",
]
