"""The bench's plots (matplotlib's Agg canvas through ``matplotlib.figure.Figure``: no pyplot,
no display).

- ``gflops_vs_size.png``: kernel-time GFLOP/s of every stage, ``auto`` and the peers against the
  size;
- ``pct_cublas_largest.png``: kernel-time % of cuBLAS FP32 per stage at the largest size;
- ``end_to_end_vs_size.png`` (when there are end-to-end rows): end-to-end GFLOP/s of ``auto``
  and the peers, with ``auto``'s kernel time dashed for comparison.

GFLOP/s = 2*M*N*K / median time; the size axis is ``(M*N*K)^(1/3)`` on a log2 scale.
"""

from __future__ import annotations

from pathlib import Path

from .report import AUTO, CUBLAS_FP32, CUBLAS_TF32, END_TO_END, KERNEL, OK, PEERS
from .sizes import size_label

_STYLE = {CUBLAS_FP32: "--", CUBLAS_TF32: ":"}


def _kind(r: dict) -> str:
    return r.get("timing") or KERNEL


def _series(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["stage"], []).append(r)
    return out


def _size_axis(ax, rows: list[dict]) -> dict:
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))
    x_of = {s: (s[0] * s[1] * s[2]) ** (1 / 3) for s in shapes}
    names = {s: str(s[0]) if s[0] == s[1] == s[2] else size_label(*s) for s in shapes}
    ax.set_xscale("log", base=2)
    ticks = sorted(set(x_of.values()))
    labels = [" / ".join(sorted({names[s] for s in shapes if x_of[s] == t})) for t in ticks]
    ax.set_xticks(ticks, labels, rotation=30, ha="right")
    ax.minorticks_off()
    ax.set_xlabel("size: N for N x N x N, else M x N x K (axis: (M*N*K)^(1/3), log2)")
    return x_of


def _points(rs: list[dict], x_of: dict) -> list[tuple[float, float]]:
    return sorted(
        (x_of[(r["M"], r["N"], r["K"])], r["gflops"])
        for r in rs
        if r["status"] == OK and r["gflops"] and r["gflops"] > 0
    )


def plot(rows: list[dict], out_dir: Path, *, gpu: str, mode: str) -> list[Path]:
    """Draw the plots into ``out_dir``; returns their paths (see the module docstring).

    Raises:
        ImportError: matplotlib is not installed.
    """
    from matplotlib.figure import Figure

    on = "the CUDA simulator" if mode == "simulator" else gpu
    sim = " (host wall-clock, not comparable with a GPU)" if mode == "simulator" else ""
    kernel_rows = [r for r in rows if _kind(r) == KERNEL]
    paths = []

    fig = Figure(figsize=(9, 5.5))
    ax = fig.subplots()
    x_of = _size_axis(ax, kernel_rows)
    plotted = False
    for stage, rs in _series(kernel_rows).items():
        pts = _points(rs, x_of)
        if not pts:
            continue
        peer = stage in PEERS
        ax.plot(
            *zip(*pts, strict=True),
            marker="o",
            linestyle=_STYLE.get(stage, "-"),
            color="black" if peer and stage != "triton" else None,
            linewidth=2.5 if peer or stage == AUTO else 1.5,
            label=rs[0]["label"],
        )
        plotted = True
    if plotted:
        ax.set_yscale("log")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_ylabel("GFLOP/s = 2*M*N*K / median kernel time")
    ax.set_title(f"SGEMM throughput (kernel time) on {on}{sim}", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    paths.append(out_dir / "gflops_vs_size.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")

    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in kernel_rows))
    largest = max(shapes, key=lambda s: (s[0] * s[1] * s[2], s))
    at = [r for r in kernel_rows if (r["M"], r["N"], r["K"]) == largest]
    base = {r["stage"]: r for r in at if r["stage"] in PEERS}
    stage_rows = [r for r in at if r["stage"] not in base]
    has_pct = CUBLAS_FP32 in base and base[CUBLAS_FP32]["status"] == OK
    key, scale = ("pct_cublas", 100.0) if has_pct else ("gflops", 1.0)
    heights = [(r[key] or 0.0) * scale if r["status"] == OK else 0.0 for r in stage_rows]
    fig = Figure(figsize=(9, 5))
    ax = fig.subplots()
    bars = ax.bar(
        range(len(stage_rows)),
        heights,
        color=["tab:orange" if r["stage"] == AUTO else "tab:blue" for r in stage_rows],
    )
    ax.bar_label(
        bars,
        labels=[
            (f"{h:.0f}%" if has_pct else f"{h:.3g}") if r["status"] == OK else r["status"]
            for h, r in zip(heights, stage_rows, strict=True)
        ],
        fontsize="small",
    )
    ax.set_xticks(range(len(stage_rows)), [r["stage"] for r in stage_rows], rotation=30, ha="right")
    title = f"{size_label(*largest)} on {on}{sim}, kernel time"
    if has_pct:
        ax.axhline(100.0, color="black", linestyle="--", label=base[CUBLAS_FP32]["label"])
        ax.set_ylim(0, 1.2 * max([100.0, *heights]))
        ax.legend(fontsize="small", loc="upper left")
        ax.set_ylabel("% of cuBLAS FP32 GFLOP/s")
        for extra in (CUBLAS_TF32, "triton"):
            r = base.get(extra)
            if r is not None and r["status"] == OK and r["pct_cublas"]:
                title += f"; {r['label'].split(',')[0]}: {100 * r['pct_cublas']:.0f}%"
        ax.set_title(f"% of cuBLAS FP32 at {title}", fontsize="medium")
    else:
        ax.set_ylabel("GFLOP/s = 2*M*N*K / median kernel time")
        ax.set_title(f"GFLOP/s at {title} (no cuBLAS baseline)", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    paths.append(out_dir / "pct_cublas_largest.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")

    e2e = [r for r in rows if _kind(r) == END_TO_END]
    if e2e:
        fig = Figure(figsize=(9, 5.5))
        ax = fig.subplots()
        x_of = _size_axis(ax, e2e)
        for stage, rs in _series(e2e).items():
            pts = _points(rs, x_of)
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    marker="o",
                    linestyle=_STYLE.get(stage, "-"),
                    label=f"{rs[0]['label']}, end to end",
                )
        auto_k = _points([r for r in kernel_rows if r["stage"] == AUTO], x_of)
        if auto_k:
            ax.plot(
                *zip(*auto_k, strict=True),
                marker=".",
                linestyle=":",
                color="gray",
                label="sgemm (auto), kernel time",
            )
        ax.set_yscale("log")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_ylabel("GFLOP/s = 2*M*N*K / median time per call")
        ax.set_title(f"The call users make, back to back, on {on}{sim}", fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
        paths.append(out_dir / "end_to_end_vs_size.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    return paths
