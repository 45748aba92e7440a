"""Checks 2 and 3: batching and instances as declared, read from the statistics extension under closed-loop load.

The load is sent as the deployment's driver sends it (:func:`tritonsuite.load.exchange.exchange`: a sequence model's
in sequences, one live per connection; a decoupled model's on streams). What is judged is each scheduler that
executes the requests (``Driver.scheduled``): the deployment's own, or an ensemble's steps, each against its own
configuration (an ensemble's scheduler only passes tensors between them). A sequence batcher is judged as a batcher:
``direct`` batches the slots with a request ready, ``oldest`` up to its preferred sizes within its queue delay; its
load keeps no more sequences live than its slots (``ModelDescription.sequence_slots``), since a sequence in the
backlog queues where no execution can group it, and its queue time would count as waiting that was never
groupable (seen on a busy host: ``oldest`` with 4 candidates under 16 sequences, every execution of one request).

Batching: the statistics' batch-size histogram (executions per batch size, ``batch_stats``) over the load. Queue
time is the server's own (``queue`` ns per request), bounded by the queue delay plus the executions a request can
wait behind (the load in flight over what one round of instances executes). A batcher groups only requests that
wait: where no execution grouped requests (or none reached a preferred size) while fewer requests waited on average
(Little's law: requests per second times queue time) than that needs, the instances kept up with the client and the
check is skipped with those figures, not failed: a fast model under a slow client shows no batching to judge.
Instances: executions overlap when the server's compute time (``batch_stats``' ``compute_infer`` ns summed over
executions, each the wall time of its execution) exceeds the wall time the load took: with one instance it cannot.
The load keeps twice what the instances execute at once in flight (a batcher's largest batch per instance).
"""
from __future__ import annotations

import math

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import judged_load, largest_batch, ms_per_execution
from tritonsuite.core.reasons import reason

#: requests per client of the load (closed loop): enough executions for a histogram on a slow model
REQUESTS_PER_CLIENT = 4
MIN_REQUESTS = 32
#: instances: the most connections its load opens (a large max_batch_size would ask for hundreds)
MAX_CONCURRENCY = 32
#: instances: the compute time over wall time that shows overlapping executions (1 is back to back)
OVERLAP = 1.2
#: a single instance may show a little over 1 (the statistics' ns and the client's clock are not the same clock)
SINGLE_SLACK = 1.1

# what a busy host adds to a request's queue time beside the queue delay and the executions ahead of it (waking the
# instance thread while the client and other stubs hold both cores): the add_sub models of tests/test_corpus.py,
# executions of 0.01-0.05 ms and no queue delay, queued 1.5-3.2 ms per request on a 2-core host (2026-11-27)
QUEUE_SLACK_MS = 10.0


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} requests failed ({})",
           "unit/test_judge_batching.py::test_failed_requests_fail_with_the_first_error",
           "unit/test_judge_batching.py::test_failed_requests_fail_the_instances_check_first"),
    reason("executions of batch {} exceed max_batch_size {}",
           "unit/test_judge_batching.py::test_executions_larger_than_max_batch_size_fail"),
    reason("the statistics extension reported no batch_stats for the load",
           "unit/test_judge_batching.py::test_a_load_without_batch_stats_fails"),
    reason("{} batching declared, but every one of {} executions held one request (batch {}) under {} concurrent "
           "requests",
           "unit/test_judge_batching.py::test_one_request_per_execution_while_requests_waited_fails",
           "unit/test_judge_batching.py::test_an_ensemble_names_the_step_that_fails",
           "test_conformance_checks.py::test_batching_catches_a_deployment_that_runs_requests_one_by_one",
           "test_conformance_kinds.py::test_batching_catches_a_sequence_model_served_with_one_slot",
           "test_conformance_kinds.py::test_batching_and_instances_catch_an_ensemble_whose_step_is_served_otherwise"),
    reason("no execution reached a preferred batch size {} (largest {}) under load of {} samples in flight",
           "unit/test_judge_batching.py::test_batches_short_of_every_preferred_size_while_enough_requests_waited_fail"),
    reason("queue time {} ms per request (over {}) exceeds the queue delay {} us plus {} execution(s) of {} ms ({} "
           "ms)",
           "unit/test_judge_batching.py::test_a_queue_time_past_the_queue_delay_and_the_executions_ahead_fails"),
    reason("{}, but {} requests ran as {} executions (histogram {})",
           "unit/test_judge_batching.py::test_requests_grouped_without_a_batcher_fail"),
    reason("{}one instance declared, but executions overlapped (compute {}x the wall time)",
           "unit/test_judge_batching.py::test_one_instance_whose_executions_overlap_fails",
           "unit/test_judge_batching.py::test_an_ensemble_names_the_step_whose_instances_fail"),
    reason("{}{} instances declared, but executions did not overlap (compute {}x the wall time under {} concurrent "
           "requests)",
           "unit/test_judge_batching.py::test_instances_whose_executions_never_overlap_fail",
           "test_conformance_checks.py::test_instances_catches_instances_that_never_run_at_once",
           "test_conformance_kinds.py::test_instances_catches_a_sequence_model_served_with_one_instance",
           "test_conformance_kinds.py::test_batching_and_instances_catch_an_ensemble_whose_step_is_served_otherwise"),
)


