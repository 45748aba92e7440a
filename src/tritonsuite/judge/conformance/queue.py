"""Check queue_policy: the dynamic batcher's queue policies as declared, shown in waves of requests sent at once
(:mod:`tritonsuite.judge.conformance.waves`, which the priority check shares).

queue_policy (``default_queue_policy`` and each ``priority_queue_policy`` level, sent at that level):

- ``max_queue_size`` N: one wave of twice what the server may hold (cap executing + N queued). Passes when the excess
  is refused with Triton's ``Exceeds maximum queue size`` (r24.10: HTTP 503, counted neither in the statistics'
  ``fail_count`` nor in ``nv_inference_request_failure``: recorded, not judged), no fewer than N were accepted, and,
  where the wave arrived within half an execution, no more than cap + N (one round of slack). Fails when such a
  wave is accepted whole. A faster model than its own wave's arrival: sent once more (``WAVE_TRIES``), then skipped
  (the queue never had to hold N).
- ``default_timeout_microseconds`` T: a backlog outlasting T, and a second wave after T. REJECT: requests still queued
  at T are refused with ``Request timeout expired`` (HTTP 503, counted in ``fail_count``), none before 0.9 T;
  failing when none is refused while answers waited past T. DELAY: none refused, and a request of the second wave is
  served before expired ones queued earlier (Triton moves them behind the unexpired ones); arrival order fails.
- ``allow_timeout_override``: probes carrying ``timeout_us`` = T/4 behind a backlog of about T/2. Allowed (REJECT):
  probes are refused near T/4; not allowed: none is refused before T. Triton r24.10 honours a request's timeout only
  when it is shorter than the policy's default (``scheduler_utils.cc``), so without a default timeout the override
  has nothing to shorten: skipped with that reason.
- Nothing declared: Triton's default is an unbounded queue without timeout; a wave of twice what the instances take
  is answered whole (a server run with a queue limit the configuration does not declare refuses it).

priority: :mod:`tritonsuite.judge.conformance.priority` (on the same waves).

Kinds: Triton's sequence batcher has no queue policy nor priority levels, an ensemble's scheduler no queue (its
steps' own batchers queue: check the step deployments); both are skipped with that reason. A decoupled model's
waves travel on gRPC streams, judged the same.
"""
from __future__ import annotations

import math
import statistics as stats
from dataclasses import dataclass

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import metrics
from tritonsuite.judge.conformance.waves import (MAX_BURST, PROBES, QUEUE_FULL, TIMED_OUT, Part, backlog, batcher,
                                                 capacity, combine, failures, latencies, measure, not_queued, pace,
                                                 unpaced, until_contended)
from tritonsuite.load.exchange import Answer
from tritonsuite.load.http import RequestOptions
from tritonsuite.core.reasons import reason

