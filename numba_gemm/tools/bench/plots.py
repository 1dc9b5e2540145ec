"""The bench's plots (matplotlib's Agg canvas through ``matplotlib.figure.Figure``: no pyplot,
no display), one panel per precision group that the run has (:data:`PANELS`: FP32, TF32 /
3xTF32, FP16, BF16), each with the cuBLAS lines its stages are rated against
(``report.BASELINE_OF``):

- ``gflops_vs_size.png``: kernel-time GFLOP/s of every stage, ``auto`` and the peers against the
  size;
- ``pct_cublas_largest.png``: kernel-time % of cuBLAS (in each stage's precision) per stage at
  the largest size;
- ``end_to_end_vs_size.png`` (when there are end-to-end rows): end-to-end GFLOP/s of ``auto``
  and the peers, with ``auto``'s kernel time dotted for comparison.

Within a panel every line has its own colour and marker (:func:`line_style`); the cuBLAS lines
are black, one dash pattern per precision. GFLOP/s = 2*M*N*K / median time; the size axis is
``(M*N*K)^(1/3)`` on a log2 scale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .report import (
    AUTO,
    BASELINE_NAMES,
    BASELINE_OF,
    CUBLAS,
    CUBLAS_BF16,
    CUBLAS_FP16,
    CUBLAS_FP32,
    CUBLAS_TF32,
    END_TO_END,
    KERNEL,
    OK,
    precision_of,
)
from .sizes import size_label

#: Panels, in order: (title, precisions drawn in it). 3xTF32 sits with TF32 (both tensor-core
#: stages built on the TF32 mma) though it is rated against cuBLAS FP32 (FP32-accurate), whose
#: line that panel then shows beside cuBLAS TF32's.
PANELS = (
    ("FP32", ("fp32",)),
    ("TF32 / 3xTF32", ("tf32", "3xtf32")),
    ("FP16", ("fp16",)),
    ("BF16", ("bf16",)),
)
#: The cuBLAS lines: black, told apart by their dashes.
BASELINE_DASHES = {CUBLAS_FP32: "--", CUBLAS_TF32: ":", CUBLAS_FP16: "-.", CUBLAS_BF16: "-."}
#: Bar colours of the % of cuBLAS plot, by the cuBLAS a bar is rated against.
BASELINE_COLOURS = {
    CUBLAS_FP32: "tab:blue",
    CUBLAS_TF32: "tab:green",
    CUBLAS_FP16: "tab:purple",
    CUBLAS_BF16: "tab:orange",
}
#: Ten colours and seven markers: 7 and 10 share no factor, so the first 70 lines of a panel each
#: get a (colour, marker) pair of their own (a line's colour alone repeats after ten, which is
#: what one 20-line axis with the default colour cycle showed).
COLOURS = tuple(f"C{i}" for i in range(10))
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def line_style(i: int) -> dict[str, Any]:
    """Colour, marker and line style of the ``i``-th (from 0) non-cuBLAS line of a panel; the
    pairs ``(colour, marker)`` of ``i < 70`` are all different, and lines past the first ten
    are dashed as well."""
    return dict(
        color=COLOURS[i % len(COLOURS)],
        marker=MARKERS[i % len(MARKERS)],
        linestyle="-" if i < len(COLOURS) else "--",
    )


def _kind(r: dict) -> str:
    return r.get("timing") or KERNEL


def _series(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["stage"], []).append(r)
    return out


def panels(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """``[(title, rows)]``: one panel per :data:`PANELS` group that ``rows`` has a row of, in
    that order, holding the group's rows and the cuBLAS rows its precisions are rated against
    (``report.BASELINE_OF``), cuBLAS first."""
    out = []
    for title, precisions in PANELS:
        own = [r for r in rows if precision_of(r) in precisions]
        if not own:
            continue
        wanted = {BASELINE_OF[precision_of(r)] for r in own}
        base = [r for r in rows if r["stage"] in wanted and r["stage"] in CUBLAS]
        rest = [r for r in own if r["stage"] not in CUBLAS]
        out.append((title, base + rest))
    return out


def _size_axis(ax: Any, rows: list[dict], label: bool = True) -> dict:
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))
    x_of = {s: (s[0] * s[1] * s[2]) ** (1 / 3) for s in shapes}
    names = {s: str(s[0]) if s[0] == s[1] == s[2] else size_label(*s) for s in shapes}
    ax.set_xscale("log", base=2)
    ticks = sorted(set(x_of.values()))
    labels = [" / ".join(sorted({names[s] for s in shapes if x_of[s] == t})) for t in ticks]
    ax.set_xticks(ticks, labels, rotation=30, ha="right")
    ax.minorticks_off()
    if label:
        ax.set_xlabel("size: N for N x N x N, else M x N x K (axis: (M*N*K)^(1/3), log2)")
    return x_of


def _points(rs: list[dict], x_of: dict) -> list[tuple[float, float]]:
    return sorted(
        (x_of[(r["M"], r["N"], r["K"])], r["gflops"])
        for r in rs
        if r["status"] == OK and r["gflops"] and r["gflops"] > 0
    )


def throughput_figure(
    rows: list[dict], *, title: str, ylabel: str, suffix: str = "", extra: list[dict] = ()
) -> Any:
    """A ``Figure`` of GFLOP/s against size, one panel per precision group (:func:`panels`):
    the cuBLAS lines black and thick, every other line its own :func:`line_style`; ``suffix``
    is appended to the labels; ``extra`` rows (``auto``'s kernel time beside its end-to-end
    time) are drawn grey and dotted in the panel of their precision."""
    groups = panels(rows) or [("", [])]
    fig = Figure(figsize=(10, 1.0 + 4.2 * len(groups)), layout="constrained")
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    fig.suptitle(title, fontsize="medium")
    for ax, (name, rs) in zip(axes, groups, strict=True):
        x_of = _size_axis(ax, [*rows, *extra], label=ax is axes[-1])
        plotted, i = 0, 0
        for stage, series in _series(rs).items():
            pts = _points(series, x_of)
            if stage in CUBLAS:
                style = dict(color="black", linestyle=BASELINE_DASHES[stage], marker="o")
                width = 2.5
            else:
                style, i = line_style(i), i + 1
                width = 2.5 if stage == AUTO else 1.5
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    linewidth=width,
                    label=f"{series[0]['label']}{suffix}",
                    **style,
                )
                plotted += 1
        own = dict(PANELS).get(name, ())
        for series in _series([r for r in extra if precision_of(r) in own]).values():
            pts = _points(series, x_of)
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    marker=".",
                    linestyle=":",
                    color="gray",
                    label=f"{series[0]['label']}, kernel time",
                )
                plotted += 1
        if plotted:
            ax.set_yscale("log")
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            ax.text(0.5, 0.5, "nothing measured", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(name, fontsize="medium")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    return fig


def pct_figure(rows: list[dict], *, title: str) -> Any:
    """A ``Figure`` of bars, one per stage, ``auto`` and Triton of ``rows`` (one size, kernel
    time), one panel per precision group: % of the GFLOP/s of cuBLAS in each bar's precision,
    coloured by that cuBLAS (100 % = as fast as it); a panel without any cuBLAS ratio shows
    GFLOP/s instead. FAILED and SKIPPED bars are empty and labelled so."""
    groups = [(n, [r for r in rs if r["stage"] not in CUBLAS]) for n, rs in panels(rows)]
    groups = [(n, rs) for n, rs in groups if rs] or [("", [])]
    fig = Figure(figsize=(9, 1.0 + 3.8 * len(groups)), layout="constrained")
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    fig.suptitle(title, fontsize="medium")
    for ax, (name, rs) in zip(axes, groups, strict=True):
        has_pct = any(r["pct_cublas"] for r in rs if r["status"] == OK)
        key, scale = ("pct_cublas", 100.0) if has_pct else ("gflops", 1.0)
        heights = [(r[key] or 0.0) * scale if r["status"] == OK else 0.0 for r in rs]
        refs = [BASELINE_OF[precision_of(r)] for r in rs]
        colours = [
            BASELINE_COLOURS[b] if has_pct and r["pct_cublas"] else "tab:gray"
            for b, r in zip(refs, rs, strict=True)
        ]
        bars = ax.bar(
            range(len(rs)),
            heights,
            color=colours,
            edgecolor=["black" if r["stage"] == AUTO else "none" for r in rs],
            linewidth=1.5,
        )
        texts = []
        for h, r in zip(heights, rs, strict=True):
            if r["status"] != OK:
                texts.append(r["status"])
            elif has_pct:
                texts.append(f"{h:.0f}%" if r["pct_cublas"] else "no cuBLAS")
            else:
                texts.append(f"{h:.3g}")
        ax.bar_label(bars, labels=texts, fontsize="small")
        ax.set_xticks(range(len(rs)), [r["stage"] for r in rs], rotation=30, ha="right")
        if has_pct:
            ax.axhline(100.0, color="black", linestyle="--", linewidth=1)
            used = [
                b
                for b in BASELINE_COLOURS
                if any(rb == b and r["pct_cublas"] for rb, r in zip(refs, rs, strict=True))
            ]
            ax.legend(
                handles=[
                    Patch(color=BASELINE_COLOURS[b], label=f"vs {BASELINE_NAMES[b]}") for b in used
                ],
                fontsize="small",
                loc="upper left",
                bbox_to_anchor=(1.01, 1.0),
            )
            ax.set_ylim(0, 1.2 * max([100.0, *heights]))
            ax.set_ylabel("% of cuBLAS GFLOP/s,\nsame precision")
            ax.set_title(name, fontsize="medium")
        else:
            ax.set_ylabel("GFLOP/s = 2*M*N*K /\nmedian kernel time")
            ax.set_title(f"{name} (no cuBLAS of this precision: GFLOP/s)", fontsize="medium")
        ax.grid(True, axis="y", alpha=0.3)
    return fig


def plot(rows: list[dict], out_dir: Path, *, gpu: str, mode: str) -> list[Path]:
    """Draw the plots into ``out_dir``; returns their paths (see the module docstring).

    Importing this module raises ImportError when matplotlib is not installed (the command line
    then says so and writes no plots).
    """
    on = "the CUDA simulator" if mode == "simulator" else gpu
    sim = " (host wall-clock, not comparable with a GPU)" if mode == "simulator" else ""
    kernel_rows = [r for r in rows if _kind(r) == KERNEL]
    paths = []

    fig = throughput_figure(
        kernel_rows,
        title=f"GEMM throughput (kernel time) on {on}{sim}",
        ylabel="GFLOP/s = 2*M*N*K / median kernel time",
    )
    paths.append(out_dir / "gflops_vs_size.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")

    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in kernel_rows))
    largest = max(shapes, key=lambda s: (s[0] * s[1] * s[2], s))
    at = [r for r in kernel_rows if (r["M"], r["N"], r["K"]) == largest]
    what = (
        "% of cuBLAS in the same precision"
        if any(r["pct_cublas"] for r in at if r["status"] == OK)
        else "GFLOP/s (no cuBLAS baseline)"
    )
    fig = pct_figure(at, title=f"{what} at {size_label(*largest)} on {on}{sim}, kernel time")
    paths.append(out_dir / "pct_cublas_largest.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")

    e2e = [r for r in rows if _kind(r) == END_TO_END]
    if e2e:
        fig = throughput_figure(
            e2e,
            title=f"The call users make, back to back, on {on}{sim}",
            ylabel="GFLOP/s = 2*M*N*K / median time per call",
            suffix=", end to end",
            extra=[r for r in kernel_rows if r["stage"] == AUTO],
        )
        paths.append(out_dir / "end_to_end_vs_size.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    return paths
