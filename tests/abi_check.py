"""Run by ``test_plan.py::test_kernel_parameter_layout_matches_numba`` with the simulator off (no
GPU needed): the direct launch's hand-packed parameters against Numba's own kernel ABI.
Prints "ABI OK" on success; raises (non-zero exit) with what differs otherwise."""

from __future__ import annotations

import re
from types import SimpleNamespace

from helpers import SKINNY_SIM_CONFIG, TC_SIM_CONFIG_F16
from numba import types

from numba_gemm import get_stage
from numba_gemm.kernels._pad import copy_padded
from numba_gemm.kernels._scale import scale_c
from numba_gemm.launch import launcher as launch
from numba_gemm.tools.resources import compile_kernel_ptx

PARAM = re.compile(r"\.param\s+\.(?:u|b|s|f)(\d+)\s")


def ptx_param_sizes(ptx: str) -> tuple[int, ...]:
    entry = ptx[ptx.index(".entry") :]
    head = entry[: entry.index(")")]
    return tuple(int(bits) // 8 for bits in PARAM.findall(head))


#: Small tiles (the simulator's, ``helpers``; for warptiling and multistage four warps): a
#: kernel's parameters are its signature's, the same for every tile configuration (the tiles
#: are compile-time constants of its closure), and small tiles compile in a fraction of the
#: time (the default hgemm_mma kernels took 20-40 s each on a CI core).
SMALL = dict(BM=64, BN=64, BK=8, WM=32, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=1)
SMALL_CONFIGS = {
    "warptiling": SMALL,
    "multistage": dict(SMALL, NBUF=3),
    "skinny": SKINNY_SIM_CONFIG,
    "hgemm_mma": TC_SIM_CONFIG_F16,
}


def small(name: str):
    """Stage ``name`` with its :data:`SMALL_CONFIGS` tiles."""
    return get_stage(name).with_config(SMALL_CONFIGS[name])


def main() -> None:
    kernels = [
        (get_stage("smem_tiling").kernel, "AAAff"),
        (small("multistage").kernel, "SSSSIff"),
        (small("skinny").kernel, "SSSSIff"),
        (small("hgemm_mma").kernel, "HHAff"),
        (small("hgemm_mma").kernel, "HHHff"),
        (small("multistage").scalar_kernel, "SSSSIff"),
        (small("warptiling").kernel_for("vector", "TN"), "SSSSIff"),
        (scale_c, "Sf"),
        (copy_padded, "SS"),
    ]
    for k, spec in kernels:
        got = ptx_param_sizes(compile_kernel_ptx(k, sig=launch.numba_signature(spec)))
        want = launch._layout(spec).sizes
        assert got == want, f"{k.py_func.__name__}: PTX params {got} != packed {want}"

    # Numba's flattening of one 2-D float32 C array argument and of one 3-D strided ('A'
    # layout) one with a broadcast batch, each fed a stand-in device array.
    import numba.cuda.dispatcher as disp

    cases = [
        (types.Array(types.float32, 2, "C"), (12, 7), (28, 4)),
        (types.Array(types.float16, 2, "C"), (12, 8), (16, 2)),
        (types.Array(types.float32, 3, "A"), (3, 12, 7), (0, 4, 64)),
        (types.Array(types.int32, 1, "C"), (9,), (4,)),
    ]
    saved = disp.wrap_arg
    try:
        for ty, shape, strides in cases:
            size = 1
            for n in shape:
                size *= n
            item = ty.dtype.bitwidth // 8
            dev = SimpleNamespace(
                size=size,
                dtype=SimpleNamespace(itemsize=item),
                ptr=0xABC00,
                shape=shape,
                _layout=SimpleNamespace(strides_in_bytes=strides),
            )
            disp.wrap_arg = lambda v, dev=dev: SimpleNamespace(to_device=lambda retr, stream: dev)
            args: list = []
            fake_kernel = SimpleNamespace(extensions=[])
            disp._Kernel._prepare_args(fake_kernel, ty, None, 0, [], args)
            ours = launch.numba_array_fields(
                [SimpleNamespace(ptr=0xABC00, shape=shape, strides=strides)], [item]
            )
            got = [int(getattr(a, "value", a)) for a in args]
            assert got == ours, f"{ty}: numba {got} != ours {ours}"
    finally:
        disp.wrap_arg = saved
    print("ABI OK")


if __name__ == "__main__":
    main()
