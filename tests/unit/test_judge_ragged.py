"""The ragged check's judging (judge/conformance/ragged.py: judge_ragged) on statistics deltas, answers and timings
built to cause each failure reason, a case on each side of its thresholds. The load of requests of different shapes
runs on the server in tests/test_conformance_fields.py."""
from __future__ import annotations

from tritonsuite.judge.conformance.ragged import judge_ragged
from tritonsuite.judge.conformance.result import CheckResult
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


def test_the_whole_result_reaches_the_report():
    """Every field of the result the report shows: both sides and the whole evidence, on each verdict."""
    found = delta({1: 8, 3: 8}, queue_ms=12.3456)  # 32 requests x 12.3456 ms queue over 0.1234 s: 3.2 waiting
    assert judge(True, found, elapsed=0.1234) == CheckResult(
        "m", "ragged", "allow_ragged_batch on ['INPUT0']: requests of different shapes batched together",
        "32 requests of 4 shapes (one in flight per shape): 16 executions, histogram {1: 8, 3: 8}, 3.20 requests "
        "waiting on average", "pass", "",
        {"concurrency": 4, "shapes": {"INPUT0": [1, 2, 3, 4]}, "requests": 32, "failed": 0,
         "batch_stats": {1: 8, 3: 8}, "executions": 16, "queue_ms_per_request": 12.346, "waiting_on_average": 3.201,
         "seconds": 0.123})
    apart = judge_ragged("m", ["INPUT0", "INPUT1"], False, 1, 2, delta({1: 32}, queue_ms=0.5), answers(), 0.4567)
    assert apart == CheckResult(
        "m", "ragged", "no allow_ragged_batch on ['INPUT0', 'INPUT1']: requests of different shapes never in one "
        "execution", "32 requests of 2 shapes (one in flight per shape): 32 executions, histogram {1: 32}, 0.04 "
        "requests waiting on average", "skipped",
        "0.04 requests waited on average (32 requests x 0.50 ms queue over 0.457 s): the instances kept up with 2 "
        "clients, so the batcher had nothing to group",
        {"concurrency": 2, "shapes": {"INPUT0": [1, 2], "INPUT1": [1, 2]}, "requests": 32, "failed": 0,
         "batch_stats": {1: 32}, "executions": 32, "queue_ms_per_request": 0.5, "waiting_on_average": 0.035,
         "seconds": 0.457})
    mixed = judge(False, delta({1: 8, 2: 12}), sent=answers(32, failed=2))
    assert mixed == CheckResult(
        "m", "ragged", "no allow_ragged_batch on ['INPUT0']: requests of different shapes never in one execution",
        "32 requests of 4 shapes (one in flight per shape): 20 executions, histogram {1: 8, 2: 12}, 1.00 requests "
        "waiting on average", "fail",
        "2 of 32 requests failed (boom); no allow_ragged_batch on ['INPUT0'], but 12 execution(s) held requests of "
        "different shapes (batch sizes [2], one request of each shape in flight)",
        {"concurrency": 4, "shapes": {"INPUT0": [1, 2, 3, 4]}, "requests": 32, "failed": 2,
         "batch_stats": {1: 8, 2: 12}, "executions": 20, "queue_ms_per_request": 10.0, "waiting_on_average": 1.0,
         "seconds": 0.32})
    assert judge(True, delta({})) == CheckResult(
        "m", "ragged", "allow_ragged_batch on ['INPUT0']: requests of different shapes batched together",
        "32 requests of 4 shapes (one in flight per shape): 0 executions, histogram {}, 0.00 requests waiting on "
        "average", "fail", "the statistics extension reported no batch_stats for the load",
        {"concurrency": 4, "shapes": {"INPUT0": [1, 2, 3, 4]}, "requests": 32, "failed": 0, "batch_stats": {},
         "executions": 0, "queue_ms_per_request": 0.0, "waiting_on_average": 0.0, "seconds": 0.32})


def test_a_load_of_no_measurable_time_has_no_requests_waiting():
    result = judge(True, delta({1: 32}), elapsed=0.0)
    assert result.verdict == "skipped" and result.evidence["waiting_on_average"] == 0.0
    assert result.reason.startswith("0.00 requests waited on average (32 requests x 10.00 ms queue over 0.000 s)")


def test_statistics_without_inference_stats_count_no_requests_and_no_queue():
    """A delta with only the execution counts (no inference_stats entry: traffic.statistics gives no success or
    queue figures) judges zero requests of zero queue time, not missing ones."""
    result = judge(False, {"batch_stats": {1: 32}, "execution_count": 32})
    assert result.verdict == "skipped"
    assert result.reason.startswith("0.00 requests waited on average (0 requests x 0.00 ms queue over 0.320 s)")
    assert result.evidence["queue_ms_per_request"] == 0.0
    one = judge(False, {"batch_stats": {1: 32}, "execution_count": 32, "success_count": 1, "queue_ns": 3_000_000},
                elapsed=0.001)  # no queue_count: the queue time over one request
    assert one.evidence["queue_ms_per_request"] == 3.0 and one.verdict == "pass"
    single = judge(False, {"batch_stats": {1: 1}, "execution_count": 1, "success_count": 1, "queue_count": 1,
                           "queue_ns": 3_000_000}, elapsed=0.001)  # 1 request x 3 ms over 1 ms: 3 waiting
    assert single.evidence["queue_ms_per_request"] == 3.0 and single.evidence["waiting_on_average"] == 3.0
    unknown = judge(False, {"batch_stats": {1: 32}})
    assert unknown.evidence["executions"] == 0 and unknown.observed.startswith("32 requests of 4 shapes (one in "
                                                                               "flight per shape): 0 executions")
    uncounted = judge(True, {"batch_stats": {1: 32}, "success_count": 32, "queue_count": 32, "queue_ns": 320_000_000})
    assert uncounted.verdict == "fail"  # no execution_count: zero executions, as the observation says
    assert uncounted.reason == ("allow_ragged_batch declared on ['INPUT0'], but every one of 0 executions held one "
                                "request while 1.00 requests of 4 shapes waited on average")
