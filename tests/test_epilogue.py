"""Fused epilogues (``kernels._epilogue``): bias, activations and user device functions, fused in
the tunable FP32 stages (split-K and stream-K sums included) or applied after any other plan;
``linear``; the errors of bad epilogue arguments; the cache key of a user function."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import (
    SKINNY_N_SIM_CONFIG,
    SKINNY_SIM_CONFIG,
    TMA_SIM_CONFIG,
    WGMMA_SIM_CONFIG,
    off_simulator,
    randn,
    to_device,
    transposed_on_device,
)
from numba import cuda

import numba_gemm
from numba_gemm.device import SIMULATOR
from numba_gemm.kernels._tunable import STREAM_K
from numba_gemm.launch import cache, launcher
from numba_gemm.tools.reference import rel_error

#: One 64 x 64 tile of 4 warps (as tests/test_layouts.py).
SMALL = dict(BM=64, BN=64, BK=8, WM=32, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=1)

_erf = np.vectorize(math.erf)
ACT = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1 + np.exp(-x)),
}


def small(name: str, **cfg):
    extra = {"NBUF": 3} if name == "multistage" else {}
    return numba_gemm.get_stage(name).with_config({**SMALL, **extra, **cfg})


@pytest.fixture
def fused_only(monkeypatch):
    """Fail if a plan applies its epilogue in a second kernel (it must be fused)."""

    def no_apply(*args, **kwargs):
        raise AssertionError("the epilogue was applied after the product, not fused")

    monkeypatch.setattr(launcher, "apply_epilogue", no_apply)


@cuda.jit(device=True)
def _residual_scaled(v, r, c, R, s):
    return v * s[c] + R[r, c] + 0.25 * r - 0.5 * c


# (stage, config, (M, N, K), alpha, beta): the vector variant (N % 4 == 0; with C read too), the
# scalar one, split-K's one-level sum, stream-K's partial tiles; the few-row and few-column
# stages, split-K; the tensor-core stages' pair store on its scalar path (N odd: the last column
# unpaired, C read)
FUSED = [
    ("warptiling", dict(SMALL), (70, 68, 36), 1.0, 0.0),
    ("warptiling", dict(SMALL), (64, 64, 32), 0.5, 1.5),
    ("double_buffering", dict(SMALL, SPLITK=2), (67, 61, 35), 0.5, 1.5),
    ("multistage", dict(SMALL, NBUF=3, SPLITK=STREAM_K), (130, 70, 40), 1.0, 0.0),
    ("skinny", SKINNY_SIM_CONFIG, (5, 70, 40), 1.0, 0.0),
    ("skinny_n", SKINNY_N_SIM_CONFIG, (9, 6, 300), 2.0, 0.5),
    ("tf32_wgmma", dict(WGMMA_SIM_CONFIG, SPLITK=1), (40, 69, 136), 1.5, 0.5),
]


@pytest.mark.parametrize("name, cfg, shape, alpha, beta", FUSED, ids=lambda x: str(x)[:40])
def test_fused_bias_and_gelu_match_float64(rng, fused_only, name, cfg, shape, alpha, beta):
    """``gelu(alpha * A @ B + beta * C + bias)`` fused into the kernels' stores, split-K's and
    stream-K's last sums included (their partial sums must stay raw)."""
    M, N, K = shape
    a, b, bias = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, N)
    c0 = randn(rng, (M, N)) if beta else np.full((M, N), np.nan, np.float32)
    d_c = to_device(c0)
    stage = numba_gemm.get_stage(name).with_config(cfg)
    numba_gemm.sgemm(
        to_device(a),
        to_device(b),
        out=d_c,
        alpha=alpha,
        beta=beta,
        stage=stage,
        bias=to_device(bias),
        activation="gelu",
    )
    v = alpha * (a.astype(np.float64) @ b) + (beta * c0.astype(np.float64) if beta else 0) + bias
    tol = 1e-5 if stage.precision == "fp32" else stage.rtol
    assert rel_error(d_c.copy_to_host(), ACT["gelu"](v)) < tol


