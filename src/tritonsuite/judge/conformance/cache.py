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
    reason("response_cache declared, but the server serves the model without it (no lookup counted)"),
    reason("the repeated input was not a cache hit"),
    reason("the repeated input was answered differently"),
    reason("the ensemble's cache hit still ran its steps ({})"),
    reason("a different input was answered from the cache"),
    reason("the cached answer differs from what the model computes for the same input now (a non-deterministic "
           "model: caching freezes one draw)"),
)


def _other(request: dict) -> dict:
    """The request with its first input changed (another input: a miss)."""
    first, array = next(iter(request.items()))
    changed = array.copy()
    if changed.dtype == object:
        changed.reshape(-1)[0] = bytes(changed.reshape(-1)[0]) + b"!"
    elif changed.dtype == bool:
        changed.reshape(-1)[0] = not changed.reshape(-1)[0]
    else:
        changed.reshape(-1)[0] = changed.reshape(-1)[0] + 1
    return {**request, first: changed}


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
    problems = []
    if two.get("cache_hit_count", 0) != 1:
        problems.append("the repeated input was not a cache hit")
    if not same(first, second):
        problems.append("the repeated input was answered differently")
    if steps:
        evidence["steps_run_by_the_hit"] = steps_ran
        if two.get("cache_hit_count", 0) == 1 and any(steps_ran.values()):
            problems.append(f"the ensemble's cache hit still ran its steps "
                            f"({', '.join(f'{m} {n}x' for m, n in steps_ran.items() if n)})")
    if three.get("cache_hit_count", 0) != 0 or three.get("cache_miss_count", 0) != 1:
        problems.append("a different input was answered from the cache")
    if fresh is not None:
        agree = all(np.allclose(fresh[n], first[n], rtol=RTOL, atol=ATOL) for n in names
                    if first[n].dtype.kind in "fiub") and all(np.array_equal(fresh[n], first[n]) for n in names
                                                              if first[n].dtype.kind not in "fiub")
        evidence["fresh_equals_cached"] = agree
        if not agree:
            problems.append("the cached answer differs from what the model computes for the same input now "
                            "(a non-deterministic model: caching freezes one draw)")
    observed = (f"repeat: {evidence['repeat']}, other input: {evidence['other_input']}"
                + ("" if fresh is None else f", fresh computation {'agrees' if evidence['fresh_equals_cached'] else 'differs'}"))
    return CheckResult(target.name, "cache", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)
