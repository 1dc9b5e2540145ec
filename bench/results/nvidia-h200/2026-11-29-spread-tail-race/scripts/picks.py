"""plan_for picks: seeds or model sets; JSON lines."""
import json, sys
from numba_gemm.device import DeviceInfo, SMEM_OPTIN_LIMIT
from numba_gemm.plan import choose
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools.bench.sizes import heldout_random, heldout_models
dev = DeviceInfo(0, "NVIDIA H200", (9,0), 132, SMEM_OPTIN_LIMIT)
probs = []
for a in sys.argv[1].split(','):
    if a.startswith('models'):
        w = int(a[6:] or 1)
        probs += [(a, M, N, K, 'NT') for _, (M, N, K) in heldout_models(w)]
    elif '-' in a:
        lo, hi = map(int, a.split('-'))
        for s in range(lo, hi + 1):
            probs += [(s, M, N, K, lay) for M, N, K, lay in heldout_random(40, seed=s)]
    else:
        probs += [(int(a), M, N, K, lay) for M, N, K, lay in heldout_random(40, seed=int(a))]
seen = set()
for src, M, N, K, lay in probs:
    if (M, N, K, lay) in seen: continue
    seen.add((M, N, K, lay))
    p = choose.plan_for(M, N, K, geometry=Geometry.dense(M, N, K, lay), alignment=2, device=dev)
    q = getattr(p, 'inner', None) or p
    print(json.dumps(dict(src=src, shape=[M,N,K], layout=lay, stage=q.stage.name, cfg=dict(q.stage.config), variant=getattr(q,'variant',None), staged=p is not q, ms=p.predicted_ms)))
