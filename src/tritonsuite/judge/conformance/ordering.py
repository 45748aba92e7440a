"""Check ``ordering``: ``dynamic_batching.preserve_ordering`` as the live server keeps it
(``sequence_batching.oldest.preserve_ordering``: skipped, see below).

With preserve_ordering, Triton returns the responses in the order the requests entered the scheduler, holding a
response that is ready before an earlier request's; without it each response leaves when its execution ends, so
with several instances (or executions of varying time) a later request's response can come first.

What is sent: :data:`REQUESTS` requests (seeds 0, 1, ...), request i sent at i x :data:`SPACING_MS` from its own
connection (each through the deployment's driver), so requests reach the server in a known order however long each
takes. Judged: every pair of requests sent more than :data:`MARGIN_MS` apart (ordered on arrival even on a busy
host) whose answers came back more than :data:`MARGIN_MS` in the other order is out of order. Only pairs where the
earlier request was still unanswered when the later was sent ("contested") could come back reversed.

Passes with no pair out of order, where out of order was possible: contested pairs exist and executions overlapped
(the statistics extension's compute time over the burst's wall time above :data:`OVERLAP`, as the instances check
reads it). Fails naming the pairs out of order, when a second burst (sent where the first had pairs out of order: a
host that stalled one sender between its clock and its write can reorder one arrival) had them too. Skipped when
preserve_ordering is not declared (Triton's default returns each response when ready: nothing promised), and,
inconclusive, when no pair was contested or executions never overlapped (one execution at a time returns responses
in order with or without the setting: the server's compute and wall times are the evidence).

``sequence_batching.oldest.preserve_ordering`` is skipped: Triton's oldest strategy runs one dynamic batcher per
instance and preserves ordering within each, so requests of different sequences on different instances come back in
any order (seen on r24.10: sequences of one, 3 instances, executions of 120 and 10 ms, preserve_ordering true served:
28 of 73 contested pairs reversed, as many as without it), and a sequence's own requests meet one instance in turn.
"""
from __future__ import annotations

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import counted, settled_statistics, stats_delta
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import Answer, exchange
from tritonsuite.core.reasons import reason

REQUESTS = 24
SPACING_MS = 20.0  # between two sends
MARGIN_MS = 8.0  # what the client's and the host's scheduling may reorder: pairs closer than this are not judged
OVERLAP = 1.2  # compute over wall time that shows executions ran at once (1: back to back)


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} requests failed ({})",
           "unit/test_judge_ordering.py::test_failed_requests_of_the_first_burst_fail"),
    reason("{} true, but {} contested request pairs came back in the other order (request {}, sent {} ms after "
           "request {}, answered {} ms before it)",
           "unit/test_judge_ordering.py::test_pairs_out_of_order_in_both_bursts_fail",
           "test_conformance_fields.py::test_ordering_passes_responses_held_in_order_and_catches_them_reordered"),
)


def declared_ordering(config: dict) -> tuple[str, bool] | None:
    """(the field's path, its value) where the deployment has a batcher that can preserve ordering, else None."""
    if config.get("dynamic_batching") is not None:
        return "dynamic_batching.preserve_ordering", bool(config["dynamic_batching"].get("preserve_ordering"))
    oldest = (config.get("sequence_batching") or {}).get("oldest")
    if oldest is not None:
        return "sequence_batching.oldest.preserve_ordering", bool(oldest.get("preserve_ordering"))
    return None


def _burst(target: Target) -> list[Answer]:
    """Request i from its own connection at i x SPACING_MS, every connection on one event loop (threads, one per
    request, skewed the times a busy host's scheduler gave them by more than the margin: a sound deployment was
    seen "reordered" by 14 ms); every answer (start: when it was written), in the order sent."""
    requests = [batch_first(target.request(target.batch_size, i), target.description.batching)
                for i in range(REQUESTS)]
    return exchange(target.server, target.name, target.description, requests, target.output_names, REQUESTS,
                    count=REQUESTS, deadline_s=180.0, stagger_ms=SPACING_MS)


def _pairs(answers: list[Answer]) -> tuple[int, list[tuple[int, int, float, float]]]:
    """(contested pairs, reversed pairs: (earlier, later, ms sent apart, ms the later came back first))."""
    margin = MARGIN_MS / 1e3
    by_start = sorted(range(len(answers)), key=lambda k: answers[k].start)
    contested, reversed_ = 0, []
    for x, i in enumerate(by_start):
        for j in by_start[x + 1:]:
            a, b = answers[i], answers[j]
            if b.start - a.start <= margin or a.end <= b.start + margin:
                continue  # sent too close to be ordered on arrival, or the earlier was answered before
            contested += 1
            if a.end - b.end > margin:
                reversed_.append((i, j, round((b.start - a.start) * 1e3, 1), round((a.end - b.end) * 1e3, 1)))
    return contested, reversed_