def _pooled(a: dict, b: dict) -> dict:
    return {k: (b.get(k, 0) + v if k != "batch_stats" else
                {s: v.get(s, 0) + b["batch_stats"].get(s, 0) for s in sorted({*v, *b["batch_stats"]})})
            for k, v in a.items()}


def _unmet(d, hist: dict, b: int) -> bool:
    db = d.batcher
    return db is not None and d.max_batch_size > b and bool(hist) and (
        max(hist) <= b or bool(db.preferred_batch_sizes) and not any(s >= p for p in db.preferred_batch_sizes
                                                                      for s in hist))


def _declared(d, b: int) -> str:
    db = d.batcher
    if db is None:
        return f"{d.name}: no batcher (max_batch_size {d.max_batch_size}): one execution per request"
    what = "dynamic_batching" if d.dynamic_batching is not None else \
        f"sequence_batching {d.sequence_batching.strategy}"
    if d.max_batch_size <= b:
        return f"{d.name}: {what} with max_batch_size {d.max_batch_size}: one request of batch {b} per execution"
    return (f"{d.name}: {what}: preferred {list(db.preferred_batch_sizes) or 'none'}, max_queue_delay "
            f"{db.max_queue_delay_microseconds} us, max_batch_size {d.max_batch_size}")


def check_batching(target: Target) -> CheckResult:
    d = target.description
    if not d.batching:
        return CheckResult(target.name, "batching", d.scheduler, "-", "skipped",
                           "max_batch_size 0: no batch dimension, nothing to batch")
    b = target.batch_size
    models = target.driver.scheduled()  # an ensemble's steps, else the deployment itself
    concurrency, cap = load_concurrency(models, b)
    requests = max(MIN_REQUESTS, REQUESTS_PER_CLIENT * concurrency)
    deltas, answers, elapsed = judged_load(target, concurrency, requests, [m.name for m in models])
    if any(_unmet(m, deltas[m.name]["batch_stats"], b) for m in models):
        # on a busy host the client may not keep every request in flight at the server: once more at twice the
        # load (within the slots) before a verdict (one short round never decides it), the histograms pooled
        concurrency = min(cap, 2 * concurrency)
        more, more_answers, more_elapsed = judged_load(target, concurrency, 2 * requests, [m.name for m in models])
        deltas = {m: _pooled(v, more[m]) for m, v in deltas.items()}
        answers, elapsed = answers + more_answers, elapsed + more_elapsed
    return judge_batching(target.name, models, deltas, answers, elapsed, concurrency, b)


def load_concurrency(models, b: int) -> tuple[int, float]:
    """The batching load's concurrency for requests of batch ``b`` (twice the largest batch a batcher puts in one
    execution, at least 2), and the most a second round may use. A sequence beyond its batcher's slots waits in the
    backlog, queued where no execution can group it: the load keeps at most as many sequences live as the slots
    declared (a server with fewer queues the rest and fails). Nothing else bounds it."""
    cap = min((m.sequence_slots for m in models if m.sequence_slots), default=math.inf)
    wanted = max([2] + [math.ceil(2 * largest_batch(m) / b) for m in models if m.batcher is not None])
    return min(cap, wanted), cap


