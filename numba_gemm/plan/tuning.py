"""Tuned tile configurations: shape classes, the JSON cache, and the lookup ``sgemm`` uses.

``python -m numba_gemm.tools.tune`` times candidate configurations of the tunable stages on the
current GPU and stores, per GPU name, per stage and per shape class, the fastest valid one:

    {"format": 1,
     "gpus": {"NVIDIA H200": {
         "compute_capability": [9, 0],
         "classes": {"large": {"multistage": {"config": {...}, "gflops": ..., "ms": ...,
                                              "pct_cublas": ..., "shape": [M, N, K]}, ...},
                     ...}}}}

Lookup order for a shape: the user cache (``$NUMBA_GEMM_TUNING`` or
``~/.cache/numba_gemm/tuning.json``) for this GPU's name; else the committed defaults for its
compute capability (``numba_gemm/tuning/sm_XY.json``, same format): first the entry of this GPU's
name, if there is one, then the file's main entry (the one with the most tuned classes), whose
classes serve every GPU of that compute capability; else the stage's own ``DEFAULT_CONFIG``.

Shape classes split by the number of C elements, because that decides how many block tiles there
are to fill the GPU (the reason split-K pays for small products), and batches of small matrices
form a class of their own: see :data:`CLASSES`. A candidate tuned on a batch records ``batch``.

Beside the classes, an entry may hold *measured shapes* (``"shapes"``: :func:`record_shape`), the
fastest candidates an exhaustive sweep timed at one product's shape (``tools.shapes --sweep``,
folded in with ``--fold``). A product near such a shape (:data:`NEAR`) is priced from those
measurements (:func:`nearest_shape`) rather than from a class tuned at another shape: the way
cuBLAS's heuristics and Triton's autotuning cache map a shape to a measured kernel choice. A
measured shape records the operands' layout when it is not NN (B stored transposed, ``x @ W.T``,
runs other skinny configurations), and a product takes the measurements of its own layout first.
"""

from __future__ import annotations

import copy
import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import platformdirs

from .._version import __version__
from ..device import SIMULATED, DeviceInfo, gpu_available, info
from ..kernels import get_stage
from ..launch.cache import cache_dir, source_digest

FORMAT = 1


class ShapeClass(NamedTuple):
    """A shape class: the products whose C has at most ``limit`` elements (None: no bound), tuned
    at ``batch`` x ``shape`` (``(M, N, K)``); the batched class bounds one matrix of a batch.

    A *regime* class (``max_m``, ``max_n``, ``max_k`` or ``min_depth`` set) holds single products
    of a shape that the area classes misprice whatever their size: few rows (``M <= max_m``), few
    columns (``N <= max_n``), a shallow K (``K <= max_k``) or a deep one (``K >= min_depth *
    max(M, N)``); ``limit`` then also bounds C."""

    name: str
    limit: int | None
    shape: tuple[int, int, int]
    batch: int = 1
    max_m: int | None = None
    min_depth: int | None = None
    max_n: int | None = None
    max_k: int | None = None

    def holds(self, M: int, N: int, K: int, batch: int = 1) -> bool:
        """Whether this class holds ``batch`` products ``(M, K) @ (K, N)``."""
        if self.batch > 1:
            return batch > 1 and M * N <= self.limit
        if self.regime:
            return (
                batch == 1
                and (self.max_m is None or M <= self.max_m)
                and (self.max_n is None or N <= self.max_n)
                and (self.max_k is None or K <= self.max_k)
                and (self.min_depth is None or K >= self.min_depth * max(M, N))
                and (self.limit is None or M * N <= self.limit)
            )
        return self.limit is None or batch * M * N <= self.limit

    @property
    def regime(self) -> bool:
        """Whether this is a regime class (few rows or columns, shallow or deep K), not an area
        class."""
        return any(x is not None for x in (self.max_m, self.max_n, self.max_k, self.min_depth))


