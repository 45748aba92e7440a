"""Check ``rate_limiter``: on a server started with ``--rate-limit execution_count``, the resources an instance group's
``rate_limiter`` declares cap how many of the model's instances execute at once.

Triton gives an instance a turn only when the resources it names are free; a resource's amount is the largest any
instance asks for, unless the server was started with ``--rate-limit-resource name:count[:device]``. So the most
instances running at once is what the pool admits (instances taken greediest-last until a resource runs out). Under
a closed loop keeping every instance busy (as the instances check loads it), the executions' summed compute time
over the load's wall time (their overlap, from the statistics extension) must stay within that number. Without
rate limiting on the server the field does nothing (Triton's default ``--rate-limit off``): the check skips and
says so; on a server the suite did not start it cannot know the server's options, and skips too.
"""
from __future__ import annotations

import math
from collections import defaultdict

from tritonsuite.judge.conformance.batching import MAX_CONCURRENCY
from tritonsuite.judge.conformance.traffic import judged_load, largest_batch
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.core.reasons import reason

#: the overlap may exceed the cap by this much (the statistics' ns and the client's clock are not the same clock)
SLACK = 0.1
#: compute time under which overlap cannot be told from the client's own time (as the instances check)
MIN_COMPUTE_S = 0.2


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} requests failed ({})",
           "unit/test_judge_ratelimit.py::test_failed_requests_fail_before_the_overlap_is_judged"),
    reason("the rate limiter admits {} instance(s) at once, but executions overlapped {}x the wall time",
           "unit/test_judge_ratelimit.py::test_executions_overlapping_past_what_the_pool_admits_fail",
           "test_conformance_tensors.py::test_rate_limiter_catches_instances_served_without_their_resources"),
)


def _instances(description) -> list[dict[str, int]]:
    """Each instance's resource needs ({name: count}), a group's count times its devices (as Triton runs them: a
    group without a count is two KIND_CPU instances here, :func:`~tritonsuite.core.description.as_served`)."""
    found = []
    for group, served in zip(description.config.get("instance_group", []), description.instance_groups):
        needs = {str(r.get("name", "")): int(r.get("count", 0))
                 for r in (group.get("rate_limiter") or {}).get("resources", [])}
        found += [needs] * (served.count * max(len(served.gpus), 1))
    return found


def _pool(instances: list[dict[str, int]], given: list[str]) -> dict[str, int]:
    """Each resource's amount: ``--rate-limit-resource`` where given, else the largest need of any instance."""
    pool: dict[str, int] = defaultdict(int)
    for needs in instances:
        for name, count in needs.items():
            pool[name] = max(pool[name], count)
    for entry in given:
        name, _, rest = entry.partition(":")
        pool[name] = int(rest.split(":")[0])
    return dict(pool)


def admitted(instances: list[dict[str, int]], pool: dict[str, int]) -> int:
    """The most instances the pool lets execute at once (the least needy first)."""
    left, running = dict(pool), 0
    for needs in sorted(instances, key=lambda n: sum(n.values())):
        if all(left.get(name, 0) >= count for name, count in needs.items()):
            for name, count in needs.items():
                left[name] -= count
            running += 1
    return running


def check_rate_limiter(target: Target) -> CheckResult:
    d = target.description
    instances = _instances(d)
    if not any(instances):
        return CheckResult(target.name, "rate_limiter", "no rate_limiter", "-", "skipped",
                           "no instance group declares rate_limiter resources")
    mode = target.server.started_with("--rate-limit")
    if mode is None:
        return CheckResult(target.name, "rate_limiter", "rate_limiter resources", "-", "skipped",
                           "a server the suite did not start: whether it runs with --rate-limit execution_count "
                           "is not known here")
    if not mode or mode[-1] != "execution_count":
        return CheckResult(target.name, "rate_limiter", "rate_limiter resources", "-", "skipped",
                           f"the server runs with --rate-limit {mode[-1] if mode else 'off'} (Triton's default off): "
                           f"rate_limiter resources are not enforced; start it with --rate-limit execution_count")
    pool = _pool(instances, target.server.started_with("--rate-limit-resource") or [])
    concurrency = min(MAX_CONCURRENCY, 2 * len(instances) * math.ceil(largest_batch(d) / target.batch_size))
    deltas, answers, elapsed = judged_load(target, concurrency, max(4 * concurrency, 16), [d.name])
    return judge_rate_limiter(target.name, instances, pool, concurrency, deltas[d.name], answers, elapsed)


def judge_rate_limiter(name: str, instances: list[dict[str, int]], pool: dict[str, int], concurrency: int,
                       delta: dict, answers: list, elapsed: float) -> CheckResult:
    """The verdict from the load's observations: each instance's resource needs, the pool, the load's concurrency,
    the model's statistics delta over it, its answers and wall time."""
    cap = admitted(instances, pool)
    compute_s = delta.get("execution_ns", 0) / 1e9
    overlap = compute_s / elapsed if elapsed > 0 else 0.0
    failed = [a for a in answers if not a.ok]
    needs = instances[0] if len(set(map(str, instances))) == 1 else instances
    declared = f"{len(instances)} instances needing {needs} of pool {pool}: at most {cap} at once"
    observed = (f"{delta.get('execution_count', 0)} executions at concurrency {concurrency}: compute {compute_s:.3f} s "
                f"over {elapsed:.3f} s (overlap {overlap:.2f})")
    evidence = {"instances": len(instances), "pool": pool, "admitted": cap, "concurrency": concurrency,
                "requests": len(answers), "executions": delta.get("execution_count", 0),
                "compute_infer_s": round(compute_s, 4), "wall_s": round(elapsed, 4), "overlap": round(overlap, 3)}
    if failed:
        return CheckResult(name, "rate_limiter", declared, observed, "fail",
                           f"{len(failed)} of {len(answers)} requests failed ({failed[0].error})", evidence)
    if overlap > cap * (1 + SLACK):
        return CheckResult(name, "rate_limiter", declared, observed, "fail",
                           f"the rate limiter admits {cap} instance(s) at once, but executions overlapped "
                           f"{overlap:.2f}x the wall time", evidence)
    if compute_s < MIN_COMPUTE_S:
        return CheckResult(name, "rate_limiter", declared, observed, "skipped",
                           f"executions too short here ({compute_s * 1e3 / max(evidence['executions'], 1):.2f} ms "
                           f"each) to show their overlap", evidence)
    return CheckResult(name, "rate_limiter", declared, observed, "pass", "", evidence)
