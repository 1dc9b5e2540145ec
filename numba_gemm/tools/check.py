"""The one validate-then-time harness: the bench, the tuner and the tests all go through it.

llm.c's ``dev/cuda`` habit: every implementation is checked against one reference on the same
operands, into an output poisoned with NaN, before any is timed. Here:

- :func:`make_problem`: random standard-normal float32 operands A ``(M, K)`` and B ``(K, N)``,
  C-contiguous (row-major), copied to the GPU, a C ``(M, N)``, and the reference product.
- the reference: cuBLAS SGEMM in FP32 (TF32 forced off whatever ``CUPY_TF32`` or PyTorch's
  defaults say) through CuPy or PyTorch (:class:`CupyBlas`, :class:`TorchBlas`,
  :func:`cublas_reference`); a float64 NumPy product on the simulator or without either library.
- :func:`validate`: run an implementation into the NaN-poisoned C and compare by relative
  Frobenius error against the stage's bound (``Stage.rtol``).
- :func:`time_kernel`, :func:`time_end_to_end`, :func:`time_cublas`, :func:`evaluate`: thin
  wrappers over ``numba_gemm.tools.timing`` (CUDA events; milliseconds; GFLOP/s = 2*M*N*K / t).

Why force FP32: CuPy runs float32 matmul on TF32 tensor cores when ``CUPY_TF32=1`` is set, and
PyTorch when ``set_float32_matmul_precision("high")`` was called; a TF32 reference (10-bit
mantissa, relative error ~1e-3) fails every FP32 stage against its 1e-5 bound, and a TF32
baseline is not the FP32 cuBLAS it claims to be.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from ..device import SIMULATOR
from .reference import cupy_or_none, reference_f64, rel_error, tf32_enabled
from .timing import Timing, time_calls, time_launches

OK, FAILED, SKIPPED = "ok", "FAILED", "SKIPPED"

#: How the reference is described in tables and results files.
FP32_LABEL = "cuBLAS FP32 (TF32 off)"
F64_LABEL = "float64 NumPy"


def error_note(e: BaseException) -> str:
    """``"TypeName: first line of the message"`` (at most 200 characters of it)."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:200]}"


# --- cuBLAS through CuPy or PyTorch, forced to FP32 -------------------------------------------


