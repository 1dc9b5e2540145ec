"""Pieces every stage shares: the jit wrappers that drop GPU-only options on the simulator, and
the C epilogue ``C = alpha * acc + beta * C`` (and a fused epilogue's: :func:`make_stores`).
"""

import inspect
from types import SimpleNamespace

from ..backend import cuda, float32, types
from ..device import SIMULATOR
from ..ptx.bf16 import from_c, to_c
from ..ptx.vecmem import load2, load4, store2, store4

FULL_MASK = 0xFFFFFFFF

#: Options the CUDA simulator's ``cuda.jit`` does not accept; they only tune code generation.
_GPU_ONLY = ("launch_bounds", "max_registers", "forceinline", "lineinfo")


def kernel_jit(**options):
    """``cuda.jit(**options)`` for a kernel; GPU-only options are dropped on the simulator."""
    if SIMULATOR:
        options = {k: v for k, v in options.items() if k not in _GPU_ONLY}
    return cuda.jit(**options)


def device_jit(fn):
    """A device function, force-inlined at the NVVM level on the GPU."""
    if SIMULATOR:
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)


if SIMULATOR:

    def shfl_xor(x, offset, scratch):
        """Simulator path of :func:`shfl_xor`: the same lane exchange through SMEM (``scratch``,
        one float32 per thread of the block). Every thread of the block must call it, as every
        lane of a warp must call the shuffle."""
        tid = cuda.threadIdx.x
        scratch[tid] = x
        cuda.syncthreads()  # every thread's value is in SMEM
        y = scratch[tid ^ offset]
        cuda.syncthreads()  # everyone has read before the next exchange overwrites
        return y

else:

    @device_jit
    def shfl_xor(x, offset, scratch):
        """The value ``x`` of lane ``lane ^ offset`` of this warp (``shfl.sync.bfly``, every lane
        active); ``scratch`` is only used by the simulator's model of the exchange."""
        return cuda.shfl_xor_sync(FULL_MASK, x, offset)


if SIMULATOR:

    def issue_fence():
        """Simulator path of :func:`issue_fence`: nothing to order (a simulated thread runs its
        statements one after another)."""

else:

    @device_jit
    def issue_fence():
        """A point the GPU's code generator does not move memory instructions across, so that the
        GMEM loads written before it are all *issued* before the math written after it.

        ptxas interleaves a chunk of register-bound loads with the FMAs that consume them when
        that keeps fewer registers live: the skinny stage's 16 loads of a B chunk were spread
        over its 512 FFMAs (68 registers, one or two loads in flight per warp). Not a rule for
        every kernel: the same fence after double_buffering's next-tile loads made 4096^3 4 %
        slower (docs/design.md). Emitted as ``__syncwarp()`` (``bar.warp.sync`` with every lane):
        the caller's warp must be converged, every lane reaching the same call. It exchanges no
        data, and the loads stay asynchronous: only their first use waits.
        """
        cuda.syncwarp(FULL_MASK)


def unroll(n, body, start=0):
    """A device function ``f(*args)`` that runs ``body(start, *args); ...; body(n - 1, *args)``.

    Numba has no ``#pragma unroll`` and NVVM leaves a loop rolled once its unrolled body looks
    large (a BK loop around an 8x8 outer product is): then every SMEM address is recomputed in
    every iteration and the inner loop runs at about half FFMA density (checked in SASS: 512 FFMA
    with ~65 address instructions per 64 FFMA rolled, vs 512 FFMA + 80 LDS and nothing else
    unrolled). Here each step is its own closure in which the step index ``i`` is a compile-time
    constant, so after force-inlining every index into SMEM and register arrays is a constant:
    the loop is unrolled by construction. ``body`` must be a device function taking the step
    index first.
    """
    return _span(start, n, body)


def rolled(n, body):
    """A device function ``f(*args)`` that runs ``body(j, *args)`` for ``j`` in ``range(n)`` as a
    loop, the counterpart of :func:`unroll` for per-element copies: unrolled, each of a tile's
    4-byte copies has its own SMEM and GMEM addresses, which the compiler hoists out of the K
    loop as invariants and keeps in registers; beside 128 accumulators ptxas then spilled
    (tf32_wgmma's scalar variant: ~700 bytes per thread, a tenth of the vector variant's speed).
    Rolled, they are recomputed each time (a few integer instructions per copy)."""

    return _n_ary(
        "rolled", _arity(body, 1), ["for j in range(n):", "    body(j{args})"], body=body, n=n
    )


