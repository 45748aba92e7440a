"""The ragged check's judging (judge/conformance/ragged.py: judge_ragged) on statistics deltas, answers and timings
built to cause each failure reason, a case on each side of its thresholds. The load of requests of different shapes
runs on the server in tests/test_conformance_fields.py."""
from __future__ import annotations

from tritonsuite.judge.conformance.ragged import judge_ragged
from tritonsuite.load.exchange import Answer


def delta(hist: dict, b=1, queue_ms=10.0) -> dict:
    """A statistics delta of requests of batch ``b``: ``hist`` {batch size: executions}."""
    requests = sum(s * n for s, n in hist.items()) // b
    return {"batch_stats": dict(hist), "execution_count": sum(hist.values()), "success_count": requests,
            "queue_count": requests, "queue_ns": round(queue_ms * 1e6 * requests)}


def answers(n=32, failed=0) -> list[Answer]:
    return [Answer(0.0, 0.001, True)] * (n - failed) + [Answer(0.0, 0.001, False, error="boom")] * failed


def judge(ragged: bool, found: dict, elapsed=0.32, b=1, sent=None):
    return judge_ragged("m", ["INPUT0"], ragged, b, 4, found, answers() if sent is None else sent, elapsed)


def test_shapes_batched_together_where_allowed_and_kept_apart_where_not_pass():
    together = judge(True, delta({1: 8, 3: 8}))
    assert together.verdict == "pass" and together.reason == ""
    apart = judge(False, delta({1: 32}))  # one request waited on average, and none shared an execution
    assert apart.verdict == "pass" and apart.reason == ""
    pairs = judge(False, delta({2: 16}, b=2, queue_ms=20.0), b=2)  # requests of batch 2, each alone
    assert pairs.verdict == "pass", pairs.reason


def test_an_execution_mixing_shapes_without_allow_ragged_batch_fails():
    result = judge(False, delta({1: 8, 2: 12}))
    assert result.verdict == "fail"
    assert result.reason == ("no allow_ragged_batch on ['INPUT0'], but 12 execution(s) held requests of different "
                             "shapes (batch sizes [2], one request of each shape in flight)")
    pairs = judge(False, delta({2: 8, 4: 4}, b=2), b=2)
    assert pairs.verdict == "fail" and "but 4 execution(s) held requests of different shapes (batch sizes [4]" \
        in pairs.reason


def test_allow_ragged_batch_with_every_execution_alone_while_requests_waited_fails():
    # 32 requests x 10 ms queue over 0.32 s: one request waited on average
    result = judge(True, delta({1: 32}), elapsed=0.32)
    assert result.verdict == "fail"
    assert result.reason == ("allow_ragged_batch declared on ['INPUT0'], but every one of 32 "
                             "executions held one request while 1.00 requests of 4 shapes waited on average")
    kept_up = judge(True, delta({1: 32}), elapsed=0.33)  # fewer than one waited: nothing to group either way
    assert kept_up.verdict == "skipped" and "so the batcher had nothing to group" in kept_up.reason
    apart = judge(False, delta({1: 32}), elapsed=0.33)
    assert apart.verdict == "skipped" and "the instances kept up with 4 clients" in apart.reason


def test_failed_requests_fail_with_the_first_error():
    result = judge(True, delta({1: 8, 3: 8}), sent=answers(32, failed=1))
    assert result.verdict == "fail" and result.reason == "1 of 32 requests failed (boom)"


def test_a_load_without_batch_stats_fails():
    result = judge(True, delta({}), elapsed=0.32)
    assert result.verdict == "fail" and result.reason == "the statistics extension reported no batch_stats for the load"
