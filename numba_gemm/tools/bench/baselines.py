"""What the bench runs at one size: the peers (cuBLAS FP32 through CuPy or PyTorch, cuBLAS TF32,
cuBLAS FP16 and BF16, optional Triton), ``sgemm``'s automatic choice and each stage, as
:class:`Impl` records, each with the precision it is rated in (``report.BASELINE_OF``).

cuBLAS runs through ``numba_gemm.tools.check``'s :class:`~numba_gemm.tools.check.CupyBlas` /
:class:`~numba_gemm.tools.check.TorchBlas`: forced to FP32 (TF32 off) while it is validated and
timed, whatever ``CUPY_TF32`` says; to TF32 for the cuBLAS TF32 line; cuBLAS FP16 (BF16) is
``cupy.matmul`` / ``torch.mm`` on FP16 (BF16) copies of A and B (:func:`fp16_gemm`; BF16:
PyTorch only, CuPy has no bfloat16). Triton is an
optional peer (``--peers``): a standard FP32 Triton matmul of our own
(:mod:`numba_gemm.tools.bench.triton_matmul`), validated like the stages; it is left out without
a word when Triton or PyTorch is missing, and always on the simulator.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...device import SIMULATOR
from ...kernels import get_stage
from ...kernels.stage import TOLERANCE
from ...plan.geometry import Geometry
from ..check import Blas, Problem, blas_library, error_note, stored_transposed, torch_or_none
from .report import (
    AUTO,
    AUTO_LABEL,
    BF16_LABEL,
    CUBLAS_BF16,
    CUBLAS_FP16,
    CUBLAS_FP32,
    CUBLAS_TF32,
    FP16_LABEL,
    FP32_LABEL,
    TF32_LABEL,
    TRITON,
    TRITON_LABEL,
)

_ONE, _ZERO = np.float32(1.0), np.float32(0.0)
_NAMES = {"cupy": "CuPy", "torch": "PyTorch"}


@dataclass
class Impl:
    """One implementation, validated then timed at one size.

    Attributes:
        stage: the row's ``stage`` key (a stage name, ``auto``, ``cublas_fp32``, ``triton``...).
        label: the row's label.
        run: writes ``A @ B`` into the problem's C (a zero-copy view of it): validated, and timed
            as kernel time.
        check: validated in place of ``run`` when ``run`` writes elsewhere (cuBLAS FP16 writes
            an FP16 C): ``run``, then C from its output; None: ``run``.
        call: the public call a user makes (``sgemm(a, b, out=c)``, ``torch.mm``...), also
            writing C: validated too, and timed end to end; None for kernel time only.
        rtol: the relative-error bound of validation.
        precision: the arithmetic (``Stage.precision``): picks the cuBLAS row it is rated
            against (``report.BASELINE_OF``).
        mode: context manager held while it is validated and timed (cuBLAS's FP32 mode).
        config: the row's ``config`` (a dict).
        plan: what ``plan_for`` chose (JSON rows only), or None.
        note: the row's note when it is ok.
        error: set when the implementation could not even be set up: FAILED with this note.
        skip: set when it does not apply to the shape: SKIPPED with this note.
    """

    stage: str
    label: str
    run: Callable[[], Any] | None
    call: Callable[[], Any] | None = None
    rtol: float = TOLERANCE["fp32"]
    precision: str = "fp32"
    check: Callable[[], Any] | None = None
    mode: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    config: dict = field(default_factory=dict)
    plan: dict | None = None
    note: str = ""
    error: str = ""
    skip: str = ""


def failed(stage: str, label: str, e: BaseException) -> Impl:
    """An :class:`Impl` that could not be set up (FAILED with the exception's note)."""
    return Impl(stage, label, None, error=error_note(e))


def make_baseline(kind: str) -> Blas | None:
    """The cuBLAS library for ``--baseline kind`` (``cupy``, ``torch`` or ``none``).

    Falls back to the other library when the requested one is missing or sees no GPU, printing
    one line; None (and a line) when neither works, and on the simulator.
    """
    if kind == "none":
        return None
    if SIMULATOR:
        print(
            "numba_gemm.bench: simulator: no cuBLAS baseline; validating against a float64 "
            "NumPy product",
            file=sys.stderr,
        )
        return None
    lib = blas_library(kind)
    if lib is None:
        print(
            "numba_gemm.bench: neither CuPy nor PyTorch is importable with a GPU; running "
            "without the cuBLAS baseline (% of cuBLAS left empty; install cupy-cuda12x or "
            "cupy-cuda13x)",
            file=sys.stderr,
        )
    elif lib.name != _NAMES[kind]:
        print(
            f"numba_gemm.bench: {_NAMES[kind]} is not importable or sees no GPU; using "
            f"{lib.name} {lib.version} for the cuBLAS baseline",
            file=sys.stderr,
        )
    return lib


def cublas_impls(problem: Problem, *, tf32: bool = False, half: Any = None) -> list[Impl]:
    """cuBLAS FP32 (TF32 off; kernel and end-to-end time of ``cupy.matmul(a, b, out=c)`` or
    ``torch.mm(a, b, out=c)``), with ``tf32`` cuBLAS TF32 (kernel time only, bound
    ``TOLERANCE["tf32"]``) and, given ``half`` (``{precision: (A16, B16)}``, 16-bit copies of
    the operands: :func:`half_operands`), cuBLAS FP16 and BF16 (kernel time only, bound
    ``TOLERANCE[precision]``), through ``problem.blas``; empty without a library."""
    lib = problem.blas
    if lib is None:
        return []
    a, b, c = lib.wrap(problem.A), lib.wrap(problem.B), lib.wrap(problem.C)

    def mm() -> None:
        lib.matmul(a, b, c)

    out = [
        Impl(
            CUBLAS_FP32,
            f"{FP32_LABEL}, {lib.name}",
            mm,
            call=mm,
            mode=lib.fp32_mode,
            note="the reference for validation",
        )
    ]
    if tf32:
        out.append(
            Impl(
                CUBLAS_TF32,
                f"{TF32_LABEL}, {lib.name}",
                mm,
                rtol=TOLERANCE["tf32"],
                precision="tf32",
                mode=lib.tf32_mode,
                note="not a reference: TF32 inputs (10-bit mantissa)",
            )
        )
    for precision, (A16, B16) in (half or {}).items():
        out.append(cublas_fp16_impl(problem, A16, B16, precision))
    return out


def fp16_gemm(
    lib: Blas, A16: Any, B16: Any, C: Any, precision: str = "fp16"
) -> tuple[Callable, Callable, Callable]:
    """cuBLAS's FP16 (or BF16) GEMM through ``lib``: ``(run, widen, mode)``.

    ``run`` writes ``A16 @ B16`` into a 16-bit C of its own: one ``cublasGemmEx`` with 16-bit A,
    B and C and ``CUBLAS_COMPUTE_32F`` (FP32 products and sums, as the 16-bit stages), which is
    what ``cupy.matmul`` (``_routines_linalg.tensordot_core_v11``) and ``torch.mm`` call for
    float16 (and ``torch.mm`` for bfloat16); ``widen`` copies that C into ``C`` (float32) for
    validation; ``mode`` is held around both (PyTorch: no reduced-precision 16-bit reductions,
    so the sums stay FP32).

    Args:
        lib: a ``CupyBlas`` or ``TorchBlas`` (``numba_gemm.tools.check``).
        A16, B16: float16 (bfloat16) device arrays ``(M, K)``, ``(K, N)``, C-contiguous.
        C: the problem's float32 ``(M, N)`` device array.
        precision: ``"fp16"`` or ``"bf16"``.

    Raises:
        TypeError: ``lib`` is neither; BF16 through CuPy (no bfloat16 there).
    """
    if lib.name == "CuPy" and precision == "bf16":
        raise TypeError("CuPy has no bfloat16: cuBLAS BF16 runs through PyTorch (--baseline torch)")
    if lib.name == "CuPy":
        cp = lib.cp
        a, b, c = cp.asarray(A16), cp.asarray(B16), cp.asarray(C)
        c16 = cp.empty(c.shape, dtype=cp.float16)

        def run() -> None:
            cp.matmul(a, b, out=c16)

        def widen() -> None:
            cp.copyto(c, c16)

        return run, widen, contextlib.nullcontext
    if lib.name == "PyTorch":
        torch = lib.torch
        if precision == "bf16":  # (bfloat16 goes through CAI as its bits: "<V2" is not read)
            a, b = (
                torch.as_tensor(x.view(np.uint16), device="cuda").view(torch.bfloat16)
                for x in (A16, B16)
            )
        else:
            a, b = (torch.as_tensor(x, device="cuda") for x in (A16, B16))
        c = lib.wrap(C)
        c16 = torch.empty(tuple(c.shape), dtype=a.dtype, device="cuda")

        def run() -> None:
            torch.mm(a, b, out=c16)

        def widen() -> None:
            c.copy_(c16)

        @contextlib.contextmanager
        def fp32_sums() -> Any:
            m = torch.backends.cuda.matmul
            flag = f"allow_{precision}_reduced_precision_reduction"
            prev = getattr(m, flag)
            setattr(m, flag, False)
            try:
                yield
            finally:
                setattr(m, flag, prev)

        return run, widen, fp32_sums
    raise TypeError(f"no FP16 cuBLAS path through {lib.name}")


def cublas_fp16_impl(problem: Problem, A16: Any, B16: Any, precision: str = "fp16") -> Impl:
    """cuBLAS FP16 or BF16 (16-bit inputs, FP32 sums; :func:`fp16_gemm`): kernel time of the
    GEMM into a 16-bit C; validated through a copy of that C into the problem's C."""
    lib = problem.blas
    key, name = (CUBLAS_BF16, BF16_LABEL) if precision == "bf16" else (CUBLAS_FP16, FP16_LABEL)
    label = f"{name}, {lib.name}"
    try:
        run, widen, mode = fp16_gemm(lib, A16, B16, problem.C, precision)
    except Exception as e:
        return replace(failed(key, label, e), precision=precision)

    def check() -> None:
        run()
        widen()

    kind = precision.upper()
    return Impl(
        key,
        label,
        run,
        rtol=TOLERANCE[precision],
        precision=precision,
        check=check,
        mode=mode,
        note=f"{kind} A, B and C (cublasGemmEx, CUBLAS_COMPUTE_32F); the stages write FP32 C",
    )


def triton_module(required: bool = False) -> Any:
    """:mod:`numba_gemm.bench.triton_matmul`, or None when Triton or PyTorch (with a GPU) is
    missing, and on the simulator; with ``required``, one line on stderr says why."""

    def why(msg: str) -> None:
        if required:
            print(f"numba_gemm.bench: --peers triton: {msg}; no Triton rows", file=sys.stderr)

    if SIMULATOR:
        why("Triton does not run on the CUDA simulator")
        return None
    if importlib.util.find_spec("triton") is None:
        why("Triton is not installed (pip install triton)")
        return None
    if torch_or_none() is None:
        why("Triton launches on PyTorch tensors and PyTorch is missing or sees no GPU")
        return None
    try:
        from . import triton_matmul
    except Exception as e:  # a Triton that does not match the driver or the toolchain
        why(f"importing Triton failed ({error_note(e)})")
        return None
    return triton_matmul


def triton_impl(problem: Problem, tm: Any) -> Impl:
    """Triton FP32 (optional peer): ``tm.matmul(a, b, c)`` on PyTorch views of the problem's
    arrays; kernel and end-to-end time."""
    import torch

    try:
        a, b, c = (torch.as_tensor(x, device="cuda") for x in (problem.A, problem.B, problem.C))
    except Exception as e:
        return failed(TRITON, TRITON_LABEL, e)

    def mm() -> None:
        tm.matmul(a, b, c)

    version = getattr(sys.modules.get("triton"), "__version__", "?")
    return Impl(TRITON, TRITON_LABEL, mm, call=mm, note=f"Triton {version}, autotuned")


def half_operands(problem: Problem, precision: str = "fp16") -> tuple[Any, Any]:
    """FP16 (``precision="bf16"``: BF16) device copies ``(A16, B16)`` of the problem's A and B
    (through the host: bench set-up, not timed), shared by the 16-bit stages and cuBLAS in that
    precision so that they multiply the same numbers. BF16 copies are Numba arrays of
    ``ml_dtypes.bfloat16`` (needed then), copied as their bits (Numba copies host memory
    through a ``memoryview``, which has no bfloat16)."""
    from numba import cuda

    if precision == "bf16":
        import ml_dtypes  # optional: NumPy's bfloat16, for the BF16 stages' operands

        bf = np.dtype(ml_dtypes.bfloat16)
        return tuple(
            cuda.to_device(x.astype(bf).view(np.uint16)).view(bf) for x in (problem.a, problem.b)
        )
    return tuple(cuda.to_device(x.astype(np.float16)) for x in (problem.a, problem.b))


def plan_info(plan: Any) -> dict:
    """What a ``Plan`` chose, for the JSON rows: stage, config, variant, split_k, reason, repr."""
    st = plan.stage
    return dict(
        stage=st.name,
        config=dict(st.config),
        variant=getattr(plan, "variant", None),
        split_k=getattr(plan, "split_k", None),
        reason=getattr(plan, "reason", None),
        repr=repr(plan),
    )


def auto_impl(problem: Problem, plan_for: Callable, sgemm: Callable) -> Impl:
    """``sgemm``'s automatic choice: kernel time of ``plan_for(M, N, K).launch`` and end-to-end
    time of ``sgemm(a, b, out=c)`` on Numba device arrays. ``config`` names the chosen stage:
    ``{"stage": name, **config}``."""
    M, N, K = problem.shape
    A, B, C = problem.A, problem.B, problem.C
    try:
        plan = plan_for(M, N, K)
    except Exception as e:
        return failed(AUTO, AUTO_LABEL, e)

    def launch() -> None:
        plan.launch(A, B, C, _ONE, _ZERO)

    def call() -> None:
        sgemm(A, B, out=C)

    st = plan.stage
    return Impl(
        AUTO,
        AUTO_LABEL,
        launch,
        call=call,
        rtol=st.rtol,
        precision=st.precision,
        config={"stage": st.name, **dict(st.config)},
        plan=plan_info(plan),
        note=f"auto: {st.name}",
    )


def stage_impl(problem: Problem, name: str, plan_for: Callable, half: Any = None) -> Impl:
    """Stage ``name`` with its tuned configuration for the shape: kernel time of
    ``plan_for(M, N, K, stage=name).launch``; a 16-bit stage multiplies ``half[precision]``
    (``(A16, B16)``, :func:`half_operands`; missing: copies of its own). A stage that reads only
    B stored transposed (``Stage.layouts`` without ``"NN"``: ``tf32_tma``) multiplies the same B
    stored ``(N, K)`` (noted in the row); a stage the planner refuses for the problem (alignment
    a tensor map needs, a layout) is SKIPPED with the planner's reason."""
    M, N, K = problem.shape
    A, B, C = problem.A, problem.B, problem.C
    label, precision = name, "fp32"
    geometry, note = None, ""
    try:
        base = get_stage(name)
        label, precision = base.label, base.precision
        if not base.supports(M, N, K):
            return Impl(
                name, label, None, precision=precision, skip="shape not supported by the stage"
            )
        if "NN" not in base.layouts and "NT" in base.layouts:
            # a stage that reads only B stored transposed (x @ W.T): the same B, stored (N, K)
            geometry, note = Geometry.dense(M, N, K, "NT"), "B stored transposed (N, K)"
        if precision in ("fp16", "bf16"):  # hgemm: 16-bit copies, N and K multiples of 8
            if N % 8 or K % 8:
                return Impl(
                    name,
                    label,
                    None,
                    precision=precision,
                    skip=f"{precision.upper()} (hgemm) needs N and K multiples of 8",
                )
            got = (half or {}).get(precision)
            A, B = got if got is not None else half_operands(problem, precision)
        if geometry is not None:
            B = stored_transposed(problem.b)
        compute = precision if precision in ("fp16", "bf16") else None
        try:
            plan = plan_for(M, N, K, stage=name, compute=compute, geometry=geometry)
        except ValueError as e:  # the planner's reason why the stage cannot serve the problem
            return Impl(name, label, None, precision=precision, skip=str(e))
    except Exception as e:
        return replace(failed(name, label, e), precision=precision)

    def launch() -> None:
        plan.launch(A, B, C, _ONE, _ZERO)

    st = plan.stage
    return Impl(
        st.name,
        st.label,
        launch,
        rtol=st.rtol,
        precision=st.precision,
        config=dict(st.config),
        plan=plan_info(plan),
        note=note,
    )
