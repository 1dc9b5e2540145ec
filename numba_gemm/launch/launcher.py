"""Launching: compiled kernels loaded per device, the direct launch, and the runner of a plan.

A :class:`Kernel` is one ``@cuda.jit`` kernel compiled for one argument signature and loaded on one
GPU. On a GPU it is a ``CUfunction`` from the on-disk cache (``numba_gemm.launch.cache``: compiled
once per machine, not per process), launched with ``cuLaunchKernel`` from a pre-built parameter
buffer (``numba_gemm.launch.driver``): no Numba dispatcher, no ``DeviceNDArray``, no ctypes object
per argument.
Under the simulator (and where the driver library cannot be opened) it is the Numba dispatcher,
launched the plain way.

The parameter buffer follows the kernel ABI of the compiler that built the kernels
(``numba_gemm.backend``). numba-cuda's: an n-D array argument is 5 + 2n 64-bit fields, meminfo,
parent, nitems, itemsize, data, shape[n], strides[n] (bytes). numba-cuda-mlir's: an MLIR memref
descriptor, 3 + 2n fields (:func:`memref_fields`). A float32 scalar is 4 bytes in both. Those
layouts are implementation details of the compilers, so they are checked whenever a kernel is
loaded: against the ``.param`` list of the kernel's PTX (recorded in the cache entry) and
against the driver's ``cuFuncGetParamInfo``; a mismatch raises instead of launching.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import threading
import weakref
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from numba import config as numba_config
from numba import cuda
from numba.core.errors import NumbaError

from .. import backend
from ..arrays import BF16, DTYPES, F32, Operand, operand
from ..device import SIMULATOR, DeviceInfo, cdiv
from ..kernels import _epilogue, _pad, _scale, _splitk, _streamk
from ..kernels._tunable import SPLIT_ARGS, STREAM_K
from ..kernels.stage import variant_key
from ..ptx.tma import TENSOR_MAP_WORDS
from . import cache, tensormap, workspace
from . import driver as _driver

__all__ = ["stream_handle", "Kernel", "load_kernel", "blocks_per_sm", "allow_dynamic_smem"]


# --- streams ------------------------------------------------------------------------------------


def stream_handle(stream: Any) -> Any:
    """The stream to launch on: a CUDA stream handle (int) on a GPU; on the simulator a Numba
    stream or 0.

    Accepts 0/None (the default stream), a Numba stream, a CuPy stream (``.ptr``), a PyTorch
    stream (``.cuda_stream``) or a raw ``cudaStream_t`` int.

    Raises:
        TypeError: anything else.
    """
    if stream is None or (type(stream) is int and stream == 0):
        return DEFAULT_STREAM
    if SIMULATOR:
        if isinstance(stream, type(cuda.default_stream())):
            return stream
        raise TypeError(f"stream must be 0 or a Numba stream, got {type(stream).__name__}")
    if type(stream) is int:
        return stream
    if hasattr(stream, "cuda_stream"):  # PyTorch
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr") and not hasattr(stream, "handle"):  # CuPy
        return int(stream.ptr)
    from numba.cuda.cudadrv.driver import Stream  # GPU-only internal (absent on the simulator)

    if isinstance(stream, Stream):
        return int(stream)
    raise TypeError(
        f"stream must be 0, a Numba stream, a CuPy/PyTorch stream or a raw cudaStream_t int, "
        f"got {type(stream).__name__}"
    )


def _default_stream() -> Any:
    """Numba's default stream: legacy (handle 0) unless numba is configured for per-thread
    default streams (``NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM``: handle 2)."""
    if SIMULATOR:
        return 0
    return 2 if numba_config.CUDA_PER_THREAD_DEFAULT_STREAM else 0


DEFAULT_STREAM = _default_stream()
I64 = np.dtype(np.int64)  # a tensor map's words
SHARED_STREAMS = (0, 1, 2)  # legacy, legacy, per-thread default: ordered with one another


#: Argument signature of the ladder's stage kernels: ``kernel(A, B, C, alpha, beta)`` on 2-D
#: C-contiguous arrays (``Stage.args``; the tunable stages take ``"SSSff"``, the FP16 one
#: ``"HHAff"``; ``U``: a bfloat16 array as its uint16 bits). Letters in parentheses are one tuple
#: argument (a fused epilogue's operands, ``Stage.args_for``), flattened by Numba's ABI.
STAGE_ARGS = "AAAff"
_NUMBA_SIG = {
    "A": "float32[:, ::1]",
    "H": "float16[:, ::1]",
    "U": "uint16[:, ::1]",
    "S": "float32[:, :, :]",
    "Q": "float16[:, :, :]",
    "R": "uint16[:, :, :]",
    "V": "float32[::1]",
    "h": "float16[::1]",
    "I": "int32[::1]",
    "M": "int64[::1]",
    "f": "float32",
}
#: dimensions of the array of each spec letter
_NDIM = {"A": 2, "H": 2, "U": 2, "S": 3, "Q": 3, "R": 3, "V": 1, "h": 1, "I": 1, "M": 1}
#: 64-bit fields before an n-D array's shape and strides, and the index of its data pointer:
#: numba-cuda's (meminfo, parent, nitems, itemsize, data) or numba-cuda-mlir's MLIR memref
#: descriptor (allocated pointer, aligned pointer, offset); see :func:`array_fields`
_HEAD, _DATA = (3, 1) if backend.MLIR else (5, 4)
#: 64-bit ABI fields of each array spec: the head, shape[n], strides[n]
_WORDS = {c: _HEAD + 2 * n for c, n in _NDIM.items()}
#: bytes per element of each array spec
_ITEMSIZE = {"A": 4, "H": 2, "U": 2, "S": 4, "Q": 2, "R": 2, "V": 4, "h": 2, "I": 4, "M": 8}


def numba_signature(spec: str) -> str:
    """The Numba signature string of an argument spec (``A``: 2-D C-contiguous float32 array,
    ``H``: the same in float16, ``S``: 3-D float32 array of any strides (``Q``, ``R``: float16,
    bfloat16 bits), ``V``: 1-D contiguous float32 (``h``: float16), ``I``: 1-D contiguous int32
    array, ``f``: float32; ``(...)``: a tuple of those), e.g. ``"AAAff"`` ->
    ``"void(float32[:, ::1], ..., float32, float32)"``."""
    parts, i = [], 0
    while i < len(spec):
        if spec[i] == "(":
            j = spec.index(")", i)
            inner = "".join(_NUMBA_SIG[c] + ", " for c in spec[i + 1 : j])
            parts.append(f"Tuple(({inner}))")
            i = j + 1
        else:
            parts.append(_NUMBA_SIG[spec[i]])
            i += 1
    return "void(" + ", ".join(parts) + ")"


class _Layout:
    """Byte layout of a kernel's parameters for an argument spec (arrays first, then scalars)."""

    def __init__(self, spec: str) -> None:
        flat = spec.replace("(", "").replace(")", "")  # a tuple's arrays are its fields, in order
        arrays = flat.rstrip("f")
        if not set(arrays) <= set(_WORDS) or len(arrays) + flat.count("f") != len(flat):
            raise ValueError(f"argument spec {spec!r}: arrays (A, S) must come before scalars (f)")
        self.spec = spec
        words = sum(_WORDS[c] for c in arrays)
        self.words = words
        #: word index of each array's data pointer
        self.pointers = tuple(
            sum(_WORDS[c] for c in arrays[:i]) + _DATA for i in range(len(arrays))
        )
        self.itemsizes = tuple(_ITEMSIZE[c] for c in arrays)
        self.sizes = (8,) * words + (4,) * spec.count("f")
        self.offsets = tuple(sum(self.sizes[:i]) for i in range(len(self.sizes)))
        self.struct = struct.Struct("<" + "q" * words + "f" * spec.count("f"))
        self.tls = threading.local()

    def buffers(self) -> tuple[Any, int]:
        """This thread's ``(argument buffer, address of its void*[] of parameter addresses)``:
        a kernel launch reads its parameters when it is enqueued, so one buffer per host thread
        is enough and no two threads share one."""
        t = self.tls
        try:
            return t.buf, t.params_addr
        except AttributeError:
            t.buf = ctypes.create_string_buffer(self.struct.size)
            base = ctypes.addressof(t.buf)
            t.params = (ctypes.c_void_p * len(self.sizes))(*(base + o for o in self.offsets))
            t.params_addr = ctypes.addressof(t.params)
            return t.buf, t.params_addr