class CupyBlas:
    """cuBLAS SGEMM through ``cupy.matmul`` on CuPy's current stream (the null stream by default,
    the one the stages use).

    CuPy picks the cuBLAS compute type per dtype in ``cupy._core._routines_linalg``: on first use
    ``get_compute_type(float32)`` resolves ``COMPUTE_TYPE_TBD`` to ``COMPUTE_TYPE_TF32``
    (``CUBLAS_COMPUTE_32F_FAST_TF32``) when ``CUPY_TF32=1``, else ``COMPUTE_TYPE_DEFAULT``
    (``CUBLAS_COMPUTE_32F``). :meth:`fp32_mode` and :meth:`tf32_mode` set it explicitly with
    ``set_compute_type`` and restore the previous value, so ``CUPY_TF32`` no longer matters.

    Args:
        cp: the ``cupy`` module (or an object with the same ``asarray``, ``empty``, ``matmul``,
            ``asnumpy``, ``float32``, ``__version__`` and ``_core._routines_linalg``).
    """

    name = "CuPy"

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.version = getattr(cp, "__version__", "?")
        self._linalg = getattr(getattr(cp, "_core", None), "_routines_linalg", None)

    def wrap(self, d_x: Any) -> Any:
        """A CuPy view of a device array (zero-copy through ``__cuda_array_interface__``)."""
        return self.cp.asarray(d_x)

    def empty(self, *shape: int) -> Any:
        return self.cp.empty(shape, dtype=self.cp.float32)

    def matmul(self, a: Any, b: Any, c: Any) -> None:
        """``c = a @ b`` (one cuBLAS SGEMM; a strided-batched one for 3-D operands),
        asynchronous."""
        self.cp.matmul(a, b, out=c)

    def to_host(self, c: Any) -> np.ndarray:
        return self.cp.asnumpy(c)

    def _code(self, label: str) -> int | None:
        lin = self._linalg
        names = ("get_compute_type", "set_compute_type", "compute_type_to_str")
        if lin is None or not all(hasattr(lin, f) for f in names):
            return None
        return next((k for k in range(16) if lin.compute_type_to_str(k) == label), None)

    @contextlib.contextmanager
    def _mode(self, label: str) -> Iterator[None]:
        code = self._code(label)
        if code is None:
            raise RuntimeError(
                f"this CuPy ({self.version}) has no cupy._core._routines_linalg.set_compute_type "
                f"to select {label}"
            )
        lin = self._linalg
        prev = lin.get_compute_type(np.float32)  # resolves CUPY_TF32 first: restored as found
        lin.set_compute_type(np.float32, code)
        try:
            yield
        finally:
            lin.set_compute_type(np.float32, prev)

    @contextlib.contextmanager
    def fp32_mode(self) -> Iterator[None]:
        """float32 matmul on FP32 cores (``CUBLAS_COMPUTE_32F``) inside the block.

        Raises:
            RuntimeError: this CuPy cannot select the compute type and ``CUPY_TF32`` is set
                (it would run TF32).
        """
        if self._code("COMPUTE_TYPE_DEFAULT") is None:
            if tf32_enabled():
                raise RuntimeError(
                    f"CUPY_TF32 is set and this CuPy ({self.version}) cannot switch float32 "
                    "matmul back to FP32 (no cupy._core._routines_linalg.set_compute_type): "
                    "unset CUPY_TF32 or use PyTorch"
                )
            yield  # an old CuPy without the switch runs FP32 unless CUPY_TF32 is set
            return
        with self._mode("COMPUTE_TYPE_DEFAULT"):
            yield

    def tf32_mode(self) -> contextlib.AbstractContextManager:
        """float32 matmul on TF32 tensor cores inside the block (compute capability >= 8.0)."""
        return self._mode("COMPUTE_TYPE_TF32")


class TorchBlas:
    """cuBLAS SGEMM through ``torch.mm`` on PyTorch's current stream (the null stream by default).

    The precision is set with ``torch.set_float32_matmul_precision``: ``"highest"`` = FP32
    (``torch.backends.cuda.matmul.allow_tf32 = False``), ``"high"`` = TF32 allowed; the previous
    setting is restored after the block.
    """

    name = "PyTorch"

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.version = getattr(torch, "__version__", "?")

    def wrap(self, d_x: Any) -> Any:
        """A tensor viewing a device array (zero-copy through ``__cuda_array_interface__``)."""
        return self.torch.as_tensor(d_x, device="cuda")

    def empty(self, *shape: int) -> Any:
        return self.torch.empty(shape, dtype=self.torch.float32, device="cuda")

    def matmul(self, a: Any, b: Any, c: Any) -> None:
        """``c = a @ b`` (one cuBLAS SGEMM: ``torch.mm``; ``torch.bmm`` for 3-D operands),
        asynchronous."""
        (self.torch.mm if a.dim() == 2 else self.torch.bmm)(a, b, out=c)

    def to_host(self, c: Any) -> np.ndarray:
        return c.cpu().numpy()

    @contextlib.contextmanager
    def _precision(self, value: str) -> Iterator[None]:
        prev = self.torch.get_float32_matmul_precision()
        self.torch.set_float32_matmul_precision(value)
        try:
            yield
        finally:
            self.torch.set_float32_matmul_precision(prev)

    def fp32_mode(self) -> contextlib.AbstractContextManager:
        """float32 matmul on FP32 cores inside the block."""
        return self._precision("highest")

    def tf32_mode(self) -> contextlib.AbstractContextManager:
        """float32 matmul on TF32 tensor cores allowed inside the block."""
        return self._precision("high")


Blas = CupyBlas | TorchBlas


