"""The package's import graph, read from the sources (no import is executed): arrows point down
only (api -> dispatch -> checks -> plan -> launch -> kernels -> ptx -> device -> backend), tools
import the library and never the reverse, no cycles, and an import inside a function says why (a
comment on its line)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "numba_gemm"

#: Each layer and the layers it may import (besides itself). ``arrays`` reads operands and
#: ``device`` holds the device facts: both sit under everything that runs a product. ``backend``
#: (which compiler builds the kernels) sits under all of them.
_RUN = {"launch", "launch.driver", "kernels", "ptx", "device", "arrays", "backend"}
ALLOWED = {
    "backend": set(),
    "device": {"backend"},
    "launch.driver": set(),
    "ptx": {"device", "backend"},
    "kernels": {"ptx", "device", "backend"},
    "arrays": {"device", "launch.driver", "backend"},
    "launch": _RUN - {"launch"},
    "plan": _RUN,
    "checks": {"plan", "device", "arrays", "kernels"},  # kernels: the epilogue record
    "dispatch": _RUN | {"plan", "checks"},
    "api": _RUN | {"plan", "checks", "dispatch"},
    "torch": {
        "api",
        "device",
        "kernels",
        "backend",
    },  # the PyTorch operators: over the public functions
    "tools": _RUN | {"plan", "checks", "dispatch", "api", "bench", "init", "torch"},
}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    """``numba_gemm.plan.choose`` -> ``plan``; the launch package's driver is its own layer
    below ``arrays``."""
    parts = module.split(".")[1:]
    if not parts:
        return "init"
    if parts[:2] == ["launch", "driver"]:
        return "launch.driver"
    return parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """``(imported numba_gemm module, line, inside a function)`` of one source file."""
    tree = ast.parse(path.read_text())
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    inner = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("numba_gemm"):
                for alias in node.names:  # ``from . import tuning``: the submodule itself
                    sub = f"{target}.{alias.name}"
                    is_mod = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists()
                    found.append((sub if is_mod else target, node.lineno, id(node) in inner))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("numba_gemm"):
                    found.append((alias.name, node.lineno, id(node) in inner))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))
GRAPH = {_module(p): _imports(p) for p in SOURCES}


def test_layers_import_only_downward():
    bad = []
    for mod, imports in GRAPH.items():
        layer = _layer(mod)
        if layer in ("init", "bench", "_version"):  # the public names; the bench's CLI shim
            continue
        allowed = ALLOWED[layer] | {layer}
        for target, line, _ in imports:
            t = _layer(target)
            if t not in allowed and t != "_version":
                bad.append(f"{mod}:{line} ({layer}) imports {target} ({t})")
    assert not bad, "\n".join(bad)


def test_the_library_never_imports_a_tool():
    bad = [
        f"{mod}:{line} imports {target}"
        for mod, imports in GRAPH.items()
        if _layer(mod) not in ("tools", "bench")
        for target, line, _ in imports
        if _layer(target) == "tools"
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    """Module-level imports between the package's modules form no cycle (a package's
    ``__init__`` counts as its own module)."""
    edges = {
        mod: {t for t, _, inner in imports if not inner and t in GRAPH and t != mod}
        for mod, imports in GRAPH.items()
    }
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(n) :] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)


def test_imports_inside_functions_say_why():
    """An import inside a function guards an optional dependency, a GPU- or simulator-only
    internal, or a measured import cost: its line says which (a comment), in the library."""
    bad = []
    for path in SOURCES:
        if "tools" in path.relative_to(PACKAGE).parts:
            continue
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for f in ast.walk(tree):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(f):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    text = lines[node.end_lineno - 1]
                    if "#" not in text:
                        bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text.strip()}")
    assert not bad, "\n".join(bad)