def sequence(*fns):
    """A device function ``f(*args)`` that runs ``fns[0](*args); fns[1](*args); ...``."""
    if not fns:
        return _no_op
    mid = len(fns) // 2
    return fns[0] if len(fns) == 1 else _seq(sequence(*fns[:mid]), sequence(*fns[mid:]))


def _span(lo, hi, body):
    """``body(lo); ...; body(hi - 1)`` as a balanced tree of calls: the nesting that Numba types
    and inlines recursively is ``log2(n)`` deep, not ``n`` (a chain of 128 mma steps overflowed
    Python's recursion limit while compiling)."""
    if hi - lo <= 0:
        return _no_op
    if hi - lo == 1:
        return _step(body, lo)
    mid = (lo + hi) // 2
    return _seq(_span(lo, mid, body), _span(mid, hi, body))


@device_jit
def _no_op(*args):
    return


def _step(body, i):
    return _n_ary("step", _arity(body, 1), ["body(i{args})"], body=body, i=i)


def _seq(first, then):
    return _n_ary(
        "both", _arity(first), ["first({params})", "then({params})"], first=first, then=then
    )


def _arity(fn, taken: int = 0) -> int | None:
    """Positional parameters of device function ``fn`` less ``taken`` (those the caller fills),
    or None where ``fn`` takes ``*args``."""
    params = inspect.signature(getattr(fn, "py_func", fn)).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return len(params) - taken


_MAKERS: dict = {}


def _n_ary(name, nargs, lines, **cells):
    """A device function ``name(a0, ..., a{nargs-1})`` running ``lines`` (``{params}``: its
    parameters, ``{args}``: them after a comma) over the closure variables ``cells``; with
    ``nargs`` None, ``name(*args)``. A fixed parameter list because numba-cuda-mlir neither
    inlines nor lowers a call with ``*args`` (docs/numba-cuda-mlir.md); the functions are
    closures, as before, so the kernel cache's key sees ``cells`` (``launch.cache._closure``)."""
    key = (name, nargs, tuple(lines), tuple(cells))
    make = _MAKERS.get(key)
    if make is None:
        params = "*args" if nargs is None else ", ".join(f"a{j}" for j in range(nargs))
        call = "*args" if nargs is None else params
        body = "".join(
            "        " + line.format(params=call, args=f", {call}" if call else "") + "\n"
            for line in lines
        )
        src = f"def make({', '.join(cells)}):\n    def {name}({params}):\n{body}    return {name}\n"
        made: dict = {}
        # this module's globals, as for a function defined here: the simulator swaps its cuda
        exec(compile(src, f"<numba_gemm.kernels._common {name}/{nargs}>", "exec"), globals(), made)  # noqa: S102
        make = _MAKERS[key] = made["make"]
    return device_jit(make(**cells))


# --- GMEM tile loads with edge handling, shared by the vectorized stages.
#
# Edges: a row of A (or a column of B) past M (N) only feeds rows (columns) of C that are never
# stored, so its index is *clamped* to the last valid one: no predicate, no zero. Elements past K
# feed every output, so they are *zero-filled*. ``vec`` is a literal at every call site: after
# inlining, the untaken path is dead code.

# ``vec`` 1 (True): the vector variant; 0 (False): the scalar one; 2: the VECTOR_LOADS variant
# (``registry.VECTOR_LOADS``: 128-bit loads of A and B, 32-bit stores of C). The load helpers
# take any nonzero ``vec`` as 128-bit; a stage's C side tests ``vec == 1``.


@device_jit
def load_a4(A, r, c, K, vec):
    """``A[r, c:c+4]`` (``c % 4 == 0``), zeros for columns >= K.

    ``vec``: one 128-bit load (needs 16-byte aligned rows, so ``K % 4 == 0`` and the chunk is
    entirely inside or outside K); else four scalar loads, each checked.
    """
    z = float32(0.0)
    if vec:
        if c < K:
            return load4(A, r, c)
        return z, z, z, z
    ru, u = types.uint64(r), types.uint64  # unsigned: no negative-index wraparound
    return (
        A[ru, u(c)] if c < K else z,
        A[ru, u(c + 1)] if c + 1 < K else z,
        A[ru, u(c + 2)] if c + 2 < K else z,
        A[ru, u(c + 3)] if c + 3 < K else z,
    )


