"""Hopper's Tensor Memory Accelerator (TMA) and ``mbarrier`` for Numba CUDA kernels (sm_90).

``cp.async`` (``numba_gemm.ptx.cpasync``) makes every thread of a block copy 16 bytes at a time
and wait for its own copies. On Hopper one thread can instead ask the TMA for a whole tile: the
tile's place in GMEM is described by a *tensor map* (a 128-byte object built on the host by the
driver's ``cuTensorMapEncodeTiled``: base address, sizes and strides of the matrix, the box
copied, the SMEM swizzle), and the copy lands asynchronously in SMEM, already swizzled, while the
thread goes on. Its completion is counted by an **mbarrier**: a 64-bit SMEM object with an
expected number of arrivals and a transaction count of bytes still to land; when both reach zero
its *phase* completes and the threads waiting on that phase's parity go on. This module gives
Numba kernels:

- ``mbar_init(bars, i, count)``: ``mbarrier.init`` of ``bars[i]`` (1-D int64 SMEM array) for
  ``count`` arrivals a phase; ``mbar_fence_init()`` makes the initialised barriers visible to the
  TMA (``fence.mbarrier_init``; a ``cuda.syncthreads()`` after it, to the other threads).
- ``mbar_arrive(bars, i)``: one arrival. ``mbar_expect_tx(bars, i, nbytes)``: one arrival that also
  adds ``nbytes`` to the bytes the phase waits for (``mbarrier.arrive.expect_tx``).
- ``mbar_wait(bars, i, parity)``: spin (``mbarrier.try_wait.parity``) until the phase of parity
  ``parity`` (0 or 1) has completed. A fresh barrier is in phase 0: waiting on parity 1 returns at
  once (the idiom of a producer's first pass over empty buffers).
- ``tma_load(dst, chunk, tmap, src, bars, i, c0, c1)``: ``cp.async.bulk.tensor.2d`` of the box at
  coordinates ``(c0, c1)`` (``c0`` the contiguous dimension: a column of a row-major matrix,
  ``c1`` its row) of the matrix described by ``tmap`` (the tensor map, 1-D int64 GMEM array of 16
  words) into ``dst[chunk:]`` (2-D SMEM array of 16-byte chunks, the address 1024-byte aligned for
  the 128-byte swizzle), completing ``bars[i]``'s transaction bytes when it lands. Elements
  outside the matrix land as zeros (and count as bytes). ``src`` is the matrix itself, read only by
  the simulator's model. A 3-D map copies a 3-D box ``(c0, c1, c2)`` of a batch of matrices:
  ``tma_load3`` takes the batch coordinate ``c2``.
- ``setmaxnreg_inc(n)`` / ``setmaxnreg_dec(n)``: move registers between the warpgroups of a
  warp-specialized block (every thread of a warpgroup executes it; ``n`` a literal multiple of 8 in
  24..256).
- ``pdl_wait()`` / ``pdl_launch_dependents()``: *programmatic dependent launch* (PDL). A kernel
  launched with the ``PROGRAMMATIC_STREAM_SERIALIZATION`` attribute may start before the kernel
  ahead of it in the stream has finished: as soon as every block of that one has executed
  ``griddepcontrol.launch_dependents`` (or exited). ``pdl_wait`` (``griddepcontrol.wait``) then
  blocks until the kernel ahead has completed and its memory operations are visible, so a kernel
  that waits before its first GMEM access may be launched that way safely whatever runs before it;
  ``pdl_launch_dependents`` lets the next such launch start (its blocks take SMs as ours exit:
  launch and set-up overlap our tail). Without the attribute both are no-ops, and so on the
  simulator (its launches run one after another).

**Tensor maps** are checked in plain Python before anything is encoded
(:func:`check_tensor_map`: the driver's documented rules, with a ``ValueError`` that names the
field) and, on the simulator, stored as our own record (:func:`encode_record`, ``RECORD_TAG`` in
word 0): the model of ``tma_load`` decodes it and copies the box exactly as the hardware lays it out
(row ``r`` of the box at ``r * inner bytes``, then the 128-byte swizzle's XOR of the 16-byte chunk
with the row's index in its 8-row atom), so a wrong box, swizzle or coordinate fails on the CPU.
The mbarrier's model keeps each barrier's phase, pending arrivals and transaction bytes, completes
the phase when both are zero, and lets ``mbar_wait`` block the simulated thread until the phase
flips (a wait that outlives ``SIM_DEADLOCK_S`` seconds raises ``RuntimeError``: a protocol that
never completes a phase is a deadlock on the GPU too).

Sources: PTX ISA 8.x, "cp.async.bulk.tensor", "mbarrier" (phases, tx-count, ``try_wait.parity``),
"setmaxnreg", "Tensor-map"; CUDA Driver API, ``cuTensorMapEncodeTiled`` (its parameter rules);
NVIDIA CUTLASS ``PipelineTmaAsync`` (the full/empty barrier pair of a TMA pipeline).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backend import MLIR
from ..device import SIMULATOR
from . import unported_all

#: Bytes and 64-bit words of a tensor map (``CU_TENSOR_MAP_NUM_QWORDS``).
TENSOR_MAP_BYTES, TENSOR_MAP_WORDS = 128, 16
#: ``CUtensorMapDataType`` values for the element types the kernels copy.
TMA_DTYPES = {"float16": 6, "float32": 7, "bfloat16": 9}
#: ``CUtensorMapSwizzle`` values by swizzle span in bytes (0: none).
TMA_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
#: Word 0 of a simulator record (a real map is opaque; this tag tells the model it can read one).
RECORD_TAG = 0x544D41  # "TMA"
#: Seconds a simulated ``mbar_wait`` may wait without its phase completing.
SIM_DEADLOCK_S = 60.0


@dataclass(frozen=True)
class TensorMapSpec:
    """What a tiled tensor map describes, in the driver's terms (dimension 0 contiguous).

    Attributes:
        dtype: ``"float16"``, ``"bfloat16"`` or ``"float32"``.
        dims: elements along each dimension, innermost first (a row-major ``(R, C)`` matrix:
            ``(C, R)``; a batch ``(B, R, C)``: ``(C, R, B)``).
        strides: bytes between consecutive indices of dimensions 1.. (one fewer than ``dims``).
        box: elements copied along each dimension.
        swizzle: SMEM swizzle span in bytes: 0, 32, 64 or 128.
        address: GMEM address of element 0 (0 on the simulator, which copies from ``src``).
    """

    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 128
    address: int = 0

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def box_bytes(self) -> int:
        """Bytes one copy of the box lands (and counts on its mbarrier)."""
        return int(np.prod(self.box)) * self.itemsize


def check_tensor_map(spec: TensorMapSpec) -> None:
    """Raise ``ValueError`` naming the first rule of ``cuTensorMapEncodeTiled`` that ``spec``
    breaks (CUDA Driver API: address 16-byte aligned; 1-5 dimensions, each 1..2^32; strides
    multiples of 16 below 2^40, nondecreasing past the row; box 1..256 per dimension, its
    inner bytes a multiple of 16 and at most the swizzle span)."""
    if spec.dtype not in TMA_DTYPES:
        raise ValueError(f"tensor map dtype {spec.dtype!r}: one of {sorted(TMA_DTYPES)}")
    rank = len(spec.dims)
    if not 1 <= rank <= 5 or len(spec.box) != rank or len(spec.strides) != rank - 1:
        raise ValueError(
            f"tensor map rank {rank}: 1..5 dimensions, a box of as many and one stride fewer "
            f"(got box {spec.box}, strides {spec.strides})"
        )
    if spec.address % 16:
        raise ValueError(f"tensor map address {spec.address:#x}: must be 16-byte aligned")
    for d, n in enumerate(spec.dims):
        if not 1 <= n <= 1 << 32:
            raise ValueError(f"tensor map dimension {d} of {n} elements: need 1..2^32")
    row = spec.dims[0] * spec.itemsize
    for d, s in enumerate(spec.strides, start=1):
        if s % 16 or not 0 < s < 1 << 40:
            raise ValueError(
                f"tensor map stride {s} B of dimension {d}: need a positive multiple of 16 "
                "below 2^40 (rows of a row-major matrix must be 16-byte aligned)"
            )
        if d == 1 and s < row:
            raise ValueError(f"tensor map row stride {s} B is shorter than a row ({row} B)")
    for d, b in enumerate(spec.box):
        if not 1 <= b <= 256:
            raise ValueError(f"tensor map box dimension {d} of {b} elements: need 1..256")
    inner = spec.box[0] * spec.itemsize
    if spec.swizzle not in TMA_SWIZZLE:
        raise ValueError(f"tensor map swizzle {spec.swizzle}: one of 0, 32, 64, 128 (bytes)")
    if inner % 16 or (spec.swizzle and inner > spec.swizzle):
        raise ValueError(
            f"tensor map box inner dimension {inner} B: a multiple of 16"
            + (f", at most the {spec.swizzle}-byte swizzle span" if spec.swizzle else "")
        )


def encode_record(spec: TensorMapSpec) -> np.ndarray:
    """The simulator's 16-word record of a checked ``spec``: tag, rank, dtype code, swizzle
    span, then dims, strides and box (5 words each would overflow: rank <= 3 is recorded).

    Raises:
        ValueError: as :func:`check_tensor_map`; a rank above 3 (the kernels use 2 and 3).
    """
    check_tensor_map(spec)
    rank = len(spec.dims)
    if rank > 3:
        raise ValueError(f"the simulator records tensor maps of rank <= 3, got {rank}")
    w = np.zeros(TENSOR_MAP_WORDS, np.int64)
    w[0:4] = RECORD_TAG, rank, TMA_DTYPES[spec.dtype], spec.swizzle
    w[4 : 4 + rank] = spec.dims
    w[7 : 7 + rank - 1] = spec.strides
    w[10 : 10 + rank] = spec.box
    return w


def decode_record(words) -> TensorMapSpec:
    """The :class:`TensorMapSpec` of a simulator record.

    Raises:
        ValueError: ``words`` is not such a record (e.g. a real, opaque tensor map).
    """
    w = [int(x) for x in np.asarray(words)[:TENSOR_MAP_WORDS]]
    if w[0] != RECORD_TAG:
        raise ValueError("not a simulator tensor-map record (build it with launch.tensormap)")
    rank = w[1]
    dtype = {v: k for k, v in TMA_DTYPES.items()}[w[2]]
    return TensorMapSpec(
        dtype, tuple(w[4 : 4 + rank]), tuple(w[7 : 6 + rank]), tuple(w[10 : 10 + rank]), w[3]
    )


def box_offsets(spec: TensorMapSpec) -> np.ndarray:
    """SMEM byte offset (from the destination) of each element of the box, shape ``box[::-1]``
    (outermost first): row-major rows of ``box[0] * itemsize`` bytes, then the swizzle (128:
    the 16-byte chunk XOR the row's index in its 1024-byte atom, as ``wgmma.swizzle_128b``;
    64 / 32: XOR with bits 7-8 / 7 of the offset, shifted to the chunk)."""
    n = int(np.prod(spec.box))
    off = np.arange(n, dtype=np.int64) * spec.itemsize
    if spec.swizzle == 128:
        off = off ^ (((off >> 7) & 7) << 4)
    elif spec.swizzle == 64:
        off = off ^ (((off >> 7) & 3) << 4)
    elif spec.swizzle == 32:
        off = off ^ (((off >> 7) & 1) << 4)
    return off.reshape(spec.box[::-1])


def read_box(spec: TensorMapSpec, src: np.ndarray, coords: tuple[int, ...]) -> np.ndarray:
    """The box at ``coords`` (innermost first) of ``src`` (the matrix or batch the map
    describes, outermost index first), zeros outside it, shape ``box[::-1]``.

    Raises:
        ValueError: ``src``'s shape is not the map's dims.
    """
    src = np.asarray(src)
    if src.shape != spec.dims[::-1]:
        raise ValueError(f"tensor map dims {spec.dims[::-1]} (outer first) but source {src.shape}")
    out = np.zeros(spec.box[::-1], dtype=src.dtype)
    lo = [max(0, c) for c in coords[::-1]]
    hi = [min(n, c + b) for c, b, n in zip(coords[::-1], spec.box[::-1], src.shape, strict=True)]
    if all(h > w for w, h in zip(lo, hi, strict=True)):
        dst = tuple(slice(w - c, h - c) for w, h, c in zip(lo, hi, coords[::-1], strict=True))
        out[dst] = src[tuple(slice(w, h) for w, h in zip(lo, hi, strict=True))]
    return out


if SIMULATOR:
    import threading
    import time

    from ..backend import int64

    _cond = threading.Condition()
    _bars: dict[int, list[int]] = {}  # address -> [expected, pending, tx, phase]

    def _addr(bars, i) -> int:
        if not (0 <= i < bars.shape[0]) or bars.dtype != np.int64:
            raise IndexError(f"mbarrier {i} outside an int64 array of {bars.shape[0]}")
        return bars.__array_interface__["data"][0] + int(i) * bars.strides[0]

    def _state(bars, i) -> list[int]:
        st = _bars.get(_addr(bars, i))
        if st is None:
            raise RuntimeError(f"mbarrier {i} used before mbar_init")
        return st

    def _settle(st) -> None:
        if st[1] == 0 and st[2] == 0:  # phase complete: flip, re-arm
            st[3] ^= 1
            st[1] = st[0]
            _cond.notify_all()

    def mbar_init(bars, i, count):
        """Simulator model of :func:`mbar_init`."""
        if count < 1:
            raise ValueError(f"mbarrier arrival count {count}: need >= 1")
        with _cond:
            _bars[_addr(bars, i)] = [int(count), int(count), 0, 0]
            bars[i] = int64(0)

    def mbar_fence_init():
        """Simulator path: one memory."""

    def _arrive(bars, i, tx):
        with _cond:
            st = _state(bars, i)
            if st[1] == 0:
                raise RuntimeError(f"mbarrier {i}: more arrivals than its count {st[0]}")
            st[2] += tx
            st[1] -= 1
            _settle(st)

    def mbar_arrive(bars, i):
        """Simulator model of :func:`mbar_arrive`."""
        _arrive(bars, i, 0)

    def mbar_expect_tx(bars, i, nbytes):
        """Simulator model of :func:`mbar_expect_tx`."""
        _arrive(bars, i, int(nbytes))

    def mbar_wait(bars, i, parity):
        """Simulator model of :func:`mbar_wait`: block until the phase of ``parity`` is done."""
        me = threading.current_thread()
        block = getattr(getattr(me, "_manager", None), "_barrier", None)
        deadline = time.monotonic() + SIM_DEADLOCK_S
        with _cond:
            st = _state(bars, i)
            while st[3] == (int(parity) & 1):
                if block is not None and block.aborted:
                    raise RuntimeError("abort flag set in mbar_wait")
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mbarrier {i}: phase of parity {parity} never completed "
                        f"({st[1]} of {st[0]} arrivals and {st[2]} bytes missing)"
                    )
                _cond.wait(0.05)

    def _host(x):
        """The NumPy array behind a simulated kernel's array argument."""
        item = getattr(x, "_item", None)  # FakeWithinKernelCUDAArray -> FakeCUDAArray
        return np.asarray(item._ary if item is not None else x)

    def _land(dst, chunk, tmap, src, bars, i, coords):
        spec = decode_record(_host(tmap))
        src = _host(src)
        if len(coords) != len(spec.dims):
            raise ValueError(f"a rank-{len(spec.dims)} tensor map copied with {len(coords)} coords")
        base = int(chunk) * 16
        if spec.swizzle and base % (8 * spec.swizzle):
            raise ValueError(
                f"TMA destination chunk {chunk}: a {spec.swizzle}-byte swizzle needs "
                f"{8 * spec.swizzle}-byte aligned SMEM"
            )
        flat = dst.reshape(-1).view(np.uint8)
        vals = read_box(spec, src, tuple(int(c) for c in coords))
        off = base + box_offsets(spec)
        if off.max() + spec.itemsize > flat.size:
            raise IndexError(f"TMA box of {spec.box_bytes} B at chunk {chunk} overflows SMEM")
        raw = np.ascontiguousarray(vals.astype(src.dtype)).reshape(-1).view(np.uint8)
        idx = (off.reshape(-1)[:, None] + np.arange(spec.itemsize)).reshape(-1)
        flat[idx] = raw
        with _cond:
            st = _state(bars, i)
            st[2] -= spec.box_bytes
            _settle(st)

    def tma_load(dst, chunk, tmap, src, bars, i, c0, c1):
        """Simulator model of :func:`tma_load`: lands the box now, then counts its bytes."""
        _land(dst, chunk, tmap, src, bars, i, (c0, c1))

    def tma_load3(dst, chunk, tmap, src, bars, i, c0, c1, c2):
        """Simulator model of :func:`tma_load3`."""
        _land(dst, chunk, tmap, src, bars, i, (c0, c1, c2))

    def setmaxnreg_inc(n):
        """Simulator path: no registers to move."""

    def setmaxnreg_dec(n):
        """Simulator path: no registers to move."""

    def pdl_wait():
        """Simulator path: the kernel ahead has completed (launches run one after another)."""

    def pdl_launch_dependents():
        """Simulator path: nothing launches early."""

