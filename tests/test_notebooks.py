"""The notebook walkthroughs (``notebooks/NN_*.py``, jupytext percent format) execute without an
error, and each committed ``.ipynb`` holds exactly the cells of its source.

One test per notebook, so that xdist spreads them. On the simulator (CI) the notebooks run their
kernels on small shapes; on a GPU the same cells run at 4096. Each notebook also compiles a few
kernels for its resource report, in a subprocess without the simulator (no GPU needed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _load_execute():
    spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


execute = _load_execute()
SOURCES = execute.sources()
# the notebook tooling is a test extra (pyproject's ``test``); a GPU image may lack it
pytest.importorskip("jupytext", reason="jupytext (the notebook sources) is not installed")
pytest.importorskip("nbclient", reason="nbclient (runs the notebooks) is not installed")


def test_notebooks_found():
    assert len(SOURCES) >= 10, f"expected the notebooks 00-09 in {NOTEBOOKS}, found {SOURCES}"


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_notebook_executes(py):
    """Every cell runs (``CellExecutionError`` otherwise, with the cell and its traceback); the
    first code cell says where the outputs come from, and notebooks 01-07 draw at least two
    figures (a picture from the tile constants and the committed GPU results)."""
    nb = execute.execute(execute.read(py))  # the simulator setting of this process is inherited
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = "".join(o.get("text", "") for o in code[0].outputs)
    assert "outputs from:" in first, f"{py.name}: the first code cell must name the machine"
    images = sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    if not py.stem.startswith("00"):
        assert images >= 2, f"{py.name}: {images} figure(s); expected a drawing and a results plot"


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_ipynb_matches_source(py):
    """The committed ``.ipynb`` was regenerated from the current ``.py``
    (``python notebooks/execute.py``, or ``--no-execute`` to re-pair without outputs)."""
    import nbformat

    ipynb = py.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} missing: run `python notebooks/execute.py {py.stem}`"
    committed = nbformat.read(ipynb, as_version=4)
    fresh = execute.read(py)
    pairs = [(c.cell_type, c.source) for c in committed.cells]
    want = [(c.cell_type, c.source) for c in fresh.cells]
    assert pairs == want, (
        f"{ipynb.name} is out of date with {py.name}: run `python notebooks/execute.py {py.stem}`"
    )


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_outputs_current(py):
    """The committed outputs were produced on a GPU from these kernel sources and these shared
    notebook modules: ``execute.py`` records both digests in the notebook's metadata. Changed a
    kernel, a PTX wrapper or ``_helpers.py``? Re-execute every notebook on a GPU
    (``python notebooks/execute.py``) and commit the outputs with the change."""
    import nbformat

    committed = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    got = committed.metadata.get("numba_gemm")
    assert got, f"{py.stem}: outputs without provenance: run `python notebooks/execute.py` on a GPU"
    assert not got.get("simulator"), f"{py.stem}: committed outputs come from the simulator"
    want = execute.provenance()
    stale = [k for k in want if got.get(k) != want[k]]
    assert not stale, (
        f"{py.stem}: outputs produced from other {' and '.join(stale)}: re-execute the notebooks "
        "on a GPU (`python notebooks/execute.py`)"
    )
