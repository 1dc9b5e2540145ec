import csv, math, sys
from numba_gemm.device import DeviceInfo
from numba_gemm.plan.geometry import Geometry
from numba_gemm.plan import choose
dev = DeviceInfo(0, "NVIDIA H200", (9, 0), 132, 227*1024)
def load(p):
    return {(int(r['M']),int(r['N']),int(r['K'])):r for r in csv.DictReader(open(p))}
for base, tag in (("/tmp/x14/r14", "NN-random"), ("/tmp/x14/r14", "NT-random"), ("/tmp/x13/r13", "NT-models")):
    a, b = load(f"{base}/before-{tag}/race.csv"), load(f"{base}/after-{tag}/race.csv")
    lay = tag[:2]
    logs, same, diff, unch = [], 0, [], 0
    for k in a:
        if k not in b: continue
        g = Geometry.dense(*k, lay)
        r = choose.ranked(g, g.alignment(), dev)[0][1]
        s3 = f"{r.name} {dict(r.config)} "
        before_s, after_s = a[k]['auto'].split('split_k=')[0], b[k]['auto'].split('split_k=')[0]
        if s3 == after_s:
            same += 1; logs.append(math.log(float(a[k]['auto_kernel_ms'])/float(b[k]['auto_kernel_ms'])))
        elif s3 == before_s:
            unch += 1; logs.append(0.0)
        else:
            diff.append(k)
    print(tag, f"v3 = v2 pick on {same}, = old pick on {unch}, other {len(diff)} {diff}; kernel speedup geomean over the {len(logs)}: {math.exp(sum(logs)/len(logs)):.3f}")
