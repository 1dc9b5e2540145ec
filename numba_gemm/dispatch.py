"""The call after its checks: the one cache of runners, keyed as the fast lane keys them, and the
general path (scalars, plan, output, ordering after producer streams, launch).

``PLANS`` maps (GPU, shape or geometry, alignment, stage request, compute) to the
:class:`~numba_gemm.launch.launcher.Runner` of ``plan.choose.plan_for``'s plan: a first call of a
shape plans it and loads its kernel, later ones find it here. ``api._plain_call`` (the fast lane)
reads the same dictionary with the same keys, so both paths launch the same plan for the same
operands.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
from numba import cuda

from . import checks
from .arrays import BF16, F32, Operand, new_output, operand, pointers_aligned
from .device import SIMULATOR, cdiv, check_grid
from .device import info as device_info
from .kernels import get_stage
from .kernels._scale import BLOCK as SCALE_BLOCK
from .kernels.stage import Stage
from .launch import driver, workspace
from .launch.grouped import (
    GroupedRunner,
    few_rows_choice,
    matrices_in_place,
    rows_in_place,
)
from .launch.launcher import (
    DEFAULT_STREAM,
    SHARED_STREAMS,
    Runner,
    apply_epilogue,
    copy_matrix,
    epilogue_runner,
    runner,
    scale_kernel,
    stream_handle,
)
from .plan import autotune, tuning
from .plan.choose import Plan, half_staged, plan_for
from .plan.geometry import Alignment, Geometry

#: Runners kept by ``PLANS`` (one per operands' geometry, alignment and request) before the
#: dictionary is emptied: a program that makes more distinct products re-plans them.
MAX_PLANS = 4096


#: The one cache of the call path: (GPU, shape or geometry, alignment, stage request, compute)
#: -> the runner of its plan. The fast lane looks plain calls up in it with the same keys.
PLANS: dict = {}
_lock = threading.Lock()
tuning.on_reload(lambda: PLANS.clear())  # new tuning data: new plans


def kept(key: tuple, make: Any) -> Runner:
    """The runner kept for ``key``; on a miss ``make()``'s, kept unless another thread kept one
    first (then that one: one runner per key)."""
    p = PLANS.get(key)
    if p is None:
        p = make()
        with _lock:
            if len(PLANS) >= MAX_PLANS:
                PLANS.clear()
            p = PLANS.setdefault(key, p)
    return p


def stage_key(stage: Any) -> Any:
    if stage is None or isinstance(stage, str):
        return str(stage) if stage is not None else None
    if isinstance(stage, Stage):
        return id(stage)
    raise TypeError(f"stage must be a stage name, a Stage or None, got {type(stage).__name__}")


def run(
    A: Operand,
    B: Operand,
    C: Operand | None,
    g: Geometry | None,
    shape: tuple,
    out: Any,
    alpha: Any,
    beta: Any,
    stage: Any,
    stream: Any,
    compute: str | None = None,
    epilogue: Any = None,
    extras: tuple = (),
) -> Any:
    """The call after validation: scalars, plan (a dictionary hit), output, launch. A fused
    ``epilogue`` (``kernels._epilogue``, operands ``extras``: ``checks.check_epilogue``) keys
    a runner of its own (:func:`epilogue_key`)."""
    alpha32 = checks.SCALARS.get(alpha) if type(alpha) is float else None
    if alpha32 is None:
        alpha32 = checks.check_scalar("alpha", alpha)
    if type(beta) is float and beta == 0.0:
        beta32 = 0.0  # C is not read (-0.0 alike)
    else:
        beta32 = checks.SCALARS.get(beta) if type(beta) is float else None
        if beta32 is None:
            beta32 = checks.check_scalar("beta", beta)
        if C is None:
            beta32 = 0.0  # a new output: C starts as nothing, beta is irrelevant
    strm = DEFAULT_STREAM if type(stream) is int and stream == 0 else stream_handle(stream)
    if g is None:  # the common case: 2-D, C-contiguous
        M, K = A.shape
        N = B.shape[1]
        aligned = pointers_aligned(A.ptr, B.ptr, A.ptr if C is None else C.ptr)
        key = (
            A.device,
            M,
            N,
            K,
            aligned,
            stage if stage is None or type(stage) is str else stage_key(stage),
            compute,
        )
    else:
        M, N, K = g.M, g.N, g.K
        # the pointers' alignment: 2 all three, 1 A and B (C not: the vector_loads variant), 0
        ab = A.ptr | B.ptr
        aligned = (not (ab & 15)) + (not ((ab | (A.ptr if C is None else C.ptr)) & 15))
        key = (
            A.device,
            g,
            aligned,
            stage if stage is None or type(stage) is str else stage_key(stage),
            compute,
        )
    if epilogue is not None:
        key = (*key, *epilogue_key(epilogue, extras))
    p = PLANS.get(key)
    if p is None:
        p = kept(
            key,
            lambda: with_epilogue(
                plan_of(M, N, K, g, stage, aligned, A.device, compute), epilogue, extras
            ),
        )
    if C is None:
        out = new_output(A.obj, A.device, shape)
        C = operand(out)
        if C.ptr & 15 and aligned:  # a fresh allocation is 256-byte aligned
            unaligned = False if g is None else 1
            p = with_epilogue(
                plan_of(M, N, K, g, stage, unaligned, A.device, compute), epilogue, extras
            )
    if M == 0 or N == 0 or (g is not None and g.batch == 0):
        return out
    if (A.stream is not None or B.stream is not None or C.stream is not None) and not SIMULATOR:
        order_after_producers(strm, p, A, B, C, *extras)
    if K == 0:
        scale(C, g, beta32, strm, p)
        if epilogue is not None:
            apply_epilogue(p.plan, C, epilogue, extras, strm)
        return out
    if epilogue is None:
        p.run(A, B, C, alpha32, beta32, strm)
    else:
        p.run(A, B, C, alpha32, beta32, strm, extras)
    return out


def epilogue_key(epilogue: Any, extras: tuple) -> tuple:
    """What a fused epilogue adds to a :data:`PLANS` key: the epilogue and its operands' shapes
    (the bound launcher packs their shapes once)."""
    return (epilogue, tuple(tuple(e.shape) for e in extras))


def with_epilogue(plan: Plan, epilogue: Any, extras: tuple) -> Any:
    """The runner of ``plan``, with ``epilogue`` fused or applied after it
    (``launch.launcher.epilogue_runner``) when there is one."""
    if epilogue is None:
        return runner(plan)
    return epilogue_runner(plan, epilogue, epilogue_key(epilogue, extras)[1])


def plan_of(
    M: int,
    N: int,
    K: int,
    g: Geometry | None,
    stage: Any,
    aligned: bool | int,
    device: int,
    compute: str | None = None,
    tune: bool = True,
) -> Plan:
    """``plan_for`` this product; an empty one (a zero dimension) gets a 1 x 1 x 1 plan, which
    only lends its GPU and scale kernel. ``aligned``: without ``g``, whether the base pointers
    are 16-byte aligned (a bool, ``arrays.pointers_aligned``); with it, the pointers'
    :class:`Alignment` (an int of its values: the key the fast lane computes without building
    one). ``plan_for`` lowers either to what the rows allow. With autotuning on
    (``plan.autotune``) an automatic FP32 choice first tunes the product's bucket, unless
    ``tune`` is False (``explain`` never times anything)."""
    if g is None:
        alignment = Alignment.ALL if aligned else Alignment.NONE
    else:
        alignment = Alignment(aligned)
        if min(M, N, K, g.batch) < 1:
            g = None
    if tune and stage is None and compute in (None, "fp32"):
        autotune.before_plan(M, N, K, g, alignment, device)
    return plan_for(
        max(M, 1),
        max(N, 1),
        max(K, 1),
        stage=stage,
        alignment=alignment,
        device=device,
        geometry=g,
        compute=compute,
    )


def plan_runner(*args: Any) -> Runner:
    """The runner of :func:`plan_of`'s plan (same arguments)."""
    return runner(plan_of(*args))


