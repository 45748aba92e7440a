"""Check priority: ``dynamic_batching.priority_levels`` and ``default_priority_level`` shown under contention, in the
waves of :mod:`tritonsuite.judge.conformance.waves` (a backlog sent at once, then probes in another thread).

``priority_levels`` L and ``default_priority_level`` D (a lower number is served first): a backlog at a low
level, then probes at a higher one; each probe's count of earlier backlog requests answered after it (completion
order, not one latency). Levels: backlog at L, probes at 1. Default: requests without a priority are level D, so they
pass a backlog at L (D < L) or are passed by probes at 1 (D > 1). Passes when most probes passed backlog requests
(their latencies are evidence only: a client stalled on a busy host sends a probe late, which its latency shows and
its place in the completion order does not); FIFO (served without ``priority_levels``) fails.

A single level (Triton's default) is skipped: every request is served in arrival order, nothing passes another.
Where the probes came after the backlog had drained (their client stalled on a busy host: no contention to order),
the waves are sent once more (:data:`~tritonsuite.judge.conformance.waves.WAVE_TRIES`) before the setting is skipped.
Kinds: as for queue_policy (a sequence batcher has no priority levels; an ensemble's steps queue on their own).
"""
from __future__ import annotations

import statistics as stats

from tritonsuite.judge.conformance.waves import (MAX_BURST, PROBES, QUEUE_FULL, TIMED_OUT, Part, backlog, batcher,
                                                 capacity, combine, failures, latencies, measure, not_queued, pace,
                                                 unpaced, until_contended)
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.load.exchange import Answer
from tritonsuite.load.http import RequestOptions
from tritonsuite.core.reasons import reason


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} requests failed ({})", "unit/test_judge_queue.py::test_a_probe_failed_otherwise_than_by_a_queue_policy_fails"),
    reason("probes at priority {} passed a median {} of {} earlier requests at priority {} ({} ms against {} ms): "
           "served in arrival order",
           "unit/test_judge_queue.py::test_probes_served_after_the_backlog_fail_as_arrival_order",
           "unit/test_judge_queue.py::test_probes_must_pass_a_median_of_at_least_one",
           "test_conformance_queue.py::test_a_deployment_served_without_the_field_fails"),
)


def check_priority(target: Target) -> CheckResult:
    skip = not_queued(target, "priority")
    if skip:
        return skip
    db = batcher(target.description)
    levels, default = int(db.get("priority_levels", 0)), int(db.get("default_priority_level", 0))
    if levels < 2:
        return CheckResult(target.name, "priority", f"priority_levels {levels}", "-", "skipped",
                           "one priority level (Triton's default): requests are served in arrival order, nothing "
                           "passes another")
    cap, exec_ms = capacity(target), pace(target)
    if exec_ms is None:
        return unpaced(target, "priority", f"priority_levels {levels}")
    parts = [_overtake(target, f"priority_levels {levels}: level 1 before level {levels}", levels, 1, cap, exec_ms)]
    if default < levels:
        parts.append(_overtake(target, f"default_priority_level {default}: no priority before level {levels}",
                               levels, 0, cap, exec_ms))
    if default > 1:
        parts.append(_overtake(target, f"default_priority_level {default}: level 1 before no priority", 0, 1, cap,
                               exec_ms))
    return combine(target.name, "priority", parts)


def _overtake(target: Target, declared: str, low: int, high: int, cap: int, exec_ms: float) -> Part:
    """A backlog at priority ``low``, then probes at ``high`` (0: none, the default level): the probes pass it."""
    part = Part(declared)
    probes = max(PROBES, cap)
    gap_ms = max(3 * exec_ms, 20.0)  # the backlog queued before the probes come
    n, lasts = backlog(cap, exec_ms, gap_ms + (probes / cap + 4) * exec_ms, MAX_BURST)
    if lasts < gap_ms + (probes / cap + 2) * exec_ms:
        part.skipped = (f"executions of {exec_ms:.2f} ms: no backlog of at most {MAX_BURST} requests is still queued "
                        f"when the probes come ({lasts:.0f} ms)")
        return part

    def send() -> Part:  # skipped where the probes came after the backlog had drained (their client stalled)
        (first, second), delta, measured = measure(target, [(n, RequestOptions(priority=low), 0.0),
                                                             (probes, RequestOptions(priority=high), gap_ms / 1e3)])
        return judge_overtake(declared, low, high, cap, measured or exec_ms, n, gap_ms, first, second)
    return until_contended(send)


def judge_overtake(declared: str, low: int, high: int, cap: int, exec_ms: float, n: int, gap_ms: float,
                   first: list[Answer], second: list[Answer]) -> Part:
    """Priority judged from a backlog of ``n`` at priority ``low`` (``first``) and probes at ``high`` sent ``gap_ms``
    later (``second``): the probes pass backlog requests still queued when they came (completion order: each probe's
    count of earlier backlog requests answered more than half an execution of ``exec_ms`` after it)."""
    part = Part(declared)
    probes = max(PROBES, cap)
    came = min((a.start for a in second), default=0.0)
    queued = [a for a in first if a.ok and a.start < came and a.end > came + exec_ms / 1e3]
    passed = [sum(1 for a in queued if a.start < b.start and a.end > b.end + exec_ms / 2e3) for b in second if b.ok]
    part.evidence = {"backlog": n, "backlog_priority": low, "probes": probes, "probe_priority": high,
                     "probes_at_ms": round(gap_ms, 1), "compute_ms_per_execution": round(exec_ms, 3),
                     "still_queued": len(queued), "passed_per_probe": passed, "probe_latency_ms": latencies(second),
                     "queued_latency_ms": latencies(queued)}
    waited = stats.median(latencies(queued)) if queued else 0.0
    took = stats.median(latencies(second)) if second else 0.0
    part.observed = (f"{probes} probes at priority {high} behind {len(queued)} of {n} at priority {low} still queued: "
                     f"median {stats.median(passed) if passed else 0:g} passed per probe, probes {took:.0f} ms against "
                     f"{waited:.0f} ms (medians)")
    part.evidence["refused_by_queue_policy"] = sum(not a.ok for a in first + second) - len(failed := failures(
        first + second, QUEUE_FULL, TIMED_OUT))  # the deployment's own queue policies at work, not judged here
    problems = [f"{len(failed)} requests failed ({failed[0].error})"] if failed else []
    if len(queued) <= cap:
        part.skipped = f"{len(queued)} of the backlog still queued when the probes came: no contention to order"
    elif not passed or stats.median(passed) < 1:  # completion order, not latency: a stalled client delays a
        problems.append(f"probes at priority {high} passed a median {stats.median(passed) if passed else 0:g} of "
                        f"{len(queued)} earlier requests at priority {low} ({took:.0f} ms against {waited:.0f} ms): "
                        f"served in arrival order")  # probe's send, never its place in the queue
    part.problems = tuple(problems)
    return part
