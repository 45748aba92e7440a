"""The waves the queue_policy and priority checks send: requests sent at once, judged against the server's own figures.

A wave is ``n`` requests sent together over ``n`` connections (:func:`tritonsuite.load.exchange.exchange`, each
carrying :class:`~tritonsuite.load.http.RequestOptions`: a priority level, a queue timeout), started at a set time;
two waves run in two threads, so a later wave meets what the earlier one left queued. Everything is judged against
the execution time the server itself reports (the statistics' ``compute_infer`` per execution, ``E``) and what one
round of instances takes at once (``cap``: instances x max_batch_size / the request's batch): a wave that outlasts a
timeout is sized from ``E``, and where no wave this check may send (at most :data:`MAX_BURST` requests) can make a
request wait long enough, the setting is skipped with those figures, never passed or failed blindly.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import counted, ms_per_execution, settled_statistics, stats_delta
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import Answer, exchange
from tritonsuite.load.http import RequestOptions

QUEUE_FULL = "Exceeds maximum queue size"  # Triton r24.10, HTTP 503 "[request id: <id_unknown>] Exceeds ..."
TIMED_OUT = "Request timeout expired"  # Triton r24.10, HTTP 503
MAX_BURST = 96  # the most requests (and connections) one wave sends
PROBES = 4  # the fewest probes of a wave that is judged by its members
ALONE = 6  # the most requests the pace sends one at a time, to have three served
WAVE_TRIES = 2  # waves sent at most this often where the later one met no contention (a stalled client), then skipped


def batcher(d) -> dict:
    return dict((d.config or {}).get("dynamic_batching") or {})


def not_queued(target: Target, check: str) -> CheckResult | None:
    d = target.description
    why = target.driver.unqueued() or (
        "no dynamic_batching: no batcher queue, each request goes to an instance as it comes"
        if d.dynamic_batching is None else "")
    if not why:
        return None
    return CheckResult(target.name, check, d.scheduler, "-", "skipped", why)


def capacity(target: Target) -> int:
    """Requests one round of instances executes at once (instances x requests per execution)."""
    d = target.description
    return d.instance_count * max(1, d.max_batch_size // max(target.batch_size, 1))


def waves(target: Target, plan: list[tuple[int, RequestOptions, float]]) -> list[list[Answer]]:
    """Each (count, options, at seconds) sent at once over ``count`` connections, each wave in its own thread from its
    start time; every wave's answers."""
    found: list = [[] for _ in plan]
    requests = [batch_first(r, target.description.batching) for r in target.load_requests()]
    t0 = time.monotonic()

    def run(i: int, count: int, options: RequestOptions, at: float) -> None:
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        found[i] = exchange(target.server, target.name, target.description, requests, target.output_names, count,
                            count=count, options=options, deadline_s=120.0)

    threads = [threading.Thread(target=run, args=(i, *w), daemon=True) for i, w in enumerate(plan)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180.0)
    return found


def measure(target: Target, plan) -> tuple[list[list[Answer]], dict, float]:
    """:func:`waves` with the statistics delta over them and the execution time per execution (ms)."""
    before = settled_statistics(target.server, target.name)
    found = waves(target, plan)
    delta = stats_delta(counted(target.server, target.name, before, sum(a.ok for w in found for a in w)), before)
    return found, delta, ms_per_execution(delta)


def pace(target: Target) -> float | None:
    """One execution's time (ms) as the server reports it, from three requests served one at a time (None: none was).
    A lone request refused ``Request timeout expired`` is the deployment's own timeout at work, not a fault: r24.10's
    batcher can leave a request queued until its next 500 ms wake-up, past a shorter timeout. It is sent again, at most
    :data:`ALONE` requests in all."""
    before = settled_statistics(target.server, target.name)
    requests, served = [batch_first(r, target.description.batching) for r in target.load_requests()], 0
    for _ in range(ALONE):
        (answer,) = exchange(target.server, target.name, target.description, requests, target.output_names, 1, count=1)
        if not answer.ok and TIMED_OUT not in answer.error:
            raise RuntimeError(f"a request sent alone failed: {answer.error}")
        served += answer.ok
        if served == 3:
            break
    delta = stats_delta(counted(target.server, target.name, before, served), before)
    return max(ms_per_execution(delta), 0.01) if delta.get("execution_count", 0) else None


def unpaced(target: Target, check: str, declared: str) -> CheckResult:
    """The check skipped where :func:`pace` had no request served."""
    return CheckResult(target.name, check, declared, "every request sent alone was refused", "skipped",
                       f"{ALONE} of {ALONE} requests sent one at a time refused '{TIMED_OUT}': no execution time to "
                       "size waves from")


def latencies(answers: list[Answer]) -> list[float]:
    return [round(a.latency_ms, 1) for a in answers]


@dataclass
class Part:
    """One setting's verdict inside a check."""

    declared: str
    observed: str = ""
    problems: tuple = ()
    skipped: str = ""
    evidence: dict | None = None


def until_contended(send: Callable[[], Part]) -> Part:
    """The part of ``send()`` (waves sent and judged), sent again while it is skipped for want of contention (its
    client stalled on a busy host, so the waves met no queue), at most :data:`WAVE_TRIES` times; its evidence says how
    many were sent (``waves_sent``)."""
    for sent in range(1, WAVE_TRIES + 1):
        part = send()
        part.evidence["waves_sent"] = sent
        if not part.skipped:
            break
    return part


def combine(model: str, check: str, parts: list[Part]) -> CheckResult:
    """The check's verdict on ``model`` from its parts: fails on any part's problem, skipped where every part was."""
    declared = "; ".join(p.declared for p in parts)
    observed = "; ".join(f"{p.declared.split(':')[0]}: {p.observed or p.skipped}" for p in parts)
    evidence = {p.declared.split(":")[0] + (f" #{i}" if i else ""): p.evidence or {} for i, p in enumerate(parts)}
    problems = [f"{p.declared}: {q}" for p in parts for q in p.problems]
    if problems:
        return CheckResult(model, check, declared, observed, "fail", "; ".join(problems), evidence)
    if all(p.skipped for p in parts):
        return CheckResult(model, check, declared, observed, "skipped",
                           "; ".join(f"{p.declared.split(':')[0]}: {p.skipped}" for p in parts), evidence)
    unjudged = [f"{p.declared}: not judged: {p.skipped}" for p in parts if p.skipped]  # the part, not its policy
    return CheckResult(model, check, declared, observed, "pass", "; ".join(unjudged), evidence)


def failures(answers: list[Answer], *known: str) -> list[Answer]:
    return [a for a in answers if not a.ok and not any(k in a.error for k in known)]


def backlog(cap: int, exec_ms: float, last_ms: float, limit: int) -> tuple[int, float]:
    """A backlog's size that keeps the instances busy for ``last_ms`` (at most ``limit``), and how long it lasts."""
    n = min(limit, cap * math.ceil(last_ms / exec_ms))
    return n, n / cap * exec_ms
