"""The NT sweep's kernel times relative to multistage 64 x 128 (the rule before, under 256 rows
a group), per problem and as geometric means per mean tokens. Run in the results folder."""
import collections, json, math
rows = [json.loads(line) for line in open("sweep/sweep-NT.jsonl")]
names = ["planner", "64x128", "32x256", "db32x128", "db32x256", "db64x128", "db64x128-tm4", "db128x128", "loop"]
print(f"{'K':>5} {'N':>5} {'E':>3} {'mean':>4} " + " ".join(f"{n:>12}" for n in names) + "  planner's tiles")
by = collections.defaultdict(list)
for r in rows:
    base = r["64x128"]
    pc = r["planner_config"]
    stage = "multistage" if "NBUF" in pc else "double_buffering"
    print(f"{r['K']:5d} {r['N']:5d} {r['experts']:3d} {r['mean_tokens']:4d} "
          + " ".join(f"{r[n] / base:12.3f}" if r.get(n) else f"{'-':>12}" for n in names)
          + f"  {stage} {pc['BM']}x{pc['BN']} TM {pc['TM']} MINB {pc['MINB']}")
    for n in names:
        if r.get(n):
            by[(r["mean_tokens"], n)].append(r[n] / base)
print("\ngeometric mean over the 6 problems of each mean (max in brackets)")
for m in sorted({r["mean_tokens"] for r in rows}):
    print(f"{m:4d}: " + ", ".join(f"{n} {math.exp(sum(map(math.log, by[(m, n)])) / len(by[(m, n)])):.3f} ({max(by[(m, n)]):.2f})" for n in names if by[(m, n)]))