#: The classes, most specific first. Area classes split by the number of C elements, upper bounds
#: between the tuned sizes, so 1024^2 is "small", 2048^2 "medium" and 4096^2 "large". "batched"
#: holds batches (> 1) of matrices up to "small"'s size: many small tiles from many matrices, each
#: K short, a regime whose ranking the single-matrix classes mispredicted (64 x 512^3: the large
#: class's pick ran at 86 % of torch.bmm, its best tuned candidate at 94 %; docs/design.md). A
#: larger batch, or a batch of larger matrices, is priced as ``batch * M`` rows in the area
#: classes. The regime classes come from the shape suite's measurements on an H200 (docs/design.md):
#: "skinny" (M <= 64: the bandwidth-bound regime, where the skinny stage reads B once), "deep"
#: (K >= 8 max(M, N) up to 3072^2 outputs: 1024 x 1024 x 16384 ran at 55 % of cuBLAS when priced
#: from the small class, the best stage at 87 %) and "narrow" (M <= 256: 128 x 4096 x 4096 at 43 %,
#: best 74 %); and their transposes, few columns: "skinny_n" (N <= 64, where the skinny_n stage
#: reads A once; its configurations tuned at N = 16 compute 8 or 16 columns per block), "gemv_n"
#: (N <= 4, a matrix-vector product, tuned apart so that 4-column blocks can win) and "narrow_n"
#: (N <= 256: 4096 x 128 x 4096 priced from the area classes ran at 48 %, the best tuned
#: configuration of another class at 90 %). "shallow" (K <= 32, more than 64 rows and columns):
#: C's writes, not the FMAs, bound the time, and the area classes' big tiles leave too few warps
#: to keep the stores flowing: 2048 x 8192 x 8 ran at 66 % of cuBLAS from the large class, its
#: best tuned candidate (128 x 64 tiles, 3 blocks per SM) at 142 %; 4096 x 4096 x 16 112 %, best
#: 141 % (H200, docs/design.md §4.11).
CLASSES = (
    ShapeClass("skinny", None, (16, 4096, 4096), max_m=64),
    ShapeClass("gemv_n", None, (4096, 1, 4096), max_n=4),
    ShapeClass("skinny_n", None, (4096, 16, 4096), max_n=64),
    ShapeClass("shallow", None, (4096, 4096, 16), max_k=32),
    ShapeClass("deep", 3072 * 3072, (1024, 1024, 16384), min_depth=8),
    ShapeClass("narrow", None, (128, 4096, 4096), max_m=256),
    ShapeClass("narrow_n", None, (4096, 128, 4096), max_n=256),
    ShapeClass("small", 1536 * 1536, (1024, 1024, 1024)),
    ShapeClass("medium", 3072 * 3072, (2048, 2048, 2048)),
    ShapeClass("large", None, (4096, 4096, 4096)),
    ShapeClass("batched", 1536 * 1536, (512, 512, 512), 64),
)

#: The committed tuning data, ``numba_gemm/tuning/sm_XY.json`` (package data).
DEFAULTS_DIR = Path(__file__).resolve().parent.parent / "tuning"


def shape_class(M: int, N: int, K: int, batch: int = 1) -> str:
    """Name of the shape class of ``batch`` products ``(M, K) @ (K, N)``: the batched class if
    it holds them, else the first of :data:`CLASSES` that does."""
    for c in sorted(CLASSES, key=lambda c: c.batch == 1):  # stable: batched classes first
        if c.holds(M, N, K, batch):
            return c.name
    raise AssertionError("unreachable: the last area class has no limit")


def fallback_class(M: int, N: int, K: int, batch: int = 1) -> str:
    """The area class a product is priced in when its own class has no tuning data (a tuning
    file written before the batched or the regime classes existed): ``batch * M`` rows of C."""
    rows = batch * M
    return next(
        c.name
        for c in CLASSES
        if c.batch == 1 and not c.regime and (c.limit is None or rows * N <= c.limit)
    )


