"""The rate_limiter check's judging (judge/conformance/ratelimit.py: judge_rate_limiter) on statistics deltas,
answers and timings built to cause each failure reason, a case on each side of its threshold. The load itself runs on
a server started with --rate-limit execution_count in tests/test_conformance_tensors.py."""
from __future__ import annotations

from tritonsuite.judge.conformance.ratelimit import _pool, admitted, judge_rate_limiter
from tritonsuite.load.exchange import Answer

TWO_NEEDING_ONE = [{"R": 1}, {"R": 1}]  # two instances, each needing the one unit of R


def answers(n=16, failed=0) -> list[Answer]:
    return [Answer(0.0, 0.001, True)] * (n - failed) + [Answer(0.0, 0.001, False, error="boom")] * failed


def judge(execution_ns, instances=TWO_NEEDING_ONE, given=(), elapsed=1.0, sent=None):
    delta = {"execution_count": 16, "execution_ns": execution_ns, "batch_stats": {1: 16}}
    return judge_rate_limiter("m", instances, _pool(instances, list(given)), 4, delta,
                              answers() if sent is None else sent, elapsed)


def test_the_pool_is_the_largest_need_unless_the_server_was_given_an_amount():
    assert _pool(TWO_NEEDING_ONE, []) == {"R": 1} and admitted(TWO_NEEDING_ONE, {"R": 1}) == 1
    assert _pool(TWO_NEEDING_ONE, ["R:2"]) == {"R": 2} and admitted(TWO_NEEDING_ONE, {"R": 2}) == 2
    assert admitted([{"R": 2}, {"R": 1}, {"R": 1}], {"R": 2}) == 2  # the least needy first


def test_executions_within_what_the_pool_admits_pass():
    result = judge(1_000_000_000)
    assert result.verdict == "pass" and result.reason == "" and result.evidence["admitted"] == 1


def test_executions_overlapping_past_what_the_pool_admits_fail():
    at = judge(1_100_000_000)  # 1.1x the wall time: the clocks' slack over one instance
    assert at.verdict == "pass", at.reason
    over = judge(1_110_000_000)
    assert over.verdict == "fail"
    assert over.reason == "the rate limiter admits 1 instance(s) at once, but executions overlapped 1.11x the wall time"
    given = judge(2_110_000_000, given=["R:2"])  # two admitted: the slack is 0.2 of the wall time
    assert given.verdict == "pass", given.reason
    given = judge(2_210_000_000, given=["R:2"])
    assert given.verdict == "fail"
    assert given.reason == ("the rate limiter admits 2 instance(s) at once, but executions overlapped 2.21x the "
                            "wall time")


def test_failed_requests_fail_before_the_overlap_is_judged():
    result = judge(1_000_000_000, sent=answers(16, failed=3))
    assert result.verdict == "fail" and result.reason == "3 of 16 requests failed (boom)"


def test_executions_too_short_to_show_overlap_are_skipped():
    assert judge(200_000_000).verdict == "pass"
    result = judge(199_999_999)
    assert result.verdict == "skipped" and result.reason.startswith("executions too short here")
