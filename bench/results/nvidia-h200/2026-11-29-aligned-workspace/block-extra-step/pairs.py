import json, math, sys
from pathlib import Path
from numba_gemm.plan import cost, tuning
from numba_gemm.device import cdiv
U = float(sys.argv[1])
orig = cost.estimate_ms
def est(cand, M, N, K, sms, aligned=True, scalar_factor=1.0, batch=1, splits=None, layout="NN"):
    st, cfg = cost.stage_of(cand), cand["config"]
    Mr, Nr, Kr = cand["shape"]; Br = cand.get("batch", 1)
    s = cfg.get("SPLITK", 1); s_new = s if splits is None else splits
    ms, bps = cost._variant(cand, aligned, scalar_factor, layout)
    bm, bn, bk = st.block(cfg)
    def work(m, n, k, b, s):
        blocks = cdiv(m, bm) * cdiv(n, bn) * s * b
        kt = cdiv(cdiv(k, s), bk) + U
        if blocks < sms * bps:
            per_sm = cdiv(blocks, sms)
            return per_sm * kt / cost.sm_rate(per_sm)
        return cdiv(blocks, sms * bps) * bps * kt / cost.sm_rate(bps)
    main = max(float(ms) - cost.reduce_ms(s, Mr, Nr, cfg, st), 0.1 * float(ms))
    return main * work(M, N, K, batch, s_new) / work(Mr, Nr, Kr, Br, s) + cost.reduce_ms(s_new, M, N, cfg, st)
data = json.loads((Path(tuning.__file__).parents[1] / "tuning" / "sm_90.json").read_text())
shapes = data["gpus"]["NVIDIA H200"]["shapes"]
seen = {}
for rec in shapes:
    if rec.get("layout", "NN") != "NN" or not rec["aligned"]:
        continue
    for c in rec["candidates"]:
        if c["stage"] in ("double_buffering", "multistage", "warptiling") and c["config"].get("SPLITK"):
            key = (c["stage"], json.dumps(c["config"], sort_keys=True))
            seen.setdefault(key, []).append(dict(c, shape=rec["shape"]))
errs = [abs(math.log(b["ms"] / est(a, *b["shape"], sms=132))) for r in seen.values() for a in r for b in r if a is not b]
print(f"U={U} pairs {len(errs)} within10 {sum(e<math.log(1.1) for e in errs)/len(errs):.3f} within25 {sum(e<math.log(1.25) for e in errs)/len(errs):.3f}")
# splits-after fit rows: candidate from the deep class (db 64x128 MINB1; ms 64x128 NBUF2)
cl = data["gpus"]["NVIDIA H200"]["classes"]["deep"]
def find(stage, want):
    for r in [cl[stage]] + cl[stage].get("alternatives", []):
        c = r["config"]
        if all(c.get(k) == v for k, v in want.items()):
            return dict(r, stage=stage)
db = find("double_buffering", {"BM":64,"BN":128,"MINB":1,"TM":8})
ms_ = find("multistage", {"BM":64,"BN":128,"NBUF":2,"TM":8,"WM":64})
rows = [json.loads(l) for l in open(sys.argv[2])]
le=[]
for r in rows:
    M,N,K = r["shape"]
    if (M,N,K) in ((220,99,3902),(277,83,5105)): continue
    cand = db if r["stage"]=="double_buffering" else ms_
    al = N%4==0 and K%4==0
    p = est(cand, M, N, K, 132, aligned=al, scalar_factor=1.2, splits=r["splitk"], layout=r["layout"])
    le.append(math.log(r["ms"]/p))
print(f"   fit rows {len(le)}: measured/price geomean {math.exp(sum(le)/len(le)):.3f}, within25 {sum(abs(x)<math.log(1.25) for x in le)/len(le):.2f}")
