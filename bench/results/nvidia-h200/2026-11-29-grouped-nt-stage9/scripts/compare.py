"""The bench rows (NT) against the same rows of ../2026-11-28-grouped-skinny (the rule before,
another day's machine). Run in the results folder."""
import glob, json
old = {}
for f in glob.glob("../2026-11-28-grouped-skinny/*/grouped.jsonl"):
    for line in open(f):
        r = json.loads(line)
        old[(r["layer"], r["layout"], r["experts"], r["mean_tokens"])] = r
for f in sorted(glob.glob("*/grouped.jsonl")):
    for line in open(f):
        r = json.loads(line)
        o = old.get((r["layer"], r["layout"], r["experts"], r["mean_tokens"]))
        flops = 2 * sum(r["sizes"]) * r["K"] * r["N"]
        print(f"{r['layer']:20s} E={r['experts']:3d} mean {r['mean_tokens']:4d}: rel. error {r['rel_error']:.1e}; "
              f"loop / ours {r['speedup_loop']:.2f} e2e ({r['loop_kernel_ms'] / r['ours_kernel_ms']:.2f} kernel), "
              f"bmm / ours {r['vs_bmm']:.2f}; ours {r['ours_kernel_ms'] * 1e3:.1f} us, {flops / r['ours_kernel_ms'] / 1e9:.1f} TFLOP/s"
              + (f" | before: loop / ours {o['speedup_loop']:.2f} ({o['loop_kernel_ms'] / o['ours_kernel_ms']:.2f}), bmm / ours {o['vs_bmm']:.2f}, "
                 f"ours {o['ours_kernel_ms'] * 1e3:.1f} us; after / before {r['ours_kernel_ms'] / o['ours_kernel_ms']:.3f}" if o else ""))