@pytest.mark.parametrize("activation", ["relu", "gelu_tanh", "silu"])
def test_row_bias_activation_and_user_function(rng, fused_only, activation):
    """A bias per row, each activation, then a user function of two operands (a 2-D residual
    and a 1-D scale) and of the row and column."""
    M, N, K = 45, 38, 21
    a, b, bias = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, (M, 1))
    R, s = randn(rng, (M, N)), randn(rng, N)
    d_c = to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.sgemm(
        to_device(a),
        to_device(b),
        out=d_c,
        stage=small("multistage"),
        bias=to_device(bias),
        activation=activation,
        epilogue=_residual_scaled,
        epilogue_args=(to_device(R), to_device(s)),
    )
    rows, cols = np.mgrid[0:M, 0:N]
    v = ACT[activation](a.astype(np.float64) @ b + bias)
    assert rel_error(d_c.copy_to_host(), v * s + R + 0.25 * rows - 0.5 * cols) < 1e-5


def test_activation_alone(rng, fused_only):
    """An epilogue with no operand (an activation, no bias): its kernel takes an empty operand
    tuple (the GPU launcher binds none)."""
    M, N, K = 33, 40, 17
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_c = to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.sgemm(
        to_device(a), to_device(b), out=d_c, stage=small("multistage"), activation="silu"
    )
    assert rel_error(d_c.copy_to_host(), ACT["silu"](a.astype(np.float64) @ b)) < 1e-5


def test_unfused_stage_and_empty_k_apply_the_epilogue(rng):
    """A stage that fuses nothing (a teaching stage) runs the epilogue in a second kernel; so
    does a product with K == 0 (``beta * C``, then the epilogue)."""
    M, N, K = 19, 23, 7
    a, b, bias = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, N)
    assert not numba_gemm.get_stage("smem_tiling").epilogue
    d_c = to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.sgemm(to_device(a), to_device(b), out=d_c, stage="smem_tiling", bias=to_device(bias))
    assert rel_error(d_c.copy_to_host(), a.astype(np.float64) @ b + bias) < 1e-5
    c0 = randn(rng, (M, N))
    d_c = to_device(c0)
    numba_gemm.sgemm(
        to_device(randn(rng, (M, 0))),
        to_device(randn(rng, (0, N))),
        out=d_c,
        beta=2.0,
        bias=to_device(bias),
        activation="relu",
    )
    assert rel_error(d_c.copy_to_host(), np.maximum(2.0 * c0.astype(np.float64) + bias, 0)) < 1e-6


def test_batched_matmul_epilogue_sees_rows_within_each_matrix(rng, fused_only):
    """``matmul`` of a batch with a bias broadcast over the batch and a function of (row, col)
    within each matrix, in one fused kernel."""

    def ramp(v, r, c):  # a plain Python function: compiled as a device function
        return v + 0.125 * r * c

    a, b, bias = randn(rng, (3, 20, 13)), randn(rng, (13, 17)), randn(rng, 17)
    got = numba_gemm.matmul(
        to_device(a),
        to_device(b),
        stage=small("warptiling"),
        bias=to_device(bias),
        epilogue=ramp,
    )
    rows, cols = np.mgrid[0:20, 0:17]
    want = a.astype(np.float64) @ b + bias + 0.125 * rows * cols
    assert got.shape == (3, 20, 17)
    assert rel_error(got.copy_to_host(), want) < 1e-5


def test_linear_matches_torch_layout(rng):
    """``linear(x, W, b, "silu")`` = ``silu(x @ W.T + b)`` for a 3-D ``x`` (rows flattened), the
    result of shape ``(..., N)``."""
    x, W, bias = randn(rng, (2, 5, 12)), randn(rng, (9, 12)), randn(rng, 9)
    got = numba_gemm.linear(to_device(x), to_device(W), to_device(bias), "silu")
    assert got.shape == (2, 5, 9)
    want = ACT["silu"](x.astype(np.float64) @ W.T + bias)
    assert rel_error(got.copy_to_host(), want) < 1e-5