def torch_or_none() -> Any:
    """The ``torch`` module when it is importable and sees a CUDA GPU, else None."""
    try:
        import torch
    except Exception:  # ImportError, or a CUDA library mismatch at import
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def blas_library(kind: str = "auto", *, fallback: bool = True) -> Blas | None:
    """The library that runs cuBLAS: ``kind`` ``"cupy"``, ``"torch"``, ``"auto"`` (CuPy, else
    PyTorch) or ``"none"``.

    With ``fallback``, the other library stands in when the one asked for is missing or sees no
    GPU. None on the simulator, for ``"none"``, and when neither library works.

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in ("auto", "cupy", "torch", "none"):
        raise ValueError(f"unknown cuBLAS library {kind!r}: expected auto, cupy, torch or none")
    if kind == "none" or SIMULATOR:
        return None
    order = ["torch", "cupy"] if kind == "torch" else ["cupy", "torch"]
    if not fallback and kind != "auto":
        order = order[:1]
    for lib in order:
        mod = cupy_or_none() if lib == "cupy" else torch_or_none()
        if mod is not None:
            return CupyBlas(mod) if lib == "cupy" else TorchBlas(mod)
    return None


def _as_blas(blas: Blas | str | None) -> Blas | None:
    return blas_library(blas) if isinstance(blas, str) else blas


def cublas_product(blas: Blas, d_a: Any, d_b: Any) -> np.ndarray:
    """``A @ B`` of two device arrays (2-D, or 3-D batches of the same length) by cuBLAS SGEMM in
    FP32 (TF32 off), on the host, float32."""
    a, b = blas.wrap(d_a), blas.wrap(d_b)
    sa, sb = tuple(a.shape), tuple(b.shape)  # the simulator's shapes take no slices
    c = blas.empty(*sa[:-1], sb[-1])
    with blas.fp32_mode():
        blas.matmul(a, b, c)
    return blas.to_host(c)


def cublas_reference(
    a_host: np.ndarray, b_host: np.ndarray, *, blas: Blas | str | None = "auto"
) -> np.ndarray:
    """The reference product ``a @ b`` of host float32 arrays A ``(M, K)``, B ``(K, N)``.

    cuBLAS SGEMM with FP32 compute (TF32 forced off whatever ``CUPY_TF32`` or PyTorch's matmul
    precision say) through ``blas`` (a :class:`CupyBlas`/:class:`TorchBlas`, or a
    :func:`blas_library` kind); result float32 ``(M, N)``. On the simulator, or when neither
    CuPy nor PyTorch sees a GPU (``blas`` None): the float64 NumPy product.

    Raises:
        ValueError: inner dimensions differ.
        RuntimeError: CuPy cannot be switched to FP32 (see :meth:`CupyBlas.fp32_mode`).
    """
    if a_host.shape[1] != b_host.shape[0]:
        raise ValueError(f"inner dimensions differ: {a_host.shape} @ {b_host.shape}")
    lib = _as_blas(blas)
    if lib is None:
        return reference_f64(a_host, b_host)
    return cublas_product(lib, cuda.to_device(a_host), cuda.to_device(b_host))


# --- problems -----------------------------------------------------------------------------------


@dataclass(eq=False)
class Problem:
    """One GEMM problem on the GPU and its reference product.

    Attributes:
        a, b: host operands A ``(M, K)`` and B ``(K, N)``, float32, C-contiguous; for a batched
            problem ``(batch, M, K)`` and ``(batch, K, N)``.
        A, B: their Numba device copies; C: a Numba device array ``(M, N)`` (or ``(batch, M,
            N)``), float32, that the implementations write (overwritten by every
            :func:`validate` and timing).
        ref: the reference ``A @ B`` on the host (float32 from cuBLAS, or float64).
        reference: how ``ref`` was computed (``"cuBLAS FP32 (TF32 off), CuPy 13.6.0"`` or
            ``"float64 NumPy"``).
        blas: the library that computed ``ref`` (None for NumPy): the bench's cuBLAS peer.
        cublas: cuBLAS FP32 kernel time at this shape, once someone measured it
            (:func:`time_cublas`), else None.
    """

    a: np.ndarray
    b: np.ndarray
    A: Any
    B: Any
    C: Any
    ref: np.ndarray
    reference: str
    blas: Blas | None = None
    cublas: Timing | None = None
    _poison: np.ndarray | None = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(M, N, K)`` of one product."""
        return self.a.shape[-2], self.b.shape[-1], self.a.shape[-1]

    @property
    def batch(self) -> int:
        """Products in the batch (1 for 2-D operands)."""
        return self.a.shape[0] if self.a.ndim == 3 else 1

    @property
    def flop(self) -> int:
        """``2*batch*M*N*K``."""
        M, N, K = self.shape
        return 2 * self.batch * M * N * K

    def poison(self) -> None:
        """Fill C with NaN: an element an implementation leaves unwritten stays NaN."""
        if self._poison is None:
            self._poison = np.full(self.C.shape, np.nan, dtype=np.float32)
        self.C.copy_to_device(self._poison)


