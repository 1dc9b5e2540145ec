"""Drawings of notebook 08 (Hopper: wgmma, TMA, warp specialization). Drawing code only: every
function takes the numbers it draws (index maps, offsets, schedules) from the notebook, which
computes them with the package's own functions and constants, so a picture changes when the code
does."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch, Rectangle


def draw_accumulators(owner: np.ndarray, zoom: tuple[int, int] = (16, 16)) -> None:
    """A warpgroup's accumulator tile ``owner`` (``(64, n, 3)``: warp, lane, accumulator index
    of each element of D): left, the whole tile coloured by warp; right, warp 0's top-left
    ``zoom`` corner labelled lane / accumulator, coloured by lane group ``g = lane >> 2``."""
    warp, lane, acc = owner[..., 0], owner[..., 1], owner[..., 2]
    rows, n = warp.shape
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 7), gridspec_kw={"width_ratios": [0.8, 1.5]})
    shade = warp * 8 + (lane >> 2)  # 4 warps x 8 lane groups
    ax.imshow(warp, cmap="Pastel1", vmin=0, vmax=8, aspect="auto")
    for w in range(4):
        ax.axhline(16 * w - 0.5, color="black", lw=1)
        ax.text(
            n + 0.5,
            16 * w + 8,
            f"warp {w}\nthreads\n{32 * w}-{32 * w + 31}",
            va="center",
            fontsize=7,
        )
    for c in range(0, n + 1, 8):
        ax.axvline(c - 0.5, color="0.5", lw=0.5)
    ax.set(
        title=f"D (64 x {n}) of one wgmma: warp w holds rows 16w .. 16w+15\n"
        "(each 8-column block: the mma.m16n8 accumulator map of notebook 07)",
        xlabel="column of D",
        ylabel="row of D",
        xlim=(-0.5, n + 9),
    )
    zr, zc = zoom
    bx.imshow(shade[:zr, :zc] % 20, cmap="tab20c", vmin=0, vmax=19, alpha=0.6)
    for r in range(zr):
        for c in range(zc):
            bx.text(c, r, f"{lane[r, c]}\n{acc[r, c]}", ha="center", va="center", fontsize=7)
    bx.set(
        title=f"warp 0, rows 0-{zr - 1}, columns 0-{zc - 1}: lane (top) and its acc[] index "
        "(bottom)",
        xlabel="column of D",
        ylabel="row of D",
    )
    bx.set_xticks(range(zc))
    bx.set_yticks(range(zr))
    fig.tight_layout()
    plt.show()


#: The fields of a wgmma matrix descriptor: (first bit, last bit + 1, name).
DESCRIPTOR_FIELDS = [
    (0, 14, "start address >> 4"),
    (16, 30, "leading byte offset >> 4"),
    (32, 46, "stride byte offset >> 4"),
    (49, 52, "base\noffset"),
    (62, 64, "swizzle mode (1: 128 B)"),
]


def draw_descriptors(descs: dict[str, int]) -> None:
    """The 64 bits of each descriptor in ``descs`` (``{label: int}``), one row each, fields of
    :data:`DESCRIPTOR_FIELDS` outlined with their values; bits set in black."""
    fig, ax = plt.subplots(figsize=(13, 1.1 + 0.9 * len(descs)))
    for row, (label, d) in enumerate(descs.items()):
        y = -row * 1.6
        for b in range(64):
            x = 63 - b  # bit 63 on the left
            ax.add_patch(
                Rectangle(
                    (x, y),
                    1,
                    0.6,
                    facecolor="black" if d >> b & 1 else "white",
                    edgecolor="0.7",
                    lw=0.4,
                )
            )
        for lo, hi, name in DESCRIPTOR_FIELDS:
            value = (d >> lo) & ((1 << (hi - lo)) - 1)
            x0 = 64 - hi
            ax.add_patch(
                Rectangle((x0, y - 0.05), hi - lo, 0.7, fill=False, edgecolor="C3", lw=1.2)
            )
            text = name.split("\n")[0] if hi - lo < 4 else name
            ax.text(
                x0 + (hi - lo) / 2,
                y + 0.75,
                f"{text}: {value}",
                ha="center",
                va="bottom",
                fontsize=6.5,
                color="C3",
            )
        ax.text(-1, y + 0.3, f"{label}\n{d:#018x}", ha="right", va="center", fontsize=7.5)
    ax.set(
        xlim=(-22, 64.5),
        ylim=(-1.6 * len(descs) + 0.8, 1.8),
        title="wgmma matrix descriptors, bit 63 (left) to bit 0 (right); black = 1",
    )
    ax.set_xticks([63.5 - b for b in (0, 14, 16, 30, 32, 46, 49, 52, 62)])
    ax.set_xticklabels(["0", "14", "16", "30", "32", "46", "49", "52", "62"], fontsize=6)
    ax.set_yticks([])
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    fig.tight_layout()
    plt.show()


def draw_swizzle(atom: np.ndarray, panels, draw_banks) -> None:
    """Left: the 128-byte swizzle's atom, ``atom[row, position]`` = the logical 16-byte chunk
    stored at that position of that 128-byte row. Right: ``panels`` ``[(lane_words, title)]``
    drawn by ``draw_banks`` (notebook 04's bank picture)."""
    fig, axes = plt.subplots(
        1,
        1 + len(panels),
        figsize=(14, 3.8),
        gridspec_kw={"width_ratios": [0.8] + [1.4] * len(panels)},
    )
    ax = axes[0]
    ax.imshow(atom, cmap="tab10", vmin=0, vmax=9, alpha=0.55)
    for r in range(atom.shape[0]):
        for p in range(atom.shape[1]):
            ax.text(p, r, str(atom[r, p]), ha="center", va="center", fontsize=8)
    ax.set(
        title="128-byte swizzle: logical chunk c of row r\nstored at position c ^ (r % 8)",
        xlabel="16-byte position in the 128-byte row (banks 4p .. 4p+3)",
        ylabel="row (128 bytes)",
    )
    ax.set_xticks(range(atom.shape[1]))
    ax.set_yticks(range(atom.shape[0]))
    for bx, (lane_words, title) in zip(axes[1:], panels, strict=True):
        draw_banks(bx, lane_words, title)
    top = max(bx.get_ylim()[1] for bx in axes[1:])  # one vertical scale for the bank panels
    for bx in axes[1:]:
        bx.set_ylim(0, top)
    fig.tight_layout()
    plt.show()


def draw_rs_operand(lanes: np.ndarray, cols: np.ndarray, title: str) -> None:
    """Stage 18's register operand: ``lanes[k, n]``, the lane of warp 0 that loads ``Bs[k, n]``
    (8 rows of K, the warp's 16 columns), and ``cols[row]``, the C column that row ``row`` of
    the product's 16-row A fragment stands for."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 3.2), gridspec_kw={"width_ratios": [2, 1.2]})
    ax.imshow(lanes >> 2, cmap="tab10", vmin=0, vmax=9, alpha=0.5, aspect="auto")
    for k in range(lanes.shape[0]):
        for n in range(lanes.shape[1]):
            ax.text(n, k, str(lanes[k, n]), ha="center", va="center", fontsize=7)
    ax.set(title=title, xlabel="column n of the B tile (= column of C)", ylabel="k")
    ax.set_xticks(range(lanes.shape[1]))
    bx.barh(range(len(cols)), cols, color=[f"C{(r % 8)}" for r in range(len(cols))], alpha=0.6)
    for r, c in enumerate(cols):
        bx.text(c + 0.2, r, f"row {r} -> column {c}", va="center", fontsize=7)
    bx.set(
        title="row of wgmma's first operand (B^T, from registers) -> C column",
        xlabel="C column",
        ylabel="row of the 16-row fragment",
        xlim=(0, max(cols) + 8),
    )
    bx.invert_yaxis()
    fig.tight_layout()
    plt.show()


#: Colours of the buffer states in :func:`draw_buffer_table` and :func:`draw_ring`.
STATE_COLORS = {
    "copy in flight": "C0",
    "landed, waiting": "C9",
    "products issued": "C3",
    "products may still run": "C1",
    "held until release": "C1",
    "free": "white",
}


def draw_buffer_table(states: list[list[tuple[str, str]]], title: str) -> None:
    """``states[t][b]`` = (state, tile label) of ring buffer ``b`` just after iteration ``t``
    issued its work: one column per iteration, one row per buffer."""
    iters, nbuf = len(states), len(states[0])
    fig, ax = plt.subplots(figsize=(min(1.0 * iters + 2, 14), 0.55 * nbuf + 1.3))
    for t, col in enumerate(states):
        for b, (state, label) in enumerate(col):
            ax.add_patch(
                Rectangle(
                    (t, b),
                    1,
                    1,
                    facecolor=STATE_COLORS[state],
                    alpha=0.55,
                    edgecolor="black",
                    lw=0.4,
                )
            )
            ax.text(t + 0.5, b + 0.5, label, ha="center", va="center", fontsize=7)
    ax.set(xlim=(0, iters), ylim=(nbuf, 0), title=title, xlabel="K-loop iteration t")
    ax.set_xticks(np.arange(iters) + 0.5, [str(t) for t in range(iters)])
    ax.set_yticks(np.arange(nbuf) + 0.5, [f"buffer {b}" for b in range(nbuf)])
    used = sorted({s for col in states for s, _ in col}, key=list(STATE_COLORS).index)
    ax.legend(
        [Patch(facecolor=STATE_COLORS[s], alpha=0.55, edgecolor="black") for s in used],
        used,
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    fig.tight_layout()
    plt.show()


def draw_ring(schedules: list[tuple[str, dict]]) -> None:
    """Producer / consumer rings (``schedules``: ``[(title, schedule)]``, each schedule a dict
    of per-tile lists ``issue, land, start, end, release`` and ``nbuf``): one row per buffer
    with the TMA in flight, the landed tile waiting, its products and the hold until its
    *empty* arrival; a row for the tensor cores; phase parities of the waits written on the
    bars."""
    fig, axes = plt.subplots(
        len(schedules), 1, figsize=(14, sum(1.0 + 0.5 * (s["nbuf"] + 2) for _, s in schedules))
    )
    axes = np.atleast_1d(axes)
    for ax, (title, s) in zip(axes, schedules, strict=True):
        nbuf = s["nbuf"]
        for kt, (iss, land, start, end, rel) in enumerate(
            zip(s["issue"], s["land"], s["start"], s["end"], s["release"], strict=True)
        ):
            b = kt % nbuf
            phase = (kt // nbuf) & 1
            y = b + 1
            for a, z, state in (
                (iss, land, "copy in flight"),
                (land, start, "landed, waiting"),
                (start, end, "products issued"),
                (end, rel, "held until release"),
            ):
                if z > a:
                    ax.barh(
                        y,
                        z - a,
                        left=a,
                        color=STATE_COLORS[state],
                        alpha=0.6,
                        edgecolor="black",
                        lw=0.3,
                    )
            ax.text(
                (iss + land) / 2,
                y,
                f"tile {kt}\n(empty p{phase ^ 1})",
                ha="center",
                va="center",
                fontsize=6.5,
            )
            ax.text(
                (start + end) / 2, y, f"{kt}\nfull p{phase}", ha="center", va="center", fontsize=6
            )
            ax.barh(0, end - start, left=start, color="C3", alpha=0.6, edgecolor="black", lw=0.3)
        issued: dict[float, list[int]] = {}  # issue time -> tiles issued then
        for kt, iss in enumerate(s["issue"]):
            issued.setdefault(iss, []).append(kt)
        for iss, tiles in issued.items():
            ax.plot([iss], [nbuf + 1], marker="v", color="C0", ms=5)
            names = f"{tiles[0]}" if len(tiles) == 1 else f"{tiles[0]}-{tiles[-1]}"
            ax.text(iss + 0.08, nbuf + 1, f"tile {names}", va="center", fontsize=6.5)
        busy = s["busy"]
        ax.set_yticks(
            range(nbuf + 2),
            ["tensor cores"] + [f"buffer {b}" for b in range(nbuf)] + ["producer: TMA issued"],
        )
        ax.set_xlim(-0.5, max(s["release"]) + 0.5)
        ax.invert_yaxis()
        ax.set_title(
            f"{title}: tensor cores busy {busy:.0%} of the time from the first TMA issue",
            loc="left",
            fontsize=9,
        )
    axes[-1].set_xlabel(
        "time, schematic units (full p / empty p: the phase parity each side waited for)"
    )
    keys = ["copy in flight", "landed, waiting", "products issued", "held until release"]
    fig.legend(
        [Patch(facecolor=STATE_COLORS[k], alpha=0.6, edgecolor="black") for k in keys],
        keys,
        loc="lower center",
        ncol=4,
        fontsize=7,
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    plt.show()


def draw_tile_order(order: np.ndarray, blocks: int, group_m: int) -> None:
    """``order[i, j]``: the place of C tile ``(i, j)`` in the persistent blocks' walk. Left: the
    order, coloured by wave (``order // blocks``: the tiles the blocks hold at the same time);
    right: the block that takes each tile (``order % blocks``)."""
    tm, tn = order.shape
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * tm + 1.6))
    for ax, values, cmap, title in (
        (
            axes[0],
            (order // blocks) % 20,
            "tab20",
            f"place in the walk (colour: wave of {blocks} tiles)",
        ),
        (axes[1], order % blocks % 10, "tab10", f"block (of {blocks}) that takes the tile"),
    ):
        vmax = 19 if cmap == "tab20" else 9
        ax.imshow(values, cmap=cmap, vmin=0, vmax=vmax, aspect="auto", alpha=0.6)
        shown = order if ax is axes[0] else order % blocks
        for i in range(tm):
            for j in range(tn):
                ax.text(j, i, str(shown[i, j]), ha="center", va="center", fontsize=7)
        for g in range(group_m, tm, group_m):
            ax.axhline(g - 0.5, color="black", lw=1.5)
        ax.set(title=title, xlabel="tile column (BN)", ylabel="tile row (BM)")
        ax.set_xticks(range(tn))
        ax.set_yticks(range(tm))
    fig.suptitle(
        f"{tm} x {tn} C tiles, {blocks} persistent blocks; black lines: groups of GROUP_M = "
        f"{group_m} tile rows, walked column by column",
        fontsize=9,
    )
    fig.tight_layout()
    plt.show()


def plot_precisions(panels, sizes, peaks, source: str) -> None:
    """One panel per precision: TFLOP/s against N for N^3 products. ``panels``: ``[(title,
    [(label, [tflops per size or None], style, why untimed)])]``; ``peaks``: ``{title: (label,
    TFLOP/s)}``, drawn dotted; ``source``: the figure's subtitle (GPU, timing)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(14, 4.3), sharey=False)
    for ax, (title, lines) in zip(np.atleast_1d(axes), panels, strict=True):
        for label, vals, style, why in lines:
            pts = [(n, v) for n, v in zip(sizes, vals, strict=True) if v]
            if pts:
                ax.plot(*zip(*pts, strict=True), label=label, **style)
            else:  # in the legend all the same, as untimed, with the rows' status
                ax.plot([], [], label=f"{label}: no timing ({why or 'no rows'})", **style)
        if title in peaks:
            label, peak = peaks[title]
            ax.axhline(peak, color="black", ls=":", lw=1)
            ax.text(sizes[-1], peak, label, va="bottom", ha="right", fontsize=7)
        ax.set(xscale="log", xlabel="N (M = N = K)", ylabel="TFLOP/s", title=title)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, 0.94))
    fig.suptitle(f"{source}; each panel its own vertical scale", fontsize=9)
    fig.tight_layout()
    plt.show()