#: functions that return reasons (tritonsuite.core.reasons)
REASON_FUNCTIONS = ("_otherwise",)
BEHIND = 1.5  # allow_timeout_override: a backlog answered after more than this x its sized time fell behind
SLACK_MS = 30.0  # what a busy host adds to a request beside its queue and execution (waking threads, the client)


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} requests refused ({})",
           "test_conformance_queue.py::test_a_deployment_served_without_the_field_fails"),
    reason("{} requests failed otherwise ({})",
           "unit/test_judge_queue.py::test_a_request_failed_otherwise_than_by_a_policy_fails"),
    reason("refused '{}' after {} accepted: the queue held fewer than {}",
           "unit/test_judge_queue.py::test_refused_as_full_before_the_queue_held_max_queue_size_fails"),
    reason("{} of a wave arriving within {} ms accepted, more than {} executing + {} queued (+{} slack)",
           "unit/test_judge_queue.py::test_more_accepted_than_executing_queued_and_one_round_of_slack_fails"),
    reason("all {} requests of a wave arriving within {} ms (executions of {} ms) accepted, more than {} executing "
           "+ {} queued",
           "unit/test_judge_queue.py::test_a_wave_accepted_whole_fails_only_where_it_arrived_within_half_an_execution",
           "test_conformance_queue.py::test_a_deployment_served_without_the_field_fails"),
    reason("DELAY declared, but {} requests refused '{}'",
           "unit/test_judge_queue.py::test_a_request_refused_on_its_timeout_fails_delay",
           "test_conformance_queue.py::test_a_deployment_served_without_the_field_fails"),
    reason("{} expired requests were still queued when {} fresh ones came, and none was served after the first of "
           "them: no expired request was delayed",
           "unit/test_judge_queue.py::test_expired_requests_served_in_arrival_order_ahead_of_fresh_ones_fail_delay",
           "test_conformance_queue.py::test_a_deployment_served_without_the_field_fails"),
    reason("{} refused '{}' after {} ms, before the {} ms timeout",
           "unit/test_judge_queue.py::test_a_request_refused_before_nine_tenths_of_the_timeout_fails"),
    reason("{} timed out, fail_count +{}",
           "unit/test_judge_queue.py::test_timed_out_requests_not_counted_in_fail_count_fail"),
    reason("{} answered after waiting past the {} ms timeout (up to {} ms)",
           "unit/test_judge_queue.py::test_more_than_one_answer_after_waiting_past_the_timeout_fails",
           "test_conformance_queue.py::test_a_deployment_served_without_the_field_fails"),
    reason("override allowed, but {} probes with timeout_us {} were answered after up to {} ms",
           "unit/test_judge_queue.py::test_probes_answered_past_their_own_timeout_fail_where_the_override_is_allowed"),
    reason("override not allowed, but {} probes refused after {} ms, before the {} ms default: their own timeout_us "
           "was honoured",
           "unit/test_judge_queue.py::test_probes_refused_on_their_own_timeout_fail_where_the_override_is_not_allowed"),
)


@dataclass(frozen=True)
class Policy:
    action: str  # REJECT or DELAY
    timeout_us: int
    override: bool
    max_size: int

    def timeout(self, name: str) -> str:
        return f"{name}: {self.action} after default_timeout_microseconds {self.timeout_us}"


def _policy(entry: dict) -> Policy:
    return Policy(str(entry.get("timeout_action", "REJECT")), int(entry.get("default_timeout_microseconds", 0)),
                  bool(entry.get("allow_timeout_override", False)), int(entry.get("max_queue_size", 0)))


def policies(d) -> list[tuple[str, int, Policy]]:
    """(name, the priority to send at, policy) for each declared queue policy: the default one at a level without its
    own (priority 0 without priority levels), each ``priority_queue_policy`` at its level."""
    db = batcher(d)
    levels = int(db.get("priority_levels", 0))
    own = {int(k): _policy(v) for k, v in (db.get("priority_queue_policy") or {}).items()}
    found = []
    if "default_queue_policy" in db:
        free = [lv for lv in range(1, levels + 1) if lv not in own]
        if not levels or free:
            found.append(("default_queue_policy", free[0] if levels else 0, _policy(db["default_queue_policy"])))
    found += [(f"priority_queue_policy[{lv}]", lv, p) for lv, p in sorted(own.items())]
    return found


def _longest_idle_ms(answers: list[Answer]) -> float:
    """The longest time between two answers while the later one was already waiting (r24.10's batcher, under a queue
    policy, can sit idle with requests queued; a busy one answers every execution)."""
    done = sorted(answers, key=lambda a: a.end)
    return max(((b.end - a.end) * 1e3 for a, b in zip(done, done[1:]) if b.start <= a.end), default=0.0)


def _otherwise(answers: list[Answer]) -> list[str]:
    """Failures that are neither policy's refusal, as problems."""
    failed = failures(answers, QUEUE_FULL, TIMED_OUT)
    return [f"{len(failed)} requests failed otherwise ({failed[0].error})"] if failed else []