_LAYOUTS: dict[str, _Layout] = {}


def numba_array_fields(arrays: Sequence[Any], itemsizes: Sequence[int] | None = None) -> list[int]:
    """The kernel parameters of arrays, in numba-cuda's order: meminfo, parent, nitems, itemsize,
    data, shape[n], strides[n] (bytes); meminfo and parent are null for device arrays. A 2-D
    array (``ptr`` and ``shape``) is C-contiguous (spec ``A``, or ``H`` for float16); a 3-D one
    (``ptr``, ``shape``, ``strides`` in bytes) is strided float32 (spec ``S``); a 1-D one is
    contiguous (spec ``I``). ``itemsizes``: bytes per element of each array (default: 4)."""
    values: list[int] = []
    for i, a in enumerate(arrays):
        if len(a.shape) == 1:
            n = a.shape[0]
            size = 4 if itemsizes is None else itemsizes[i]
            values += (0, 0, n, size, a.ptr, n, size)
        elif len(a.shape) == 2:
            rows, cols = a.shape
            size = 4 if itemsizes is None else itemsizes[i]
            values += (0, 0, rows * cols, size, a.ptr, rows, cols, cols * size, size)
        else:
            b, rows, cols = a.shape
            size = 4 if itemsizes is None else itemsizes[i]
            values += (0, 0, b * rows * cols, size, a.ptr, b, rows, cols, *a.strides)
    return values