elif MLIR:  # not ported to numba-cuda-mlir yet (docs/numba-cuda-mlir.md)
    globals().update(
        unported_all(
            "tma",
            "mbar_init mbar_fence_init mbar_arrive mbar_expect_tx mbar_wait "
            "tma_load tma_load3 setmaxnreg_inc setmaxnreg_dec pdl_wait "
            "pdl_launch_dependents",
        )
    )

else:
    from llvmlite import ir
    from numba.cuda import cgutils

    from ..backend import intrinsic, types

    _I32, _I64 = ir.IntType(32), ir.IntType(64)

    def _asm(builder, text, cons, argtys, args):
        fn = ir.FunctionType(ir.VoidType(), argtys)
        builder.call(ir.InlineAsm(fn, text, cons, side_effect=True), args)

    def _bar_address(context, builder, aryty, ary, ity, i):
        """32-bit shared-window address of ``ary[i]`` (1-D int64 SMEM array)."""
        arr = context.make_array(aryty)(context, builder, value=ary)
        idx = context.cast(builder, i, ity, types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, arr, [idx], wraparound=False)
        return builder.ptrtoint(
            builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, 3)), _I32
        )

    def _is_bars(t):
        return isinstance(t, types.Array) and t.ndim == 1 and t.dtype == types.int64

    def _check_bars(bars, i):
        if not (_is_bars(bars) and isinstance(i, types.Integer)):
            raise TypeError(f"mbarrier ops need a 1-D int64 SMEM array and an index, got {bars}")

    def _i32(context, builder, v, ty):
        return context.cast(builder, v, ty, types.int32)

    def _bar_op(text, name, doc, valued):
        """An intrinsic ``name(bars, i)`` (``valued``: ``name(bars, i, value)``, an int32
        operand ``$1``) emitting ``text`` with ``$0`` the 32-bit SMEM address of ``bars[i]``."""

        def build(typingctx, bars, i, value):
            _check_bars(bars, i)
            sig = types.void(bars, i, *value)

            def codegen(context, builder, sig, args):
                ops = [_bar_address(context, builder, sig.args[0], args[0], sig.args[1], args[1])]
                if valued:
                    ops.append(_i32(context, builder, args[2], sig.args[2]))
                cons = ",".join(["r"] * len(ops)) + ",~{memory}"
                _asm(builder, text, cons, [_I32] * len(ops), ops)
                return context.get_dummy_value()

            return sig, codegen

        if valued:

            def typer(typingctx, bars, i, value):
                return build(typingctx, bars, i, (value,))

        else:

            def typer(typingctx, bars, i):
                return build(typingctx, bars, i, ())

        fn = intrinsic(typer)
        fn.__name__, fn.__doc__ = name, doc
        return fn

    mbar_init = _bar_op(
        "mbarrier.init.shared::cta.b64 [$0], $1;",
        "mbar_init",
        "``mbarrier.init.shared::cta.b64 [bars[i]], count``.",
        True,
    )
    mbar_arrive = _bar_op(
        "mbarrier.arrive.shared::cta.b64 _, [$0];",
        "mbar_arrive",
        "``mbarrier.arrive.shared::cta.b64 _, [bars[i]]``.",
        False,
    )
    mbar_expect_tx = _bar_op(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
        "mbar_expect_tx",
        "``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bars[i]], nbytes``.",
        True,
    )
    mbar_wait = _bar_op(
        "{\n.reg .pred done;\nWAIT:\n"  # a label is local to its braces
        "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
        "@!done bra WAIT;\n}",
        "mbar_wait",
        "Spin on ``mbarrier.try_wait.parity.shared::cta.b64`` until the phase of ``parity`` "
        "has completed.",
        True,
    )

    @intrinsic
    def mbar_fence_init(typingctx):
        """``fence.mbarrier_init.release.cluster``: initialised barriers visible to the TMA."""

        def codegen(context, builder, sig, args):
            _asm(builder, "fence.mbarrier_init.release.cluster;", "~{memory}", [], [])
            return context.get_dummy_value()

        return types.void(), codegen

    def _tma_typer(rank):
        def typer(typingctx, dst, chunk, tmap, src, bars, i, *coords):
            if not (
                isinstance(dst, types.Array)
                and dst.ndim == 2
                and isinstance(tmap, types.Array)
                and tmap.ndim == 1
                and tmap.dtype == types.int64
            ):
                raise TypeError(
                    f"tma_load needs a 2-D SMEM array and a 1-D int64 tensor map, got {dst}, {tmap}"
                )
            _check_bars(bars, i)
            sig = types.void(dst, chunk, tmap, src, bars, i, *coords)

            def codegen(context, builder, sig, args):
                dty, cty, tty = sig.args[0], sig.args[1], sig.args[2]
                arr = context.make_array(dty)(context, builder, value=args[0])
                c = context.cast(builder, args[1], cty, types.intp)
                zero = context.get_constant(types.intp, 0)
                ptr = cgutils.get_item_pointer(
                    context, builder, dty, arr, [c, zero], wraparound=False
                )
                d = builder.ptrtoint(
                    builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, 3)), _I32
                )
                t = builder.ptrtoint(
                    context.make_array(tty)(context, builder, value=args[2]).data, _I64
                )
                b = _bar_address(context, builder, sig.args[4], args[4], sig.args[5], args[5])
                xs = [
                    _i32(context, builder, v, ty)
                    for v, ty in zip(args[6:], sig.args[6:], strict=True)
                ]
                regs = ", ".join(f"${3 + k}" for k in range(rank))
                text = (
                    f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile"
                    f".mbarrier::complete_tx::bytes [$0], [$1, {{{regs}}}], [$2];"
                )
                _asm(
                    builder,
                    text,
                    "r,l,r" + ",r" * rank + ",~{memory}",
                    [_I32, _I64, _I32] + [_I32] * rank,
                    [d, t, b, *xs],
                )
                return context.get_dummy_value()

            return sig, codegen

        return typer

    @intrinsic
    def tma_load(typingctx, dst, chunk, tmap, src, bars, i, c0, c1):
        """``cp.async.bulk.tensor.2d`` of the box at ``(c0, c1)`` into ``dst[chunk:]``,
        completing ``bars[i]`` (see module)."""
        return _tma_typer(2)(typingctx, dst, chunk, tmap, src, bars, i, c0, c1)

    @intrinsic
    def tma_load3(typingctx, dst, chunk, tmap, src, bars, i, c0, c1, c2):
        """``cp.async.bulk.tensor.3d`` of the box at ``(c0, c1, c2)`` (see module)."""
        return _tma_typer(3)(typingctx, dst, chunk, tmap, src, bars, i, c0, c1, c2)

    def _setmaxnreg(action):
        def typer(typingctx, n):
            if not isinstance(n, types.IntegerLiteral):
                return None
            count = n.literal_value
            if count % 8 or not 24 <= count <= 256:
                raise TypeError(f"setmaxnreg count {count}: a multiple of 8 in 24..256")

            def codegen(context, builder, sig, args):
                fn = ir.FunctionType(ir.VoidType(), [])
                text = f"setmaxnreg.{action}.sync.aligned.u32 {count};"
                builder.call(
                    ir.InlineAsm(fn, text, "~{memory}", side_effect=True), [], attrs=("convergent",)
                )
                return context.get_dummy_value()

            return types.void(n), codegen

        return typer

    setmaxnreg_inc = intrinsic(_setmaxnreg("inc"))
    setmaxnreg_inc.__doc__ = "``setmaxnreg.inc.sync.aligned.u32 n`` (literal n; see module)."
    setmaxnreg_dec = intrinsic(_setmaxnreg("dec"))
    setmaxnreg_dec.__doc__ = "``setmaxnreg.dec.sync.aligned.u32 n`` (literal n; see module)."

    def _griddepcontrol(action):
        def typer(typingctx):
            def codegen(context, builder, sig, args):
                _asm(builder, f"griddepcontrol.{action};", "~{memory}", [], [])
                return context.get_dummy_value()

            return types.void(), codegen

        fn = intrinsic(typer)
        fn.__doc__ = f"``griddepcontrol.{action}`` (see module)."
        return fn

    pdl_wait = _griddepcontrol("wait")
    pdl_launch_dependents = _griddepcontrol("launch_dependents")


__all__ = [
    "RECORD_TAG",
    "SIM_DEADLOCK_S",
    "TENSOR_MAP_BYTES",
    "TENSOR_MAP_WORDS",
    "TMA_DTYPES",
    "TMA_SWIZZLE",
    "TensorMapSpec",
    "box_offsets",
    "check_tensor_map",
    "decode_record",
    "encode_record",
    "mbar_arrive",
    "mbar_expect_tx",
    "mbar_fence_init",
    "mbar_init",
    "mbar_wait",
    "pdl_launch_dependents",
    "pdl_wait",
    "read_box",
    "setmaxnreg_dec",
    "setmaxnreg_inc",
    "tma_load",
    "tma_load3",
]
