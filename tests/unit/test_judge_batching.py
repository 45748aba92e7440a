"""The batching and instances checks' judging (judge/conformance/batching.py: judge_batching, judge_instances) on
statistics deltas, answers and timings built to cause each failure reason, with a case on each side of each threshold.
The load itself runs on the server in tests/test_conformance_checks.py and tests/test_conformance_kinds.py."""
from __future__ import annotations

from tritonsuite.core.description import describe
from tritonsuite.judge.conformance.batching import judge_batching, judge_instances
from tritonsuite.load.exchange import Answer

BATCHER = {"preferred_batch_size": [4], "max_queue_delay_microseconds": 2000}


def model(name="m", instances=1, max_batch_size=8, dynamic_batching=BATCHER, **override):
    config = {"name": name, "backend": "python", "max_batch_size": max_batch_size,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
              "instance_group": [{"count": instances, "kind": "KIND_CPU"}]} | override
    if dynamic_batching is not None:
        config["dynamic_batching"] = dynamic_batching
    return describe(config)


def delta(hist: dict, queue_ms=1.0, exec_ms=1.0, requests=None, execution_ns=None) -> dict:
    """A statistics delta of requests of batch 1: ``hist`` {batch size: executions}."""
    executions = sum(hist.values())
    requests = sum(s * n for s, n in hist.items()) if requests is None else requests
    return {"batch_stats": dict(hist), "execution_count": executions, "success_count": requests,
            "inference_count": requests, "queue_count": requests, "queue_ns": round(queue_ms * 1e6 * requests),
            "execution_ns": round(exec_ms * 1e6 * executions) if execution_ns is None else execution_ns}


def answers(n=32, failed=0) -> list[Answer]:
    return [Answer(0.0, 0.001, True)] * (n - failed) + [Answer(0.0, 0.001, False, error="boom")] * failed


def batching(d, found, elapsed=1.0, concurrency=8, sent=None, name="m"):
    sent = answers(sum(s * n for s, n in found["batch_stats"].items())) if sent is None else sent
    return judge_batching(name, [d], {d.name: found}, sent, elapsed, concurrency, 1)


# ----------------------------------------------------------------------------------------------------------- batching
def test_batches_at_the_preferred_size_within_the_queue_delay_pass():
    result = batching(model(), delta({4: 8}))
    assert result.verdict == "pass" and result.reason == ""
    assert result.evidence["preferred_reached"] == [4] and result.evidence["queue_bound_ms"] == 3.0


def test_failed_requests_fail_with_the_first_error():
    result = batching(model(), delta({4: 8}), sent=answers(32, failed=2))
    assert result.verdict == "fail" and result.reason == "2 of 32 requests failed (boom)"


def test_executions_larger_than_max_batch_size_fail():
    result = batching(model(), delta({8: 1, 16: 2}))
    assert result.verdict == "fail" and result.reason == "executions of batch [16] exceed max_batch_size 8"
    assert batching(model(), delta({8: 4})).verdict == "pass"  # max_batch_size itself is allowed


def test_a_load_without_batch_stats_fails():
    result = batching(model(), delta({}), sent=answers(32))
    assert result.verdict == "fail" and result.reason == "the statistics extension reported no batch_stats for the load"


def test_one_request_per_execution_while_requests_waited_fails():
    # 32 requests x 10 ms queue over 0.32 s: one request waited on average, enough for the batcher to group two
    result = batching(model(), delta({1: 32}, queue_ms=10.0), elapsed=0.32)
    assert result.verdict == "fail"
    assert result.reason == ("dynamic batching declared, but every one of 32 executions held one request (batch 1) "
                             "under 8 concurrent requests")
    assert result.evidence["waiting_on_average"] == 1.0
    kept_up = batching(model(), delta({1: 32}, queue_ms=10.0), elapsed=0.33)  # fewer than one waited
    assert kept_up.verdict == "skipped" and "so the batcher had nothing to group" in kept_up.reason
    slots = describe({"name": "m", "backend": "python", "max_batch_size": 8,
                      "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
                      "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
                      "sequence_batching": {"direct": {}}})
    sequence = batching(slots, delta({1: 32}, queue_ms=10.0), elapsed=0.32)
    assert sequence.verdict == "fail" and sequence.reason.startswith(
        "sequence batching declared, but every one of 32 executions held one request")


def test_batches_short_of_every_preferred_size_while_enough_requests_waited_fail():
    # 32 requests x 12.5 ms queue over 0.1 s: four waited on average, what the preferred size 4 needs
    result = batching(model(), delta({2: 16}, queue_ms=12.5), elapsed=0.1)
    assert result.verdict == "fail"
    assert result.reason == ("no execution reached a preferred batch size [4] (largest 2) under load of 8 samples in "
                             "flight")
    kept_up = batching(model(), delta({2: 16}, queue_ms=12.5), elapsed=0.101)
    assert kept_up.verdict == "skipped"
    assert "fewer than the 4 a preferred batch size [4] needs" in kept_up.reason


