"""The kind is decided in one place (:mod:`tritonsuite.load.kinds`, from :mod:`tritonsuite.core.description`): an
AST walk of the package finds every place outside them that decides behaviour on a deployment's kind (a
``.sequence``, ``.decoupled`` or ``.ensemble`` read in a condition, a comparison with a kind's word), and every
check that imports another module's privates. Each site found must be in :data:`ALLOWED` with its reason; a new
one fails, and so does an entry whose site is gone (the list says what is true)."""
from __future__ import annotations

import ast
from pathlib import Path

import tritonsuite

PACKAGE = Path(tritonsuite.__file__).parent
SEAM = ("load/kinds/", "core/description.py")
KIND_ATTRIBUTES = {"sequence", "decoupled", "ensemble"}
KIND_WORDS = {"sequences", "streams", "stream"}

#: (module, function, what it reads) -> why deciding there is legitimate
ALLOWED = {
    ("deploy/ensemble.py", "__init__", ".ensemble"):
        "building an ensemble's reference: a nested ensemble's steps composed in-process, a leaf's own session",
    ("deploy/userrepo.py", "read_deployment", ".ensemble"):
        "reading a team's repository: an ensemble has no model file of its own, its reference is its steps",
    ("deploy/userrepo.py", "__init__", ".ensemble"): "building the reference of a team's ensemble from its steps",
    ("deploy/userrepo.py", "_kind_parameters", ".ensemble"): "describing the kind in words (the parameters table)",
    ("judge/conformance/decoupled.py", "check_decoupled", ".decoupled"):
        "the field the check judges: model_transaction_policy.decoupled declared against served",
    ("judge/conformance/steps.py", "check_steps", ".ensemble"):
        "the field the check judges: ensemble_scheduling's steps declared against served",
    ("judge/conformance/steps.py", "expect", ".ensemble"):
        "the field the check judges: a nested ensemble's steps expected in its step's place",
    ("judge/conformance/reload.py", "_failed", ".sequence"):
        "an answer's place in its sequence (load.exchange.Answer.sequence), not the deployment's kind",
}

def kind_decisions(package: Path = PACKAGE) -> dict[tuple[str, str, str], list[int]]:
    """(module, innermost function, what) -> the lines where a condition outside the seam reads the kind, or any
    comparison there is with a kind's word."""
    found: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module.startswith(SEAM):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner: dict[int, str] = {}
        for node in ast.walk(tree):  # breadth first: an inner function's name overwrites its outer one's
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for child in ast.walk(node):
                    owner[id(child)] = node.name
        compared = [node for node in ast.walk(tree) if isinstance(node, ast.Compare)]
        for test in _conditions(tree) + compared:
            for node in ast.walk(test):
                what = _kind_read(node)
                if what:
                    lines = found.setdefault((module, owner.get(id(node), "<module>"), what), [])
                    if node.lineno not in lines:
                        lines.append(node.lineno)
    return found


def _conditions(tree: ast.AST) -> list[ast.expr]:
    tests: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tests.append(node.test)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
        elif isinstance(node, ast.BoolOp):
            tests.extend(node.values)
    return tests


def _kind_read(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute) and node.attr in KIND_ATTRIBUTES:
        return f".{node.attr}"
    if isinstance(node, ast.Compare):
        for side in (node.left, *node.comparators):
            if isinstance(side, ast.Constant) and side.value in KIND_WORDS:
                return repr(side.value)
            if isinstance(side, (ast.Tuple, ast.List, ast.Set)) and any(
                    isinstance(e, ast.Constant) and e.value in KIND_WORDS for e in side.elts):
                return "in (..stream..)"
    return ""


def private_imports(package: Path = PACKAGE, under: str = "judge/") -> list[str]:
    """``module: from X import _name`` for every module under ``under`` importing another module's private."""
    found = []
    for path in sorted((package / under).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tritonsuite."):
                found += [f"{path.relative_to(package).as_posix()}: from {node.module} import {a.name}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_nothing_outside_the_seam_decides_on_the_kind_but_the_listed_sites():
    found = kind_decisions()
    unlisted = {f"{k} at line(s) {lines}" for k, lines in found.items() if k not in ALLOWED}
    assert not unlisted, "decides on the kind outside load/kinds: ask the driver (or list it with its reason)"
    gone = [k for k in ALLOWED if k not in found]
    assert not gone, f"listed but no longer there (remove it): {gone}"


def test_no_check_reaches_into_another_modules_privates():
    assert private_imports() == []


def test_the_walk_finds_a_kind_decision_and_a_private_import(tmp_path):
    """The finder itself: a condition on ``.sequence``, a comparison with "streams", a kind read in a comprehension's
    filter and in a conditional expression are found (with their functions); the seam's own modules, a plain
    attribute read and another word are not; a private imported across modules is."""
    pkg = tmp_path / "pkg"
    (pkg / "load" / "kinds").mkdir(parents=True)
    (pkg / "judge").mkdir()
    (pkg / "load" / "kinds" / "seq.py").write_text("def applies(d):\n    return d.sequence if d.sequence else 0\n")
    (pkg / "judge" / "check.py").write_text(
        "from tritonsuite.judge.other import _helper, public\n"
        "def run(target, how):\n"
        "    if target.description.sequence:\n"
        "        pass\n"
        "    names = [m for m in target.models if not m.ensemble]\n"
        "    b = 1 if target.decoupled else 4\n"
        "    x = target.description.sequence\n"
        "    streamed = how == 'stream'\n"
        "    return how == 'streams' or how == 'other'\n")
    assert kind_decisions(pkg) == {("judge/check.py", "run", ".sequence"): [3],
                                   ("judge/check.py", "run", ".ensemble"): [5],
                                   ("judge/check.py", "run", ".decoupled"): [6],
                                   ("judge/check.py", "run", "'stream'"): [8],
                                   ("judge/check.py", "run", "'streams'"): [9]}
    assert private_imports(pkg) == ["judge/check.py: from tritonsuite.judge.other import _helper"]
