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
FP32 with TF32 off. ``--layout NT``: the experts' weights stored ``(E, N, K)`` and read
transposed (``x @ W_g.T``, as ``nn.Linear`` experts store them). Kernels are compiled first by
``--jobs`` worker processes. Writes ``grouped.jsonl`` under ``--out``. Needs PyTorch.

``--sweep``: instead, the tile configurations :data:`SWEEP_CONFIGS` (multistage's),
:data:`SWEEP_SKINNY` (stage 15's) and :data:`SWEEP_DOUBLE` (stage 9's), or those of
``--configs``, at :data:`SWEEP_MEANS` tokens (or ``--mean``), against the automatic one
(``dispatch.grouped_runner``: ``auto``), the planner's tiles for the mean group
(``planner``: ``dispatch.planned_grouped_stage``) and the loop of ``torch.mm``, kernel time,
on experts' shapes apart from :data:`LAYERS` (:data:`SWEEP_LAYERS`), so that the rule it informs
(``launch.grouped.FEW_ROWS_CONFIG``, ``SKINNY_RULE``, ``dispatch.GROUPED_PLANNED``) is judged by
the table above, never fitted on it. Writes ``sweep-<layout>.jsonl``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from .cases import warm_in_workers, write_rows

#: (K, N) of one expert's projection: Mixtral-8x7B's up-projection, DeepSeek-MoE-16B's expert;
#: and three that no rule was judged on before it was set (``--layers``, :data:`HELDOUT`):
#: OLMoE-1B-7B's expert (64 of them), Qwen3-30B-A3B's (128), DBRX's up-projection (16).
LAYERS = {
    "mixtral-up": (4096, 14336),
    "deepseek-moe-expert": (2048, 1408),
    "olmoe-expert": (2048, 1024),
    "qwen3-moe-expert": (2048, 768),
    "dbrx-up": (6144, 10752),
}
#: (layer, experts) timed by default: each model's own expert count, and 8 of DeepSeek's.
LAYER_EXPERTS = (("mixtral-up", 8), ("deepseek-moe-expert", 8), ("deepseek-moe-expert", 64))
#: the held-out layers with their models' expert counts: ``--layers`` takes this string
HELDOUT = "olmoe-expert:64,qwen3-moe-expert:128,dbrx-up:16"
MEAN_TOKENS = (1, 16, 128, 512)

#: The sweep's experts' (K, N), experts and mean tokens: none of them one of LAYERS'.
SWEEP_LAYERS = ((3072, 8192), (1536, 4096), (7168, 2048))
SWEEP_EXPERTS = (16, 32)
SWEEP_MEANS = (1, 4, 16, 48, 128, 384)


def _ms(BM, BN, BK, WM, WN, WNITER, TM, TN, NBUF) -> dict:  # noqa: N803 (the tile names)
    return dict(
        BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, WNITER=WNITER, TM=TM, TN=TN, MINB=0, SPLITK=1, NBUF=NBUF
    )


def _db(BM, BN, WM, WN, WNITER, TM) -> dict:  # noqa: N803 (the tile names)
    return dict(BM=BM, BN=BN, BK=16, WM=WM, WN=WN, WNITER=WNITER, TM=TM, TN=4, MINB=0, SPLITK=1)


def _sk(MT, BN, THREADS, KC, NBUF=0, MINB=0) -> dict:  # noqa: N803 (the tile names)
    return dict(MT=MT, BN=BN, THREADS=THREADS, KC=KC, SPLITK=1, MINB=MINB, NBUF=NBUF)


#: stage 15's skinny tiles timed by ``--sweep`` for groups of a few rows: MT rows (a group of
#: more takes several tiles, each reading its matrix), B in registers (either layout) or in a
#: cp.async ring (row-major B only), and the 512-thread GEMV form
SWEEP_SKINNY = {
    "s16x128": _sk(16, 128, 256, 64),
    "s16x64": _sk(16, 64, 256, 64),
    "s8x128": _sk(8, 128, 256, 64),
    "s8x64": _sk(8, 64, 256, 64),
    "s4x128": _sk(4, 128, 256, 64),
    "s16x128-ring": _sk(16, 128, 128, 16, NBUF=4),
    "s8x64-ring": _sk(8, 64, 128, 32, NBUF=4),
    "s1x64-gemv": _sk(1, 64, 512, 128, MINB=1),
    "s8x64-gemv": _sk(8, 64, 512, 128, MINB=1),
}

#: multistage tiles of 32 and 64 rows timed by ``--sweep`` (the planner's own are 64-256 rows)
SWEEP_CONFIGS = {
    "32x64": _ms(32, 64, 32, 32, 32, 1, 4, 4, 4),
    "32x128": _ms(32, 128, 32, 32, 32, 1, 4, 4, 4),
    "32x128-bk16": _ms(32, 128, 16, 32, 32, 1, 4, 4, 4),
    "32x128-wn64": _ms(32, 128, 32, 32, 64, 1, 4, 4, 4),
    "32x256": _ms(32, 256, 32, 32, 32, 1, 4, 4, 4),
    "32x256-wn64": _ms(32, 256, 32, 32, 64, 1, 4, 4, 4),
    "32x256-tm8": _ms(32, 256, 16, 32, 64, 2, 8, 4, 3),
    "64x128": _ms(64, 128, 16, 64, 32, 1, 4, 4, 3),
    "64x128-bk32": _ms(64, 128, 32, 32, 64, 1, 4, 4, 4),
    "64x256": _ms(64, 256, 16, 32, 64, 1, 8, 4, 3),
}

#: stage 9's (double_buffering) tiles timed by ``--sweep``: B staged through registers, 16
#: bytes a load along K when B is stored transposed (multistage's cp.async copies that B 4 bytes
#: at a time); the planner's tiles of the skinny (32 rows) and area classes (64, 128 rows)
SWEEP_DOUBLE = {
    "db32x128": _db(32, 128, 32, 32, 1, 8),
    "db32x256": _db(32, 256, 32, 64, 2, 8),
    "db64x128": _db(64, 128, 32, 64, 2, 8),
    "db64x128-tm4": _db(64, 128, 32, 64, 2, 4),
    "db128x128": _db(128, 128, 64, 64, 2, 8),
}
#: every configuration ``--sweep`` can time, by name
SWEEP_NAMES = (*SWEEP_CONFIGS, *SWEEP_SKINNY, *SWEEP_DOUBLE)


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


def _operands(
    K: int, N: int, sizes: list[int], seed: int, shared: bool = False, layout: str = "NN"
):
    """Tokens ``(T, K)``, the experts' matrices ``(E, K, N)`` (``layout`` ``"NT"``: the transposed
    view of ``(E, N, K)`` weights, ``x @ W_g.T``; ``shared``: one matrix, group stride 0: what a
    compile needs, at 1/E of the memory), end rows, an output ``(T, N)``."""
    import torch  # optional dependency: this tool compares with PyTorch

    g = torch.Generator(device="cuda").manual_seed(seed)
    T, E = sum(sizes), len(sizes)
    a = torch.randn(T, K, device="cuda", generator=g)
    shape = (1 if shared else E, K, N) if layout == "NN" else (1 if shared else E, N, K)
    w = torch.randn(*shape, device="cuda", generator=g) / K**0.5
    w = w if layout == "NN" else w.transpose(1, 2)
    ends = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
    return a, w.expand(E, K, N), ends, torch.empty(T, N, device="cuda")


def _mm_loop(a, w, c, sizes: list[int]):
    """A Python loop of ``torch.mm(a[rows of g], w[g], out=c[rows of g])`` over the non-empty
    groups: what a model without a grouped kernel runs."""
    import torch  # optional dependency: this tool compares with PyTorch

    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    pieces = [(e, s, n) for e, (s, n) in enumerate(zip(starts, sizes, strict=True)) if n]

    def loop():
        for e, s, n in pieces:
            torch.mm(a[s : s + n], w[e], out=c[s : s + n])

    return loop


def _case(layer: str, experts: int, mean: int, layout: str = "NN", seed: int = 0) -> dict:
    import torch  # optional dependency: this tool compares with PyTorch

    import numba_gemm
    from numba_gemm.tools.timing import time_calls_paired, time_launches

    torch.backends.cuda.matmul.allow_tf32 = False
    K, N = LAYERS[layer]
    sizes = group_sizes(experts, mean, seed)
    a, w, ends, c = _operands(K, N, sizes, seed, layout=layout)
    numba_gemm.grouped_mm(a, w, ends, out=c)
    torch.cuda.synchronize()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    groups = list(enumerate(zip(starts, sizes, strict=True)))
    want = torch.cat([a[s : s + n].double() @ w[e].double() for e, (s, n) in groups])
    err = float((c.double() - want).norm() / want.norm())
    calls = {
        "ours": lambda: numba_gemm.grouped_mm(a, w, ends, out=c),
        "loop": _mm_loop(a, w, c, sizes),
    }
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
        "layout": layout,
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

    layer, experts, mean, layout = case
    K, N = LAYERS[layer]
    a, w, ends, c = _operands(K, N, group_sizes(experts, mean), 0, shared=True, layout=layout)
    numba_gemm.grouped_mm(a, w, ends, out=c)  # (the even split: the same plan, T / E rows)
    torch.cuda.synchronize()
    return repr(case)


def _sweep_stage(name: str):
    """The stage of sweep configuration ``name`` (:data:`SWEEP_CONFIGS`, :data:`SWEEP_SKINNY`,
    :data:`SWEEP_DOUBLE`)."""
    from numba_gemm import get_stage

    if name in SWEEP_SKINNY:
        return get_stage("skinny").with_config(SWEEP_SKINNY[name])
    if name in SWEEP_DOUBLE:
        return get_stage("double_buffering").with_config(SWEEP_DOUBLE[name])
    return get_stage("multistage").with_config(SWEEP_CONFIGS[name])


def _sweep_runner(name: str, layout: str = "NN") -> object:
    """The grouped runner of sweep configuration ``name`` (128-bit variant) for ``layout`` on
    GPU 0; None where the configuration does not serve the layout."""
    from numba import cuda

    from numba_gemm import device
    from numba_gemm.launch.grouped import GroupedRunner

    stage = _sweep_stage(name)
    if layout not in stage.layouts:
        return None
    cuda.current_context()  # the primary context, current in this process (a fresh worker)
    return GroupedRunner(stage, layout, True, device.info(0))


def _sweep_warm(job: tuple) -> str:
    """Compile (into the kernel cache) sweep configuration ``job = (name, layout)``, or with
    ``job = (K, N, E, mean, layout)`` the automatic and the planner's runners of that problem."""
    if len(job) == 2:
        _sweep_runner(*job)  # (loading it compiles it into the kernel cache)
        return repr(job)
    # CUDA and the library's GPU modules in the worker only: the tool's --help needs neither
    from numba import cuda

    from numba_gemm import dispatch
    from numba_gemm.launch.grouped import GroupedRunner

    K, N, E, mean, layout = job
    cuda.current_context()
    T = sum(group_sizes(E, mean, seed=7))
    dispatch.grouped_runner(T, N, K, E, layout, True, 0)
    st, dev = dispatch.planned_grouped_stage(max(1, T // E), N, K, layout, 0)
    GroupedRunner(st, layout, True, dev)
    return repr(job)


def _sweep_rows(layout: str = "NN", names=None, means=SWEEP_MEANS):
    """One row per sweep problem (mean tokens ``means``): kernel ms of the automatic choice
    (``auto``), of the planner's tiles for the mean group (``planner``), of each configuration
    ``names`` (default all; None where its result differs from ``auto``'s, or it does not serve
    ``layout``) and of the loop."""
    import torch  # optional dependency: this tool compares with PyTorch

    from numba_gemm import dispatch
    from numba_gemm.arrays import operand
    from numba_gemm.launch.grouped import GroupedRunner
    from numba_gemm.tools.timing import time_launches

    torch.backends.cuda.matmul.allow_tf32 = False
    runners = {name: _sweep_runner(name, layout) for name in names or SWEEP_NAMES}
    for K, N in SWEEP_LAYERS:
        for E in SWEEP_EXPERTS:
            w = torch.randn(E, K, N, device="cuda") / K**0.5
            if layout == "NT":  # the experts' (N, K) weights, read transposed
                w = (torch.randn(E, N, K, device="cuda") / K**0.5).transpose(1, 2)
            for mean in means:
                sizes = group_sizes(E, mean, seed=7)
                T = sum(sizes)
                a, c = torch.randn(T, K, device="cuda"), torch.empty(T, N, device="cuda")
                ends = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
                ops = [operand(x) for x in (a, w, c, ends)]
                auto = dispatch.grouped_runner(T, N, K, E, layout, True, 0)
                st, dev = dispatch.planned_grouped_stage(max(1, T // E), N, K, layout, 0)
                planner = GroupedRunner(st, layout, True, dev)
                row = {"K": K, "N": N, "experts": E, "mean_tokens": mean, "layout": layout}
                row["sizes"] = sizes
                row["auto_config"] = dict(auto.stage.config)
                row["planner_config"] = dict(st.config)
                want = None
                for name, r in [("auto", auto), ("planner", planner), *runners.items()]:
                    if r is None:
                        row[name] = None
                        continue

                    def run(r=r, ops=ops):
                        r.run(*ops, 0)

                    c.fill_(float("nan"))
                    run()
                    want = c.clone() if want is None else want
                    ok = bool(torch.allclose(c, want, rtol=1e-4, atol=1e-4))
                    row[name] = time_launches(run, reps=15).median if ok else None
                row["loop"] = time_launches(_mm_loop(a, w, c, sizes), reps=15).median
                yield row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for grouped.jsonl")
    ap.add_argument(
        "--layers",
        default=",".join(f"{layer}:{e}" for layer, e in LAYER_EXPERTS),
        help=f"layer:experts pairs (layers: LAYERS' names; the held-out set: {HELDOUT})",
    )
    ap.add_argument(
        "--mean",
        type=lambda text: [int(m) for m in text.split(",")],
        help="mean tokens per expert, comma-separated (default: MEAN_TOKENS; with --sweep "
        "SWEEP_MEANS)",
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile workers")
    ap.add_argument(
        "--layout",
        default="NN",
        choices=("NN", "NT"),
        help="experts' weights (E, K, N) row-major, or (E, N, K) read transposed (x @ W_g.T)",
    )
    ap.add_argument(
        "--sweep",
        action="store_true",
        help="time SWEEP_CONFIGS, SWEEP_SKINNY and SWEEP_DOUBLE in --layout at SWEEP_MEANS "
        "(or --mean) tokens (sweep-<layout>.jsonl)",
    )
    ap.add_argument(
        "--configs",
        type=lambda text: text.split(","),
        help="with --sweep: only these configurations (names of SWEEP_CONFIGS, SWEEP_SKINNY, "
        "SWEEP_DOUBLE, comma-separated)",
    )
    args = ap.parse_args(argv)
    if args.sweep:
        names = args.configs or list(SWEEP_NAMES)
        unknown = [n for n in names if n not in SWEEP_NAMES]
        if unknown:
            ap.error(f"--configs: unknown {unknown}; known: {', '.join(SWEEP_NAMES)}")
        means = args.mean or list(SWEEP_MEANS)
        problems = [
            (K, N, E, mean, args.layout)
            for K, N in SWEEP_LAYERS
            for E in SWEEP_EXPERTS
            for mean in means
        ]
        jobs = [(name, args.layout) for name in names] + problems
        warm_in_workers(_sweep_warm, jobs, args.jobs)
        rows = _sweep_rows(args.layout, names, means)
        write_rows(args.out / f"sweep-{args.layout}.jsonl", rows)
        return 0
    pairs = [item.split(":") for item in args.layers.split(",")]
    cases = [
        (layer, int(e), m, args.layout) for layer, e in pairs for m in args.mean or MEAN_TOKENS
    ]
    warm_in_workers(_warm, cases, args.jobs)
    write_rows(args.out / "grouped.jsonl", (_case(*case) for case in cases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
