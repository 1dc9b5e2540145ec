"""``python -m numba_gemm.tools.grouped``: ``grouped_mm`` against PyTorch on mixture-of-experts
layers.

For each layer (:data:`LAYERS`: the experts' ``K x N``), expert count and mean tokens per expert,
the tokens are split unevenly over the experts (:func:`group_sizes`: some experts get none) and
the product is timed, after a check against float64 (``rel_error``), as

- ``ours``: ``numba_gemm.grouped_mm(a, w, ends, out=c)``, one launch;
- ``loop``: a Python loop of ``torch.mm(a[rows of g], w[g], out=c[rows of g])`` over the
  non-empty groups (what a model without a grouped kernel runs);
- ``bmm``: ``torch.bmm`` of equal groups (the same tokens split evenly), beside ``ours`` on the
  same even split (``ours_even``): the issue's second bar;
- ``torch_grouped``: ``torch._grouped_mm`` where the installed PyTorch has it for float32.

End to end (the calls' loops alternated, ``timing.time_calls_paired``) and kernel time (CUDA
events behind a hold kernel); ``speedup_loop`` = loop / ours, ``vs_bmm`` = bmm / ours_even.
FP32 with TF32 off. Kernels are compiled first by ``--jobs`` worker processes. Writes
``grouped.jsonl`` under ``--out``. Needs PyTorch.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from .cases import warm_in_workers, write_rows

#: (K, N) of one expert's projection: Mixtral-8x7B's up-projection, DeepSeek-MoE-16B's expert.
LAYERS = {"mixtral-up": (4096, 14336), "deepseek-moe-expert": (2048, 1408)}
#: (layer, experts) timed by default: each model's own expert count, and 8 of DeepSeek's.
LAYER_EXPERTS = (("mixtral-up", 8), ("deepseek-moe-expert", 8), ("deepseek-moe-expert", 64))
MEAN_TOKENS = (1, 16, 128, 512)


def group_sizes(experts: int, mean: int, seed: int = 0) -> list[int]:
    """Uneven tokens per expert with the given mean: a quarter of the experts (at least one,
    not all) get none, the rest draw from ``[1, 2 * mean']`` so that the total is ``experts *
    mean`` (the last non-empty expert takes the remainder)."""
    rng = np.random.default_rng(seed)
    total = experts * mean
    empty = set(rng.choice(experts, size=max(1, experts // 4), replace=False).tolist())
    if len(empty) == experts:
        empty.pop()
    busy = [e for e in range(experts) if e not in empty]
    share = max(1, total // len(busy))
    sizes = [0] * experts
    left = total
    for e in busy[:-1]:
        n = int(min(left, rng.integers(1, 2 * share + 1)))
        sizes[e] = n
        left -= n
    sizes[busy[-1]] = left
    return sizes


def _operands(K: int, N: int, sizes: list[int], seed: int, shared: bool = False):
    """Tokens ``(T, K)``, the experts' matrices ``(E, K, N)`` (``shared``: one matrix, group
    stride 0: what a compile needs, at 1/E of the memory), end rows, an output ``(T, N)``."""
    import torch  # optional dependency: this tool compares with PyTorch

    g = torch.Generator(device="cuda").manual_seed(seed)
    T, E = sum(sizes), len(sizes)
    a = torch.randn(T, K, device="cuda", generator=g)
    w = torch.randn(1 if shared else E, K, N, device="cuda", generator=g) / K**0.5
    ends = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
    return a, w.expand(E, K, N), ends, torch.empty(T, N, device="cuda")


def _case(layer: str, experts: int, mean: int, seed: int = 0) -> dict:
    import torch  # optional dependency: this tool compares with PyTorch

    import numba_gemm
    from numba_gemm.tools.timing import time_calls_paired, time_launches

    torch.backends.cuda.matmul.allow_tf32 = False
    K, N = LAYERS[layer]
    sizes = group_sizes(experts, mean, seed)
    a, w, ends, c = _operands(K, N, sizes, seed)
    numba_gemm.grouped_mm(a, w, ends, out=c)
    torch.cuda.synchronize()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    groups = list(enumerate(zip(starts, sizes, strict=True)))
    want = torch.cat([a[s : s + n].double() @ w[e].double() for e, (s, n) in groups])
    err = float((c.double() - want).norm() / want.norm())
    pieces = [(e, s, n) for e, (s, n) in groups if n]

    def loop():
        for e, s, n in pieces:
            torch.mm(a[s : s + n], w[e], out=c[s : s + n])

    calls = {"ours": lambda: numba_gemm.grouped_mm(a, w, ends, out=c), "loop": loop}
    if hasattr(torch, "_grouped_mm"):
        try:
            torch._grouped_mm(a, w, offs=ends)
            calls["torch_grouped"] = lambda: torch._grouped_mm(a, w, offs=ends)
        except (RuntimeError, TypeError, NotImplementedError):
            pass  # not for float32 on this build: left out of the row
    # the same tokens and experts, split evenly: grouped_mm against torch.bmm
    ends_e = torch.arange(1, experts + 1, dtype=torch.int32, device="cuda") * mean
    a3, c3 = a.view(experts, mean, K), c.view(experts, mean, N)
    calls["ours_even"] = lambda: numba_gemm.grouped_mm(a, w, ends_e, out=c)
    calls["bmm"] = lambda: torch.bmm(a3, w, out=c3)
    e2e = dict(zip(calls, (t.median for t in time_calls_paired(list(calls.values()))), strict=True))
    kernel = {name: time_launches(fn, reps=20).median for name, fn in calls.items()}
    return {
        "layer": layer,
        "K": K,
        "N": N,
        "experts": experts,
        "mean_tokens": mean,
        "sizes": sizes,
        "rel_error": err,
        **{f"{k}_e2e_ms": v for k, v in e2e.items()},
        **{f"{k}_kernel_ms": v for k, v in kernel.items()},
        "speedup_loop": e2e["loop"] / e2e["ours"],
        "vs_bmm": e2e["bmm"] / e2e["ours_even"],
    }


def _warm(case: tuple) -> str:
    """Compile (through the kernel cache) what ``case`` runs (a worker process)."""
    import torch  # optional dependency: this tool compares with PyTorch

    import numba_gemm

    layer, experts, mean = case
    K, N = LAYERS[layer]
    a, w, ends, c = _operands(K, N, group_sizes(experts, mean), 0, shared=True)
    numba_gemm.grouped_mm(a, w, ends, out=c)  # (the even split: the same plan, T / E rows)
    torch.cuda.synchronize()
    return repr(case)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for grouped.jsonl")
    ap.add_argument(
        "--layers",
        default=",".join(f"{layer}:{e}" for layer, e in LAYER_EXPERTS),
        help="layer:experts pairs (layers: LAYERS' names)",
    )
    ap.add_argument("--mean", default=",".join(map(str, MEAN_TOKENS)), help="tokens per expert")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile workers")
    args = ap.parse_args(argv)
    pairs = [item.split(":") for item in args.layers.split(",")]
    cases = [(layer, int(e), int(m)) for layer, e in pairs for m in args.mean.split(",")]
    warm_in_workers(_warm, cases, args.jobs)
    write_rows(args.out / "grouped.jsonl", (_case(*case) for case in cases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
