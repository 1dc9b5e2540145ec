"""Drawings of notebook 09 (bandwidth-bound products: stages 15 ``skinny`` and 16 ``skinny_n``).

Drawing code only. Every function takes the tile constants (a stage's configuration and the
``derived`` constants of its module) and the index maps as arguments: the notebook writes the maps
next to the kernel lines they mirror, so a picture changes when the code does.
"""

from __future__ import annotations

import math

import numpy as np


def plot_roofline(peaks: dict, points: list[dict], title: str, footnote=None) -> None:
    """Attainable FP32 GFLOP/s against arithmetic intensity, ``min(peak, intensity x DRAM
    bandwidth)`` for the GPU in ``peaks`` (``_helpers.gpu_peaks``), and measured ``points``
    (dicts ``x`` intensity, ``y`` GFLOP/s, ``impl`` (a colour), ``shape`` (a marker), ``note``
    (a label, or empty), optional ``hollow``: drawn as an outline, larger and on top, so that a
    point under it still shows). ``footnote``: ``(x, text)`` written under the points at ``x``."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    bw, peak = peaks["bytes_per_s"], peaks["flops"]
    ridge = peak / bw
    xs = [p["x"] for p in points]
    ys = [p["y"] for p in points]
    x = np.logspace(math.log10(min(xs + [1.0]) / 3), math.log10(max(xs + [ridge]) * 3), 200)
    fig, ax = plt.subplots(figsize=(12, 5.2))
    ax.plot(x, np.minimum(peak, x * bw) / 1e9, color="black")
    ax.axvline(ridge, color="0.6", ls=":", lw=1)
    ax.text(ridge * 1.1, peak / 1e9 / 40, f"ridge\n{ridge:.1f} FLOP/B", fontsize=7)
    ax.axvspan(x[0], ridge, color="C0", alpha=0.05)
    ax.text(x[0] * 1.3, peak / 1e9 * 0.5, "bandwidth-bound", fontsize=8, color="C0")
    ax.text(ridge * 2, peak / 1e9 * 0.5, "compute-bound", fontsize=8, color="0.3")
    impls = list(dict.fromkeys(p["impl"] for p in points))
    shapes = list(dict.fromkeys(p["shape"] for p in points))
    marks = dict(zip(shapes, "s^oDvP*X", strict=False))
    for p in points:
        c = f"C{impls.index(p['impl'])}"
        if p.get("hollow"):
            ax.scatter(
                p["x"],
                p["y"],
                s=90,
                facecolor="none",
                edgecolor=c,
                lw=1.5,
                marker=marks[p["shape"]],
                zorder=4,
            )
        else:
            ax.scatter(p["x"], p["y"], s=30, color=c, marker=marks[p["shape"]], zorder=3)
        if p["note"]:
            ax.annotate(
                p["note"],
                (p["x"], p["y"]),
                textcoords="offset points",
                xytext=(-8, 0),
                ha="right",
                va="center",
                fontsize=7,
                color=c,
            )
    if footnote:
        ax.text(footnote[0], min(ys) / 2.5, footnote[1], ha="center", va="top", fontsize=7)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity (FLOP per byte of DRAM traffic: A and B read, C written once)",
        ylabel="GFLOP/s",
        title=title,
        ylim=(min(ys) / 8, peak / 1e9 * 2),
    )
    ax.grid(alpha=0.3, which="both")
    roof = Line2D(
        [],
        [],
        color="black",
        label=f"min(FP32 peak {peak / 1e12:.1f} TFLOP/s,\nintensity x {bw / 1e12:g} TB/s)",
    )
    hollow = {p["impl"] for p in points if p.get("hollow")}
    colours = [
        Line2D(
            [],
            [],
            ls="",
            marker="o",
            color=f"C{i}",
            label=k + (" (outline)" if k in hollow else ""),
            markerfacecolor="none" if k in hollow else f"C{i}",
        )
        for i, k in enumerate(impls)
    ]
    markers = [
        Line2D([], [], ls="", marker=marks[s], color="0.4", label=f"{s} (M x N x K)")
        for s in shapes
    ]
    first = ax.legend(
        handles=[roof, *colours],
        title="roof; colour: implementation",
        fontsize=7,
        title_fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    ax.add_artist(first)
    ax.legend(
        handles=markers,
        title="marker: product",
        fontsize=7,
        title_fontsize=7,
        loc="lower left",
        bbox_to_anchor=(1.01, 0.0),
    )
    fig.tight_layout()
    plt.show()


def _cells(ax, grid, cmap, vmax, title, xlabel, ylabel, black=()):
    """``grid`` (rows x columns of ints, -1 = empty) as coloured cells, ``black`` cells in black."""
    from matplotlib.colors import ListedColormap

    g = np.asarray(grid, dtype=float)
    colours = cmap(np.linspace(0, 1, vmax + 1))
    ax.imshow(
        np.ma.masked_less(g, 0),
        cmap=ListedColormap(colours),
        vmin=-0.5,
        vmax=vmax + 0.5,
        aspect="auto",
        interpolation="nearest",
    )
    if black:
        r, c = zip(*black, strict=True)
        ax.scatter(c, r, marker="s", s=10, color="black", edgecolor="white", lw=0.5, zorder=3)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)


def _rect(xy, w, h, **kw):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, w, h, **kw)


def _box(ax, x, y, w, h, text, color, fs=7):
    ax.add_patch(_rect((x, y), w, h, facecolor=color, edgecolor="black", lw=0.6))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fs)


def _arrow(ax, x0, y0, x1, y1):
    ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="->", lw=1))


def draw_skinny(cfg: dict, d: dict, shape, thread_of, tid_of, per: int) -> None:
    """Stage 15 for one configuration at ``shape`` ``(M, N, K)``. Left: B (K x N) cut into the
    grid's blocks (x: ``BN`` columns, z: a K slice each); every one of the ``cdiv(M, MT)`` row
    blocks (y) walks all of it. Middle: one chunk of ``KC`` rows of a block's B tile, one cell per
    float4, coloured by the warp that loads it (``tid_of(k, q)``: the thread that loads float4
    ``q`` of chunk row ``k``), thread 0's loads in black. Right: how the partial sums meet
    (``thread_of(tid) -> (k-group, first column)`` labels the k-groups). ``per``: rows of K in a
    slice (``_tunable.block_work``)."""
    import matplotlib.pyplot as plt

    M, N, K = shape
    MT, BN, KC, S, THREADS = cfg["MT"], cfg["BN"], cfg["KC"], cfg["SPLITK"], cfg["THREADS"]
    KG, CG = d["KG"], d["CG"]
    nx, ny = math.ceil(N / BN), math.ceil(M / MT)
    fig, (ax, bx, cx) = plt.subplots(
        1, 3, figsize=(15, 5), gridspec_kw={"width_ratios": [1.1, 1.3, 1.2]}
    )
    # --- the grid over B
    cmap = plt.get_cmap("tab10")
    for z in range(S):
        k0, k1 = z * per, min(K, (z + 1) * per)
        for x in range(nx):
            n0, n1 = x * BN, min(N, (x + 1) * BN)
            ax.add_patch(
                _rect(
                    (n0, k0),
                    n1 - n0,
                    k1 - k0,
                    facecolor=cmap(z % 10),
                    edgecolor="white",
                    lw=0.4,
                    alpha=0.85,
                )
            )
    ax.add_patch(_rect((0, 0), min(N, BN), min(K, per), fill=False, edgecolor="black", lw=2))
    ax.set(
        xlim=(0, N),
        ylim=(K, 0),
        xlabel=f"column n of B ({nx} blocks of BN = {BN} along grid x)",
        ylabel=f"row k of B ({S} K slices of {per} rows along grid z)",
        title=f"{M}x{N}x{K}: grid ({nx}, {ny}, {S}) = {nx * ny * S} blocks of {THREADS} threads"
        f"\neach of the {ny} row block(s) (MT = {MT} rows of A) streams all of B once;\n"
        "outlined: block (0, 0, 0), its BN columns of one K slice",
    )
    # --- one chunk: which warp loads which float4
    grid = np.full((KC, BN // 4), -1)
    black = []
    for k in range(KC):
        for q in range(BN // 4):
            t = tid_of(k, q)
            grid[k, q] = t // 32
            if t == 0:
                black.append((k, q))
    nw = THREADS // 32
    _cells(
        bx,
        grid,
        plt.get_cmap("tab20" if nw > 10 else "tab10"),
        nw - 1,
        f"one chunk: KC = {KC} rows x BN = {BN} columns, a cell per float4 (one 128-bit load)\n"
        f"colour = warp; black = thread 0: KC / KG = {d['KSTEP']} loads, rows {KG} apart",
        f"float4 column q of the tile (columns 4q .. 4q + 3): {CG} threads per row",
        f"row k of the chunk (k-group k mod KG, KG = {KG})",
        black,
    )
    for w in range(nw):  # label each warp once, at the first row it loads
        cells = np.argwhere(grid == w)
        if len(cells):
            r, c = cells[0]
            span = cells[cells[:, 0] == r][:, 1]
            bx.text(
                (span.min() + span.max()) / 2,
                r,
                f"w{w}",
                ha="center",
                va="center",
                fontsize=6,
                color="white",
            )
    # --- how partial sums meet
    cx.set(xlim=(0, 10), ylim=(0, 10), title="the partial sums of one MT x BN tile of C")
    cx.axis("off")
    shown = min(KG, 6)
    for g in range(shown):
        kg, c0 = thread_of(g * CG)
        label = (
            f"k-group {kg}: threads {g * CG}..{g * CG + CG - 1}"
            if g < shown - 1 or shown == KG
            else f"... k-group {KG - 1}"
        )
        _box(cx, 0.2, 9.0 - g * 0.9, 4.2, 0.75, label, plt.get_cmap("Pastel1")(g % 9), fs=6)
    cx.text(
        2.3,
        9.0 - shown * 0.9 + 0.2,
        f"registers: {MT} x 4 sums per thread, over its rows of K",
        ha="center",
        fontsize=6,
    )
    _arrow(cx, 4.5, 7.0, 5.4, 7.0)
    rm = d["RM"]
    _box(
        cx,
        5.5,
        6.0,
        4.3,
        2.0,
        f"SMEM: the KG = {KG} partial tiles,\n{rm} row(s) of C per pass ({MT // rm} pass(es));\n"
        f"each thread sums 4 columns over KG\nand stores them: one 128-bit store",
        "0.9",
        fs=6,
    )
    if S > 1:
        _arrow(cx, 7.6, 5.9, 7.6, 4.9)
        _box(
            cx,
            5.5,
            2.9,
            4.3,
            2.0,
            f"SPLITK = {S} K slices: each block writes its\nMT x BN partial tile to the "
            f"workspace;\nthe tile's last block to arrive sums\nthe {S} slices in order -> C",
            "0.85",
            fs=6,
        )
    else:
        _arrow(cx, 7.6, 5.9, 7.6, 4.9)
        _box(cx, 5.5, 3.9, 4.3, 1.0, "SPLITK = 1: straight to C", "0.85", fs=6)
    fig.tight_layout()
    plt.show()


def draw_skinny_n(cfg: dict, d: dict, lane_of, chunks: int = 2, warps: int = 2) -> None:
    """Stage 16 for one configuration. Left: the rows of A of the first ``warps`` warps of a block
    over ``chunks`` chunks of ``KC`` columns, one cell per float4, coloured by warp and labelled
    with the lane that loads it (``lane_of(r, q) -> (warp, lane)`` for row ``r`` of the block and
    float4 column ``q`` of a chunk). Right: the B tile in SMEM, transposed (``Bs[n, k]``): lane
    ``l`` reads the same float4 columns of every one of the ``NB`` rows."""
    import matplotlib.pyplot as plt

    NB, RW, KC = cfg["NB"], cfg["RW"], cfg["KC"]
    q_per = KC // 4
    rows = warps * RW
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(15, 1.6 + 0.45 * max(rows, 4)), gridspec_kw={"width_ratios": [2.2, 1]}
    )
    tab = plt.get_cmap("tab10")
    for r in range(rows):
        for c in range(chunks):
            for q in range(q_per):
                w, ln = lane_of(r, q)
                x = c * q_per + q
                shade = 0.55 if c else 0.85  # the next chunk lighter
                ax.add_patch(
                    _rect(
                        (x, r), 1, 1, facecolor=tab(w % 10), alpha=shade, edgecolor="white", lw=0.4
                    )
                )
                ax.text(
                    x + 0.5,
                    r + 0.5,
                    str(ln),
                    ha="center",
                    va="center",
                    fontsize=5,
                    color="black" if (w, ln) != (0, 0) else "white",
                    fontweight="bold" if ln == 0 else None,
                )
                if (w, ln) == (0, 0):
                    ax.add_patch(_rect((x, r), 1, 1, facecolor="black"))
                    ax.text(
                        x + 0.5, r + 0.5, "0", ha="center", va="center", fontsize=5, color="white"
                    )
    for c in range(1, chunks):
        ax.axvline(c * q_per, color="black", lw=1.5)
    for c in range(chunks):
        what = "chunk kc: its FMAs run" if c == 0 else "chunk kc + KC: its loads in flight"
        ax.text((c + 0.5) * q_per, rows + 0.1, what, ha="center", va="top", fontsize=7)
    ax.set(
        xlim=(0, chunks * q_per),
        ylim=(rows + 0.9, 0),
        xlabel=f"float4 column of A (k = 4q .. 4q + 3): one load of a warp = one row's {32 * 16} "
        "contiguous bytes",
        ylabel="row of A in the block",
        title=f"A: rows of warps 0-{warps - 1} (RW = {RW} rows each, of the block's {d['BM']}) "
        f"over {chunks} chunks of KC = {KC};\ncolour = warp, number = the lane that loads the "
        "float4 (warp 0's lane 0 in black)",
    )
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in range(rows)])
    lanes = plt.get_cmap("turbo")
    gb = np.array([[q % 32 for q in range(q_per)] for _ in range(NB)])
    _cells(
        bx,
        gb,
        lanes,
        31,
        f"B tile in SMEM, transposed: Bs[n, k], NB = {NB} x KC = {KC}\n"
        f"lane l reads float4 l (+ 32 j) of every row n, for each of its {RW} rows of A",
        "float4 column of Bs (colour = the lane that reads it)",
        "column n of B (row of Bs)",
    )
    fig.tight_layout()
    plt.show()


def draw_reduce_scatter(V: int, held) -> None:
    """The reduce-scatter of ``V`` partial sums over the 32 lanes of a warp: after each of the
    five exchanges, which sums (y) each lane (x) still holds. ``held(lane, steps) -> (first,
    count)``: the sums ``first .. first + count - 1`` a lane holds after ``steps`` exchanges."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 6, figsize=(15, 3.2), sharey=True)
    cmap = plt.get_cmap("turbo")
    for s, ax in enumerate(axes):
        img = np.full((V, 32, 4), 1.0)
        for lane in range(32):
            first, count = held(lane, s)
            img[first : first + count, lane] = cmap(lane / 31)
        ax.imshow(img, aspect="auto", interpolation="nearest")
        o = f", with lane ^ {16 >> (s - 1)}" if s else ""
        n = held(0, s)[1]
        ax.set(title=f"after {s} exchange(s){o}\n{n} sum(s) per lane", xlabel="lane")
        ax.set_xticks([0, 8, 16, 24, 31])
    axes[0].set_ylabel(f"partial sum (0 .. {V - 1}) of the warp's RW x NB outputs")
    fig.suptitle(
        "reduce-scatter: a lane keeps half of what it holds, sends the other half and adds its "
        "partner's (a coloured cell: the lane still holds that sum)"
    )
    fig.tight_layout()
    plt.show()


