"""``sgemm()``, ``matmul()``, ``hgemm()``, ``explain()``: check -> plan -> launch.

A call reads its operands (``arrays.operand``: pointer, shape, strides, GPU, a few hundred ns
each), checks them (``checks``: dtypes first, a, b and out), finds its plan's runner in one
dictionary (``dispatch.PLANS``; ``plan.choose.plan_for`` and ``launch.launcher.runner`` on the
first call of a shape) and launches the kernel on the caller's stream. Nothing is synchronized on
the host.

The call nearly everyone makes again and again (2-D C-contiguous float32 operands on one GPU, the
default stream, a shape already planned) takes a fast lane first (:func:`_plain_call`): the same
checks and plan in one pass over the operands, without ``Operand`` objects, ~2 us less host time
per call on an H100 machine's host (docs/design.md, "The call path"); it crosses three modules
(this one, ``arrays``, ``launch.launcher``). Anything else, errors included, goes the general way
(``checks``, then ``dispatch``). ``matmul`` of two 2-D operands is this same call (alpha 1, beta
0), fast lane included.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from . import checks, dispatch
from .arrays import (
    BF16,
    F32,
    HALF,
    PLAIN,
    PLAIN_T,
    PLAIN_V,
    Operand,
    new_output,
    operand,
    plain_overlap,
    pointers_aligned,
)
from .checks import COMPUTE, HGEMM_OUT, SCALARS
from .kernels._epilogue import ACTIVATIONS, OPERAND_SPECS, Epilogue
from .kernels.stage import Stage
from .launch.launcher import DEFAULT_STREAM
from .plan import tuning
from .plan.choose import Plan
from .plan.geometry import Alignment, Geometry

__all__ = [
    "COMPUTE",
    "HGEMM_OUT",
    "autotune",
    "explain",
    "grouped_mm",
    "hgemm",
    "linear",
    "matmul",
    "sgemm",
]


#: The dtypes a 16-bit product's bias may have.
HALF_BIAS = (F32, checks.F16)


def explain(
    a: Any, b: Any, *, stage: str | Stage | None = None, out: Any = None, compute: str | None = None
) -> Plan:
    """The plan ``sgemm(a, b, stage=stage, out=out, compute=compute)`` would run, from the
    operands themselves (their GPU, layout, batch and alignment). Nothing is launched or timed
    (with autotuning on, before the first call of a bucket this is the cost model's pick); ``repr``
    of the result says why.

    Raises:
        TypeError, ValueError: as ``sgemm`` for bad operands or stage.
    """
    checks.check_compute(compute)
    A, B, C, g, _ = checks.validate(a, b, out)
    M, K = A.shape[-2], A.shape[-1]
    N = B.shape[-1]
    c_ptr = A.ptr if C is None else C.ptr
    if g is None:
        aligned: bool | int = pointers_aligned(A.ptr, B.ptr, c_ptr)
    else:  # the pointers (plan_for checks the rows)
        M, N, K = g.M, g.N, g.K
        aligned = int(Alignment.of_pointers(A.ptr, B.ptr, c_ptr))
    return dispatch.plan_of(M, N, K, g, stage, aligned, A.device, compute, tune=False)


def autotune(enabled: bool | None = True) -> None:
    """Switch autotuning on (or off; None: as ``$NUMBA_GEMM_AUTOTUNE`` says) for this process.

    With it on, the first FP32 call of an automatic choice (``stage=None``) in a shape *bucket*
    nobody tuned (products within 2x in one dimension, same layout and row alignment) times the
    cost model's top candidates on this GPU (at most ``plan.autotune.CANDIDATES``, about
    ``plan.autotune.BUDGET_S`` seconds with a warm kernel cache; compiling a candidate that is not
    cached takes seconds more) and stores them in ``autotune.json`` beside the kernel cache
    (``plan.tuning.autotune_path``): later calls, and later processes with autotuning on, run
    the measured winner with no timing. Results of another package version or other kernel
    sources are discarded with a warning. Batches and the tensor-core modes are not autotuned.
    ``python -m numba_gemm.tools.tune --shapes ...`` tunes a list of shapes ahead of time.

    Plans made so far are forgotten (the next call of each shape plans it again).

    Raises:
        TypeError: ``enabled`` not a bool or None.
    """
    tuning.set_autotune(enabled)


def sgemm(
    a: Any,
    b: Any,
    *,
    stage: str | Stage | None = None,
    out: Any = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    stream: Any = 0,
    compute: str | None = None,
    bias: Any = None,
    activation: str | None = None,
    epilogue: Any = None,
    epilogue_args: tuple = (),
) -> Any:
    """``C = alpha * A @ B + beta * C`` in FP32 on the GPU, with one of the ladder's kernels.

    Args:
        a: A, shape ``(M, K)``, or a batch ``(batch, M, K)``; float32, on the GPU: a Numba
            device array, a CuPy array, a PyTorch CUDA tensor or any object with
            ``__cuda_array_interface__``, used zero-copy. Row-major or column-major (a
            transposed view: ``x.T``, ``tensor.t()``, a Fortran-ordered array), any row pitch
            (leading dimension), any batch stride (0 broadcasts one matrix).
        b: B, shape ``(K, N)`` or ``(batch, K, N)``, same rules, on the same GPU. A 2-D operand,
            or a batch of 1, is broadcast over the other's batch (as ``numpy.matmul``).
        stage: a stage name from ``STAGES`` (e.g. ``"smem_tiling"``; tunable stages then use
            their tuned configuration for the shape) or a ``Stage``; ``None`` picks the fastest
            FP32 kernel for this GPU, shape and layout. The teaching stages (1-7) take 2-D
            row-major C-contiguous operands only; the tunable ones (warptiling and later) take
            every layout, pitch and batch. ``numba_gemm.explain(a, b)`` says what runs and why.
        out: C, shape ``(M, N)`` (``(batch, M, N)`` when a or b is 3-D), float32, row-major
            (unit stride along N; any row pitch and batch stride that keeps the results apart),
            on the same GPU, not overlapping A or B. Written in place and returned. When
            ``None``, a new C-contiguous array of the same kind as ``a`` (a PyTorch tensor, a
            CuPy array, else a Numba device array; its library allocates it) is returned
            (``beta`` is then irrelevant).
        alpha, beta: real scalars, applied in float32. With ``beta == 0``, C is not read.
        stream: 0 (the default stream), a Numba stream, a CuPy/PyTorch stream or a raw handle.
            The call is asynchronous on that stream. An operand whose producer stream is known
            (CUDA Array Interface v3, CuPy's current stream) is ordered before the launch with an
            event wait on the device, never a host synchronization.
        compute: the arithmetic (:data:`COMPUTE`): ``"fp32"`` (IEEE FP32, the default),
            ``"tf32"`` (TF32 tensor cores, cuBLAS's ``CUBLAS_COMPUTE_32F_FAST_TF32``: ~1e-3
            relative error, several times faster) or ``"3xtf32"`` (three TF32 products per
            multiply: FP32-level accuracy from tensor cores). None: ``"fp32"``, or the named
            stage's own arithmetic. The TF32 modes need compute capability 8.0+; on 9.0 (the
            wgmma stages) they take every layout, pitch and batch as FP32 does, on 8.x 2-D
            row-major C-contiguous operands only. A mode *allows* its arithmetic, as cuBLAS's
            compute types do: the automatic choice may run an FP32 kernel (as accurate or
            more) where it is predicted faster, e.g. a matrix-vector product
            (``plan.choose.ALLOWED``; ``explain`` says which).
        bias, activation, epilogue, epilogue_args: a fused epilogue, applied to each result
            ``v = alpha * acc + beta * C`` before it is stored, in this order (each optional):
            ``v + bias`` (float32, shape ``(N,)`` or ``(1, N)``: one per column, as ``x @ W.T +
            b``; ``(M, 1)``: one per row), then ``activation`` (``"relu"``, ``"gelu"`` (erf
            form), ``"gelu_tanh"`` or ``"silu"``), then ``epilogue(v, row, col,
            *epilogue_args)``: a ``@cuda.jit(device=True)`` function (or a plain Python function,
            compiled as one) of the FP32 value, its row and column (within its matrix of a
            batch) and up to three device arrays (float32 or float16, 1-D or 2-D,
            C-contiguous), returning the value to store. The tunable FP32 stages compile it into
            their kernel (one per epilogue, cached on disk, keyed by the function's code); any
            other plan runs the product and then the epilogue over C in a second kernel.

    Returns:
        ``out`` if given, else the new array.

    Layouts (as BLAS names them, by whether A and B are stored transposed): NN, NT, TN and TT
    each run one kernel with no copy; so does a batch (grid z over it). Operands with no unit
    stride in their last two dimensions (``x[:, ::2]``) are rejected, not copied: the message
    says how to make them contiguous, and what that costs.

    Degenerate sizes follow NumPy: ``M == 0`` or ``N == 0`` gives an empty C; ``K == 0`` gives
    ``beta * C`` (zeros for a new output).

    Cost: the first call of a shape and layout chooses its plan and loads its kernel (from the
    on-disk cache, or compiled: seconds); later calls are a few microseconds of host time. A
    large product whose rows are not 16-byte aligned (K or N not a multiple of 4) may be staged
    (``numba_gemm.plan.staging``): A, B and/or C go through zero-padded copies with aligned pitches
    so the 128-bit kernels run; the copies use a workspace per stream of up to the padded
    operands' size (kept for later calls, at most ``staging.MAX_BYTES``).

    Raises:
        TypeError: a host (NumPy) array, CPU tensor or other non-device object (the message
            names ``numba.cuda.to_device``); ``a`` or ``b`` not float32 (float16: the message
            names ``hgemm``); alpha/beta not real numbers; ``stage`` or ``stream`` of another
            type. The dtypes of ``a``, ``b`` and ``out`` are checked before anything else.
        ValueError: alpha/beta not finite in float32; an operand not 2-D or 3-D, or with no unit
            stride, negative strides or overlapping rows; inner dimensions or batch sizes that
            differ; ``out`` of the wrong shape or dtype, column-major, with overlapping
            matrices, or overlapping ``a`` or ``b``; operands on different GPUs; an unknown stage
            name (valid names listed); a stage that does not support the shape, layout or batch,
            or this GPU's compute capability (``Stage.min_cc``); an unknown ``compute``, one
            that the named stage does not compute, or that no stage serves for this GPU or
            layout. Epilogue arguments as ``checks.check_epilogue`` says (a bias of another
            shape or dtype, an unknown activation, an ``epilogue`` that is not a device
            function of ``(value, row, col, *epilogue_args)``); an ``epilogue`` that does not
            compile raises ``TypeError`` at its first call. Nothing is launched or written when
            an error is raised.
    """
    # (the lane takes a bias and an activation, not a user function: checked inline, the call
    # nearly every caller makes pays for no more)
    if (
        epilogue is None
        and type(epilogue_args) is tuple
        and not epilogue_args
        and type(stream) is int
        and stream == 0
    ):
        done = _plain_call(a, b, out, stage, alpha, beta, compute, bias, activation)
        if done is not None:
            return done
    A, B, C, g, shape = checks.validate(a, b, out)
    if compute is not None:
        checks.check_compute(compute)
    epi, extras = checks.check_epilogue(
        "sgemm", bias, activation, epilogue, epilogue_args, *shape[-2:], A.device
    )
    return dispatch.run(A, B, C, g, shape, out, alpha, beta, stage, stream, compute, epi, extras)


def _no_epilogue(bias: Any, activation: Any, epilogue: Any, epilogue_args: Any) -> bool:
    """Whether a call asks for no fused epilogue (then it may take the fast lane)."""
    return (
        bias is None
        and activation is None
        and epilogue is None
        and (epilogue_args is None or (type(epilogue_args) is tuple and not epilogue_args))
    )


@functools.lru_cache(maxsize=dispatch.MAX_PLANS)
def _dense(M: int, N: int, K: int, layout: str) -> Geometry:
    """``Geometry.dense``, memoized (the fast lane keys transposed operands' plans by it)."""
    return Geometry.dense(M, N, K, layout)


def _lane_beta(beta: Any) -> float | None:
    """The FP32 ``beta`` of a fast-lane call with an ``out``: 0.0 for zero, a float the call
    path has met before (``checks.SCALARS``), else None (the general path converts it)."""
    if type(beta) is float and beta == 0.0:
        return 0.0
    return SCALARS.get(beta) if type(beta) is float else None


def _plain_call(
    a: Any,
    b: Any,
    out: Any,
    stage: Any,
    alpha: Any,
    beta: Any,
    compute: str | None = None,
    bias: Any = None,
    activation: str | None = None,
) -> Any:
    """``sgemm``'s fast lane, for the call nearly every caller makes: plain operands
    (``arrays.PLAIN``: 2-D, float32, C-contiguous, on the one visible GPU, no producer stream;
    A or B may be the transpose of one, ``arrays.PLAIN_T``, as ``x @ w.T`` passes it), float
    scalars the call path has met before, the default stream, and a plan already made for the
    shape (and layout: ``Geometry.dense``), arithmetic and epilogue (a plain bias vector per
    column, ``arrays.PLAIN_V``, and an activation; no user function). One pass over the
    operands, no ``Operand`` objects, the plan's pointer launcher (``Runner.run_plain``; a staged
    runner's inherited one wraps the pointers for its copies; ``Runner.run_epilogue``). Returns
    the result, or None with nothing done for any other call (a first call, an error to raise):
    the general path then decides, and it keys its plans as this lane does, so both launch the
    same plan for the same operands."""
    ra, rb = PLAIN.get(type(a)), PLAIN.get(type(b))
    if ra is None or rb is None:
        return None
    # each operand plain, else the transpose of one (x @ w.T: its layout's plans), else no lane;
    # a is decided before b is read (a batch, as matmul passes, costs one operand's readers)
    layout = None  # both plain: the plain geometry's plans
    pa = ra(a)
    if pa is None:
        pa = PLAIN_T[type(a)](a)
        if pa is None:
            return None
        layout = "TN"
    pb = rb(b)
    if pb is None:
        pb = PLAIN_T[type(b)](b)
        if pb is None:
            return None
        layout = "TT" if layout else "NT"
    a0, M, K = pa
    b0, kb, N = pb
    if kb != K:
        return None
    return _lane(a, a0, b0, M, N, K, layout, out, stage, alpha, beta, compute, bias, activation)


def _lane(
    a: Any,
    a0: int,
    b0: int,
    M: int,
    N: int,
    K: int,
    layout: str | None,
    out: Any,
    stage: Any,
    alpha: Any,
    beta: Any,
    compute: str | None,
    bias: Any,
    activation: str | None,
) -> Any:
    """The fast lane after its operands A and B are read (:func:`_plain_call`; ``linear``'s):
    data pointers, shape, ``layout`` (None: NN, the plain geometry)."""
    alpha32 = SCALARS.get(alpha) if type(alpha) is float else None
    if not (M and N and K) or alpha32 is None:
        return None
    if out is None:
        c0, beta32 = a0, 0.0  # the general path's stand-in for the new C's pointer
    else:
        rc = PLAIN.get(type(out))
        pc = rc(out) if rc is not None else None
        if pc is None or pc[1] != M or pc[2] != N:
            return None
        c0 = pc[0]
        if plain_overlap(a0, b0, c0, M, N, K):
            return None  # the general path raises
        beta32 = _lane_beta(beta)
        if beta32 is None:
            return None
    skey = stage if stage is None or type(stage) is str else dispatch.stage_key(stage)
    if layout is None:
        key: tuple = (0, M, N, K, not ((a0 | b0 | c0) & 15), skey, compute)  # pointers_aligned
    else:  # keyed as the general path keys a geometry (its alignment: the pointers')
        aligned = (not ((a0 | b0) & 15)) + (not ((a0 | b0 | c0) & 15))
        key = (0, _dense(M, N, K, layout), aligned, skey, compute)
    fused = bias is not None or activation is not None
    if fused:  # keyed as dispatch.epilogue_key keys it; the bias's pointer is the operand
        e: tuple = ()
        if bias is not None:
            rv = PLAIN_V.get(type(bias))
            pv = rv(bias) if rv is not None else None
            if pv is None or pv[1] != N:
                return None
            e = (pv[0],)
        epi = _LANE_EPILOGUES.get((bias is not None, activation))
        if epi is None:
            return None
        p = dispatch.PLANS.get((*key, epi, ((N,),) if e else ()))
        if p is None or not hasattr(p, "run_epilogue"):  # (an ApplyRunner: the general path)
            return None
    else:
        p = dispatch.PLANS.get(key)
        if p is None:
            return None
    if out is None:
        out = new_output(a, 0, (M, N))
        rc = PLAIN.get(type(out))
        pc = rc(out) if rc is not None else None
        if pc is None or pc[0] & 15:  # not seen so far: allocators align to 256 bytes
            return None
        c0 = pc[0]
    if fused:
        p.run_epilogue(a0, b0, c0, alpha32, beta32, DEFAULT_STREAM, e)
    else:
        p.run_plain(a0, b0, c0, alpha32, beta32, DEFAULT_STREAM)
    return out


#: The epilogues the fast lane keys by (a bias per column or none, an activation or none), as
#: ``checks.check_epilogue`` makes them.
_LANE_EPILOGUES = {
    (has_bias, act): Epilogue(
        "column" if has_bias else None,
        act,
        None,
        OPERAND_SPECS[("float32", 1)] if has_bias else "",
    )
    for has_bias in (False, True)
    for act in (None, *ACTIVATIONS)
    if has_bias or act is not None
}


def hgemm(
    a: Any,
    b: Any,
    *,
    out: Any = None,
    out_dtype: str | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    stream: Any = 0,
    stage: str | Stage | None = None,
    bias: Any = None,
    activation: str | None = None,
    epilogue: Any = None,
    epilogue_args: tuple = (),
) -> Any:
    """``C = alpha * A @ B + beta * C`` with FP16 or BF16 operands on tensor cores, FP32
    accumulation (BLAS's HGEMM; cuBLAS ``cublasGemmEx`` with ``CUDA_R_16F`` or ``CUDA_R_16BF``
    inputs and ``CUBLAS_COMPUTE_32F``).

    Args:
        a: A, shape ``(M, K)``, float16 or bfloat16, row-major C-contiguous or the transpose
            of a C-contiguous ``(K, M)`` (copied row-major first); or a batch ``(batch, M,
            K)`` of such matrices (``b`` 3-D too, or 2-D: one B for every product; a batch of
            one is shared likewise; ``out`` ``(batch, M, N)``; one launch per matrix); on the
            GPU (Numba, CuPy, PyTorch or any ``__cuda_array_interface__`` object; zero-copy).
            bfloat16: a PyTorch ``torch.bfloat16`` tensor, a Numba array of
            ``ml_dtypes.bfloat16``, or a CAI object of type string ``"<V2"`` (``ml_dtypes``'
            and JAX's bfloat16).
        b: B, shape ``(K, N)``, of ``a``'s dtype, row-major C-contiguous, or the transpose of a
            C-contiguous ``(N, K)`` (``x @ W.T`` as ``torch.nn.Linear`` computes: ``W.T``, no
            copy; compute capability 9.0), on the same GPU.
        out: C, shape ``(M, N)``, float32 or of ``a``'s dtype, C-contiguous, on the same GPU,
            not overlapping A or B: written in place and returned. None: a new array of
            ``out_dtype`` and of ``a``'s kind.
        out_dtype: ``"float32"`` (the default: FP32 results, no rounding after the FP32 sums) or
            the operands' ``"float16"`` / ``"bfloat16"`` (each result rounded once, at the end,
            to nearest even). With ``out`` given, its dtype decides and ``out_dtype``, if given,
            must match it.
        alpha, beta: real scalars, applied in FP32 to the FP32 sums. With ``beta == 0`` C is
            not read.
        stream: as for :func:`sgemm`.
        stage: None (the stage for the shape and dtype) or the name / ``Stage`` of a stage of
            the operands' precision (``"fp16"``, e.g. ``"hgemm_mma"``; ``"bf16"``:
            ``"bf16_tma"``).
        bias, activation, epilogue, epilogue_args: a fused epilogue on the FP32 results, as
            for :func:`sgemm` (``bias`` float32 or float16): in the TMA stages' stores (20,
            24; a 16-bit C is then stored in column pairs), else by a second kernel over C
            (stages 14, 17), which rounds a 16-bit C twice.

    Returns:
        ``out`` if given, else the new array.

    FP16 needs compute capability 8.0+, BF16 9.0 (stage 24, ``bf16_tma``). The kernels copy
    16-byte chunks (8 elements) of A's and B's rows. Where those rows are not whole 16-byte
    units (``K``, or ``N`` for row-major B, not a multiple of 8; a base pointer off 16 bytes)
    or A is stored transposed, the plan copies A and B into zero-padded buffers first, runs the
    aligned product there and copies C back (``plan.choose.half_staged``; one more pass over
    the copied operands). ``M == 0`` or ``N == 0`` gives an empty C.

    Raises:
        TypeError: a host array or other non-device object; ``a`` not float16 or bfloat16, or
            ``b`` not of ``a``'s dtype; ``out`` neither float32 nor of ``a``'s dtype (the
            dtypes of ``a``, ``b`` and ``out`` are checked before anything else); a new
            bfloat16 output of a library without that dtype (CuPy; Numba without
            ``ml_dtypes``); alpha/beta not real; ``stage`` or ``stream`` of another type.
        ValueError: ``a`` or ``b`` (or a matrix of a batch) neither C-contiguous nor the
            transpose of a C-contiguous array (B stored transposed where no stage of this GPU
            takes it: compute capability 8.x); batch sizes that differ (other than 1); ``out``
            not of the batch, or its matrices sharing memory; inner dimensions that differ;
            ``K == 0``; ``out`` of the wrong shape, not C-contiguous, overlapping ``a`` or ``b``,
            or not of ``out_dtype``; an ``out_dtype`` other than float32 and the operands' type;
            operands on different GPUs; a stage of another precision; a GPU below the compute
            capability the dtype needs. Nothing is launched or written when an error is raised.
    """
    plain = _no_epilogue(bias, activation, epilogue, epilogue_args)
    if plain and type(stream) is int and stream == 0:
        done = _half_call(a, b, out, out_dtype, alpha, beta, stage)
        if done is not None:
            return done
    A, B = operand(a), operand(b)
    C = None if out is None else operand(out)
    if len(A.shape) != 2 or len(B.shape) != 2:
        epi_args = (bias, activation, epilogue, epilogue_args)
        return _half_batch(A, B, C, out, out_dtype, alpha, beta, stage, stream, epi_args)
    M, N, K, out_dtype, layout = checks.check_hgemm(A, B, C, out_dtype)
    epi, extras = checks.check_epilogue(
        "hgemm", bias, activation, epilogue, epilogue_args, M, N, A.device, HALF_BIAS
    )
    return dispatch.run_fp16(
        A, B, C, out, (M, N, K), out_dtype, alpha, beta, stage, stream, layout, epi, extras
    )


def _half_batch(
    A: Any,
    B: Any,
    C: Any,
    out: Any,
    out_dtype: Any,
    alpha: Any,
    beta: Any,
    stage: Any,
    stream: Any,
    epi_args: tuple,
) -> Any:
    """``hgemm`` of a batch (``checks.half_batches``): the first matrix checked as a 2-D call
    before the first launch (the others share its shape, strides and dtypes, and the batch's
    aliasing is checked whole), then one launch (or staged sequence) per matrix on ``stream``."""
    batch, M, N = checks.half_batches(A, B, C)
    C0 = None if C is None else checks.batch_matrix(C, 0)
    if batch:
        *_, dt, layout = checks.check_hgemm(
            checks.batch_matrix(A, 0), checks.batch_matrix(B, 0), C0, out_dtype
        )
    else:
        dt, layout = out_dtype or "float32", "NN"
    K = A.shape[-1]
    epi, extras = checks.check_epilogue("hgemm", *epi_args, M, N, A.device, HALF_BIAS)
    if out is None:
        out = new_output(A.obj, A.device, (batch, M, N), dt)
        C = operand(out)
    for i in range(batch):
        a, b, c = (checks.batch_matrix(X, i) for X in (A, B, C))
        dispatch.run_fp16(
            a, b, c, out, (M, N, K), dt, alpha, beta, stage, stream, layout, epi, extras
        )
    return out


def _half_call(
    a: Any, b: Any, out: Any, out_dtype: str | None, alpha: Any, beta: Any, stage: Any
) -> Any:
    """``hgemm``'s fast lane: 16-bit operands read by a 16-bit reader (``arrays.HALF``: PyTorch
    tensors and the simulator's arrays, one visible GPU), A C-contiguous, B C-contiguous or the
    transpose of one, K and N multiples of 8, both 16-byte aligned; ``out`` None or a
    C-contiguous ``(M, N)`` of float32 (``arrays.PLAIN``) or the operands' type, of the same
    kind, not overlapping them; float scalars met before; the default stream; and a plan
    ``dispatch.run_fp16`` already made, under its key (``dispatch.half_key``). Launches through
    the bound launcher (``Runner.run_plain``) where it has one, else ``run`` on the operands as
    the general path reads them (the simulator). Returns the
    result, or None with nothing done (a first call, anything else, an error to raise: the
    general path decides)."""
    ra = HALF.get(type(a))
    if ra is None or type(b) is not type(a):
        return None
    pa, pb = ra(a), ra(b)
    if pa is None or pb is None or pa[4]:
        return None
    a0, M, K, half, _ = pa
    b0, kb, N, hb, bt = pb
    if hb != half or kb != K or not (M and N and K) or (K | N) & 7 or (a0 | b0) & 15:
        return None
    alpha32 = SCALARS.get(alpha) if type(alpha) is float else None
    if alpha32 is None:
        return None
    if out is None:
        od = out_dtype or "float32"
        if od != "float32" and od != half:
            return None
        beta32, c_ok = 0.0, True
    else:
        if type(out) is not type(a):
            return None
        pc = ra(out)
        if pc is not None:
            c0, cm, cn, od, ct = pc
            if ct or od != half:
                return None
        else:
            rc = PLAIN.get(type(out))
            pc = rc(out) if rc is not None else None
            if pc is None:
                return None
            (c0, cm, cn), od = pc, "float32"
        if (cm, cn) != (M, N) or (out_dtype is not None and out_dtype != od):
            return None
        if plain_overlap(a0, b0, c0, M, N, K, 2, 4 if od == "float32" else 2):
            return None  # the general path raises
        beta32 = _lane_beta(beta)
        if beta32 is None:
            return None
        c_ok = not (c0 & 15)
    layout = "NT" if bt else "NN"
    compute = "bf16" if half == "bfloat16" else "fp16"
    p = dispatch.PLANS.get(dispatch.half_key(compute, 0, M, N, K, stage, od, layout, c_ok))
    if p is None:
        return None
    if out is None:
        out = new_output(a, 0, (M, N), od)
        c0 = ra(out)[0] if od == half else PLAIN[type(out)](out)[0]
        if c0 & 15:  # (allocators align to 256 bytes)
            return None
    if "run_plain" in p.__dict__:  # the bound launcher (a GPU, after the plan's first call)
        p.run_plain(a0, b0, c0, alpha32, beta32, DEFAULT_STREAM)
    else:  # (the simulator: the operands as the general path reads them)
        p.run(operand(a), operand(b), operand(out), alpha32, beta32, DEFAULT_STREAM)
    return out


def matmul(
    a: Any,
    b: Any,
    *,
    out: Any = None,
    stage: str | Stage | None = None,
    stream: Any = 0,
    compute: str | None = None,
    bias: Any = None,
    activation: str | None = None,
    epilogue: Any = None,
    epilogue_args: tuple = (),
) -> Any:
    """``a @ b`` in FP32 on the GPU, with ``numpy.matmul``'s shape rules.

    Args:
        a, b: float32 device arrays (as for :func:`sgemm`: Numba, CuPy, PyTorch, CUDA Array
            Interface), on one GPU, of any number of dimensions >= 1. As in NumPy: a 1-D ``a``
            is a row ``(1, K)`` and a 1-D ``b`` a column ``(K, 1)``, that dimension being
            removed from the result; dimensions before the last two are batch dimensions,
            broadcast against each other. The last two dimensions of each may be row- or
            column-major with any pitch (no copy); batch dimensions may have any strides (0:
            broadcast).
        out: the result, of the broadcast shape ``(*batch, M, N)`` (less removed dimensions),
            float32, with row-major matrices; default: a new C-contiguous array of ``a``'s kind.
        stage, stream, compute: as for :func:`sgemm`.
        bias, activation, epilogue, epilogue_args: a fused epilogue, as for :func:`sgemm`
            (``row`` and ``col`` are within each matrix of a batch; a bias is broadcast over
            the batch).

    Returns:
        ``out`` or the new array.

    Launches: two 2-D operands make the call ``sgemm(a, b, out=out)`` makes (its checks, plan
    and fast lane: the same host time). Batches: one kernel (grid z over the batch) when each
    operand's batch dimensions collapse into one stride (contiguous batches, a broadcast
    operand, or one batch dimension), else one per index of the leading batch dimensions that
    do not collapse, every one checked before the first is launched.

    Raises:
        TypeError, ValueError: as :func:`sgemm` (``out`` not float32 is a ValueError); also a
        0-D operand; batch dimensions that do not broadcast (the message gives both shapes); an
        ``out`` whose matrices share memory (a broadcast batch dimension, stride 0, or
        overlapping slices), or that overlaps ``a`` or ``b`` anywhere. Nothing is launched or
        written when an error is raised.
    """
    # 2-D operands (nearly every call) are sgemm's product with alpha 1 and beta 0: its fast lane,
    # checks, plans and launch, at sgemm's host cost
    plain = _no_epilogue(bias, activation, epilogue, epilogue_args)
    if plain and compute is None and type(stream) is int and stream == 0:
        done = _plain_call(a, b, out, stage, 1.0, 0.0)
        if done is not None:
            return done
    checks.check_compute(compute)
    A, B = operand(a), operand(b)
    C = None if out is None else operand(out)
    checks.check_dtypes(A, B, C)  # first: nothing below is read as float32 unless it is

    def fused(M: int, N: int) -> tuple:
        return checks.check_epilogue(
            "matmul", bias, activation, epilogue, epilogue_args, M, N, A.device
        )

    if len(A.shape) == 2 and len(B.shape) == 2:
        A, B, C, g, shape = checks.validate_operands(A, B, C)
        epi, extras = fused(*shape)
        return dispatch.run(A, B, C, g, shape, out, 1.0, 0.0, stage, stream, compute, epi, extras)

    def allocate(shape: tuple) -> tuple[Any, Operand]:
        new = new_output(A.obj, A.device, shape)
        return new, operand(new)

    got: list = []
    new, launches = checks.matmul_launches(A, B, C, allocate, lambda M, N: got.append(fused(M, N)))
    epi, extras = got[0]
    out = new if out is None else out
    for Av, Bv, Cv, g, vshape in launches:
        dispatch.run(Av, Bv, Cv, g, vshape, out, 1.0, 0.0, stage, stream, compute, epi, extras)
    return out


def linear(
    x: Any,
    weight: Any,
    bias: Any = None,
    activation: str | None = None,
    *,
    out: Any = None,
    compute: str | None = None,
    stream: Any = 0,
    epilogue: Any = None,
    epilogue_args: tuple = (),
) -> Any:
    """``activation(x @ weight.T + bias)``: ``torch.nn.functional.linear``'s layout, with the
    bias and the activation fused into the product's epilogue.

    Args:
        x: the input, shape ``(..., in_features)`` (``K``): float32 (:func:`sgemm`, in
            ``compute``'s arithmetic) or float16 / bfloat16 (:func:`hgemm`, FP32 sums, the
            result in ``x``'s dtype), on the GPU. 2-D: any layout :func:`sgemm` takes (float32;
            16-bit: C-contiguous); more dimensions: C-contiguous, flattened to ``(rows, K)``
            without a copy.
        weight: ``(out_features, in_features)`` (``(N, K)``), C-contiguous, of ``x``'s dtype,
            on the same GPU: read as ``B = weight.T`` (stored transposed, no copy).
        bias: None or ``(N,)`` (float32, or float16 for 16-bit operands).
        activation: None, ``"relu"``, ``"gelu"`` (erf form, as ``torch.nn.GELU()``),
            ``"gelu_tanh"`` (``GELU(approximate="tanh")``) or ``"silu"``.
        out: the result, ``(..., out_features)``, C-contiguous (default: a new array of
            ``x``'s kind).
        compute, stream, epilogue, epilogue_args: as for :func:`sgemm` (``compute`` for
            float32 only).

    Returns:
        ``out`` or the new array, shape ``(*x.shape[:-1], N)``.

    Raises:
        TypeError: ``x`` neither float32 nor 16-bit, ``weight`` of another dtype; as
            :func:`sgemm` / :func:`hgemm` for the rest.
        ValueError: ``weight`` not 2-D C-contiguous; ``x`` 0-D or 1-D, or of more than two
            dimensions and not C-contiguous; ``out`` of another shape or not C-contiguous;
            inner dimensions that differ; as :func:`sgemm` / :func:`hgemm` for the rest.
    """
    if type(stream) is int and stream == 0 and _no_epilogue(None, None, epilogue, epilogue_args):
        rx, rw = PLAIN.get(type(x)), PLAIN.get(type(weight))
        px = rx(x) if rx is not None else None
        pw = rw(weight) if rw is not None and px is not None else None
        if pw is not None and px[2] == pw[2]:  # x (M, K), weight (N, K): x @ weight.T, NT
            lane = (px[0], pw[0], px[1], pw[1], px[2], "NT", out, None, 1.0, 0.0)
            done = _lane(x, *lane, compute, bias, activation)
            if done is not None:
                return done
    X, W = operand(x), operand(weight)
    half = X.dtype == checks.F16 or X.dtype is BF16
    if not (X.dtype == F32 or half):
        raise TypeError(f"linear: x must be float32, float16 or bfloat16, got dtype {X.dtype}")
    if not W.dtype == X.dtype:
        raise TypeError(f"linear: weight must be of x's dtype {X.dtype}, got dtype {W.dtype}")
    if len(W.shape) != 2 or not W.is_c_contiguous():
        raise ValueError(
            "linear: weight must be a 2-D C-contiguous (out_features, in_features) array, got "
            f"shape {tuple(W.shape)} and strides {tuple(W.strides)} bytes"
        )
    N, K = W.shape
    if len(X.shape) < 2:
        raise ValueError(f"linear: x must have at least 2 dimensions, got shape {X.shape}")
    if X.shape[-1] != K:
        raise ValueError(
            f"linear: x has {X.shape[-1]} features (shape {tuple(X.shape)}), weight {K} "
            f"(shape {tuple(W.shape)})"
        )
    lead = tuple(X.shape[:-1])
    rows = math.prod(lead)
    item = X.dtype.itemsize
    if len(X.shape) > 2:
        if not X.is_c_contiguous():
            raise ValueError(
                f"linear: x of shape {tuple(X.shape)} must be C-contiguous to be read as "
                f"({rows}, {K}) rows (x.contiguous() copies it)"
            )
        X = Operand(X.obj, X.ptr, (rows, K), (K * item, item), X.dtype, X.device, X.stream)
    Wt = Operand(W.obj, W.ptr, (K, N), tuple(W.strides[::-1]), W.dtype, W.device, W.stream)
    out_dtype = "float32" if not half else ("bfloat16" if X.dtype is BF16 else "float16")
    result = out
    if out is None:
        result = new_output(X.obj, X.device, (*lead, N), out_dtype)
    C = operand(result)
    if tuple(C.shape) != (*lead, N) or not C.is_c_contiguous():
        raise ValueError(
            f"linear: out must be C-contiguous of shape {(*lead, N)}, got shape "
            f"{tuple(C.shape)} and strides {tuple(C.strides)} bytes"
        )
    if len(C.shape) != 2:
        citem = C.dtype.itemsize
        C = Operand(C.obj, C.ptr, (rows, N), (N * citem, citem), C.dtype, C.device, C.stream)
    if half:
        if compute is not None:
            raise ValueError(f"linear: compute is for float32 inputs, got {compute!r}")
        M, N, K, out_dtype, layout = checks.check_hgemm(X, Wt, C, out_dtype)
        epi, extras = checks.check_epilogue(
            "linear", bias, activation, epilogue, epilogue_args, M, N, X.device, HALF_BIAS
        )
        dispatch.run_fp16(
            X, Wt, C, result, (M, N, K), out_dtype, 1.0, 0.0, None, stream, layout, epi, extras
        )
        return result
    A, B, C, g, shape = checks.validate_operands(X, Wt, C)
    checks.check_compute(compute)
    epi, extras = checks.check_epilogue(
        "linear", bias, activation, epilogue, epilogue_args, *shape, A.device
    )
    dispatch.run(A, B, C, g, shape, result, 1.0, 0.0, None, stream, compute, epi, extras)
    return result


def grouped_mm(a: Any, b: Any, offsets: Any = None, *, out: Any = None, stream: Any = 0) -> Any:
    """A grouped product in one launch, as mixture-of-experts layers need (the layout of
    ``torch._grouped_mm``): ``out[rows of g] = a[rows of g] @ b[g]`` for every group ``g``,
    group ``g`` owning rows ``offsets[g-1] .. offsets[g]`` of ``a`` and ``out``
    (``offsets[-1]`` is 0).

    Args:
        a: the tokens, ``(T, K)``, float32, C-contiguous, grouped by expert (group g's rows
            consecutive), on the GPU (Numba, CuPy, PyTorch or any CUDA Array Interface object).
        b: the experts' matrices, ``(E, K, N)`` float32: each row-major, or the transpose of a
            row-major ``(N, K)`` (``w.transpose(1, 2)`` of ``(E, N, K)`` weights, as
            ``x @ W_g.T``); any non-negative stride between groups.
        offsets: ``(E,)`` int32 on the GPU: each group's end row (cumulative sums of the group
            sizes), read by the kernel itself: the host never synchronizes on them. A group
            whose end is not past the previous one's is empty; ends are clamped to ``[0, T]``.
        out: ``(T, N)`` float32, C-contiguous, not overlapping the inputs (default: a new array
            of ``a``'s kind). Rows past ``offsets[E-1]`` are not written.
        stream: as for :func:`sgemm`.

    Returns:
        ``out`` or the new array (the list form: the list of products).

    One persistent launch walks every group's ``BM x BN`` tiles of stage 10 (``multistage``,
    its tiles for the mean group; ``launch.grouped``): no host loop over groups, empty groups
    cost nothing. FP32 arithmetic.

    **List form**: ``grouped_mm([a_0, a_1, ...], [b_0, b_1, ...])`` computes ``a_i @ b_i`` for
    every pair in the same one launch and returns the list of products. Each ``a_i`` is a
    C-contiguous ``(M_i, K)`` float32 (``M_i`` may be 0), each ``b_i`` a ``(K, N)`` float32,
    row-major or the transpose of a row-major ``(N, K)``, all alike: the pairs share K and N
    (experts of one layer; their row counts differ). ``out``: None (the products are row blocks
    of one new ``(sum M_i, N)`` array of ``a_0``'s kind) or a list of C-contiguous ``(M_i, N)``
    arrays, written in place. ``offsets`` must be None: the host knows the row counts, and their
    ends go to the GPU once per new split (cached). Used where they lie: ``a_i`` that are
    consecutive row blocks of one array (``torch.split``, slices), ``b_i`` one stride apart
    (``list(w)`` of an ``(E, K, N)`` tensor), outputs that are consecutive row blocks. Otherwise
    they are copied through a per-stream workspace on the same stream (rows of ``a`` and
    outputs: a copy of the tokens; ``b``: every matrix on every call, with a
    ``RuntimeWarning``: stack the weights once instead).

    Raises:
        TypeError: ``a``, ``b`` or ``out`` not float32, ``offsets`` not int32, a host array;
            ``offsets`` missing with ``a`` an array.
        ValueError: as ``checks.check_grouped`` (``checks.check_grouped_pairs`` for the list
            form) says: shapes, strides, GPUs, aliasing; ``offsets`` given with lists. Nothing
            is launched or written when an error is raised.
    """
    if isinstance(a, (list, tuple)):
        if offsets is not None:
            raise ValueError(
                "grouped_mm: offsets is for a as one (T, K) array; with a list of matrices the "
                "row counts are theirs: pass offsets=None"
            )
        if not isinstance(b, (list, tuple)) or not isinstance(out, (list, tuple, type(None))):
            raise TypeError(
                "grouped_mm: with a as a list, b must be a list of (K, N) matrices and out None "
                f"or a list of (M_i, N) arrays; got b of type {type(b).__name__}"
            )
        As, Bs = [operand(x) for x in a], [operand(x) for x in b]
        Cs = None if out is None else [operand(x) for x in out]
        layout, K, N = checks.check_grouped_pairs(As, Bs, Cs)
        return dispatch.run_grouped_pairs(As, Bs, Cs, layout, K, N, out, stream)
    if offsets is None:
        raise TypeError(
            "grouped_mm: offsets (each group's end row, int32 on the GPU) is required when a "
            "is one (T, K) array; pass a list of matrices for the list form"
        )
    A, B, O = operand(a), operand(b), operand(offsets)
    C = None if out is None else operand(out)
    layout = checks.check_grouped(A, B, O, C)
    if out is None:
        out = new_output(A.obj, A.device, (A.shape[0], B.shape[2]))
        C = operand(out)
    return dispatch.run_grouped(A, B, C, O, layout, out, stream)
