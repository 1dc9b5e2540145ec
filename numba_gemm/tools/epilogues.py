"""``python -m numba_gemm.tools.epilogues``: what a fused epilogue costs, and ``linear`` against
PyTorch's unfused ``gelu(linear(x, W, b))``.

Two tables, every row validated against float64 before it is timed, timed in one process beside
PyTorch (cuBLAS; FP32 with TF32 off, or TF32):

- ``overhead``: ``sgemm`` at each shape plain, with a ``bias``, with a bias and each activation,
  and with a user device function of bias + GELU (:func:`bias_gelu`): kernel time (CUDA events
  around each call, the host hidden behind a hold kernel) and end-to-end time of calls made back
  to back (the calls' loops in turn, ``timing.time_calls_paired``), as ratios to the plain call.
- ``linear``: ``numba_gemm.linear(x, W, b, activation="gelu")`` against
  ``torch.nn.functional.gelu(torch.nn.functional.linear(x, W, b))`` for the MLP projections of
  :data:`MODELS` at :data:`TOKENS` tokens, in FP32 and TF32: end-to-end time (paired loops) and
  the speedup (PyTorch's time / ours); kernel time and host time per call of each; and the same
  product through the PyTorch operator ``torch.ops.numba_gemm.linear`` (the dispatcher, as a
  traced or training call makes it; a new output per call, as PyTorch's: ``op_*`` columns).

Kernels are compiled first by ``--jobs`` worker processes (the on-disk kernel cache), so that
the timed process only loads them. Writes ``epilogues.jsonl`` under ``--out``. Needs PyTorch.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from numba import cuda, float32

from .bench.sizes import parse_sizes
from .cases import warm_in_workers, write_rows

#: (in_features K, out_features N) of the MLP up- or down-projection of each model.
MODELS = {
    "gpt2-mlp-up": (768, 3072),
    "bert-large-mlp-up": (1024, 4096),
    "vit-h-mlp-up": (1280, 5120),
    "llama2-7b-mlp-up": (4096, 11008),
    "mistral-7b-mlp-down": (14336, 4096),
}
TOKENS = (1, 16, 128, 512, 4096)
#: (M, N, K) of the overhead table (``--shapes``).
OVERHEAD_SHAPES = ((4096, 4096, 4096), (2048, 2048, 2048), (4096, 3072, 768), (512, 4096, 4096))


@cuda.jit(device=True)
def bias_gelu(v, r, c, b):
    """The user-function form of ``bias`` + ``activation="gelu"``: ``gelu(v + b[c])`` (erf)."""
    x = v + b[c]
    return float32(0.5) * x * (float32(1.0) + math.erf(x * float32(0.7071067811865476)))


def _reference(x, W, b):
    import torch  # optional dependency: this tool compares with PyTorch

    return torch.nn.functional.gelu(x.double() @ W.double().T + b.double())


def _rel(got, want) -> float:
    return float((got.double() - want).norm() / want.norm())


def _linear_case(model: str, tokens: int, compute: str, seed: int = 0) -> dict:
    """Check, then time one linear row (run in the timed process)."""
    import torch  # optional dependency: this tool compares with PyTorch

    import numba_gemm
    import numba_gemm.torch  # noqa: F401 (optional dependency, PyTorch: registers the operator)
    from numba_gemm.tools.timing import time_calls_paired, time_host, time_launches

    op = torch.ops.numba_gemm.linear.default
    K, N = MODELS[model]
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(tokens, K, device="cuda", generator=g)
    W = torch.randn(N, K, device="cuda", generator=g) / math.sqrt(K)
    b = torch.randn(N, device="cuda", generator=g)
    torch.backends.cuda.matmul.allow_tf32 = compute == "tf32"
    comp = None if compute == "fp32" else compute
    ours = numba_gemm.linear(x, W, b, "gelu", compute=comp)
    torch.cuda.synchronize()
    err = _rel(ours, _reference(x, W, b))
    out = torch.empty(tokens, N, device="cuda")
    F = torch.nn.functional
    calls = [
        lambda: numba_gemm.linear(x, W, b, "gelu", out=out, compute=comp),
        lambda: F.gelu(F.linear(x, W, b)),
        lambda: op(x, W, b, "gelu", comp),
    ]
    t_ours, t_torch, t_op = time_calls_paired(calls)
    k_ours, k_torch, _ = (time_launches(fn, reps=20).median for fn in calls)
    h_ours, h_torch, h_op = (time_host(fn, calls=200).median for fn in calls)
    plan = numba_gemm.explain(x, W.T, compute=comp)
    return {
        "table": "linear",
        "model": model,
        "M": tokens,
        "N": N,
        "K": K,
        "compute": compute,
        "rel_error": err,
        "stage": plan.stage.name,
        "fused": plan.stage.epilogue and plan.staging is None,
        "ours_e2e_ms": t_ours.median,
        "torch_e2e_ms": t_torch.median,
        "speedup": t_torch.median / t_ours.median,
        "ours_kernel_ms": k_ours,
        "torch_kernel_ms": k_torch,
        "ours_host_us": h_ours * 1e3,
        "torch_host_us": h_torch * 1e3,
        "op_e2e_ms": t_op.median,
        "op_speedup": t_torch.median / t_op.median,
        "op_host_us": h_op * 1e3,
    }


def _overhead_case(M: int, N: int, K: int, seed: int = 0) -> list[dict]:
    import torch  # optional dependency: this tool compares with PyTorch

    import numba_gemm
    from numba_gemm.tools.timing import time_calls_paired, time_launches

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=g)
    bm = torch.randn(K, N, device="cuda", generator=g)
    bias = torch.randn(N, device="cuda", generator=g)
    c = torch.empty(M, N, device="cuda")
    sg = numba_gemm.sgemm
    calls = {
        "plain": lambda: sg(a, bm, out=c),
        "bias": lambda: sg(a, bm, out=c, bias=bias),
        "bias_relu": lambda: sg(a, bm, out=c, bias=bias, activation="relu"),
        "bias_gelu_tanh": lambda: sg(a, bm, out=c, bias=bias, activation="gelu_tanh"),
        "bias_gelu": lambda: sg(a, bm, out=c, bias=bias, activation="gelu"),
        "user_fn": lambda: sg(a, bm, out=c, epilogue=bias_gelu, epilogue_args=(bias,)),
    }
    F = torch.nn.functional
    v = a.double() @ bm.double()
    wants = {
        "plain": v,
        "bias": v + bias.double(),
        "bias_relu": F.relu(v + bias.double()),
        "bias_gelu_tanh": F.gelu(v + bias.double(), approximate="tanh"),
    }
    errs = {}
    for name, fn in calls.items():
        fn()
        torch.cuda.synchronize()
        errs[name] = _rel(c, wants.get(name, F.gelu(v + bias.double())))
    kernel = {name: time_launches(fn, reps=30).median for name, fn in calls.items()}
    e2e = dict(zip(calls, (t.median for t in time_calls_paired(list(calls.values()))), strict=True))
    plan = numba_gemm.explain(a, bm)
    return [
        {
            "table": "overhead",
            "M": M,
            "N": N,
            "K": K,
            "variant": name,
            "rel_error": errs[name],
            "stage": plan.stage.name,
            "config": dict(plan.stage.config),
            "kernel_ms": kernel[name],
            "e2e_ms": e2e[name],
            "kernel_ratio": kernel[name] / kernel["plain"],
            "e2e_ratio": e2e[name] / e2e["plain"],
        }
        for name in calls
    ]


def _warm(case: tuple) -> str:
    """Compile (through the kernel cache) what ``case`` will run: one call of each of its
    calls on small random operands of its shape (a worker process)."""
    import torch  # optional dependency: this tool compares with PyTorch

    import numba_gemm

    kind, *rest = case
    if kind == "linear":
        model, tokens, compute = rest
        K, N = MODELS[model]
        x, W, b = (torch.randn(*s, device="cuda") for s in ((tokens, K), (N, K), (N,)))
        numba_gemm.linear(x, W, b, "gelu", compute=None if compute == "fp32" else compute)
    else:
        M, N, K = rest
        a, bm, bias = (torch.randn(*s, device="cuda") for s in ((M, K), (K, N), (N,)))
        numba_gemm.sgemm(a, bm)
        numba_gemm.sgemm(a, bm, bias=bias)
        for act in ("relu", "gelu_tanh", "gelu"):
            numba_gemm.sgemm(a, bm, bias=bias, activation=act)
        numba_gemm.sgemm(a, bm, epilogue=bias_gelu, epilogue_args=(bias,))
    torch.cuda.synchronize()
    return repr(case)


def _shapes_arg(spec: str) -> list[tuple[int, int, int]]:
    """``--shapes``: :func:`parse_sizes`, its message kept for argparse's error."""
    try:
        return parse_sizes(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for epilogues.jsonl")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="token counts")
    ap.add_argument("--models", default=",".join(MODELS), help="models of the linear table")
    ap.add_argument("--compute", default="fp32,tf32", help="arithmetics of the linear table")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile workers")
    ap.add_argument("--no-overhead", action="store_true", help="skip the overhead table")
    ap.add_argument(
        "--shapes",
        type=_shapes_arg,
        default=list(OVERHEAD_SHAPES),
        help="shapes of the overhead table (--sizes forms of numba_gemm.bench: 4096x3072x768,...)",
    )
    args = ap.parse_args(argv)
    tokens = [int(t) for t in args.tokens.split(",")]
    cases: list[tuple] = [] if args.no_overhead else [("overhead", *s) for s in args.shapes]
    cases += [
        ("linear", m, t, c)
        for c in args.compute.split(",")
        for m in args.models.split(",")
        for t in tokens
    ]
    warm_in_workers(_warm, cases, args.jobs)

    def rows():
        for kind, *rest in cases:
            yield from _overhead_case(*rest) if kind == "overhead" else [_linear_case(*rest)]

    write_rows(args.out / "epilogues.jsonl", rows())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
