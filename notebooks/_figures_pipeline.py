"""Drawings of notebooks 05 (the ``cp.async`` ring, the stages' timings, warp states) and 06
(waves, the shapes of the stored benchmark run). Drawing code only: every model and every
number is computed in the notebook and passed in, so that the notebook shows what the picture
rests on."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch, Rectangle

# --- 05: the cp.async ring --------------------------------------------------------------------

_RING_COLOURS = {
    "compute": "C2",  # the tile the FMAs read
    "issued": "C4",  # copies issued in this step (into the slot the previous tile used)
    "ahead": "#d9c8ea",  # issued in an earlier step: in flight, or landed and not waited for
    "empty": "white",
}


def draw_ring(rings) -> None:
    """One panel per ring: ``rings`` is a list of ``(title, NBUF, BK, steps, smem)``, ``steps``
    the notebook's replay of the K loop (per step ``t``: ``holds`` {slot: K tile}, ``compute``
    the slot of tile ``t``, ``issued`` the slot refilled in this step or None, ``in_flight`` the
    K tiles of the groups still pending after ``wait_group(NBUF - 2)``), ``smem`` a list of
    ``(label, bytes)`` of the dynamic SMEM in order."""
    heights = [1.2 + 0.55 * nbuf for _, nbuf, _, _, _ in rings]
    fig, axes = plt.subplots(
        len(rings),
        1,
        figsize=(12, 1.2 + sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, (title, nbuf, bk, steps, smem) in zip(axes[:, 0], rings, strict=True):
        T = len(steps)
        for t, st in enumerate(steps):
            for slot in range(nbuf):
                tile = st["holds"].get(slot)
                if slot == st["compute"]:
                    kind, text = "compute", f"FMA on\ntile {tile}"
                elif slot == st["issued"]:
                    kind, text = "issued", f"cp.async\ntile {tile}"
                elif tile is not None and tile > t:
                    kind, text = "ahead", f"tile {tile}"
                else:
                    kind, text = "empty", "" if tile is None else f"(tile {tile}, done)"
                ax.add_patch(
                    Rectangle(
                        (t, slot), 1, 1, facecolor=_RING_COLOURS[kind], edgecolor="black", lw=0.5
                    )
                )
                white = kind in ("compute", "issued")
                ax.text(
                    t + 0.5,
                    slot + 0.5,
                    text,
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    color="white" if white else "black",
                )
            ax.text(
                t + 0.5,
                nbuf + 0.12,
                f"{len(st['in_flight'])} in flight",
                ha="center",
                va="top",
                fontsize=6.5,
            )
        ax.set(xlim=(0, T), ylim=(nbuf + 0.45, -0.05))
        ax.set_xticks(
            np.arange(T) + 0.5,
            [f"step {t}\nk {t * bk}-{t * bk + bk - 1}" for t in range(T)],
            fontsize=7,
        )
        ax.set_yticks(np.arange(nbuf) + 0.5, [f"slot {s}" for s in range(nbuf)])
        total = sum(b for _, b in smem)
        layout = " | ".join(f"{label} {b / 1024:.1f} KiB" for label, b in smem)
        ax.set_title(
            f"{title}: NBUF = {nbuf}, BK = {bk}; wait_group({nbuf - 2}) at the top of each step\n"
            f"dynamic SMEM {total / 1024:.1f} KiB = {layout}",
            loc="left",
            fontsize=8,
        )
    keys = [
        Patch(facecolor=_RING_COLOURS[k], edgecolor="black", label=label)
        for k, label in (
            ("compute", "tile t: waited for, FMAs read it"),
            ("issued", "tile t + NBUF - 1: copies issued this step"),
            ("ahead", "issued earlier, not yet waited for"),
        )
    ]
    fig.legend(handles=keys, loc="lower center", ncol=3, fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    plt.show()


# --- 05: timings of the stages ----------------------------------------------------------------


def plot_relative(sizes, series: dict, base_label: str, source: str) -> None:
    """Time of ``base_label``'s stage over each stage's (above 1: faster than the base) against
    N, one panel per timing. ``series``: ``{timing: {label: [ratio or None per size]}}``;
    ``source``: a short line saying where the timings come from (the figure's title)."""
    fig, axes = plt.subplots(1, len(series), figsize=(12, 4), sharey=True, squeeze=False)
    for ax, (timing, lines) in zip(axes[0], series.items(), strict=True):
        for i, (label, ratios) in enumerate(lines.items()):
            pts = [(n, r) for n, r in zip(sizes, ratios, strict=True) if r is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", ms=3, color=f"C{i}", label=label)
        ax.axhline(1, color="black", lw=1, ls="--")
        ax.set(
            xscale="log",
            xlabel="N (M = N = K)",
            title=f"{timing} time",
        )
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(f"time of {base_label} / time of the stage")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(source, fontsize=9)
    fig.tight_layout()
    plt.show()


# --- 05: Nsight Compute's warp states -----------------------------------------------------------


def plot_stalls(targets, states: dict, issue: list, title: str) -> None:
    """Left: per target, the cycles between two instructions of one warp, stacked by the state
    the warp was in (``states``: ``{state: [value per target]}``, Nsight Compute's warp state
    statistics). Right: the share of cycles in which a scheduler issued (``issue``)."""
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [2.2, 1]}, sharex=False
    )
    x = np.arange(len(targets))
    bottom = np.zeros(len(targets))
    cmap = plt.get_cmap("tab20")
    values = {s: np.array([0.0 if a is None else a for a in vals]) for s, vals in states.items()}
    tallest = max(sum(values.values()))
    for i, (state, v) in enumerate(values.items()):
        # a state too thin to see in the stack says so, with its largest value, in the legend
        label = state if v.max() >= 0.02 * tallest else f"{state} (at most {v.max():.2f}: too thin)"
        ax.bar(x, v, 0.6, bottom=bottom, color=cmap(i % 20), edgecolor="black", lw=0.3, label=label)
        bottom += v
    ax.set_xticks(x, targets, fontsize=8)
    ax.set(ylabel="cycles per issued instruction, per warp", title=title)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    ax.grid(axis="y", alpha=0.3)
    bars = bx.bar(x, issue, 0.6, color="C2", edgecolor="black", lw=0.4)
    bx.bar_label(bars, fmt="%.2f", fontsize=7)
    bx.set_xticks(x, targets, rotation=30, ha="right", fontsize=8)
    bx.set(ylabel="instructions issued per scheduler cycle", ylim=(0, 1), title="issue slots used")
    bx.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    plt.show()


