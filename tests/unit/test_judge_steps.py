"""The steps check's judging (judge/conformance/steps.py: judge_steps) on step models' statistics built to cause each
failure reason: 16 ensemble requests, each step model's successes per version before and after them. The ensembles
themselves run on the server in tests/test_conformance_tensors.py."""
from __future__ import annotations

from collections import Counter

from tritonsuite.judge.conformance.steps import judge_steps
from tritonsuite.judge.conformance.result import CheckResult
from tritonsuite.load.exchange import Answer


def answers(n=16, failed=0, error="boom") -> list[Answer]:
    return [Answer(0.0, 0.001, True)] * (n - failed) + [Answer(0.0, 0.001, False, error=error)] * failed


def judge(expected: dict, after: dict, sent=None):
    before = {m: {"1": 5, "2": 3} for m, _ in expected}  # earlier requests: only the rise counts
    after = {m: before[m] | {v: before[m].get(v, 0) + n for v, n in runs.items()} for m, runs in after.items()}
    return judge_steps("ens", Counter(expected), before, after, answers() if sent is None else sent)


def test_each_step_run_once_per_request_on_its_version_passes():
    result = judge({("a", "1"): 1, ("b", "2"): 1}, {"a": {"1": 16}, "b": {"2": 16}})
    assert result.verdict == "pass" and result.reason == ""
    assert result.evidence["per_step_ran"] == {"a:1": 16, "b:2": 16}
    twice = judge({("a", "1"): 2}, {"a": {"1": 32}})  # a model named by two steps
    assert twice.verdict == "pass", twice.reason


def test_a_step_run_twice_skipped_or_on_another_version_fails():
    doubled = judge({("a", "1"): 1}, {"a": {"1": 32}})
    assert doubled.verdict == "fail"
    assert doubled.reason == ("step model a version 1 ran 32 requests for 16 answered ensemble requests (declared: 1 "
                              "per request)")
    skipped = judge({("a", "1"): 1, ("b", "1"): 1}, {"a": {"1": 16}, "b": {}})
    assert skipped.verdict == "fail"
    assert skipped.reason == ("step model b version 1 ran 0 requests for 16 answered ensemble requests (declared: 1 "
                              "per request)")
    other = judge({("a", "2"): 1}, {"a": {"1": 16}})
    assert other.verdict == "fail"
    assert other.reason == ("step model a version 1 ran 16 requests for 16 answered ensemble requests (declared: 0 "
                            "per request); step model a version 2 ran 0 requests for 16 answered ensemble requests "
                            "(declared: 1 per request)")
    short = judge({("a", "1"): 1}, {"a": {"1": 15}})
    assert short.verdict == "fail" and short.reason.startswith("step model a version 1 ran 15 requests for 16")


def test_failed_ensemble_requests_fail_with_the_first_error():
    result = judge({("a", "1"): 1}, {"a": {"1": 14}}, sent=answers(16, failed=2, error="x" * 200))
    assert result.verdict == "fail"
    assert result.reason == f"2 of 16 ensemble requests failed ({'x' * 160})"  # the steps ran for the 14 answered


def test_the_whole_result_reaches_the_report():
    """Every field of the result the report shows: both sides and the whole evidence, passing and failing."""
    result = judge({("a", "1"): 1, ("b", "2"): 2}, {"a": {"1": 16}, "b": {"2": 32}})
    assert result == CheckResult(
        "ens", "steps", "steps a v1, b v2 x2", "a v1: 16, b v2: 32 for 16 ensemble requests", "pass", "",
        {"ensemble_requests_answered": 16, "sent": 16, "per_step_expected": {"a:1": 1, "b:2": 2},
         "per_step_ran": {"a:1": 16, "b:2": 32}})
    failing = judge({("b", "2"): 1, ("a", "1"): 1}, {"a": {"1": 14, "2": 1}, "b": {"2": 14}},
                    sent=answers(16, failed=2))
    assert failing == CheckResult(
        "ens", "steps", "steps b v2, a v1", "a v1: 14, a v2: 1, b v2: 14 for 14 ensemble requests", "fail",
        "2 of 16 ensemble requests failed (boom); step model a version 2 ran 1 requests for 14 answered ensemble "
        "requests (declared: 0 per request)",
        {"ensemble_requests_answered": 14, "sent": 16, "per_step_expected": {"b:2": 1, "a:1": 1},
         "per_step_ran": {"a:1": 14, "a:2": 1, "b:2": 14}})


def test_a_version_loaded_during_the_load_counts_from_zero():
    """A step model's version the statistics did not list before the load (loaded since): all its successes are the
    load's."""
    before = {"a": {"1": 5}}
    result = judge_steps("ens", Counter({("a", "3"): 1}), before, {"a": {"1": 5, "3": 16}}, answers())
    assert result.verdict == "pass", result.reason
    assert result.evidence["per_step_ran"] == {"a:3": 16}
    assert result.observed == "a v3: 16 for 16 ensemble requests"
    once = judge_steps("ens", Counter({("a", "3"): 1}), before, {"a": {"1": 5, "3": 1}}, answers(1))
    assert once.verdict == "pass" and once.evidence["per_step_ran"] == {"a:3": 1}, once.reason
