"""The tree reads as the pipeline: every module imports, the import graph has no cycle, no module outside models/
is over 400 lines (docs/architecture.md states these rules)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import tritonsuite

PACKAGE_DIR = Path(tritonsuite.__file__).parent
MAX_LINES = 400


def modules(package_dir: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under package_dir (a package's __init__ named as the package)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph(package_dir: Path, package: str) -> dict[str, set[str]]:
    """module -> the package's modules it imports, from the AST: imports anywhere in a file (inside functions
    too, so a lazy import still counts), relative imports resolved, a package's __init__ included."""
    mods = modules(package_dir, package)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target == package or target.startswith(package + "."):
                    resolved = resolve(target)
                    if resolved and resolved != name:
                        graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.parametrize("name", sorted(modules(PACKAGE_DIR, "tritonsuite")))
def test_every_module_imports(name):
    importlib.import_module(name)


def test_the_import_graph_has_no_cycle():
    assert cycles(import_graph(PACKAGE_DIR, "tritonsuite")) == []


def test_the_cycle_check_finds_a_cycle_through_a_package_init_and_a_lazy_import(tmp_path):
    # the shape of the two cycles removed in the reorganisation: a package __init__ importing a launcher that
    # imports a sibling package, which imports the first package back inside a function
    pkg = tmp_path / "demo"
    (pkg / "server").mkdir(parents=True)
    (pkg / "load").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "server" / "__init__.py").write_text("from .embedded import Embedded\n")
    (pkg / "server" / "embedded.py").write_text("from ..load.client import PREFIX\nclass Embedded: pass\n")
    (pkg / "load" / "__init__.py").write_text("")
    (pkg / "load" / "client.py").write_text("PREFIX = 'x'\ndef f():\n    from demo.server import Embedded\n")
    (pkg / "report.py").write_text("import demo.load.client\n")
    assert cycles(import_graph(pkg, "demo")) == [["demo.load.client", "demo.server", "demo.server.embedded"]]


def test_no_module_outside_models_is_over_400_lines():
    too_long = {str(path.relative_to(PACKAGE_DIR)): lines
                for path in PACKAGE_DIR.rglob("*.py")
                if "models" not in path.relative_to(PACKAGE_DIR).parts[:1]
                and (lines := len(path.read_text().splitlines())) > MAX_LINES}
    assert too_long == {}


def test_the_readme_stays_short_and_its_docs_links_resolve():
    import re

    root = PACKAGE_DIR.parents[1]
    readme = (root / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    linked = set(re.findall(r"\]\((docs/[^)#]+)", readme))
    assert linked and [path for path in sorted(linked) if not (root / path).is_file()] == []
