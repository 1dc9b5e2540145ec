"""GEMV probe (products constructed here, of no held-out set): the cost model's top candidates
timed (kernel, CUDA events, autotune.time_plan) with this process's tree, and torch.mm.
Usage: gemv.py OUT.jsonl TAG [cublas]"""
import json, os, sys, time
from numba_gemm.device import info
from numba_gemm.kernels.stage import variant_key
from numba_gemm.plan.autotune import _variant, time_plan
from numba_gemm.plan.choose import make_plan, ranked
from numba_gemm.plan.geometry import Alignment, Geometry

TOP = 10
ALL = [
    # B transposed, K not a multiple of 4 (scalar), and the aligned twin (K + 4 - K % 4)
    (1, 4096, 4097, "NT"), (1, 4096, 4100, "NT"),
    (1, 1000, 4099, "NT"), (1, 1000, 4100, "NT"),
    (1, 11008, 4099, "NT"), (1, 11008, 4100, "NT"),
    (1, 4096, 11003, "NT"), (1, 4096, 11004, "NT"),
    (1, 3001, 2051, "NT"), (1, 3004, 2052, "NT"),
    (4, 3001, 4099, "NT"), (4, 3004, 4100, "NT"),
    (8, 4096, 4097, "NT"), (8, 4096, 4100, "NT"),
    (16, 5000, 3001, "NT"), (16, 5000, 3004, "NT"),
    # B row-major, N not a multiple of 4, and the twin
    (1, 4097, 4096, "NN"), (1, 4100, 4096, "NN"),
    (1, 3001, 4099, "NN"), (1, 3004, 4099, "NN"),
    (1, 11003, 2048, "NN"), (1, 11004, 2048, "NN"),
    (1, 301, 9001, "NN"), (1, 304, 9001, "NN"),
]

import os
PRODUCTS = [p for p in ALL if not os.environ.get('ONLY_NT_SCALAR') or (p[3] == 'NT' and p[2] % 4)]


def todo(dev):
    out = []
    for M, N, K, lay in PRODUCTS:
        g = Geometry.dense(M, N, K, lay)
        aligned = g.alignment(Alignment.ALL) == Alignment.ALL
        for rank, (ms, st, where) in enumerate(ranked(g, aligned, dev, "fp32", Alignment.ALL)[:TOP]):
            out.append((g, rank, ms, st, _variant(st, g, aligned, Alignment.ALL), where))
    return out


if __name__ == "__main__":
    import torch
    from numba_gemm.tools import precompile as pc
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = info(0)
    t = todo(dev)
    jobs = {}
    for g, rank, ms, st, v, where in t:
        j = pc.Job(st.name, tuple(sorted(dict(st.config).items())), variant_key(v, g.layout), dev.cc)
        jobs[str(j)] = j
    t0 = time.monotonic()
    res = pc.run(list(jobs.values()), 16)
    print(f"compiled {len(res)} in {time.monotonic()-t0:.0f} s", flush=True)
    out = open(sys.argv[1], "a")
    tag = sys.argv[2]
    cub = {}
    for g, rank, ms, st, v, where in t:
        key = (g.M, g.N, g.K, g.layout)
        if key not in cub and len(sys.argv) > 3:
            a = torch.randn(g.M, g.K, device="cuda")
            b = torch.randn(g.N, g.K, device="cuda").t() if g.layout == "NT" else torch.randn(g.K, g.N, device="cuda")
            c = torch.empty(g.M, g.N, device="cuda")
            torch.mm(a, b, out=c); torch.cuda.synchronize()
            best = 1e9
            for calls in (1, 50, 50, 50, 50, 50):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(calls):
                    torch.mm(a, b, out=c)
                e1.record(); e1.synchronize()
                if calls > 1:
                    best = min(best, e0.elapsed_time(e1) / calls)
            cub[key] = best
            del a, b, c
        plan = make_plan(g, st, v, dev, ms, "probe")
        try:
            t_ms, bps = time_plan(plan)
        except Exception as e:
            print("fail", key, st.name, e, flush=True); continue
        row = dict(tag=tag, shape=[g.M, g.N, g.K], layout=g.layout, rank=rank, stage=st.name,
                   config=dict(st.config), variant=v, predicted_ms=ms, ms=t_ms, blocks_per_sm=bps,
                   cublas_ms=cub.get(key), split=plan.split_k, grid=list(plan.grid), where=str(where))
        print(json.dumps(row), file=out, flush=True)
