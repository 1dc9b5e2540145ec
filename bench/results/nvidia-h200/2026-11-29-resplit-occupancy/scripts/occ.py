"""Blocks an SM of every stored multistage / double_buffering class or measured-shape
configuration re-split to 8 slices without launch bounds (MINB 0), vector and scalar, B
row-major and transposed, as the driver loads them; and pinned (MINB = the most blocks an SM
its variant's stored kernels reached) where that bound binds."""
import json, sys, time
import numpy as np
from numba_gemm.kernels import get_stage
from numba_gemm.kernels.stage import variant_key
from numba_gemm.tools import check
from numba_gemm.tools.tune import Problem, compile_ahead, occupancy

if __name__ == "__main__":
    stored = json.load(open(".gpu/stored.json"))
    todo = [(n, c, v) for n, c, v in stored if n in ("multistage", "double_buffering")]
    forms = [(v, lay) for v in ("vector", "scalar") for lay in ("NN", "NT")]
    for name in ("multistage", "double_buffering"):
        cfgs = [dict(c, SPLITK=8, MINB=0) for n, c, _ in todo if n == name]
        for v, lay in forms:
            compile_ahead(name, cfgs, (9, 0), 16, variant_key(v, lay))
    blas = check.blas_library("auto")
    rng = np.random.default_rng(3)
    out = open(sys.argv[1], "w")
    for name, cfg, where in todo:
        st = get_stage(name).with_config(dict(cfg, SPLITK=8, MINB=0))
        bm, bn, _ = st.block()
        prob = Problem(2 * bm + 1, 2 * bn + 1, 8 * 16 * 8 + 3, rng, blas)
        row = dict(stage=name, config=cfg, stored=where)
        for v, lay in forms:
            try:
                row[f"{v}-{lay}"] = occupancy(st, prob, v == "vector", lay)
            except Exception as e:  # noqa: BLE001
                row[f"{v}-{lay}"] = f"{type(e).__name__}: {e}"[:120]
        print(json.dumps(row), file=out, flush=True)
