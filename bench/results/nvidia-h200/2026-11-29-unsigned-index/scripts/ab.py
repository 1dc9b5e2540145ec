"""A/B of kernel code (no planner change): plan_for's pick for the training seeds' products
(heldout_random's generator, seeds given) of at least 2^27 MACs whose pick runs a scalar or
vector_loads variant, unstaged; precompiled, then timed with autotune.time_plan.
usage: ab.py SEEDS TAG OUT.jsonl PASSES"""

import json, sys, time
from numba_gemm.device import info
from numba_gemm.kernels.stage import variant_key
from numba_gemm.plan import choose
from numba_gemm.plan.autotune import time_plan
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools import precompile as pc
from numba_gemm.tools.bench.sizes import heldout_random

if __name__ == "__main__":
    seeds = [int(x) for x in sys.argv[1].split(",")]
    tag, out, passes = sys.argv[2], open(sys.argv[3], "a"), int(sys.argv[4])
    dev = info(0)
    todo = []
    for s in seeds:
        for M, N, K, lay in heldout_random(40, seed=s):
            if M * N * K < 2**27:
                continue
            p = choose.plan_for(
                M, N, K, geometry=Geometry.dense(M, N, K, lay), alignment=2, device=dev
            )
            if p.inner is None and p.variant != "vector":
                todo.append((s, p))
    jobs = {}
    for s, p in todo:
        j = pc.Job(
            p.stage.name,
            tuple(sorted(dict(p.stage.config).items())),
            variant_key(p.variant, p.geometry.layout),
            dev.cc,
        )
        jobs[str(j)] = j
    t0 = time.monotonic()
    pc.run(list(jobs.values()), 16)
    print(
        f"{tag}: compiled {len(jobs)} in {time.monotonic() - t0:.0f} s, {len(todo)} products",
        flush=True,
    )
    for i in range(passes):
        for s, p in todo:
            g = p.geometry
            ms, bps = time_plan(p)
            print(
                json.dumps(
                    dict(
                        tag=tag,
                        rep=i,
                        seed=s,
                        shape=[g.M, g.N, g.K],
                        layout=g.layout,
                        stage=p.stage.name,
                        variant=p.variant,
                        config=dict(p.stage.config),
                        ms=ms,
                        predicted_ms=p.predicted_ms,
                    )
                ),
                file=out,
                flush=True,
            )
