"""The rate_limiter check's judging (judge/conformance/ratelimit.py: judge_rate_limiter) on statistics deltas,
answers and timings built to cause each failure reason, a case on each side of its threshold. The load itself runs on
a server started with --rate-limit execution_count in tests/test_conformance_tensors.py."""
from __future__ import annotations

from tritonsuite.judge.conformance.ratelimit import _pool, admitted, judge_rate_limiter
from tritonsuite.judge.conformance.result import CheckResult
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


def test_a_resource_given_with_its_device_and_a_resource_the_pool_lacks():
    """--rate-limit-resource name:count:device sets the amount (the device after it is not part of it); an instance
    needing a resource the pool has none of is never admitted."""
    assert _pool(TWO_NEEDING_ONE, ["R:4:0"]) == {"R": 4}
    assert _pool(TWO_NEEDING_ONE, ["S:3"]) == {"R": 1, "S": 3}
    assert admitted([{"R": 1}], {}) == 0 and admitted([{"R": 1}, {"S": 1}], {"S": 1}) == 1


def test_the_whole_result_reaches_the_report():
    """Every field of the result the report shows: both sides and the whole evidence, on each verdict."""
    delta = {"execution_count": 16, "execution_ns": 1_234_567_890, "batch_stats": {1: 16}}
    evidence = {"instances": 2, "pool": {"R": 1}, "admitted": 1, "concurrency": 4, "requests": 16, "executions": 16,
                "compute_infer_s": 1.2346, "wall_s": 1.6667, "overlap": 0.741}
    result = judge_rate_limiter("m", TWO_NEEDING_ONE, {"R": 1}, 4, delta, answers(), 1.666666)
    assert result == CheckResult(
        "m", "rate_limiter", "2 instances needing {'R': 1} of pool {'R': 1}: at most 1 at once",
        "16 executions at concurrency 4: compute 1.235 s over 1.667 s (overlap 0.74)", "pass", "", evidence)
    failed = judge_rate_limiter("m", TWO_NEEDING_ONE, {"R": 1}, 4, delta,
                                answers(15) + [Answer(0.0, 0.001, False, error="first"),
                                               Answer(0.0, 0.001, False, error="second")], 1.666666)
    assert failed == CheckResult(
        "m", "rate_limiter", "2 instances needing {'R': 1} of pool {'R': 1}: at most 1 at once",
        "16 executions at concurrency 4: compute 1.235 s over 1.667 s (overlap 0.74)", "fail",
        "2 of 17 requests failed (first)", evidence | {"requests": 17})
    mixed = [{"R": 2}, {"R": 1}]
    over = judge_rate_limiter("m", mixed, {"R": 2}, 4, delta, answers(), 0.5)
    assert over == CheckResult(
        "m", "rate_limiter", "2 instances needing [{'R': 2}, {'R': 1}] of pool {'R': 2}: at most 1 at once",
        "16 executions at concurrency 4: compute 1.235 s over 0.500 s (overlap 2.47)", "fail",
        "the rate limiter admits 1 instance(s) at once, but executions overlapped 2.47x the wall time",
        evidence | {"pool": {"R": 2}, "wall_s": 0.5, "overlap": 2.469})
    short = judge_rate_limiter("m", [{"R": 1}], {"R": 1}, 2, {"execution_count": 3, "execution_ns": 150_000_000},
                               answers(3), 2.0)
    assert short == CheckResult(
        "m", "rate_limiter", "1 instances needing {'R': 1} of pool {'R': 1}: at most 1 at once",
        "3 executions at concurrency 2: compute 0.150 s over 2.000 s (overlap 0.07)", "skipped",
        "executions too short here (50.00 ms each) to show their overlap",
        {"instances": 1, "pool": {"R": 1}, "admitted": 1, "concurrency": 2, "requests": 3, "executions": 3,
         "compute_infer_s": 0.15, "wall_s": 2.0, "overlap": 0.075})


def test_a_load_without_executions_or_wall_time_overlaps_nothing():
    """No executions counted (no execution_ns, no execution_count) over a load of no measurable time: an overlap of
    0, skipped as too short, per execution over at least one."""
    result = judge_rate_limiter("m", TWO_NEEDING_ONE, {"R": 1}, 4, {"batch_stats": {}}, answers(), 0.0)
    assert result.verdict == "skipped" and result.reason == ("executions too short here (0.00 ms each) to show their "
                                                             "overlap")
    assert (result.evidence["overlap"], result.evidence["executions"], result.evidence["compute_infer_s"]) == (0, 0, 0)
    assert result.observed == "0 executions at concurrency 4: compute 0.000 s over 0.000 s (overlap 0.00)"
    one = judge_rate_limiter("m", TWO_NEEDING_ONE, {"R": 1}, 4, {"execution_count": 1, "execution_ns": 150_000_000},
                             answers(1), 1.0)
    assert one.reason == "executions too short here (150.00 ms each) to show their overlap"