def test_a_queue_time_past_the_queue_delay_and_the_executions_ahead_fails():
    # bound: 2 ms queue delay + 1 round of 1 ms executions = 3 ms; allowed 3 x 1.25 + 10 ms of a busy host = 13.75
    at = batching(model(), delta({4: 8}, queue_ms=13.75))
    assert at.verdict == "pass", at.reason
    over = batching(model(), delta({4: 8}, queue_ms=13.76))
    assert over.verdict == "fail"
    assert over.reason == ("queue time 13.76 ms per request (over 32) exceeds the queue delay 2000 us plus 1 "
                           "execution(s) of 1.00 ms (3.00 ms)")
    # nine requests in flight of batch 1 on one instance of max_batch_size 8: two rounds ahead, a bound of 4 ms
    assert batching(model(), delta({4: 8}, queue_ms=14.5), concurrency=9).verdict == "pass"
    assert batching(model(), delta({4: 8}, queue_ms=14.5), concurrency=8).verdict == "fail"


def test_requests_grouped_without_a_batcher_fail():
    plain = model(dynamic_batching=None)
    assert batching(plain, delta({1: 32})).verdict == "pass"
    result = batching(plain, delta({1: 30}, requests=32), sent=answers(32))
    assert result.verdict == "fail"
    assert result.reason == "no dynamic batching declared, but 32 requests ran as 30 executions (histogram {1: 30})"
    full = model(max_batch_size=1, dynamic_batching={})  # a batcher with room for one request of batch 1
    result = batching(full, delta({1: 30}, requests=32), sent=answers(32))
    assert result.verdict == "fail"
    assert result.reason == "max_batch_size 1, but 32 requests ran as 30 executions (histogram {1: 30})"


def test_an_ensemble_names_the_step_that_fails():
    step, other = model("step"), model("other")
    found = {"step": delta({1: 32}, queue_ms=10.0), "other": delta({4: 8})}
    result = judge_batching("ens", [step, other], found, answers(32), 0.32, 8, 1)
    assert result.verdict == "fail"
    assert result.reason == ("step: dynamic batching declared, but every one of 32 executions held one request "
                             "(batch 1) under 8 concurrent requests")


# ---------------------------------------------------------------------------------------------------------- instances
def instances(d, execution_ns, elapsed=1.0, sent=None, concurrency=4):
    found = delta({1: 16}, execution_ns=execution_ns)
    return judge_instances(d.name, [d], {d.name: found}, answers(16) if sent is None else sent, elapsed, concurrency)


def test_one_instance_whose_executions_overlap_fails():
    at = instances(model(instances=1), 1_100_000_000)  # 1.1x the wall time: the clocks' slack
    assert at.verdict == "pass", at.reason
    over = instances(model(instances=1), 1_110_000_000)
    assert over.verdict == "fail"
    assert over.reason == "one instance declared, but executions overlapped (compute 1.11x the wall time)"


def test_instances_whose_executions_never_overlap_fail():
    at = instances(model(instances=2), 1_200_000_000)
    assert at.verdict == "pass", at.reason
    under = instances(model(instances=2), 1_190_000_000)
    assert under.verdict == "fail"
    assert under.reason == ("2 instances declared, but executions did not overlap (compute 1.19x the wall time under "
                            "4 concurrent requests)")
    shortest = instances(model(instances=2), 200_000_000)  # the least compute that is judged
    assert shortest.verdict == "fail" and shortest.reason.startswith("2 instances declared, but executions did not")
    short = instances(model(instances=2), 199_999_999)
    assert short.verdict == "skipped" and short.reason.startswith("executions too short here")


def test_failed_requests_fail_the_instances_check_first():
    result = instances(model(instances=2), 1_190_000_000, sent=answers(16, failed=1))
    assert result.verdict == "fail"
    assert result.reason == ("1 of 16 requests failed (boom); 2 instances declared, but executions did not overlap "
                             "(compute 1.19x the wall time under 4 concurrent requests)")


def test_an_ensemble_names_the_step_whose_instances_fail():
    step = model("step", instances=1)
    result = judge_instances("ens", [step], {"step": delta({1: 16}, execution_ns=1_500_000_000)}, answers(16), 1.0, 4)
    assert result.verdict == "fail"
    assert result.reason == "step: one instance declared, but executions overlapped (compute 1.50x the wall time)"