# --- 06: waves ----------------------------------------------------------------------------------


def draw_waves(ax, w: dict, slots: int, what: str) -> None:
    """The blocks of one grid laid out in waves: one column per resident-block slot, one row per
    wave, idle slots in red. ``w``: the notebook's wave model for the grid (``blocks``,
    ``waves``, ``full_waves``, ``busy``); ``what`` says what the slots and tiles are."""
    grid = np.zeros((w["full_waves"], slots))
    grid.flat[: w["blocks"]] = 1
    ax.imshow(grid, cmap="RdYlGn", vmin=-0.2, vmax=1.1, aspect="auto", interpolation="nearest")
    ax.set(
        xlabel="resident-block slot",
        ylabel="wave",
        title=f"{what}: {w['blocks']} blocks = {w['waves']:.2f} waves of {slots} -> "
        f"{w['full_waves']} wave(s), {w['busy']:.0%} of the slots busy",
    )
    ax.set_yticks(range(w["full_waves"]))


def plot_busy(sizes, curves: dict, title: str, marks=()) -> None:
    """Busy share of the slots against N: ``curves`` ``{label: [share per size]}``."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for label, ys in curves.items():
        ax.plot(sizes, ys, lw=1, label=label)
    for n in marks:
        ax.axvline(n, color="0.5", ls=":", lw=1)
        ax.text(n, 1.01, str(n), fontsize=7, ha="center", va="bottom")
    ax.set(xlabel="N (N x N output)", ylabel="busy share of the slots", title=title, ylim=(0, 1.08))
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    plt.show()


# --- 06: every shape of the committed run ------------------------------------------------------


def plot_shapes(shapes, series: dict, picked, source: str) -> None:
    """Percent of cuBLAS FP32 (kernel time) per shape of the committed run, one marker per stage
    (``series``: ``{label: [percent or None per shape]}``), and the automatic choice's as bars
    labelled with the stage it ran (``picked``: ``[(percent or None, stage name)]``)."""
    fig, ax = plt.subplots(figsize=(12, 4.4))
    x = np.arange(len(shapes))
    pct = [p or 0 for p, _ in picked]
    bars = ax.bar(x, pct, 0.6, color="0.85", edgecolor="0.4", label="sgemm (auto)")
    for b, (p, name) in zip(bars, picked, strict=True):
        if p is not None:
            ax.text(
                b.get_x() + b.get_width() / 2,
                2,
                name,
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=7,
            )
    for i, (label, vals) in enumerate(series.items()):
        pts = [(xi, v) for xi, v in zip(x, vals, strict=True) if v is not None]
        if pts:
            ax.scatter(*zip(*pts, strict=True), s=22, color=f"C{i}", label=label, zorder=3)
    ax.axhline(100, color="black", ls="--", lw=1)
    ax.set_xticks(x, shapes, rotation=30, ha="right", fontsize=7)
    ax.set(ylabel="% of cuBLAS FP32 (kernel time)", title=source)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    plt.show()
