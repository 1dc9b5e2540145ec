"""Regenerate the notebooks' ``.ipynb`` from their jupytext sources and execute them in place.

The ``NN_name.py`` files (jupytext percent format) are the source of truth; each run rewrites
``NN_name.ipynb`` beside it with fresh outputs (kernel ``python3``, working directory
``notebooks/``, this checkout first on ``PYTHONPATH``)::

    python notebooks/execute.py               # all notebooks: on the GPU if there is one
    python notebooks/execute.py 03 05         # only these (by number or name)
    python notebooks/execute.py --simulator   # force the Numba CUDA simulator
    python notebooks/execute.py --no-execute  # only re-pair the .ipynb (no outputs)

With no GPU (and ``NUMBA_ENABLE_CUDASIM`` unset) it falls back to the simulator and says so.
Needs ``jupytext``, ``nbclient``, ``nbformat`` and ``ipykernel`` (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent
ROOT = NOTEBOOKS.parent


def sources() -> list[Path]:
    """The notebooks' jupytext sources, in reading order."""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def read(py: Path):
    """The notebook of a jupytext source (no outputs)."""
    import jupytext

    return jupytext.read(py, fmt="py:percent")


@contextlib.contextmanager
def kernel_env(simulator: bool | None) -> Iterator[None]:
    """Environment the kernel inherits: this checkout first on ``PYTHONPATH``; with
    ``simulator`` True/False, ``NUMBA_ENABLE_CUDASIM`` set/unset (None: as it is)."""
    saved = dict(os.environ)
    path = [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")  # jupyter_core's path deprecation
    if simulator is True:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    elif simulator is False:
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def provenance() -> dict:
    """What a notebook's outputs depend on besides its cells: the digest of the kernels' sources
    (``numba_gemm.launch.cache.source_digest``: ``kernels/``, ``ptx/``, ``device.py``, the key
    of every compiled kernel) and of the notebooks' shared modules (``notebooks/_*.py``)."""
    import hashlib

    from numba_gemm.launch.cache import source_digest

    h = hashlib.sha256()
    for p in sorted(NOTEBOOKS.glob("_*.py")):
        h.update(f"{p.name}\0".encode() + p.read_bytes())
    return {"kernel_sources": source_digest(), "notebook_helpers": h.hexdigest()}


def execute(nb, simulator: bool | None = None, timeout: int = 900):
    """Execute ``nb`` in place (kernel ``python3``, cwd ``notebooks/``) and record in its
    metadata (``numba_gemm``) the :func:`provenance` of the outputs and whether they come from
    the simulator; raises ``nbclient.exceptions.CellExecutionError`` on the first failing cell."""
    from nbclient import NotebookClient

    with kernel_env(simulator):
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        ).execute()
        on_simulator = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    nb.metadata["numba_gemm"] = {**provenance(), "simulator": on_simulator}
    return nb


def write(nb, py: Path) -> Path:
    import nbformat

    out = py.with_suffix(".ipynb")
    nbformat.write(nb, out)
    return out


def _gpu_present() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="notebook numbers or names (default: all)")
    parser.add_argument("--simulator", action="store_true", help="run on the CUDA simulator")
    parser.add_argument("--no-execute", action="store_true", help="write the .ipynb, no outputs")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)

    chosen = [
        p
        for p in sources()
        if not args.only or any(p.stem == o or p.stem.startswith(f"{o}_") for o in args.only)
    ]
    if not chosen:
        parser.error(f"no notebook matches {args.only}")
    simulator = None
    if not args.no_execute:
        if args.simulator or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            simulator = True
            print("executing on the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
        elif not _gpu_present():
            simulator = True
            print("no usable GPU: executing on the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
        else:
            simulator = False
            print("executing on the GPU")
    for py in chosen:
        t0 = time.perf_counter()
        nb = read(py)
        if not args.no_execute:
            execute(nb, simulator, args.timeout)
        out = write(nb, py)
        print(
            f"{out.relative_to(ROOT)}: {'written' if args.no_execute else 'executed'} in "
            f"{time.perf_counter() - t0:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
