"""Every failure reason a judge can give, named once by its fixed words and tied to the tests that make it happen.

A check that has never been seen to fail proves nothing when it passes. Each judging module keeps a ``REASONS``
tuple of :class:`Reason` entries beside the code that writes them: the words every such reason carries (verbatim,
``{}`` where a value goes), the tests whose deployment or data is built to cause it and that assert it, or why no
test on a CPU host can (it needs a GPU, a TensorRT engine). ``tests/unit/test_reasons.py`` holds the table true as
``test_field_table.py`` holds the field table: every place a module writes a reason matches one entry, every entry
matches a place, and every entry is produced by the tests it names (the test exists and asserts its words) or says
why none can.

:func:`sites` finds the places a module writes a failure reason, so a new reason cannot be added unregistered. A
place is a string added to a list the module judges with (``problems``, or one named in the module's
``REASON_LISTS``), the reason of a ``CheckResult`` whose verdict is ``"fail"``, or a string returned by a function
the module names in ``REASON_FUNCTIONS`` (one that says what is wrong, or nothing when all is well).
"""
from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass

#: the modules whose reasons are registered (each defines ``REASONS``)
MODULES = tuple(f"tritonsuite.judge.conformance.{m}" for m in (
    "identity", "batching", "ratelimit", "tensors", "steps", "sequence", "state", "ordering", "ragged", "queue",
    "priority", "decoupled", "cache", "refusals", "counters", "system", "warmup", "shutdown", "reload"))
#: the list every module judges with; a module adds the names of its other ones in ``REASON_LISTS``
LISTS = ("problems",)


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
    return [text] if text is not None and text.strip("{}: ;") else []


def sites(module, source: str | None = None) -> list[Site]:
    """Every place ``module`` writes a failure reason (see the module docstring for what counts); ``source``: its
    text, when not the module's own file."""
    tree = ast.parse(source if source is not None else inspect.getsource(module))
    lists = set(LISTS) | set(getattr(module, "REASON_LISTS", ()))
    functions = set(getattr(module, "REASON_FUNCTIONS", ()))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in lists and \
                node.func.attr in ("append", "insert", "extend") and node.args:
            found += [(node.lineno, t) for t in _strings(node.args[-1])]
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in lists for t in targets):
                found += [(node.lineno, t) for t in _strings(node.value)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "CheckResult":
            args = list(node.args)
            verdict = next((i for i, a in enumerate(args) if isinstance(a, ast.Constant) and a.value == "fail"), None)
            text = args[verdict + 1] if verdict is not None and verdict + 1 < len(args) else None
            if verdict is not None and text is None:
                text = next((k.value for k in node.keywords if k.arg == "reason"), None)
            if text is not None:
                found += [(node.lineno, t) for t in _strings(text)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
            found += [(r.lineno, t) for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None
                      for t in _strings(r.value)]
    return [Site(module.__name__, line, text) for line, text in sorted(set(found))]


def registered() -> dict[str, tuple[Reason, ...]]:
    """module name -> its ``REASONS``."""
    return {name: importlib.import_module(name).REASONS for name in MODULES}
