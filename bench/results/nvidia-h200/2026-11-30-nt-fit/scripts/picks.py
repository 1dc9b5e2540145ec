import json, sys
from numba_gemm.device import DeviceInfo, SMEM_OPTIN_LIMIT
from numba_gemm.plan import choose
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools.bench import sizes
dev = DeviceInfo(0, "NVIDIA H200", (9,0), 132, SMEM_OPTIN_LIMIT)
items=[]
for which in (1,2,3):
    items += [(f"models{which}", M,N,K,'NT') for _,(M,N,K) in sizes.heldout_models(which)]
for seed in (20261363, 20261364, 20261365, 20261366):
    items += [(f"seed{seed}", M,N,K,lay) for M,N,K,lay in sizes.heldout_random(40, seed)]
for tag,M,N,K,lay in items:
    for al in (2,):
        p = choose.plan_for(M, N, K, geometry=Geometry.dense(M, N, K, lay), alignment=al, device=dev)
        q = getattr(p, 'inner', None) or p
        print(json.dumps(dict(tag=tag, shape=[M,N,K], layout=lay, stage=q.stage.name, cfg=dict(q.stage.config), staged=p is not q, ms=p.predicted_ms)))