@device_jit
def load_a_cols(A, r, c, step, K):
    """``A[r, c + step * i]`` for ``i < 4`` in four scalar loads, zeros for columns >= K: the
    scalar form of :func:`load_a4` whose lanes each read one float per load, ``step`` apart, so
    that a warp's load of consecutive ``c`` reads consecutive floats (four consecutive columns a
    lane touch four times the sectors a load uses)."""
    z = float32(0.0)
    ru, u = types.uint64(r), types.uint64  # unsigned: no negative-index wraparound
    return (
        A[ru, u(c)] if c < K else z,
        A[ru, u(c + step)] if c + step < K else z,
        A[ru, u(c + 2 * step)] if c + 2 * step < K else z,
        A[ru, u(c + 3 * step)] if c + 3 * step < K else z,
    )


@device_jit
def load_b_cols(B, k, c, step, K, N, unsigned):
    """``B[k, c + step * i]`` for ``i < 4`` in four scalar loads, columns clamped into
    ``[0, N)``, zeros if ``k >= K``. ``step`` 1: four consecutive columns (:func:`load_b4`'s
    scalar variant); the skinny stage spreads them a warp apart so each load is coalesced.

    ``unsigned`` (a constant at each call site): index as ``uint64``, without Numba's test for
    negative indices. Stages 8-10's register-staged loads pass ``False``: unsigned, the compiler
    kept more of the four addresses live across the K loop (double_buffering 64 x 128, TM 8:
    194 registers instead of 163, and 1.07x the kernel time), while the skinny stage ran 1.06x
    slower signed (docs/design.md §4.16).
    """
    z = float32(0.0)
    if k >= K:
        return z, z, z, z
    c0, c1, c2, c3 = (
        min(c, N - 1),
        min(c + step, N - 1),
        min(c + 2 * step, N - 1),
        min(c + 3 * step, N - 1),
    )
    if unsigned:
        ku, u = types.uint64(k), types.uint64
        return B[ku, u(c0)], B[ku, u(c1)], B[ku, u(c2)], B[ku, u(c3)]
    return B[k, c0], B[k, c1], B[k, c2], B[k, c3]


@device_jit
def load_b4(B, k, c, K, N, vec):
    """``B[k, c:c+4]`` (``c % 4 == 0``) with columns clamped into ``[0, N)``, zeros if k >= K.

    ``vec``: one 128-bit load (needs ``N % 4 == 0``, so the chunk is clamped as a whole);
    else four scalar loads (:func:`load_b_cols`).
    """
    if vec:
        if k >= K:
            z = float32(0.0)
            return z, z, z, z
        return load4(B, k, min(c, N - 4))
    return load_b_cols(B, k, c, 1, K, N, True)


@device_jit
def zero_at(i, acc):
    """``acc[i] = 0`` in FP32: the body of ``unroll(n, zero_at)``, which zeroes ``acc[0:n]``."""
    acc[i] = float32(0.0)


@device_jit
def no_epilogue(v, r, c, E):
    """The ``finish(v, r, c, E)`` of a kernel without a fused epilogue: ``v`` (``E`` is ``()``)."""
    return v


def _store_cols_with(store_c):
    """``store_c_cols(C, r, c, step, x0, x1, x2, x3, alpha, beta, M, N, E)`` of
    :func:`make_stores`: four ``store_c`` calls, ``step`` columns apart, each inside (M, N)."""

    @device_jit
    def store_c_cols(C, r, c, step, x0, x1, x2, x3, alpha, beta, M, N, E):
        if r >= M:
            return
        if c < N:
            store_c(C, r, c, x0, alpha, beta, E)
        if c + step < N:
            store_c(C, r, c + step, x1, alpha, beta, E)
        if c + 2 * step < N:
            store_c(C, r, c + 2 * step, x2, alpha, beta, E)
        if c + 3 * step < N:
            store_c(C, r, c + 3 * step, x3, alpha, beta, E)

    return store_c_cols


