"""On-disk cache of compiled kernels (cubin + entry name), shared by every process of a user.

Compiling one stage kernel costs 3-9 s (Numba typing and lowering, NVVM, nvJitLink/ptxas), paid
again by every new process. :func:`load_or_compile` pays it once per kernel, configuration,
variant, compute capability and toolchain: it returns a :class:`CompiledKernel` (the linked cubin,
its mangled entry name and the byte size of each parameter), read from
``cache_dir()/<key>.kernel`` when present and valid, else compiled with Numba and written there.
The launcher (``numba_gemm.launch``) loads the cubin with ``cuModuleLoadData`` and launches the
entry itself; ``python -m numba_gemm.tools.precompile`` fills the cache ahead of time.

The key is a SHA-256 over everything that decides the machine code: this file's format version,
``numba_gemm.__version__``, a digest of the kernel sources (``kernels/*.py``, ``vecmem.py``,
``cpasync.py``, ``device.py`` and the kernel function's own file), the kernel's module, qualname
and closure values (tile constants, captured device functions, recursively), the stage name,
configuration and variant, the Numba signature, the dispatcher's ``targetoptions`` (with
``launch_bounds``, ``lto``, ``max_registers``), the compute capability and the toolchain
(numba-cuda, numba, llvmlite, NVVM, nvJitLink versions and ``NUMBA_FORCE_CUDA_CC``).

An entry is one file: 8 magic bytes, the header's length (4 bytes, little-endian) and SHA-256
(32 bytes), the JSON header (the key material, entry name, parameter sizes, SHA-256 and size of
the cubin, creation time), then the cubin. Writers write a uniquely named temporary file in the
same directory and ``os.replace`` it into place, so a reader sees a whole entry or none and
concurrent writers of one key both succeed (the last one wins; both wrote the same code). A reader
that finds a corrupt (bad magic, truncated, checksum mismatch) or stale (key material differs)
entry warns with :class:`NumbaGemmCacheWarning`, recompiles and overwrites it. An unwritable cache
directory is warned about once; compilation then goes on without caching.

Source of the idea: Triton's on-disk kernel cache (``triton/runtime/cache.py``: a hash of source,
compiler version and options names a directory of compiled binaries with a JSON metadata file
written atomically). numba-cuda's own ``@cuda.jit(cache=True)`` is not enough here: its index key
ignores ``launch_bounds`` (a tuned ``MINB`` would load the cubin of another configuration), and
kernels that call ``@intrinsic`` functions (``vecmem``, ``cpasync``) get a new key in every
process, so they are never found again.

Cheap to import: nothing here imports Numba's compiler or loads NVVM until a key or a compile is
needed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import marshal
import os
import re
import secrets
import struct
import threading
import time
import types
import warnings
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import platformdirs

from .._version import __version__
from ..device import SIMULATOR, gpu_available

#: Version of the entry format and of the key material; bump it when either changes.
FORMAT = 1

#: First bytes of every entry file.
MAGIC = b"NBGEMMK\x00"
_HEADER_LEN = struct.Struct("<I")
#: Suffix of entry files; temporary files are ``.<key>.<pid>.<thread>.<random>.tmp``.
SUFFIX = ".kernel"
#: Environment variable that overrides :func:`cache_dir`.
ENV_DIR = "NUMBA_GEMM_CACHE_DIR"

#: Byte size of a PTX parameter type by its bit width (``.u64``, ``.f32``, ``.b8``, ...).
_PTX_PARAM = re.compile(r"\.[usbf](8|16|32|64)\b")
_PTX_ARRAY = re.compile(r"\[(\d+)\]\s*$")

#: ``numba_gemm/``: the kernels' sources are digested relative to it.
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


class NumbaGemmCacheWarning(UserWarning):
    """A cache entry was ignored (corrupt or stale) or the cache directory is unusable."""


@dataclass(frozen=True)
class CompiledKernel:
    """One linked kernel, ready for ``cuModuleLoadData`` + ``cuModuleGetFunction``.

    Attributes:
        cubin: the linked cubin (ELF) for ``cc``.
        entry: mangled name of the kernel entry in the cubin.
        params: byte size of each kernel parameter, in order, from the PTX ``.entry``; a Numba
            2-D array is 9 parameters of 8 bytes (meminfo, parent, nitems, itemsize, data,
            shape[0], shape[1], strides[0], strides[1]), a float32 scalar one of 4 bytes; under
            numba-cuda-mlir an array is an MLIR memref descriptor (``launcher.memref_fields``).
        key: hex SHA-256 of the key material (see :func:`kernel_key`).
        from_cache: True when read from disk, False when compiled by this process.
    """

    cubin: bytes
    entry: str
    params: tuple[int, ...]
    key: str
    from_cache: bool


# --- where ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def offline_device(cc: tuple[int, int]) -> Iterator[None]:
    """Let kernels that call device functions compile without a GPU.

    numba-cuda compiles a called device function for ``get_current_device()``'s compute
    capability, which needs a driver. With no GPU, answer with ``cc`` for the duration.
    numba-cuda-mlir asks the driver for the host's compute capability even when the target's
    is given, unless its module global ``tools._cached_cc`` is set (a private name of 0.6.0,
    docs/numba-cuda-mlir.md): with no GPU it is set to ``cc`` for the duration.
    """
    from .. import backend  # at call time: importing this module must not import a compiler

    cuda = backend.cuda  # at call time: the simulator or the GPU, as configured then
    if cuda.is_available():
        yield
        return
    if backend.MLIR:
        import numba_cuda_mlir.tools as tools  # the optional backend's internal, only with it
        from numba_cuda_mlir.numba_cuda.core import compiler_lock  # the optional backend

        # under the compiler's (re-entrant) lock, as _compile_mlir sets it: no other thread's
        # compile sees this cc, or resets it mid-compile
        with compiler_lock.global_compiler_lock:
            saved_cc = tools._cached_cc
            tools._cached_cc = tuple(cc[:2])
            try:
                yield
            finally:
                tools._cached_cc = saved_cc
        return
    import numba.cuda.dispatcher as dispatcher  # GPU-only internal (absent on the simulator)

    class _Device:
        compute_capability = tuple(cc[:2])

    saved = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: _Device()
    try:
        yield
    finally:
        dispatcher.get_current_device = saved


def cache_dir() -> Path:
    """The cache directory: ``$NUMBA_GEMM_CACHE_DIR`` if set, else ``kernels`` in the platform's
    user cache directory (``platformdirs.user_cache_dir("numba_gemm")``; on Linux
    ``~/.cache/numba_gemm/kernels``). It may not exist yet; writers create it."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()

    return Path(platformdirs.user_cache_dir("numba_gemm")) / "kernels"