def order_after_producers(strm: int, p: Plan, *ops: Operand) -> None:
    """Make ``strm`` wait on the device for each operand's producer stream, if it has one that is
    neither ``strm`` nor a default stream ordered with it (in the operands' GPU's context)."""
    for x in ops:
        s = x.stream
        if s is not None and s != strm and not (s in SHARED_STREAMS and strm in SHARED_STREAMS):
            driver.wait_for(s, strm, p.kernel().ctx)


def scale(C: Operand, g: Geometry | None, beta: float, strm: Any, p: Runner) -> None:
    """``C = beta * C`` (the K == 0 product); beta == 0 writes exact zeros."""
    g = g or Geometry.plain(*C.shape, 0)
    M, N = g.M, g.N
    c3 = g.arrays(C, C, C)[2]  # C as a strided batch: (batch, M, N), its pitch and batch stride
    grid = (cdiv(N, SCALE_BLOCK[0]), cdiv(M, SCALE_BLOCK[1]), c3.shape[0])
    check_grid(grid, "C = beta * C (K = 0)")
    scale_kernel(p.plan.device).launch(grid, (*SCALE_BLOCK, 1), strm, (c3,), (beta,))


def half_key(
    compute: str,
    device: int,
    M: int,
    N: int,
    K: int,
    stage: Any,
    out_dtype: str,
    layout: str,
    c_ok: bool,
) -> tuple:
    """The :data:`PLANS` key of a 16-bit product (:func:`run_fp16`'s, and ``hgemm``'s fast
    lane's): arithmetic, GPU, shape, stage request, C's type, layout, C rows 16-byte aligned."""
    return (compute, device, M, N, K, stage_key(stage), out_dtype, layout, c_ok)


