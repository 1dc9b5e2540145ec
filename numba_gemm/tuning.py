"""Tuned tile configurations: shape classes, the JSON cache, and the lookup ``sgemm`` uses.

``python -m numba_gemm.tune`` times candidate configurations of the tunable stages on the current
GPU and stores, per GPU name, per stage and per shape class, the fastest valid one:

    {"format": 1,
     "gpus": {"NVIDIA H200": {
         "compute_capability": [9, 0],
         "classes": {"large": {"multistage": {"config": {...}, "gflops": ..., "ms": ...,
                                              "pct_cublas": ..., "shape": [M, N, K]}, ...},
                     ...}}}}

Lookup order for a shape: the user cache (``$NUMBA_GEMM_TUNING`` or
``~/.cache/numba_gemm/tuning.json``) for this GPU's name; else the committed defaults for its
compute capability (``numba_gemm/tuning/sm_XY.json``, same format, measured on the GPU named in
it); else the stage's own ``DEFAULT_CONFIG``.

Shape classes split by the number of C elements, because that decides how many block tiles there
are to fill the GPU (the reason split-K pays for small products): see :data:`CLASSES`.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .vecmem import SIMULATOR

FORMAT = 1

#: (name, largest M*N in the class, the (M, N, K) the tuner times for it). Upper bounds sit between
#: the tuned sizes, so 1024^2 is "small", 2048^2 "medium" and 4096^2 "large".
CLASSES = (
    ("small", 1536 * 1536, (1024, 1024, 1024)),
    ("medium", 3072 * 3072, (2048, 2048, 2048)),
    ("large", None, (4096, 4096, 4096)),
)

DEFAULTS_DIR = Path(__file__).with_name("tuning")


def shape_class(M: int, N: int, K: int) -> str:
    """Name of the shape class of an ``(M, K) @ (K, N)`` product."""
    for name, limit, _ in CLASSES:
        if limit is None or M * N <= limit:
            return name
    raise AssertionError("unreachable: the last class has no limit")


def user_cache_path() -> Path:
    """Where ``numba_gemm.tune`` writes: ``$NUMBA_GEMM_TUNING`` or the user cache dir."""
    env = os.environ.get("NUMBA_GEMM_TUNING")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "numba_gemm" / "tuning.json"


def defaults_path(cc: tuple[int, int]) -> Path:
    """Committed defaults for a compute capability, e.g. ``tuning/sm_90.json``."""
    return DEFAULTS_DIR / f"sm_{cc[0]}{cc[1]}.json"


def load(path: Path) -> dict:
    """A tuning file (a fresh copy), or an empty one if it does not exist.

    Raises:
        ValueError: the file is not a tuning file of this format.
    """
    if not path.exists():
        return {"format": FORMAT, "gpus": {}}
    st = path.stat()
    return copy.deepcopy(_load_cached(str(path), st.st_mtime_ns, st.st_ino, st.st_size))


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, inode: int = 0, size: int = 0) -> dict:
    # sgemm() looks tuning up on every call: parse each file once per modification
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("format") != FORMAT or "gpus" not in data:
        raise ValueError(f"{path} is not a numba_gemm tuning file (format {FORMAT})")
    return data


def record(
    data: dict, gpu: str, cc: tuple[int, int], cls: str, stage: str, result: Mapping[str, Any]
) -> None:
    """Put one winner into ``data`` in place. ``result`` holds ``config``, ``ms`` and ``shape``
    (what ``select`` needs), optionally ``alternatives`` of the same form, occupancy and
    ``ms_scalar``."""
    entry = data["gpus"].setdefault(gpu, {"compute_capability": list(cc), "classes": {}})
    entry["classes"].setdefault(cls, {})[stage] = dict(result)


def save(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def current_device() -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of the current GPU; None on the simulator or without a GPU."""
    if SIMULATOR:
        return None
    from numba import cuda

    if not cuda.is_available():
        return None
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    return name, tuple(dev.compute_capability)


def _entries(device: tuple[str, tuple[int, int]] | None) -> Iterator[tuple[Path, dict]]:
    """``(file, GPU entry)`` pairs to consult, in order: the user cache's entry for this GPU's
    name, then the committed defaults for its compute capability. None on the simulator."""
    device = device or current_device()
    if device is None:
        return
    name, cc = device
    for path, key in ((user_cache_path(), name), (defaults_path(cc), None)):
        try:
            st = path.stat()
            gpus = _load_cached(str(path), st.st_mtime_ns, st.st_ino, st.st_size)["gpus"]
            entry = gpus.get(key) if key else next(iter(gpus.values()), None)
            if entry:
                yield path, entry["classes"]
        except FileNotFoundError:
            continue
        except (ValueError, OSError, AttributeError, KeyError, TypeError) as e:
            warnings.warn(f"ignoring tuning file {path}: {type(e).__name__}: {e}", stacklevel=3)


def source(device: tuple[str, tuple[int, int]] | None = None) -> str | None:
    """The first tuning file with an entry for this GPU (user cache, else committed defaults)."""
    return next((str(path) for path, _ in _entries(device)), None)