# ---------------------------------------------------------------------------------------------------- queue_policy
def check_queue_policy(target: Target) -> CheckResult:
    skip = not_queued(target, "queue_policy")
    if skip:
        return skip
    cap = capacity(target)
    declared = policies(target.description)
    if not declared:
        return combine(target.name, "queue_policy", [_unbounded(target, cap)])
    exec_ms = pace(target)
    if exec_ms is None:  # refused by a declared timeout
        return unpaced(target, "queue_policy", "; ".join(p.timeout(name) for name, _, p in declared if p.timeout_us))
    parts = []
    for name, level, p in declared:
        for judge, wanted in ((_queue_size, p.max_size), (_timeout, p.timeout_us),
                              (_override, p.timeout_us or p.override)):
            if wanted:
                parts.append(judge(target, name, level, p, cap, exec_ms))
                # the next backlog sized from the last wave's own executions: requests sent alone (the pace) take
                # longer per execution than a queue's on a busy host, and a backlog sized from them falls short
                exec_ms = (parts[-1].evidence or {}).get("compute_ms_per_execution") or exec_ms
    return combine(target.name, "queue_policy", parts)


def _unbounded(target: Target, cap: int) -> Part:
    n = min(MAX_BURST, 2 * cap + PROBES)
    (answers,), delta, exec_ms = measure(target, [(n, RequestOptions(), 0.0)])
    refused = [a for a in answers if not a.ok]
    part = Part("no queue policy: Triton's default, an unbounded queue without timeout",
                f"a wave of {n} at once ({cap} execute at a time): {n - len(refused)} answered, {len(refused)} refused",
                evidence={"wave": n, "capacity": cap, "refused": len(refused), "latency_ms": latencies(answers),
                          "compute_ms_per_execution": round(exec_ms, 3)})
    problems = [f"{len(refused)} of {n} requests refused ({refused[0].error})"] if refused else []
    part.problems = tuple(problems)
    return part


def _queue_size(target: Target, name: str, level: int, p: Policy, cap: int, exec_ms: float) -> Part:
    holds = cap + p.max_size
    n = 2 * holds + PROBES
    part = Part(f"{name}: max_queue_size {p.max_size}")
    if n > MAX_BURST:
        part.skipped = f"filling it takes a wave of {n} requests at once, more than the {MAX_BURST} this check sends"
        return part

    def send() -> Part:  # skipped where none was refused and the wave took over half an execution to arrive
        before_metrics = metrics(target.server, target.name)
        (answers,), delta, measured = measure(target, [(n, RequestOptions(priority=level), 0.0)])
        after_metrics = metrics(target.server, target.name)
        sent = judge_queue_size(part.declared, p, level, cap, measured or exec_ms, n, answers,
                                delta.get("fail_count", 0))
        sent.evidence["failure_metric"] = None if before_metrics is None else \
            after_metrics["nv_inference_request_failure"] - before_metrics["nv_inference_request_failure"]
        return sent
    return until_contended(send)


def judge_queue_size(declared: str, p: Policy, level: int, cap: int, exec_ms: float, n: int, answers: list[Answer],
                     fail_count: int) -> Part:
    """max_queue_size judged from a wave of ``n``, twice what the server may hold (``cap`` executing + ``p.max_size``
    queued), sent at priority ``level``: its answers, the executions' time (ms), the statistics' fail_count delta."""
    holds = cap + p.max_size
    part = Part(declared)
    full = [a for a in answers if QUEUE_FULL in a.error]
    accepted = len(answers) - len(full) - len(failures(answers, QUEUE_FULL))
    span_ms = (max(a.start for a in answers) - min(a.start for a in answers)) * 1e3
    at_once = span_ms < exec_ms / 2  # the whole wave arrived within half an execution: no slot freed meanwhile
    part.observed = (f"a wave of {n} at level {level} within {span_ms:.1f} ms (executions {exec_ms:.1f} ms, {cap} at "
                     f"a time): {accepted} accepted, {len(full)} refused '{QUEUE_FULL}', fail_count "
                     f"+{fail_count}")
    part.evidence = {"wave": n, "priority": level, "capacity": cap, "accepted": accepted, "queue_full": len(full),
                     "send_span_ms": round(span_ms, 2), "compute_ms_per_execution": round(exec_ms, 3),
                     "fail_count": fail_count, "latency_ms": latencies(answers)}
    problems = _otherwise(answers)
    if full:
        if accepted < p.max_size:
            problems.append(f"refused '{QUEUE_FULL}' after {accepted} accepted: the queue held fewer than "
                            f"{p.max_size}")
        if at_once and accepted > holds + cap:
            problems.append(f"{accepted} of a wave arriving within {span_ms:.1f} ms accepted, more than {cap} "
                            f"executing + {p.max_size} queued (+{cap} slack)")
    elif at_once:
        problems.append(f"all {accepted} requests of a wave arriving within {span_ms:.1f} ms (executions of "
                        f"{exec_ms:.1f} ms) accepted, more than {cap} executing + {p.max_size} queued")
    else:
        part.skipped = (f"none refused, but the wave took {span_ms:.1f} ms to arrive against executions of "
                        f"{exec_ms:.2f} ms: the queue never had to hold {p.max_size}")
    part.problems = tuple(problems)
    return part


