import json, sys, math
a=[json.loads(l) for l in open(sys.argv[1])]; b=[json.loads(l) for l in open(sys.argv[2])]
ch=[]
for x,y in zip(a,b):
    assert x['shape']==y['shape']
    if (x['stage'],x['cfg'],x['variant'],x['staged'])!=(y['stage'],y['cfg'],y['variant'],y['staged']):
        ch.append((x,y))
print(len(ch),'changed of',len(a))
import collections
print(collections.Counter(str(x['src'])[:6] for x,_ in ch))
for x,y in ch[:int(sys.argv[3]) if len(sys.argv)>3 else 30]:
    M,N,K=x['shape']
    f=lambda d: f"{d['stage'][:6]} {d['cfg'].get('BM')}x{d['cfg'].get('BN')} S{d['cfg'].get('SPLITK')} {'st' if d['staged'] else ''}{d['variant'] or ''} {d['ms']*1000:.0f}"
    print(f"{x['src']} {M}x{N}x{K} {x['layout']} {M*N*K/2**30:.2f}G | {f(x)} -> {f(y)}")
