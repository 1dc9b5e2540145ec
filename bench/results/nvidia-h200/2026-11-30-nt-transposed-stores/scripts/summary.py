"""Kernel time new / old per configuration, layout and shape (ms from plan.autotune.time_plan;
the mean of the new runs over the old run): python scripts/summary.py"""
import json
from pathlib import Path

here = Path(__file__).resolve().parent.parent
for exp in ("swizzle", "paired", "row-shift"):
    runs = {p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in (here / exp).glob("*.jsonl")}
    old = runs["old1"]
    news = [v for k, v in sorted(runs.items()) if k.startswith("new")]
    print(f"{exp}: new / old kernel time ({', '.join(k for k in sorted(runs) if k.startswith('new'))} over old1)")
    for i, row in enumerate(old):
        keys = [k for k in row if k != "shape"]
        cells = []
        for k in keys:
            new = sum(n[i][k] for n in news) / len(news)
            cells.append(f"{k} {new / row[k]:.3f}")
        print("  " + "x".join(map(str, row["shape"])) + ": " + ", ".join(cells))