def _timeout(target: Target, name: str, level: int, p: Policy, cap: int, exec_ms: float) -> Part:
    t_ms = p.timeout_us / 1e3
    part = Part(p.timeout(name))
    probes = max(PROBES, cap)
    limit = min(MAX_BURST, cap + p.max_size) if p.max_size else MAX_BURST
    options = RequestOptions(priority=level)
    # twice at most: once more, sized from the first waves' own executions, where the first showed nothing (a backlog
    # sized from a busy host's pace falls short) or DELAY's fresh wave was served late (an idle batcher, once)
    for attempt in range(2):
        need = t_ms + 2 * exec_ms + SLACK_MS + (probes / cap + 4) * exec_ms
        n, lasts = backlog(cap, exec_ms, need, limit)
        if lasts < need or t_ms < 3 * exec_ms:
            if not attempt:
                part.skipped = (f"executions of {exec_ms:.2f} ms: no backlog of at most {limit} requests outlasts the "
                                f"{t_ms:g} ms timeout by {probes} more ({lasts:.0f} ms)")
            return part
        at_s = (t_ms + exec_ms) / 1e3
        (first, second), delta, measured = measure(target, [(n, options, 0.0), (probes, options, at_s)])
        exec_ms = measured or exec_ms
        part = judge_timeout(part.declared, p, level, cap, exec_ms, n, at_s, first, second, delta.get("fail_count", 0),
                             attempt)
        if not part.skipped and not (p.action == "DELAY" and part.problems):
            break
    return part


