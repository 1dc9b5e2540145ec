import json, math, sys
from collections import defaultdict
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f)]
by=defaultdict(list)
for r in rows: by[tuple(r['shape'])].append(r)
g0=[];gb=[];within=0;n=0
def lab(r):
    c=r['config']; return f"{r['stage'][:6]} {c.get('BM','')}x{c.get('BN','')} MINB{c.get('MINB')} S{r['split']} bps{r['blocks_per_sm']}"
for k,v in by.items():
    v.sort(key=lambda r:r['rank'])
    p=v[0]; b=min(v,key=lambda r:r['ms'])
    n+=1; within+= p['ms']<=1.1*b['ms']
    g0.append(p['cublas_ms']/p['ms']); gb.append(b['cublas_ms']/b['ms'])
    print(f"{k[0]:5}x{k[1]:5}x{k[2]:5} pick {lab(p):38s} {p['ms']/p['predicted_ms']:.2f}x pred  vs cub {p['cublas_ms']/p['ms']:.3f} | best r{b['rank']} {lab(b):38s} {b['cublas_ms']/b['ms']:.3f} {b['ms']/b['predicted_ms']:.2f}x")
gm=lambda x: math.exp(sum(map(math.log,x))/len(x))
print('products',n,'pick within 10%',within,'geomean pick',round(gm(g0),3),'best',round(gm(gb),3))
