"""Checks 2 and 3: batching and instances as declared, read from the statistics extension under closed-loop load.

Batching: the statistics' batch-size histogram (executions per batch size, ``batch_stats``) over the load. Queue
time is the server's own (``queue`` ns per request), bounded by the queue delay plus the executions a request can
wait behind (the load in flight over what one round of instances executes). A batcher groups only requests that
wait: where no execution grouped requests (or none reached a preferred size) while fewer requests waited on average
(Little's law: requests per second times queue time) than that needs, the instances kept up with the client and the
check is skipped with those figures, not failed: a fast model under a slow client shows no batching to judge.
Instances: executions overlap when the server's compute time (``batch_stats``' ``compute_infer`` ns summed over
executions, each the wall time of its execution) exceeds the wall time the load took: with one instance it cannot.
"""
from __future__ import annotations

import math
import time

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import closed_loop, settled_statistics, statistics, stats_delta

#: requests per client of the load (closed loop): enough executions for a histogram on a slow model
REQUESTS_PER_CLIENT = 4
MIN_REQUESTS = 32
#: instances: the compute time over wall time that shows overlapping executions (1 is back to back)
OVERLAP = 1.2
#: a single instance may show a little over 1 (the statistics' ns and the client's clock are not the same clock)
SINGLE_SLACK = 1.1

# what a busy host adds to a request's queue time beside the queue delay and the executions ahead of it (waking the
# instance thread while the client and other stubs hold both cores): the add_sub models of tests/test_corpus.py,
# executions of 0.01-0.05 ms and no queue delay, queued 1.5-3.2 ms per request on a 2-core host (2026-11-27)
QUEUE_SLACK_MS = 10.0


def _unsupported(target: Target) -> str:
    d = target.description
    if d.decoupled:
        return "decoupled: responses stream, the load here is one response per request"
    if d.scheduler in ("sequence", "ensemble"):
        return f"{d.scheduler} scheduler: its batching is the {d.scheduler} batcher's, not checked here yet"
    return ""


def _load(target: Target, concurrency: int, requests: int) -> tuple[dict, list, float]:
    names = [t.name for t in target.description.outputs]
    before = settled_statistics(target.server, target.name)
    start = time.monotonic()
    answers = closed_loop(target.server, target.name, target.load_requests(), names, concurrency,
                          requests=requests)
    elapsed = time.monotonic() - start
    # the last responses may be counted a moment after they arrive
    for _ in range(20):
        delta = stats_delta(statistics(target.server, target.name), before)
        if delta.get("success_count", 0) >= sum(a.ok for a in answers):
            break
        time.sleep(0.05)
    return delta, answers, elapsed