def user_cache_path() -> Path:
    """Where ``numba_gemm.tools.tune`` writes: ``$NUMBA_GEMM_TUNING``, else ``tuning.json`` in the
    platform's user cache directory (``platformdirs``; ``~/.cache/numba_gemm`` on Linux)."""
    env = os.environ.get("NUMBA_GEMM_TUNING")
    if env:
        return Path(env)
    return platformdirs.user_cache_path("numba_gemm") / "tuning.json"


def defaults_path(cc: tuple[int, int]) -> Path:
    """Committed defaults for a compute capability, e.g. ``tuning/sm_90.json``."""
    return DEFAULTS_DIR / f"sm_{cc[0]}{cc[1]}.json"


def load(path: Path) -> dict:
    """A tuning file (a fresh copy, read now), or an empty one if it does not exist.

    Raises:
        ValueError: the file is not a tuning file of this format.
    """
    if not path.exists():
        return {"format": FORMAT, "gpus": {}}
    return _parse(path)


def _parse(path: Path) -> dict:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("format") != FORMAT or "gpus" not in data:
        raise ValueError(f"{path} is not a numba_gemm tuning file (format {FORMAT})")
    return data


#: The operand layouts, as in BLAS: whether A and B are stored transposed.
LAYOUTS = ("NN", "NT", "TN", "TT")


def layout_of(rec: Mapping[str, Any]) -> str:
    """The layout a measured shape was timed in (records without one: ``"NN"``)."""
    return rec.get("layout", "NN")