@pytest.mark.skipif(SIMULATOR, reason="FP16 stages take minutes a call on the simulator")
def test_linear_fp16_with_bias_and_gelu(rng):
    """16-bit ``linear``: ``hgemm`` of ``x @ W.T`` with its epilogue, the result in float16."""
    x, W = randn(rng, (33, 64)).astype(np.float16), randn(rng, (40, 64)).astype(np.float16)
    bias = randn(rng, 40).astype(np.float16)
    got = numba_gemm.linear(to_device(x), to_device(W), to_device(bias), "gelu")
    assert got.dtype == np.float16
    want = ACT["gelu"](x.astype(np.float64) @ W.T.astype(np.float64) + bias)
    assert rel_error(got.copy_to_host().astype(np.float64), want) < 1e-2


@cuda.jit
def _a_kernel(x):
    pass


@cuda.jit(device=True)
def _two_args(v, r):
    return v


@cuda.jit(device=True)
def _fails(v, r, c):
    return v + undefined_name  # noqa: F821


def _bad_calls(d_r):
    return [
        (dict(bias=cuda.to_device(np.zeros(7, np.float32))), ValueError, "bias must have shape"),
        (dict(bias=cuda.to_device(np.zeros(5, np.float64))), TypeError, "bias must be float32"),
        (dict(activation="tanh"), ValueError, "activation must be one of"),
        (dict(epilogue=_a_kernel), TypeError, "got the kernel"),
        (dict(epilogue=_two_args), TypeError, "must take (value, row, col)"),
        (dict(epilogue=3), TypeError, "must be a device function"),
        (dict(epilogue_args=(d_r,)), ValueError, "without an epilogue function"),
        (dict(epilogue=_residual_scaled, epilogue_args=(d_r,) * 4), TypeError, "at most 3"),
        (dict(epilogue=_fails), TypeError, "_fails"),
    ]


def test_bad_epilogue_arguments_raise_and_write_nothing(rng):
    M, N, K = 4, 5, 3
    d_a, d_b = to_device(randn(rng, (M, K))), to_device(randn(rng, (K, N)))
    d_r = to_device(randn(rng, (M, N)))
    poison = np.full((M, N), np.nan, np.float32)
    for kwargs, error, words in _bad_calls(d_r):
        d_c = to_device(poison)
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
            numba_gemm.sgemm(d_a, d_b, out=d_c, stage=small("warptiling"), **kwargs)
        assert np.isnan(d_c.copy_to_host()).all(), kwargs


def test_epilogue_cache_key_follows_the_functions_code():
    """Same code, same key (in any process); an edited body, constant or closure, a new key."""
    from numba_gemm.kernels._epilogue import Epilogue

    def make(k):
        def f(v, r, c):
            return v * k

        return cuda.jit(device=True)(f)

    def g(v, r, c):
        return v * 2.0

    def h(v, r, c):
        return v * 3.0

    key = lambda fn: cache.epilogue_key(Epilogue("column", "relu", fn, "V"))  # noqa: E731
    assert key(make(2.0)) == key(make(2.0))
    assert key(make(2.0)) != key(make(3.0))
    assert key(g) != key(h)
    assert cache.epilogue_key(Epilogue("column", "relu", None, "V")) != cache.epilogue_key(
        Epilogue("row", "relu", None, "V")
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(bias="column"), "start with the bias"),  # once left kernel typing spinning
        (dict(bias="diag", operands="V"), "bias must be"),
        (dict(activation="tanh"), "activation must be"),
        (dict(operands="VX"), "letters"),
        (dict(bias="row", operands="VV"), "no function"),
        (dict(fn=lambda v, r, c, *o: v, operands="VVVV"), "at most 3"),
    ],
)
def test_epilogue_record_refuses_inconsistent_parts(kwargs, match):
    """An :class:`Epilogue` whose parts disagree (a bias with no operand letter, an unknown
    activation or letter, operands nobody takes) raises ``ValueError`` when it is made, before
    any kernel is typed for it."""
    from numba_gemm.kernels._epilogue import Epilogue

    with pytest.raises(ValueError, match=match):
        Epilogue(**kwargs)
    Epilogue(bias="row", activation="silu", operands="V")  # a consistent one is accepted


