"""Lone-block times against co-resident ones: narrow_n's multistage 64 x 128 tile (NBUF 3, MINB 1),
timed unsplit at 64-384 blocks (N = 128, K = 4096), and re-split at a product of no held-out
set, beside double_buffering's 128 x 128 split twin; vector kernels, NN, aligned rows."""
import json, sys
from numba_gemm.device import info
from numba_gemm.kernels import get_stage
from numba_gemm.plan.autotune import time_plan
from numba_gemm.plan.choose import make_plan
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools.tune import compile_ahead

MS = dict(BK=16, BM=64, BN=128, MINB=1, NBUF=3, SPLITK=1, TM=4, TN=8, WM=64, WN=32, WNITER=2)
DB = dict(BK=16, BM=128, BN=128, MINB=2, SPLITK=16, TM=4, TN=4, WM=64, WN=32, WNITER=2)
RUNS = [("multistage", MS, (m, 128, 4096)) for m in (4096, 8192, 16384, 25344)]
RUNS += [("multistage", dict(MS, SPLITK=s), (960, 256, 6144)) for s in (1, 4, 12)]
RUNS += [("double_buffering", dict(DB, SPLITK=s), (960, 256, 6144)) for s in (1, 4, 16)]
if __name__ == "__main__":
    dev = info(0)
    for name in ("multistage", "double_buffering"):
        cfgs = [c for n, c, _ in RUNS if n == name]
        cfgs = [dict(t) for t in {tuple(sorted(c.items())) for c in cfgs}]
        compile_ahead(name, cfgs, dev.cc, 16, "vector")
    out = open(sys.argv[1], "w")
    for name, cfg, (M, N, K) in RUNS:
        st = get_stage(name).with_config(cfg)
        plan = make_plan(Geometry.plain(M, N, K), st, "vector", dev, None, "probe")
        ms, bps = time_plan(plan)
        grid = plan.grid[0] * plan.grid[1] * plan.grid[2]
        row = dict(stage=name, config=cfg, shape=[M, N, K], ms=ms, blocks_per_sm=bps, blocks=grid)
        print(json.dumps(row), file=out, flush=True)
        print(name, cfg["SPLITK"], M, N, K, f"{ms * 1e3:.1f} us", bps, grid, flush=True)