def memref_fields(arrays: Sequence[Any], itemsizes: Sequence[int] | None = None) -> list[int]:
    """The kernel parameters of arrays under numba-cuda-mlir: an MLIR memref descriptor each,
    allocated pointer (null: a kernel never frees), aligned pointer (the data), offset (0,
    elements), shape[n], strides[n] (elements). The same arrays as :func:`numba_array_fields`;
    a 3-D array's byte strides must be multiples of its ``itemsizes`` entry.

    Source: MLIR, "LLVM IR Target: Ranked MemRef Types" (the descriptor's fields, in order). In
    the PTX of numba-cuda-mlir 0.6.0's kernels the allocated pointer is never read, the offset
    and the strides (the inner one too) scale the index before it becomes bytes; its own
    launcher passes the data pointer twice, offset 0 and element strides. The field count is
    checked against each kernel's PTX at load time (:func:`load_kernel`). Run on an H200: stages
    1-7 through ``sgemm`` (docs/numba-cuda-mlir.md, "The launch path")."""
    values: list[int] = []
    for i, a in enumerate(arrays):
        size = 4 if itemsizes is None else itemsizes[i]
        if len(a.shape) == 1:
            values += (0, a.ptr, 0, a.shape[0], 1)
        elif len(a.shape) == 2:
            rows, cols = a.shape
            values += (0, a.ptr, 0, rows, cols, cols, 1)
        else:
            if any(s % size for s in a.strides):
                raise ValueError(f"strides {a.strides} are not multiples of {size} bytes")
            values += (0, a.ptr, 0, *a.shape, *(s // size for s in a.strides))
    return values


#: The parameters of arrays in the kernel ABI of the backend that builds the kernels.
array_fields = memref_fields if backend.MLIR else numba_array_fields


def _layout(spec: str) -> _Layout:
    lay = _LAYOUTS.get(spec)
    if lay is None:
        lay = _LAYOUTS[spec] = _Layout(spec)
    return lay


class Kernel:
    """A compiled kernel loaded on one GPU, launched directly through the driver.

    Attributes:
        name: what it is (stage name and variant), for messages.
        device: the GPU it is loaded on.
        smem: dynamic SMEM per block, bytes.
        fn, ctx: ``CUfunction`` and the context (the device's primary one) it lives in.
        compiled: the cache entry (``numba_gemm.launch.cache.CompiledKernel``) it was loaded from.
    """

    def __init__(
        self, name: str, device: DeviceInfo, spec: str, smem: int, compiled: Any, fn: int, ctx: int
    ) -> None:
        self.name, self.device, self.smem, self.compiled = name, device, smem, compiled
        self.fn, self.ctx = fn, ctx
        self._layout = _layout(spec)

    def launch(
        self,
        grid: tuple,
        block: tuple,
        stream: int,
        arrays: Sequence[Any],
        scalars: Sequence[float],
        extras: Sequence[Any] = (),
    ) -> None:
        """Enqueue the kernel on stream handle ``stream``. ``arrays``: operands with ``ptr`` and a
        2-D ``shape`` (C-contiguous float32; ``devarray.Operand``); ``scalars``: floats;
        ``extras``: the operands of a tuple argument after the arrays (a fused epilogue's)."""

        lay = self._layout
        buf, params = lay.buffers()
        fields = array_fields((*arrays, *extras), lay.itemsizes)
        lay.struct.pack_into(buf, 0, *fields, *scalars)
        cur = _driver.current_context()
        if cur == self.ctx:
            _driver.launch(self.fn, grid, block, self.smem, stream, params)
            return
        _driver.set_current_context(self.ctx)
        if not cur:  # a thread with no context yet: keep this one, as cudaSetDevice would
            _driver.launch(self.fn, grid, block, self.smem, stream, params)
            return
        try:  # another GPU's context is current: launch in ours, then give it back
            _driver.launch(self.fn, grid, block, self.smem, stream, params)
        finally:
            _driver.set_current_context(cur)

    def blocks_per_sm(self, threads: int) -> int:
        """Resident blocks per SM at ``threads`` per block and this kernel's dynamic SMEM (CUDA
        occupancy API)."""

        return _driver.blocks_per_sm(self.fn, threads, self.smem)

    def __repr__(self) -> str:
        return f"Kernel({self.name}, device={self.device.id}, smem={self.smem})"


def gemm_launcher(
    kernel: Kernel,
    spec: str,
    arrays: Sequence[Any],
    grid: tuple,
    block: tuple,
    split: Any = None,
    maps: Any = None,
    dependent: bool = False,
    extras: int | None = None,
) -> Any:
    """``launch(a, b, c, alpha, beta, stream)`` for one stage kernel at one geometry: the hot path.

    ``arrays``: the plan's argument arrays for this geometry (``shape``, and ``strides`` for
    spec ``S``; their pointers are ignored): A, B, C, and for the split-K-capable kernels (spec
    ``SSSSIff``) the workspace W and the tile counters L. Everything but the data pointers, the
    two scalars and the stream is fixed by the plan, so it is bound here once: per call, the
    pointers and two scalars are written into this thread's parameter buffer (the rest was
    packed on the thread's first call) and one foreign call is made (``_driver.raw_launch``).
    ``a``, ``b``, ``c``: the data pointers of A, B and C (ints); ``stream``: a handle (int).
    ``split(stream) -> (W, L)`` gives a split-K plan's buffers of that stream (objects with
    ``ptr``); without it W and L stay null (a kernel with SPLITK == 1 never touches them).
    ``maps(a, b) -> (ta, tb)``: for a TMA stage (spec ``...MMff``), the device pointers of A's
    and B's tensor maps for these operand pointers. ``dependent``: launch with programmatic
    dependent launch (``driver.dependent_launch``; the kernel waits for the one ahead itself,
    ``Stage.dependent_launch``). ``extras``: for a kernel with a fused epilogue, the number of its
    operands (their shapes last in ``arrays``; 0 for an activation alone): then the launcher is
    ``launch(a, b, c, alpha, beta, stream, e)`` with ``e`` their data pointers.

    Context: the function must be launched in its device's context. With one visible GPU the
    only context in play is that GPU's primary context, so it is made current once per host
    thread (as the CUDA runtime does on a thread's first call); with several GPUs every call
    checks the current context and, if it is another GPU's, switches for the launch and back.
    """

    multi = _driver.device_count() > 1
    lay = _layout(spec)
    raw = _driver.dependent_launch(grid, block, kernel.smem) if dependent else _driver.raw_launch()
    fn = ctypes.c_void_p(kernel.fn)
    ctx = kernel.ctx
    gx, gy, gz = grid
    bx, by, bz = block
    smem = kernel.smem
    tls = threading.local()
    streams: dict = {0: None}
    # word indices of the data pointers among the 64-bit array fields (_DATA in each), and
    # the byte offset of alpha, beta after them
    PA, PB, PC = lay.pointers[:3]
    base = len(lay.pointers) - (extras or 0)
    PW, PL = lay.pointers[3:5] if base == 5 else (0, 0)
    PE = lay.pointers[base:]  # a fused epilogue's operands
    if maps is not None and spec.count("M") != 2:
        raise ValueError(f"TMA launch of {kernel.name}: spec {spec!r} has no tensor maps")
    if split is not None and (not PW or "M" in spec):
        raise ValueError(f"split-K launch of {kernel.name}: spec {spec!r} has no workspace")
    SCALARS = lay.words * 8
    fixed = [
        SimpleNamespace(ptr=0, shape=a.shape, strides=getattr(a, "strides", None)) for a in arrays
    ]

    def first_in_thread():
        # this thread's parameter buffer for this launcher, with the fields the plan fixes
        # (sizes, shapes, strides) packed once; a call then writes 3 pointers and 2 scalars
        buf = ctypes.create_string_buffer(lay.struct.size)
        lay.struct.pack_into(buf, 0, *array_fields(fixed, lay.itemsizes), 0.0, 0.0)
        base = ctypes.addressof(buf)
        params = (ctypes.c_void_p * len(lay.sizes))(*(base + o for o in lay.offsets))
        words = (ctypes.c_int64 * lay.words).from_buffer(buf)
        floats = (ctypes.c_float * 2).from_buffer(buf, SCALARS)
        if not multi and _driver.current_context() != ctx:
            _driver.set_current_context(ctx)
        tls.keep = (buf, params)
        tls.b = (words, floats, ctypes.c_void_p(ctypes.addressof(params)))
        return tls.b

    def launch(a, b, c, alpha, beta, stream):
        try:
            words, floats, params = tls.b
        except AttributeError:
            words, floats, params = first_in_thread()
        words[PA] = a
        words[PB] = b
        words[PC] = c
        if split is not None:
            W, L = split(stream)
            words[PW] = W.ptr
            words[PL] = L.ptr
        elif maps is not None:
            words[PW], words[PL] = maps(a, b)
        floats[0] = alpha
        floats[1] = beta
        s = streams.get(stream, False)
        if s is False:
            s = streams[stream] = ctypes.c_void_p(stream)
            if len(streams) > 64:
                streams.clear()
                streams[0] = None
        cur = _driver.current_context() if multi else ctx
        if cur != ctx:
            _driver.set_current_context(ctx)
        rc = raw(fn, gx, gy, gz, bx, by, bz, smem, s, params, None)
        if rc == _driver.CUDA_ERROR_INVALID_CONTEXT and not multi:
            # someone popped this thread's context since its first call (e.g. a `with
            # cuda.gpus[0]:` block ended): make it current again, and launch
            _driver.set_current_context(ctx)
            rc = raw(fn, gx, gy, gz, bx, by, bz, smem, s, params, None)
        if cur != ctx and cur:
            _driver.set_current_context(cur)  # give the caller's GPU back
        if rc:
            _driver.check(rc, f"cuLaunchKernel({kernel.name}, grid={grid}, block={block})")

    if extras is None:
        return launch

    def launch_with(a, b, c, alpha, beta, stream, e):
        try:
            words = tls.b[0]
        except AttributeError:
            words = first_in_thread()[0]
        for i, ptr in zip(PE, e, strict=True):
            words[i] = ptr
        launch(a, b, c, alpha, beta, stream)

    return launch_with


class NumbaKernel:
    """The same interface over the Numba dispatcher: the simulator's path (and the fallback when
    the driver library cannot be opened). ``stream`` is a Numba stream or 0 there."""

    def __init__(self, name: str, dispatcher: Any, smem: int) -> None:
        self.name, self.dispatcher, self.smem = name, dispatcher, smem

    def launch(self, grid, block, stream, arrays, scalars, extras=None) -> None:
        args = [strided_array(a) for a in arrays]
        if extras is not None:  # a tuple argument: a fused epilogue's operands
            args.append(tuple(strided_array(e) for e in extras))
        args += [np.float32(s) for s in scalars]
        if not SIMULATOR and self.smem > 0:
            allow_dynamic_smem(self.dispatcher, tuple(args), self.smem)
        if not SIMULATOR and isinstance(stream, int):
            stream = cuda.external_stream(stream) if stream else 0
        self.dispatcher[grid, block, stream, self.smem](*args)

    def blocks_per_sm(self, threads: int) -> int:
        """Resident blocks per SM (:func:`blocks_per_sm` of the dispatcher, launched at least
        once; 1 on the simulator)."""
        return blocks_per_sm(self.dispatcher, threads, self.smem)

    def __repr__(self) -> str:
        return f"NumbaKernel({self.name}, smem={self.smem})"


class _HostView:
    """NumPy array interface over host memory at ``ptr`` (the simulator's "device" memory),
    keeping ``owner`` alive."""

    def __init__(
        self, ptr: int, shape: tuple, strides: tuple, owner: Any, typestr: str = "<f4"
    ) -> None:
        self.owner = owner
        self.__array_interface__ = {
            "data": (ptr, False),
            "shape": shape,
            "strides": strides,
            "typestr": typestr,
            "version": 3,
        }


def strided_array(a: Any) -> Any:
    """An array object over ``a.ptr`` with ``a``'s ``shape``, byte ``strides`` (None:
    C-contiguous; a batch stride of 0 repeats one matrix) and dtype (float32, float16, int32 or
    int64 (a tensor map); bfloat16 as its bits, uint16; float32 when ``a`` has none), for the
    Numba dispatcher: a view of the memory of the operand's object ``a.obj`` on the simulator, a
    CUDA Array Interface view on a GPU."""
    shape = tuple(a.shape)
    dtype = getattr(a, "dtype", None)
    if dtype is BF16:
        dtype = np.dtype(np.uint16)
    elif dtype not in (np.float16, np.int32, np.int64):
        dtype = np.dtype(np.float32)
    strides = getattr(a, "strides", None)
    if strides is None or len(strides) != len(shape):
        strides = tuple(
            dtype.itemsize * int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape))
        )
    if SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # simulator-only

        view = np.asarray(_HostView(a.ptr, shape, strides, a.obj, dtype.str))
        return FakeCUDAArray(view)
    cai = {
        "shape": shape,
        "strides": tuple(strides),
        "typestr": dtype.str,
        "data": (a.ptr, False),
        "version": 3,
        "stream": None,
    }
    return cuda.from_cuda_array_interface(cai, owner=a.obj, sync=False)


