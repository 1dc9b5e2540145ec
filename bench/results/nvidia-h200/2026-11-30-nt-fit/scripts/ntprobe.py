"""Training probe for aligned `x @ W.T` products (made up here, of no held-out set): projection-
like shapes drawn from a fixed training seed; the cost model's first TOP candidates
(choose.ranked) timed with autotune.time_plan (kernel, CUDA events), and torch.mm (cuBLAS FP32,
TF32 off). One JSON line per candidate. Usage: ntprobe.py count|OUT.jsonl [SEED] [COUNT]"""
import json, math, random, sys, time
from numba_gemm.device import DeviceInfo, info
from numba_gemm.kernels.stage import variant_key
from numba_gemm.plan.autotune import _variant, time_plan
from numba_gemm.plan.choose import make_plan, ranked
from numba_gemm.plan.geometry import Alignment, Geometry

TOP = 12
H200 = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227 * 1024)


def products(seed=101, count=40):
    """M log-uniform in [24, 3072] (a multiple of 8), N in [1536, 32768] and K in [1536, 16384]
    (multiples of 64), layout NT, at most 2^37 multiply-adds."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        lu = lambda lo, hi, m: max(m, int(round(math.exp(rng.uniform(math.log(lo), math.log(hi))) / m)) * m)
        M, N, K = lu(24, 3072, 8), lu(1536, 32768, 64), lu(1536, 16384, 64)
        if M * N * K <= 2**37:
            out.append((M, N, K))
    return out


def todo(dev, seed, count):
    out = []
    for M, N, K in products(seed, count):
        g = Geometry.dense(M, N, K, "NT")
        for rank, (ms, st, where) in enumerate(ranked(g, True, dev, "fp32", Alignment.ALL)[:TOP]):
            out.append((g, rank, ms, st, _variant(st, g, True, Alignment.ALL), where))
    return out


if __name__ == "__main__":
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 101
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    if sys.argv[1] == "count":
        t = todo(H200, seed, count)
        ks = {(st.name, tuple(sorted(dict(st.config).items())), variant_key(v, g.layout)) for g, r, ms, st, v, w in t}
        print(len(t), "timings", len({(g.M, g.N, g.K) for g, *_ in t}), "products", len(ks), "kernels")
        sys.exit()
    import torch
    from numba_gemm.tools import precompile as pc
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = info(0)
    t = todo(dev, seed, count)
    jobs = {}
    for g, rank, ms, st, v, where in t:
        j = pc.Job(st.name, tuple(sorted(dict(st.config).items())), variant_key(v, g.layout), dev.cc)
        jobs[str(j)] = j
    t0 = time.monotonic()
    res = pc.run(list(jobs.values()), 16)
    print(f"compiled {len(res)} in {time.monotonic()-t0:.0f} s", flush=True)
    out = open(sys.argv[1], "a")
    cub = {}
    for g, rank, ms, st, v, where in t:
        key = (g.M, g.N, g.K, g.layout)
        if key not in cub:
            a = torch.randn(g.M, g.K, device="cuda")
            b = torch.randn(g.N, g.K, device="cuda").t()
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
        row = dict(seed=seed, shape=[g.M, g.N, g.K], layout=g.layout, rank=rank, stage=st.name,
                   config=dict(st.config), variant=v, predicted_ms=ms, ms=t_ms, blocks_per_sm=bps,
                   cublas_ms=cub[key], split=plan.split_k, grid=list(plan.grid), where=where)
        print(json.dumps(row), file=out, flush=True)
