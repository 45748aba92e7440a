"""The batching and instances checks' judging (judge/conformance/batching.py: judge_batching, judge_instances) on
statistics deltas, answers and timings built to cause each failure reason, with a case on each side of each threshold.
The load itself runs on the server in tests/test_conformance_checks.py and tests/test_conformance_kinds.py."""
from __future__ import annotations

from tritonsuite.core.description import describe
from tritonsuite.judge.conformance.batching import _pooled, _unmet, judge_batching, judge_instances, load_concurrency
from tritonsuite.judge.conformance.traffic import largest_batch
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


# ------------------------------------------------------------------------------------- what reaches the report, whole
def odd(hist: dict, queue_ms: float, exec_ms: float) -> dict:
    """:func:`delta` with queue and compute times whose rounding shows (3 decimals in the evidence, 2 in words)."""
    found = delta(hist)
    found["queue_ns"] = round(queue_ms * 1e6 * found["queue_count"])
    found["execution_ns"] = round(exec_ms * 1e6 * found["execution_count"])
    return found


def test_a_pass_reports_what_was_declared_observed_and_its_whole_evidence():
    # 31 requests x 1.23456 ms queue over 0.4321 s: 0.0886 waited on average; bound 2 ms + 1 x 2.34567 ms
    result = batching(model(), odd({4: 7, 3: 1}, 1.23456, 2.34567), elapsed=0.4321)
    assert (result.deployment, result.check, result.verdict, result.reason) == ("m", "batching", "pass", "")
    assert result.declared == "m: dynamic_batching: preferred [4], max_queue_delay 2000 us, max_batch_size 8"
    assert result.observed == ("31 requests of batch 1 at concurrency 8: 8 executions, histogram {4: 7, 3: 1}, queue "
                               "1.23 ms/request, compute 2.35 ms/execution")
    assert result.evidence == {"concurrency": 8, "request_batch": 1, "requests": 31, "failed": 0, "seconds": 0.432,
                               "executions": 8, "inferences": 31, "batch_stats": {4: 7, 3: 1},
                               "queue_ms_per_request": 1.235, "compute_infer_ms_per_execution": 2.346,
                               "waiting_on_average": 0.089, "preferred_reached": [4], "queue_bound_ms": 4.346}


def test_a_load_without_any_statistics_reports_zeros():
    result = batching(model(), {"batch_stats": {}}, sent=answers(32))
    assert result.observed == ("32 requests of batch 1 at concurrency 8: 0 executions, histogram {}, queue 0.00 "
                               "ms/request, compute 0.00 ms/execution")
    assert result.evidence == {"concurrency": 8, "request_batch": 1, "requests": 32, "failed": 0, "seconds": 1.0,
                               "executions": 0, "inferences": 0, "batch_stats": {}, "queue_ms_per_request": 0.0,
                               "compute_infer_ms_per_execution": 0.0}


def test_a_client_the_instances_kept_up_with_is_skipped_with_its_figures():
    kept_up = batching(model(), delta({1: 32}, queue_ms=10.0), elapsed=0.33)
    assert kept_up.verdict == "skipped"
    assert kept_up.reason == ("0.97 requests waited on average (32 requests x 10.00 ms queue over 0.330 s) at "
                              "concurrency 8: the instances kept up with this client, so the batcher had nothing to "
                              "group")
    assert kept_up.evidence == {"concurrency": 8, "request_batch": 1, "requests": 32, "failed": 0, "seconds": 0.33,
                                "executions": 32, "inferences": 32, "batch_stats": {1: 32},
                                "queue_ms_per_request": 10.0, "compute_infer_ms_per_execution": 1.0,
                                "waiting_on_average": 0.97}
    short = batching(model(), delta({2: 16}, queue_ms=12.5), elapsed=0.101)
    assert short.reason == ("3.96 requests waited on average (32 requests x 12.50 ms queue over 0.101 s) at "
                            "concurrency 8: the instances kept up with this client, fewer than the 4 a preferred batch "
                            "size [4] needs")
    # a failed request fails the check even where the batching could not be judged
    failed = batching(model(), delta({1: 32}, queue_ms=10.0), elapsed=0.33, sent=answers(32, failed=1))
    assert (failed.verdict, failed.reason) == ("fail", "1 of 32 requests failed (boom)")


def test_no_wall_time_counts_no_request_waiting():
    result = batching(model(), delta({1: 32}, queue_ms=10.0), elapsed=0.0)
    assert result.verdict == "skipped" and result.evidence["waiting_on_average"] == 0.0
    assert result.reason.startswith("0.00 requests waited on average (32 requests x 10.00 ms queue over 0.000 s)")