def direct_launch_available() -> bool:
    """Whether kernels are launched through the driver (a GPU and ``libcuda`` that opens)."""
    if SIMULATOR:
        return False
    try:
        _driver.lib()
    except OSError:
        return False
    return True


def load_kernel(
    dispatcher: Any,
    *,
    name: str,
    config: Any = None,
    variant: str = "",
    spec: str = STAGE_ARGS,
    smem: int = 0,
    device: DeviceInfo,
) -> Kernel | NumbaKernel:
    """``dispatcher`` compiled for ``spec`` (through the on-disk cache) and loaded on ``device``.

    Raises:
        RuntimeError: the kernel's parameter layout is not the one this module packs (a
            numba-cuda change), or it needs more than ``device.smem_optin`` bytes of SMEM.
        numba_gemm.launch.driver.CudaDriverError: the driver refused to load it.
    """
    label = f"{name}[{variant}]" if variant else name
    if smem > device.smem_optin:
        raise RuntimeError(
            f"{label} needs {smem} B of SMEM per block; {device.name} allows {device.smem_optin} B"
        )
    if not direct_launch_available():
        return NumbaKernel(label, dispatcher, smem)

    lay = _layout(spec)
    with _loaded_lock, cuda.gpus[device.id]:
        compiled = cache.load_or_compile(
            dispatcher,
            name=name,
            config=config,
            variant=variant,
            signature=numba_signature(spec),
            cc=tuple(device.cc),
        )
        known = _loaded.get((compiled.key, device.id, smem))
        if known is not None:  # plans of other shapes share the loaded module
            return known
        if tuple(compiled.params) != lay.sizes:
            raise RuntimeError(
                f"{label}: kernel parameters {tuple(compiled.params)} (bytes, from its PTX) are "
                f"not the layout numba_gemm packs for {spec!r} {lay.sizes}: {backend.NAME} "
                "changed its kernel ABI; the direct launch cannot be used with this version"
            )
        ctx = _driver.current_context()
        _, fn = _driver.load_function(compiled.cubin, compiled.entry)
        got = _driver.param_layout(fn, len(lay.sizes))
        want = list(zip(lay.offsets, lay.sizes, strict=True))
        if got is not None and got != want:
            raise RuntimeError(
                f"{label}: the driver reports parameters (offset, size) {got}, "
                f"numba_gemm packs {want}"
            )
        if smem > 0:  # (static SMEM counts against the 48 KB a launch gets without it)
            _driver.set_max_dynamic_smem(fn, smem)
        k = _loaded[(compiled.key, device.id, smem)] = Kernel(
            label, device, spec, smem, compiled, fn, ctx
        )
    return k


