"""The queue_policy and priority checks' judging (tritonsuite.judge.conformance.queue, .priority, on the waves of
.waves) on answers built to cause each verdict: when each request of a wave was sent and answered, and how it was
refused, both sides of each threshold. The server-based tests (tests/test_conformance_queue.py) show the same
reasons from deployments served without the declared field."""
from __future__ import annotations

import pytest

from tritonsuite.judge.conformance.priority import judge_overtake
from tritonsuite.judge.conformance.queue import Policy, judge_override, judge_queue_size, judge_timeout
from tritonsuite.judge.conformance.waves import QUEUE_FULL, TIMED_OUT, combine
from tritonsuite.load.exchange import Answer

EXEC_MS = 10.0  # every wave's executions


def ok(start: float, end: float) -> Answer:
    return Answer(start, end, True)


def refused(start: float, end: float, error: str) -> Answer:
    return Answer(start, end, False, error=f"inference request failed with HTTP 503: {error}")


def verdict(part, check="queue_policy"):
    result = combine("m", check, [part])
    return result.verdict, result.reason


# -------------------------------------------------------------------------------------------------- max_queue_size
SIZE = Policy("REJECT", 0, False, 3)  # cap 2 + 3 queued: a wave of 14


def wave(accepted: int, full: int, span_s: float = 0.0, other: int = 0) -> list[Answer]:
    """A wave sent over ``span_s``: ``accepted`` answered, ``full`` refused as full, ``other`` failed otherwise."""
    n = accepted + full + other
    starts = [span_s * i / max(n - 1, 1) for i in range(n)]
    return ([ok(t, t + 0.05) for t in starts[:accepted]] + [refused(t, t + 0.001, QUEUE_FULL) for t in
                                                            starts[accepted:accepted + full]]
            + [Answer(t, t + 0.001, False, error="HTTP 500: boom") for t in starts[accepted + full:]])


def size(answers: list[Answer]):
    return judge_queue_size("default_queue_policy: max_queue_size 3", SIZE, 0, 2, EXEC_MS, len(answers), answers, 0)


def test_a_wave_refused_beyond_what_the_queue_holds_passes():
    part = size(wave(5, 9))
    assert verdict(part) == ("pass", "") and part.evidence["accepted"] == 5 and part.evidence["queue_full"] == 9


@pytest.mark.parametrize("accepted, fails", [(2, True), (3, False)])
def test_refused_as_full_before_the_queue_held_max_queue_size_fails(accepted, fails):
    got = verdict(size(wave(accepted, 14 - accepted)))
    if fails:
        assert got == ("fail", "default_queue_policy: max_queue_size 3: refused 'Exceeds maximum queue size' after 2 "
                               "accepted: the queue held fewer than 3")
    else:
        assert got == ("pass", "")


@pytest.mark.parametrize("accepted, fails", [(8, True), (7, False)])
def test_more_accepted_than_executing_queued_and_one_round_of_slack_fails(accepted, fails):
    got = verdict(size(wave(accepted, 14 - accepted)))
    if fails:
        assert got == ("fail", "default_queue_policy: max_queue_size 3: 8 "
                               "of a wave arriving within"
                               " 0.0 ms accepted, more than 2 executing + 3 queued (+2 slack)")
    else:
        assert got == ("pass", "")


@pytest.mark.parametrize("span_s, at_once", [(0.0049, True), (0.005, False)])
def test_a_wave_accepted_whole_fails_only_where_it_arrived_within_half_an_execution(span_s, at_once):
    part = size(wave(14, 0, span_s))
    if at_once:
        assert verdict(part) == ("fail", "default_queue_policy: max_queue_size 3: all 14 "
                                         "requests of a wave arriving within"
                                         " 4.9 ms (executions of 10.0 ms) accepted, more than 2 executing + 3 queued")
    else:
        assert verdict(part)[0] == "skipped" and part.skipped == (
            "none refused, but the wave took 5.0 ms to arrive against executions of 10.00 ms: the queue never had to "
            "hold 3")


def test_a_request_failed_otherwise_than_by_a_policy_fails():
    assert verdict(size(wave(5, 8, other=1))) == (
        "fail", "default_queue_policy: max_queue_size 3: 1 requests failed otherwise (HTTP 500: boom)")


# --------------------------------------------------------------------------------------- default_timeout (REJECT)
REJECT = Policy("REJECT", 400_000, False, 0)  # T = 400 ms; waited past it: answered after 400 + 2 E + 30 = 450 ms


def reject(backlog: list[Answer], fail_count: int, second=None):
    second = [ok(0.41, 0.43)] * 4 if second is None else second
    return judge_timeout("default_queue_policy: REJECT after default_timeout_microseconds 400000", REJECT, 0, 2,
                         EXEC_MS, len(backlog), 0.41, backlog, second, fail_count, 0)