def batch2(hist: dict, queue_ms: float) -> dict:
    """A statistics delta of requests of batch 2: ``hist`` {batch size in samples: executions}."""
    executions, samples = sum(hist.values()), sum(s * n for s, n in hist.items())
    return {"batch_stats": dict(hist), "execution_count": executions, "success_count": samples // 2,
            "inference_count": samples, "queue_count": samples // 2,
            "queue_ns": round(queue_ms * 1e6 * samples // 2), "execution_ns": round(1e6 * executions)}


BIG = {"preferred_batch_size": [8, 12], "max_queue_delay_microseconds": 500}


def test_requests_of_batch_two_need_half_the_preferred_size_waiting():
    big = model(max_batch_size=16, dynamic_batching=BIG)
    # 16 requests x 25 ms over 0.1 s: four requests of batch 2 waited, the 8 samples of the smallest preferred size
    result = judge_batching("m", [big], {"m": batch2({4: 8}, 25.0)}, answers(16), 0.1, 8, 2)
    assert result.verdict == "fail"
    assert result.reason == ("no execution reached a preferred batch size [8, 12] (largest 4) under load of 16 samples "
                             "in flight; queue time 25.00 ms per request (over 16) exceeds the queue delay 500 us plus 1 "
                             "execution(s) of 1.00 ms (1.50 ms)")
    assert result.evidence == {"concurrency": 8, "request_batch": 2, "requests": 16, "failed": 0, "seconds": 0.1,
                               "executions": 8, "inferences": 32, "batch_stats": {4: 8}, "queue_ms_per_request": 25.0,
                               "compute_infer_ms_per_execution": 1.0, "waiting_on_average": 4.0,
                               "preferred_reached": [], "queue_bound_ms": 1.5}
    kept_up = judge_batching("m", [big], {"m": batch2({4: 8}, 24.9)}, answers(16), 0.1, 8, 2)
    assert kept_up.verdict == "skipped" and "fewer than the 4 a preferred batch size [8, 12] needs" in kept_up.reason
    # one execution reaching the smaller preferred size is enough; its batch counts, not the larger size
    reached = judge_batching("m", [big], {"m": batch2({4: 6, 8: 1}, 1.0)}, answers(16), 0.1, 8, 2)
    assert reached.verdict == "pass" and reached.evidence["preferred_reached"] == [8]
    # requests of batch 2 one per execution: the batch 2 executions held one request each
    single = judge_batching("m", [big], {"m": batch2({2: 16}, 25.0)}, answers(16), 0.1, 8, 2)
    assert single.verdict == "fail" and single.reason.startswith(
        "dynamic batching declared, but every one of 16 executions held one request (batch 2) under 8 concurrent")


def test_the_queue_bound_counts_the_rounds_of_every_instance_and_the_request_batch():
    big = model(max_batch_size=16, dynamic_batching=BIG)
    # 9 requests of batch 2 = 18 samples over 16 a round: two rounds of 1 ms ahead
    nine = judge_batching("m", [big], {"m": batch2({8: 4}, 1.0)}, answers(16), 0.1, 9, 2)
    assert nine.evidence["queue_bound_ms"] == 2.5
    two = model(max_batch_size=16, dynamic_batching=BIG, instances=2)  # 32 samples a round: one
    assert judge_batching("m", [two], {"m": batch2({8: 4}, 1.0)}, answers(16), 0.1, 9, 2).evidence[
        "queue_bound_ms"] == 1.5


def test_what_each_scheduler_declares_is_named():
    plain = model(dynamic_batching=None)
    assert batching(plain, delta({1: 32})).declared == ("m: no batcher (max_batch_size 8): one execution per "
                                                        "request")
    full = model(max_batch_size=1, dynamic_batching={})
    assert batching(full, delta({1: 32})).declared == ("m: dynamic_batching with max_batch_size 1: one request of "
                                                       "batch 1 per execution")
    none = model(dynamic_batching={"max_queue_delay_microseconds": 100})
    assert batching(none, delta({4: 8})).declared == ("m: dynamic_batching: preferred none, max_queue_delay 100 us, "
                                                      "max_batch_size 8")
    oldest = model(dynamic_batching=None, sequence_batching={
        "oldest": {"preferred_batch_size": [2], "max_queue_delay_microseconds": 300}})
    result = batching(oldest, delta({2: 16}))
    assert result.declared == ("m: sequence_batching oldest: preferred [2], max_queue_delay 300 us, max_batch_size 8")
    assert result.verdict == "pass"
    at = model(max_batch_size=2, dynamic_batching={})  # a request of batch 2 fills max_batch_size 2
    found = judge_batching("m", [at], {"m": batch2({2: 16}, 1.0)}, answers(16), 0.1, 8, 2)
    assert found.declared == "m: dynamic_batching with max_batch_size 2: one request of batch 2 per execution"
    assert (found.verdict, found.reason) == ("pass", "")
    assert found.evidence == {"concurrency": 8, "request_batch": 2, "requests": 16, "failed": 0, "seconds": 0.1,
                              "executions": 16, "inferences": 32, "batch_stats": {2: 16},
                              "queue_ms_per_request": 1.0, "compute_infer_ms_per_execution": 1.0}


def test_requests_grouped_without_a_batcher_fail_on_any_batch_but_the_request_s():
    plain = model(dynamic_batching=None)
    result = batching(plain, delta({1: 30, 2: 1}), sent=answers(32))
    assert result.verdict == "fail"
    assert result.reason == ("no dynamic batching declared, but 32 requests ran as 31 executions (histogram {1: 30, "
                             "2: 1})")
    # as many executions as requests, but one of batch 2 (an execution of two requests, one counted elsewhere)
    odd_one = batching(plain, {**delta({1: 30, 2: 1}), "success_count": 31}, sent=answers(31))
    assert odd_one.verdict == "fail" and odd_one.reason.endswith("31 requests ran as 31 executions (histogram {1: 30, "
                                                                 "2: 1})")


def test_an_ensemble_reports_each_step_by_name():
    step, other = model("step"), model("other", dynamic_batching=None)
    found = {"step": odd({4: 8}, 1.0, 1.0), "other": delta({1: 32})}
    result = judge_batching("ens", [step, other], found, answers(32), 0.5, 8, 1)
    assert (result.deployment, result.verdict, result.reason) == ("ens", "pass", "")
    assert result.declared == ("step: dynamic_batching: preferred [4], max_queue_delay 2000 us, max_batch_size 8; "
                               "other: no batcher (max_batch_size 8): one execution per request")
    assert result.observed == ("32 requests of batch 1 at concurrency 8: step 8 executions, histogram {4: 8}, queue "
                               "1.00 ms/request, compute 1.00 ms/execution; other 32 executions, histogram {1: 32}, "
                               "queue 1.00 ms/request, compute 1.00 ms/execution")
    assert result.evidence == {
        "concurrency": 8, "request_batch": 1, "requests": 32, "failed": 0, "seconds": 0.5,
        "models": {"step": {"executions": 8, "inferences": 32, "batch_stats": {4: 8}, "queue_ms_per_request": 1.0,
                            "compute_infer_ms_per_execution": 1.0, "waiting_on_average": 0.064,
                            "preferred_reached": [4], "queue_bound_ms": 3.0},
                   "other": {"executions": 32, "inferences": 32, "batch_stats": {1: 32}, "queue_ms_per_request": 1.0,
                             "compute_infer_ms_per_execution": 1.0}}}
    # a deployment judged through one scheduler of another name (a BLS model's callee) is named too
    alone = judge_batching("bls", [step], {"step": delta({4: 8})}, answers(32), 1.0, 8, 1)
    assert alone.observed.startswith("32 requests of batch 1 at concurrency 8: step 8 executions")
    assert set(alone.evidence) == {"concurrency", "request_batch", "requests", "failed", "seconds", "models"}
    failed = judge_batching("bls", [step], {"step": delta({4: 8})}, answers(32, failed=1), 1.0, 8, 1)
    assert failed.reason == "1 of 32 requests failed (boom)"


def test_an_ensemble_is_skipped_only_where_every_step_was():
    step, other = model("step"), model("other")
    kept_up = delta({1: 32}, queue_ms=10.0)  # 0.97 waited over 0.33 s
    both = judge_batching("ens", [step, other], {"step": kept_up, "other": kept_up}, answers(32), 0.33, 8, 1)
    assert both.verdict == "skipped"
    why = ("0.97 requests waited on average (32 requests x 10.00 ms queue over 0.330 s) at concurrency 8: the "
           "instances kept up with this client, so the batcher had nothing to group")
    assert both.reason == f"step: {why}; other: {why}"
    one = judge_batching("ens", [step, other], {"step": kept_up, "other": delta({4: 8})}, answers(32), 0.33, 8, 1)
    assert (one.verdict, one.reason) == ("pass", "")
    failing = judge_batching("ens", [step, other], {"step": kept_up, "other": delta({8: 1, 16: 2})}, answers(32),
                             0.33, 8, 1)
    assert (failing.verdict, failing.reason) == ("fail", "other: executions of batch [16] exceed max_batch_size 8")


def test_instances_report_what_was_declared_observed_and_the_whole_evidence():
    result = judge_instances("m", [model(instances=2)], {"m": delta({1: 16}, execution_ns=1_234_567_891)},
                             answers(16), 0.98765, 4)
    assert (result.deployment, result.check, result.verdict, result.reason) == ("m", "instances", "pass", "")
    assert result.declared == "instance_group 2 x KIND_CPU: 2 execution(s) at a time"
    assert result.observed == ("16 executions at concurrency 4: compute 1.235 s over 0.988 s of wall time (overlap "
                               "1.25)")
    assert result.evidence == {"concurrency": 4, "requests": 16, "wall_s": 0.9877, "instances": 2, "executions": 16,
                               "compute_infer_s": 1.2346, "overlap": 1.25}


def test_instances_of_triton_s_default_are_named_so():
    default = model(instance_group=[])
    result = judge_instances("m", [default], {"m": delta({1: 16}, execution_ns=123_456_789)}, answers(16), 0.5, 4)
    assert result.declared == "instance_group 1 (Triton's default): 1 execution(s) at a time"
    assert (result.verdict, result.reason) == ("pass", "")
    assert result.evidence == {"concurrency": 4, "requests": 16, "wall_s": 0.5, "instances": 1, "executions": 16,
                               "compute_infer_s": 0.1235, "overlap": 0.247}


def test_instances_of_every_step_are_reported_and_skipped_only_where_each_was():
    groups = model(instance_group=[{"count": 1, "kind": "KIND_CPU"}, {"count": 2, "kind": "KIND_GPU", "gpus": [0, 1]}])
    idle = model("x", instances=3)
    found = {"m": delta({1: 16}, execution_ns=123_456_789), "x": {"batch_stats": {}}}
    result = judge_instances("ens", [groups, idle], found, answers(16), 0.5, 4)
    assert result.verdict == "skipped"
    assert result.reason == ("m: executions too short here (7.72 ms each) to show overlap against the client's own "
                             "time; x: executions too short here (0.00 ms each) to show overlap against the client's "
                             "own time")
    assert result.declared == ("m: instance_group 1 x KIND_CPU, 2 x KIND_GPU: 5 execution(s) at a time; x: "
                               "instance_group 3 x KIND_CPU: 3 execution(s) at a time")
    assert result.observed == ("m: 16 executions at concurrency 4: compute 0.123 s over 0.500 s of wall time (overlap "
                               "0.25); x: 0 executions at concurrency 4: compute 0.000 s over 0.500 s of wall time "
                               "(overlap 0.00)")
    assert result.evidence == {"concurrency": 4, "requests": 16, "wall_s": 0.5, "models": {
        "m": {"instances": 5, "executions": 16, "compute_infer_s": 0.1235, "overlap": 0.247},
        "x": {"instances": 3, "executions": 0, "compute_infer_s": 0.0, "overlap": 0.0}}}
    busy = {"m": delta({1: 16}, execution_ns=123_456_789), "x": delta({1: 16}, execution_ns=900_000_000)}
    one = judge_instances("ens", [groups, idle], busy, answers(16), 0.5, 4)
    assert (one.verdict, one.reason) == ("pass", "")
    failed = judge_instances("ens", [groups, idle], found, answers(16, failed=2), 0.5, 4)
    assert (failed.verdict, failed.reason) == ("fail", "2 of 16 requests failed (boom)")


def test_no_wall_time_shows_no_overlap():
    result = judge_instances("m", [model(instances=2)], {"m": delta({1: 16}, execution_ns=300_000_000)}, answers(16),
                             0.0, 4)
    assert result.verdict == "fail" and result.evidence["overlap"] == 0.0
    assert result.reason == ("2 instances declared, but executions did not overlap (compute 0.00x the wall time under "
                             "4 concurrent requests)")


# ---------------------------------------------------------------------------------- the load's sizing, its second round
def test_the_largest_batch_a_batcher_puts_in_one_execution():
    assert largest_batch(model(dynamic_batching={"preferred_batch_size": [2, 6, 4]})) == 6
    assert largest_batch(model(dynamic_batching={})) == 8  # no preferred size: max_batch_size
    assert largest_batch(model(dynamic_batching=None)) == 1


def test_a_second_round_s_statistics_are_pooled_with_the_first():
    first = {"execution_count": 3, "queue_ns": 10, "batch_stats": {16: 1, 1: 2}}
    second = {"execution_count": 5, "queue_ns": 7, "batch_stats": {2: 4, 16: 1}, "success_count": 9}
    pooled = _pooled(first, second)
    assert pooled == {"execution_count": 8, "queue_ns": 17, "batch_stats": {1: 2, 2: 4, 16: 2}}
    assert list(pooled["batch_stats"]) == [1, 2, 16]  # in batch size order, as the histogram is reported
    assert _pooled({"queue_count": 2, "batch_stats": {}}, {"batch_stats": {}}) == {"queue_count": 2, "batch_stats": {}}


def test_a_batcher_is_unmet_where_nothing_grouped_or_no_preferred_size_was_reached():
    d = model()  # preferred [4], max_batch_size 8
    assert _unmet(d, {1: 32}, 1) and _unmet(d, {2: 16, 3: 1}, 1)
    assert not _unmet(d, {2: 12, 4: 2}, 1) and not _unmet(d, {8: 4}, 1)
    assert not _unmet(d, {}, 1)  # no histogram: judged as missing, not as unmet
    assert _unmet(d, {2: 16}, 2) and not _unmet(d, {4: 8}, 2)  # requests of batch 2: an execution of 2 is one
    assert not _unmet(d, {8: 4}, 8)  # no room for a second request
    assert not _unmet(model(dynamic_batching=None), {1: 32}, 1)
    free = model(dynamic_batching={})  # no preferred size: anything grouped meets it
    assert _unmet(free, {1: 32}, 1) and not _unmet(free, {2: 16}, 1)



def test_a_skipped_batching_result_names_the_deployment_the_check_and_what_was_seen():
    kept_up = batching(model(), delta({1: 32}, queue_ms=10.0), elapsed=0.33)
    assert (kept_up.deployment, kept_up.check, kept_up.verdict) == ("m", "batching", "skipped")
    assert kept_up.declared == "m: dynamic_batching: preferred [4], max_queue_delay 2000 us, max_batch_size 8"
    assert kept_up.observed == ("32 requests of batch 1 at concurrency 8: 32 executions, histogram {1: 32}, queue "
                                "10.00 ms/request, compute 1.00 ms/execution")


def test_statistics_without_request_or_queue_counts():
    # no success_count: none counted as served, whatever executed
    plain = batching(model(dynamic_batching=None), {"batch_stats": {1: 32}, "execution_count": 32}, sent=answers(32))
    assert (plain.verdict, plain.reason) == (
        "fail", "no dynamic batching declared, but 0 requests ran as 32 executions (histogram {1: 32})")
    # no queue_count: the queue time taken whole (20 ms) against a bound of 3 ms (13.75 allowed)
    found = {**delta({4: 8}), "queue_ns": 20_000_000}
    del found["queue_count"]
    result = batching(model(), found)
    assert result.evidence["queue_ms_per_request"] == 20.0
    assert result.reason == ("queue time 20.00 ms per request (over 0) exceeds the queue delay 2000 us plus 1 "
                             "execution(s) of 1.00 ms (3.00 ms)")


def test_a_skipped_instances_result_names_the_deployment_and_the_check():
    result = judge_instances("m", [model(instances=2)], {"m": {"batch_stats": {}, "execution_ns": 190_000_000}},
                             answers(16), 1.0, 4)
    assert (result.deployment, result.check, result.verdict) == ("m", "instances", "skipped")
    # compute with no execution counted: taken as one execution's
    assert result.reason == ("executions too short here (190.00 ms each) to show overlap against the client's own "
                             "time")


def test_the_load_keeps_a_sequence_batcher_within_its_slots_and_nothing_else_bounded():
    """Twice the largest batch in flight; a sequence batcher's load within its declared slots (a sequence in the
    backlog queues where no execution can group it), a dynamic batcher's unbounded by them."""
    big = model(max_batch_size=64, dynamic_batching={})
    assert load_concurrency([big], 1) == (128, float("inf")) and load_concurrency([big], 4)[0] == 32
    oldest = model(dynamic_batching=None, max_batch_size=4,
                   sequence_batching={"oldest": {"max_candidate_sequences": 2}})
    assert load_concurrency([oldest], 1) == (2, 2)
    direct = model(dynamic_batching=None, instances=2, max_batch_size=4, sequence_batching={"direct": {}})
    assert load_concurrency([direct], 1) == (8, 8) and load_concurrency([model(dynamic_batching=None)], 1)[0] == 2
