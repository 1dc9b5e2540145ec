"""Hopper warpgroup tensor-core instructions (``wgmma.mma_async``, sm_90a) for Numba CUDA kernels.

``mma.sync`` (``numba_gemm.ptx.mma``) is a warp's instruction, fed from registers; on Hopper it
reaches about 61 % of the dense tensor peak (303 TFLOP/s TF32, 617 FP16 on an H200, measured
from registers only). ``wgmma.mma_async`` is the instruction Hopper was built around: the four
warps of a *warpgroup* (128 consecutive threads, the first a multiple of 128) issue together one
``64 x N x K`` product (N = 8 .. 256) whose operands the tensor cores read **straight from SMEM**
(A may instead come from registers), asynchronously: the warps go on (issuing more products,
copying the next tiles) until they wait for the group. This module gives Numba kernels:

- ``smem_desc(arr, r, c, lbo, sbo)``: the 64-bit *matrix descriptor* of an SMEM operand starting
  at ``arr[r, c]`` (2-D SMEM array, 16-byte aligned element), in the no-swizzle ("interleave")
  layout: the operand is a grid of *core matrices*, each 8 rows of 16 contiguous bytes (128
  bytes in a row); ``lbo`` (leading byte offset) is the distance in bytes between core matrices
  neighbouring along K, ``sbo`` (stride byte offset) between neighbours along M (or N). Within a
  core matrix, a K-major operand has K along the 16 bytes and M (N) along the 8 rows; an MN-major
  one (``trans_b``: FP16 only) the reverse. Bits: start address >> 4 in 0-13, ``lbo >> 4`` in
  16-29, ``sbo >> 4`` in 32-45, swizzle mode 0 in 62-63. Adding ``bytes >> 4`` to a descriptor
  moves its start (the kernels step along K this way). ORing in :data:`SWIZZLE_128B` selects
  the 128-byte swizzle instead: the operand is rows of 128 bytes whose 16-byte chunks are
  permuted by XOR with the row's index in its 8-row (1024-byte, 1024-aligned) atom, ``sbo``
  between 8-row groups, and for an MN-major operand ``lbo`` between 128-byte column blocks (see
  :func:`operand_offsets`). A warp's 16-byte copies of whole 128-byte rows then land in 32
  different banks, and its GMEM reads are whole 128-byte lines.
- ``mma_f16(acc, n, As, da, Bs, db, scale_d, trans_b)``: ``wgmma.mma_async.sync.aligned
  .m64n{n}k16.f32.f16.f16``: ``acc[0 : n // 2] (+)= A @ B`` with A 64x16 (K-major, descriptor
  ``da``), B 16 x n (descriptor ``db``; ``trans_b = 1``: MN-major, as a row-major B tile lies).
- ``mma_bf16(...)``: the same for bfloat16 operands (``.f32.bf16.bf16``).
- ``mma_tf32(acc, n, As, da, Bs, db, scale_d)``: ``.m64n{n}k8.f32.tf32.tf32`` with both operands
  from SMEM, both K-major (``x @ W.T``: A and W both hold K along their rows).
- ``mma_tf32_rs(acc, n, a0, a1, a2, a3, Bs, db, scale_d)``: ``.m64n{n}k8.f32.tf32.tf32`` with A
  from registers: each warp ``w`` of the group holds rows ``16 w .. 16 w + 15`` of A in the
  ``mma.m16n8k8`` TF32 fragment (``a0 = A[g, q]``, ``a1 = A[g+8, q]``, ``a2 = A[g, q+4]``,
  ``a3 = A[g+8, q+4]`` relative to the warp's rows, TF32 bit patterns); B 8 x n, K-major (TF32
  operands must be K-major in SMEM).
- ``fence()``, ``commit()``, ``wait(n, acc, width)``: ``wgmma.fence`` (before the first product
  that reads registers written since), ``wgmma.commit_group``, ``wgmma.wait_group n`` (at most
  ``n`` groups of this warpgroup still running). ``wait`` passes the accumulators of an N =
  ``width`` product through the instruction, so no read of them moves above the wait.
- ``fence_proxy_async()``: ``fence.proxy.async.shared::cta``: SMEM written by this thread's
  ordinary stores or ``cp.async`` becomes visible to the tensor cores' (async proxy) reads; each
  thread fences after its copies land, before the barrier that precedes the products.

Accumulators: with ``g = lane >> 2``, ``q = lane & 3`` and ``w`` the warp in the group,
``acc[4 i + 0], acc[4 i + 1], acc[4 i + 2], acc[4 i + 3]`` are ``D[16 w + g, 8 i + 2 q]``,
``D[16 w + g, 8 i + 2 q + 1]``, ``D[16 w + g + 8, 8 i + 2 q]``, ``D[16 w + g + 8, 8 i + 2 q + 1]``
(the ``mma.m16n8`` accumulator fragment, once per 8 columns). ``scale_d = 0``: ``acc = A @ B``
(the old values are ignored); else ``acc += A @ B``. The tensor cores read TF32 operands from
SMEM by truncating the low 13 mantissa bits of a float32.

These need an ``sm_90a`` compile: numba-cuda targets ``compute_90a`` on a 9.0 device; offline,
``compile_ptx(..., cc=(9, 0, "a"))``. They are not available on other architectures (not on
sm_100 either).

**On the simulator** (``NUMBA_ENABLE_CUDASIM=1``) ``smem_desc`` encodes the byte offset of
``arr[r, c]`` from ``arr[0, 0]`` as the start address, and the products are plain-Python models
that decode the descriptors exactly as above (start, ``lbo``, ``sbo``, core matrices, K- or
MN-major) to read the operands from the arrays passed with them, then update each thread's own
accumulators by the ownership rule above; the register A operand is exchanged between the lanes
of each warp (``numba_gemm.ptx.mma``'s warp exchange). Fences and commits do nothing (the
products are synchronous there); ``wait`` is a barrier of the warpgroup's 128 threads (each
computed its own share: past the wait, all of them have). A wrong layout, descriptor or
fragment map fails on the CPU.

Sources: PTX ISA 8.x, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"
(``wgmma.mma_async``, the matrix descriptor, shared memory matrix layouts, the register
fragments of D and A), "fence.proxy.async"; NVIDIA CUTLASS/CuTe ``GmmaDescriptor`` and
``make_gmma_desc`` (canonical no-swizzle layouts).
"""

