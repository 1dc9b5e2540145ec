"""Host overhead per call: what one call costs the calling thread (``overhead.csv``).

For each size (``--overhead-sizes``, default 64, 128, 256: products small enough that the host,
not the GPU, sets the pace) and each implementation, with ``out=`` given:

====================  ==========================================================================
``sgemm-numba``       ``numba_gemm.sgemm(a, b, out=c)`` on Numba device arrays
``sgemm-torch``       the same on PyTorch CUDA tensors (when PyTorch sees a GPU)
``sgemm-cupy``        the same on CuPy arrays (when CuPy sees a GPU)
``matmul-numba``      ``numba_gemm.matmul(a, b, out=c)`` on Numba device arrays
``matmul-torch``      the same on PyTorch CUDA tensors
``torch.mm``          ``torch.mm(a, b, out=c)``, FP32 (TF32 off)
``cupy.matmul``       ``cupy.matmul(a, b, out=c)``, FP32 (TF32 off)
``triton``            the optional Triton peer (``numba_gemm.bench.triton_matmul``)
====================  ==========================================================================

each is validated once (``numba_gemm.tools.check.validate``), then timed by ``timing.time_host``:
wall clock (``time.perf_counter``) of a loop of 500 back-to-back calls divided by 500, read
before the synchronize that ends the loop; the median of 5 loops after 20 warm-up calls, in
microseconds (us). All views share the same GPU buffers (zero-copy).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...api import matmul
from ...kernels.stage import TOLERANCE
from ..check import OK, CupyBlas, TorchBlas, make_problem, torch_or_none, validate
from ..reference import cupy_or_none
from ..timing import quiet_occupancy, time_host
from .sizes import short_size

#: Calls per loop, loops (the median is reported) and warm-up calls on a GPU ...
CALLS, LOOPS, WARMUP = 500, 5, 20
#: ... and on the simulator, where each call runs a kernel in Python threads (numbers that mean
#: nothing; the pipeline is what is checked).
SIM_CALLS, SIM_LOOPS, SIM_WARMUP = 2, 1, 1

Call = tuple[str, Callable[[], Any], Callable[[], contextlib.AbstractContextManager]]


def _calls(problem: Any, sgemm: Callable, triton: Any) -> list[Call]:
    """``(impl, call, mode)`` for every implementation available here."""
    A, B, C = problem.A, problem.B, problem.C
    nothing = contextlib.nullcontext
    out: list[Call] = [
        ("sgemm-numba", lambda: sgemm(A, B, out=C), nothing),
        ("matmul-numba", lambda: matmul(A, B, out=C), nothing),
    ]
    torch = torch_or_none()
    cp = cupy_or_none()
    tt = tc = None
    if torch is not None:
        tt = TorchBlas(torch)
        ta, tb, tcc = (tt.wrap(x) for x in (A, B, C))
        out.append(("sgemm-torch", lambda: sgemm(ta, tb, out=tcc), nothing))
        out.append(("matmul-torch", lambda: matmul(ta, tb, out=tcc), nothing))
    if cp is not None:
        tc = CupyBlas(cp)
        ca, cb, ccc = (tc.wrap(x) for x in (A, B, C))
        out.append(("sgemm-cupy", lambda: sgemm(ca, cb, out=ccc), nothing))
    if tt is not None:
        out.append(("torch.mm", lambda: torch.mm(ta, tb, out=tcc), tt.fp32_mode))
    if tc is not None:
        out.append(("cupy.matmul", lambda: cp.matmul(ca, cb, out=ccc), tc.fp32_mode))
    if triton is not None and tt is not None:
        out.append(("triton", lambda: triton.matmul(ta, tb, tcc), nothing))
    return out


def measure(
    sizes: Sequence[tuple[int, int, int]],
    *,
    sgemm: Callable,
    triton: Any = None,
    seed: int = 0,
    calls: int = CALLS,
    loops: int = LOOPS,
    warmup: int = WARMUP,
) -> list[dict]:
    """Host microseconds per call for every implementation available and every size.

    Returns rows with the keys of ``report.OVERHEAD_COLUMNS`` (``impl``, ``size``: ``N`` or
    ``MxNxK``, ``us_per_call``: median over ``loops``). An implementation that fails validation
    or raises is left out with one line on stderr.
    """
    with quiet_occupancy():  # small products, small grids: Numba's warning is noise here
        return _measure(sizes, sgemm, triton, seed, calls, loops, warmup)


def _measure(sizes, sgemm, triton, seed, calls, loops, warmup) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for M, N, K in sizes:
        problem = make_problem(M, N, K, rng=rng, blas=None)  # float64 NumPy reference
        for impl, fn, mode in _calls(problem, sgemm, triton):
            try:
                with mode():
                    status, err, note = validate(fn, problem, TOLERANCE["fp32"])
                    if status != OK:
                        raise RuntimeError(note)
                    t = time_host(fn, calls=calls, reps=loops, warmup=warmup)
            except Exception as e:  # noqa: BLE001 - reported, the table goes on
                print(
                    f"numba_gemm.bench: overhead {impl} at {short_size(M, N, K)}: {e}; left out",
                    file=sys.stderr,
                )
                continue
            rows.append(dict(impl=impl, size=short_size(M, N, K), us_per_call=t.median * 1e3))
    return rows
