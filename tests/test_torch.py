"""``numba_gemm.torch``: the custom operators against float64 PyTorch, their autograd, the
``nn.Linear`` drop-in trained under ``torch.compile(fullgraph=True)`` against eager PyTorch,
``torch.library.opcheck``, and the errors. On the simulator the operators take CPU tensors (the
kernels run on the simulator); on a GPU, CUDA tensors and the inductor backend."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import numba_gemm.torch as ngt  # noqa: E402
from numba_gemm.device import SIMULATOR  # noqa: E402

if not SIMULATOR and not torch.cuda.is_available():
    pytest.skip("needs the simulator or PyTorch with a GPU", allow_module_level=True)

DEV = "cpu" if SIMULATOR else "cuda"
#: the compiler backend: AOTAutograd with eager kernels on the simulator (what a custom op must
#: survive: fake tensors, functionalization, the joint graph), inductor on a GPU
BACKEND = "aot_eager" if SIMULATOR else "inductor"
F = torch.nn.functional
ACT = {
    None: lambda z: z,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
    "silu": F.silu,
}


@pytest.fixture
def gen(rng):
    """A torch generator seeded from the test's fresh seed."""
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


def randn(gen, *shape, dtype=torch.float32, grad=False):
    return torch.randn(shape, generator=gen).to(DEV, dtype).requires_grad_(grad)


def rel(got, want):
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    assert not torch.isnan(got).any()
    return ((got - want).norm() / max(want.norm().item(), 1e-30)).item()


def test_import_numba_gemm_imports_no_torch():
    code = "import sys, numba_gemm; assert 'torch' not in sys.modules, 'torch imported'"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("activation", list(ACT))
def test_linear_forward_and_gradients_match_float64(gen, activation):
    """x of rank 3 (flattened rows), a bias, each activation: output and dX, dW, dbias."""
    x, w, b = randn(gen, 2, 3, 13, grad=True), randn(gen, 10, 13, grad=True), randn(gen, 10)
    b.requires_grad_()
    y = ngt.linear(x, w, b, activation)
    assert y.shape == (2, 3, 10) and y.dtype == torch.float32 and y.device.type == DEV
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    want = ACT[activation](F.linear(x64, w64, b64))
    assert rel(y, want) < 1e-5
    g = randn(gen, 2, 3, 10)
    y.backward(g)
    want.backward(g.double())
    for got, ref in ((x, x64), (w, w64), (b, b64)):
        assert rel(got.grad, ref.grad) < 1e-5


def test_matmul_batched_broadcast_and_vectors_with_gradients(gen):
    """numpy.matmul's rules (a broadcast batch, a 1-D operand) and their gradients (summed over
    the broadcast dimension)."""
    cases = [((2, 1, 5, 4), (3, 4, 6)), ((7,), (7, 3)), ((4, 6), (6,)), ((5,), (5,))]
    for sa, sb in cases:
        a, b = randn(gen, *sa, grad=True), randn(gen, *sb, grad=True)
        c = ngt.matmul(a, b)
        a64, b64 = (t.detach().double().requires_grad_() for t in (a, b))
        want = torch.matmul(a64, b64)
        assert c.shape == want.shape and rel(c, want) < 1e-5
        g = randn(gen, *want.shape)
        c.backward(g)
        want.backward(g.double())
        assert rel(a.grad, a64.grad) < 1e-5 and rel(b.grad, b64.grad) < 1e-5


def test_grouped_mm_operator(gen):
    a, b = randn(gen, 12, 8), randn(gen, 3, 8, 5)
    offsets = torch.tensor([4, 4, 12], dtype=torch.int32, device=DEV)
    out = ngt.grouped_mm(a, b, offsets)
    want = torch.cat([a[:4].double() @ b[0].double(), a[4:].double() @ b[2].double()])
    assert out.shape == (12, 5) and rel(out, want) < 1e-5


