"""Split-K cost at small products: one tile configuration at splits 1..32, scalar and vector
twins, and one slice's depth unsplit (the main loop alone). Run on the GPU host from the
repository root: ``python splits.py OUT.jsonl [before]``."""

import json
import sys

import numpy as np
from numba_gemm.kernels import get_stage
from numba_gemm.kernels.stage import variant_key
from numba_gemm.tools import check
from numba_gemm.tools.tune import Problem, evaluate, compile_ahead

DB = {"BK": 16, "BM": 64, "BN": 128, "MINB": 1, "TM": 8, "TN": 4, "WM": 32, "WN": 64, "WNITER": 2}
MS = {
    "BK": 16,
    "BM": 64,
    "BN": 128,
    "MINB": 0,
    "NBUF": 2,
    "TM": 8,
    "TN": 4,
    "WM": 64,
    "WN": 32,
    "WNITER": 2,
}
SPLITS = [1, 2, 4, 8, 12, 16, 24, 32]
BEFORE = [  # the first call (splits-before.jsonl, the committed tree of 05da014)
    ("double_buffering", DB, "NT", (220, 99, 3902), SPLITS),
    ("double_buffering", DB, "NT", (220, 100, 3904), SPLITS),
    ("double_buffering", DB, "NT", (220, 99, 163), [1]),
    ("double_buffering", DB, "NT", (220, 100, 164), [1]),
    ("multistage", MS, "NN", (277, 83, 5105), SPLITS),
    ("multistage", MS, "NN", (277, 84, 5108), SPLITS),
    ("multistage", MS, "NN", (277, 83, 213), [1]),
    ("multistage", MS, "NN", (277, 84, 216), [1]),
]
# the second call (splits-after.jsonl, the aligned workspace)
AFTER = [  # stage, cfg, layout, shape, splits
    ("double_buffering", DB, "NT", (220, 99, 3902), [8, 16, 24, 32]),
    ("multistage", MS, "NN", (277, 83, 5105), [8, 16, 24, 32]),
    # fit shapes (no held-out set): 4, 6 and 18 tiles of 64 x 128
    ("double_buffering", DB, "NN", (128, 256, 8192), SPLITS),
    ("multistage", MS, "NN", (128, 256, 8192), SPLITS),
    ("double_buffering", DB, "NN", (130, 250, 5001), SPLITS),
    ("multistage", MS, "NN", (130, 250, 5001), SPLITS),
    ("double_buffering", DB, "NN", (384, 384, 6144), [1, 2, 4, 8, 16, 24]),
    ("multistage", MS, "NN", (384, 384, 6144), [1, 2, 4, 8, 16, 24]),
    ("double_buffering", DB, "NN", (128, 256, 256), [1]),
    ("double_buffering", DB, "NN", (128, 256, 1024), [1]),
    ("multistage", MS, "NN", (128, 256, 256), [1]),
    ("multistage", MS, "NN", (128, 256, 1024), [1]),
]
if __name__ == "__main__":
    CASES = BEFORE if sys.argv[2:] == ["before"] else AFTER
    todo = {}
    for s, cfg, lay, (M, N, K), sp in CASES:
        var = "vector" if (N % 4 == 0 and K % 4 == 0) else "scalar"
        todo.setdefault((s, variant_key(var, lay)), []).extend(dict(cfg, SPLITK=x) for x in sp)
    for (s, vk), cfgs in todo.items():
        compile_ahead(s, cfgs, (9, 0), 16, vk)
    blas = check.blas_library("auto")
    rng = np.random.default_rng(7)
    out = open(sys.argv[1], "w")
    for s, cfg, lay, (M, N, K), sp in CASES:
        prob = Problem(M, N, K, rng, blas)
        for x in sp:
            st = get_stage(s).with_config(dict(cfg, SPLITK=x))
            t = evaluate(st, prob, 20, 3, layout=lay)
            row = dict(
                stage=s, layout=lay, shape=[M, N, K], splitk=x, ms=t.get("ms"), err=t.get("error")
            )
            print(json.dumps(row), file=out, flush=True)
            print(
                f"{s[:6]} {lay} {M}x{N}x{K} S={x:2d}: {1e3 * (t.get('ms') or 0):8.1f} us {t.get('error') or ''}",
                flush=True,
            )
