"""Check 7, the response cache: where the configuration enables it and the server has a cache, a repeated input is
a hit (the statistics' ``cache_hit``) with the identical answer, a different input is a miss, and the cached
answer is what the model computes for that input (the same sample sent in a batch of two, a request the cache has
not seen): a non-deterministic model behind a cache would answer the first random draw for ever. An ensemble's hit
runs none of its steps (their statistics do not move)."""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import answered, counted, same, settled_statistics, stats_delta
from tritonsuite.core.reasons import reason

#: a fresh computation of the cached sample must agree this closely (a batch may take other kernels)
RTOL, ATOL = 1e-4, 1e-5


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("response_cache declared, but the server serves the model without it (no lookup counted)",
           "test_conformance_tensors.py::test_an_ensemble_cache_hit_runs_none_of_its_steps"),
    reason("the repeated input was not a cache hit",
           "unit/test_judge_cache.py::test_cache_fails_a_repeated_input_that_was_not_one_hit"),
    reason("the repeated input was answered differently",
           "unit/test_judge_cache.py::test_cache_fails_a_repeated_input_answered_differently"),
    reason("the ensemble's cache hit still ran its steps ({})",
           "unit/test_judge_cache.py::test_cache_fails_an_ensemble_hit_that_still_ran_its_steps"),
    reason("a different input was answered from the cache",
           "unit/test_judge_cache.py::test_cache_fails_a_different_input_that_was_not_one_miss"),
    reason("the cached answer differs from what the model computes for the same input now (output {}; a "
           "non-deterministic model: caching freezes one draw)",
           "test_conformance_checks.py::test_cache_catches_a_cached_non_deterministic_model",
           "unit/test_judge_cache.py::test_cache_fails_a_cached_answer_a_fresh_computation_disagrees_with"),
)


def _other(request: dict) -> dict:
    """The request with its first input changed (another input: a miss)."""
    first, array = next(iter(request.items()))
    changed = array.copy()
    if changed.dtype == object:
        changed.flat[0] = bytes(changed.flat[0]) + b"!"
    elif changed.dtype == bool:
        changed.flat[0] = not changed.flat[0]
    else:
        changed.flat[0] = changed.flat[0] + 1
    return {**request, first: changed}


def _judge_cache(repeat: dict, other: dict, same_answer: bool, steps_ran: dict[str, int],
                 fresh_differs: list[str] | None) -> list[str]:
    """What the cache check saw wrong, from the statistics' deltas of the repeated request (``repeat``) and of the
    one with another input (``other``), whether the repeat was answered bit for bit as the first, the executions
    each step of an ensemble counted over the repeat (empty: not an ensemble), and the outputs a fresh computation of
    the sample answers otherwise than the cache (None: not computed, the deployment cannot batch two)."""
    problems = []
    if repeat.get("cache_hit_count") != 1:  # (no count: None, not 1)
        problems.append("the repeated input was not a cache hit")
    if not same_answer:
        problems.append("the repeated input was answered differently")
    if repeat.get("cache_hit_count") == 1 and any(steps_ran.values()):
        problems.append(f"the ensemble's cache hit still ran its steps "
                        f"({', '.join(f'{m} {n}x' for m, n in steps_ran.items() if n)})")
    if other.get("cache_hit_count", 0) != 0 or other.get("cache_miss_count") != 1:
        problems.append("a different input was answered from the cache")
    if fresh_differs:
        problems.append(f"the cached answer differs from what the model computes for the same input now (output "
                        f"{', '.join(fresh_differs)}; a non-deterministic model: caching freezes one draw)")
    return problems


def check_cache(target: Target) -> CheckResult:
    d = target.description
    if not d.response_cache:
        return CheckResult(target.name, "cache", "response_cache not enabled", "-", "skipped",
                           "the configuration does not enable response_cache")
    names = target.output_names
    request = target.request(1)
    steps = sorted({s.model for s in d.steps})  # an ensemble's: a hit must run none of them
    steps_start = {m: settled_statistics(target.server, m) for m in steps}
    before = settled_statistics(target.server, target.name)
    first = answered(target, request)
    after_first = counted(target.server, target.name, before, 1)
    missed = stats_delta(after_first, before).get("cache_miss_count", 0)  # a miss's steps counted before the hit
    steps_before = {m: counted(target.server, m, steps_start[m], missed).get("success_count", 0) for m in steps}
    second = answered(target, request)
    after_second = counted(target.server, target.name, after_first, 1)
    steps_ran = {m: settled_statistics(target.server, m).get("success_count", 0) - n for m, n in steps_before.items()}
    answered(target, _other(request))
    after_other = settled_statistics(target.server, target.name)
    fresh = None
    if d.batching and d.max_batch_size >= 2:  # the same sample in a request the cache has not seen
        pair = {k: np.concatenate([v, v]) for k, v in request.items()}
        fresh = {k: v[:1] for k, v in answered(target, pair).items()}
    one, two, three = (stats_delta(a, b) for a, b in ((after_first, before), (after_second, after_first),
                                                      (after_other, after_second)))
    lookups = sum(x.get("cache_hit_count", 0) + x.get("cache_miss_count", 0) for x in (one, two, three))
    declared = "response_cache { enable: true }"
    evidence = {"first": {k: one.get(k, 0) for k in ("cache_hit_count", "cache_miss_count")},
                "repeat": {k: two.get(k, 0) for k in ("cache_hit_count", "cache_miss_count")},
                "other_input": {k: three.get(k, 0) for k in ("cache_hit_count", "cache_miss_count")}}
    if lookups == 0 and not target.server.model_description(target.name).response_cache:
        return CheckResult(target.name, "cache", declared, "served without response_cache", "fail",
                           "response_cache declared, but the server serves the model without it (no lookup "
                           "counted)", evidence)
    if lookups == 0:
        return CheckResult(target.name, "cache", declared, "no cache lookup counted", "skipped",
                           "the server has no response cache (start it with --cache-config local,size=...)",
                           evidence)
    if steps:
        evidence["steps_run_by_the_hit"] = steps_ran
    differ = None
    if fresh is not None:
        differ = [n for n in names if not (np.allclose(fresh[n], first[n], rtol=RTOL, atol=ATOL)
                                           if first[n].dtype.kind in "fiub" else np.array_equal(fresh[n], first[n]))]
        evidence["fresh_equals_cached"] = not differ
    problems = _judge_cache(two, three, same(first, second), steps_ran, differ)
    observed = (f"repeat: {evidence['repeat']}, other input: {evidence['other_input']}"
                + ("" if fresh is None else f", fresh computation {'differs' if differ else 'agrees'}"))
    return CheckResult(target.name, "cache", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)
