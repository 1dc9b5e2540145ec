import json, collections, math, sys
rows=[json.loads(l) for l in open(sys.argv[1])]
d=collections.defaultdict(dict); cub={}
for r in rows:
    k=(tuple(r['shape']),r['layout'])
    key=(r['rank'])
    d[k].setdefault(key,{})[r['tag']]=r
    if r['cublas_ms']: cub[k]=r['cublas_ms']
for k in d:
    cands=d[k]
    print(f"== {k[0]} {k[1]} cuBLAS {cub[k]*1000:.1f} us")
    best={}
    for rank in sorted(cands):
        t=cands[rank]; r=t['new1']
        new=min(t[x]['ms'] for x in ('new1','new2')); old=min(t[x]['ms'] for x in ('old1','old2'))
        c=r['config']; cs=f"MT{c.get('MT','')} BN{c['BN']} T{c.get('THREADS','')} KC{c.get('KC','')} MINB{c['MINB']}" if r['stage']=='skinny' else f"BM{c['BM']} BN{c['BN']}"
        print(f"  r{rank} {r['stage'][:6]} {r['variant'][:6]} {cs:32s} S{r['split']:<2} pred {r['predicted_ms']*1000:6.1f} old {old*1000:6.1f} new {new*1000:6.1f} new/old {new/old:.3f}  cub/new {cub[k]/new:.2f} bps {r['blocks_per_sm']}")
