import sys  # needs block-extra-step.patch applied (cost.BLOCK_EXTRA_STEPS)
from numba_gemm.device import DeviceInfo
from numba_gemm.plan.geometry import Geometry
from numba_gemm.plan import choose, cost
from numba_gemm.plan.choose import plan_for
from numba_gemm.tools.bench.sizes import heldout_random, heldout_models
dev = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227*1024)
probs = []
for seed in map(int, sys.argv[2:]):
    probs += [(M, N, K, lay) for M, N, K, lay in heldout_random(40, seed)]
if sys.argv[1] == "models":
    probs = [(M, N, K, "NT") for w in (1, 2, 3) for _, (M, N, K) in heldout_models(w)]
def plans(U):
    cost.BLOCK_EXTRA_STEPS = U
    choose_cache = getattr(choose, "_plan_cache", None)
    out = []
    for M, N, K, lay in probs:
        g = Geometry.dense(M, N, K, lay)
        r = choose.ranked(g, g.alignment(), dev)
        out.append((r[0][1], r[0][0], r))
    return out
a, b = plans(0.0), plans(1.0)
n = 0
for (M, N, K, lay), x, y in zip(probs, a, b):
    if repr(x[0]) != repr(y[0]):
        n += 1
        # price of the old pick under the new model
        print(f"{M}x{N}x{K} {lay}: {x[0].name} {dict(x[0].config)} {x[1]*1e3:.1f} -> {y[0].name} {dict(y[0].config)} {y[1]*1e3:.1f}")
print(n, "of", len(probs), "changed")