def test_fast_lane_serves_bias_and_activation(rng, monkeypatch):
    """Once a shape is planned, ``linear`` and ``sgemm`` with a bias vector and an activation
    take the fast lane (no ``Operand`` reads, no validation) and launch the same fused plan; a
    bias of another length goes the general way (and raises there)."""
    x, W, bias = randn(rng, (6, 20)), randn(rng, (24, 20)), randn(rng, 24)
    d_x, d_W, d_b = to_device(x), to_device(W), to_device(bias)
    want = ACT["relu"](x.astype(np.float64) @ W.T + bias)
    numba_gemm.linear(d_x, d_W, d_b, "relu")  # plans it
    numba_gemm.sgemm(d_x, to_device(W.T.copy()), bias=d_b, activation="relu")

    def general(*args, **kwargs):
        raise AssertionError("the general path ran")

    with monkeypatch.context() as m:
        m.setattr(numba_gemm.api, "operand", general)
        m.setattr(numba_gemm.checks, "validate", general)
        got = numba_gemm.linear(d_x, d_W, d_b, "relu")
        assert rel_error(got.copy_to_host(), want) < 1e-5
        d_c = to_device(np.full((6, 24), np.nan, np.float32))
        numba_gemm.sgemm(d_x, to_device(W.T.copy()), out=d_c, bias=d_b, activation="relu")
        assert rel_error(d_c.copy_to_host(), want) < 1e-5
    with pytest.raises(ValueError, match="bias must have shape"):
        numba_gemm.linear(d_x, d_W, to_device(randn(rng, 23)), "relu")


#: The tensor-core stages that fuse epilogues, on the simulator's small tiles: (stage, config,
#: (M, N, K), B stored transposed, 16-bit operands)
TENSOR_CORE = [
    ("tf32_tma_rs", TMA_SIM_CONFIG, (70, 68, 40), False, None),
    ("tf32_wgmma", dict(WGMMA_SIM_CONFIG, SPLITK=2), (40, 70, 136), True, None),
    ("hgemm_tma", TMA_SIM_CONFIG, (70, 72, 64), True, np.float16),
]


@pytest.mark.parametrize("name, cfg, shape, b_t, half", TENSOR_CORE, ids=lambda x: str(x)[:24])
def test_tensor_core_stages_fuse_the_epilogue(rng, fused_only, name, cfg, shape, b_t, half):
    """TF32 (wgmma with split-K's sum, and the TMA pipeline) and FP16 stages store
    ``gelu_tanh(A @ B + bias)`` through the epilogue; a 16-bit C takes it too (its 16-byte
    stores do not)."""
    M, N, K = shape
    a, b, bias = randn(rng, (M, K)), randn(rng, (K, N)), randn(rng, N)
    if half is not None:
        a, b = a.astype(half), b.astype(half)
    d_b = transposed_on_device(b) if b_t else to_device(b)
    stage = numba_gemm.get_stage(name).with_config(cfg)
    if half is None:
        d_c = to_device(np.full((M, N), np.nan, np.float32))
        numba_gemm.sgemm(
            to_device(a), d_b, out=d_c, stage=stage, bias=to_device(bias), activation="gelu_tanh"
        )
    else:
        d_c = to_device(np.full((M, N), np.nan, half))
        numba_gemm.hgemm(
            to_device(a), d_b, out=d_c, stage=stage, bias=to_device(bias), activation="gelu_tanh"
        )
    want = ACT["gelu_tanh"](a.astype(np.float64) @ b.astype(np.float64) + bias)
    assert rel_error(d_c.copy_to_host().astype(np.float64), want) < stage.rtol


