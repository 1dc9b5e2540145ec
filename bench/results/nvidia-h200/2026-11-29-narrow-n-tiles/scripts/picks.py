"""plan_for picks under two trees' data: run in each tree, print JSON lines."""
import json, sys
from numba_gemm.device import DeviceInfo, SMEM_OPTIN_LIMIT
from numba_gemm.plan import choose
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools.bench.sizes import heldout_random
dev = DeviceInfo(0, "NVIDIA H200", (9,0), 132, SMEM_OPTIN_LIMIT)
for s in [int(x) for x in sys.argv[1].split(',')]:
    for M, N, K, lay in heldout_random(40, seed=s):
        p = choose.plan_for(M, N, K, geometry=Geometry.dense(M, N, K, lay), alignment=2, device=dev)
        q = getattr(p, 'inner', None) or p
        print(json.dumps(dict(seed=s, shape=[M,N,K], layout=lay, stage=q.stage.name, cfg=dict(q.stage.config), variant=getattr(q,'variant',None), staged=p is not q, ms=p.predicted_ms)))
