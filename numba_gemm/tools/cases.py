"""A timing tool's cases (``tools.epilogues``, ``tools.grouped``): compile what they run in worker
processes first, then run each in this process and write its rows as JSON lines."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def warm_in_workers(warm: Callable[[Any], str], cases: list, jobs: int) -> None:
    """``warm(case)`` for every case in ``jobs`` spawned processes (CUDA in a worker: no fork),
    so that the kernels are in the on-disk cache before the timed process loads them; nothing
    with ``jobs <= 1``. ``warm`` must be a module-level function (it is pickled)."""
    if jobs <= 1:
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        for done in pool.map(warm, cases):
            print("compiled", done, flush=True)


def write_rows(path: Path, rows: Iterable[dict]) -> None:
    """Write ``rows`` to ``path`` as JSON lines as they come (and print each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            line = json.dumps(row)
            f.write(line + "\n")
            f.flush()
            print(line, flush=True)
