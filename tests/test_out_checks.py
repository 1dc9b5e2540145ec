"""Every wrong ``out`` on every entry point (sgemm, matmul, explain, hgemm): an error that says
what is wrong and what is expected, raised before anything is written, so ``out`` (and every
input it overlaps) stays bit-identical; the dtypes of a, b and out checked before any shape or
layout. Nothing here launches a kernel: every call raises first."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_gemm
from numba_gemm import explain, hgemm, matmul, sgemm

M, K, N = 4, 8, 8  # K == N: an out of a's shape can be a itself; K, N multiples of 8 (hgemm)


def view(d, shape, strides):
    """A zero-copy view of device array ``d``'s memory with any ``shape`` and byte ``strides``
    (Numba's ``.T`` of a GPU array is a contiguous copy, which would test nothing)."""
    if numba_gemm.device.SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(np.lib.stride_tricks.as_strided(d._ary, shape, strides))
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    return DeviceNDArray(shape, strides, d.dtype, gpu_data=d.gpu_data)


def sentinel(shape, dtype):
    """A device array whose bytes are a fixed pattern (no zeros, so a write of zeros shows)."""
    host = np.empty(shape, dtype)
    raw = host.reshape(-1).view(np.uint8)
    raw[:] = np.arange(raw.size) % 251 + 1
    return cuda.to_device(host)


def raw_bytes(d):
    return d.copy_to_host().reshape(-1).view(np.uint8).copy()


# entry point -> (input dtype, batch prefix of a and out, the call)
ENTRIES = {
    "sgemm": (np.float32, (), lambda a, b, out: sgemm(a, b, out=out)),
    "matmul": (np.float32, (), lambda a, b, out: matmul(a, b, out=out)),
    "matmul_batched": (np.float32, (2,), lambda a, b, out: matmul(a, b, out=out)),
    "explain": (np.float32, (), lambda a, b, out: explain(a, b, out=out)),
    "hgemm": (np.float16, (), lambda a, b, out: hgemm(a, b, out=out)),
}

# bad out -> the entry points it applies to
BAD_OUTS = {
    "int32": ("sgemm", "matmul", "matmul_batched", "explain", "hgemm"),
    "float64": ("sgemm", "matmul", "matmul_batched", "explain", "hgemm"),
    "float16": ("sgemm", "matmul", "matmul_batched", "explain"),  # hgemm's own output dtype
    "wrong_shape": tuple(ENTRIES),
    "column_major": tuple(ENTRIES),
    "strided": tuple(ENTRIES),
    "overlaps_a": tuple(ENTRIES),
    "overlaps_b": tuple(ENTRIES),
}


def expected_error(entry, bad, pre):
    """``(exception type, message pattern)``: what was wrong and what is expected."""
    shape = pre + (M, N)
    if entry == "hgemm":
        if bad in ("int32", "float64"):
            return TypeError, f"out must be float32 or float16, got dtype {bad}"
        if bad in ("wrong_shape", "column_major", "strided"):
            return ValueError, (
                rf"out must be a C-contiguous \({M}, {N}\) array, got shape "
                r"\(\d+, \d+\) and strides"
            )
    if bad in ("int32", "float64", "float16"):
        return ValueError, f"out must be float32, got dtype {bad}"
    if bad == "wrong_shape":
        return ValueError, rf"out has shape .*, expected {re_tuple(shape)}"
    if bad == "column_major":
        return ValueError, "out must be row-major.*pass a row-major out"
    if bad == "strided":
        return ValueError, "out has no unit stride in its last two dimensions.*contiguous"
    return ValueError, f"out overlaps {bad[-1]}: the output must not alias an input"


def re_tuple(t):
    return r"\(" + ", ".join(map(str, t)) + r"\)"


def c_strides(shape, itemsize):
    return tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) * itemsize for i in range(len(shape)))


