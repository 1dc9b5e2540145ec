import csv, math, os, sys
base=sys.argv[1]
def load(d):
    p=f'{base}/{d}/race.csv'
    if not os.path.exists(p): return {}
    return {(r['M'],r['N'],r['K']):r for r in csv.DictReader(open(p))}
for tag in sys.argv[2:]:
    a,b=load('before-'+tag),load('after-'+tag)
    ks=[k for k in a if k in b and a[k].get('auto_kernel_ms') and b[k].get('auto_kernel_ms')]
    if not ks: print(tag,'no pairs',len(a),len(b)); continue
    gk=math.exp(sum(math.log(float(a[k]['auto_kernel_ms'])/float(b[k]['auto_kernel_ms'])) for k in ks)/len(ks))
    ge=math.exp(sum(math.log(float(a[k]['auto_e2e_ms'])/float(b[k]['auto_e2e_ms'])) for k in ks)/len(ks))
    ra=math.exp(sum(math.log(float(a[k]['pct_cublas_e2e'])/100) for k in ks)/len(ks)); rb=math.exp(sum(math.log(float(b[k]['pct_cublas_e2e'])/100) for k in ks)/len(ks))
    print(f"{tag}: {len(ks)} pairs, speedup kernel {gk:.3f} e2e {ge:.3f}; e2e vs cuBLAS {ra:.3f} -> {rb:.3f}")
    for k in ks:
        x,y=a[k],b[k]
        print('  ','x'.join(k), '%.1f -> %.1f us (x%.2f) e2e %.1f -> %.1f'%(float(x['auto_kernel_ms'])*1e3, float(y['auto_kernel_ms'])*1e3, float(x['auto_kernel_ms'])/float(y['auto_kernel_ms']), float(x['auto_e2e_ms'])*1e3, float(y['auto_e2e_ms'])*1e3), x['auto'].split(' {')[0][:6], x['auto'].split('split_k=')[1], '->', y['auto'].split(' {')[0][:6], y['auto'].split('split_k=')[1], "MINB", y['auto'].split("'MINB': ")[1].split(',')[0])
