"""Training probe of staging (no held-out set): for the products of training seeds (heldout_random's
generator, seeds 1..) whose rows force a scalar kernel, time plan_for's unstaged pick and the
staged alternative (copies + the aligned plan of the padded shape), beside torch.mm.
usage: stage_probe.py plan|run SEEDS OUT.jsonl"""

import json, sys
from numba_gemm.device import DeviceInfo, info
from numba_gemm.plan import choose, staging
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools.bench.sizes import heldout_random

H200 = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227 * 1024)


def pairs(seeds, dev):
    out = []
    for s in seeds:
        for M, N, K, lay in heldout_random(40, seed=s):
            if M * N * K < 2**27:
                continue
            g = Geometry.dense(M, N, K, lay)
            p = choose.plan_for(M, N, K, geometry=g, alignment=2, device=dev)
            if p.variant == "vector" and p.inner is None:
                continue  # aligned rows: nothing to stage
            if p.inner is not None:  # staged already: the scalar alternative is the other side
                alt = choose._choose(g, None, False, dev, "fp32", False, None)
                out.append((s, g, p, choose.make_plan(g, alt[0], "scalar", dev, alt[1], "probe")))
                continue
            if lay[0] != "N":
                continue
            st = staging.staging_for(
                M, N, K
            )  # forced: feasible() would refuse where not priced alike
            inner = choose.plan_for(
                M, st.N4, st.K4, device=dev, geometry=Geometry.dense(M, st.N4, st.K4, lay)
            )
            out.append((s, g, choose.staged_plan(M, N, K, st, inner, p.predicted_ms), p))
    return out


if __name__ == "__main__":
    seeds = [int(x) for x in sys.argv[2].split(",")]
    if sys.argv[1] == "plan":
        for s, g, staged, plain in pairs(seeds, H200):
            print(
                g.M,
                g.N,
                g.K,
                g.layout,
                f"staged {staged.predicted_ms:.3f} ({staged.inner.stage.name})",
                f"plain {plain.predicted_ms or 0:.3f} ({plain.stage.name} {plain.variant})",
            )
        sys.exit()
    import time, torch
    from numba_gemm.plan.autotune import time_plan
    from numba_gemm.kernels.stage import variant_key
    from numba_gemm.tools import precompile as pc

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = info(0)
    todo = pairs(seeds, dev)
    jobs = {}
    for s, g, staged, plain in todo:
        for p in (staged.inner, plain):
            j = pc.Job(
                p.stage.name,
                tuple(sorted(dict(p.stage.config).items())),
                variant_key(p.variant, p.geometry.layout),
                dev.cc,
            )
            jobs[str(j)] = j
    t0 = time.monotonic()
    res = pc.run(list(jobs.values()), 16)
    print(f"compiled {len(res)} in {time.monotonic() - t0:.0f} s", flush=True)
    out = open(sys.argv[3], "a")
    for s, g, staged, plain in todo:
        row = dict(seed=s, shape=[g.M, g.N, g.K], layout=g.layout)
        a = torch.randn(g.M, g.K, device="cuda")
        b = (
            torch.randn(g.N, g.K, device="cuda").t()
            if g.layout == "NT"
            else torch.randn(g.K, g.N, device="cuda")
        )
        c = torch.empty(g.M, g.N, device="cuda")
        torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        best = 1e9
        for calls in (1, 5, 5, 5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(calls):
                torch.mm(a, b, out=c)
            e1.record()
            e1.synchronize()
            if calls > 1:
                best = min(best, e0.elapsed_time(e1) / calls)
        row["cublas_ms"] = best
        del a, b, c
        for name, p in (("staged", staged), ("plain", plain)):
            try:
                ms, _ = time_plan(p)
            except Exception as e:
                ms = None
                row[name + "_error"] = f"{type(e).__name__}: {e}"
            row[name] = dict(
                ms=ms,
                predicted_ms=p.predicted_ms,
                stage=p.stage.name,
                variant=p.variant,
                config=dict(p.stage.config),
            )
        print(json.dumps(row), file=out, flush=True)