def backlog_refused_at(*refused_ms: float) -> list[Answer]:
    """A backlog served within the timeout but for requests refused after ``refused_ms``."""
    return [ok(0.0, 0.01 * k) for k in range(1, 9)] + [refused(0.0, ms / 1e3, TIMED_OUT) for ms in refused_ms]


def test_requests_still_queued_at_the_timeout_refused_and_counted_pass():
    part = reject(backlog_refused_at(401, 402), fail_count=2)
    assert verdict(part) == ("pass", "") and part.evidence["timed_out"] == 2


@pytest.mark.parametrize("refused_ms, early", [(350, True), (370, False)])
def test_a_request_refused_before_nine_tenths_of_the_timeout_fails(refused_ms, early):
    got = verdict(reject(backlog_refused_at(refused_ms), fail_count=1))
    if early:
        assert got == ("fail", "default_queue_policy: REJECT after default_timeout_microseconds 400000: 1 refused "
                               "'Request timeout expired' after 350.0 "
                               "ms, before the"
                               " 400 ms timeout")
    else:
        assert got == ("pass", "")


@pytest.mark.parametrize("fail_count, fails", [(1, True), (2, False)])
def test_timed_out_requests_not_counted_in_fail_count_fail(fail_count, fails):
    got = verdict(reject(backlog_refused_at(401, 402), fail_count=fail_count))
    if fails:
        assert got == ("fail", "default_queue_policy: REJECT after default_timeout_microseconds 400000: 2 "
                               "timed out, fail_count +"
                               "1")
    else:
        assert got == ("pass", "")


@pytest.mark.parametrize("late, fails", [(2, True), (1, False)])
def test_more_than_one_answer_after_waiting_past_the_timeout_fails(late, fails):
    backlog = [ok(0.0, 0.01 * k) for k in range(1, 9)] + [ok(0.0, 0.5)] * late
    part = reject(backlog, fail_count=0)
    if fails:
        assert verdict(part) == ("fail", "default_queue_policy: REJECT after default_timeout_microseconds 400000: 2 "
                                         "answered after waiting past the"
                                         " 400 ms timeout (up to 500 ms)")
    else:
        assert verdict(part)[0] == "skipped" and part.skipped.startswith("none refused, and no request waited past")


# ---------------------------------------------------------------------------------------- default_timeout (DELAY)
DELAY = Policy("DELAY", 400_000, False, 0)


def delay(second_ends: list[float], backlog=None):
    """A backlog of 10 answered from 425 ms to 515 ms, all expired when a second wave of 4 comes at 410 ms."""
    backlog = [ok(0.0, 0.425 + 0.01 * k) for k in range(10)] if backlog is None else backlog
    return judge_timeout("default_queue_policy: DELAY after default_timeout_microseconds 400000", DELAY, 0, 2, EXEC_MS,
                         len(backlog), 0.41, backlog, [ok(0.41, end) for end in second_ends], 0, 0)


def test_fresh_requests_served_before_expired_ones_pass_delay():
    part = delay([0.445, 0.455, 0.465, 0.475])
    assert verdict(part) == ("pass", "") and part.evidence["backlog_answered_after_a_fresh_one"] == 7


def test_expired_requests_served_in_arrival_order_ahead_of_fresh_ones_fail_delay():
    assert verdict(delay([0.525, 0.535, 0.545, 0.555])) == (
        "fail", "default_queue_policy: DELAY after default_timeout_microseconds 400000: 10 expired requests were still "
                "queued when 4 "
                "fresh ones came, and none was served after the first of them: no expired request was delayed")


def test_a_request_refused_on_its_timeout_fails_delay():
    backlog = [ok(0.0, 0.425 + 0.01 * k) for k in range(9)] + [refused(0.0, 0.4, TIMED_OUT)]
    assert verdict(delay([0.445, 0.455, 0.465, 0.475], backlog)) == (
        "fail", "default_queue_policy: DELAY after default_timeout_microseconds 400000: "
                "DELAY declared, but"
                " 1 requests refused 'Request timeout expired'")


# ------------------------------------------------------------------------------------------ allow_timeout_override
def override(allowed: bool, probes: list[Answer]):
    """Probes with timeout_us 100000 (a quarter of the 400 ms default) behind a backlog of 20."""
    p = Policy("REJECT", 400_000, allowed, 0)
    backlog = [ok(0.0, 0.01 * k) for k in range(1, 21)]
    return judge_override(f"default_queue_policy: allow_timeout_override {str(allowed).lower()}", p, 0, 2, EXEC_MS,
                          EXEC_MS, 20, 200.0, backlog, probes)


