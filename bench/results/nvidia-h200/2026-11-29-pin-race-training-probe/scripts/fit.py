import json, math, collections, sys
rows=[json.loads(l) for l in open("/tmp/g/r33/train.jsonl")]
def cat(r, mode):
    if mode==0: return ()
    if mode==1: return (r["stage"],)
    if mode==2: return (r["stage"], r["variant"])
    if mode==3: return (r["stage"], r["split"]>1, r["variant"])
    return (r["stage"], r["split"]>1, r["layout"], r["variant"])
def fit(train, mode):
    c=collections.defaultdict(list)
    for r in train:
        if r["predicted_ms"]: c[cat(r,mode)].append(math.log(r["ms"]/r["predicted_ms"]))
    return {k: math.exp(sum(v)/len(v)) for k,v in c.items() if len(v)>=5}
def evaluate(test, f, mode):
    by=collections.defaultdict(list)
    for r in test: by[(tuple(r["shape"]),r["layout"])].append(r)
    within=0; loss=[]
    for k,v in by.items():
        best=min(x["ms"] for x in v)
        pv=[x for x in v if x["predicted_ms"]]
        pick=min(pv, key=lambda x: x["predicted_ms"]*f.get(cat(x,mode),1.0))
        within += pick["ms"]<=1.1*best; loss.append(math.log(pick["ms"]/best))
    return within, len(by), math.exp(sum(loss)/len(loss))
for mode in range(5):
    for trs, tes in (({1,2,3},{4,5}), ({4,5},{1,2,3}), ({1,2,3,4,5},{1,2,3,4,5})):
        tr=[r for r in rows if r["seed"] in trs]; te=[r for r in rows if r["seed"] in tes]
        f=fit(tr,mode)
        print(mode, sorted(trs), "->", sorted(tes), "base", evaluate(te,{},mode), "fitted", evaluate(te,f,mode))
f=fit(rows,3); print({k: round(v,2) for k,v in f.items()})