def judge_timeout(declared: str, p: Policy, level: int, cap: int, exec_ms: float, n: int, at_s: float,
                  first: list[Answer], second: list[Answer], fail_count: int, attempt: int) -> Part:
    """default_timeout_microseconds judged from a backlog of ``n`` (``first``) and a second wave sent at ``at_s``
    (``second``, :data:`~tritonsuite.judge.conformance.waves.PROBES` or ``cap`` requests), both at priority ``level``:
    their answers, the executions' time (ms), the statistics' fail_count delta; ``attempt`` from 0."""
    t_ms = p.timeout_us / 1e3
    probes = max(PROBES, cap)
    part = Part(declared)
    timed = [a for a in first + second if TIMED_OUT in a.error]
    served = [a for a in first + second if a.ok]
    bound_ms = t_ms + 2 * exec_ms + SLACK_MS  # waited past T: a request answered later than this
    late = [a for a in served if a.latency_ms > bound_ms]
    part.evidence = {"backlog": n, "second_wave": probes, "second_wave_at_ms": round(at_s * 1e3, 1),
                     "priority": level,
                     "capacity": cap, "compute_ms_per_execution": round(exec_ms, 3), "timed_out": len(timed),
                     "fail_count": fail_count, "backlog_latency_ms": latencies(first),
                     "second_latency_ms": latencies(second), "attempt": attempt + 1}
    part.observed = (f"a backlog of {n} and {probes} more at {at_s * 1e3:.0f} ms (executions {exec_ms:.1f} ms): "
                     f"{len(served)} answered (longest {max(latencies(served) or [0]):.0f} ms), {len(timed)} "
                     f"refused '{TIMED_OUT}', fail_count +{fail_count}")
    problems = _otherwise(first + second)
    if p.action == "DELAY":
        came = second[0].start if second else math.inf  # answers are in the order sent
        # the first fresh answer: r24.10 serves delayed requests one batch per 500 ms wake-up, and a fresh request
        # waiting behind that crawl expires too, to be served in arrival order among them
        fresh_end = min((a.end for a in second if a.ok), default=math.inf)
        behind = [a for a in first if a.ok and a.start < came and a.end > fresh_end + exec_ms / 2e3]
        waited = [a for a in first if a.end > came + exec_ms / 1e3]
        part.evidence["backlog_answered_after_a_fresh_one"] = len(behind)
        if timed:
            problems.append(f"DELAY declared, but {len(timed)} requests refused '{TIMED_OUT}'")
        elif len(waited) <= cap:
            part.skipped = (f"{len(waited)} of the backlog still queued when the second wave came: too few to show "
                            f"a delayed one beside the {cap} executing")
        elif not behind and stats.median(latencies(second) or [0.0]) < 3 * exec_ms + SLACK_MS:
            part.skipped = (f"the fresh wave was answered in {stats.median(latencies(second)):.0f} ms (median): it "
                            f"reached the server after the backlog was served (a client stalled on a busy host)")
        elif not behind and (idle := _longest_idle_ms(first + second)) > t_ms:
            part.skipped = (f"the batcher sat {idle:.0f} ms between answers with requests queued, longer than "
                            f"the {t_ms:g} ms timeout: the fresh wave expired too, and expired requests keep their "
                            f"order")
        elif not behind:
            problems.append(f"{len(waited)} expired requests were still queued when {probes} fresh ones came, and "
                            f"none was served after the first of them: no expired request was delayed")
    else:
        early = [a for a in timed if a.latency_ms < 0.9 * t_ms]
        if early:
            problems.append(f"{len(early)} refused '{TIMED_OUT}' after {min(latencies(early))} ms, before the "
                            f"{t_ms:g} ms timeout")
        if timed and fail_count < len(timed):
            problems.append(f"{len(timed)} timed out, fail_count +{fail_count}")
        if len(late) > 1:
            problems.append(f"{len(late)} answered after waiting past the {t_ms:g} ms timeout (up to "
                            f"{max(latencies(late)):.0f} ms)")
        elif not timed:
            part.skipped = (f"none refused, and no request waited past the {t_ms:g} ms timeout: answered after "
                            f"{max(latencies(served) or [0]):.0f} ms at most, within {bound_ms:.0f} ms (the "
                            f"timeout, two executions and {SLACK_MS:g} ms)")
    part.problems = tuple(problems)
    return part


def _override(target: Target, name: str, level: int, p: Policy, cap: int, exec_ms: float) -> Part:
    part = Part(f"{name}: allow_timeout_override {str(p.override).lower()}")
    if not p.timeout_us:
        part.skipped = ("no default timeout: Triton r24.10 honours a request's timeout_us only when shorter than the "
                        "policy's default_timeout_microseconds, so there is nothing to override")
        return part
    t_ms = p.timeout_us / 1e3
    own_ms = t_ms / 4
    probes = max(PROBES, cap)
    limit = min(MAX_BURST, cap + p.max_size - probes) if p.max_size else MAX_BURST
    # the probes wait out their own timeout (and the next execution) but not the default one
    gap_ms = max(2 * exec_ms, 40.0)  # the backlog queued (its connections opened) before the probes come
    n, lasts = backlog(cap, exec_ms, gap_ms + own_ms + 3 * exec_ms + SLACK_MS, limit)
    if p.action == "DELAY" or lasts < gap_ms + own_ms + 2 * exec_ms + SLACK_MS or lasts > 0.85 * t_ms:
        part.skipped = ("under DELAY an expired request is only moved behind the unexpired ones" if p.action == "DELAY"
                        else f"executions of {exec_ms:.2f} ms: no backlog of at most {limit} requests keeps a probe "
                        f"waiting between its own {own_ms:g} ms and the default {t_ms:g} ms ({lasts:.0f} ms)")
        return part
    (first, second), delta, measured = measure(target, [
        (n, RequestOptions(priority=level), 0.0),
        (probes, RequestOptions(priority=level, timeout_us=int(own_ms * 1e3)), gap_ms / 1e3)])
    return judge_override(part.declared, p, level, cap, exec_ms, measured, n, lasts, first, second)