#: Loaded kernels by (cache key, GPU, dynamic SMEM): each cubin is loaded once per GPU and
#: process, whatever number of shapes (plans) use it.
_loaded: dict = {}
_loaded_lock = threading.RLock()


# --- occupancy and the dynamic-SMEM opt-in for the Numba dispatcher path (tuner, fallback) -------

_smem_opted_in: set = set()


def allow_dynamic_smem(kernel: Any, args: tuple, nbytes: int) -> None:
    """Let the Numba dispatcher ``kernel`` (for the types of ``args``) launch with ``nbytes`` of
    dynamic SMEM: sets ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` once per (kernel,
    signature, device), for any ``nbytes`` > 0: a kernel's static SMEM (e.g. its mbarriers)
    counts against the 48 KB a launch gets without the attribute, so 48 KB of dynamic SMEM may
    already need it. No-op on the simulator.

    Raises:
        numba.cuda.cudadrv.driver.CudaAPIError: ``nbytes`` exceeds the device's limit.
    """
    if SIMULATOR or nbytes <= 0:
        return
    from numba.cuda.cudadrv import driver  # GPU-only internal (absent on the simulator)

    sig = tuple(kernel.typeof_pyval(a) for a in args)
    device = cuda.get_current_device()
    key = (id(kernel), sig, device.id, nbytes)
    if key in _smem_opted_in:
        return
    compiled = kernel.compile(sig)
    handle = compiled._codelibrary.get_cufunc().handle
    attr = driver.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.driver.cuKernelSetAttribute(attr, nbytes, handle, device.id)
    _smem_opted_in.add(key)


def blocks_per_sm(kernel: Any, threads: int, dynamic_smem: int = 0) -> int:
    """Resident blocks per SM of a compiled Numba kernel (CUDA occupancy API, first compiled
    signature); 1 on the simulator.

    Raises:
        ValueError: the kernel has not been compiled yet (launch it once first).
    """
    if SIMULATOR:
        return 1
    if not kernel.overloads:
        raise ValueError("kernel not compiled yet: launch it once before asking its occupancy")
    compiled = next(iter(kernel.overloads.values()))
    cufunc = compiled._codelibrary.get_cufunc()
    return int(
        cuda.current_context().get_active_blocks_per_multiprocessor(cufunc, threads, dynamic_smem)
    )


def grid_resident(blocks: int, sms: int, blocks_per_sm: int) -> bool:
    """Whether a grid of ``blocks`` is resident all at once on ``sms`` SMs of a kernel that keeps
    ``blocks_per_sm`` resident (CUDA occupancy API): the licence for split-K's spread sum, whose
    blocks wait for the other slices of their tile (``kernels._splitk.make_fixup``). The wait
    is bounded, so a grid that is not resident after all (another stream's kernels on the
    SMs) still ends, only slower. False on the simulator, which runs one block at a time."""
    return not SIMULATOR and blocks <= sms * blocks_per_sm


# --- running a plan -----------------------------------------------------------------------------

#: An operand with a null pointer: what the launcher's buffer holds before a call's pointers.
_NOWHERE = Operand(None, 0, (), (), F32, 0)