from __future__ import annotations

import numpy as np

from ..backend import MLIR
from ..device import SIMULATOR
from . import unported_all

#: The instruction shapes: (M, K) of one warpgroup product per input type; N is 8..256 by 8.
WGMMA_F16 = (64, 16)
WGMMA_TF32 = (64, 8)
#: Threads of a warpgroup.
WARPGROUP = 128
#: Bytes of one core-matrix row, and rows per core matrix.
CORE_BYTES, CORE_ROWS = 16, 8
#: The N of a product: 8 .. 256, multiples of 8.
N_VALUES = tuple(range(8, 257, 8))


#: Descriptor bits 62-63 for the 128-byte swizzle (OR them into :func:`smem_desc`'s result).
SWIZZLE_128B = 1 << 62
#: Bytes of one row of a 128-byte-swizzled operand, and of one 8-row swizzle atom.
SW_ROW, SW_ATOM = 128, 1024


def encode_desc(start: int, lbo: int, sbo: int, swizzle: int = 0) -> int:
    """The matrix descriptor (int) for a start byte address, the two offsets and the swizzle
    (0: none, 128: the 128-byte swizzle).

    Raises:
        ValueError: an address or offset that is negative, not a multiple of 16 bytes, or too
            large for its 14-bit field (``>= 2**18`` bytes); a swizzle other than 0 or 128.
    """
    for name, v in (("start address", start), ("lbo", lbo), ("sbo", sbo)):
        if v < 0 or v % 16 or v >> 4 >= 1 << 14:
            raise ValueError(f"wgmma descriptor {name} {v}: need a multiple of 16 below 2**18")
    if swizzle not in (0, 128):
        raise ValueError(f"wgmma descriptor swizzle {swizzle}: 0 or 128 (bytes)")
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | (SWIZZLE_128B if swizzle else 0)