def run_fp16(
    A: Operand,
    B: Operand,
    C: Operand | None,
    out: Any,
    shape: tuple[int, int, int],
    out_dtype: str,
    alpha: Any,
    beta: Any,
    stage: Any,
    stream: Any,
    layout: str = "NN",
    epilogue: Any = None,
    extras: tuple = (),
) -> Any:
    """``hgemm`` after :func:`checks.check_hgemm`: ``shape`` its ``(M, N, K)``, ``out_dtype`` the
    output's dtype name, ``layout`` ``"NT"`` for B stored transposed. The operands' dtype picks
    the arithmetic: FP16, or BF16 for bfloat16. ``epilogue``, ``extras``: as for :func:`run`."""
    M, N, K = shape
    compute = "bf16" if A.dtype is BF16 else "fp16"
    alpha32 = checks.SCALARS.get(alpha) if type(alpha) is float else None
    if alpha32 is None:
        alpha32 = checks.check_scalar("alpha", alpha)
    if out is None or (type(beta) is float and beta == 0.0):
        beta32 = 0.0  # C is not read
    else:
        beta32 = checks.check_scalar("beta", beta)
    strm = DEFAULT_STREAM if type(stream) is int and stream == 0 else stream_handle(stream)
    # C's rows 16-byte aligned (a new output's are): else the stage's element-store variant
    c_ok = N * (4 if out_dtype == "float32" else 2) % 16 == 0 and (C is None or not C.ptr & 15)
    # A and B read in place: A row-major, rows of 16 bytes (K, and N for row-major B, multiples
    # of 8), base pointers aligned; else the plan copies them first (choose.half_staged)
    staged = bool(layout[0] == "T" or K % 8 or (layout[1] == "N" and N % 8) or (A.ptr | B.ptr) & 15)
    key = half_key(compute, A.device, M, N, K, stage, out_dtype, layout, c_ok)
    if staged:
        key = (*key, "staged")
    if epilogue is not None:
        key = (*key, *epilogue_key(epilogue, extras))
    p = PLANS.get(key)
    if p is None and M and N:
        if staged:

            def make():
                return half_staged(M, N, K, layout, A.device, compute, out_dtype, stage)
        else:
            g = None if layout == "NN" else Geometry.dense(M, N, K, layout)

            def make():
                return plan_for(
                    M,
                    N,
                    K,
                    stage=stage,
                    device=A.device,
                    compute=compute,
                    out_dtype=out_dtype,
                    geometry=g,
                    alignment=Alignment.ALL if c_ok else Alignment.AB,
                )

        p = kept(key, lambda: with_epilogue(make(), epilogue, extras))
    if out is None:
        out = new_output(A.obj, A.device, (M, N), out_dtype)
        C = operand(out)
    if M == 0 or N == 0:
        return out
    if (A.stream is not None or B.stream is not None or C.stream is not None) and not SIMULATOR:
        order_after_producers(strm, p, A, B, C, *extras)
    if epilogue is None:
        p.run(A, B, C, alpha32, beta32, strm)
    else:
        p.run(A, B, C, alpha32, beta32, strm, extras)
    return out


