import json, math
from pathlib import Path
from numba_gemm.plan import tuning, cost
from numba_gemm.plan.cost import estimate_ms
from numba_gemm.device import cdiv
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
def est_tail(cand, M, N, K, sms=132):
    st = cost.stage_of(cand); cfg = cand["config"]
    Mr, Nr, Kr = cand["shape"]; s = cfg.get("SPLITK", 1)
    ms, bps = float(cand["ms"]), max(1, int(cand.get("blocks_per_sm", 1)))
    bm, bn, bk = st.block(cfg)
    def work(m, n, k):
        blocks = cdiv(m, bm) * cdiv(n, bn) * s
        kt = cdiv(cdiv(k, s), bk)
        full, rest = divmod(blocks, sms * bps)
        w = full * bps * kt / cost.sm_rate(bps)
        if rest:
            side = cdiv(rest, sms)
            w += side * kt / cost.sm_rate(side)
        return w
    main = max(ms - cost.reduce_ms(s, Mr, Nr, cfg, st), 0.1 * ms)
    return main * work(M, N, K) / work(Mr, Nr, Kr) + cost.reduce_ms(s, M, N, cfg, st)
for name, f in (("whole-wave tail", lambda a, b: estimate_ms(a, *b["shape"], sms=132)), ("spread tail", lambda a, b: est_tail(a, *b["shape"]))):
    errs = [abs(math.log(b["ms"] / f(a, b))) for runs in seen.values() for a in runs for b in runs if a is not b]
    print(name, len(errs), "within 10%%: %.3f within 25%%: %.3f" % (sum(e < math.log(1.1) for e in errs)/len(errs), sum(e < math.log(1.25) for e in errs)/len(errs)))