def decode_desc(desc: int) -> tuple[int, int, int, int]:
    """``(start, lbo, sbo, swizzle)`` (bytes; swizzle 0 or 128) of a descriptor.

    Raises:
        ValueError: a 64- or 32-byte swizzle, or a base offset (bits 49-51): not modelled.
    """
    desc = int(desc) & (1 << 64) - 1
    mode = desc >> 62
    if mode not in (0, 1) or (desc >> 49) & 7:
        raise ValueError(
            f"wgmma descriptor {desc:#x}: only no swizzle and the 128-byte "
            "swizzle (base offset 0) are modelled"
        )
    field = lambda shift: ((desc >> shift) & 0x3FFF) << 4  # noqa: E731
    return field(0), field(16), field(32), 128 * mode


def swizzle_128b(byte):
    """The 128-byte swizzle of a byte address: its 16-byte chunk within each 128-byte row is
    XORed with the row's index within its 1024-byte atom (bits 4-6 ^= bits 7-9)."""
    return byte ^ (((byte >> 7) & 7) << 4)


def operand_offsets(desc: int, rows: int, k: int, itemsize: int, mn_major: bool) -> np.ndarray:
    """Byte offsets ``(rows, k)`` of an operand's elements (row = M or N index) that a product
    reads through descriptor ``desc``.

    No swizzle: core matrices of 8 x 16 bytes, ``lbo`` between neighbours along K, ``sbo`` along
    M/N; K-major: K along each core row's 16 bytes, MN-major: M/N along them and K along the 8
    rows. 128-byte swizzle: rows of 128 bytes, ``sbo`` between 8-row groups; K-major: one row
    per M/N index, K along it (``lbo`` unused); MN-major: one row per K index holding 128 bytes
    of M/N, ``lbo`` between such 128-byte column blocks; then :func:`swizzle_128b`."""
    start, lbo, sbo, swizzle = decode_desc(desc)
    r = np.arange(rows)[:, None]
    kk = np.arange(k)[None, :]
    if swizzle:
        w = SW_ROW // itemsize  # elements per 128-byte row
        if mn_major:
            off = (
                start
                + (r % w) * itemsize
                + (r // w) * lbo
                + (kk % CORE_ROWS) * SW_ROW
                + (kk // CORE_ROWS) * sbo
            )
        else:
            off = start + (r // CORE_ROWS) * sbo + (r % CORE_ROWS) * SW_ROW + kk * itemsize
        return swizzle_128b(off)
    t = CORE_BYTES // itemsize  # elements per 16 bytes
    if mn_major:
        return (
            start
            + (r // t) * sbo
            + (r % t) * itemsize
            + (kk // CORE_ROWS) * lbo
            + (kk % CORE_ROWS) * CORE_BYTES
        )
    return (
        start
        + (r // CORE_ROWS) * sbo
        + (r % CORE_ROWS) * CORE_BYTES
        + (kk // t) * lbo
        + (kk % t) * itemsize
    )


def read_operand(
    arr: np.ndarray,
    desc: int,
    rows: int,
    k: int,
    mn_major: bool = False,
    tf32: bool = False,
    bf16: bool = False,
) -> np.ndarray:
    """The ``(rows, k)`` operand (float64) the tensor cores read from ``arr`` (the array whose
    element ``[0, 0]`` is address 0 of ``desc``); ``tf32``: float32 truncated to TF32;
    ``bf16``: the 16-bit elements are bfloat16 bit patterns (whatever ``arr``'s dtype).

    Raises:
        IndexError: the descriptor reaches outside ``arr``.
    """
    flat = np.ascontiguousarray(arr).reshape(-1)
    off = operand_offsets(desc, rows, k, flat.itemsize, mn_major)
    if off.min() < 0 or off.max() + flat.itemsize > flat.nbytes:
        raise IndexError(
            f"wgmma operand bytes {off.min()}..{off.max()} outside an SMEM array "
            f"of {flat.nbytes} bytes"
        )
    vals = flat[off // flat.itemsize]
    if bf16:
        return bf16_to_float(vals.view(np.uint16)).astype(np.float64)
    if tf32:
        vals = (vals.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return vals.astype(np.float64)


def bf16_to_float(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (uint16): the high half of a float32."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def owned(warp: int, lane: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of D (64 x n) that ``acc[0 : n // 2]`` of lane ``lane`` of warp ``warp``
    (0..3 in its warpgroup) hold, in ``acc`` order."""
    g, q = lane >> 2, lane & 3
    i = np.arange(n // 8)
    rows = np.stack(
        [
            np.full_like(i, 16 * warp + g),
            np.full_like(i, 16 * warp + g),
            np.full_like(i, 16 * warp + g + 8),
            np.full_like(i, 16 * warp + g + 8),
        ],
        1,
    )
    cols = np.stack([8 * i + 2 * q, 8 * i + 2 * q + 1, 8 * i + 2 * q, 8 * i + 2 * q + 1], 1)
    return rows.reshape(-1), cols.reshape(-1)


def _check_n(n) -> int:
    if n not in N_VALUES:
        raise ValueError(f"wgmma N must be a multiple of 8 in 8..256, got {n}")
    return int(n)


if SIMULATOR:
    import threading

    from ..backend import float32, int64
    from .mma import _warp_op

    def _me():
        """(warp in its warpgroup, lane) of the calling simulated thread."""
        me = threading.current_thread()
        if (me.thread_id // WARPGROUP + 1) * WARPGROUP > int(np.prod(me._manager._block_dim)):
            raise ValueError(
                "wgmma needs a whole warpgroup: 128 threads from a multiple of 128 (thread "
                f"{me.thread_id} is in a partial one)"
            )
        return (me.thread_id // 32) % 4, me.thread_id % 32

    def _update(acc, n, D, scale_d):
        warp, lane = _me()
        rows, cols = owned(warp, lane, n)
        vals = D[rows, cols]
        for j in range(n // 2):
            acc[j] = float32(vals[j] + (float(acc[j]) if scale_d else 0.0))

    def smem_desc(arr, r, c, lbo, sbo):
        """Simulator model of :func:`smem_desc`: the start is ``arr[r, c]``'s byte offset from
        ``arr[0, 0]``."""
        if not (0 <= r < arr.shape[0] and 0 <= c < arr.shape[1]):
            raise IndexError(f"smem_desc element [{r}, {c}] outside {arr.shape}")
        return int64(encode_desc((r * arr.shape[1] + c) * arr.itemsize, lbo, sbo))

    def fence():
        """Simulator path: the products are synchronous."""

    def commit():
        """Simulator path: nothing to group."""

    #: Seconds a thread waits for the rest of its warpgroup in :func:`wait`.
    GROUP_TIMEOUT = 120.0
    _groups_lock = threading.Lock()

    def wait(n, acc, width):
        """Simulator model of :func:`wait`: the products were synchronous, but each thread
        computed its own, so the warpgroup's threads meet here: past the wait, every product
        of the group has read its operands (what a warp-specialized kernel's release of a
        buffer relies on; ``.sync.aligned``: all 128 threads execute it)."""
        me = threading.current_thread()
        b = me.blockIdx
        key = (b.x, b.y, b.z, me.thread_id // WARPGROUP)
        with _groups_lock:
            groups = me._manager.__dict__.setdefault("_numba_gemm_warpgroups", {})
            barrier = groups.get(key)
            if barrier is None:
                barrier = groups[key] = threading.Barrier(WARPGROUP)
        barrier.wait(GROUP_TIMEOUT)

    def fence_proxy_async():
        """Simulator path: one memory."""

    def mma_f16(acc, n, As, da, Bs, db, scale_d, trans_b):
        """Simulator model of :func:`mma_f16` (per thread: its own accumulators)."""
        n = _check_n(n)
        A = read_operand(As, da, 64, 16)
        B = read_operand(Bs, db, n, 16, mn_major=bool(trans_b))  # (n, k)
        _update(acc, n, A @ B.T, scale_d)

    def mma_bf16(acc, n, As, da, Bs, db, scale_d, trans_b):
        """Simulator model of :func:`mma_bf16` (operand bits read as bfloat16)."""
        n = _check_n(n)
        A = read_operand(As, da, 64, 16, bf16=True)
        B = read_operand(Bs, db, n, 16, mn_major=bool(trans_b), bf16=True)
        _update(acc, n, A @ B.T, scale_d)

    def mma_tf32(acc, n, As, da, Bs, db, scale_d):
        """Simulator model of :func:`mma_tf32` (both operands K-major, truncated to TF32)."""
        n = _check_n(n)
        A = read_operand(As, da, 64, 8, tf32=True)
        B = read_operand(Bs, db, n, 8, tf32=True)
        _update(acc, n, A @ B.T, scale_d)

    def _rs_product(n, B):
        def op(frags):
            bits = np.array([f[:4] for f in frags], dtype=np.int64).astype(np.uint32)
            vals = (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
            lanes = np.arange(32)
            g, q = lanes >> 2, lanes & 3
            A = np.zeros((16, 8))
            A[g, q], A[g + 8, q], A[g, q + 4], A[g + 8, q + 4] = vals.T
            D = A @ B.T  # this warp's 16 rows
            return [D] * 32

        return op

    def mma_tf32_rs(acc, n, a0, a1, a2, a3, Bs, db, scale_d):
        """Simulator model of :func:`mma_tf32_rs` (A exchanged among each warp's lanes)."""
        n = _check_n(n)
        B = read_operand(Bs, db, n, 8, tf32=True)  # (n, k), K-major
        D16 = _warp_op((int(a0), int(a1), int(a2), int(a3)), _rs_product(n, B))
        warp, lane = _me()
        D = np.zeros((64, n))
        D[16 * warp : 16 * warp + 16] = D16
        _update(acc, n, D, scale_d)

elif MLIR:  # not ported to numba-cuda-mlir yet (docs/numba-cuda-mlir.md)
    globals().update(
        unported_all(
            "wgmma",
            "smem_desc fence commit wait fence_proxy_async mma_f16 mma_bf16 mma_tf32 mma_tf32_rs",
        )
    )

else:
    from llvmlite import ir
    from numba.cuda import cgutils

    from ..backend import intrinsic, types
    from .mma import _shared_address

    _I32, _I64, _F32 = ir.IntType(32), ir.IntType(64), ir.FloatType()

    def _void_asm(builder, text, clobber=""):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, clobber, side_effect=True)
        builder.call(asm, [], attrs=("convergent",))

    def _fixed(name, text, clobber=""):
        def typer(typingctx):
            def codegen(context, builder, sig, args):
                _void_asm(builder, text, clobber)
                return context.get_dummy_value()

            return types.void(), codegen

        fn = intrinsic(typer)
        fn.__doc__ = f"``{text}`` (see module)."
        fn.__name__ = name
        return fn

    fence = _fixed("fence", "wgmma.fence.sync.aligned;", "~{memory}")
    commit = _fixed("commit", "wgmma.commit_group.sync.aligned;", "~{memory}")
    fence_proxy_async = _fixed("fence_proxy_async", "fence.proxy.async.shared::cta;", "~{memory}")

    def _acc_pointers(context, builder, aryty, ary, count):
        data = context.make_array(aryty)(context, builder, value=ary).data
        return [cgutils.gep_inbounds(builder, data, i) for i in range(count)]

    def _is_acc(acc):
        return isinstance(acc, types.Array) and acc.ndim == 1 and acc.dtype == types.float32

    @intrinsic
    def wait(typingctx, n, acc, width):
        """``wgmma.wait_group.sync.aligned n`` (literal n); ``acc[0 : width // 2]`` (the
        accumulators of an N = ``width`` product, a literal) pass through the instruction, so no
        read of them moves above the wait."""
        if not (isinstance(n, types.IntegerLiteral) and isinstance(width, types.IntegerLiteral)):
            return None
        if not _is_acc(acc):
            raise TypeError(f"wgmma wait needs the 1-D float32 accumulator array, got {acc}")
        count, k = n.literal_value, _check_n(width.literal_value) // 2
        sig = types.void(n, acc, width)

        def codegen(context, builder, sig, args):
            ptrs = _acc_pointers(context, builder, sig.args[1], args[1], k)
            vals = [builder.load(p) for p in ptrs]
            asm = ir.InlineAsm(
                ir.FunctionType(ir.LiteralStructType([_F32] * k), [_F32] * k),
                f"wgmma.wait_group.sync.aligned {count};",
                ",".join(["=f"] * k + [str(i) for i in range(k)]) + ",~{memory}",
                side_effect=True,
            )
            res = builder.call(asm, vals, attrs=("convergent",))
            for i, p in enumerate(ptrs):
                builder.store(builder.extract_value(res, i), p)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def smem_desc(typingctx, arr, r, c, lbo, sbo):
        """No-swizzle matrix descriptor (int64) of the operand starting at SMEM ``arr[r, c]``,
        ``lbo``/``sbo`` in bytes (see module)."""
        if not (
            isinstance(arr, types.Array)
            and arr.ndim == 2
            and arr.dtype in (types.float32, types.float16)
        ):
            raise TypeError(f"smem_desc needs a 2-D float32 or float16 SMEM array, got {arr}")
        if not all(isinstance(t, types.Integer) for t in (r, c, lbo, sbo)):
            raise TypeError("smem_desc needs integer r, c, lbo, sbo")
        sig = types.int64(arr, r, c, lbo, sbo)

        def codegen(context, builder, sig, args):
            addr = _shared_address(
                context, builder, sig.args[0], args[0], sig.args[1], args[1], sig.args[2], args[2]
            )
            mask = ir.Constant(_I64, 0x3FFF)
            field = lambda v, shift: builder.shl(  # noqa: E731
                builder.and_(builder.lshr(v, ir.Constant(_I64, 4)), mask), ir.Constant(_I64, shift)
            )
            start = field(builder.zext(addr, _I64), 0)
            lo = field(context.cast(builder, args[3], sig.args[3], types.int64), 16)
            so = field(context.cast(builder, args[4], sig.args[4], types.int64), 32)
            return builder.or_(builder.or_(start, lo), so)

        return sig, codegen

    def _product(context, builder, acc_ty, acc, n, operands, op_types, instruction, scale):
        """Emit one wgmma: ``acc[0 : n // 2]`` in and out, then ``operands`` (already in
        registers, with their LLVM types and constraint letters), then scale-d;
        ``instruction(d, ops)`` is the PTX given the accumulator list and operand names."""
        k = n // 2
        ptrs = _acc_pointers(context, builder, acc_ty, acc, k)
        vals = [builder.load(p) for p in ptrs]
        regs = ", ".join(f"${i}" for i in range(k))
        first = 2 * k  # outputs, then their tied inputs, then the operands
        names = [f"${first + i}" for i in range(len(operands))]
        text = (
            "{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${first + len(operands)}, 0;\n" + instruction(regs, names) + "\n}"
        )
        cons = ",".join(["=f"] * k + [str(i) for i in range(k)] + [c for _, c in op_types] + ["r"])
        asm = ir.InlineAsm(
            ir.FunctionType(
                ir.LiteralStructType([_F32] * k), [_F32] * k + [t for t, _ in op_types] + [_I32]
            ),
            text,
            cons,
            side_effect=True,
        )
        res = builder.call(asm, vals + operands + [scale], attrs=("convergent",))
        for i, p in enumerate(ptrs):
            builder.store(builder.extract_value(res, i), p)

    def _ss_typer(kind, k, transposable):
        """Typer of ``wgmma.mma_async...m64n{n}k{k}.f32.{kind}.{kind}`` with both operands
        from SMEM descriptors; 16-bit kinds take ``trans_b`` (a literal) after ``scale_d``."""

        def typer(typingctx, acc, n, As, da, Bs, db, scale_d, *trans):
            literals = (n, *trans)
            if not all(isinstance(t, types.IntegerLiteral) for t in literals):
                return None
            if not _is_acc(acc):
                raise TypeError(f"wgmma needs a 1-D float32 accumulator array, got {acc}")
            nn = _check_n(n.literal_value)
            tb = int(bool(trans[0].literal_value)) if transposable else 0
            sig = types.void(acc, n, As, da, Bs, db, scale_d, *trans)
            # 16-bit kinds: imm-scale-a, imm-scale-b, imm-trans-a (0: K-major), imm-trans-b
            tail = f", p, 1, 1, 0, {tb};" if transposable else ", p, 1, 1;"

            def codegen(context, builder, sig, args):
                ops = [context.cast(builder, args[i], sig.args[i], types.int64) for i in (3, 5)]
                scale = context.cast(builder, args[6], sig.args[6], types.int32)

                def text(d, o):
                    return (
                        f"wgmma.mma_async.sync.aligned.m64n{nn}k{k}.f32.{kind}.{kind} {{{d}}}, "
                        f"{o[0]}, {o[1]}" + tail
                    )

                _product(
                    context,
                    builder,
                    sig.args[0],
                    args[0],
                    nn,
                    ops,
                    [(_I64, "l"), (_I64, "l")],
                    text,
                    scale,
                )
                return context.get_dummy_value()

            return sig, codegen

        return typer

    @intrinsic
    def mma_f16(typingctx, acc, n, As, da, Bs, db, scale_d, trans_b):
        """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16`` with both operands from
        SMEM (see module); ``n`` and ``trans_b`` literal ints; ``As``/``Bs`` only for the
        simulator's model."""
        return _ss_typer("f16", 16, True)(typingctx, acc, n, As, da, Bs, db, scale_d, trans_b)

    @intrinsic
    def mma_bf16(typingctx, acc, n, As, da, Bs, db, scale_d, trans_b):
        """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16``: as :func:`mma_f16` for
        bfloat16 operands (the SMEM arrays hold their bits, any 16-bit dtype)."""
        return _ss_typer("bf16", 16, True)(typingctx, acc, n, As, da, Bs, db, scale_d, trans_b)

    @intrinsic
    def mma_tf32(typingctx, acc, n, As, da, Bs, db, scale_d):
        """``wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32`` with both operands from
        SMEM, both K-major (TF32 has no transposed operand); ``n`` a literal int."""
        return _ss_typer("tf32", 8, False)(typingctx, acc, n, As, da, Bs, db, scale_d)

    @intrinsic
    def mma_tf32_rs(typingctx, acc, n, a0, a1, a2, a3, Bs, db, scale_d):
        """``wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32`` with A from registers (TF32
        bit patterns, int32) and B from SMEM, K-major (see module); ``n`` a literal int."""
        if not isinstance(n, types.IntegerLiteral):
            return None
        if not _is_acc(acc):
            raise TypeError(f"wgmma needs a 1-D float32 accumulator array, got {acc}")
        nn = _check_n(n.literal_value)
        sig = types.void(acc, n, a0, a1, a2, a3, Bs, db, scale_d)

        def codegen(context, builder, sig, args):
            ops = [context.cast(builder, args[i], sig.args[i], types.int32) for i in range(2, 6)]
            ops.append(context.cast(builder, args[7], sig.args[7], types.int64))
            scale = context.cast(builder, args[8], sig.args[8], types.int32)

            def text(d, o):
                return (
                    f"wgmma.mma_async.sync.aligned.m64n{nn}k8.f32.tf32.tf32 {{{d}}}, "
                    f"{{{o[0]}, {o[1]}, {o[2]}, {o[3]}}}, {o[4]}, p, 1, 1;"
                )

            _product(
                context,
                builder,
                sig.args[0],
                args[0],
                nn,
                ops,
                [(_I32, "r")] * 4 + [(_I64, "l")],
                text,
                scale,
            )
            return context.get_dummy_value()

        return sig, codegen


__all__ = [
    "CORE_BYTES",
    "CORE_ROWS",
    "N_VALUES",
    "SWIZZLE_128B",
    "SW_ATOM",
    "SW_ROW",
    "WARPGROUP",
    "WGMMA_F16",
    "WGMMA_TF32",
    "commit",
    "decode_desc",
    "encode_desc",
    "fence",
    "fence_proxy_async",
    "bf16_to_float",
    "mma_bf16",
    "mma_f16",
    "mma_tf32",
    "mma_tf32_rs",
    "operand_offsets",
    "owned",
    "read_operand",
    "smem_desc",
    "swizzle_128b",
    "wait",
]