#: The stages whose plan for the mean group a grouped product of many rows a group may take, by
#: B's layout: with B stored transposed also stage 9's tiles, whose register-staged copy reads
#: B 16 bytes at a time along K (multistage's cp.async copies that B 4 bytes at a time).
GROUPED_PLANNED = {"NN": ("multistage",), "NT": ("multistage", "double_buffering")}


def planned_grouped_stage(rows: int, N: int, K: int, layout: str, device: int) -> tuple:
    """``(stage, DeviceInfo)``: the planner's cheapest plan among :data:`GROUPED_PLANNED`'s
    stages for one product of a mean group (``rows`` x ``N`` x ``K`` in ``layout``), without
    split-K: the tiles of groups of ``FEW_ROWS`` rows or more (and ``tools.grouped --sweep``'s
    ``planner`` column)."""
    g = None if layout == "NN" else Geometry.dense(rows, N, max(K, 1), layout)
    plans = [
        plan_for(rows, N, max(K, 1), stage=name, device=device, geometry=g)
        for name in GROUPED_PLANNED[layout]
    ]
    # (unpriced, without tuning data for this GPU: the first stage)
    plan = min(plans, key=lambda p: (p.predicted_ms is None, p.predicted_ms or 0.0))
    stage = plan.stage
    if stage.config["SPLITK"] != 1:
        stage = stage.with_config({**stage.config, "SPLITK": 1})
    return stage, plan.device


