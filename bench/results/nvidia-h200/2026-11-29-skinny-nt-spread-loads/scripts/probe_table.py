"""Call 8's probe: each candidate's kernel time with the tree before (old), the spread loads without
(nofence) and with the issue fence (fence), best of two passes each; usage: probe_table.py JSONL"""
import collections, json, math, sys

rows = [json.loads(line) for line in open(sys.argv[1])]
d, cub = collections.defaultdict(dict), {}
for r in rows:
    k = (tuple(r["shape"]), r["layout"])
    d[k].setdefault(r["rank"], {})[r["tag"]] = r
    if r["cublas_ms"]:
        cub[k] = r["cublas_ms"]
per_cfg = collections.defaultdict(list)
for k in d:
    print(f"== {k[0]} {k[1]} cuBLAS {cub[k] * 1000:.1f} us")
    bests = {}
    for rank in sorted(d[k]):
        t = d[k][rank]
        r = t["fence1"]
        m = {v: min(t[v + "1"]["ms"], t[v + "2"]["ms"]) for v in ("old", "nofence", "fence")}
        for v in m:
            bests[v] = min(bests.get(v, 9), m[v])
        c = r["config"]
        if r["stage"] == "skinny":
            cs = f"MT{c['MT']} BN{c['BN']} T{c['THREADS']} KC{c['KC']} MINB{c['MINB']}"
            per_cfg[cs].append(m["fence"] / m["old"])
        else:
            cs = f"BM{c['BM']} BN{c['BN']}"
        print(f"  r{rank} {r['stage'][:6]} {cs:30s} S{r['split']:<2} predicted {r['predicted_ms'] * 1e3:6.1f}"
              f" old {m['old'] * 1e3:6.1f} nofence {m['nofence'] * 1e3:6.1f} fence {m['fence'] * 1e3:6.1f}"
              f" fence/old {m['fence'] / m['old']:.3f} blocks/SM old {t['old1']['blocks_per_sm']} fence {r['blocks_per_sm']}")
    p = d[k][0]
    print(f"   pick: old {min(p['old1']['ms'], p['old2']['ms']) * 1e3:.1f} fence "
          f"{min(p['fence1']['ms'], p['fence2']['ms']) * 1e3:.1f} us; fastest of the 10: old {bests['old'] * 1e3:.1f}"
          f" nofence {bests['nofence'] * 1e3:.1f} fence {bests['fence'] * 1e3:.1f} us")
print("per skinny configuration, fence / old:")
for cs, v in per_cfg.items():
    print(f"  {cs:30s} {len(v):2d} timings, geomean {math.exp(sum(map(math.log, v)) / len(v)):.3f}"
          f" (min {min(v):.2f}, max {max(v):.2f})")