def judge_batching(name: str, models, deltas: dict, answers: list, elapsed: float, concurrency: int,
                   b: int) -> CheckResult:
    """The verdict from the load's observations: each judged model's statistics delta (``deltas``: name -> delta),
    the answers, the load's wall time and concurrency, the batch size of its requests."""
    declared = "; ".join(_declared(m, b) for m in models)
    failed = [a for a in answers if not a.ok]
    judged = [_judge(m, deltas[m.name], elapsed, concurrency, b) for m in models]
    one = len(models) == 1 and models[0].name == name  # else each judged model is named
    evidence = {"concurrency": concurrency, "request_batch": b, "requests": len(answers), "failed": len(failed),
                "seconds": round(elapsed, 3)}
    if one:
        evidence |= judged[0][2]
    else:
        evidence["models"] = {m.name: j[2] for m, j in zip(models, judged)}
    observed = (f"{len(answers)} requests of batch {b} at concurrency {concurrency}: "
                + "; ".join(("" if one else f"{m.name} ") + j[3] for m, j in zip(models, judged)))
    problems = [f"{len(failed)} of {len(answers)} requests failed ({failed[0].error})"] if failed else []
    problems += [("" if one else f"{m.name}: ") + p for m, j in zip(models, judged) for p in j[0]]
    skipped = [("" if one else f"{m.name}: ") + j[1] for m, j in zip(models, judged) if j[1]]
    if not problems and skipped and len(skipped) == len(models):
        return CheckResult(name, "batching", declared, observed, "skipped", "; ".join(skipped), evidence)
    return CheckResult(name, "batching", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)


def _judge(d, delta: dict, elapsed: float, concurrency: int, b: int) -> tuple[list[str], str, dict, str]:
    """One scheduler's batching under the load: (problems, why it cannot be judged here or "", evidence,
    observed)."""
    db = d.batcher
    hist = delta["batch_stats"]
    executions = delta.get("execution_count", 0)
    count = delta.get("success_count", 0)
    queue_ms = delta.get("queue_ns", 0) / max(delta.get("queue_count", 0), 1) / 1e6
    exec_ms = ms_per_execution(delta)
    observed = (f"{executions} executions, histogram {hist}, queue {queue_ms:.2f} ms/request, compute "
                f"{exec_ms:.2f} ms/execution")
    evidence = {"executions": executions, "inferences": delta.get("inference_count", 0), "batch_stats": hist,
                "queue_ms_per_request": round(queue_ms, 3), "compute_infer_ms_per_execution": round(exec_ms, 3)}
    problems = []
    too_big = [s for s in hist if s > d.max_batch_size]
    if too_big:
        problems.append(f"executions of batch {too_big} exceed max_batch_size {d.max_batch_size}")
    if not hist:
        problems.append("the statistics extension reported no batch_stats for the load")
    elif db is not None and d.max_batch_size > b:
        # a batcher groups only requests that wait: how many waited on average (Little's law: requests per second
        # times queue time per request) says whether the load gave it anything to group
        waiting = count * queue_ms / 1e3 / elapsed if elapsed > 0 else 0.0
        evidence["waiting_on_average"] = round(waiting, 3)
        needed = 1 if max(hist) <= b else min(db.preferred_batch_sizes or (1,)) / b
        if _unmet(d, hist, b) and waiting < needed:
            short = ("so the batcher had nothing to group" if max(hist) <= b else
                     f"fewer than the {needed:g} a preferred batch size {list(db.preferred_batch_sizes)} needs")
            return problems, (f"{waiting:.2f} requests waited on average ({count} requests x {queue_ms:.2f} ms queue "
                              f"over {elapsed:.3f} s) at concurrency {concurrency}: the instances kept up with this "
                              f"client, {short}"), evidence, observed
        if max(hist) <= b:
            problems.append(f"{'dynamic' if d.dynamic_batching is not None else 'sequence'} batching declared, but "
                            f"every one of {executions} executions held one request (batch {b}) under {concurrency} "
                            f"concurrent requests")
        reached = [p for p in db.preferred_batch_sizes if any(s >= p for s in hist)]
        evidence["preferred_reached"] = reached
        if db.preferred_batch_sizes and not reached and max(hist) > b:
            problems.append(f"no execution reached a preferred batch size {list(db.preferred_batch_sizes)} "
                            f"(largest {max(hist)}) under load of {concurrency * b} samples in flight")
        # a request waits at most the queue delay plus the executions ahead of it
        rounds = math.ceil(concurrency * b / (d.max_batch_size * d.instance_count))
        bound_ms = db.max_queue_delay_microseconds / 1e3 + rounds * exec_ms
        evidence["queue_bound_ms"] = round(bound_ms, 3)
        if queue_ms > bound_ms * 1.25 + QUEUE_SLACK_MS:
            problems.append(f"queue time {queue_ms:.2f} ms per request (over {delta.get('queue_count', 0)}) exceeds "
                            f"the queue delay {db.max_queue_delay_microseconds} us plus {rounds} execution(s) of "
                            f"{exec_ms:.2f} ms ({bound_ms:.2f} ms)")
    elif executions != count or any(s != b for s in hist):  # no batcher, or one with room for a single request
        problems.append(f"{'no dynamic batching declared' if db is None else f'max_batch_size {d.max_batch_size}'}, "
                        f"but {count} requests ran as {executions} executions (histogram {hist})")
    return problems, "", evidence, observed