def make_problem(
    M: int,
    N: int,
    K: int,
    *,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    blas: Blas | str | None = "auto",
    batch: int = 1,
) -> Problem:
    """Random standard-normal float32 operands (never zeros: they hide unwritten outputs and bad
    indexing) on the GPU, and the reference product.

    Args:
        M, N, K: A is ``(M, K)``, B ``(K, N)``, C ``(M, N)``; each >= 1.
        batch: > 1 for a batch of products in C-contiguous 3-D arrays, A ``(batch, M, K)``, B
            ``(batch, K, N)``, C ``(batch, M, N)`` (reference: cuBLAS strided-batched SGEMM).
        seed: seed of ``numpy.random.default_rng``: the same seed gives the same operands.
        rng: a generator to draw from instead (advanced by the draw); overrides ``seed``.
        blas: the cuBLAS library for the reference (see :func:`cublas_reference`); ``"none"``
            or None for a float64 NumPy reference.

    Raises:
        ValueError: a dimension or the batch < 1.
    """
    if min(M, N, K, batch) < 1:
        raise ValueError(f"need M, N, K, batch >= 1, got M={M}, N={N}, K={K}, batch={batch}")
    gen = rng if rng is not None else np.random.default_rng(seed)
    lead = (batch,) if batch > 1 else ()
    a = gen.standard_normal((*lead, M, K), dtype=np.float32)
    b = gen.standard_normal((*lead, K, N), dtype=np.float32)
    A, B = cuda.to_device(a), cuda.to_device(b)
    C = cuda.device_array((*lead, M, N), dtype=np.float32)
    lib = _as_blas(blas)
    if lib is None:
        ref, label = reference_f64(a, b), F64_LABEL
    else:
        ref, label = cublas_product(lib, A, B), f"{FP32_LABEL}, {lib.name} {lib.version}"
    return Problem(a=a, b=b, A=A, B=B, C=C, ref=ref, reference=label, blas=lib)


# --- validate, then time ---------------------------------------------------------------------


def device_view(d: Any, shape: tuple, strides: tuple) -> Any:
    """A zero-copy view of device array ``d``'s memory with any ``shape`` and byte ``strides``
    (Numba's ``.T`` of a GPU array is a contiguous copy, so it cannot make a transposed or
    broadcast operand; on the simulator the view is a NumPy one)."""
    if SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # the simulator's type

        return FakeCUDAArray(np.lib.stride_tricks.as_strided(d._ary, shape, strides))
    from numba.cuda.cudadrv.devicearray import DeviceNDArray  # the GPU's array type

    return DeviceNDArray(shape, strides, d.dtype, gpu_data=d.gpu_data)


def stored_transposed(x: np.ndarray) -> Any:
    """A device array equal to the 2-D host array ``x`` whose memory holds ``x.T`` row-major: a
    zero-copy column-major view (:func:`device_view`), what ``w.T`` of a PyTorch ``nn.Linear``
    weight is (the operand of the ``x @ W.T`` layouts)."""
    d = cuda.to_device(np.ascontiguousarray(x.T))
    return device_view(d, x.shape, (d.strides[1], d.strides[0]))