def _round(target: Target) -> dict:
    """One burst and what it showed: its pairs, and the executions' overlap from the statistics delta over it."""
    before = settled_statistics(target.server, target.name)
    answers = _burst(target)
    ok = [a for a in answers if a.ok]
    delta = stats_delta(counted(target.server, target.name, before, len(ok)), before)
    wall = (max(a.end for a in ok) - min(a.start for a in ok)) if ok else 0.0
    compute_s = delta.get("execution_ns", 0) / 1e9
    contested, reversed_ = _pairs(ok)
    return {"requests": len(answers), "answered": len(ok), "failed": len(answers) - len(ok),
            "errors": sorted({a.error for a in answers if not a.ok})[:3], "contested_pairs": contested,
            "reversed_pairs": len(reversed_), "reversed_samples": reversed_[:5],
            "executions": delta.get("execution_count", 0), "batch_stats": delta["batch_stats"],
            "compute_infer_s": round(compute_s, 4), "wall_s": round(wall, 4),
            "overlap": round(compute_s / wall, 3) if wall > 0 else 0.0,
            "latency_ms": [round(a.latency_ms, 1) for a in answers]}


def check_ordering(target: Target) -> CheckResult:
    found = declared_ordering(dict(target.description.config))
    if found is None:
        return CheckResult(target.name, "ordering", "no dynamic or oldest sequence batcher", "-", "skipped",
                           "no batcher declared: preserve_ordering does not apply")
    path, preserve = found
    declared = f"{path} {str(preserve).lower()}"
    if not preserve:
        return CheckResult(target.name, "ordering", declared + " (Triton's default)", "-", "skipped",
                           f"{path} not declared: each response leaves when its execution ends, no order promised")
    if path.startswith("sequence_batching"):
        return CheckResult(target.name, "ordering", declared, "-", "skipped",
                           "the oldest strategy preserves ordering within each instance's batcher only (one per "
                           "instance): requests of different sequences may come back in any order, and one instance "
                           "answers in order anyway, so it is not observable from outside")
    declared += (f": {REQUESTS} requests sent {SPACING_MS:g} ms apart come back in the order sent (pairs more than "
                 f"{MARGIN_MS:g} ms apart)")
    rounds = [_round(target)]
    if rounds[0]["reversed_pairs"]:  # a host that stalled one sender can reorder one arrival: a second burst decides
        rounds.append(_round(target))
    last = rounds[-1]
    evidence = {"spacing_ms": SPACING_MS, "margin_ms": MARGIN_MS, **last,
                "rounds": [{k: r[k] for k in ("contested_pairs", "reversed_pairs", "overlap")} for r in rounds]}
    observed = "; ".join(f"burst {n + 1}: {r['answered']} answers, {r['contested_pairs']} contested pairs, "
                         f"{r['reversed_pairs']} came back in the other order; {r['executions']} executions, compute "
                         f"{r['compute_infer_s']:.3f} s over {r['wall_s']:.3f} s of wall time (overlap "
                         f"{r['overlap']:.2f})" for n, r in enumerate(rounds))
    verdict, why = judge_ordering(path, rounds)
    return CheckResult(target.name, "ordering", declared, observed, verdict, why, evidence)


def judge_ordering(path: str, rounds: list[dict]) -> tuple[str, str]:
    """(verdict, reason) of the bursts as :func:`_round` found them (a second only where the first had pairs out of
    order): fails on the first burst's failed requests, or pairs out of order in every burst; inconclusive (skipped)
    where the last had no contested pair or its executions never overlapped."""
    last = rounds[-1]
    problems = [f"{r['failed']} of {r['requests']} requests failed ({r['errors'][0]})" for r in rounds[:1]
                if r["failed"]]
    if all(r["reversed_pairs"] for r in rounds):
        i, j, apart, first = last["reversed_samples"][0]
        counts = " and ".join(f"{r['reversed_pairs']} of {r['contested_pairs']}" for r in rounds)
        problems.append(f"{path} true, but {counts} contested request pairs came back in the other order (request "
                        f"{j}, sent {apart} ms after request {i}, answered {first} ms before it)")
    if problems:
        return "fail", "; ".join(problems)
    if not last["contested_pairs"] or last["overlap"] < OVERLAP:
        why = ("no request was still unanswered when a later one was sent" if not last["contested_pairs"] else
               f"executions never overlapped (compute {last['compute_infer_s']:.3f} s over {last['wall_s']:.3f} s, "
               f"overlap {last['overlap']:.2f} < {OVERLAP})")
        return "skipped", f"inconclusive: {why}, so responses could not come out of order with or without {path}"
    return "pass", ""
