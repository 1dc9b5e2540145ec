"""Drawings of notebook 07 (tensor cores). Drawing code only: each function draws the data it is
given, which the notebook computes from the package's kernels and models (what a warp's
``ldmatrix`` returned, the H200 benchmark run stored in the repository)."""

from __future__ import annotations

import numpy as np

#: One colour per ldmatrix result register r0..r3 (= per 8x8 matrix of an .x4 load).
REG_COLORS = ("#8ecae6", "#ffb703", "#90be6d", "#f4978e")


def draw_ldmatrix(ax, shape, seg: int, addresses, words, title: str) -> None:
    """One warp's ``ldmatrix`` on an SMEM tile of ``shape`` (rows, elements).

    ``addresses``: per lane, the ``(row, column)`` of the 16-byte row (``seg`` elements) whose
    address it gave: outlined in black, the lane written beside it (left of the tile for rows
    that start at column 0, right of it for the others). ``words``: ``(lane, register,
    [(row, column), ...])`` for every 32-bit result register of every lane and the elements it
    received (one float32, or two 16-bit halves, low half first): each word is outlined, filled
    with the colour of its register and labelled with the receiving lane. Asserts that every
    element was received exactly once.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    R, C = shape
    reg = np.full(shape, -1)
    for _, k, elems in words:
        for r, c in elems:
            assert reg[r, c] == -1, f"element ({r}, {c}) received twice"
            reg[r, c] = k
    assert (reg >= 0).all(), "an element no lane received"
    ax.imshow(reg, cmap=ListedColormap(REG_COLORS), vmin=-0.5, vmax=3.5)
    for lane, _, elems in words:
        rs, cs = [r for r, _ in elems], [c for _, c in elems]
        x0, y0 = min(cs) - 0.5, min(rs) - 0.5
        w, h = max(cs) - min(cs) + 1, max(rs) - min(rs) + 1
        ax.add_patch(Rectangle((x0, y0), w, h, fill=False, lw=0.4, ec="0.35"))
        ax.text(
            x0 + w / 2,
            y0 + h / 2,
            str(lane),
            ha="center",
            va="center",
            fontsize=5.5,
            zorder=3,
            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8),
        )
    for lane, (r, c) in enumerate(addresses):
        ax.add_patch(
            Rectangle((c - 0.5, r - 0.5), seg, 1, fill=False, lw=1.3, ec="black", zorder=2)
        )
        if c == 0:
            ax.text(-0.7, r, f"lane {lane} \u2192", ha="right", va="center", fontsize=5.5)
        else:
            ax.text(c + seg - 0.3, r, f"\u2190 lane {lane}", ha="left", va="center", fontsize=5.5)
    ax.set_xticks(range(C))
    ax.set_yticks([])
    ax.tick_params(labelsize=6, length=0)
    ax.set(xlabel="column (element) of the SMEM tile; rows 0, 1, ... from the top", title=title)
    keys = [Patch(color=REG_COLORS[k], label=f"r{k}") for k in range(int(reg.max()) + 1)]
    ax.legend(
        handles=keys,
        title="colour: the register that receives it",
        fontsize=6,
        title_fontsize=6,
        ncol=len(keys),
        loc="upper center",
        bbox_to_anchor=(0.5, -0.07),
    )


def plot_tensor_cores(series, ceilings, title: str) -> None:
    """Left: TFLOP/s against N (N^3 products) of each ``series`` ``{label: dict(ns, tflops,
    color, style)}``, with the ``ceilings`` ``{label: (TFLOP/s, color)}`` as dotted lines named
    in the legend. Right: each series' ``pct`` (% of the cuBLAS of its own precision) where it
    has one."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8))
    for label, s in series.items():
        ax.plot(s["ns"], s["tflops"], s["style"], color=s["color"], ms=4, label=label)
        if s.get("pct") is not None:
            bx.plot(s["ns"], s["pct"], s["style"], color=s["color"], ms=4, label=label)
    for label, (value, color) in ceilings.items():
        ax.axhline(value, color=color, ls=":", lw=1.4, label=label)
    ns = sorted({n for s in series.values() for n in s["ns"]})
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        a.set_xticks(ns, [str(n) for n in ns])
        a.minorticks_off()
        a.grid(alpha=0.3)
        a.set_xlabel("N (M = N = K)")
    ax.set(
        ylabel="TFLOP/s",
        title="TFLOP/s; dashed, grey/black: cuBLAS; dotted: estimated ceilings",
    )
    ax.legend(fontsize=6.5, loc="upper left")
    bx.axhline(100, color="black", lw=0.8)
    bx.set(ylabel="% of cuBLAS", title="% of cuBLAS in the stage's own precision")
    bx.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    plt.show()