def validate(
    run: Callable[[], Any], problem: Problem, rtol: float
) -> tuple[str, float | None, str]:
    """Run an implementation once into the NaN-poisoned C and compare it with the reference.

    Args:
        run: writes ``problem.A @ problem.B`` into ``problem.C`` (directly or through a
            zero-copy view of it), e.g. ``lambda: plan.launch(p.A, p.B, p.C, 1.0, 0.0)``.
        problem: from :func:`make_problem`.
        rtol: bound on the relative Frobenius error ``||C - ref|| / ||ref||`` (``Stage.rtol``).

    Returns:
        ``(status, rel_error, note)``: ``("ok", err, "")``; ``("FAILED", err, "rel. error ... >
        rtol")`` when the error is above ``rtol`` or not finite (an unwritten NaN gives
        ``inf``); ``("FAILED", None, "Type: message")`` when ``run`` raises. Never raises.
    """
    try:
        problem.poison()
        run()
        err = rel_error(problem.C.copy_to_host(), problem.ref)  # synchronizes
    except Exception as e:  # noqa: BLE001 - a failing implementation is reported, not raised
        return FAILED, None, error_note(e)
    if not err <= rtol:  # also catches NaN
        return FAILED, err, f"rel. error {err:.3g} > {rtol:g}"
    return OK, err, ""


def time_kernel(run: Callable[[], Any], *, reps: int = 20, warmup: int = 3) -> Timing:
    """Kernel time of ``run`` (CUDA events behind a hold kernel; ``timing.time_launches``):
    ``reps`` values in ms."""
    return time_launches(run, warmup=warmup, reps=reps)


def time_end_to_end(
    call: Callable[[], Any],
    *,
    reps: int = 20,
    warmup: int = 3,
    calls: int | None = None,
    max_loop_ms: float | None = None,
) -> Timing:
    """End-to-end time per call of ``call`` made back to back (``timing.time_calls``; ``calls``
    None: at least 20 calls and 2 ms per loop, at most ``max_loop_ms``): ``reps`` values in ms
    per call."""
    return time_calls(call, calls=calls, reps=reps, warmup=warmup, max_loop_ms=max_loop_ms)


def time_cublas(problem: Problem, *, reps: int = 20, warmup: int = 3) -> Timing | None:
    """Kernel time of cuBLAS FP32 (TF32 off) at the problem's shape through ``problem.blas``;
    stored in ``problem.cublas`` and returned. None without a library (simulator, or none)."""
    lib = problem.blas
    if lib is None:
        return None
    a, b, c = lib.wrap(problem.A), lib.wrap(problem.B), lib.wrap(problem.C)
    with lib.fp32_mode():
        problem.cublas = time_kernel(lambda: lib.matmul(a, b, c), reps=reps, warmup=warmup)
    return problem.cublas


@dataclass(frozen=True)
class Result:
    """What :func:`evaluate` found: ``status`` ok/FAILED, ``rel_error``, ``note`` (why it
    FAILED), ``timing`` (ms per repeat; None when not timed)."""

    status: str
    rel_error: float | None
    note: str = ""
    timing: Timing | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


def evaluate(
    run: Callable[[], Any],
    problem: Problem,
    rtol: float,
    *,
    reps: int = 20,
    warmup: int = 3,
    end_to_end: bool = False,
) -> Result:
    """:func:`validate`, then (only when valid) time ``run``: kernel time, or with
    ``end_to_end`` the time per call of back-to-back calls. A timing that raises is FAILED."""
    status, err, note = validate(run, problem, rtol)
    if status != OK:
        return Result(status, err, note)
    try:
        if end_to_end:
            t = time_end_to_end(run, reps=reps, warmup=warmup)
        else:
            t = time_kernel(run, reps=reps, warmup=warmup)
    except Exception as e:  # noqa: BLE001
        return Result(FAILED, err, f"timing: {error_note(e)}")
    return Result(OK, err, "", t)
