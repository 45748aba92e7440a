"""The counters check's judging (judge/conformance/counters.py: judge_counters) on statistics and metrics rises built
to cause each failure reason, against what the client saw: 5 answered requests of batch 1 and 5 of batch 2 (15
samples), none failed. The mix itself is sent on the server in tests/test_conformance_checks.py."""
from __future__ import annotations

from tritonsuite.judge.conformance.counters import judge_counters
from tritonsuite.judge.conformance.result import CheckResult


def stats(**override) -> dict:
    """The statistics delta of the sound mix: 10 successes, 15 inferences, one execution per request."""
    return {"success_count": 10, "fail_count": 0, "inference_count": 15, "execution_count": 10, "cache_hit_count": 0,
            "batch_stats": {1: 5, 2: 5}} | override


def metrics(**override) -> dict:
    return {"nv_inference_request_success": 10.0, "nv_inference_request_failure": 0.0, "nv_inference_count": 15.0,
            "nv_inference_exec_count": 10.0} | override


def judge(s=None, m="sound", answered=10, failed=0, samples=15):
    return judge_counters("m", s or stats(), metrics() if m == "sound" else m, answered, failed, samples, 2, [1, 2])


def test_counters_that_agree_with_the_client_pass():
    result = judge()
    assert result.verdict == "pass" and result.reason == ""
    assert result.evidence["client"]["sent"] == 12 and result.evidence["client"]["refused_before_scheduling"] == 2
    alone = judge(m=None)  # a remote server whose metrics endpoint is not known: the statistics alone
    assert alone.verdict == "pass" and alone.evidence["note"].startswith("statistics only")


def test_successes_the_client_did_not_get_fail():
    result = judge(stats(success_count=11), metrics(nv_inference_request_success=11.0))
    assert result.verdict == "fail" and result.reason == "statistics count 11 successes, the client got 10 answers"


def test_failures_the_client_did_not_see_fail():
    result = judge(stats(fail_count=1), metrics(nv_inference_request_failure=1.0))
    assert result.verdict == "fail" and result.reason == "statistics count 1 failures, the client saw 0"
    seen = judge(stats(success_count=9, fail_count=1, inference_count=14, execution_count=10),
                 metrics(nv_inference_request_success=9.0, nv_inference_request_failure=1.0, nv_inference_count=14.0),
                 answered=9, failed=1, samples=14)
    assert seen.verdict == "pass", seen.reason


def test_cache_hits_on_requests_never_sent_before_fail():
    result = judge(stats(cache_hit_count=2), m=None)
    assert result.verdict == "fail" and result.reason == "2 cache hits for requests never sent before"


def test_inferences_other_than_the_samples_answered_fail():
    result = judge(stats(inference_count=14), metrics(nv_inference_count=14.0))
    assert result.verdict == "fail"
    assert result.reason == "statistics count 14 inferences, the client sent 15 answered samples"


def test_executions_the_histogram_does_not_count_fail():
    result = judge(stats(batch_stats={1: 5, 2: 4}))
    assert result.verdict == "fail" and result.reason == "10 executions, but the batch-size histogram counts 9"


def test_more_executions_than_requests_fail():
    result = judge(stats(execution_count=11, batch_stats={1: 6, 2: 5}), metrics(nv_inference_exec_count=11.0))
    assert result.verdict == "fail" and result.reason == "11 executions for 10 requests"
    failed = judge(stats(success_count=9, fail_count=1, inference_count=14, execution_count=10),
                   metrics(nv_inference_request_success=9.0, nv_inference_request_failure=1.0, nv_inference_count=14.0),
                   answered=9, failed=1, samples=14)  # a failed request executes too: 10 executions for 10 requests
    assert failed.verdict == "pass", failed.reason


def test_metrics_that_rose_otherwise_than_the_statistics_fail():
    result = judge(m=metrics(nv_inference_count=14.0, nv_inference_exec_count=11.0))
    assert result.verdict == "fail"
    assert result.reason == ("nv_inference_count rose by 14, the statistics by 15; nv_inference_exec_count rose by 11, "
                             "the statistics by 10")
    result = judge(m=metrics(nv_inference_request_success=12.0, nv_inference_request_failure=1.0))
    assert result.reason == ("nv_inference_request_success rose by 12, the statistics by 10; "
                             "nv_inference_request_failure rose by 1, the statistics by 0")


STATISTICS = {"success_count": 10, "fail_count": 0, "inference_count": 15, "execution_count": 10, "cache_hit_count": 0,
              "batch_stats": {1: 5, 2: 5}}
CLIENT = {"sent": 12, "answered": 10, "failed": 0, "refused_before_scheduling": 2, "samples_answered": 15,
          "batch_sizes": [1, 2]}
DECLARED = "client: 10 answered (15 samples, batches [1, 2]), 0 failed, 2 refused for a wrong shape"


