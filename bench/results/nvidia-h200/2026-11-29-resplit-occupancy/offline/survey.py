import json, sys, numba_gemm
from concurrent.futures import ProcessPoolExecutor
from numba_gemm.tools import resources
def cfgs():
    d = json.load(open('numba_gemm/tuning/sm_90.json'))
    g = d['gpus']['NVIDIA H200']
    seen = {}
    def add(st, x, where):
        cfg = dict(x['config']); own = cfg.pop('SPLITK')
        key = (st, tuple(sorted(cfg.items())))
        seen.setdefault(key, []).append((where, own, {k: v for k, v in x.items() if k.startswith('blocks')}))
    for cname, c in g['classes'].items():
        for st, e in c.items():
            if st in ('multistage', 'double_buffering'):
                for i, x in enumerate([e] + e.get('alternatives', [])):
                    add(st, x, f"{cname}/{i}")
    for j, s in enumerate(g['shapes']):
        for i, x in enumerate(s['candidates']):
            if x['stage'] in ('multistage', 'double_buffering'):
                add(x['stage'], x, f"shape{j}/{i}")
    return seen
def one(a):
    name, cfg, lay, S, v = a
    try:
        st = numba_gemm.get_stage(name).with_config(dict(cfg, SPLITK=S))
        r = resources.kernel_resources(st, st.kernel_for(v, lay), v, lay)
        return dict(stage=name, cfg=cfg, layout=lay, S=S, variant=v, regs=r.registers, spill=r.spill_stores, bps=r.blocks_per_sm)
    except Exception as e:
        return dict(stage=name, cfg=cfg, layout=lay, S=S, variant=v, error=str(e)[:200])
if __name__ == "__main__":
    seen = cfgs()
    json.dump([[k[0], dict(k[1]), v] for k, v in seen.items()], open('/tmp/occ/stored.json', 'w'))
    order = {'multistage': 0, 'double_buffering': 1, 'warptiling': 2}
    jobs = [(k[0], dict(k[1]), lay, S, v) for k in sorted(seen, key=lambda k: order[k[0]]) for lay in ("NT", "NN") for v in ("vector", "scalar") for S in (8,)]
    out = open('/tmp/occ/survey8.jsonl', 'a')
    with ProcessPoolExecutor(2) as ex:
        for r in ex.map(one, jobs):
            print(json.dumps(r), file=out, flush=True)