def record_shape(
    data: dict,
    gpu: str,
    cc: tuple[int, int],
    shape: tuple[int, int, int],
    aligned: bool,
    cands: list[Mapping[str, Any]],
    layout: str = "NN",
) -> None:
    """Put one measured shape into ``data`` in place (replacing an earlier record of the same
    shape, alignment and layout): ``cands`` are ``{"stage", "config", "ms", "blocks_per_sm"}``,
    timed at ``shape`` (M, N, K) on rows that are (``aligned``) or are not 16-byte aligned, with
    A and B stored as ``layout`` says (``"NN"``, ``"NT"``, ``"TN"``, ``"TT"``; recorded as a
    ``"layout"`` key unless ``"NN"``)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    entry = data["gpus"].setdefault(gpu, {"compute_capability": list(cc), "classes": {}})
    shapes = [
        s
        for s in entry.get("shapes", [])
        if (tuple(s["shape"]), s["aligned"], layout_of(s)) != (tuple(shape), aligned, layout)
    ]
    rec = {"shape": list(shape), "aligned": bool(aligned), "candidates": [dict(c) for c in cands]}
    if layout != "NN":
        rec["layout"] = layout
    shapes.append(rec)
    entry["shapes"] = sorted(shapes, key=lambda s: (s["shape"], s["aligned"], layout_of(s)))


def record(
    data: dict, gpu: str, cc: tuple[int, int], cls: str, stage: str, result: Mapping[str, Any]
) -> None:
    """Put one winner into ``data`` in place. ``result`` holds ``config``, ``ms`` and ``shape``
    (what the plan's cost model needs), optionally ``alternatives`` of the same form, occupancy
    and ``ms_scalar``."""
    entry = data["gpus"].setdefault(gpu, {"compute_capability": list(cc), "classes": {}})
    entry["classes"].setdefault(cls, {})[stage] = dict(result)


def save(data: dict, path: Path, *, replan: bool = True) -> None:
    """Write a tuning file atomically, then :func:`reload` (this process sees it at once); with
    ``replan`` False only the data read so far is forgotten, and plans already made stay."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    if replan:
        reload()
    else:
        with _lock:
            _memo.clear()


# --- autotuning's store (``plan.autotune``) ------------------------------------------------------

#: ``NUMBA_GEMM_AUTOTUNE=1``: autotune from the start of the process (``numba_gemm.autotune``
#: switches it at run time).
AUTOTUNE_ENV = "NUMBA_GEMM_AUTOTUNE"
_autotune: list = [None]  # True / False set by ``set_autotune``; None: the environment decides


def autotune_enabled() -> bool:
    """Whether autotuning is on (:func:`set_autotune`, else ``$NUMBA_GEMM_AUTOTUNE`` is 1, true
    or yes)."""
    on = _autotune[0]
    if on is None:
        return os.environ.get(AUTOTUNE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return on


def set_autotune(enabled: bool | None) -> None:
    """Switch autotuning on or off for this process (None: back to the environment's say); the
    plans made so far are forgotten."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True, False or None, got {type(enabled).__name__}")
    _autotune[0] = enabled
    reload()


def autotune_path() -> Path:
    """Autotuning's results: ``autotune.json`` in the kernel cache's directory
    (``launch.cache.cache_dir``: ``$NUMBA_GEMM_CACHE_DIR``, else ``~/.cache/numba_gemm/kernels``
    on Linux), next to the kernels it timed."""
    return cache_dir() / "autotune.json"


def autotune_key() -> dict:
    """What autotuned results are valid for: this package's version and the digest of its
    kernels' sources (``launch.cache.source_digest``)."""
    return {"numba_gemm": __version__, "sources": source_digest()}


def load_autotuned(path: Path | None = None) -> dict:
    """The autotune store (a tuning file with a ``"key"``: :func:`autotune_key`), a fresh copy;
    empty if it does not exist, or (with a warning) if it was written by another version of the
    package or of its kernels: those timings are not of these kernels.

    Raises:
        ValueError: the file is not a tuning file of this format.
    """
    path = autotune_path() if path is None else path
    data = load(path)
    key = autotune_key()
    if data["gpus"] and data.get("key") != key:
        was = data.get("key") or {}
        warnings.warn(
            f"discarding the autotuned results in {path}: they were timed with numba_gemm "
            f"{was.get('numba_gemm', '?')} (kernel sources {str(was.get('sources', '?'))[:12]}), "
            f"this is {key['numba_gemm']} ({key['sources'][:12]}); the shapes are tuned again",
            stacklevel=3,
        )
        data = {"format": FORMAT, "gpus": {}}
    data["key"] = key
    return data


# --- read once per process -----------------------------------------------------------------------

_memo: dict = {}
_listeners: list[Callable[[], None]] = []
_lock = threading.Lock()


def reload() -> None:
    """Forget the tuning data read so far (and the plans chosen from it): the next plan reads the
    files again. ``save`` calls it; call it after another process wrote a tuning file."""
    with _lock:
        _memo.clear()
    for fn in _listeners:
        fn()


def on_reload(fn: Callable[[], None]) -> None:
    """Call ``fn`` on every :func:`reload` (the plan cache registers here)."""
    _listeners.append(fn)


def _default_entries(gpus: Mapping[str, dict], name: str) -> list[dict]:
    """The committed defaults' entries that serve the GPU ``name``: its own entry (e.g. shapes
    measured on that model), then the main entry (the most tuned classes; the first of equals),
    once each."""
    main = max(gpus.values(), key=lambda e: len(e.get("classes", {})), default=None)
    own = gpus.get(name)
    return [own, main] if own is not main else [main]


def _entries(device: DeviceInfo) -> list[tuple[str, dict]]:
    """``(file, {"classes": {class: {stage: result}}, "shapes": [...]})`` to consult for
    ``device``, in order: the user cache's entry for its name, then the committed defaults for
    its compute capability (:func:`_default_entries`). Empty for the simulator. Parsed once per
    process (until :func:`reload`); a broken file is skipped with a warning."""
    if device.simulated:
        return []
    store = autotune_path() if autotune_enabled() else None
    key = (user_cache_path(), device.name, tuple(device.cc), store)
    with _lock:
        if key in _memo:
            return _memo[key]
    out = []
    sources = ((store, True),) if store is not None else ()
    for path, user in (*sources, (key[0], True), (defaults_path(device.cc), False)):
        try:
            gpus = (load_autotuned() if path == store else _parse(path))["gpus"]
            entries = [gpus.get(device.name)] if user else _default_entries(gpus, device.name)
            for entry in filter(None, entries):
                out.append(
                    (
                        str(path),
                        {
                            "classes": dict(entry["classes"]),
                            "shapes": list(entry.get("shapes", [])),
                        },
                    )
                )
        except FileNotFoundError:
            continue
        except (ValueError, OSError, AttributeError, KeyError, TypeError) as e:
            warnings.warn(f"ignoring tuning file {path}: {type(e).__name__}: {e}", stacklevel=3)
    with _lock:
        _memo[key] = out
    return out


def current_device() -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of the current GPU; None on the simulator or without one."""
    if not gpu_available():
        return None
    dev = info()
    return dev.name, dev.cc


def _device(device: DeviceInfo | tuple | None) -> DeviceInfo:
    """A ``DeviceInfo`` from a (name, cc) pair (the tuner's and resources' form) or None."""
    if isinstance(device, DeviceInfo):
        return device
    if device is None:
        return info() if gpu_available() else SIMULATED
    name, cc = device
    return DeviceInfo(-1, name, tuple(cc), 0, 0)


def source(device: DeviceInfo | tuple | None = None) -> str | None:
    """The first tuning file with an entry for this GPU (user cache, else committed defaults)."""
    return next((path for path, _ in _entries(_device(device))), None)


def winners(cls: str, device: DeviceInfo | tuple | None = None) -> dict:
    """``{stage name: result}`` for a shape class on ``device`` (default: the current GPU), a copy.

    Per stage, the user cache's entry for this GPU wins over the committed defaults for its
    compute capability; empty on the simulator or when nothing matches.
    """
    return copy.deepcopy(dict(class_view(cls, device)))


def class_view(cls: str, device: DeviceInfo | tuple | None = None) -> Mapping[str, Any]:
    """:func:`winners` without the copy, for the plan: a read-only mapping over the tuning data
    read so far, merged once per class (until :func:`reload`); its results must not be modified.
    A new shape's plan reads every stage's entry of one or two classes: with a copy of the class
    for each stage it took a median 20 ms on a development CPU, through this view 2.5 ms."""
    entries = _entries(_device(device))
    key = ("class", id(entries), cls)
    with _lock:
        got = _memo.get(key)
    if got is None or got[0] is not entries:  # (an id of a list since dropped: merge again)
        merged: dict = {}
        for _, entry in reversed(entries):
            merged.update(entry["classes"].get(cls, {}))
        got = (entries, MappingProxyType(merged))
        with _lock:
            _memo[key] = got
    return got[1]


#: How far a measured shape may lie from a product for its measurements to price the product:
#: the sum over M, N and K of ``|log2(ratio)|`` must be *below* this (one dimension less than 2x
#: away, or two less than sqrt(2)x each). Farther, the classes price it. At exactly 2x the wave
#: model misled on an H200: 2 x 4096 x 4096 priced from 1 x 4096 x 4096 took its one-row skinny
#: blocks, which read B twice there, 17 % slower than the skinny class's pick (and 128 x 768 x 768
#: from 256 x 768 x 768 gained 24 %: docs/design.md).
NEAR = 1.0


def shape_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """``sum |log2(a_i / b_i)|`` over M, N, K (0: the same shape)."""
    return sum(abs(math.log2(x / y)) for x, y in zip(a, b, strict=True))


def measured_shapes(device: DeviceInfo | tuple | None = None) -> list[dict]:
    """Every measured shape recorded for ``device`` (user cache first, then committed defaults),
    a copy: ``{"shape", "aligned", "candidates"}`` each, and ``"layout"`` if not NN
    (:func:`record_shape`)."""
    return copy.deepcopy([rec for _, entry in _entries(_device(device)) for rec in entry["shapes"]])


#: Rows of the products the skinny stage's bandwidth model prices from a measured shape of
#: nearby rows however far its N and K (:func:`nearest_rows_shape`): at 1-16 rows the skinny
#: stage wins every measured shape whose rows are 16-byte aligned (1.2-2.7x cuBLAS at 8-16 rows),
#: so its measurements say more about such a product than a class's tiles do.
SKINNY_ROWS = 16


def nearest_shape(
    M: int,
    N: int,
    K: int,
    aligned: bool,
    device: DeviceInfo | tuple | None = None,
    layout: str = "NN",
    rank: int | None = None,
) -> dict | None:
    """The measured shape (:func:`record_shape`) of the same alignment nearest to ``(M, N, K)``,
    closer than :data:`NEAR`, as ``{"shape", "aligned", "candidates", "distance"}`` (a copy; the
    user cache's record wins a tie), or None. Of the product's ``layout`` if one is that close,
    else of the same storage of B, else any (:func:`layout_rank`); with ``rank``, only records
    that far from ``layout``. Candidates malformed for the wave model are dropped with a
    warning. A shape of at most :data:`SKINNY_ROWS` rows prices no product of more rows, nor the
    other way: its sweep kept only the skinny stage, while 32-row tiles win at 17-32 rows
    (docs/design.md §4.20)."""

    def distance(shape: tuple) -> float:
        if (M <= SKINNY_ROWS) != (shape[0] <= SKINNY_ROWS):
            return math.inf
        return shape_distance((M, N, K), shape)

    return _nearest(aligned, device, distance, NEAR, layout, rank)


def layout_rank(layout: str, recorded: str) -> int:
    """How far a measurement in layout ``recorded`` is from a product in ``layout``: 0 the same,
    1 B stored the same way, 2 otherwise. B's storage decides which skinny configurations run
    and how they read it (``kernels.k15_skinny``); A's changes only how a tile is staged (the
    tiled stages ran NT, TN and TT within 2-6 % of NN, docs/design.md)."""
    return 0 if recorded == layout else 1 if recorded[1] == layout[1] else 2


def nearest_rows_shape(
    M: int,
    N: int,
    K: int,
    aligned: bool,
    device: DeviceInfo | tuple | None = None,
    layout: str = "NN",
    rank: int | None = None,
) -> dict | None:
    """For ``M <= SKINNY_ROWS``: the measured shape of the same alignment with ``M`` to ``2 M``
    rows (at most :data:`SKINNY_ROWS`) nearest to ``(M, N, K)`` at any distance, its rows
    counted twice (:func:`shape_distance` plus ``|log2(rows / M)|``), as :func:`nearest_shape`
    returns it; or None. Rows weigh more because they decide the tiles (``MT``) where N and K
    mostly scale the bytes of B; not so much that 8 x 768^2 goes to 8 x 4096^2 rather than to
    16 x 768^2, whose K splits fill the GPU at that size. Never fewer rows than ``M``: a shape's
    candidates are its fastest tiles, and those of fewer rows may read B more often here (the
    one-row tiles of 1 x 4096^2 read it twice at 2 x 4096^2). ``layout`` and ``rank`` as in
    :func:`nearest_shape`."""
    if M > SKINNY_ROWS:
        return None

    def distance(shape):
        if not M <= shape[0] <= min(2 * M, SKINNY_ROWS):
            return math.inf
        return math.log2(shape[0] / M) + shape_distance((M, N, K), shape)

    return _nearest(aligned, device, distance, math.inf, layout, rank)


def _nearest(
    aligned: bool,
    device: DeviceInfo | tuple | None,
    distance: Callable[[tuple], float],
    limit: float,
    layout: str,
    rank: int | None,
) -> dict | None:
    best, key = None, (3, limit)  # (layout_rank, distance): the nearest of the closest layout
    for _, entry in _entries(_device(device)):
        for rec in entry["shapes"]:
            try:
                if bool(rec["aligned"]) != bool(aligned):
                    continue
                d = distance(tuple(rec["shape"]))
                k = (layout_rank(layout, str(layout_of(rec))), d)
            except (KeyError, TypeError, ValueError, ZeroDivisionError, IndexError):
                continue
            if d < limit and k < key and rank in (None, k[0]):  # first of equals: user cache's
                best, key = rec, k
    if best is None:
        return None
    dist = key[1]
    out = copy.deepcopy(best)
    cands = out.get("candidates") if isinstance(out.get("candidates"), list) else []
    out["candidates"] = [
        c
        for c in cands
        if isinstance(c, Mapping)
        and isinstance(c.get("stage"), str)
        and _valid_candidate(dict(c, shape=out["shape"]), stream_k=True)
    ]
    if len(out["candidates"]) < len(cands):
        warnings.warn("ignoring malformed measured-shape candidates", stacklevel=3)
    out["distance"] = dist
    return out


def _valid_candidate(c: Any, stream_k: bool = False) -> bool:
    """A candidate ``estimate_ms`` can use: a registered stage's name, a config with a positive
    int block (``Stage.block``; SPLITK >= 1, or 0 (stream-K) with ``stream_k``),
    a finite positive ``ms`` (and ``ms_scalar``), a shape of three positive ints; its stream-K
    twin's time, occupancy and shape (``STREAM_K_KEYS``) all valid when present."""

    def pos_int(x):
        return isinstance(x, int) and not isinstance(x, bool) and x > 0

    def pos_num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < float("inf")

    try:
        cfg = c["config"]
        return (
            all(pos_int(x) for x in get_stage(c["stage"]).block(cfg))
            and (
                pos_int(cfg.get("SPLITK", 1))
                or (stream_k and type(cfg.get("SPLITK")) is int and cfg["SPLITK"] == 0)
            )
            and pos_num(c["ms"])
            and pos_num(c.get("ms_scalar", 1.0))
            and len(c["shape"]) == 3
            and all(pos_int(x) for x in c["shape"])
            and pos_int(c.get("batch", 1))
            and all(pos_int(c.get(k, 1)) for k in ("blocks_per_sm", "blocks_per_sm_scalar"))
            and (
                "ms_sk" not in c
                or (
                    pos_num(c["ms_sk"])
                    and pos_int(c.get("blocks_per_sm_sk"))
                    and len(c["shape_sk"]) == 3
                    and all(pos_int(x) for x in c["shape_sk"])
                )
            )
        )
    except (KeyError, TypeError, AttributeError, ValueError):
        return False


#: A class candidate's times with B stored transposed (``x @ W.T``, layouts NT and TT), measured
#: at the class's shape by ``tools.tune --retime NT``: the vector kernel's time and occupancy,
#: and the scalar kernel's on the unaligned twin. The classes are swept with row-major B, and
#: a tile read along K costs some stages more than others (multistage copies it into SMEM by
#: 4-byte ``cp.async``, double_buffering transposes it through registers): ``cost.estimate_ms``
#: prices a product with B transposed from these when they are present.
TRANSPOSED_B_KEYS = ("ms_nt", "blocks_per_sm_nt", "ms_scalar_nt", "blocks_per_sm_scalar_nt")

#: A (class, stage) result's fits with B stored transposed (layouts NT and TT, aligned rows, no
#: batch), written by ``tools.calibrate --fit``: a list of ``{"config", "fit", "n"}``, the
#: configuration as it runs (its ``MINB`` after any pin, ``cost.pinned_occupancy``; without
#: ``SPLITK``: every split alike), the geometric mean of measured over predicted time over the
#: ``n`` training timings it was fitted on (``tools.bench.sizes.training_projections``), shrunk
#: toward 1 by one timing. ``choose`` multiplies such a candidate's price by its fit
#: (:func:`fit_table`). The wave model scales a class time measured at one shape, occupancy and
#: last wave; the configurations it scales worst with B transposed (multistage's 32 x 256 tiles
#: at three blocks an SM ran 1.5-2.2x their price) each need a factor of their own: one per stage
#: does not fit them (docs/design.md §4.19). Re-tuning a class's stage replaces its result, and
#: with it these fits.
FIT_NT = "fit_nt"


def fit_key(config: Mapping[str, Any]) -> tuple:
    """How :data:`FIT_NT` keys a configuration: its items without ``SPLITK``, sorted."""
    return tuple(sorted((k, v) for k, v in config.items() if k != "SPLITK"))


def fit_table(result: Mapping[str, Any]) -> dict[tuple, float]:
    """``{fit_key(config): fit}`` of a (class, stage) result's :data:`FIT_NT` list; malformed
    entries are dropped with a warning (a hand-edited file must not break ``sgemm``)."""
    out: dict[tuple, float] = {}
    fits = result.get(FIT_NT, [])
    for f in fits if isinstance(fits, list) else [fits]:
        try:
            x = float(f["fit"])
            if not (0 < x < float("inf")) or isinstance(f["fit"], bool):
                raise ValueError(f"fit {f['fit']!r}")
            out[fit_key(f["config"])] = x
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            warnings.warn(f"ignoring a malformed {FIT_NT} entry ({e!r})", stacklevel=3)
    return out


#: A class candidate's stream-K twin (the same tiles with ``SPLITK = STREAM_K``), measured by
#: ``tools.tune --retime SK`` at one shape (``shape_sk``) whose tiles fill every stage's grid:
#: its time and its kernel's occupancy, from which ``cost.stream_k_ms`` prices the twin where a
#: data-parallel grid would leave its last wave part-filled.
STREAM_K_KEYS = ("ms_sk", "blocks_per_sm_sk", "shape_sk")

#: Set (true) on a candidate whose row-major times were measured with split-K's spread sum
#: (``kernels._splitk``: where the grid is resident, every slice sums a share of the tile):
#: ``tools.tune`` writes it with every sweep and ``--retime NN``, autotuning on every candidate
#: it stores (priced as a measured shape). Without it the times predate the spread sum, and
#: ``cost.estimate_ms`` takes their sums out as last-block sums; with it, as the sum that ran at
#: the tuned shape, so a candidate is priced at its own time there (a re-tuned 256 x 32 tile in
#: 16 slices was priced 39.7 us at the 45.0 us it had taken).
SPREAD_SUM = "spread_sum"


def candidates(result: Mapping[str, Any], stage: str) -> list[dict]:
    """The winner of a (class, ``stage``) entry and its recorded alternatives, each with
    ``"stage"`` set; malformed ones are dropped with a warning (a hand-edited or foreign cache
    must not break ``sgemm``)."""
    main = {
        k: result[k]
        for k in (
            "config",
            "ms",
            "shape",
            "batch",
            "blocks_per_sm",
            "blocks_per_sm_scalar",
            "ms_scalar",
            *TRANSPOSED_B_KEYS,
            *STREAM_K_KEYS,
            SPREAD_SUM,
        )
        if k in result
    }
    alts = result.get("alternatives", [])
    out = [
        dict(c, stage=stage)
        for c in [main, *(alts if isinstance(alts, list) else [])]
        if isinstance(c, Mapping)
    ]
    out = [c for c in out if _valid_candidate(c)]
    if len(out) < 1 + (len(alts) if isinstance(alts, list) else 0):
        warnings.warn(
            "ignoring malformed tuning candidates (need config, ms > 0 and shape)", stacklevel=3
        )
    return out