def grouped_runner(T: int, N: int, K: int, E: int, layout: str, vec: bool, device: int) -> Any:
    """The :class:`~numba_gemm.launch.grouped.GroupedRunner` of a grouped product of ``T`` rows
    in ``E`` groups: where ``launch.grouped.few_rows_choice`` names fixed tiles for the mean
    group (``T / E`` rows: a few rows, or with B row-major under ``launch.grouped.FEW_ROWS``),
    those (kept per configuration, N, K, layout, variant and GPU); else
    :func:`planned_grouped_stage` (kept in :data:`PLANS` per mean group shape, layout, variant
    and GPU)."""
    rows = max(1, T // max(E, 1))
    few = few_rows_choice(rows, layout)
    key = ("grouped", device, few or rows, N, K, layout, vec)
    r = PLANS.get(key)
    if r is None:
        if few:
            stage = get_stage(few[0]).with_config(dict(few[1]))
            dev = device_info(device)
        else:
            stage, dev = planned_grouped_stage(rows, N, K, layout, device)
        r = kept(key, lambda: GroupedRunner(stage, layout, vec, dev))
    return r


def run_grouped(
    A: Operand, B: Operand, C: Operand, offsets: Operand, layout: str, out: Any, stream: Any
) -> Any:
    """``grouped_mm`` after ``checks.check_grouped``: one launch over every group's tiles."""
    (T, K), (E, _, N) = A.shape, B.shape
    if T == 0 or N == 0:
        return out
    strm = DEFAULT_STREAM if type(stream) is int and stream == 0 else stream_handle(stream)
    # 128-bit accesses: every group's rows 16-byte aligned (pointers, row pitches, B's stride)
    vec = not ((A.ptr | B.ptr | C.ptr | B.strides[0]) & 15 or (K | N) & 3)
    r = grouped_runner(T, N, K, E, layout, vec, A.device)
    ops = (A, B, C, offsets)
    if any(x.stream is not None for x in ops) and not SIMULATOR:
        order_after_producers(strm, r, *ops)
    r.run(A, B, C, offsets, strm)
    return out


#: Group ends of the list form on the device, by GPU and ends (the host knows the sizes there):
#: one host-to-device copy per new split of the tokens, at most :data:`ENDS_KEPT` kept.
_ENDS: dict = {}
ENDS_KEPT = 64


def group_ends(ends: tuple[int, ...], device: int) -> Operand:
    """``ends`` as an int32 device array on GPU ``device`` (cached)."""
    key = (device, ends)
    x = _ENDS.get(key)
    if x is None:
        host = np.asarray(ends, np.int32)
        if SIMULATOR:
            arr = cuda.to_device(host)
        else:
            with cuda.gpus[device]:
                arr = cuda.to_device(host)
        while len(_ENDS) >= ENDS_KEPT:
            _ENDS.pop(next(iter(_ENDS)))
        x = _ENDS[key] = operand(arr)
    return x


def run_grouped_pairs(
    As: list[Operand],
    Bs: list[Operand],
    Cs: list[Operand] | None,
    layout: str,
    K: int,
    N: int,
    outs: list | None,
    stream: Any,
) -> list:
    """``grouped_mm``'s list form after ``checks.check_grouped_pairs``: the products packed into
    the offsets form (rows of A and C, matrices of B) where they lie, else through copies, and
    one grouped launch. Returns the outputs (``outs``, or views of one new ``(T, N)`` array)."""
    Ms = [x.shape[0] for x in As]
    ends, t = [], 0
    for m in Ms:
        t += m
        ends.append(t)
    T, E, dev = t, len(As), device_info(As[0].device)
    if outs is None:
        buf = new_output(As[0].obj, dev.id, (T, N))
        outs = [buf[e - m : e] for m, e in zip(Ms, ends, strict=True)]
        C = operand(buf) if T else None
    else:
        C = rows_in_place(Cs, N) if Cs is not None else None
    if T == 0 or N == 0:
        return outs
    strm = DEFAULT_STREAM if type(stream) is int and stream == 0 else stream_handle(stream)
    A, B = rows_in_place(As, K), matrices_in_place(Bs)
    vec = not ((K | N) & 3)
    r = grouped_runner(T, N, K, E, layout, vec, dev.id)
    ops = [*As, *Bs, *(Cs or ())]
    if any(x.stream is not None for x in ops) and not SIMULATOR:
        order_after_producers(strm, r, *ops)
    packed_c = C is None
    # what does not lie as one array goes through this stream's workspace, 16-byte aligned parts
    need = [T * K if A is None else 0, E * K * N if B is None else 0, T * N if packed_c else 0]
    parts = [-(-n // 4) * 4 for n in need]
    owner, base = workspace.packing_buffer(sum(parts), strm, dev.id) if sum(parts) else (None, 0)
    starts = [0, parts[0], parts[0] + parts[1]]
    if A is None:  # rows of several arrays: packed into one
        A = Operand(owner, base, (T, K), (4 * K, 4), F32, dev.id)
        for x, m, e in zip(As, Ms, ends, strict=True):
            dst = Operand(owner, base + 4 * K * (e - m), (m, K), (4 * K, 4), F32, dev.id)
            copy_matrix(dst, x, dev, strm)
    if B is None:  # matrices at no one stride: stacked, every call
        warnings.warn(
            "grouped_mm: the b matrices do not lie one stride apart, so they are copied into "
            "one (E, K, N) buffer on every call; pass views of one stacked tensor "
            "(list(w) of w = torch.stack(...)) to use them in place",
            RuntimeWarning,
            stacklevel=3,
        )
        rows, cols = (K, N) if layout == "NN" else (N, K)
        b0 = base + 4 * starts[1]
        for i, x in enumerate(Bs):
            src = (
                x if layout == "NN" else Operand(x.obj, x.ptr, (N, K), x.strides[::-1], F32, dev.id)
            )
            dst = Operand(owner, b0 + 4 * rows * cols * i, (rows, cols), (4 * cols, 4), F32, dev.id)
            copy_matrix(dst, src, dev, strm)
        strides = (4 * K * N, 4 * N, 4) if layout == "NN" else (4 * K * N, 4, 4 * K)
        B = Operand(owner, b0, (E, K, N), strides, F32, dev.id)
    if packed_c:  # outputs that are not row blocks of one array: computed into one, then copied
        C = Operand(owner, base + 4 * starts[2], (T, N), (4 * N, 4), F32, dev.id)
    vec = vec and not ((A.ptr | B.ptr | C.ptr | B.strides[0]) & 15)
    if not vec:
        r = grouped_runner(T, N, K, E, layout, False, dev.id)
    r.run(A, B, C, group_ends(tuple(ends), dev.id), strm)
    if packed_c:
        for x, m, e in zip(Cs, Ms, ends, strict=True):
            src = Operand(C.obj, C.ptr + 4 * N * (e - m), (m, N), (4 * N, 4), C.dtype, dev.id)
            copy_matrix(x, src, dev, strm)
    return outs
