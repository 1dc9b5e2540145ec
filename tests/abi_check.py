"""Run by ``test_plan.py::test_kernel_parameter_layout_matches_numba`` with the simulator off (no
GPU needed): the direct launch's hand-packed parameters against Numba's own kernel ABI.
Prints "ABI OK" on success; raises (non-zero exit) with what differs otherwise."""

from __future__ import annotations

import re
from types import SimpleNamespace

from numba import types

from numba_gemm import get_stage, launch
from numba_gemm.kernels._scale import scale_c
from numba_gemm.kernels._splitk import reduce_splits
from numba_gemm.resources import compile_kernel_ptx

PARAM = re.compile(r"\.param\s+\.(?:u|b|s|f)(\d+)\s")


def ptx_param_sizes(ptx: str) -> tuple[int, ...]:
    entry = ptx[ptx.index(".entry"):]
    head = entry[: entry.index(")")]
    return tuple(int(bits) // 8 for bits in PARAM.findall(head))


def main() -> None:
    kernels = [
        (get_stage("smem_tiling").kernel, "AAAff"),
        (get_stage("multistage").kernel, "AAAff"),
        (get_stage("multistage").scalar_kernel, "AAAff"),
        (reduce_splits, "AAff"),
        (scale_c, "Af"),
    ]
    for k, spec in kernels:
        got = ptx_param_sizes(compile_kernel_ptx(k, sig=launch.numba_signature(spec)))
        want = launch._layout(spec).sizes
        assert got == want, f"{k.py_func.__name__}: PTX params {got} != packed {want}"

    # Numba's flattening of one 2-D float32 C array argument, fed a stand-in device array.
    import numba.cuda.dispatcher as disp

    dev = SimpleNamespace(size=12 * 7, dtype=SimpleNamespace(itemsize=4), ptr=0xABC00,
                          shape=(12, 7), _layout=SimpleNamespace(strides_in_bytes=(28, 4)))
    saved = disp.wrap_arg
    disp.wrap_arg = lambda v: SimpleNamespace(to_device=lambda retr, stream: dev)
    try:
        args: list = []
        fake_kernel = SimpleNamespace(extensions=[])
        disp._Kernel._prepare_args(fake_kernel, types.Array(types.float32, 2, "C"), None, 0, [],
                                   args)
    finally:
        disp.wrap_arg = saved
    ours = launch.array_fields([SimpleNamespace(ptr=0xABC00, shape=(12, 7))])
    assert [int(getattr(a, "value", a)) for a in args] == ours, f"numba {args} != ours {ours}"
    print("ABI OK")


if __name__ == "__main__":
    main()
