"""The tree reads as the pipeline: every module imports, every import points down the floors (or within its own
package), the import graph has no cycle, the plugin stays thin, no module outside models/ is over 400 lines
(docs/architecture.md states these rules)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import tritonsuite

PACKAGE_DIR = Path(tritonsuite.__file__).parent
MAX_LINES = 400
MAX_PLUGIN_LINES = 650  # 600 until the progress display (plugin/progress.py: its hooks) joined
#: The floors of the house (docs/architecture.md): a module imports its own package and the floors below, never a
#: floor above nor another package of its own floor. Every top-level package or module has a floor.
FLOORS = {"core": 1, "deploy": 2, "models": 2, "server": 3, "profiles": 3, "load": 4, "judge": 5, "report": 6,
          "tune": 6, "run": 7, "plugin": 8, "cli": 8}


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


def upward_imports(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """'a -> b' for each import of a module on a floor above its own or of another package on its own floor; the
    package's own ``__init__`` (floor 0) imports nothing and is imported by nothing here. A top-level name missing
    from ``floors`` is an error: a new package is placed on purpose."""
    def floor(module: str) -> tuple[int, str]:
        parts = module.split(".")
        if len(parts) == 1:
            return 0, ""
        if parts[1] not in floors:
            raise KeyError(f"{module}: its package {parts[1]!r} has no floor; place it in FLOORS")
        return floors[parts[1]], parts[1]

    found = []
    for module, targets in sorted(graph.items()):
        here, package = floor(module)
        for target in sorted(targets):
            there, other = floor(target)
            if there > here or (there == here and other != package):
                found.append(f"{module} -> {target}")
    return found


def test_every_import_points_down_the_floors():
    assert upward_imports(import_graph(PACKAGE_DIR, "tritonsuite"), FLOORS) == []


def test_the_direction_check_finds_an_import_up_and_one_across_a_floor(tmp_path):
    # a lazy import from a lower floor up (deploy reading a judge's function: the shape of the six upward imports
    # the floors removed) and one between two packages of one floor
    pkg = tmp_path / "demo"
    for package in ("core", "deploy", "models", "judge"):
        (pkg / package).mkdir(parents=True)
        (pkg / package / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "spec.py").write_text("X = 1\n")
    (pkg / "judge" / "accuracy.py").write_text("from demo.core.spec import X\n")
    (pkg / "deploy" / "export.py").write_text("def f():\n    from ..judge.accuracy import X\n")
    (pkg / "models" / "bert.py").write_text("import demo.deploy.export\nfrom demo.core import spec\n")
    graph = import_graph(pkg, "demo")
    assert upward_imports(graph, {"core": 1, "deploy": 2, "models": 2, "judge": 5}) == [
        "demo.deploy.export -> demo.judge.accuracy", "demo.models.bert -> demo.deploy.export"]
    with pytest.raises(KeyError, match="'judge' has no floor"):
        upward_imports(graph, {"core": 1, "deploy": 2, "models": 2})


def test_the_plugin_is_thin():
    lines = sum(len(path.read_text().splitlines()) for path in (PACKAGE_DIR / "plugin").rglob("*.py"))
    assert lines <= MAX_PLUGIN_LINES, f"plugin/ is {lines} lines; its work belongs in tritonsuite.run"


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
