import json, sys, math, collections
from numba_gemm.device import DeviceInfo, SMEM_OPTIN_LIMIT
from numba_gemm.plan import choose
from numba_gemm.plan.geometry import Geometry
dev = DeviceInfo(0, "NVIDIA H200", (9,0), 132, SMEM_OPTIN_LIMIT)
rows=[json.loads(l) for l in open(sys.argv[1])]
by=collections.defaultdict(list)
for r in rows: by[(tuple(r['shape']),r['layout'])].append(r)
res=[]
for (shape,lay),rs in by.items():
    M,N,K=shape; g=Geometry.dense(M,N,K,lay)
    rk=choose.ranked(g, rs[0]['variant']!='scalar', dev)
    price={}
    for ms,st,where in rk:
        price.setdefault((st.name, json.dumps(dict(st.config),sort_keys=True)), ms)
    got=[(price.get((r['stage'],json.dumps(r['config'],sort_keys=True))), r['ms'], r) for r in rs]
    got=[x for x in got if x[0] is not None]
    if len(got)<2: continue
    pick=min(got,key=lambda x:x[0]); best=min(x[1] for x in got)
    res.append((pick[1]/best, shape, lay, len(got)))
n=len(res)
print(f"products {n}: pick within 10% {sum(r[0]<=1.1 for r in res)}; pick/fastest geomean {math.exp(sum(math.log(r[0]) for r in res)/n):.4f}; matched cands {sum(r[3] for r in res)}")
