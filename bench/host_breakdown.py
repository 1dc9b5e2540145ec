"""Where the host time of one ``sgemm`` call goes, piece by piece (a diagnostic for the GPU).

Usage: ``python bench/host_breakdown.py [--size 128 | --shape MxNxK] [--calls 2000]``. For
Numba, PyTorch and
CuPy operands (those importable), prints microseconds per call of: reading one operand
(``devarray.operand``), the whole validation (``api._validate``), the scalar checks, the plan
lookup, one direct launch (``Plan.run``), the fast lane of a plain call (``api._plain_call``:
reading, checks, lookup and launch) and the whole public call ``sgemm(a, b, out=c)``, also with
the fast lane turned off (the general path alone); host time only (a loop of calls, then one
synchronize, which is not counted). Then, for the PyTorch operands, the GPU side of the same
calls (``timing.time_kernel``) and the end-to-end time of back-to-back calls
(``timing.time_calls``) of ``sgemm`` (both paths) and of ``torch.mm``: a call is host-bound where
its end-to-end time is its host time, GPU-bound where it is its kernel time.
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np
from numba import cuda

from numba_gemm.timing import time_host


@contextlib.contextmanager
def lane_off():
    """``sgemm`` through the general path only (the fast lane turned off) inside."""
    from numba_gemm import api

    lane, api._plain_call = api._plain_call, lambda *args: None
    try:
        yield
    finally:
        api._plain_call = lane


def per_call_us(fn, calls: int) -> float:
    """Best of 5 loops (``numba_gemm.timing.time_host``), in microseconds."""
    return time_host(fn, calls=calls, reps=5, warmup=50).min * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=128, help="M = N = K")
    ap.add_argument("--shape", default=None, help="MxNxK (overrides --size)")
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    import numba_gemm
    from numba_gemm import api
    from numba_gemm.devarray import operand

    M = N = K = args.size
    if args.shape:
        M, N, K = (int(v) for v in args.shape.lower().split("x"))
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(s, dtype=np.float32) for s in ((M, K), (K, N), (M, N))]
    kinds = {"numba": [cuda.to_device(x) for x in host]}
    try:
        import torch

        kinds["torch"] = [torch.from_numpy(x).cuda() for x in host]
    except Exception:  # noqa: BLE001 - optional
        pass
    try:
        import cupy

        kinds["cupy"] = [cupy.asarray(x) for x in host]
    except Exception:  # noqa: BLE001 - optional
        pass
    print(f"{M}x{N}x{K}, host us per call (best of 5 loops of {args.calls})")
    for kind, (a, b, c) in kinds.items():
        A, B, C = api._validate(a, b, c)[:3]
        p = numba_gemm.explain(a, b, out=c)
        numba_gemm.sgemm(a, b, out=c)  # makes the call path's plan: the fast lane's from now on
        q = getattr(p, "inner", p)  # a staged plan's kernel plan
        rows = {
            "operand(a)": lambda a=a: operand(a),
            "validate": lambda a=a, b=b, c=c: api._validate(a, b, c),
            "scalars": lambda: (api._check_scalar("alpha", 1.0), api._check_scalar("beta", 0.0)),
            "plan lookup": lambda A=A: api._plans.get((A.device, M, N, K, True, None, None)),
            "Plan.run": lambda p=p, A=A, B=B, C=C: p.run(A, B, C, 1.0, 0.0, 0),
            # a split-K plan's per-launch workspace lookup: memoized, and the lookup itself
            "buffers": lambda q=q: q._buffers(0),
            "buffers unmemoized": lambda q=q: q._find_buffers(0),
            "fast lane": lambda a=a, b=b, c=c: api._plain_call(a, b, c, None, 1.0, 0.0),
            "sgemm": lambda a=a, b=b, c=c: numba_gemm.sgemm(a, b, out=c),
        }
        us = {k: per_call_us(f, args.calls) for k, f in rows.items()}
        with lane_off():
            us["sgemm general path"] = per_call_us(rows["sgemm"], args.calls)
        print(f"{kind:>6}: " + "  ".join(f"{k} {v:.2f}" for k, v in us.items()))
    print(repr(p))
    try:
        import torch

        ta, tb, tc = kinds["torch"]
        print(f"torch.mm {per_call_us(lambda: torch.mm(ta, tb, out=tc), args.calls):.2f}")
        from numba_gemm.check import time_kernel
        from numba_gemm.timing import time_calls

        pt = numba_gemm.explain(ta, tb, out=tc)
        sg = lambda: numba_gemm.sgemm(ta, tb, out=tc)  # noqa: E731
        for name, fn, lane in (("sgemm", sg, True), ("sgemm general path", sg, False),
                               ("Plan.launch", lambda: pt.launch(ta, tb, tc), True),
                               ("torch.mm", lambda: torch.mm(ta, tb, out=tc), True)):
            with contextlib.nullcontext() if lane else lane_off():
                kern, e2e = time_kernel(fn, reps=20), time_calls(fn, reps=20)
            print(f"{name:>18} (torch operands): kernel {kern.median * 1e3:.2f} us, end to end "
                  f"{e2e.median * 1e3:.2f} us per call (medians of 20)")
    except Exception as e:  # noqa: BLE001
        print("torch.mm:", e)
    if p.stage.args != "AAAff":
        print(f"launch pieces: skipped (spec {p.stage.args}: the pieces below pack A, B, C only)")
        return
    # the launch's own pieces, on the last kind's operands
    import ctypes

    from numba_gemm import _driver
    from numba_gemm.launch import array_fields

    k = p.kernels()
    lay = k._layout
    buf, params = lay.buffers()
    cu = _driver.lib()
    raw = ctypes.CDLL("libcuda.so.1").cuLaunchKernel  # no argtypes
    fn, gx, gy, gz = ctypes.c_void_p(k.fn), *p.grid
    bx, by, bz = p.block
    size = ctypes.c_size_t(lay.struct.size)
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
    raw_py = _driver.raw_launch()
    pparams = ctypes.c_void_p(params)
    pieces = {
        "cuCtxGetCurrent": _driver.current_context,
        "array_fields": lambda: array_fields((A, B, C)),
        "pack_into": lambda: lay.struct.pack_into(buf, 0, *array_fields((A, B, C)), 1.0, 0.0),
        "cuLaunchKernel(argtypes)": lambda: cu.cuLaunchKernel(k.fn, gx, gy, gz, bx, by, bz,
                                                              k.smem, 0, params, None),
        "cuLaunchKernel(raw)": lambda: raw(fn, gx, gy, gz, bx, by, bz, k.smem, None,
                                           ctypes.c_void_p(params), None),
        "raw PyDLL(params)": lambda: raw_py(fn, gx, gy, gz, bx, by, bz, k.smem, None, pparams,
                                            None),
        "raw PyDLL(extra buffer)": lambda: raw_py(fn, gx, gy, gz, bx, by, bz, k.smem, None, None,
                                                  extra),
        "Kernel.launch": lambda: k.launch(p.grid, p.block, 0, (A, B, C), (1.0, 0.0)),
    }
    print("launch pieces: " + "  ".join(f"{n} {per_call_us(f, args.calls):.2f}"
                                        for n, f in pieces.items()))


if __name__ == "__main__":
    main()
