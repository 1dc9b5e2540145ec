"""The few CUDA driver API calls of the direct launch path, through ``ctypes``.

Numba's dispatcher spends ~50 us of Python per launch (type the arguments, look up the overload,
build a ``DeviceNDArray`` per array, convert each field to ctypes, go through ``cuda.core``). A
GEMM at 128^3 runs for ~10 us. So a plan loads its cubin itself (``cuModuleLoadData``), keeps the
``CUfunction`` and launches it with ``cuLaunchKernel`` from a per-thread, pre-built parameter
buffer: one ``struct.pack_into`` and one foreign call per launch.

Every call's return code is checked (:class:`CudaDriverError` names the failing call and the
driver's error name). Only the real-GPU path imports this module; the simulator never does.

Source: CUDA Driver API reference, "Module Management" (cuModuleLoadData, cuModuleGetFunction),
"Execution Control" (cuLaunchKernel, cuLaunchKernelEx, cuFuncSetAttribute, cuFuncGetParamInfo),
"Context Management", "Event Management"; CUDA Programming Guide, "Programmatic Dependent Launch
and Synchronization".
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from typing import Any

_c_void_p = ctypes.c_void_p
_c_uint = ctypes.c_uint
_c_int = ctypes.c_int
_c_size_t = ctypes.c_size_t

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_EVENT_DISABLE_TIMING = 2
#: ``cudaStreamLegacy`` / ``cudaStreamPerThread`` handles (CUDA Array Interface v3 streams 1, 2).
CU_STREAM_LEGACY = 1
CU_STREAM_PER_THREAD = 2


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


@functools.cache
def lib() -> ctypes.CDLL:
    """The CUDA driver library (``libcuda.so.1``; ``nvcuda.dll`` on Windows), with the argument
    types of the functions used here declared (pointers must not be truncated to C ints)."""
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    cu = ctypes.CDLL(name)
    sigs = {
        "cuGetErrorName": [_c_int, ctypes.POINTER(ctypes.c_char_p)],
        "cuCtxGetCurrent": [ctypes.POINTER(_c_void_p)],
        "cuCtxSetCurrent": [_c_void_p],
        "cuModuleLoadData": [ctypes.POINTER(_c_void_p), ctypes.c_char_p],
        "cuModuleGetFunction": [ctypes.POINTER(_c_void_p), _c_void_p, ctypes.c_char_p],
        "cuFuncSetAttribute": [_c_void_p, _c_int, _c_int],
        "cuLaunchKernel": [
            _c_void_p,
            _c_uint,
            _c_uint,
            _c_uint,
            _c_uint,
            _c_uint,
            _c_uint,
            _c_uint,
            _c_void_p,
            _c_void_p,
            _c_void_p,
        ],
        "cuEventCreate": [ctypes.POINTER(_c_void_p), _c_uint],
        "cuEventRecord": [_c_void_p, _c_void_p],
        "cuStreamWaitEvent": [_c_void_p, _c_void_p, _c_uint],
        "cuPointerGetAttribute": [_c_void_p, _c_int, ctypes.c_uint64],
        "cuDeviceGetCount": [ctypes.POINTER(_c_int)],
        "cuTensorMapEncodeTiled": [
            _c_void_p,
            _c_int,
            _c_uint,
            _c_void_p,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(_c_uint),
            ctypes.POINTER(_c_uint),
            _c_int,
            _c_int,
            _c_int,
            _c_int,
        ],
        "cuOccupancyMaxActiveBlocksPerMultiprocessor": [
            ctypes.POINTER(_c_int),
            _c_void_p,
            _c_int,
            _c_size_t,
        ],
    }
    for fn, argtypes in sigs.items():
        f = getattr(cu, fn)
        f.argtypes = argtypes
        f.restype = _c_int
    if hasattr(cu, "cuFuncGetParamInfo"):  # CUDA 12.4+ drivers
        cu.cuFuncGetParamInfo.argtypes = [
            _c_void_p,
            _c_size_t,
            ctypes.POINTER(_c_size_t),
            ctypes.POINTER(_c_size_t),
        ]
        cu.cuFuncGetParamInfo.restype = _c_int
    return cu


@functools.cache
def raw_launch() -> Any:
    """``cuLaunchKernel`` without declared argument types: callers pass ``c_void_p`` (or None)
    for the function, stream and parameter array, and small ints for the geometry, so ctypes
    converts nothing. The GIL is released during the call, as for every ``CDLL`` function: a
    launch can block on a full launch queue, and a stream's host callback needs the GIL to drain
    it. (Holding the GIL with ``PyDLL`` measured no faster on an H200 host: 4.78 us either way.)"""
    return _untyped("cuLaunchKernel")


@functools.cache
def _untyped(symbol: str) -> Any:
    """The driver function ``symbol`` with no argument types declared, returning an int."""
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    f = getattr(ctypes.CDLL(name), symbol)
    f.restype = _c_int
    return f


#: ``CUlaunchAttributeID`` of programmatic dependent launch (``cuLaunchKernelEx``).
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: an id, padding to 8 bytes, and a 64-byte value union whose first
    int is the setting of the attributes used here."""

    _fields_ = [("id", _c_int), ("pad", ctypes.c_char * 4), ("value", _c_int * 16)]


class LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig``: grid, block, dynamic SMEM, stream and the attributes of a launch."""

    _fields_ = [
        ("grid", _c_uint * 3),
        ("block", _c_uint * 3),
        ("smem", _c_uint),
        ("stream", _c_void_p),
        ("attrs", ctypes.POINTER(LaunchAttribute)),
        ("count", _c_uint),
    ]


def dependent_launch(grid: tuple, block: tuple, smem: int) -> Any:
    """A function with :func:`raw_launch`'s arguments (``fn, gx, gy, gz, bx, by, bz, smem,
    stream, params, extra``) that launches with ``cuLaunchKernelEx`` and the programmatic
    stream serialization attribute (*programmatic dependent launch*): the kernel may start
    before the one ahead of it in the stream has finished, once that one's blocks have all
    executed ``griddepcontrol.launch_dependents`` or exited; it must execute
    ``griddepcontrol.wait`` before it touches GMEM (``ptx.tma.pdl_wait``). The geometry is
    ``grid``, ``block`` and ``smem`` (the arguments' copies are ignored); each host thread gets
    its own ``CUlaunchConfig``, whose stream is set per call."""
    ex = _untyped("cuLaunchKernelEx")
    tls = threading.local()

    def config():
        attr = LaunchAttribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        attr.value[0] = 1
        cfg = LaunchConfig((_c_uint * 3)(*grid), (_c_uint * 3)(*block), smem, None)
        cfg.attrs, cfg.count = ctypes.pointer(attr), 1
        tls.cfg = (cfg, ctypes.byref(cfg), attr)
        return tls.cfg

    def launch(fn, gx, gy, gz, bx, by, bz, nbytes, stream, params, extra):
        try:
            cfg, ref, _ = tls.cfg
        except AttributeError:
            cfg, ref, _ = config()
        cfg.stream = stream.value if stream is not None else None
        return ex(ref, fn, params, extra)

    return launch


#: ``cuLaunchKernel``'s answer when no (or a destroyed) context is current in the calling thread.
CUDA_ERROR_INVALID_CONTEXT = 201


@functools.cache
def device_count() -> int:
    """CUDA devices visible to this process."""
    n = _c_int()
    check(lib().cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


def error_name(rc: int) -> str:
    s = ctypes.c_char_p()
    if lib().cuGetErrorName(rc, ctypes.byref(s)) == 0 and s.value:
        return s.value.decode()
    return f"CUresult {rc}"


def check(rc: int, what: str) -> None:
    """Raise :class:`CudaDriverError` unless ``rc`` is ``CUDA_SUCCESS``."""
    if rc:
        raise CudaDriverError(f"{what} failed: {error_name(rc)} ({rc})")


def current_context() -> int:
    """The calling thread's current CUDA context handle (0 if none)."""
    ctx = _c_void_p()
    check(lib().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    return ctx.value or 0


def set_current_context(ctx: int) -> None:
    check(lib().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def load_function(cubin: bytes, entry: str) -> tuple[int, int]:
    """Load ``cubin`` into the current context; ``(module, function)`` handles of ``entry``.

    The module is never unloaded: plans live as long as the process.
    """
    mod, fn = _c_void_p(), _c_void_p()
    check(lib().cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
    check(
        lib().cuModuleGetFunction(ctypes.byref(fn), mod, entry.encode()),
        f"cuModuleGetFunction({entry[:60]}...)",
    )
    return mod.value, fn.value


def set_max_dynamic_smem(fn: int, nbytes: int) -> None:
    """Opt ``fn`` in to ``nbytes`` of dynamic SMEM per block (needed above 48 KB)."""
    check(
        lib().cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes),
        f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})",
    )


def param_layout(fn: int, count: int) -> list[tuple[int, int]] | None:
    """``[(offset, size)]`` of the first ``count`` kernel parameters as the driver sees them;
    None when the driver lacks ``cuFuncGetParamInfo``. Only indices below ``count`` are asked
    for: a query past the last parameter fails with ``CUDA_ERROR_INVALID_VALUE``, which
    compute-sanitizer reports as an API error on every kernel load.

    Raises:
        CudaDriverError: the function has fewer than ``count`` parameters.
    """
    cu = lib()
    if not hasattr(cu, "cuFuncGetParamInfo"):
        return None
    out = []
    for i in range(count):
        off, size = _c_size_t(), _c_size_t()
        check(
            cu.cuFuncGetParamInfo(fn, i, ctypes.byref(off), ctypes.byref(size)),
            f"cuFuncGetParamInfo({i})",
        )
        out.append((off.value, size.value))
    return out


def blocks_per_sm(fn: int, threads: int, smem: int) -> int:
    """``cuOccupancyMaxActiveBlocksPerMultiprocessor``: resident blocks of ``fn`` per SM with
    ``threads`` per block and ``smem`` bytes of dynamic SMEM."""
    n = _c_int()
    check(
        lib().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), fn, threads, smem),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    )
    return n.value


