"""The counters check's judging (judge/conformance/counters.py: judge_counters) on statistics and metrics rises built
to cause each failure reason, against what the client saw: 5 answered requests of batch 1 and 5 of batch 2 (15
samples), none failed. The mix itself is sent on the server in tests/test_conformance_checks.py."""
from __future__ import annotations

from tritonsuite.judge.conformance.counters import judge_counters


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