@pytest.mark.parametrize("w_layout", ["row-major", "weights"])
def test_grouped_mm_gradients(gen, w_layout):
    """Backward through grouped_mm against float64 autograd of the loop it computes: an empty
    group, rows past the last group's end (no gradient: zeros), B row-major ``(E, K, N)`` or the
    transpose of ``(E, N, K)`` weights (as ``x @ W_g.T``)."""
    T, E, K, N = 13, 3, 6, 5
    offsets = torch.tensor([4, 4, 11], dtype=torch.int32, device=DEV)
    a = randn(gen, T, K, grad=True)
    if w_layout == "row-major":
        b = randn(gen, E, K, N, grad=True)
        leaf = b
    else:
        leaf = randn(gen, E, N, K, grad=True)
        b = leaf.transpose(1, 2)
    out = ngt.grouped_mm(a, b, offsets)
    a64, l64 = (t.detach().double().requires_grad_() for t in (a, leaf))
    b64 = l64 if w_layout == "row-major" else l64.transpose(1, 2)
    want = torch.cat([a64[:4] @ b64[0], a64[4:11] @ b64[2]])
    g = randn(gen, T, N)
    (out[:11] * g[:11]).sum().backward()
    (want * g[:11].double()).sum().backward()
    assert rel(a.grad, a64.grad) < 1e-5 and rel(leaf.grad, l64.grad) < 1e-5
    assert not a.grad[11:].any() and not leaf.grad[1].any()  # past the end; the empty group


# inductor's import of torch.jit warns (PyTorch 2.11): not ours to fix
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_mlp_trains_under_compile_like_eager_pytorch(gen):
    """A two-layer MLP of :class:`Linear` (GELU fused into the first) compiled with
    ``fullgraph=True`` takes the same SGD steps as the eager ``nn.Linear`` MLP it was copied
    from (parameters after each step within FP32 tolerance)."""
    ref = torch.nn.Sequential(torch.nn.Linear(11, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    ref = ref.to(DEV)
    ours = copy.deepcopy(ref)
    ours = torch.nn.Sequential(
        ngt.Linear.from_linear(ours[0], activation="gelu"), ngt.Linear.from_linear(ours[2])
    )
    assert isinstance(ours[0], torch.nn.Linear)
    step = torch.compile(ours, fullgraph=True, backend=BACKEND)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ref, ours)]
    for _ in range(3):
        x, target = randn(gen, 6, 11), randn(gen, 6, 3)
        for fn, opt in ((ref, opts[0]), (step, opts[1])):
            opt.zero_grad()
            F.mse_loss(fn(x), target).backward()
            opt.step()
        for p, q in zip(ref.parameters(), ours.parameters(), strict=True):
            assert rel(q, p) < 1e-5


@pytest.mark.parametrize(
    "op, args",
    [
        ("linear", lambda g: (randn(g, 5, 9, grad=True), randn(g, 6, 9), randn(g, 6), "gelu")),
        ("linear", lambda g: (randn(g, 5, 9), randn(g, 6, 9, grad=True), None, "relu")),
        ("matmul", lambda g: (randn(g, 2, 5, 4, grad=True), randn(g, 4, 3, grad=True))),
        ("grouped_mm", lambda g: (randn(g, 7, 4), randn(g, 2, 4, 3), torch.tensor([3, 7]))),
    ],
    ids=["linear-gelu", "linear-relu-nobias", "matmul-broadcast", "grouped_mm"],
)
def test_opcheck(gen, op, args):
    """torch.library.opcheck: schema, autograd registration, fake tensor, AOT dispatch."""
    args = args(gen)
    if op == "linear":
        args = (*args, None)  # compute
    elif op == "matmul":
        args = (*args, None)
    else:
        args = (*args[:2], args[2].to(DEV, torch.int32))
    torch.library.opcheck(getattr(torch.ops.numba_gemm, op).default, args)


def test_linear_module_matches_nn_linear_and_loads_its_state(gen):
    ref = torch.nn.Linear(9, 4).to(DEV)
    ours = ngt.Linear(9, 4, activation="silu", device=DEV)
    ours.load_state_dict(ref.state_dict())
    x = randn(gen, 3, 9)
    assert rel(ours(x), F.silu(ref(x))) < 1e-5
    assert "activation=silu" in repr(ours)