def launch(fn: int, grid: tuple, block: tuple, smem: int, stream: int, params: int) -> None:
    """``cuLaunchKernel`` with 3-D ``grid`` and ``block`` and a ``void*[]`` of parameter
    addresses at ``params``."""
    gx, gy, gz = grid
    bx, by, bz = block
    rc = lib().cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, smem, stream, params, None)
    if rc:
        check(rc, f"cuLaunchKernel(grid={grid}, block={block}, smem={smem})")


_tls = threading.local()


def wait_for(producer: int, consumer: int, ctx: int) -> None:
    """Make stream ``consumer`` wait, on the device, for the work queued so far on ``producer``
    (an event recorded there); the host does not block. Done in context ``ctx`` (the operands'
    GPU), made current for the purpose and the caller's given back. One event per host thread
    and context."""
    cur = current_context()
    if cur != ctx:
        set_current_context(ctx)
    try:
        events = getattr(_tls, "events", None)
        if events is None:
            events = _tls.events = {}
        ev = events.get(ctx)
        if ev is None:
            h = _c_void_p()
            check(lib().cuEventCreate(ctypes.byref(h), CU_EVENT_DISABLE_TIMING), "cuEventCreate")
            ev = events[ctx] = h.value
        check(lib().cuEventRecord(ev, producer), "cuEventRecord")
        check(lib().cuStreamWaitEvent(consumer, ev, 0), "cuStreamWaitEvent")
    finally:
        if cur and cur != ctx:
            set_current_context(cur)


#: ``CU_TENSOR_MAP_L2_PROMOTION_L2_128B``: the TMA fills L2 in 128-byte lines (a tile's rows).
CU_TENSOR_MAP_L2_PROMOTION_128B = 2


def encode_tensor_map(
    out: int, dtype: int, address: int, dims, strides, box, swizzle: int, l2: int
) -> None:
    """``cuTensorMapEncodeTiled`` into the 128 bytes at host address ``out`` (64-byte aligned):
    ``dims``/``box`` innermost first (elements), ``strides`` in bytes for dimensions 1..,
    element strides 1, no interleave, zero fill out of bounds; ``dtype``, ``swizzle`` and ``l2``
    the driver's enum values. (Rank, alignment and sizes are checked before: ``ptx.tma``.)"""
    rank = len(dims)
    u64, u32 = ctypes.c_uint64, _c_uint
    check(
        lib().cuTensorMapEncodeTiled(
            out,
            dtype,
            rank,
            address,
            (u64 * rank)(*dims),
            (u64 * max(1, rank - 1))(*strides),
            (u32 * rank)(*box),
            (u32 * rank)(*([1] * rank)),
            0,
            swizzle,
            l2,
            0,
        ),
        f"cuTensorMapEncodeTiled(dims={tuple(dims)}, box={tuple(box)})",
    )


CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


def pointer_device(ptr: int) -> int:
    """Ordinal of the GPU that holds device address ``ptr``."""
    dev = _c_int()
    check(
        lib().cuPointerGetAttribute(
            ctypes.addressof(dev), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr
        ),
        "cuPointerGetAttribute(DEVICE_ORDINAL)",
    )
    return dev.value