def check_batching(target: Target) -> CheckResult:
    d = target.description
    why = _unsupported(target) or ("" if d.batching else "max_batch_size 0: no batch dimension, nothing to batch")
    if why:
        return CheckResult(target.name, "batching", d.scheduler, "-", "skipped", why)
    b = target.batch_size
    db = d.dynamic_batching
    if db is not None:
        largest = max(db.preferred_batch_sizes or (d.max_batch_size,))
        concurrency = max(2, math.ceil(2 * largest / b))
        declared = (f"dynamic_batching: preferred {list(db.preferred_batch_sizes) or 'none'}, max_queue_delay "
                    f"{db.max_queue_delay_microseconds} us, max_batch_size {d.max_batch_size}")
    else:
        concurrency = 2
        declared = f"no dynamic batching (max_batch_size {d.max_batch_size}): one execution per request"
    requests = max(MIN_REQUESTS, REQUESTS_PER_CLIENT * concurrency)
    delta, answers, elapsed = _load(target, concurrency, requests)
    first = delta["batch_stats"]
    if db is not None and first and (max(first) <= b or (db.preferred_batch_sizes and not any(
            s >= p for p in db.preferred_batch_sizes for s in first))):
        # on a busy host the client may not keep every request in flight at the server: once more at twice the
        # load before a verdict (one short round never decides it), the histograms pooled
        concurrency *= 2
        more, more_answers, more_elapsed = _load(target, concurrency, 2 * requests)
        delta = {k: (more.get(k, 0) + v if k != "batch_stats" else
                     {s: v.get(s, 0) + more["batch_stats"].get(s, 0) for s in sorted({*v, *more["batch_stats"]})})
                 for k, v in delta.items()}
        answers, elapsed = answers + more_answers, elapsed + more_elapsed
    failed = [a for a in answers if not a.ok]
    hist = delta["batch_stats"]
    executions = delta.get("execution_count", 0)
    count = delta.get("success_count", 0)
    queue_ms = delta.get("queue_ns", 0) / max(delta.get("queue_count", 0), 1) / 1e6
    exec_ms = delta.get("execution_ns", 0) / max(executions, 1) / 1e6
    observed = (f"{len(answers)} requests of batch {b} at concurrency {concurrency}: {executions} executions, "
                f"histogram {hist}, queue {queue_ms:.2f} ms/request, compute {exec_ms:.2f} ms/execution")
    evidence = {"concurrency": concurrency, "request_batch": b, "requests": len(answers), "failed": len(failed),
                "executions": executions, "inferences": delta.get("inference_count", 0), "batch_stats": hist,
                "queue_ms_per_request": round(queue_ms, 3), "compute_infer_ms_per_execution": round(exec_ms, 3),
                "seconds": round(elapsed, 3)}
    problems = []
    if failed:
        problems.append(f"{len(failed)} of {len(answers)} requests failed ({failed[0].error})")
    too_big = [s for s in hist if s > d.max_batch_size]
    if too_big:
        problems.append(f"executions of batch {too_big} exceed max_batch_size {d.max_batch_size}")
    if not hist:
        problems.append("the statistics extension reported no batch_stats for the load")
    elif db is not None:
        # a batcher groups only requests that wait: how many waited on average (Little's law: requests per second
        # times queue time per request) says whether the load gave it anything to group
        waiting = count * queue_ms / 1e3 / elapsed if elapsed > 0 else 0.0
        evidence["waiting_on_average"] = round(waiting, 3)
        needed = 1 if max(hist) <= b else min(db.preferred_batch_sizes or (1,)) / b
        unmet = max(hist) <= b or (db.preferred_batch_sizes and not any(s >= p for p in db.preferred_batch_sizes
                                                                          for s in hist))
        if unmet and not failed and waiting < needed:
            short = ("so the batcher had nothing to group" if max(hist) <= b else
                     f"fewer than the {needed:g} a preferred batch size {list(db.preferred_batch_sizes)} needs")
            return CheckResult(target.name, "batching", declared, observed, "skipped",
                               f"{waiting:.2f} requests waited on average ({count} requests x {queue_ms:.2f} ms queue "
                               f"over {elapsed:.3f} s) at concurrency {concurrency}: the instances kept up with this "
                               f"client, {short}", evidence)
        if max(hist) <= b:
            problems.append(f"dynamic batching declared, but every one of {executions} executions held one request "
                            f"(batch {b}) under {concurrency} concurrent requests")
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
    else:
        if executions != count or any(s != b for s in hist):
            problems.append(f"no dynamic batching declared, but {count} requests ran as {executions} executions "
                            f"(histogram {hist})")
    return CheckResult(target.name, "batching", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)


def check_instances(target: Target) -> CheckResult:
    d = target.description
    why = _unsupported(target)
    if why:
        return CheckResult(target.name, "instances", f"{d.instance_count} instance(s)", "-", "skipped", why)
    default = ""
    if not d.instance_groups:  # none declared: Triton's default, as the server completed the configuration (two
        # KIND_CPU instances on a CPU host, seen here)
        d, default = target.server.model_description(target.name), " (Triton's default)"
    n = d.instance_count
    groups = (", ".join(f"{g.count} x {g.kind}" for g in d.instance_groups) or "1") + default
    concurrency = 2 * n
    requests = max(4 * concurrency, 16)
    delta, answers, elapsed = _load(target, concurrency, requests)
    compute_s = delta.get("execution_ns", 0) / 1e9
    ratio = compute_s / elapsed if elapsed > 0 else 0.0
    executions = delta.get("execution_count", 0)
    failed = [a for a in answers if not a.ok]
    evidence = {"instances": n, "concurrency": concurrency, "requests": len(answers), "executions": executions,
                "compute_infer_s": round(compute_s, 4), "wall_s": round(elapsed, 4), "overlap": round(ratio, 3)}
    observed = (f"{executions} executions at concurrency {concurrency}: compute {compute_s:.3f} s over "
                f"{elapsed:.3f} s of wall time (overlap {ratio:.2f})")
    declared = f"instance_group {groups}: {n} execution(s) at a time"
    if failed:
        return CheckResult(target.name, "instances", declared, observed, "fail",
                           f"{len(failed)} of {len(answers)} requests failed ({failed[0].error})", evidence)
    if n == 1:
        if ratio > SINGLE_SLACK:
            return CheckResult(target.name, "instances", declared, observed, "fail", f"one instance declared, but "
                               f"executions overlapped (compute {ratio:.2f}x the wall time)", evidence)
        return CheckResult(target.name, "instances", declared, observed, "pass", "", evidence)
    if compute_s < 0.2:
        return CheckResult(target.name, "instances", declared, observed, "skipped",
                           f"executions too short here ({compute_s * 1e3 / max(executions, 1):.2f} ms each) to "
                           f"show overlap against the client's own time", evidence)
    if ratio < OVERLAP:
        return CheckResult(target.name, "instances", declared, observed, "fail",
                           f"{n} instances declared, but executions did not overlap (compute {ratio:.2f}x the wall "
                           f"time under {concurrency} concurrent requests)", evidence)
    return CheckResult(target.name, "instances", declared, observed, "pass", "", evidence)