def make_stores(finish):
    """The epilogue helpers that write results to C, each storing ``finish(v, r, c, E)`` for
    ``v = alpha * x + beta * C[r, c]`` (``kernels._epilogue``; ``E`` is their last argument):

    - ``store_c(C, row, col, acc, alpha, beta, E)``: one element;
    - ``store_c2(C, r, c, x0, x1, alpha, beta, M, N, vec, E)``: ``C[r, c:c+2]`` (``c`` even);
    - ``store_c_cols(C, r, c, step, x0, x1, x2, x3, alpha, beta, M, N, E)``: ``C[r, c + step*i]``;
    - ``store_c4(C, r, c, x0, x1, x2, x3, alpha, beta, M, N, vec, E)``: ``C[r, c:c+4]``.

    Every one writes inside (M, N) only, and reads C only when ``beta != 0`` (BLAS convention:
    NaN or garbage in C must not leak). C may be float32, float16 or bfloat16 bits (uint16:
    ``ptx.bf16``). ``vec``: one 64-bit (``store_c2``; 16-bit C: 32-bit) or 128-bit
    (``store_c4``, float32 C) access, which needs 16-byte aligned rows of C (N even, N % 4 ==
    0); else scalar elements, each checked against N. ``step`` 1: consecutive columns
    (``store_c4``'s scalar variant); the tiled stages' scalar variant spreads a thread's columns a
    row of lanes apart, so that each store instruction of a warp writes whole 32-byte sectors
    (``warptiling.make_parts``).

    With an epilogue (``finish`` other than :func:`no_epilogue`) each helper computes ``v`` first
    (reading C only when ``beta != 0``) and stores ``finish(v, ...)`` once: ``finish`` is inlined
    once per result, not once per ``beta`` branch (:func:`_make_fused_stores`). Without one, each
    ``beta`` branch stores on its own, as the plain kernels always have.
    """
    if finish is not no_epilogue:
        return _make_fused_stores(finish)

    # each branch stores on its own: one store after the branches costs multistage 30 more
    # instructions (PTX), where the two forms should compile alike
    @device_jit
    def store_c(C, row, col, acc, alpha, beta, E):
        r, c = types.uint64(row), types.uint64(col)  # unsigned: no negative-index wraparound
        if beta == 0:
            C[r, c] = to_c(C, finish(alpha * acc, row, col, E))
        else:
            v = alpha * acc + beta * from_c(C, C[r, c])
            C[r, c] = to_c(C, finish(v, row, col, E))

    @device_jit
    def store_c2(C, r, c, x0, x1, alpha, beta, M, N, vec, E):
        if r >= M:
            return
        if vec:
            if c < N:
                if beta == 0:
                    v0, v1 = alpha * x0, alpha * x1
                    store2(C, r, c, to_c(C, finish(v0, r, c, E)), to_c(C, finish(v1, r, c + 1, E)))
                else:
                    c0, c1 = load2(C, r, c)
                    v0 = alpha * x0 + beta * from_c(C, c0)
                    v1 = alpha * x1 + beta * from_c(C, c1)
                    store2(C, r, c, to_c(C, finish(v0, r, c, E)), to_c(C, finish(v1, r, c + 1, E)))
            return
        if c < N:
            store_c(C, r, c, x0, alpha, beta, E)
        if c + 1 < N:
            store_c(C, r, c + 1, x1, alpha, beta, E)

    store_c_cols = _store_cols_with(store_c)

    @device_jit
    def finish4(v0, v1, v2, v3, r, c, E):
        return (
            finish(v0, r, c, E),
            finish(v1, r, c + 1, E),
            finish(v2, r, c + 2, E),
            finish(v3, r, c + 3, E),
        )

    @device_jit
    def store_c4(C, r, c, x0, x1, x2, x3, alpha, beta, M, N, vec, E):
        if r >= M:
            return
        if vec:
            if c < N:
                if beta == 0:
                    v0, v1, v2, v3 = alpha * x0, alpha * x1, alpha * x2, alpha * x3
                    f0, f1, f2, f3 = finish4(v0, v1, v2, v3, r, c, E)
                    store4(C, r, c, f0, f1, f2, f3)
                else:
                    c0, c1, c2, c3 = load4(C, r, c)
                    v0, v1 = alpha * x0 + beta * c0, alpha * x1 + beta * c1
                    v2, v3 = alpha * x2 + beta * c2, alpha * x3 + beta * c3
                    f0, f1, f2, f3 = finish4(v0, v1, v2, v3, r, c, E)
                    store4(C, r, c, f0, f1, f2, f3)
            return
        store_c_cols(C, r, c, 1, x0, x1, x2, x3, alpha, beta, M, N, E)

    return SimpleNamespace(
        store_c=store_c,
        store_c2=store_c2,
        store_c_cols=store_c_cols,
        store_c4=store_c4,
    )