def test_the_whole_result_reaches_the_report():
    """Every field of the result the report shows: the deployment, the check, both sides and the whole evidence."""
    assert judge() == CheckResult(
        "m", "counters", DECLARED,
        "statistics: success 10, fail 0, inferences 15, executions 10; metrics: success 10, failure 0, inferences 15, "
        "executions 10", "pass", "", {"client": CLIENT, "statistics": STATISTICS, "metrics": metrics()})
    assert judge(m=None) == CheckResult(
        "m", "counters", DECLARED, "statistics: success 10, fail 0, inferences 15, executions 10", "pass", "",
        {"client": CLIENT, "statistics": STATISTICS,
         "metrics": "not known (remote server: its metrics port is the operator's; --triton-metrics-url gives it)",
         "note": "statistics only: the metrics endpoint is not known"})
    failing = judge(stats(success_count=11, execution_count=11, batch_stats={1: 6, 2: 5}), m=None)
    assert failing == CheckResult(
        "m", "counters", DECLARED, "statistics: success 11, fail 0, inferences 15, executions 11", "fail",
        "statistics count 11 successes, the client got 10 answers; 11 executions for 10 requests",
        {"client": CLIENT, "metrics": "not known (remote server: its metrics port is the operator's; "
                                      "--triton-metrics-url gives it)",
         "statistics": STATISTICS | {"success_count": 11, "execution_count": 11, "batch_stats": {1: 6, 2: 5}}})


def test_failed_requests_count_in_what_was_sent_and_in_the_requests_executed():
    seen = judge(stats(success_count=7, fail_count=3, inference_count=10, execution_count=11, batch_stats={1: 11}),
                 metrics(nv_inference_request_success=7.0, nv_inference_request_failure=3.0, nv_inference_count=10.0,
                         nv_inference_exec_count=11.0), answered=7, failed=3, samples=10)
    assert seen.verdict == "fail" and seen.reason == "11 executions for 10 requests"
    assert seen.evidence["client"] == {"sent": 12, "answered": 7, "failed": 3, "refused_before_scheduling": 2,
                                       "samples_answered": 10, "batch_sizes": [1, 2]}
    assert seen.declared == "client: 7 answered (10 samples, batches [1, 2]), 3 failed, 2 refused for a wrong shape"
    assert seen.observed == ("statistics: success 7, fail 3, inferences 10, executions 11; metrics: success 7, "
                             "failure 3, inferences 10, executions 11")


def test_statistics_without_inference_stats_count_zero():
    """A model whose statistics carry no inference_stats entry (traffic.statistics then gives only the execution and
    inference counts): its successes, failures and cache hits are zero, not missing."""
    bare = {"execution_count": 0, "inference_count": 0, "execution_ns": 0, "batch_stats": {}}
    zero = {"nv_inference_request_success": 0.0, "nv_inference_request_failure": 0.0, "nv_inference_count": 0.0,
            "nv_inference_exec_count": 0.0}
    nothing = judge(bare, zero, answered=0, samples=0)
    assert nothing.verdict == "pass", nothing.reason
    assert nothing.evidence["statistics"] == {"success_count": 0, "fail_count": 0, "inference_count": 0,
                                              "execution_count": 0, "cache_hit_count": 0, "batch_stats": {}}
    assert nothing.observed == ("statistics: success 0, fail 0, inferences 0, executions 0; metrics: success 0, "
                                "failure 0, inferences 0, executions 0")
    empty = judge({"batch_stats": {}}, zero, answered=0, samples=0)  # not even the inference count
    assert empty.verdict == "pass", empty.reason
    assert empty.evidence["statistics"] == nothing.evidence["statistics"]
    missed = judge({"batch_stats": {}}, metrics(), answered=10, failed=1)
    assert missed.verdict == "fail"
    assert missed.reason == ("statistics count 0 successes, the client got 10 answers; statistics count 0 failures, "
                             "the client saw 1; statistics count 0 inferences, the client sent 15 answered samples; "
                             "nv_inference_request_success rose by 10, the statistics by 0; nv_inference_count rose by "
                             "15, the statistics by 0; nv_inference_exec_count rose by 10, the statistics by 0")
    assert missed.observed == ("statistics: success 0, fail 0, inferences 0, executions 0; metrics: success 10, "
                               "failure 0, inferences 15, executions 10")


def test_prometheus_samples_with_a_timestamp_or_a_brace_in_a_label_are_counted():
    """The text format lets a sample carry a timestamp and a label value hold "}": both are read (they were
    silently left out), and other models' and other metrics' samples are not."""
    from tritonsuite.judge.conformance.traffic import _counters

    text = "\n".join([
        "# HELP nv_inference_count Number of inferences performed",
        'nv_inference_count{model="m",version="1"} 12 1732860000000',
        'nv_inference_count{model="m",version="2"} 3',
        'nv_inference_count{model="m2",version="1"} 100',
        'nv_inference_request_failure{model="m",reason="BACKEND",note="a } in it",version="1"} 2',
        'nv_inference_exec_count{model="m",version="1"} NaN',
        'nv_energy_consumption{model="m"} 5'])
    found = _counters(text, "m")
    assert found["nv_inference_count"] == 15 and found["nv_inference_request_failure"] == 2
    assert found["nv_inference_exec_count"] != found["nv_inference_exec_count"]  # NaN, as the server said
    assert "nv_energy_consumption" not in found and found["nv_inference_request_success"] == 0