def check_instances(target: Target) -> CheckResult:
    models = list(target.driver.scheduled())  # an ensemble's steps, else the deployment itself
    # every instance busy: twice what the instances take at once (a batcher groups up to its largest batch)
    concurrency = min(MAX_CONCURRENCY, max(2 * m.instance_count * math.ceil(largest_batch(m) / target.batch_size)
                                           for m in models))
    requests = max(4 * concurrency, 16)
    deltas, answers, elapsed = judged_load(target, concurrency, requests, [m.name for m in models])
    return judge_instances(target.name, models, deltas, answers, elapsed, concurrency)


def judge_instances(name: str, models, deltas: dict, answers: list, elapsed: float, concurrency: int) -> CheckResult:
    """The verdict from the load's observations: each judged model's statistics delta (``deltas``: name -> delta),
    the answers, the load's wall time and concurrency."""
    # none declared: Triton's default, as the server completed the configuration (two KIND_CPU instances here)
    defaults = [m.name for m in models if not m.config.get("instance_group")]
    one = len(models) == 1 and models[0].name == name  # else each judged model is named
    failed = [a for a in answers if not a.ok]
    evidence = {"concurrency": concurrency, "requests": len(answers), "wall_s": round(elapsed, 4)}
    declared, observed, problems, skipped = [], [], [], []
    for m in models:
        n, delta = m.instance_count, deltas[m.name]
        compute_s = delta.get("execution_ns", 0) / 1e9
        ratio = compute_s / elapsed if elapsed > 0 else 0.0
        executions = delta.get("execution_count", 0)
        found = {"instances": n, "executions": executions, "compute_infer_s": round(compute_s, 4),
                 "overlap": round(ratio, 3)}
        if one:
            evidence |= found
        else:
            evidence.setdefault("models", {})[m.name] = found
        prefix = "" if one else f"{m.name}: "
        groups = (", ".join(f"{g.count} x {g.kind}" for g in m.instance_groups) or "1") \
            + (" (Triton's default)" if m.name in defaults else "")
        declared.append(f"{prefix}instance_group {groups}: {n} execution(s) at a time")
        observed.append(f"{prefix}{executions} executions at concurrency {concurrency}: compute {compute_s:.3f} s "
                        f"over {elapsed:.3f} s of wall time (overlap {ratio:.2f})")
        if n == 1 and ratio > SINGLE_SLACK:
            problems.append(f"{prefix}one instance declared, but executions overlapped (compute {ratio:.2f}x the "
                            f"wall time)")
        elif n > 1 and compute_s < 0.2:
            skipped.append(f"{prefix}executions too short here ({compute_s * 1e3 / max(executions, 1):.2f} ms each) "
                           f"to show overlap against the client's own time")
        elif n > 1 and ratio < OVERLAP:
            problems.append(f"{prefix}{n} instances declared, but executions did not overlap (compute {ratio:.2f}x "
                            f"the wall time under {concurrency} concurrent requests)")
    declared, observed = "; ".join(declared), "; ".join(observed)
    if failed:
        problems.insert(0, f"{len(failed)} of {len(answers)} requests failed ({failed[0].error})")
    if not problems and len(skipped) == len(models):
        return CheckResult(name, "instances", declared, observed, "skipped", "; ".join(skipped), evidence)
    return CheckResult(name, "instances", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)