def test_bench_user_function_is_the_builtin_gelu(rng, fused_only):
    """``tools.epilogues`` times a user function against the built-in bias + GELU: the two store
    the same values (so the bench compares the same math)."""
    from numba_gemm.tools import epilogues

    a, b, bias = randn(rng, (9, 7)), randn(rng, (7, 12)), randn(rng, 12)
    d_a, d_b, d_bias = to_device(a), to_device(b), to_device(bias)
    stage = small("warptiling")
    builtin = numba_gemm.sgemm(d_a, d_b, stage=stage, bias=d_bias, activation="gelu")
    user = numba_gemm.sgemm(
        d_a, d_b, stage=stage, epilogue=epilogues.bias_gelu, epilogue_args=(d_bias,)
    )
    np.testing.assert_allclose(user.copy_to_host(), builtin.copy_to_host(), rtol=1e-6, atol=1e-6)
    with pytest.raises(SystemExit) as e:
        epilogues.main(["--help"])
    assert e.value.code == 0


#: Compiled offline in a process of its own (the simulator off): warptiling with bias + GELU, a
#: 32 x 32 tile of 2 warps, 16 results a thread; prints the erfs' ``ex2.approx`` per variant.
_ONE_FINISH = """
from numba_gemm.kernels import get_stage
from numba_gemm.kernels._epilogue import Epilogue
from numba_gemm.launch.launcher import numba_signature
from numba_gemm.tools.resources import compile_kernel_ptx
cfg = dict(BM=32, BN=32, BK=8, WM=16, WN=32, WNITER=1, TM=4, TN=4, MINB=0, SPLITK=1)
st = get_stage("warptiling").with_config(cfg)
epi = Epilogue(bias="column", activation="gelu", operands="V")
sig = numba_signature(st.args_for(epi))
for variant in ("vector", "scalar"):
    ptx = compile_kernel_ptx(st.kernel_for(variant, "NN", epi), sig=sig)
    print(variant, ptx.count("ex2.approx"))
tma = get_stage("tf32_tma")  # 64 results a thread; its pair store picks 64-bit stores at run time
sig = numba_signature(tma.args_for(epi))
for variant in ("vector", "scalar"):
    ptx = compile_kernel_ptx(tma.kernel_for(variant, "NT", epi), cc=(9, 0, "a"), sig=sig)
    print("tma_" + variant, ptx.count("ex2.approx"))
"""


def test_fused_epilogue_is_inlined_once_per_result():
    """The C-writing helpers of a kernel with an epilogue call ``finish`` once per result
    (``_common._make_fused_stores``): GELU's one ``ex2.approx`` (its erf) appears 16 times in
    the PTX of a kernel of 16 results a thread, in both variants, and 64 times in stage 21's
    (64 results a thread), whose pair store chooses its 64-bit or scalar path at run time. Two
    copies a result (a ``finish`` in each ``beta`` branch) cost 20 % at K = 768 on an H200
    (docs/design.md §3.1)."""
    res = off_simulator(["-c", _ONE_FINISH], timeout=600, NUMBA_GEMM_BACKEND="numba-cuda")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    counts = dict(line.split() for line in res.stdout.split("\n") if line.strip())
    assert counts == {"vector": "16", "scalar": "16", "tma_vector": "64", "tma_scalar": "64"}, (
        res.stdout
    )


def test_epilogues_tool_rejects_a_bad_shape_with_its_reason(capsys, tmp_path):
    """``python -m numba_gemm.tools.epilogues --shapes``: a malformed shape stops the tool
    before any work, with ``parse_sizes``'s explanation."""
    from numba_gemm.tools import epilogues

    with pytest.raises(SystemExit) as stop:
        epilogues.main(["--out", str(tmp_path), "--shapes", "4096x12"])
    assert stop.value.code == 2
    assert "MxNxK needs exactly 3 dimensions" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
