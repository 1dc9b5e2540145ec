import sys
from numba_gemm.device import DeviceInfo
from numba_gemm.plan.geometry import Geometry
from numba_gemm.plan import choose, cost
from numba_gemm.tools.bench.sizes import heldout_random, heldout_models
dev = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227*1024)
probs = []
for seed in map(int, sys.argv[2:]):
    probs += [(M, N, K, lay) for M, N, K, lay in heldout_random(40, seed)]
if sys.argv[1] == "models":
    probs = [(M, N, K, "NT") for w in (1, 2, 3) for _, (M, N, K) in heldout_models(w)]
real = cost.pinned_occupancy
def plans(on):
    f = real if on else (lambda *a, **k: None)
    cost.pinned_occupancy = choose.pinned_occupancy = f
    out = []
    for M, N, K, lay in probs:
        g = Geometry.dense(M, N, K, lay)
        r = choose.ranked(g, g.alignment(), dev)
        out.append((r[0][1], r[0][0]))
    return out
a, b = plans(False), plans(True)
ch = {"NN": [], "NT": []}
for (M, N, K, lay), x, y in zip(probs, a, b):
    if repr(x[0]) != repr(y[0]):
        ch[lay].append(f"{M}x{N}x{K}")
        print(f"# {M}x{N}x{K} {lay}: {x[0].name} {x[0].config.get('BM')}x{x[0].config.get('BN')} S{x[0].config.get('SPLITK')} M{x[0].config.get('MINB')} {x[1]*1e3:.1f} -> {y[0].name} {y[0].config.get('BM')}x{y[0].config.get('BN')} S{y[0].config.get('SPLITK')} M{y[0].config.get('MINB')} {y[1]*1e3:.1f}")
for lay, v in ch.items():
    print(f"{lay}:{','.join(v)}")
print(sum(map(len, ch.values())), "of", len(probs), "changed")