@pytest.mark.skipif(SIMULATOR, reason="the direct path takes CUDA tensors")
@pytest.mark.filterwarnings("ignore:`torch.jit.[a-z_]*` is deprecated:DeprecationWarning")
def test_inference_skips_the_dispatcher_with_the_same_result(gen, monkeypatch):
    """Without gradients an eager call runs the kernel directly; with them, the operator."""
    layer = ngt.Linear(24, 20, device=DEV, activation="gelu")
    x = randn(gen, 7, 24)
    with torch.no_grad():
        want = torch.ops.numba_gemm.linear.default(x, layer.weight, layer.bias, "gelu", None)
        calls = []
        monkeypatch.setattr(ngt, "_linear_impl", lambda *a: calls.append(a) or want)
        assert layer(x) is want and ngt.linear(x, layer.weight, layer.bias, "gelu") is want
    assert len(calls) == 2
    monkeypatch.undo()
    y = layer(x)  # parameters need a gradient: the operator, then its backward
    assert y.grad_fn is not None and rel(y, want) < 1e-6

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    seen = []
    with torch.no_grad(), Record():  # a dispatch mode sees the operator, not a bypass
        layer(x)
    assert "numba_gemm.linear.default" in seen
    with torch.no_grad():
        traced = torch.jit.trace(layer, x)
    assert "numba_gemm::linear" in str(traced.graph)


def test_errors(gen):
    x, w = randn(gen, 4, 5), randn(gen, 3, 5)
    with pytest.raises(ValueError, match="activation must be None or one of"):
        ngt.linear(x, w, activation="tanh")
    with pytest.raises(ValueError, match="activation"):
        ngt.Linear(5, 3, activation="swish")
    with pytest.raises(TypeError, match="weight must be of x's dtype"):
        ngt.linear(x, w.double())
    with pytest.raises(ValueError, match="features"):
        ngt.linear(x, randn(gen, 3, 6))
    if not SIMULATOR:
        with pytest.raises(TypeError, match="CUDA tensors"):
            ngt.linear(x.cpu(), w.cpu())


HALF = [torch.float16] if SIMULATOR else [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", HALF)
def test_half_linear_and_gradients(gen, dtype):
    """16-bit linear (hgemm, FP32 sums) and its gradients for 5 rows (dW's inner dimension, not
    a multiple of 8: zero-padded for hgemm) and for 1 row of a 1-D input."""
    K, N = (16, 8) if SIMULATOR else (64, 48)
    for shape in ((5, K), (K,)):
        x, w = randn(gen, *shape, dtype=dtype, grad=True), randn(gen, N, K, dtype=dtype, grad=True)
        b = randn(gen, N, dtype=dtype, grad=True)
        y = ngt.linear(x, w, b, "gelu")
        assert y.dtype == dtype and y.shape == (*shape[:-1], N)
        x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
        want = F.gelu(F.linear(x64, w64, b64))
        assert rel(y, want) < 1e-2
        g = randn(gen, *want.shape, dtype=dtype)
        y.backward(g)
        want.backward(g.double())
        for got, ref in ((x, x64), (w, w64), (b, b64)):
            assert rel(got.grad, ref.grad) < 1e-2


# PyTorch's forward-AD set-up scripts its decompositions, which warns (PyTorch 2.13)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_forward_mode_ad_is_refused(gen):
    import torch.autograd.forward_ad as fwad

    x, w = randn(gen, 3, 4), randn(gen, 5, 4)
    with fwad.dual_level():
        dual = fwad.make_dual(x, torch.ones_like(x))
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            ngt.linear(dual, w)
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            ngt.matmul(dual, w.t())


def test_linear_takes_nn_linear_positional_arguments_and_shares_a_biasless_module():
    layer = ngt.Linear(4, 3, False, DEV, torch.float32, activation="relu")
    assert layer.bias is None and layer.weight.device.type == DEV and layer.activation == "relu"
    plain = torch.nn.Linear(4, 3, bias=False).to(DEV).eval()
    shared = ngt.Linear.from_linear(plain)
    assert shared.weight is plain.weight and shared.bias is None and not shared.training
    assert [n for n, _ in shared.named_parameters()] == ["weight"]
