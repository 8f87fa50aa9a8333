"""The size and layering rules the project set itself, read from the source with ``ast``.

No import cycle among ``envace_demo`` modules (imports inside functions count: hiding an
import in a function hides the cycle, it does not remove it), no module over 600 lines, no
class over 250 and no function over 80.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "envace_demo"
MAX_MODULE, MAX_CLASS, MAX_FUNCTION = 600, 250, 80


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The ``envace_demo`` modules ``name`` imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            # The deepest known module the import names (``from x import y`` may name a module y).
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(name, path, known) for name, path in modules.items()}
    # A package's __init__ importing its own submodules is how a package is built, not a cycle.
    return {name: {t for t in deps if not t.startswith(name + ".")} for name, deps in graph.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _too_long() -> list[str]:
    out = []
    for name, path in sorted(_modules().items()):
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE:
            out.append(f"module {name}: {lines} lines (> {MAX_MODULE})")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            size = node.end_lineno - node.lineno + 1
            if isinstance(node, ast.ClassDef) and size > MAX_CLASS:
                out.append(f"class {name}.{node.name}: {size} lines (> {MAX_CLASS})")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and size > MAX_FUNCTION:
                out.append(f"function {name}.{node.name}: {size} lines (> {MAX_FUNCTION})")
    return out


def test_sizes():
    over = _too_long()
    assert not over, "\n".join(over)


if __name__ == "__main__":  # python tests/test_house.py: the report without pytest
    for c in _cycles(_graph()):
        print("cycle:", " <-> ".join(c))
    print("\n".join(_too_long()))
    pytest.main([__file__, "-q"])
