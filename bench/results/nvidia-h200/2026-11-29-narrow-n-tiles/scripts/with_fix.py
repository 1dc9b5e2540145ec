"""race/with-fix.txt: the planner with the spread-sum pricing fix, judged from the race of the
tree before and the raced tree (same call). A product whose fixed pick is the raced one takes
that measurement, one whose fixed pick is the old one takes the old measurement, any other pick
was not timed and is listed apart. usage: with_fix.py RACE_DIR (holds picks-*.jsonl, before-*,
after-*)"""

import csv, json, math, sys
from pathlib import Path

d = Path(sys.argv[1])
load = lambda n: [json.loads(line) for line in open(d / n)]
key = lambda x: (x["stage"], json.dumps(x["cfg"], sort_keys=True), x["staged"], x["variant"])
race = {}
for lay in ("NN", "NT"):
    for tree in ("before", "after"):
        for r in csv.DictReader(open(d / f"{tree}-{lay}" / "race.csv")):
            race[(tree, lay, int(r["M"]), int(r["N"]), int(r["K"]))] = r
rows, untimed = [], []
for h, a, f in zip(load("picks-before.jsonl"), load("picks-raced.jsonl"), load("picks-fixed.jsonl")):
    if key(h) == key(a):
        continue
    (M, N, K), lay = h["shape"], h["layout"]
    src = "before" if key(f) == key(h) else "after" if key(f) == key(a) else None
    if src is None:
        untimed.append(f"{M}x{N}x{K} {lay}: {f['stage']} {f['cfg']} {f['variant']}, {f['ms'] * 1e3:.1f} us predicted")
        continue
    b, r = race[("before", lay, M, N, K)], race[(src, lay, M, N, K)]
    rows.append((f"{M}x{N}x{K}", lay, src, M * N * K, *(float(x[k]) for x in (b, r) for k in ("auto_kernel_ms", "pct_cublas_kernel", "pct_cublas_e2e"))))
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
print(f"{'shape':>16} lay  pick from  before us  fixed us  ratio  e2e vs cuBLAS before -> fixed")
for s, lay, src, _, tb, kb, eb, tf, kf, ef in rows:
    print(f"{s:>16} {lay}  {src:<9} {tb * 1e3:9.1f} {tf * 1e3:9.1f}  {tf / tb:.3f}  {eb / 100:.3f} -> {ef / 100:.3f}")
for big in (False, True):
    sel = [r for r in rows if not big or r[3] >= 2**27]
    print(f"{'>= 2^27 MACs' if big else 'all timed'}: {len(sel)} products, kernel time fixed / before "
          f"{g([r[7] / r[4] for r in sel]):.3f}; kernel vs cuBLAS {g([r[5] / 100 for r in sel]):.3f} -> "
          f"{g([r[8] / 100 for r in sel]):.3f}; end to end {g([r[6] / 100 for r in sel]):.3f} -> "
          f"{g([r[9] / 100 for r in sel]):.3f}; lowest end to end {min(r[6] for r in sel) / 100:.3f} -> "
          f"{min(r[9] for r in sel) / 100:.3f}")
print("not timed (a third pick):")
print("\n".join("  " + u for u in untimed))
