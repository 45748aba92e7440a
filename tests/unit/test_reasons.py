"""The reason table (tritonsuite.core.reasons) is kept true, as the field table is: every place a judging module
writes a failure reason matches one entry of its ``REASONS``, every entry matches a place, and every entry names
the tests that make it happen (each exists and asserts the entry's words) or says why no test on a CPU host can."""
from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pytest

from tritonsuite.core.reasons import MODULES, Reason, registered, sites

TESTS = Path(__file__).resolve().parents[1]


@cache
def _test_sources() -> dict[str, str]:
    """``file.py::test_name`` (relative to tests/) -> the test's source, decorators included."""
    found = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        if path == Path(__file__).resolve():
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                parts = [ast.get_source_segment(text, d) for d in node.decorator_list]
                strings = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                # the source, and its strings as the parser joins them (a long expected line split over lines)
                found[f"{path.relative_to(TESTS)}::{node.name}"] = "\n".join(
                    parts + [ast.get_source_segment(text, node)] + strings)
    return found


@pytest.mark.parametrize("name", MODULES)
def test_every_place_a_module_writes_a_reason_matches_one_entry(name):
    reasons = registered()[name]
    for site in sites(importlib.import_module(name)):
        matching = [r.phrase for r in reasons if r.matches(site.template)]
        assert len(matching) == 1, f"{name}:{site.line} writes {site.template!r}, matched by {matching or 'no entry'}"


@pytest.mark.parametrize("name", MODULES)
def test_every_entry_matches_a_place_and_is_named_once(name):
    reasons = registered()[name]
    templates = [s.template for s in sites(importlib.import_module(name))]
    for r in reasons:
        assert any(r.matches(t) for t in templates), f"{name}: no place writes {r.phrase!r}"
    phrases = [r.phrase for r in reasons]
    assert len(phrases) == len(set(phrases)), f"{name}: an entry named twice"


@pytest.mark.parametrize("name", MODULES)
def test_every_entry_is_made_to_happen_by_the_tests_it_names_or_says_why_none_can(name):
    tests = _test_sources()
    missing = []
    for r in registered()[name]:
        if not r.tests:
            if not r.cannot.strip():
                missing.append(f"{r.phrase!r}: no test and no reason why none can")
            continue
        for test in r.tests:
            if test not in tests:
                missing.append(f"{r.phrase!r}: {test} does not exist")
            elif r.words not in tests[test]:
                missing.append(f"{r.phrase!r}: {test} does not assert {r.words!r}")
    assert not missing, f"{name}:\n" + "\n".join(missing)


def test_the_words_of_an_entry_are_more_than_punctuation():
    for name, reasons in registered().items():
        for r in reasons:
            assert len(r.words.split()) >= 2 or len(r.words) >= 10, \
                f"{name}: {r.phrase!r} has too few fixed words to assert"


def test_the_site_finder_sees_each_way_a_module_writes_a_reason():
    source = '''
def check(target):
    problems = [f"{n} requests failed ({e})" for n, e in ()]
    problems.append(f"one {1} two")
    problems += [f"three {x}" for x in ()]
    stray.append("four five")
    problems.insert(0, "six" if a else f"seven {b}")
    result.reason = f"twelve {x}"
    row.failures.append("thirteen (" + x + ")")
    Comparison(path, missing="fourteen fifteen", other="not a reason")
    _fail(f"sixteen {x}")
    problems.append(")")  # no words: not a reason
    return CheckResult(target.name, "c", "-", "-", "fail", f"eight {x} nine")
def _harm():
    return "ten eleven"
'''
    module = SimpleNamespace(__name__="m", REASON_NAMES=("stray", "failures", "missing", "_fail"),
                             REASON_FUNCTIONS=("_harm",))
    templates = [s.template for s in sites(module, source)]
    assert templates == ["{} requests failed ({})", "one {} two", "three {}", "four five", "seven {}", "six",
                         "twelve {}", "thirteen ({})", "fourteen fifteen", "sixteen {}", "eight {} nine",
                         "ten eleven"]


def test_a_reason_entry_ties_by_its_longest_fixed_words():
    r = Reason("{} of {} requests got no final flag ({}: no message)")
    assert r.words == "requests got no final flag ("
    assert r.matches("{} of {} requests got no final flag ({}: no message) and more")
    assert not r.matches("{} of {} requests got a final flag")