def probes_refused_after(ms: float) -> list[Answer]:
    return [refused(0.04, 0.04 + ms / 1e3, TIMED_OUT) for _ in range(4)]


def probes_answered_after(ms: float) -> list[Answer]:
    return [ok(0.04, 0.04 + ms / 1e3) for _ in range(4)]


def test_probes_refused_on_their_own_timeout_pass_where_the_override_is_allowed():
    assert verdict(override(True, probes_refused_after(110))) == ("pass", "")


def test_probes_answered_past_their_own_timeout_fail_where_the_override_is_allowed():
    assert verdict(override(True, probes_answered_after(200))) == (
        "fail", "default_queue_policy: allow_timeout_override true: override allowed, but 4 probes with timeout_us "
                "100000 "
                "were answered after up to"
                " 200 ms")


def test_probes_answered_past_their_own_timeout_pass_where_the_override_is_not_allowed():
    assert verdict(override(False, probes_answered_after(200))) == ("pass", "")


def test_probes_refused_on_their_own_timeout_fail_where_the_override_is_not_allowed():
    assert verdict(override(False, probes_refused_after(110))) == (
        "fail", "default_queue_policy: allow_timeout_override false: override not allowed, but 4 probes refused after "
                "[110.0, 110.0, 110.0, 110.0] ms, before the 400 "
                "ms default: their own timeout_us was honoured")


@pytest.mark.parametrize("answered_ms, judged", [(140, False), (160, True)])
def test_a_probe_judged_answered_past_its_own_timeout_waited_beyond_two_executions_and_the_slack(answered_ms, judged):
    part = override(True, probes_answered_after(answered_ms))
    assert verdict(part)[0] == ("fail" if judged else "skipped")


# -------------------------------------------------------------------------------------------------------- priority
def overtake(probe_ends: list[float], cap: int = 1, probes=None):
    """A backlog of 8 at priority 3 from 0 s, four answered from 75 ms on, after probes at priority 1 come at 50 ms."""
    backlog = [ok(0.0, end) for end in (0.015, 0.025, 0.035, 0.045, 0.075, 0.085, 0.095, 0.105)]
    probes = [ok(0.05, end) for end in probe_ends] if probes is None else probes
    return judge_overtake("priority_levels 3: level 1 before level 3", 3, 1, cap, EXEC_MS, 8, 30.0, backlog, probes)


def test_probes_served_before_the_backlog_still_queued_pass():
    part = overtake([0.062, 0.064, 0.066, 0.068])
    assert verdict(part, "priority") == ("pass", "") and part.evidence["passed_per_probe"] == [4, 4, 4, 4]
    assert part.evidence["still_queued"] == 4


def test_probes_served_after_the_backlog_fail_as_arrival_order():
    part = overtake([0.115, 0.125, 0.135, 0.145])
    assert verdict(part, "priority") == (
        "fail", "priority_levels 3: level 1 before level 3: probes at priority 1 passed a median 0 of 4 earlier "
                "requests at priority 3 (80 ms against 90 "
                "ms): served in arrival order")


@pytest.mark.parametrize("probe_ends, fails", [([0.095, 0.095, 0.11, 0.11], True),
                                               ([0.095, 0.095, 0.095, 0.11], False)])
def test_probes_must_pass_a_median_of_at_least_one(probe_ends, fails):
    got = verdict(overtake(probe_ends), "priority")
    assert got[0] == ("fail" if fails else "pass")
    if fails:
        assert "probes at priority 1 passed a median 0.5 of 4 earlier requests at priority 3 (" in got[1]
        assert got[1].endswith("ms): served in arrival order")


@pytest.mark.parametrize("cap, judged", [(4, False), (3, True)])
def test_no_more_still_queued_than_one_round_of_instances_is_no_contention(cap, judged):
    part = overtake([0.115, 0.125, 0.135, 0.145], cap=cap)
    assert verdict(part, "priority")[0] == ("fail" if judged else "skipped")


def test_a_probe_failed_otherwise_than_by_a_queue_policy_fails():
    probes = [ok(0.05, end) for end in (0.062, 0.064, 0.066)] + [Answer(0.05, 0.051, False, error="HTTP 500: gone"),
                                                                  refused(0.05, 0.051, QUEUE_FULL)]
    part = overtake([], probes=probes)
    assert verdict(part, "priority") == ("fail", "priority_levels 3: level 1 before level 3: 1 "
                                                 "requests failed ("
                                                 "HTTP 500: gone)")
    assert part.evidence["refused_by_queue_policy"] == 1
