"""Every failure reason a judge can give, named once by its fixed words and tied to the tests that make it happen.

A check that has never been seen to fail proves nothing when it passes. Each judging module keeps a ``REASONS``
tuple of :class:`Reason` entries beside the code that writes them: the words every such reason carries (verbatim,
``{}`` where a value goes), the tests whose deployment or data is built to cause it and that assert it, or why no
test on a CPU host can (it needs a GPU, a TensorRT engine). ``tests/unit/test_reasons.py`` holds the table true as
``test_field_table.py`` holds the field table: every place a module writes a reason matches one entry, every entry
matches a place, and every entry is produced by the tests it names (the test exists and asserts its words) or says
why none can.

:func:`sites` finds the places a module writes a failure reason, so a new reason cannot be added unregistered. A
place is a string written to a name reasons go to (``problems``, ``reason``, or one the module adds in
``REASON_NAMES``: a list appended to, a variable or attribute assigned, a keyword argument, a function called), the
reason of a ``CheckResult`` whose verdict is ``"fail"``, or a string returned by a function the module names in
``REASON_FUNCTIONS`` (one that says what is wrong, or nothing when all is well).
"""
from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass

#: the modules whose reasons are registered (each defines ``REASONS``)
MODULES = tuple(f"tritonsuite.judge.conformance.{m}" for m in (
    "identity", "batching", "ratelimit", "tensors", "steps", "sequence", "sequence_backlog", "state", "ordering",
    "ragged", "queue", "priority", "decoupled", "cache", "refusals", "counters", "system", "warmup", "shutdown",
    "reload")) + (
    # the accuracy gate and the baselines
    "tritonsuite.core.tensors", "tritonsuite.core.spec", "tritonsuite.run.accuracycase", "tritonsuite.judge.baselines",
    # compare and the perf gate, the case verdicts
    "tritonsuite.judge.compare", "tritonsuite.run.verdicts",
    # the stability and count verdicts of a measured point (tritonsuite's own load, perf_analyzer's)
    "tritonsuite.load.windows", "tritonsuite.load.perfanalyzer", "tritonsuite.load.sources.workers",
    # the tune's "keep the deployment's own configuration" answers
    "tritonsuite.tune.runner", "tritonsuite.tune.mix")
#: the names every module writes reasons to; a module adds its own in ``REASON_NAMES``
NAMES = ("problems", "reason")


@dataclass(frozen=True)
class Reason:
    """One failure reason: ``phrase`` is the words every such reason carries, ``{}`` where a value goes;
    ``tests`` are ``file.py::test_name`` under ``tests/`` whose deployment or data causes it and that assert it;
    ``cannot`` says why no test on a CPU host can make it happen (then ``tests`` may be empty)."""

    phrase: str
    tests: tuple[str, ...] = ()
    cannot: str = ""

    def matches(self, template: str) -> bool:
        return self.phrase in template

    @property
    def words(self) -> str:
        """The fixed part of the phrase with the most words: what a test asserting this reason has in its source."""
        return max(self.phrase.split("{}"), key=lambda part: (len(part.split()), len(part))).strip()


def reason(phrase: str, *tests: str, cannot: str = "") -> Reason:
    return Reason(phrase, tests, cannot)


@dataclass(frozen=True)
class Site:
    """A place a module writes a failure reason: its line and its text with ``{}`` for every value."""

    module: str
    line: int
    template: str


def _template(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left, right = _template(node.left), _template(node.right)
        if left is not None or right is not None:
            return (left or "{}") + (right or "{}")
    if isinstance(node, ast.Subscript):  # f"..."[:200]
        return _template(node.value)
    if isinstance(node, ast.IfExp):
        parts = [t for t in (_template(node.body), _template(node.orelse)) if t]
        return " | ".join(parts) or None
    return None


def _strings(node: ast.AST) -> list[str]:
    """The reason texts an expression adds: a string, or each string of a list literal or comprehension."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [t for e in node.elts for t in _strings(e)]
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _strings(node.elt)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, (ast.List, ast.ListComp)):
        return _strings(node.left) + _strings(node.right)
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    text = _template(node)
    return [text] if text is not None and re.search(r"[A-Za-z]{2}", text.replace("{}", "")) else []


def sites(module, source: str | None = None) -> list[Site]:
    """Every place ``module`` writes a failure reason (see the module docstring for what counts); ``source``: its
    text, when not the module's own file."""
    tree = ast.parse(source if source is not None else inspect.getsource(module))
    names = set(NAMES) | set(getattr(module, "REASON_NAMES", ()))
    functions = set(getattr(module, "REASON_FUNCTIONS", ()))

    def named(node) -> bool:
        return (isinstance(node, ast.Name) and node.id in names) or \
            (isinstance(node, ast.Attribute) and node.attr in names)

    table = {id(n) for a in tree.body if isinstance(a, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "REASONS" for t in a.targets) for n in ast.walk(a)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in table:  # the table itself
            continue
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "insert", "extend") and \
                    named(node.func.value) and node.args:
                found += [(node.lineno, t) for t in _strings(node.args[-1])]
            if named(node.func):
                found += [(node.lineno, t) for a in node.args for t in _strings(a)]
            found += [(node.lineno, t) for k in node.keywords if k.arg in names for t in _strings(k.value)]
            if isinstance(node.func, ast.Name) and node.func.id == "CheckResult":
                args = list(node.args)
                verdict = next((i for i, a in enumerate(args) if isinstance(a, ast.Constant) and a.value == "fail"),
                               None)
                if verdict is not None and verdict + 1 < len(args):
                    found += [(node.lineno, t) for t in _strings(args[verdict + 1])]
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(named(t) for t in targets):
                found += [(node.lineno, t) for t in _strings(node.value)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
            found += [(r.lineno, t) for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None
                      for t in _strings(r.value)]
    return [Site(module.__name__, line, text) for line, text in sorted(set(found))]


def registered() -> dict[str, tuple[Reason, ...]]:
    """module name -> its ``REASONS``."""
    return {name: importlib.import_module(name).REASONS for name in MODULES}
