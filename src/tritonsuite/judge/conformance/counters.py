"""Check 6, counters: the statistics extension and the Prometheus metrics agree with what the client sent and
received, over a known mix of requests (answered ones of two batch sizes, and refused ones).

Triton's counters: a request answered counts once in ``success`` (``nv_inference_request_success``); its samples
count in ``inference_count`` (``nv_inference_count``) unless the response cache answered them; an execution (one
batch the scheduler formed) counts once in ``execution_count`` (``nv_inference_exec_count``) and once in the
batch-size histogram. A request refused before it reaches the scheduler (its shape is wrong) counts nowhere; one
that reaches the model and fails counts in ``fail`` and ``nv_inference_request_failure``.
"""
from __future__ import annotations

import time

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.refusals import SENDERS, probes, protocols
from tritonsuite.judge.conformance.traffic import ask, metrics, settled_statistics, statistics, stats_delta
from tritonsuite.core.reasons import reason

REQUESTS = 5  # answered requests of each batch size
SETTLE_S = 3.0  # how long the counters may take to show the last requests
PROBES = 2  # requests of a wrong shape sent, refused before they reach the scheduler


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("statistics count {} successes, the client got {} answers",
           "unit/test_judge_counters.py::test_successes_the_client_did_not_get_fail",
           "test_conformance_kinds.py::test_counters_catch_a_second_client_on_a_decoupled_model",
           "test_conformance_checks.py::test_counters_catch_a_second_client_on_the_model"),
    reason("statistics count {} failures, the client saw {}",
           "unit/test_judge_counters.py::test_failures_the_client_did_not_see_fail"),
    reason("{} cache hits for requests never sent before",
           "unit/test_judge_counters.py::test_cache_hits_on_requests_never_sent_before_fail"),
    reason("statistics count {} inferences, the client sent {} answered samples",
           "unit/test_judge_counters.py::test_inferences_other_than_the_samples_answered_fail"),
    reason("{} executions, but the batch-size histogram counts {}",
           "unit/test_judge_counters.py::test_executions_the_histogram_does_not_count_fail"),
    reason("{} executions for {} requests",
           "unit/test_judge_counters.py::test_more_executions_than_requests_fail"),
    reason("{} rose by {}, the statistics by {}",
           "unit/test_judge_counters.py::test_metrics_that_rose_otherwise_than_the_statistics_fail"),
)


def check_counters(target: Target) -> CheckResult:
    d = target.description
    batches = [1] + ([min(2, d.max_batch_size)] if d.max_batch_size >= 2 else [])
    before_stats = settled_statistics(target.server, target.name)
    before_metrics = metrics(target.server, target.name)
    answered = failed = samples = 0
    for b in batches:  # each request as the driver sends it (a decoupled model's on a stream: counted once, at
        for i in range(REQUESTS):  # its final response); distinct ones where a response cache would answer repeats
            request = target.fresh_request(b) if d.response_cache else target.request(b)
            if ask(target, request).ok:
                answered += 1
                samples += b if d.batching else 1
            else:
                failed += 1
    shape_probe = next(p for p in probes(target) if p[0] == "wrong shape")
    send = SENDERS[protocols(target)[0]]
    refused = sum(send(target.server, target.name, *shape_probe[1:])[0] not in (200, "OK") for _ in range(PROBES))
    deadline = time.monotonic() + SETTLE_S
    while True:
        s = stats_delta(statistics(target.server, target.name), before_stats)
        m = metrics(target.server, target.name)
        m = None if m is None else {k: m[k] - before_metrics[k] for k in m}
        problems = _compare(s, m, answered, failed, samples)
        if not problems or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return judge_counters(target.name, s, m, answered, failed, samples, refused, batches)


def judge_counters(name: str, s: dict, m: dict | None, answered: int, failed: int, samples: int, refused: int,
                   batches: list[int]) -> CheckResult:
    """The verdict from the counters' rise over the mix (``s``: the statistics delta, ``m``: the metrics' rise, None
    where the metrics endpoint is not known) and what the client saw: requests answered (``samples`` in them) and
    failed, refused before scheduling, the batch sizes sent."""
    problems = _compare(s, m, answered, failed, samples)
    sent = answered + failed + PROBES
    evidence = {"client": {"sent": sent, "answered": answered, "failed": failed, "refused_before_scheduling": refused,
                           "samples_answered": samples, "batch_sizes": batches},
                "statistics": {k: s.get(k, 0) for k in ("success_count", "fail_count", "inference_count",
                                                        "execution_count", "cache_hit_count")}
                | {"batch_stats": s["batch_stats"]},
                "metrics": m if m is not None else ("not known (remote server: its metrics port is the operator's; "
                                                    "--triton-metrics-url gives it)")}
    observed = (f"statistics: success {s.get('success_count', 0)}, fail {s.get('fail_count', 0)}, inferences "
                f"{s.get('inference_count', 0)}, executions {s.get('execution_count', 0)}"
                + ("" if m is None else f"; metrics: success {m['nv_inference_request_success']:g}, failure "
                   f"{m['nv_inference_request_failure']:g}, inferences {m['nv_inference_count']:g}, executions "
                   f"{m['nv_inference_exec_count']:g}"))
    declared = (f"client: {answered} answered ({samples} samples, batches {batches}), {failed} failed, {refused} "
                f"refused for a wrong shape")
    if m is None and not problems:
        return CheckResult(name, "counters", declared, observed, "pass",
                           "", evidence | {"note": "statistics only: the metrics endpoint is not known"})
    return CheckResult(name, "counters", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)


def _compare(s: dict, m: dict | None, answered: int, failed: int, samples: int) -> list[str]:
    problems = []
    hits = s.get("cache_hit_count", 0)
    if s.get("success_count", 0) != answered:
        problems.append(f"statistics count {s.get('success_count', 0)} successes, the client got {answered} answers")
    if s.get("fail_count", 0) != failed:
        problems.append(f"statistics count {s.get('fail_count', 0)} failures, the client saw {failed}")
    if hits:
        problems.append(f"{hits} cache hits for requests never sent before")
    if s.get("inference_count", 0) != samples:
        problems.append(f"statistics count {s.get('inference_count', 0)} inferences, the client sent {samples} "
                        f"answered samples")
    executions = s.get("execution_count", 0)
    if executions != sum(s["batch_stats"].values()):
        problems.append(f"{executions} executions, but the batch-size histogram counts "
                        f"{sum(s['batch_stats'].values())}")
    if executions > answered + failed:
        problems.append(f"{executions} executions for {answered + failed} requests")
    if m is not None:
        pairs = (("nv_inference_request_success", s.get("success_count", 0)),
                 ("nv_inference_request_failure", s.get("fail_count", 0)),
                 ("nv_inference_count", s.get("inference_count", 0)),
                 ("nv_inference_exec_count", executions))
        problems += [f"{name} rose by {m[name]:g}, the statistics by {value}" for name, value in pairs
                     if m[name] != value]
    return problems
