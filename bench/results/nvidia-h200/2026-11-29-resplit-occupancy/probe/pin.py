"""Occupancy of re-split kernels: natural (MINB 0) against pinned (MINB = the unsplit
kernel's blocks an SM), at shapes of no held-out set; each loaded kernel's blocks an SM."""
import json, sys
import numpy as np
from numba_gemm.kernels import get_stage
from numba_gemm.kernels.stage import variant_key
from numba_gemm.tools import check
from numba_gemm.tools.tune import Problem, evaluate, compile_ahead, occupancy

MSA = {'BK': 16, 'BM': 64, 'BN': 128, 'NBUF': 2, 'TM': 8, 'TN': 4, 'WM': 32, 'WN': 64, 'WNITER': 2}
MSB = {'BK': 16, 'BM': 64, 'BN': 128, 'NBUF': 2, 'TM': 8, 'TN': 4, 'WM': 64, 'WN': 32, 'WNITER': 2}
DB1 = {'BK': 16, 'BM': 64, 'BN': 128, 'TM': 4, 'TN': 4, 'WM': 32, 'WN': 64, 'WNITER': 2}
CASES = [  # stage, cfg, layout, shape, splits, MINBs
    ("multistage", MSA, "NT", (48, 3584, 7168), [8, 12, 16], [0, 3]),
    ("multistage", MSA, "NT", (40, 2560, 10240), [16, 24], [0, 3]),
    ("multistage", MSA, "NT", (1152, 2304, 3072), [1], [0, 3]),
    ("multistage", MSA, "NT", (2048, 4096, 2048), [1], [0, 3]),
    ("multistage", MSA, "NT", (256, 4096, 4096), [1, 4], [0, 3]),
    ("multistage", MSB, "NT", (48, 3584, 7168), [12, 16], [0, 3]),
    ("multistage", MSA, "NN", (48, 3584, 7168), [12, 16], [0, 3]),
    ("double_buffering", DB1, "NT", (48, 3584, 7168), [12, 16], [0, 4]),
    ("double_buffering", DB1, "NT", (256, 4096, 4096), [1, 4], [0, 4]),
]
if __name__ == "__main__":
    todo = {}
    for s, cfg, lay, (M, N, K), sp, mb in CASES:
        var = "vector" if (N % 4 == 0 and K % 4 == 0) else "scalar"
        todo.setdefault((s, variant_key(var, lay)), []).extend(
            dict(cfg, SPLITK=x, MINB=b) for x in sp for b in mb)
    for (s, vk), cfgs in todo.items():
        compile_ahead(s, cfgs, (9, 0), 16, vk)
    blas = check.blas_library("auto")
    rng = np.random.default_rng(11)
    out = open(sys.argv[1], "w")
    for rnd in range(2):
        for s, cfg, lay, (M, N, K), sp, mb in CASES:
            prob = Problem(M, N, K, rng, blas)
            for x in sp:
                for b in mb:
                    st = get_stage(s).with_config(dict(cfg, SPLITK=x, MINB=b))
                    t = evaluate(st, prob, 20, 3, layout=lay)
                    bps = occupancy(st, prob, True, lay)
                    row = dict(round=rnd, stage=s, cfg=cfg, layout=lay, shape=[M, N, K], splitk=x, minb=b, bps=bps, ms=t.get("ms"), err=t.get("error"))
                    print(json.dumps(row), file=out, flush=True)
                    print(f"{rnd} {s[:6]} WM{cfg['WM']} {lay} {M}x{N}x{K} S={x:2d} MINB={b} bps={bps}: {1e3*(t.get('ms') or 0):8.1f} us {t.get('error') or ''}", flush=True)