def bad_call(entry, bad):
    """``(a, b, out, guarded)``: operands of ``entry`` with the bad ``out`` (float32 unless its
    dtype is what is wrong); ``guarded``: out's whole allocation, a and b, which must all stay
    bit-identical."""
    in_dtype, pre, _ = ENTRIES[entry]
    a, b = sentinel(pre + (M, K), in_dtype), sentinel((K, N), in_dtype)
    shape = pre + (M, N)
    if bad in ("int32", "float64", "float16"):
        base = out = sentinel(shape, getattr(np, bad))
    elif bad == "wrong_shape":
        base = out = sentinel(pre + (M, N + 8), np.float32)
    elif bad == "column_major":  # the transpose of a row-major (..., N, M) array
        base = sentinel(pre + (N, M), np.float32)
        out = view(base, shape, base.strides[:-2] + (4, 4 * M))
    elif bad == "strided":  # every other column of a (..., M, 2N) array
        base = sentinel(pre + (M, 2 * N), np.float32)
        out = base[(slice(None),) * (len(pre) + 1) + (slice(None, None, 2),)]
    elif bad == "overlaps_a":  # a itself (K == N; hgemm's a is float16, and so then is out)
        base = out = a
    else:  # b's memory from its start (b has K * N >= M * N elements, batched or not)
        base = b
        out = view(b, shape, c_strides(shape, b.dtype.itemsize))
    return a, b, out, [base, a, b]


CASES = [(e, bad) for bad, entries in BAD_OUTS.items() for e in entries]


@pytest.mark.parametrize("entry, bad", CASES, ids=[f"{e}-{b}" for e, b in CASES])
def test_bad_out_raises_and_writes_nothing(entry, bad):
    a, b, out, guarded = bad_call(entry, bad)
    before = [raw_bytes(x) for x in guarded]
    error, match = expected_error(entry, bad, ENTRIES[entry][1])
    with pytest.raises(error, match=match):
        ENTRIES[entry][2](a, b, out)
    for x, was in zip(guarded, before, strict=True):
        np.testing.assert_array_equal(raw_bytes(x), was)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_dtypes_checked_before_shapes(entry):
    """A wrong out dtype is reported as such, even with shapes that are also wrong (inner
    dimensions differ, out of another shape): dtypes of a, b, then out come first."""
    in_dtype, pre, call = ENTRIES[entry]
    a, b = sentinel(pre + (M, K), in_dtype), sentinel((K + 8, N), in_dtype)
    out = sentinel((N + 1, M), np.int32)
    error = TypeError if entry == "hgemm" else ValueError
    with pytest.raises(error, match="out must be float32.* got dtype int32"):
        call(a, b, out)
    wrong = np.float32 if entry == "hgemm" else np.float64
    with pytest.raises(TypeError, match="b must be float(16|32), got dtype"):
        call(a, sentinel((K + 8, N), wrong), out)


def test_matmul_out_batch_overlap():
    """A batched matmul whose batch does not fold into one launch (a's batch strides (10, 1) in
    matrices) checks out against a and b as wholes: each launch's slices are apart, but out's
    first slice is a's second, which a launch would overwrite before the next one reads it."""
    flat = sentinel((30 * M * K,), np.float32)
    slots = flat.reshape(3, 10, M, K)[:, :2]  # (3, 2, M, K), batch strides (10, 1) matrices
    a, out = slots[:2], slots[1:]  # out's [i] is a's [i + 1]
    b = sentinel((K, N), np.float32)
    before = raw_bytes(flat)
    with pytest.raises(ValueError, match="out overlaps a"):
        matmul(a, b, out=out)
    np.testing.assert_array_equal(raw_bytes(flat), before)


@pytest.mark.parametrize(
    "strides", [(0, 0), (1, 1), (0, 1)], ids=["broadcast", "shifted", "inner_broadcast"]
)
def test_matmul_out_matrices_must_not_share_memory(strides):
    """An out of shape (2, 2, M, N) whose batch strides (in matrices) let two products write
    the same memory: a broadcast out (stride 0) or overlapping slices; rejected before any
    launch, with out untouched."""
    base = sentinel((8, M, N), np.float32)
    mat = M * N * 4
    out = view(base, (2, 2, M, N), (strides[0] * mat, strides[1] * mat, 4 * N, 4))
    a = sentinel((2, 1, M, K), np.float32)  # a (2, 1, ...) @ b (2, ...): no batch folds
    b = sentinel((2, K, N), np.float32)
    before = raw_bytes(base)
    with pytest.raises(ValueError, match="out's matrices overlap.*own memory"):
        matmul(a, b, out=out)
    np.testing.assert_array_equal(raw_bytes(base), before)
