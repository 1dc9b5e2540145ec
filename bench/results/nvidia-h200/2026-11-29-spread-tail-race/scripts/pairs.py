import json, math, collections
from pathlib import Path
from numba_gemm.plan import tuning, cost
from numba_gemm.plan.cost import estimate_ms
from numba_gemm.device import cdiv
data = json.loads((Path(tuning.__file__).parents[1] / "tuning" / "sm_90.json").read_text())
shapes = data["gpus"]["NVIDIA H200"]["shapes"]
seen = collections.defaultdict(list)
for rec in shapes:
    if not rec["aligned"]: continue
    lay=rec.get("layout","NN")
    for c in rec["candidates"]:
        if c["stage"] in ("double_buffering", "multistage", "warptiling") and c["config"].get("SPLITK",1)>=1:
            key = (lay, c["stage"], json.dumps(c["config"], sort_keys=True))
            seen[key].append(dict(c, shape=rec["shape"]))
def tailfrac(c):
    st=cost.stage_of(c); bm,bn,bk=st.block(c["config"]); s=c["config"].get("SPLITK",1)
    M,N,K=c["shape"]; bps=max(1,int(c.get("blocks_per_sm",1)))
    b=cdiv(M,bm)*cdiv(N,bn)*s; slots=132*bps
    if b<=slots: return None
    r=b%slots
    return r/slots  # 0 = whole waves
out=[]
for (lay,stn,cfg),runs in seen.items():
    for a in runs:
        for b in runs:
            if a is b: continue
            pred=estimate_ms(a,*b["shape"],sms=132,layout=lay)
            out.append((math.log(b["ms"]/pred), tailfrac(a), tailfrac(b), stn, lay, cfg))
print(len(out))
def summ(sel, name):
    e=[x[0] for x in sel]
    if not e: return
    print(f"{name:40s} n={len(e):4d} mean err {math.exp(sum(e)/len(e)):.3f} within10% {sum(abs(x)<math.log(1.1) for x in e)/len(e):.2f}")
def cat(t): return 'onewave' if t is None else ('whole' if t==0 else ('tail<.5' if t<0.5 else 'tail>=.5'))
for rc in ('onewave','whole','tail<.5','tail>=.5'):
    for tc in ('onewave','whole','tail<.5','tail>=.5'):
        summ([x for x in out if cat(x[1])==rc and cat(x[2])==tc], f"ref {rc} -> target {tc}")
