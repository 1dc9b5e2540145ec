import json, math, sys
from collections import defaultdict
def load(f): return [json.loads(l) for l in open(f)]
gm=lambda x: math.exp(sum(map(math.log,x))/len(x)) if x else 1.0
def key(r, mode):
    c={k:v for k,v in r['config'].items() if k!='SPLITK'}
    base=(r['stage'],)+tuple(sorted(c.items()))
    if mode=='cfg': return base
    if mode=='cfgsplit': return base+(r['split']>1,)
    if mode=='stage': return (r['stage'],)
    if mode=='tile': return (r['stage'], c.get('BM'), c.get('BN'))
def fit(rows, mode, shrink=0):
    d=defaultdict(list)
    for r in rows: d[key(r,mode)].append(math.log(r['ms']/r['predicted_ms']))
    return {k: math.exp(sum(v)/(len(v)+shrink)) for k,v in d.items()}
def evaluate(rows, fac, mode):
    by=defaultdict(list)
    for r in rows: by[tuple(r['shape'])].append(r)
    w=0; ratio=[]; vs=[]
    for k,v in by.items():
        p=min(v,key=lambda r:r['predicted_ms']*fac.get(key(r,mode),1.0))
        b=min(v,key=lambda r:r['ms'])
        w+=p['ms']<=1.1*b['ms']; ratio.append(p['ms']/b['ms']); vs.append(p['cublas_ms']/p['ms'])
    return w, len(by), gm(ratio), gm(vs)
a,b=load(sys.argv[1]),load(sys.argv[2])
print('none   ', 'A', evaluate(a,{}, 'cfg'), 'B', evaluate(b,{},'cfg'))
for mode in ('stage','tile','cfg','cfgsplit'):
  for shrink in (0,2):
    fa=fit(a,mode,shrink); fb=fit(b,mode,shrink)
    print(mode, shrink, 'fit A->B', evaluate(b,fa,mode), 'fit B->A', evaluate(a,fb,mode), 'in-sample A', evaluate(a,fa,mode))
