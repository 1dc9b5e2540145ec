# The plans of held-out products (JSON: "MxNxK LAYOUT" -> [stage config, variant, predicted ms]),
# offline with the H200's data. usage: plans.py SEED... [models]
import sys, json
from numba_gemm.device import DeviceInfo
from numba_gemm.plan.choose import plan_for
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools.bench.sizes import heldout_random, heldout_models
dev = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227*1024)
probs = []
for a in sys.argv[1:]:
    if a.startswith("models"):
        probs += [(M, N, K, "NT") for w in (1, 2, 3) for _, (M, N, K) in heldout_models(w)]
    else:
        probs += [(M, N, K, lay) for M, N, K, lay in heldout_random(40, int(a))]
out = {}
for M, N, K, lay in probs:
    g = Geometry.dense(M, N, K, lay)
    p = plan_for(M, N, K, geometry=g, alignment=2, device=dev)
    inner = getattr(p, "inner", None)
    q = inner or p
    out[f"{M}x{N}x{K} {lay}"] = [("staged " if inner else "") + q.stage.name + " " + json.dumps(dict(q.stage.config), sort_keys=True), q.variant, p.predicted_ms]
json.dump(out, sys.stdout)
