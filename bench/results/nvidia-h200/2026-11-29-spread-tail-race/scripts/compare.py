"""Before (whole waves) against after (spread tail): per product and geomeans. Run in the
results folder: python scripts/compare.py"""
import csv, math, re
def load(p): return {(r['M'], r['N'], r['K']): r for r in csv.DictReader(open(p))}
def gm(x): return math.exp(sum(map(math.log, x)) / len(x))
def tile(a):
    m = re.search(r"'BM': (\d+).*?'BN': (\d+)", a)
    s = re.search(r"split_k=(\S+)", a)
    return a.split(' ')[0][:6] + (f" {m[1]}x{m[2]}" if m else '') + (f" S{s[1]}" if s else '')
for sub, name in (('NN-random', 'random NN'), ('NT-random', 'random NT'), ('NT-models', 'models NT')):
    b, a = load(f'before-{sub}/race.csv'), load(f'after-{sub}/race.csv')
    ks = [k for k in b if k in a]
    for k in ks:
        x, y = b[k], a[k]
        print(f"{name} {'x'.join(k):>18} {float(x['auto_kernel_ms'])*1e3:8.1f} us (priced {float(x['auto_predicted_ms'])*1e3:8.1f}) {tile(x['auto']):22}"
              f" -> {float(y['auto_kernel_ms'])*1e3:8.1f} us (priced {float(y['auto_predicted_ms'])*1e3:8.1f}) {tile(y['auto']):22} {float(y['auto_kernel_ms'])/float(x['auto_kernel_ms']):.3f}")
    big = [k for k in ks if int(k[0]) * int(k[1]) * int(k[2]) >= 2**27]
    r = lambda ks: gm([float(a[k]['auto_kernel_ms']) / float(b[k]['auto_kernel_ms']) for k in ks])
    e = lambda d: gm([float(d[k]['pct_cublas_e2e']) / 100 for k in ks])
    print(f"== {name}: {len(ks)} products, kernel after/before {r(ks):.3f} (>= 2^27 multiply-adds, {len(big)}: {r(big):.3f}); "
          f"e2e vs cuBLAS {e(b):.3f} -> {e(a):.3f}\n")
