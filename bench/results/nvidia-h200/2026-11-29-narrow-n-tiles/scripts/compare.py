import csv, math, sys
def g(x): return math.exp(sum(map(math.log,x))/len(x)) if x else float('nan')
rows=[]
for lay in ('NN','NT'):
    a={(r['M'],r['N'],r['K']):r for r in csv.DictReader(open(f'after-{lay}/race.csv'))}
    b={(r['M'],r['N'],r['K']):r for r in csv.DictReader(open(f'before-{lay}/race.csv'))}
    for k in a:
        A,B=a[k],b[k]
        M,N,K=map(int,k)
        rows.append(dict(lay=lay,shape=f"{M}x{N}x{K}",macs=M*N*K,
          kb=float(B['pct_cublas_kernel'])/100, ka=float(A['pct_cublas_kernel'])/100,
          eb=float(B['pct_cublas_e2e'])/100, ea=float(A['pct_cublas_e2e'])/100,
          tb=float(B['auto_kernel_ms'])*1e3, ta=float(A['auto_kernel_ms'])*1e3,
          cb=float(B['cublas_kernel_ms'])*1e3, ca=float(A['cublas_kernel_ms'])*1e3,
          errA=float(A['auto_err']), pa=A['auto'].split(' {')[0]+' '+A['auto'].split("'BM': ")[-1][:3] if "'BM'" in A['auto'] else A['auto'].split(' {')[0], pb=B['auto'].split(' {')[0]))
rows.sort(key=lambda r:(r['lay'],-r['macs']))
print(f"{'lay':3} {'shape':>16} {'before us':>9} {'after us':>9} {'aft/bef':>7}  k-ratio b->a   e2e b->a   before-pick -> after-pick")
for r in rows:
    print(f"{r['lay']:3} {r['shape']:>16} {r['tb']:9.1f} {r['ta']:9.1f} {r['ta']/r['tb']:7.3f}  {r['kb']:.3f}->{r['ka']:.3f}  {r['eb']:.3f}->{r['ea']:.3f}  {r['pb']} -> {r['pa']}")
for lay in ('NN','NT',None):
  for big in (False,True):
    s=[r for r in rows if (lay is None or r['lay']==lay) and (not big or r['macs']>=2**27)]
    print(lay or 'all', '>=2^27' if big else 'all', len(s), 'time after/before', round(g([r['ta']/r['tb'] for r in s]),3),
      'kernel vs cuBLAS', round(g([r['kb'] for r in s]),3),'->',round(g([r['ka'] for r in s]),3),
      'e2e', round(g([r['eb'] for r in s]),3),'->',round(g([r['ea'] for r in s]),3),
      'min e2e', round(min(r['eb'] for r in s),3),'->',round(min(r['ea'] for r in s),3))
print('max err after', max(r['errA'] for r in rows))
