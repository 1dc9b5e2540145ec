"""Summarize ab-b-row/ab.jsonl: per product the fastest pass of each tree, 'signed' (B's row
index signed in stages 8-10, i.e. A and C unsigned only) over 'both' (the committed 715915b)."""
import collections, json, math, sys

rows = [json.loads(line) for line in open(sys.argv[1])]
best, meta = collections.defaultdict(lambda: math.inf), {}
for r in rows:
    k = (tuple(r["shape"]), r["layout"])
    best[(r["tag"], k)] = min(best[(r["tag"], k)], r["ms"])
    meta[k] = r
rat = []
for k in sorted(meta):
    a, b, m = best[("aonly", k)], best[("both", k)], meta[k]
    rat.append(a / b)
    c = m["config"]
    tile = f"{c.get('BM')}x{c.get('BN')} TM{c.get('TM')} MINB{c.get('MINB')}" if "BM" in c else ""
    print(f"{'x'.join(map(str, k[0])):>16} {k[1]} {m['stage']:>16} {m['variant']:>12} {tile:>22}"
          f"  committed {b * 1e3:7.1f} us  B row signed {a * 1e3:7.1f} us  ratio {a / b:.3f}")
g = math.exp(sum(map(math.log, rat)) / len(rat))
print(f"geomean signed / committed {g:.3f} over {len(rat)}, range {min(rat):.3f}-{max(rat):.3f}")
