"""Summaries of this folder's runs: the A/B of the unsigned indices (old = 4859eeb, new = the
change; the fastest of each tree's two passes, kernel time), and the staging probe.
usage: python summarize.py  (run from this folder's parent or anywhere: paths are relative to it)"""

import collections
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def ab(name):
    rows = [json.loads(line) for line in open(HERE / name / "ab.jsonl")]
    t = collections.defaultdict(lambda: collections.defaultdict(list))
    info = {}
    for r in rows:
        k = (tuple(r["shape"]), r["layout"])
        t[k][r["tag"]].append(r["ms"])
        info[k] = r
    out = [f"{'shape':>20} lay stage            variant       old ms   new ms  new/old"]
    ratios = []
    for k in sorted(t, key=lambda k: k[0][2]):
        o, n = min(t[k]["old"]), min(t[k]["new"])
        r = info[k]
        ratios.append(n / o)
        shape = "x".join(map(str, k[0]))
        out.append(
            f"{shape:>20} {k[1]}  {r['stage']:16} {r['variant']:12} {o:8.4f} {n:8.4f} {n / o:7.3f}"
        )
    shallow = [x for (k, x) in zip(sorted(t, key=lambda k: k[0][2]), ratios) if k[0][2] <= 512]
    out.append(f"geomean new/old {gm(ratios):.3f} over {len(ratios)} products")
    if shallow:
        out.append(
            f"K <= 512: {gm(shallow):.3f} over {len(shallow)}; range {min(ratios):.3f}-{max(ratios):.3f}"
        )
    (HERE / name / "summary.txt").write_text("\n".join(out) + "\n")


def stage_probe():
    rows = [json.loads(line) for line in open(HERE / "stage-probe" / "stage.jsonl")]
    out = ["staged (copies + aligned plan of the padded shape) against plain (the scalar or"]
    out.append("vector_loads plan), kernel ms, cuBLAS FP32 (TF32 off) in the same process")
    out.append(f"{'shape':>20} lay  plain ms (pred)      staged ms (pred)     cuBLAS  plain/staged")
    for r in sorted(rows, key=lambda r: math.prod(r["shape"])):
        p, s = r["plain"], r["staged"]
        shape = "x".join(map(str, r["shape"]))
        out.append(
            f"{shape:>20} {r['layout']}  {p['ms']:.3f} ({p['predicted_ms'] or 0:.3f})  "
            f"{s['ms']:.3f} ({s['predicted_ms']:.3f})  {r['cublas_ms']:.3f}  {p['ms'] / s['ms']:.2f}"
        )
    for name, pick in (
        ("always plain", lambda r: r["plain"]),
        ("always staged", lambda r: r["staged"]),
        ("the faster of the two", lambda r: min(r["plain"], r["staged"], key=lambda x: x["ms"])),
    ):
        out.append(
            f"{name}: geomean vs cuBLAS {gm([r['cublas_ms'] / pick(r)['ms'] for r in rows]):.3f}"
        )
    big = [r for r in rows if math.prod(r["shape"]) >= 2**34]
    out.append(
        f">= 2^34 MACs ({len(big)}): plain/staged "
        + ", ".join(f"{r['plain']['ms'] / r['staged']['ms']:.2f}" for r in big)
    )
    (HERE / "stage-probe" / "summary.txt").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    ab("ab-training")
    ab("ab-heldout")
    stage_probe()