def _make_fused_stores(finish):
    """:func:`make_stores`'s helpers for an epilogue ``finish``: one ``finish`` per result.

    The plain helpers store in each ``beta`` branch (fewer instructions when ``finish`` is the
    identity); with an epilogue that put two copies of ``finish`` per result into the kernel, and
    GELU's code, inlined 256 times, took the tiled stages' PTX from 4,300 to 14,300 lines (the
    instruction fetch of every block; docs/design.md §3.1)."""

    @device_jit
    def scaled(C, row, col, x, alpha, beta):
        # alpha * x + beta * C[row, col]; C is read only when beta != 0 (BLAS convention)
        v = alpha * x
        if beta != 0:
            v += beta * from_c(C, C[types.uint64(row), types.uint64(col)])
        return v

    @device_jit
    def store_c(C, row, col, acc, alpha, beta, E):
        v = to_c(C, finish(scaled(C, row, col, acc, alpha, beta), row, col, E))
        C[types.uint64(row), types.uint64(col)] = v

    @device_jit
    def store_c2(C, r, c, x0, x1, alpha, beta, M, N, vec, E):
        # ``vec`` may be a run-time value (the TMA and wgmma stages: N even): both results are
        # finished before the branch between the 64-bit and the scalar store, so each ``finish``
        # is inlined once, not once per path
        if r >= M or c >= N:
            return
        more = c + 1 < N  # always, when vec (N even, c even)
        ru, cu = types.uint64(r), types.uint64(c)  # unsigned: no negative-index wraparound
        v0, v1 = alpha * x0, alpha * x1
        if beta != 0:
            if vec:
                c0, c1 = load2(C, r, c)
                v0 += beta * from_c(C, c0)
                v1 += beta * from_c(C, c1)
            else:
                v0 += beta * from_c(C, C[ru, cu])
                if more:
                    v1 += beta * from_c(C, C[ru, types.uint64(c + 1)])
        # past N the second result is never stored; finish it at column c, inside the bias
        f0 = to_c(C, finish(v0, r, c, E))
        f1 = to_c(C, finish(v1, r, c + 1 if more else c, E))
        if vec:
            store2(C, r, c, f0, f1)
        else:
            C[ru, cu] = f0
            if more:
                C[ru, types.uint64(c + 1)] = f1

    store_c_cols = _store_cols_with(store_c)

    @device_jit
    def store_c4(C, r, c, x0, x1, x2, x3, alpha, beta, M, N, vec, E):
        if r >= M:
            return
        if vec:
            if c < N:
                v0, v1, v2, v3 = alpha * x0, alpha * x1, alpha * x2, alpha * x3
                if beta != 0:
                    c0, c1, c2, c3 = load4(C, r, c)
                    v0, v1 = v0 + beta * c0, v1 + beta * c1
                    v2, v3 = v2 + beta * c2, v3 + beta * c3
                f0, f1 = finish(v0, r, c, E), finish(v1, r, c + 1, E)
                f2, f3 = finish(v2, r, c + 2, E), finish(v3, r, c + 3, E)
                store4(C, r, c, f0, f1, f2, f3)
            return
        store_c_cols(C, r, c, 1, x0, x1, x2, x3, alpha, beta, M, N, E)

    return SimpleNamespace(
        store_c=store_c,
        store_c2=store_c2,
        store_c_cols=store_c_cols,
        store_c4=store_c4,
    )


#: The helpers of a kernel without a fused epilogue (``E`` is ``()``).
PLAIN_STORES = make_stores(no_epilogue)
# (module globals for the wrappers below: Numba types a function, not a namespace's attribute)
_store_c, _store_c2, _store_c4 = PLAIN_STORES.store_c, PLAIN_STORES.store_c2, PLAIN_STORES.store_c4


@device_jit
def store_c(C, row, col, acc, alpha, beta):
    """``C[row, col] = alpha * acc + beta * C[row, col]`` (:func:`make_stores`, no epilogue)."""
    _store_c(C, row, col, acc, alpha, beta, ())


@device_jit
def store_c2(C, r, c, x0, x1, alpha, beta, M, N, vec):
    """``C[r, c:c+2] = alpha * x + beta * C`` (:func:`make_stores`, no epilogue)."""
    _store_c2(C, r, c, x0, x1, alpha, beta, M, N, vec, ())


@device_jit
def store_c4(C, r, c, x0, x1, x2, x3, alpha, beta, M, N, vec):
    """``C[r, c:c+4] = alpha * x + beta * C`` (:func:`make_stores`, no epilogue)."""
    _store_c4(C, r, c, x0, x1, x2, x3, alpha, beta, M, N, vec, ())
