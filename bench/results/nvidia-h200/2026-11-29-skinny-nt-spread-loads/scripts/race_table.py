"""The race of call 10 (old1, new1, old2, new2 in turn): per product our kernel time, best of the
two runs of each tree, and per run the e2e and kernel ratios to cuBLAS timed in that run (the
host time a call moved between runs, ours and cuBLAS's alike: compare e2e within a run only).
Usage: race_table.py RACE_DIR"""
import csv, math, sys

D = sys.argv[1]
RUNS = ("old1", "new1", "old2", "new2")
T = {t: {(r["M"], r["N"], r["K"]): r for r in csv.DictReader(open(f"{D}/{t}/race.csv"))} for t in RUNS}
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))  # noqa: E731
kr = []
for k in T["new1"]:
    f = lambda t, c: float(T[t][k][c])  # noqa: E731
    ko = min(f("old1", "auto_kernel_ms"), f("old2", "auto_kernel_ms"))
    kn = min(f("new1", "auto_kernel_ms"), f("new2", "auto_kernel_ms"))
    kr.append(kn / ko)
    same = all(T[t][k]["auto"] == T["new1"][k]["auto"] for t in T)
    e2e = " ".join(f"{float(T[t][k]['pct_cublas_e2e']) / 100:.2f}" for t in RUNS)
    print(f"{'x'.join(k):>14} kernel old {ko * 1e3:6.1f} new {kn * 1e3:6.1f} us ({kn / ko:.3f});"
          f" e2e vs cuBLAS old1 new1 old2 new2: {e2e}", "" if same else "PLAN DIFFERS",
          T["new1"][k]["auto"][:48])
print(f"kernel new / old: geomean {g(kr):.3f} (min {min(kr):.3f}, max {max(kr):.3f}) over {len(kr)}")
for t in RUNS:
    e = [float(r["pct_cublas_e2e"]) / 100 for r in T[t].values()]
    kk = [float(r["pct_cublas_kernel"]) / 100 for r in T[t].values()]
    big = [float(r["pct_cublas_e2e"]) / 100 for r in T[t].values() if float(r["auto_kernel_ms"]) > 0.02]
    print(f"{t}: vs cuBLAS e2e geomean {g(e):.3f}, below 0.75: {sum(x < 0.75 for x in e)};"
          f" kernel {g(kk):.3f}; e2e of the {len(big)} whose kernel takes over 20 us {g(big):.3f}")