def winners(cls: str, device: tuple[str, tuple[int, int]] | None = None) -> dict:
    """``{stage name: result}`` for a shape class on the current (or given) GPU (a copy).

    Per stage, the user cache's entry for this GPU wins over the committed defaults for its
    compute capability; empty on the simulator or when nothing matches.
    """
    merged: dict = {}
    for _, classes in reversed(list(_entries(device))):
        merged.update(classes.get(cls, {}))
    return copy.deepcopy(merged)


def estimate_ms(
    cand: Mapping[str, Any], M: int, N: int, K: int, sms: int, aligned: bool = True,
    scalar_factor: float = 1.0,
) -> float:
    """Predicted time of a tuned candidate at ``(M, N, K)`` from its time at the tuned shape.

    Wave-quantization model: a kernel runs in ``ceil(blocks / (SMs * blocks_per_sm))`` waves of
    blocks that each walk ``ceil(K_slice / BK)`` K tiles, so time scales with waves x K tiles.
    It is what makes a ragged size (4097: one more row and column of mostly empty tiles, maybe one
    more wave) pick a finer tile than 4096 does.

    ``aligned=False`` (rows of A or B not 16-byte aligned: the scalar-GMEM kernel runs) scales
    from ``ms_scalar``, the scalar kernel's time at the tuned shape less one in each dimension
    (same tile counts), with its own occupancy ``blocks_per_sm_scalar``; a candidate without
    ``ms_scalar`` uses ``ms * scalar_factor`` (the class winner's ratio).
    """
    cfg = cand["config"]
    Mr, Nr, Kr = cand["shape"]
    s = cfg.get("SPLITK", 1)
    if aligned:
        ms, bps = cand["ms"], cand.get("blocks_per_sm", 1)
    else:
        ms = cand.get("ms_scalar", cand["ms"] * scalar_factor)
        bps = cand.get("blocks_per_sm_scalar", cand.get("blocks_per_sm", 1))
    slots = max(1, sms * int(bps))

    def cdiv(a, b):
        return -(-a // b)

    def work(m, n, k):
        waves = cdiv(cdiv(m, cfg["BM"]) * cdiv(n, cfg["BN"]) * s, slots)
        return waves * cdiv(cdiv(k, s), cfg["BK"])

    return float(ms) * work(M, N, K) / work(Mr, Nr, Kr)


def is_aligned(M: int, N: int, K: int) -> bool:
    """Whether rows of A (K floats) and of B and C (N floats) allow 128-bit accesses (assuming
    16-byte aligned allocations, as ``cudaMalloc`` gives)."""
    return K % 4 == 0 and N % 4 == 0


def _valid_candidate(c: Any) -> bool:
    """A candidate ``estimate_ms`` can use: a config with positive int BM, BN, BK (SPLITK >= 1),
    a finite positive ``ms`` (and ``ms_scalar``), a shape of three positive ints."""

    def pos_int(x):
        return isinstance(x, int) and not isinstance(x, bool) and x > 0

    def pos_num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < float("inf")

    try:
        cfg = c["config"]
        return (
            all(pos_int(cfg[k]) for k in ("BM", "BN", "BK"))
            and pos_int(cfg.get("SPLITK", 1))
            and pos_num(c["ms"])
            and pos_num(c.get("ms_scalar", 1.0))
            and len(c["shape"]) == 3
            and all(pos_int(x) for x in c["shape"])
            and all(pos_int(c.get(k, 1)) for k in ("blocks_per_sm", "blocks_per_sm_scalar"))
        )
    except (KeyError, TypeError, AttributeError):
        return False


def candidates(result: Mapping[str, Any]) -> list[dict]:
    """The winner of a (class, stage) entry and its recorded alternatives; malformed ones are
    dropped with a warning (a hand-edited or foreign cache must not break ``sgemm``)."""
    main = {k: result[k] for k in ("config", "ms", "shape", "blocks_per_sm",
                                   "blocks_per_sm_scalar", "ms_scalar") if k in result}
    alts = result.get("alternatives", [])
    out = [c for c in [main, *(alts if isinstance(alts, list) else [])] if _valid_candidate(c)]
    if len(out) < 1 + (len(alts) if isinstance(alts, list) else 0):
        warnings.warn("ignoring malformed tuning candidates (need config, ms > 0 and shape)",
                      stacklevel=3)
    return out


def select(stage_name: str, M: int, N: int, K: int) -> tuple[dict, float] | None:
    """``(config, predicted ms)`` of the tuned candidate of ``stage_name`` predicted fastest for
    this shape (see :func:`estimate_ms`), or None without tuning data for its class."""
    res = winners(shape_class(M, N, K)).get(stage_name)
    if not isinstance(res, Mapping):
        return None
    from .launch import sm_count

    cands = candidates(res)
    if not cands:
        return None
    sms = sm_count()
    aligned = is_aligned(M, N, K)
    main = cands[0]
    factor = main["ms_scalar"] / main["ms"] if "ms_scalar" in main else 1.0

    def est(c):
        return estimate_ms(c, M, N, K, sms, aligned, factor)

    best = min(cands, key=est)
    return dict(best["config"]), est(best)


def tuned_config(stage_name: str, M: int, N: int, K: int) -> dict | None:
    """The tuned configuration of ``stage_name`` for this shape, or None (see :func:`select`)."""
    sel = select(stage_name, M, N, K)
    return sel[0] if sel else None
