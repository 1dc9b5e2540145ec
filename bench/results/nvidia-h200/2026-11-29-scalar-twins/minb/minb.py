"""Scalar twins of the stored class candidates that run fewer blocks an SM than their vector
kernel: timed as stored and with MINB raised to the vector kernel's blocks an SM (launch bounds),
in one process; vector kernels with the raised MINB too. Layouts NN and NT."""
import json, sys
import numpy as np
from numba_gemm.plan import tuning
from numba_gemm.kernels import get_stage
from numba_gemm.tools import check
from numba_gemm.tools.tune import Problem, evaluate, occupancy, compile_ahead
from numba_gemm.kernels.stage import variant_key

if __name__ == "__main__":
    data = json.load(open("numba_gemm/tuning/sm_90.json"))
    cl = data["gpus"]["NVIDIA H200"]["classes"]
    spec_of = {c.name: c for c in tuning.CLASSES}
    todo = []
    for c, v in cl.items():
        if c == "batched":
            continue
        for s in ("multistage", "double_buffering", "warptiling"):
            if s not in v:
                continue
            for r in [v[s]] + v[s].get("alternatives", []):
                for lay, kb, kbs in (("NN", "blocks_per_sm", "blocks_per_sm_scalar"),
                                     ("NT", "blocks_per_sm_nt", "blocks_per_sm_scalar_nt")):
                    b, bs = r.get(kb), r.get(kbs)
                    if b and bs and bs < b and b > r["config"]["MINB"]:
                        todo.append((c, s, lay, r["config"], dict(r["config"], MINB=b)))
    print(len(todo), "cases", file=sys.stderr)
    for s in ("multistage", "double_buffering", "warptiling"):
        for lay in ("NN", "NT"):
            cfgs = [x[i] for x in todo if x[1] == s and x[2] == lay for i in (3, 4)]
            if cfgs:
                compile_ahead(s, cfgs, (9, 0), 16, variant_key("scalar", lay))
    blas = check.blas_library("auto")
    rng = np.random.default_rng(7)
    probs = {}
    out = open(sys.argv[1], "w")
    for c, s, lay, cfg0, cfg1 in todo:
        M, N, K = spec_of[c].shape
        if c not in probs:
            probs[c] = Problem(max(M - 1, 1), max(N - 1, 1), max(K - 1, 1), rng, blas)
        twin = probs[c]
        row = {"class": c, "stage": s, "layout": lay, "config": cfg0, "minb": cfg1["MINB"]}
        for tag, cfg in (("as_stored", cfg0), ("raised", cfg1)):
            st = get_stage(s).with_config(cfg)
            t = evaluate(st, twin, 10, 2, layout=lay)
            row[tag] = t["ms"] if t["ok"] else None
            row[tag + "_blocks"] = occupancy(st, twin, False, lay) if t["ok"] else None
        print(json.dumps(row), file=out, flush=True)
        r = (row["raised"] or 0) / (row["as_stored"] or 1)
        print(f"{c:9s} {s[:6]} {lay} {cfg0['BM']}x{cfg0['BN']}x{cfg0['BK']} s{cfg0['SPLITK']} MINB {cfg0['MINB']}->{cfg1['MINB']}: "
              f"{row['as_stored']:.4f} ({row['as_stored_blocks']}) -> {row['raised']:.4f} ({row['raised_blocks']})  x{r:.3f}", flush=True)