def entry_path(key: str, directory: Path | None = None) -> Path:
    """The file of the entry ``key`` in ``directory`` (default :func:`cache_dir`)."""
    return (directory or cache_dir()) / f"{key}{SUFFIX}"


def clear() -> int:
    """Delete every entry of :func:`cache_dir` (and temporary files older than ten minutes, left
    by crashed writers) and forget the in-process memo.

    Returns:
        The number of entries deleted (0 when the directory does not exist).
    """
    with _memo_lock:
        _memo.clear()
    directory = cache_dir()
    count = 0
    if not directory.is_dir():
        return 0
    for p in directory.glob(f"*{SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            count += 1
    old = time.time() - 600
    for p in directory.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            if p.stat().st_mtime < old:
                p.unlink()
    return count


# --- the key -------------------------------------------------------------------------------------


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def source_files() -> list[Path]:
    """The files a compiled kernel depends on: ``kernels/*.py``, ``ptx/*.py``, ``device.py`` and
    ``backend.py`` (which compiler's API the kernels import)."""
    files = sorted((_PACKAGE_DIR / "kernels").glob("*.py"))
    files += sorted((_PACKAGE_DIR / "ptx").glob("*.py"))
    return files + [_PACKAGE_DIR / "device.py", _PACKAGE_DIR / "backend.py"]


def source_digest() -> str:
    """The digest of the kernels' sources that keys every cache entry (:func:`_source_digest`):
    results measured with other kernel sources are not these kernels' results."""
    return _source_digest()


@functools.cache
def _source_digest() -> str:
    """SHA-256 over the sources the kernels are built from (read once per process): the files of
    ``numba_gemm/kernels/``, the intrinsics of ``numba_gemm/ptx/`` and ``device.py``. Missing
    files are skipped."""
    h = hashlib.sha256()
    for p in source_files():
        try:
            data = p.read_bytes()
        except OSError:
            continue
        h.update(f"{p.relative_to(_PACKAGE_DIR).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@functools.cache
def _module_file_digest(filename: str) -> str:
    """Digest of the file a kernel function was defined in (memoized per file)."""
    return _file_digest(Path(filename))


def _dist_version(name: str) -> str:

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


@functools.cache
def _toolchain() -> dict[str, str]:
    """Versions of everything between the Python source and the cubin (memoized per process).

    NVVM's own version (``NVVM().get_version()``, e.g. ``(2, 0)``) moves slowly, so the wheels
    that ship NVVM and nvJitLink are named too. Unreadable items are ``"unknown"``."""
    from .. import backend  # at call time: importing this module must not import a compiler

    out = {
        "backend": backend.NAME,
        "numba_cuda_mlir": _dist_version("numba-cuda-mlir"),
        "numba_cuda": _dist_version("numba-cuda"),
        "numba": _dist_version("numba"),
        "llvmlite": _dist_version("llvmlite"),
        "cuda_bindings": _dist_version("cuda-bindings"),
        "nvidia_nvvm": _dist_version("nvidia-nvvm"),
        "nvidia_nvjitlink": _dist_version("nvidia-nvjitlink"),
        "cuda_toolkit": _dist_version("cuda-toolkit"),
    }
    try:
        from numba.cuda.cudadrv.nvvm import NVVM  # GPU-only internal

        nv = NVVM()
        out["nvvm"] = f"{nv.get_version()} ir {nv.get_ir_version()}"
    except Exception:  # no NVVM (or the simulator): the key still works, it just says so
        out["nvvm"] = "unknown"
    try:
        from numba.cuda.cudadrv import driver  # GPU-only internal

        if driver._have_nvjitlink():
            from cuda.bindings import nvjitlink  # optional: the CUDA 13 bindings

            out["linker"] = f"nvjitlink {nvjitlink.version()}"
        else:  # the driver's cuLink assembles: its version decides the SASS
            from cuda.bindings import driver as cu  # optional: the CUDA bindings

            err, ver = cu.cuDriverGetVersion()
            out["linker"] = f"driver {ver}" if int(err) == 0 else "driver unknown"
    except Exception:
        out["linker"] = "unknown"
    try:
        from numba.cuda.core import config  # GPU-only internal

        out["force_cuda_cc"] = repr(config.FORCE_CUDA_CC)
    except Exception:
        out["force_cuda_cc"] = "unknown"
    return out


def _stable(value: Any, depth: int = 0, seen: frozenset = frozenset()) -> Any:
    """A JSON-able description of a closure value that is the same in every process: literals as
    they are, functions and dispatchers by module, qualname and (recursively) their closures,
    anything else by its type's name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (tuple, list)):
        return [_stable(v, depth + 1, seen) for v in value]
    if isinstance(value, (set, frozenset)):  # e.g. fastmath={"contract"}: by content, in order
        return sorted((_stable(v, depth + 1, seen) for v in value), key=repr)
    if isinstance(value, Mapping):
        return sorted(([str(k), _stable(v, depth + 1, seen)] for k, v in value.items()))
    func = getattr(value, "py_func", value)
    if isinstance(func, types.FunctionType):
        desc: dict[str, Any] = {"fn": f"{func.__module__}.{func.__qualname__}"}
        if id(func) not in seen and depth < 16:
            desc["closure"] = _closure(func, depth + 1, seen | {id(func)})
        return desc
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return f"{value.dtype}:{value.item()!r}"  # a NumPy scalar
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


_closure_memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _kernel_closure(func: types.FunctionType) -> list:
    """:func:`_closure` of a kernel function, memoized per function object (a JSON round trip
    makes it equal to what is read back from disk)."""
    got = _closure_memo.get(func)
    if got is None:
        got = json.loads(json.dumps(_closure(func)))
        _closure_memo[func] = got
    return got


def _closure(func: types.FunctionType, depth: int = 0, seen: frozenset = frozenset()) -> list:
    cells = func.__closure__ or ()
    out = []
    for name, cell in zip(func.__code__.co_freevars, cells, strict=True):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            contents = "<empty>"
        out.append([name, _stable(contents, depth, seen)])
    return out


def epilogue_key(epi: Any) -> str:
    """A digest naming a fused epilogue (``kernels._epilogue.Epilogue``) in the kernel cache, the
    same in every process: its parts, and for its user function (and the functions it calls, to
    a depth of 8) the module, name, bytecode, constants, closure and the globals it reads, so
    that an edited function is a new kernel."""
    material: list = [epi.bias, epi.activation, epi.operands]
    if epi.fn is not None:
        material.append(_code_material(epi.fn, 0))
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def _code_material(fn: Any, depth: int) -> Any:
    py = getattr(fn, "py_func", fn)
    if not isinstance(py, types.FunctionType) or depth > 8:
        return _stable(fn)
    code, glob = py.__code__, py.__globals__
    called = []
    for n in sorted(set(code.co_names) & set(glob)):
        g = glob[n]
        if isinstance(g, types.ModuleType):
            called.append([n, g.__name__])
        elif isinstance(getattr(g, "py_func", g), types.FunctionType):
            called.append([n, _code_material(g, depth + 1)])
        else:
            called.append([n, _stable(g)])
    return [
        f"{py.__module__}.{py.__qualname__}",
        hashlib.sha256(marshal.dumps(code)).hexdigest(),
        _stable([c.cell_contents for c in (py.__closure__ or ())]),
        called,
    ]


def _arch(cc: tuple[int, ...]) -> tuple[int, int, str]:
    """The target numba-cuda compiles for on a device of compute capability ``cc``: its
    ``CUDACodeLibrary._ensure_cc`` rule, ``sm_90a``-style arch-specific targets from 9.0 up."""
    major, minor = int(cc[0]), int(cc[1])
    return major, minor, "a" if (major, minor) >= (9, 0) else ""


def kernel_key(
    dispatcher: Any,
    *,
    name: str,
    config: Mapping[str, int] | None,
    variant: str,
    signature: str,
    cc: tuple[int, int],
) -> tuple[str, dict]:
    """The cache key of one kernel and the material it hashes.

    Args:
        dispatcher: the ``@cuda.jit`` kernel (anything with ``py_func`` and ``targetoptions``).
        name: stage name (``"multistage"``) or another kernel's name (``"scale_c"``).
        config: the stage's tile configuration (``stage.config``); None and ``{}`` are the same.
        variant: ``"vector"`` (``stage.kernel``), ``"scalar"`` (``stage.scalar_kernel``) or ``""``.
        signature: the Numba signature string the kernel is compiled for.
        cc: compute capability ``(major, minor)`` of the target GPU.

    Returns:
        ``(hex SHA-256, material)``: ``material`` is a JSON-able dict of strings, numbers and
        lists (stored in each entry's header and compared on read, so that a stale entry is
        caught even if its name matches). Memoized per dispatcher and arguments: a repeated call
        costs about a microsecond; the first one reads the sources and toolchain versions (once
        per process) and walks the kernel's closure.
    """
    cfg = tuple(sorted((str(k), repr(v)) for k, v in (config or {}).items()))
    memo_key = (name, cfg, variant, signature, int(cc[0]), int(cc[1]), _source_digest())
    try:
        per_kernel = _key_memo.setdefault(dispatcher, {})
    except TypeError:  # not weak-referenceable: compute every time
        per_kernel = {}
    got = per_kernel.get(memo_key)
    if got is None:
        got = per_kernel[memo_key] = _kernel_key(dispatcher, name, config, variant, signature, cc)
    return got


_key_memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _kernel_key(dispatcher, name, config, variant, signature, cc) -> tuple[str, dict]:

    func = dispatcher.py_func
    opts = getattr(dispatcher, "targetoptions", {}) or {}
    material = {
        "format": FORMAT,
        "numba_gemm": __version__,
        "sources": _source_digest(),
        "kernel": f"{func.__module__}.{func.__qualname__}",
        "kernel_file": _module_file_digest(func.__code__.co_filename),
        "closure": _kernel_closure(func),
        "name": name,
        "config": sorted([str(k), _stable(v)] for k, v in (config or {}).items()),
        "variant": variant,
        "signature": signature,
        "targetoptions": sorted([str(k), _stable(v)] for k, v in opts.items()),
        "cc": [int(cc[0]), int(cc[1])],
        "arch": "sm_{}{}{}".format(*_arch(cc)),
        "toolchain": _toolchain(),
    }
    # normalize through JSON so that the dict compares equal to the one read back from disk
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), json.loads(text)


# --- the store -----------------------------------------------------------------------------------


class _BadEntry(Exception):
    """An entry that must not be used; the message says why."""


def _encode(
    key: str, material: Mapping, entry: str, params: tuple[int, ...], cubin: bytes
) -> bytes:
    header = {
        "format": FORMAT,
        "key": key,
        "material": material,
        "entry": entry,
        "params": list(params),
        "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
        "cubin_size": len(cubin),
        "created": time.time(),
    }
    head = json.dumps(header, sort_keys=True).encode()
    return MAGIC + _HEADER_LEN.pack(len(head)) + hashlib.sha256(head).digest() + head + cubin


def _decode(data: bytes) -> tuple[dict, bytes]:
    """``(header, cubin)`` of an entry file's bytes, checked for integrity.

    Raises:
        _BadEntry: bad magic, truncated, unreadable header, size or checksum mismatch.
    """
    start = len(MAGIC) + _HEADER_LEN.size + 32
    if len(data) < start or data[: len(MAGIC)] != MAGIC:
        raise _BadEntry("not a numba_gemm kernel entry (bad magic or truncated)")
    (n,) = _HEADER_LEN.unpack_from(data, len(MAGIC))
    if len(data) < start + n:
        raise _BadEntry("truncated header")
    head = data[start : start + n]
    if hashlib.sha256(head).digest() != data[start - 32 : start]:
        raise _BadEntry("header checksum mismatch")
    try:
        header = json.loads(head.decode())
        size, digest = int(header["cubin_size"]), str(header["cubin_sha256"])
        entry = header["entry"]
        params = header["params"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise _BadEntry(f"unreadable header ({type(e).__name__}: {e})") from None
    if not (
        isinstance(entry, str)
        and entry
        and isinstance(params, list)
        and all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in params)
    ):
        raise _BadEntry("header without a valid entry name or parameter sizes")
    cubin = data[start + n :]
    if len(cubin) != size:
        raise _BadEntry(f"cubin is {len(cubin)} bytes, header says {size} (truncated?)")
    if hashlib.sha256(cubin).hexdigest() != digest:
        raise _BadEntry("cubin checksum mismatch")
    return header, cubin


def _warn(msg: str) -> None:
    warnings.warn(msg, NumbaGemmCacheWarning, stacklevel=4)


def _read_entry(path: Path, key: str, material: Mapping) -> CompiledKernel | None:
    """The entry at ``path`` if it is whole and was made from ``material``; else None.

    A missing file is a silent miss; a corrupt, stale or unreadable one is a miss with a
    :class:`NumbaGemmCacheWarning` naming the file and the reason."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # no entry (or no directory) yet
        return None
    except OSError as e:
        _warn(f"ignoring unreadable kernel cache entry {path}: {e}")
        return None
    try:
        header, cubin = _decode(data)
    except _BadEntry as e:
        _warn(f"ignoring corrupt kernel cache entry {path}: {e}; recompiling")
        return None
    stored = header.get("material")
    if header.get("key") != key or stored != material:
        if isinstance(stored, Mapping):
            diff = sorted(
                k for k in set(stored) | set(material) if stored.get(k) != material.get(k)
            )
        else:
            diff = ["material"]
        _warn(
            f"ignoring stale kernel cache entry {path}: it was built from other key material "
            f"({', '.join(diff) or 'key'}); recompiling"
        )
        return None
    return CompiledKernel(cubin, header["entry"], tuple(header["params"]), key, True)


_unwritable_warned: set[str] = set()
_warn_lock = threading.Lock()


def _write_entry(
    directory: Path,
    key: str,
    material: Mapping,
    entry: str,
    params: tuple[int, ...],
    cubin: bytes,
) -> Path | None:
    """Write the entry ``key`` atomically into ``directory`` (created if needed).

    The bytes go to ``.<key>.<pid>.<thread>.<random>.tmp`` in the same directory, then
    ``os.replace`` renames it over ``<key>.kernel``: readers see the old entry, the new one or
    none, never a part. No ``fsync``: a power loss may leave an empty or partial file, which the
    checksum then rejects.

    Returns:
        The entry's path, or None when the directory is not writable (warned once per directory).
    """
    final = entry_path(key, directory)
    tmp = directory / f".{key}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(tmp, "xb") as f:
            f.write(_encode(key, material, entry, params, cubin))
        os.replace(tmp, final)
        return final
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        with _warn_lock:
            first = str(directory) not in _unwritable_warned
            _unwritable_warned.add(str(directory))
        if first:
            _warn(
                f"kernel cache directory {directory} is not writable ({e}); compiled kernels "
                f"are not cached (set ${ENV_DIR} to a writable directory)"
            )
        return None


# --- compiling -----------------------------------------------------------------------------------


def entry_params(ptx: str, entry: str) -> tuple[int, ...]:
    """Byte size of each parameter of the kernel ``entry`` in PTX text, in order.

    ``.param .u64 x`` is 8, ``.param .f32 x`` 4, ``.param .align 8 .b8 x[24]`` 24.

    Raises:
        RuntimeError: no ``.entry`` of that name, or a parameter of an unknown type.
    """
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    if m is None:
        raise RuntimeError(f"no .entry {entry} in the PTX")
    sizes = []
    for decl in filter(None, (d.strip() for d in m.group(1).split(","))):
        t = _PTX_PARAM.search(decl)
        if not decl.startswith(".param") or t is None:
            raise RuntimeError(f"cannot size PTX parameter {decl!r} of {entry}")
        arr = _PTX_ARRAY.search(decl)
        sizes.append(int(t.group(1)) // 8 * (int(arr.group(1)) if arr else 1))
    return tuple(sizes)


def can_compile_offline() -> bool:
    """True when cubins can be built here without a GPU: not the simulator, NVVM present, and
    nvJitLink (numba-cuda's linker when available; the alternative, the driver's cuLink, needs
    a driver)."""

    if SIMULATOR:
        return False
    try:
        from numba.cuda.cudadrv import driver, nvvm  # GPU-only internals

        return bool(nvvm.is_available() and driver._have_nvjitlink())
    except Exception:
        return False


def _gpu_cc() -> tuple[int, int] | None:
    """Compute capability of the current GPU (the one ``dispatcher.compile`` compiles for), None
    without one."""

    if not gpu_available():
        return None
    from numba import cuda  # at call time: the simulator or the GPU, as configured then

    return tuple(cuda.get_current_device().compute_capability)


@contextlib.contextmanager
def _target(cc: tuple[int, int]) -> Iterator[None]:
    """Compile for ``cc`` without a CUDA context: a code library asked for its PTX without a
    target (``_Kernel.__init__`` does, for the current context's device) gets ``cc``'s, and
    without a GPU, device functions are typed for ``cc`` (``offline_device``; with a
    GPU of another compute capability they are typed for that GPU's, which only matters for
    capability-dependent intrinsics). Holds Numba's compiler lock: the patches are process-wide.

    On an H200, the multistage cubin of this path and that of ``dispatcher.compile`` had the
    same SASS (``cuobjdump -sass``), symbol names aside."""
    from numba.cuda import codegen  # GPU-only internals (compiling without a GPU)
    from numba.cuda.core.compiler_lock import global_compiler_lock  # GPU-only internal

    arch = _arch(cc)
    lib_cls = codegen.CUDACodeLibrary
    saved = lib_cls.__dict__["_ensure_cc"]

    def _ensure_cc(self, want):
        return arch if want is None else want

    with global_compiler_lock, offline_device(tuple(cc)):
        lib_cls._ensure_cc = _ensure_cc
        try:
            yield
        finally:
            lib_cls._ensure_cc = saved


def _check_bare(overload: Any, what: str) -> None:
    """Raise if the kernel needs more than ``cuModuleLoadData`` + ``cuLaunchKernel``."""
    lib = overload._codelibrary
    problems = []
    if lib._setup_functions or lib._teardown_functions:
        problems.append("module setup/teardown callbacks (linked LinkableCode)")
    if getattr(overload, "cooperative", False) or getattr(lib, "use_cooperative", False):
        problems.append("a cooperative launch (grid sync)")
    if getattr(overload, "debug", False):
        problems.append("debug=True")
    if getattr(lib, "referenced_objects", None):
        problems.append("objects referenced from the kernel (device arrays baked in as pointers)")
    if getattr(overload, "launch_config_sensitive", False):
        problems.append("code that depends on the launch configuration")
    if getattr(overload, "shared_memory_carveout", None) is not None:
        problems.append("a shared_memory_carveout attribute")
    if any(getattr(f, "nrt", False) for f in getattr(lib, "_linking_files", ())):
        problems.append("the Numba runtime (NRT)")
    if problems:
        raise RuntimeError(f"cannot cache {what} as a bare cubin: it needs " + "; ".join(problems))


def _compile(dispatcher: Any, signature: str, cc: tuple[int, int], what: str) -> tuple:
    """``(cubin, entry, params)`` of ``dispatcher`` for ``signature`` and ``cc``.

    On a GPU of compute capability ``cc``: Numba's own path, ``dispatcher.compile(signature)``
    (the overload is kept by the dispatcher and also usable through Numba). Otherwise (no GPU, or
    a GPU of another ``cc``): the same ``_Kernel`` that ``dispatcher.compile`` builds, made under
    :func:`_target` and not bound to a context, linked by nvJitLink."""

    if SIMULATOR:
        raise RuntimeError("the CUDA simulator compiles nothing: unset NUMBA_ENABLE_CUDASIM")
    from .. import backend  # at call time: importing this module must not import a compiler

    if backend.MLIR:
        return _compile_mlir(dispatcher, signature, cc, what)
    arch = _arch(cc)
    if _gpu_cc() == tuple(cc):
        overload = dispatcher.compile(signature)
        _check_bare(overload, what)
        lib = overload._codelibrary
        ptx = lib.get_asm_str(cc=arch)
        code = lib.get_cubin(cc=arch)
    else:
        if not can_compile_offline():
            raise RuntimeError(
                f"cannot compile {what} for sm_{cc[0]}{cc[1]} without a GPU of that compute "
                "capability: offline linking needs NVVM and nvJitLink (pip package "
                "nvidia-nvjitlink, part of numba-cuda[cu12]/[cu13])"
            )
        from numba.cuda.core.sigutils import normalize_signature  # GPU-only internal
        from numba.cuda.dispatcher import _Kernel  # GPU-only internal

        argtypes, _ = normalize_signature(signature)
        with _target(cc):
            overload = _Kernel(dispatcher.py_func, argtypes, **dispatcher.targetoptions)
            _check_bare(overload, what)
            lib = overload._codelibrary
            ptx = lib.get_asm_str(cc=arch)
            code = lib.get_cubin(cc=arch)
    cubin = bytes(getattr(code, "code", code))  # cuda.core ObjectCode, or bytes
    if not cubin.startswith(b"\x7fELF"):
        raise RuntimeError(f"the linker returned no cubin for {what} (not an ELF image)")
    entry = overload.entry_name
    return cubin, entry, entry_params(ptx, entry)


#: The target options of a numba-cuda-mlir kernel passed on to the compile, and those that must
#: keep their default for the cubin to be the kernel's (refused otherwise). Options in neither
#: list are not passed on: none of the package's kernels sets one.
_MLIR_OPTIONS = ("launch_bounds", "max_registers", "fastmath", "lineinfo")
_MLIR_DEFAULTS = {
    "debug": False,
    "opt": True,
    "opt_level": 3,
    "ptxas_options": None,
    "link": [],
    "extensions": None,
    "shared_memory_carveout": None,
    "lto": False,
}
#: Metadata of a numba-cuda-mlir compile that a bare cubin (``cuModuleLoadData``) cannot carry.
_MLIR_NOT_BARE = (
    "needs_nrt",
    "linked_external_link_items",
    "setup_callbacks",
    "teardown_callbacks",
    "use_cooperative",
)


def _compile_mlir(dispatcher: Any, signature: str, cc: tuple[int, int], what: str) -> tuple:
    """``(cubin, entry, params)`` of a numba-cuda-mlir kernel (``backend.MLIR``): one compile
    gives the PTX (its ``.entry`` name and parameters) and the cubin (nvJitLink), for ``cc``.

    numba-cuda-mlir takes the compute capability of its PTX and of its linker from the module
    global ``tools._cached_cc`` (else from its current device): it is set to ``cc`` for the
    compile, under the compiler's lock, as :func:`offline_device` does. On a GPU of another
    compute capability the compile is refused. ``_compile_and_optimize`` is a private function
    of numba-cuda-mlir 0.6.0 (``compile_cubin`` is the same compile, without the PTX), so the
    ``mlir`` extra pins it."""
    import numba_cuda_mlir.tools as tools  # the optional backend, only with it
    from numba_cuda_mlir import compiler  # the optional backend, only with it
    from numba_cuda_mlir.numba_cuda.core import compiler_lock  # the optional backend

    gpu = _gpu_cc()
    if gpu is not None and gpu != tuple(cc):
        raise RuntimeError(
            f"cannot compile {what} for sm_{cc[0]}{cc[1]} with numba-cuda-mlir on a GPU of "
            f"sm_{gpu[0]}{gpu[1]}: it builds for the GPU it runs on"
        )
    given = dispatcher.targetoptions
    odd = {k: given[k] for k, v in _MLIR_DEFAULTS.items() if k in given and given[k] != v}
    if odd:
        raise RuntimeError(f"cannot cache {what}: target options {odd} are not passed on")
    opts = {k: given[k] for k in _MLIR_OPTIONS if given.get(k) is not None}
    with compiler_lock.global_compiler_lock:
        saved, tools._cached_cc = tools._cached_cc, tuple(cc)
        try:
            md = compiler._compile_and_optimize(dispatcher.py_func, signature, opts).metadata
        finally:
            tools._cached_cc = saved
    needs = [k for k in _MLIR_NOT_BARE if md.get(k)]
    if needs or md.get("debug"):
        raise RuntimeError(f"cannot cache {what} as a bare cubin: it needs {needs or 'debug'}")
    ptx, cubin = md["ptx"], bytes(getattr(md["cubin"], "code", md["cubin"]))
    entries = re.findall(r"\.entry\s+([\w$]+)\s*\(", ptx)
    if len(entries) != 1:
        raise RuntimeError(f"{what}: expected one .entry in its PTX, found {entries}")
    if not cubin.startswith(b"\x7fELF"):
        raise RuntimeError(f"the linker returned no cubin for {what} (not an ELF image)")
    return cubin, entries[0], entry_params(ptx, entries[0])


# --- the public call -----------------------------------------------------------------------------

_memo: dict[str, CompiledKernel] = {}
_memo_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}


def load_or_compile(
    dispatcher: Any,
    *,
    name: str,
    config: Mapping[str, int] | None,
    variant: str,
    signature: str,
    cc: tuple[int, int],
) -> CompiledKernel:
    """The compiled kernel for these arguments: from this process's memo, else from the disk
    cache, else compiled now and written to the cache.

    Args:
        dispatcher: the ``@cuda.jit`` kernel, e.g. ``get_stage("multistage").kernel``.
        name, config, variant, signature, cc: see :func:`kernel_key`. Pass ``stage.config`` as
            ``config`` and ``"vector"`` for ``stage.kernel``, ``"scalar"`` for
            ``stage.scalar_kernel`` (what ``python -m numba_gemm.tools.precompile`` uses).

    Returns:
        A :class:`CompiledKernel`; ``from_cache`` says whether it came from disk (a memo hit
        returns the object of the first call).

    Raises:
        RuntimeError: under the simulator; without a GPU of compute capability ``cc`` when
            offline linking is impossible (:func:`can_compile_offline`); or when the kernel needs
            more than a bare cubin load (module setup callbacks, cooperative launch, debug,
            captured device arrays, NRT).
        numba errors: the kernel does not compile for ``signature``.

    Warns:
        NumbaGemmCacheWarning: an entry was corrupt or stale (then recompiled and overwritten),
            or the cache directory is not writable (once per directory).
    """
    key, material = kernel_key(
        dispatcher, name=name, config=config, variant=variant, signature=signature, cc=cc
    )
    hit = _memo.get(key)
    if hit is not None:
        return hit
    with _memo_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:  # one compile per key per process; other processes may race, harmlessly
        hit = _memo.get(key)
        if hit is not None:
            return hit
        directory = cache_dir()
        found = _read_entry(entry_path(key, directory), key, material)
        if found is None:
            what = f"{name}{f'/{variant}' if variant else ''} {dict(config or {})}"
            cubin, entry, params = _compile(dispatcher, signature, tuple(cc), what)
            _write_entry(directory, key, material, entry, params, cubin)
            found = CompiledKernel(cubin, entry, params, key, False)
        with _memo_lock:
            _memo[key] = found
        return found
