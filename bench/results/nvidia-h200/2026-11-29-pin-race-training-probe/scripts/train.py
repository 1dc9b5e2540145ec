"""Training probe (no held-out set): for random products of training seeds (heldout_random's
generator, seeds 1..), time the cost model's top candidates (choose.ranked) and torch.mm; one
JSON line per candidate with its predicted and measured ms."""
import json, sys, time
from numba_gemm.device import DeviceInfo, info
from numba_gemm.kernels.stage import variant_key
from numba_gemm.plan.autotune import _variant, time_plan
from numba_gemm.plan.choose import make_plan, ranked
from numba_gemm.plan.geometry import Alignment, Geometry
from numba_gemm.tools.bench.sizes import heldout_random

TOP = 8
H200 = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227 * 1024)


def todo(seeds, dev):
    out = []
    for s in seeds:
        for M, N, K, lay in heldout_random(40, seed=s):
            if M * N * K < 2**27:
                continue
            g = Geometry.dense(M, N, K, lay)
            aligned = g.alignment(Alignment.ALL) == Alignment.ALL
            for rank, (ms, st, where) in enumerate(ranked(g, aligned, dev, "fp32", Alignment.ALL)[:TOP]):
                out.append((s, g, rank, ms, st, _variant(st, g, aligned, Alignment.ALL)))
    return out


if __name__ == "__main__":
    seeds = [int(x) for x in sys.argv[2].split(",")]
    if sys.argv[1] == "count":
        t = todo(seeds, H200)
        ks = {(st.name, tuple(sorted(dict(st.config).items())), variant_key(v, g.layout)) for *_, g, r, ms, st, v in [(x[0], x[1], x[2], x[3], x[4], x[5]) for x in t]}
        print(len(t), "timings", len({(x[1].M, x[1].N, x[1].K) for x in t}), "products", len(ks), "kernels")
        sys.exit()
    from numba_gemm.tools import precompile as pc
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = info(0)
    t = todo(seeds, dev)
    jobs = {}
    for s, g, rank, ms, st, v in t:
        j = pc.Job(st.name, tuple(sorted(dict(st.config).items())), variant_key(v, g.layout), dev.cc)
        jobs[str(j)] = j
    t0 = time.monotonic()
    res = pc.run(list(jobs.values()), 16)
    print(f"compiled {len(res)} in {time.monotonic()-t0:.0f} s", flush=True)
    out = open(sys.argv[3], "a")
    cub = {}
    for s, g, rank, ms, st, v in t:
        key = (g.M, g.N, g.K, g.layout)
        if key not in cub:
            a = torch.randn(g.M, g.K, device="cuda")
            b = torch.randn(g.N, g.K, device="cuda").t() if g.layout == "NT" else torch.randn(g.K, g.N, device="cuda")
            c = torch.empty(g.M, g.N, device="cuda")
            torch.mm(a, b, out=c); torch.cuda.synchronize()
            best = 1e9
            for calls in (1, 5, 5, 5):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(calls):
                    torch.mm(a, b, out=c)
                e1.record(); e1.synchronize()
                if calls > 1:
                    best = min(best, e0.elapsed_time(e1) / calls)
            cub[key] = best
            del a, b, c
        plan = make_plan(g, st, v, dev, ms, "train")
        try:
            t_ms, bps = time_plan(plan)
        except Exception as e:
            print("fail", key, st.name, e, flush=True); continue
        row = dict(seed=s, shape=[g.M, g.N, g.K], layout=g.layout, rank=rank, stage=st.name,
                   config=dict(st.config), variant=v, predicted_ms=ms, ms=t_ms, blocks_per_sm=bps,
                   cublas_ms=cub[key], split=plan.split_k, grid=list(plan.grid))
        print(json.dumps(row), file=out, flush=True)