class Runner:
    """Runs one ``plan.choose.Plan``: loads its kernel on the first call (through the on-disk
    cache), then launches it with a bound argument buffer (:func:`gemm_launcher`) on a GPU.

    ``run(A, B, C, alpha, beta, stream)`` enqueues the product for operands laid out as the plan's
    geometry says (their data pointers are what counts; no validation: ``api`` does it);
    ``run_plain(a, b, c, ...)`` takes the data pointers of 2-D C-contiguous operands (``sgemm``'s
    fast lane); ``launch(a, b, c, ...)`` takes device arrays (timing loops). After the first call
    on a GPU, ``run`` and ``run_plain`` are the bound launcher itself: pointers, scalars, stream,
    one foreign call.
    """

    def __init__(self, plan: Any, epilogue: Any = None, extra_shapes: tuple = ()) -> None:
        self.plan = plan
        #: a fused epilogue (``kernels._epilogue.Epilogue``, the stage's ``Stage.epilogue``) and
        #: the shapes of its operands; ``run`` then takes the operands (``extras``)
        self.epilogue, self.extra_shapes = epilogue, tuple(extra_shapes)
        #: the launch grid; for stream-K clamped to the loaded kernel's resident blocks
        self.grid = plan.grid
        st = plan.stage
        self._strided = st.batched  # kernel arguments: strided batches (spec S), else 2-D
        self._split_args = st.args == SPLIT_ARGS  # split-K's workspace and counters after C
        self._maps = st.tensor_maps is not None  # TMA: A's and B's tensor maps after C
        self._map_memo: dict = {}
        self._kernel: Any = None
        self._lock = threading.Lock()
        self._split_memo: dict = {}
        #: split-K's sum is spread over the slices (the whole grid is resident: ``_load``)
        self._spread = False

    def kernel(self) -> Any:
        """The main kernel, compiled and loaded on the first call."""
        k = self._kernel
        if k is None:
            with self._lock:
                if self._kernel is None:
                    self._kernel = self._load()
                k = self._kernel
        return k

    def _load(self) -> Any:
        p, epi = self.plan, self.epilogue
        st, layout = p.stage, p.geometry.layout
        with _epilogue_errors(epi):
            main = load_kernel(
                st.kernel_for(p.variant, layout, epi),
                name=st.name,
                config=dict(st.config),
                variant=variant_key(p.variant, layout)
                + ("" if epi is None else "+" + cache.epilogue_key(epi)),
                spec=st.args_for(epi),
                smem=p.smem,
                device=p.device,
            )
        if p.split_k == STREAM_K:  # no more blocks than can be resident
            fit = p.device.sm_count * main.blocks_per_sm(p.block[0])
            self.grid = (max(1, min(self.grid[0], fit)), 1, 1)
        elif p.split_k > 1 and self._split_args and st.wide_fixup:  # (the sums that spread)
            try:
                per_sm = main.blocks_per_sm(int(np.prod(p.block)))
            except ValueError:  # a Numba kernel not launched yet: no occupancy, no licence
                per_sm = 0
            self._spread = grid_resident(int(np.prod(self.grid)), p.device.sm_count, per_sm)
        if isinstance(main, Kernel):
            # from now on ``run_plain`` is the bound launcher and ``run`` hands it the operands'
            # pointers (instance attributes over the methods)
            M, N, K = p.M, p.N, p.K
            shapes = (
                list(p.geometry.arrays(_NOWHERE, _NOWHERE, _NOWHERE))
                if self._strided
                else [
                    Operand(None, 0, s, None, F32, 0)
                    for s in ((M, K), (N, K) if layout[1] == "T" else (K, N), (M, N))
                ]
            )
            if self._split_args:
                shapes += list(self._buffers(0))
            if self._maps:
                shapes += [Operand(None, 0, (TENSOR_MAP_WORDS,), None, I64, 0)] * 2
            shapes += [Operand(None, 0, sh, None, F32, 0) for sh in self.extra_shapes]
            launch = gemm_launcher(
                main,
                st.args_for(epi),
                shapes,
                self.grid,
                p.block,
                self._buffers if p.split_k != 1 else None,
                self._map_pointers if self._maps else None,
                st.dependent_launch,
                None if epi is None else len(self.extra_shapes),
            )
            if epi is None:
                self.run_plain = launch
                self.run = lambda A, B, C, alpha, beta, stream: launch(
                    A.ptr, B.ptr, C.ptr, alpha, beta, stream
                )
            else:
                self.run_epilogue = launch
                self.run = lambda A, B, C, alpha, beta, stream, extras: launch(
                    A.ptr, B.ptr, C.ptr, alpha, beta, stream, tuple(e.ptr for e in extras)
                )
        return main

    def _buffers(self, stream: Any) -> tuple[Operand, Operand]:
        """Split-K's workspace (3-D ``(1, SPLITK*M, N4)``, N4: N rounded up to a multiple of 4)
        and tile counters on ``stream``; for stream-K, ``(1, slots*BM, BN)``
        (``_streamk.partial_slots``) and a counter per tile; without either, the smallest such
        pair (the kernel does not touch them). Memoized per (stream, host thread) until a
        workspace grows (``workspace.generation``): this runs in every split-K launch, and the
        lookup through ``split_operands`` costs microseconds."""
        key = (stream, threading.get_ident())
        got = self._split_memo.get(key)
        if got is not None and got[0] == workspace.generation:
            return got[1]
        gen = workspace.generation
        res = self._find_buffers(stream)
        if len(self._split_memo) >= 64:
            self._split_memo.clear()
        self._split_memo[key] = (gen, res)
        return res

    def _map_operands(self, a: int, b: int) -> tuple[Operand, Operand]:
        """A's and B's tensor maps (``launch.tensormap``, as operands) for operands at data
        pointers ``a`` and ``b``, memoized per pointer pair until the map store starts over
        (``tensormap.generation``): this runs in every launch of a TMA stage."""
        got = self._map_memo.get((a, b))
        if got is not None and got[0] == tensormap.generation:
            return got[1]
        gen = tensormap.generation
        p = self.plan
        M, N, K, layout = p.M, p.N, p.K, p.geometry.layout
        dtype, box_a, box_b = p.stage.tensor_maps(layout)
        item = 4 if dtype == "float32" else 2
        b_shape = (N, K) if layout[1] == "T" else (K, N)
        dev = p.device.id
        res = (
            operand(
                tensormap.device_map(tensormap.matrix_spec(dtype, (M, K), K * item, box_a, a), dev)
            ),
            operand(
                tensormap.device_map(
                    tensormap.matrix_spec(dtype, b_shape, b_shape[1] * item, box_b, b), dev
                )
            ),
        )
        if len(self._map_memo) >= 64:
            self._map_memo.clear()
        self._map_memo[(a, b)] = (gen, res)
        return res

    def _map_pointers(self, a: int, b: int) -> tuple[int, int]:
        """The device pointers of :meth:`_map_operands` (the bound launcher's ``maps``)."""
        ta, tb = self._map_operands(a, b)
        return ta.ptr, tb.ptr

    def _find_buffers(self, stream: Any) -> tuple[Operand, Operand]:
        p = self.plan
        s, M, N, tiles, dev = p.split_k, p.M, p.N, p.tiles, p.device.id
        if s == STREAM_K:
            # partials are written for the shared tiles only (those past the whole-tile waves):
            # a grid over the tiles of a large product would otherwise size it by all of them
            bm, bn, G = p.stage.tile[0], p.stage.tile[1], self.grid[0]
            shared = tiles - _streamk.dp_tiles(tiles, G)
            return workspace.split_operands(
                _streamk.partial_slots(shared, G) * bm, bn, tiles, stream, dev
            )
        if s == 1:
            M = N = 1
        # a tile is a block of the grid's x-y plane (``_splitk.make_fixup``), and one counter
        # more is the licence for the spread sum
        tiles = self.grid[0] * self.grid[1]
        counters = tiles * _splitk.counters_per_tile(s) + self._spread if s > 1 else 1
        # rows of whole 16-byte units whatever C's: the tile sums read them 128 bits at a time
        return workspace.split_operands(s * M, -(-N // 4) * 4, counters, stream, dev)

    def run(
        self,
        A: Operand,
        B: Operand,
        C: Operand,
        alpha: float,
        beta: float,
        stream: Any,
        extras: tuple = (),
    ) -> None:
        """Enqueue the product on ``stream`` (a handle on a GPU; a Numba stream or 0 on the
        simulator); ``extras``: the fused epilogue's operands (a runner with one only)."""
        main = self._kernel or self.kernel()
        if "run" in self.__dict__:  # the bound launcher, from the first call on
            if self.epilogue is None:
                self.run(A, B, C, alpha, beta, stream)
            else:
                self.run(A, B, C, alpha, beta, stream, extras)
            return
        p = self.plan
        if self._strided:
            args = p.geometry.arrays(A, B, C)
        elif p.geometry.layout[1] == "T":  # a 2-D stage takes B as stored, (N, K)
            Bt = Operand(B.obj, B.ptr, B.shape[::-1], B.strides[::-1], B.dtype, B.device, B.stream)
            args = (A, Bt, C)
        else:
            args = (A, B, C)
        if self._split_args:
            args = (*args, *self._buffers(stream))
        if self._maps:
            args = (*args, *self._map_operands(A.ptr, B.ptr))
        if self.epilogue is None:
            main.launch(self.grid, p.block, stream, args, (alpha, beta))
        else:
            main.launch(self.grid, p.block, stream, args, (alpha, beta), extras)

    def run_plain(self, a: int, b: int, c: int, alpha: float, beta: float, stream: Any) -> None:
        """:meth:`run` for 2-D C-contiguous operands given by their data pointers (a plan of the
        plain or dense geometry)."""
        self.run(*self._plain_operands(a, b, c), alpha, beta, stream)

    def _plain_operands(self, a: int, b: int, c: int) -> tuple[Operand, Operand, Operand]:
        """A, B, C as 2-D C-contiguous float32 operands at data pointers ``a``, ``b``, ``c``."""
        p = self.plan
        M, N, K, d = p.M, p.N, p.K, p.device.id
        return (
            Operand(None, a, (M, K), (4 * K, 4), F32, d),
            Operand(None, b, (K, N), (4 * N, 4), F32, d),
            Operand(None, c, (M, N), (4 * N, 4), F32, d),
        )

    def run_epilogue(
        self, a: int, b: int, c: int, alpha: float, beta: float, stream: Any, e: tuple
    ) -> None:
        """:meth:`run_plain` with a fused epilogue's operands given by their data pointers ``e``
        (float32, of the runner's ``extra_shapes``): ``api``'s fast lane for a bias."""
        d, shapes = self.plan.device.id, self.extra_shapes
        extras = tuple(Operand(None, x, sh, None, F32, d) for x, sh in zip(e, shapes, strict=True))
        self.run(*self._plain_operands(a, b, c), alpha, beta, stream, extras)

    def launch(
        self, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0, stream: Any = 0
    ) -> None:
        """Enqueue ``c = alpha * a @ b + beta * c`` for device arrays of any supported kind laid
        out as the plan's geometry says, without validation (timing loops: ``sgemm`` is the
        checked entry point)."""
        self.run(
            operand(a), operand(b), operand(c), float(alpha), float(beta), stream_handle(stream)
        )


class StagedRunner(Runner):
    """Runs a staged plan (``plan.staging``): the operands its shape forces through aligned
    copies (and any whose base pointer is unaligned) are copied into this stream's padded
    buffers (``workspace.staging_buffers``; ``kernels._pad.copy_padded``, compiled for each
    element type it moves: float32, float16, bfloat16 as bits), the inner plan runs there, and
    C is copied back."""

    def __init__(self, plan: Any) -> None:
        super().__init__(plan)
        self.inner = runner(plan.inner)
        self._copies: dict = {}

    def _copy(self, dtype: Any) -> Any:
        """The copy kernel for elements of ``dtype`` (:func:`copy_kernel`), noted as loaded."""
        spec = _C_SPEC[dtype]
        k = self._copies.get(spec)
        if k is None:
            k = self._copies[spec] = copy_kernel(self.plan.device, dtype)
        return k

    def kernel(self) -> Any:
        """The inner plan's main kernel (and the copy kernels), loaded on the first call."""
        if not self._copies:
            s = self.plan.staging
            for name in dict.fromkeys((s.ab_type, s.c_type)):
                self._copy(DTYPES[name])
            with self._lock:
                self._kernel = self.inner.kernel()
        return self._kernel

    def run(
        self, A: Operand, B: Operand, C: Operand, alpha: float, beta: float, stream: Any
    ) -> None:
        """The copies, the inner plan and the copy back on ``stream``. An operand the shape does
        not force through a copy is used in place when its base pointer is aligned."""
        if not self._copies:
            self.kernel()
        p = self.plan
        s, M, N, K = p.staging, p.M, p.N, p.K
        bt = p.geometry.layout[1] == "T"
        A2, B2, C2 = workspace.staging_buffers(M, s, stream, p.device.id, bt)
        a = A2 if s.a or A.ptr & 15 else A
        b = B2 if s.b or B.ptr & 15 else B
        c = C2 if s.c or C.ptr & 15 else C
        block = (_pad.BLOCK, 1, 1)
        if a is not A:
            z = A.dtype.itemsize
            src = (  # A stored transposed: its dense (K, M) storage, read as (M, K)
                Operand(A.obj, A.ptr, (1, M, K), (0, z, z * M), A.dtype, A.device)
                if s.at
                else _storage(A, M, K)
            )
            self._copy(A.dtype).launch(_pad_grid(a), block, stream, (_as3(a), src), ())
        if b is not B:
            src = _storage(B, *((N, K) if bt else (K, N)))
            self._copy(B.dtype).launch(_pad_grid(b), block, stream, (_as3(b), src), ())
            if bt:  # the inner plan takes B as the caller gives it: the (K, N) view of (N, K)
                b = Operand(b.obj, b.ptr, b.shape[::-1], b.strides[::-1], b.dtype, b.device)
        copy_c = self._copy(C.dtype) if c is not C else None
        if copy_c is not None and beta != 0.0:
            copy_c.launch(_pad_grid(c), block, stream, (_as3(c), _storage(C, M, N)), ())
        self.inner.run(a, b, c, alpha, beta, stream)
        if copy_c is not None:
            out = _storage(C, M, N)
            copy_c.launch(_pad_grid(out), block, stream, (out, _as3(c)), ())


class ApplyRunner:
    """Runs a plan whose kernel fuses no epilogue (``Stage.epilogue`` False, or a staged plan):
    the plan's product, then the epilogue over C in a kernel of its own (:func:`apply_epilogue`),
    on the same stream."""

    def __init__(self, plan: Any, epilogue: Any) -> None:
        self.plan, self.epilogue = plan, epilogue
        self.inner = runner(plan)

    def kernel(self) -> Any:
        """The inner plan's main kernel, loaded on the first call."""
        return self.inner.kernel()

    def run(
        self,
        A: Operand,
        B: Operand,
        C: Operand,
        alpha: float,
        beta: float,
        stream: Any,
        extras: tuple = (),
    ) -> None:
        """The product on ``stream``, then C = the epilogue of C (operands ``extras``)."""
        self.inner.run(A, B, C, alpha, beta, stream)
        apply_epilogue(self.plan, C, self.epilogue, extras, stream)


#: The apply kernel's C argument spec by C's element type.
_C_SPEC = {F32: "S", np.dtype(np.float16): "Q", BF16: "R"}


def apply_epilogue(plan: Any, C: Operand, epilogue: Any, extras: tuple, stream: Any) -> None:
    """Enqueue ``C = finish(C)`` (``kernels._epilogue.make_apply``) over the plan's C (a strided
    batch as its geometry says; a 16-bit C is 2-D) on ``stream``."""
    g = plan.geometry
    if C.dtype is F32:
        c3 = g.arrays(C, C, C)[2]
    else:
        M, N = C.shape
        c3 = Operand(C.obj, C.ptr, (1, M, N), (0, N * 2, 2), C.dtype, C.device)
    spec = _C_SPEC[C.dtype]
    key = ("apply", plan.device.id, spec, epilogue)
    k = _aux.get(key)
    if k is None:
        with _epilogue_errors(epilogue):
            k = load_kernel(
                _epilogue.make_apply(epilogue),
                name="epilogue_apply",
                variant=spec + "+" + cache.epilogue_key(epilogue),
                spec=spec + epilogue.spec,
                device=plan.device,
            )
        _aux[key] = k
    b, M, N = c3.shape
    bx, by = _epilogue.APPLY_BLOCK
    grid = (cdiv(N, bx), cdiv(M, by), b)
    k.launch(grid, (bx, by, 1), stream, (c3,), (), extras)


def _storage(x: Operand, rows: int, cols: int) -> Operand:
    """The dense row-major ``(rows, cols)`` storage at ``x.ptr`` as the copy kernel's
    ``(1, rows, cols)`` strided array of ``x``'s element type (B stored transposed: ``(N, K)``,
    whatever view of it ``x`` describes)."""
    z = x.dtype.itemsize
    return Operand(x.obj, x.ptr, (1, rows, cols), (0, z * cols, z), x.dtype, x.device)


def _as3(x: Operand) -> Operand:
    """A C-contiguous 2-D operand (a workspace view) as the copy kernel's array."""
    return _storage(x, *x.shape)


def _pad_grid(x: Operand) -> tuple[int, int, int]:
    rows, cols = x.shape[-2:]
    return (cdiv(cols, _pad.BLOCK), min(cdiv(rows, _pad.ROWS), _pad.MAX_GRID_Y), 1)


_runners: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_runners_lock = threading.Lock()


@contextlib.contextmanager
def _epilogue_errors(epilogue: Any) -> Iterator[None]:
    """A user's epilogue function that does not compile (Numba's typing or lowering error, while
    its kernel is built before any launch) as a ``TypeError`` that names it."""
    try:
        yield
    except NumbaError as e:
        if epilogue is None or epilogue.fn is None:
            raise
        py = getattr(epilogue.fn, "py_func", epilogue.fn)
        raise TypeError(
            f"the epilogue function {py.__name__} does not compile as a CUDA device function of "
            f"(float32 value, int row, int col, *epilogue_args) returning a number: "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from e


def epilogue_runner(plan: Any, epilogue: Any, extra_shapes: tuple) -> Runner | ApplyRunner:
    """A runner of ``plan`` with a fused ``epilogue`` whose operands have ``extra_shapes``: the
    stage's kernel built with it (``Stage.epilogue``, an unstaged plan), else an
    :class:`ApplyRunner`. (A new one per call: ``dispatch.PLANS`` keeps them.)"""
    if plan.stage.epilogue and plan.staging is None:
        return Runner(plan, epilogue, extra_shapes)
    return ApplyRunner(plan, epilogue)


def runner(plan: Any) -> Runner:
    """The :class:`Runner` of ``plan`` (a :class:`StagedRunner` for a staged one), one per plan
    object for as long as the plan lives."""
    r = _runners.get(plan)
    if r is None:
        # made outside the lock: a staged plan's runner asks for its inner plan's
        made = (StagedRunner if plan.staging is not None else Runner)(plan)
        with _runners_lock:
            r = _runners.setdefault(plan, made)
    return r


_aux: dict = {}
_aux_lock = threading.Lock()


def scale_kernel(dev: DeviceInfo) -> Any:
    """The ``C = beta * C`` kernel (products with K == 0) loaded on ``dev`` (once per device)."""
    key = ("scale", dev.id)
    k = _aux.get(key)
    if k is None:
        k = _aux[key] = load_kernel(_scale.scale_c, name="scale_c", spec="Sf", device=dev)
    return k


def copy_kernel(dev: DeviceInfo, dtype: Any = F32) -> Any:
    """``kernels._pad.copy_padded`` for elements of ``dtype`` loaded on ``dev`` (once per device
    and type): the staging copy, also what packs ``grouped_mm``'s list form."""
    spec = _C_SPEC[dtype]
    key = ("copy", dev.id, spec)
    k = _aux.get(key)
    if k is None:
        with _aux_lock:
            k = _aux.get(key)
            if k is None:
                k = _aux[key] = load_kernel(
                    _pad.copy_padded,
                    name="copy_padded",
                    variant="" if spec == "S" else spec,  # (float32: the cache's old key)
                    spec=spec + spec,
                    device=dev,
                )
    return k


def copy_matrix(dst: Operand, src: Operand, dev: DeviceInfo, stream: Any) -> None:
    """Enqueue ``dst = src`` on ``stream``: two 2-D operands of one shape and element type, any
    row pitch (strides in bytes, unit stride along the rows)."""
    (rows, cols), z = src.shape, src.dtype.itemsize
    if rows == 0 or cols == 0:
        return
    d3, s3 = (
        Operand(
            x.obj,
            x.ptr,
            (1, rows, cols),
            (0, x.strides[0] if rows > 1 else z * cols, z),
            x.dtype,
            x.device,
        )
        for x in (dst, src)
    )
    copy_kernel(dev, src.dtype).launch(_pad_grid(d3), (_pad.BLOCK, 1, 1), stream, (d3, s3), ())