def plot_bandwidth(table: list[dict], peak_bytes_per_s: float, title: str) -> None:
    """Left: achieved GB/s (minimum bytes / kernel time) of each implementation per shape, as a
    share of the HBM peak. Right: time per call in microseconds, kernel against end to end
    (``table`` rows: ``shape, impl, gbs, kernel_us, e2e_us``; ``e2e_us`` may be None)."""
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r["shape"] for r in table))
    impls = list(dict.fromkeys(r["impl"] for r in table))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 4.4))
    width = 0.8 / len(impls)
    for j, impl in enumerate(impls):
        xs, ys = [], []
        for i, s in enumerate(shapes):
            r = next((r for r in table if r["shape"] == s and r["impl"] == impl), None)
            if r is not None and r["gbs"]:
                xs.append(i + (j - (len(impls) - 1) / 2) * width)
                ys.append(100 * r["gbs"] * 1e9 / peak_bytes_per_s)
        ax.bar(xs, ys, width, color=f"C{j}", label=impl)
    ax.axhline(100, color="black", ls="--", lw=1)
    ax.set_xticks(range(len(shapes)), shapes, fontsize=7)
    ax.set(
        xlabel="M x N x K",
        ylabel="% of the HBM peak",
        title=f"achieved bandwidth: (A + B + C bytes) / kernel time, HBM peak "
        f"{peak_bytes_per_s / 1e12:g} TB/s",
    )
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    e2e = [i for i in impls if any(r["impl"] == i and r["e2e_us"] for r in table)]
    width = 0.8 / max(1, 2 * len(e2e))
    for j, impl in enumerate(e2e):
        for kind, hatch, off in (("kernel_us", None, 0), ("e2e_us", "//", 1)):
            xs, ys = [], []
            for i, s in enumerate(shapes):
                r = next((r for r in table if r["shape"] == s and r["impl"] == impl), None)
                if r is not None and r[kind]:
                    xs.append(i + (2 * j + off - (2 * len(e2e) - 1) / 2) * width)
                    ys.append(r[kind])
            bx.bar(
                xs,
                ys,
                width,
                color=f"C{impls.index(impl)}",
                hatch=hatch,
                edgecolor="black",
                lw=0.4,
                label=f"{impl}: {'kernel' if off == 0 else 'end to end'}",
            )
    bx.set_xticks(range(len(shapes)), shapes, fontsize=7)
    bx.set(
        xlabel="M x N x K",
        ylabel="microseconds per call",
        title="time per call: kernel (plain) and the public call back to back (hatched)",
    )
    bx.legend(fontsize=7)
    bx.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    plt.show()