def judge_override(declared: str, p: Policy, level: int, cap: int, exec_ms: float, measured: float, n: int,
                   lasts: float, first: list[Answer], second: list[Answer]) -> Part:
    """allow_timeout_override judged from a backlog of ``n`` meant to last ``lasts`` ms (``first``) and probes
    carrying timeout_us = a quarter of the default (``second``), at priority ``level``: their answers, the executions'
    time sized from (``exec_ms``) and measured over the waves (``measured``, 0: none) in ms."""
    t_ms = p.timeout_us / 1e3
    own_ms = t_ms / 4
    probes = max(PROBES, cap)
    part = Part(declared)
    timed = [a for a in second if TIMED_OUT in a.error]
    waited = [a for a in second if a.latency_ms > own_ms + 2 * exec_ms + SLACK_MS]
    part.observed = (f"{probes} probes with timeout_us {int(own_ms * 1e3)} behind a backlog of {n} "
                     f"({lasts:.0f} ms): {len(timed)} refused '{TIMED_OUT}' (after {latencies(timed)} ms), "
                     f"{len(second) - len(timed)} answered (after {latencies([a for a in second if a.ok])} ms)")
    part.evidence = {"backlog": n, "probes": probes, "probe_timeout_us": int(own_ms * 1e3), "priority": level,
                     "compute_ms_per_execution": round(measured or exec_ms, 3), "backlog_latency_ms": latencies(first),
                     "probe_latency_ms": latencies(second), "probes_timed_out": len(timed)}
    problems = _otherwise(first + second)
    own = [a for a in timed if a.latency_ms < 0.9 * t_ms]  # refused on their own timeout, not the default one
    served = [a for a in waited if a.ok]  # waited past their own timeout and were answered
    drained = max((a.latency_ms for a in first), default=0.0)
    if drained > BEHIND * lasts + 2 * exec_ms + SLACK_MS:
        # the probes reached the batcher seconds late, some examined before their expiry and executed after it,
        # some refused only at the default: their fate says nothing of their own timeout (seen beside
        # busyhost --cores 2: a 1.3 s backlog drained in 3 s, probes of a sound deployment answered at 3 s)
        part.skipped = (f"the backlog of {n} sized to last {lasts:.0f} ms was answered after up to {drained:.0f} ms: "
                        f"the server fell behind the pace it was sized from (a busy host), so the probes' fate says "
                        f"nothing of their own timeout")
    elif p.override and served and not own:
        problems.append(f"override allowed, but {len(served)} probes with timeout_us {int(own_ms * 1e3)} were "
                        f"answered after up to {max(latencies(served)):.0f} ms")
    elif not p.override and own:
        problems.append(f"override not allowed, but {len(own)} probes refused after {latencies(own)} ms, before the "
                        f"{t_ms:g} ms default: their own timeout_us was honoured")
    elif not (own if p.override else served):
        # r24.10's batcher, idle between wake-ups under a queue policy, may notice an expiry only later
        part.skipped = (f"no probe both waited past its own {own_ms:g} ms and was "
                        f"{'refused' if p.override else 'answered'}"
                        f" before the default {t_ms:g} ms (probes after {latencies(second)} ms)")
    part.problems = tuple(problems)
    return part

