"""The queue_policy and priority checks' judging (tritonsuite.judge.conformance.queue, .priority, on the waves of
.waves) on answers built to cause each verdict: when each request of a wave was sent and answered, and how it was
refused, both sides of each threshold. The server-based tests (tests/test_conformance_queue.py) show the same
reasons from deployments served without the declared field."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tritonsuite.judge.conformance.priority import judge_overtake
from tritonsuite.judge.conformance.queue import (Policy, _longest_idle_ms, _otherwise, judge_override, judge_queue_size,
                                                judge_timeout, policies)
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


def test_a_wave_that_arrived_too_slowly_to_be_judged_is_sent_once_more_before_the_setting_is_skipped(monkeypatch):
    """CI (2026-11-30, the CPUs 1% idle): a deployment served without its max_queue_size skipped ("the wave took 13.5
    ms to arrive against executions of 25.4 ms"): its client had stalled. Such a wave is sent once more; a second
    stall still skips (never a verdict on a queue that never had to hold anything)."""
    from tritonsuite.judge.conformance import queue

    slow, at_once = wave(14, 0, 0.005), wave(14, 0, 0.001)
    sent = []

    def measure(target, plan, replies):
        sent.append(plan)
        return (replies[len(sent) - 1],), {}, EXEC_MS

    monkeypatch.setattr(queue, "metrics", lambda server, name: None)
    for replies, expected in (([slow, at_once], ("fail", 2)), ([slow, slow], ("skipped", 2)),
                              ([at_once, slow], ("fail", 1))):
        sent.clear()
        monkeypatch.setattr(queue, "measure", lambda target, plan, r=replies: measure(target, plan, r))
        part = queue._queue_size(SimpleNamespace(server=None, name="m"), "default_queue_policy", 0, SIZE, 2, EXEC_MS)
        assert (verdict(part)[0], part.evidence["waves_sent"]) == expected and len(sent) == expected[1]

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


def test_waves_that_met_no_contention_are_sent_once_more_before_the_setting_is_skipped(monkeypatch):
    """CI on three workers (2026-11-30): FIFO served, yet the check skipped ("4 of the backlog still queued when
    the probes came"): the probes' client had stalled until the backlog drained. Such waves are sent once more; a
    second stall still skips (never a verdict without contention)."""
    from tritonsuite.judge.conformance import priority

    backlog = [ok(0.0, end) for end in (0.015, 0.025, 0.035, 0.045, 0.075, 0.085, 0.095, 0.105)]
    drained = [ok(0.1, end) for end in (0.112, 0.114, 0.116, 0.118)]  # sent when the backlog was all but served
    fifo = [ok(0.05, end) for end in (0.115, 0.125, 0.135, 0.145)]  # in time, served after the backlog
    sent = []

    def measure(target, plan, replies):
        sent.append(plan)
        return (backlog, replies[len(sent) - 1]), {}, EXEC_MS

    for replies, expected in (([drained, fifo], ("fail", 2)), ([drained, drained], ("skipped", 2)),
                              ([fifo, drained], ("fail", 1))):
        sent.clear()
        monkeypatch.setattr(priority, "measure", lambda target, plan, r=replies: measure(target, plan, r))
        part = priority._overtake(None, "priority_levels 3: level 1 before level 3", 3, 1, 1, EXEC_MS)
        assert (verdict(part, "priority")[0], part.evidence["waves_sent"]) == expected and len(sent) == expected[1]
        if expected[0] == "skipped":
            assert "no contention to order" in verdict(part, "priority")[1]


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


# ----------------------------------------------------------------------------- what reaches the report, whole
def shifted(answers: list[Answer], by: float) -> list[Answer]:
    """``answers`` sent and answered ``by`` seconds later (a wave that did not start at the clock's zero)."""
    return [Answer(a.start + by, a.end + by, a.ok, error=a.error) for a in answers]


def whole(part, check="queue_policy"):
    result = combine("m", check, [part])
    return result.verdict, result.reason, result.declared, result.observed, result.evidence


def test_a_wave_reports_what_was_declared_observed_and_its_whole_evidence():
    # sent over 9.876 ms from 3 s on, against executions of 20.54321 ms: at once
    answers = shifted(wave(5, 8, 0.009876, other=1), 3.0)
    part = judge_queue_size("priority_queue_policy[2]: max_queue_size 3", SIZE, 2, 2, 20.54321, 14, answers, 1)
    assert whole(part) == (
        "fail", "priority_queue_policy[2]: max_queue_size 3: 1 requests failed otherwise (HTTP 500: boom)",
        "priority_queue_policy[2]: max_queue_size 3",
        "priority_queue_policy[2]: a wave of 14 at level 2 within 9.9 ms (executions 20.5 ms, 2 at a time): 5 "
        "accepted, 8 refused 'Exceeds maximum queue size', fail_count +1",
        {"priority_queue_policy[2]": {"wave": 14, "priority": 2, "capacity": 2, "accepted": 5, "queue_full": 8,
                                      "send_span_ms": 9.88, "compute_ms_per_execution": 20.543, "fail_count": 1,
                                      "latency_ms": [50.0] * 5 + [1.0] * 9}})


def test_a_wave_s_span_is_from_its_first_send_to_its_last():
    part = size(shifted(wave(14, 0, 0.0049), 2.0))  # 4.9 ms from 2 s on: at once, accepted whole
    assert verdict(part)[0] == "fail" and part.evidence["send_span_ms"] == 4.9


def test_a_reject_timeout_reports_what_was_declared_observed_and_its_whole_evidence():
    # five instances' worth of probes (more than PROBES) at 412.3456 ms, executions of 12.3456 ms
    backlog = backlog_refused_at(401, 402)
    part = judge_timeout("default_queue_policy: REJECT after default_timeout_microseconds 400000", REJECT, 2, 5,
                         12.3456, 10, 0.4123456, backlog, [ok(0.41, 0.43)] * 5, 2, 1)
    assert whole(part) == (
        "pass", "", "default_queue_policy: REJECT after default_timeout_microseconds 400000",
        "default_queue_policy: a backlog of 10 and 5 more at 412 ms (executions 12.3 ms): 13 answered (longest 80 "
        "ms), 2 refused 'Request timeout expired', fail_count +2",
        {"default_queue_policy": {"backlog": 10, "second_wave": 5, "second_wave_at_ms": 412.3, "priority": 2,
                                  "capacity": 5, "compute_ms_per_execution": 12.346, "timed_out": 2, "fail_count": 2,
                                  "backlog_latency_ms": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 401.0, 402.0],
                                  "second_latency_ms": [20.0] * 5, "attempt": 2}})


def test_nothing_refused_and_nothing_late_is_not_judged_with_its_figures():
    part = reject([ok(0.0, 0.01 * k) for k in range(1, 9)], fail_count=0)
    assert verdict(part) == ("skipped", "default_queue_policy: none refused, and no request waited past the 400 ms "
                                        "timeout: answered after 80 ms at most, within 450 ms (the timeout, two "
                                        "executions and 30 ms)")
    failed = reject([ok(0.0, 0.01 * k) for k in range(1, 9)] + [Answer(0.0, 0.1, False, error="HTTP 500: boom")], 0)
    assert verdict(failed) == ("fail", "default_queue_policy: REJECT after default_timeout_microseconds 400000: 1 "
                                       "requests failed otherwise (HTTP 500: boom)")


def test_a_refusal_at_nine_tenths_of_the_timeout_is_not_early():
    assert verdict(reject(backlog_refused_at(360), fail_count=1)) == ("pass", "")


@pytest.mark.parametrize("end, late", [(0.5, False), (0.501, True)])
def test_an_answer_is_late_only_past_the_timeout_two_executions_and_the_slack(end, late):
    # executions of 35 ms: late past 400 + 2 x 35 + 30 = 500 ms
    part = judge_timeout("default_queue_policy: REJECT after default_timeout_microseconds 400000", REJECT, 0, 2, 35.0,
                         10, 0.435, [ok(0.0, 0.01 * k) for k in range(1, 9)] + [ok(0.0, end)] * 2,
                         [ok(0.435, 0.45)] * 4, 0, 0)
    if late:
        assert verdict(part) == ("fail", "default_queue_policy: REJECT after default_timeout_microseconds 400000: 2 "
                                         "answered after waiting past the 400 ms timeout (up to 501 ms)")
    else:
        assert verdict(part)[0] == "skipped" and part.skipped.endswith("answered after 500 ms at most, within 500 ms "
                                                                       "(the timeout, two executions and 30 ms)")


def test_a_delay_timeout_reports_what_was_declared_observed_and_its_whole_evidence():
    assert whole(delay([0.445, 0.455, 0.465, 0.475])) == (
        "pass", "", "default_queue_policy: DELAY after default_timeout_microseconds 400000",
        "default_queue_policy: a backlog of 10 and 4 more at 410 ms (executions 10.0 ms): 14 answered (longest 515 "
        "ms), 0 refused 'Request timeout expired', fail_count +0",
        {"default_queue_policy": {"backlog": 10, "second_wave": 4, "second_wave_at_ms": 410.0, "priority": 0,
                                  "capacity": 2, "compute_ms_per_execution": 10.0, "timed_out": 0, "fail_count": 0,
                                  "backlog_latency_ms": [425.0, 435.0, 445.0, 455.0, 465.0, 475.0, 485.0, 495.0,
                                                         505.0, 515.0],
                                  "second_latency_ms": [35.0, 45.0, 55.0, 65.0], "attempt": 1,
                                  "backlog_answered_after_a_fresh_one": 7}})


@pytest.mark.parametrize("still, judged", [(2, False), (3, True)])
def test_delay_is_judged_only_with_more_of_the_backlog_queued_than_execute(still, judged):
    # the backlog answered before the fresh wave came (410 ms) but for ``still`` answered after it, in arrival order
    backlog = [ok(0.0, 0.1 + 0.01 * k) for k in range(10 - still)] + [ok(0.0, 0.5 + 0.01 * k) for k in range(still)]
    part = delay([0.6, 0.61, 0.62, 0.63], backlog)
    if judged:
        assert verdict(part) == ("fail", "default_queue_policy: DELAY after default_timeout_microseconds 400000: 3 "
                                         "expired requests were still queued when 4 fresh ones came, and none was "
                                         "served after the first of them: no expired request was delayed")
    else:
        assert verdict(part) == ("skipped", "default_queue_policy: 2 of the backlog still queued when the second wave "
                                            "came: too few to show a delayed one beside the 2 executing")


def test_a_backlog_request_answered_within_an_execution_of_the_fresh_wave_was_not_still_queued():
    # answered at 415 ms and 419 ms, within an execution (10 ms) of the fresh wave at 410 ms: not counted as waiting
    backlog = [ok(0.0, 0.1 + 0.01 * k) for k in range(6)] + [ok(0.0, 0.415), ok(0.0, 0.419)] + [
        ok(0.0, 0.5 + 0.01 * k) for k in range(2)]
    assert verdict(delay([0.6, 0.61, 0.62, 0.63], backlog))[0] == "skipped"


@pytest.mark.parametrize("second_ends, skipped", [([0.43, 0.46, 0.47, 0.48], True),
                                                  ([0.43, 0.47, 0.48, 0.49], False)])
def test_a_fresh_wave_answered_fast_behind_a_served_backlog_is_a_stalled_client(second_ends, skipped):
    # three of the backlog answered after 420 ms, none half an execution after the first fresh answer (430 ms)
    backlog = [ok(0.0, 0.1 + 0.01 * k) for k in range(7)] + [ok(0.0, 0.421), ok(0.0, 0.425), ok(0.0, 0.435)]
    part = delay(second_ends, backlog)
    if skipped:  # a median of 55 ms, under 3 executions and the slack (60 ms)
        assert verdict(part) == ("skipped", "default_queue_policy: the fresh wave was answered in 55 ms (median): it "
                                            "reached the server after the backlog was served (a client stalled on a "
                                            "busy host)")
    else:  # a median of 65 ms
        assert verdict(part)[0] == "fail" and part.evidence["backlog_answered_after_a_fresh_one"] == 0


def delay_375(backlog: list[Answer], second: list[Answer]):
    """DELAY after 375 ms (a binary fraction of a second: the batcher's idle time compared exactly)."""
    return judge_timeout("default_queue_policy: DELAY after default_timeout_microseconds 375000",
                         Policy("DELAY", 375_000, False, 0), 0, 2, EXEC_MS, len(backlog), 0.41, backlog, second, 0, 0)


@pytest.mark.parametrize("idle_end, skipped", [(0.5, False), (0.5078125, True)])
def test_a_batcher_idle_past_the_timeout_with_requests_queued_is_not_judged(idle_end, skipped):
    # answered at 125 ms, then nothing until ``idle_end`` while the rest of the backlog waited; fresh ones after all
    backlog = [ok(0.0, 0.0625), ok(0.0, 0.125)] + [ok(0.0, idle_end + 0.0078125 * k) for k in range(8)]
    part = delay_375(backlog, [ok(0.41, end) for end in (0.6, 0.61, 0.62, 0.63)])
    if skipped:
        assert verdict(part) == ("skipped", "default_queue_policy: the batcher sat 383 ms between answers with "
                                            "requests queued, longer than the 375 ms timeout: the fresh wave expired "
                                            "too, and expired requests keep their order")
    else:
        assert verdict(part) == ("fail", "default_queue_policy: DELAY after default_timeout_microseconds 375000: 8 "
                                         "expired requests were still queued when 4 fresh ones came, and none was "
                                         "served after the first of them: no expired request was delayed")


def test_the_batcher_s_longest_idle_time_between_answers_with_one_waiting():
    assert _longest_idle_ms([]) == 0.0 and _longest_idle_ms([ok(0.0, 0.25)]) == 0.0
    # in order of answer: 0.125, 0.25 and 0.75 s, all sent at 0: gaps of 125 and 500 ms
    assert _longest_idle_ms([ok(0.0, 0.75), ok(0.0, 0.125), ok(0.0, 0.25)]) == 500.0
    # one sent exactly as the one before it was answered was waiting; one sent later was not
    assert _longest_idle_ms([ok(0.0, 0.25), ok(0.25, 0.75)]) == 500.0
    assert _longest_idle_ms([ok(0.0, 0.25), ok(0.3, 0.75)]) == 0.0


def test_failures_other_than_a_policy_s_refusals_are_problems():
    assert _otherwise([ok(0.0, 0.1), refused(0.0, 0.1, QUEUE_FULL), refused(0.0, 0.1, TIMED_OUT)]) == []
    assert _otherwise([Answer(0.0, 0.1, False, error="HTTP 500: a"), Answer(0.0, 0.1, False, error="HTTP 400: b")]) \
        == ["2 requests failed otherwise (HTTP 500: a)"]


def test_an_override_reports_what_was_declared_observed_and_its_whole_evidence():
    p = Policy("REJECT", 400_000, True, 0)
    backlog = [ok(0.0, 0.01 * k) for k in range(1, 21)]
    probes = [refused(0.04, 0.15, TIMED_OUT)] * 2 + [ok(0.04, 0.1)] * 3  # five instances' worth
    part = judge_override("priority_queue_policy[2]: allow_timeout_override true", p, 2, 5, EXEC_MS, 12.3456, 20,
                          200.4, backlog, probes)
    assert whole(part) == (
        "pass", "", "priority_queue_policy[2]: allow_timeout_override true",
        "priority_queue_policy[2]: 5 probes with timeout_us 100000 behind a backlog of 20 (200 ms): 2 refused "
        "'Request timeout expired' (after [110.0, 110.0] ms), 3 answered (after [60.0, 60.0, 60.0] ms)",
        {"priority_queue_policy[2]": {"backlog": 20, "probes": 5, "probe_timeout_us": 100000, "priority": 2,
                                      "compute_ms_per_execution": 12.346,
                                      "backlog_latency_ms": [10.0 * k for k in range(1, 21)],
                                      "probe_latency_ms": [110.0, 110.0, 60.0, 60.0, 60.0], "probes_timed_out": 2}})
    unmeasured = judge_override("d: allow_timeout_override true", p, 0, 2, EXEC_MS, 0.0, 20, 200.0, backlog, probes)
    assert unmeasured.evidence["compute_ms_per_execution"] == 10.0  # the executions it was sized from


def test_a_probe_refused_at_nine_tenths_of_the_default_timeout_was_not_refused_on_its_own():
    at = override(True, [refused(0.0, 0.36, TIMED_OUT) for _ in range(4)])
    assert verdict(at) == ("skipped", "default_queue_policy: no probe both waited past its own 100 ms and was refused "
                                      "before the default 400 ms (probes after [360.0, 360.0, 360.0, 360.0] ms)")
    # refused on the default timeout where the override is not allowed: not on their own (nor answered past it)
    default = override(False, [refused(0.0, 0.401, TIMED_OUT) for _ in range(4)])
    assert verdict(default)[0] == "skipped" and default.problems == ()


def test_a_probe_answered_at_its_own_timeout_two_executions_and_the_slack_did_not_wait_past_it():
    at = override(True, [ok(0.0, 0.15) for _ in range(4)])  # 100 + 2 x 10 + 30 ms
    assert verdict(at)[0] == "skipped"
    none = override(False, [ok(0.0, 0.15) for _ in range(4)])
    assert verdict(none) == ("skipped", "default_queue_policy: no probe both waited past its own 100 ms and was "
                                        "answered before the default 400 ms (probes after [150.0, 150.0, 150.0, "
                                        "150.0] ms)")


def test_a_probe_failed_otherwise_fails_the_override():
    probes = probes_refused_after(110)[:3] + [Answer(0.04, 0.05, False, error="HTTP 500: gone")]
    assert verdict(override(True, probes)) == (
        "fail", "default_queue_policy: allow_timeout_override true: 1 requests failed otherwise (HTTP 500: gone)")


def test_priority_reports_what_was_declared_observed_and_its_whole_evidence():
    # five instances' worth of probes without a priority (level 0) behind a backlog at priority 2
    backlog = [ok(0.0, end) for end in (0.015, 0.025, 0.035, 0.045, 0.075, 0.085, 0.095, 0.105, 0.115, 0.125, 0.135,
                                        0.145)]
    probes = [ok(0.05, end) for end in (0.062, 0.064, 0.066, 0.068, 0.07)]
    part = judge_overtake("default_priority_level 1: no priority before level 2", 2, 0, 5, 12.3456, 12, 30.45,
                          backlog, probes)
    assert whole(part, "priority") == (
        "pass", "", "default_priority_level 1: no priority before level 2",
        "default_priority_level 1: 5 probes at priority 0 behind 8 of 12 at priority 2 still queued: median 8 passed "
        "per probe, probes 16 ms against 110 ms (medians)",
        {"default_priority_level 1": {"backlog": 12, "backlog_priority": 2, "probes": 5, "probe_priority": 0,
                                      "probes_at_ms": 30.4, "compute_ms_per_execution": 12.346, "still_queued": 8,
                                      "passed_per_probe": [8, 8, 8, 8, 7],  # 75 ms: not half an execution after 70
                                      "probe_latency_ms": [12.0, 14.0, 16.0, 18.0, 20.0],
                                      "queued_latency_ms": [75.0, 85.0, 95.0, 105.0, 115.0, 125.0, 135.0, 145.0],
                                      "refused_by_queue_policy": 0}})


def test_a_backlog_request_sent_with_the_probes_or_answered_within_an_execution_of_them_was_not_queued():
    # probes at 62.5 ms, executions of 62.5 ms: queued means sent before 62.5 ms and answered after 125 ms
    backlog = [ok(0.0, 0.125), ok(0.0625, 0.5), ok(0.0, 0.25), ok(0.0, 0.375)]
    part = judge_overtake("d: level 1 before level 3", 3, 1, 1, 62.5, 4, 62.5, backlog, [ok(0.0625, 0.09375)])
    assert part.evidence["still_queued"] == 2 and part.evidence["queued_latency_ms"] == [250.0, 375.0]
    # a probe answered at 93.75 ms passed the backlog answered more than half an execution (31.25 ms) later only
    passed = judge_overtake("d: level 1 before level 3", 3, 1, 1, 62.5, 4, 62.5,
                            [ok(0.0, 0.15625), ok(0.0, 0.15626), ok(0.0, 0.25)], [ok(0.0625, 0.125)])
    assert passed.evidence["still_queued"] == 3 and passed.evidence["passed_per_probe"] == [2]


def test_no_probe_answered_passed_nothing():
    backlog = [ok(0.0, 0.015 + 0.01 * k) for k in range(8)]
    probes = [refused(0.05, 0.051, QUEUE_FULL)] * 3 + [refused(0.05, 0.06, TIMED_OUT)]
    part = overtake([], probes=probes)
    assert verdict(part, "priority") == (
        "fail", "priority_levels 3: level 1 before level 3: probes at priority 1 passed a median 0 of 4 earlier "
                "requests at priority 3 (1 ms against 90 ms): served in arrival order")
    assert part.observed == ("4 probes at priority 1 behind 4 of 8 at priority 3 still queued: median 0 passed per "
                             "probe, probes 1 ms against 90 ms (medians)")
    assert part.evidence["passed_per_probe"] == [] and part.evidence["refused_by_queue_policy"] == 4


def test_no_probes_and_no_backlog_queued_show_no_contention():
    part = judge_overtake("d: level 1 before level 3", 3, 1, 1, EXEC_MS, 0, 30.0, [], [])
    assert verdict(part, "priority") == ("skipped", "d: 0 of the backlog still queued when the probes came: no "
                                                    "contention to order")
    assert part.observed == ("4 probes at priority 1 behind 0 of 0 at priority 3 still queued: median 0 passed per "
                             "probe, probes 0 ms against 0 ms (medians)")
    # without probes the backlog is measured from the clock's zero: requests sent after it were not queued
    late = judge_overtake("d: level 1 before level 3", 3, 1, 1, EXEC_MS, 2, 30.0, [ok(0.5, 2.0), ok(0.5, 2.5)], [])
    assert late.evidence["still_queued"] == 0


# ------------------------------------------------------------------------------------ the policies a batcher declares
def queued_model(dynamic_batching: dict):
    from tritonsuite.core.description import describe

    return describe({"name": "m", "backend": "python", "max_batch_size": 8,
                     "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
                     "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
                     "dynamic_batching": dynamic_batching})


def test_each_declared_queue_policy_is_judged_at_a_level_it_governs():
    assert policies(queued_model({})) == []
    assert policies(queued_model({"default_queue_policy": {"max_queue_size": 4}})) == [
        ("default_queue_policy", 0, Policy("REJECT", 0, False, 4))]  # no levels: sent without a priority
    levels = queued_model({"priority_levels": 3, "priority_queue_policy": {"3": {}, "1": {"max_queue_size": 2}},
                           "default_queue_policy": {"timeout_action": "DELAY", "default_timeout_microseconds": "5000",
                                                    "allow_timeout_override": True}})
    assert policies(levels) == [("default_queue_policy", 2, Policy("DELAY", 5000, True, 0)),  # the free level 2
                                ("priority_queue_policy[1]", 1, Policy("REJECT", 0, False, 2)),
                                ("priority_queue_policy[3]", 3, Policy("REJECT", 0, False, 0))]
    # every level with its own policy: the default one governs none and is not judged
    assert policies(queued_model({"priority_levels": 2, "default_queue_policy": {"max_queue_size": 9},
                                  "priority_queue_policy": {"2": {}, "1": {"max_queue_size": 2}}})) == [
        ("priority_queue_policy[1]", 1, Policy("REJECT", 0, False, 2)),
        ("priority_queue_policy[2]", 2, Policy("REJECT", 0, False, 0))]
    free_first = queued_model({"priority_levels": 3, "default_queue_policy": {}, "priority_queue_policy": {"2": {}}})
    assert [(name, level) for name, level, _ in policies(free_first)] == [
        ("default_queue_policy", 1), ("priority_queue_policy[2]", 2)]


def test_a_timeout_policy_says_what_it_does():
    assert Policy("DELAY", 5000, False, 0).timeout("priority_queue_policy[1]") == (
        "priority_queue_policy[1]: DELAY after default_timeout_microseconds 5000")



def test_a_timeout_with_nothing_answered_says_so():
    gone = [Answer(0.0, 0.1, False, error="HTTP 500: boom")] * 10
    part = judge_timeout("d: REJECT after default_timeout_microseconds 400000", REJECT, 0, 2, EXEC_MS, 10, 0.41, gone,
                         [Answer(0.41, 0.42, False, error="HTTP 500: boom")] * 4, 0, 0)
    assert part.observed == ("a backlog of 10 and 4 more at 410 ms (executions 10.0 ms): 0 answered (longest 0 ms), 0 "
                             "refused 'Request timeout expired', fail_count +0")
    assert part.problems == ("14 requests failed otherwise (HTTP 500: boom)",)
    assert part.skipped == ("none refused, and no request waited past the 400 ms timeout: answered after 0 ms at most, "
                            "within 450 ms (the timeout, two executions and 30 ms)")


def test_delay_with_no_fresh_request_answered_fails_on_the_refusals():
    backlog = [ok(0.0, 0.425 + 0.01 * k) for k in range(10)]
    part = judge_timeout("d: DELAY after default_timeout_microseconds 400000", DELAY, 0, 2, EXEC_MS, 10, 0.41, backlog,
                         [refused(0.41, 0.81, TIMED_OUT)] * 4, 0, 0)
    assert part.problems == ("DELAY declared, but 4 requests refused 'Request timeout expired'",)
    assert part.evidence["backlog_answered_after_a_fresh_one"] == 0


def test_the_fresh_wave_came_with_its_first_request():
    # the fresh wave's first request at 410 ms, the rest at 420 ms: the backlog answered at 425 ms was still queued
    backlog = [ok(0.0, 0.1 + 0.01 * k) for k in range(7)] + [ok(0.0, 0.425), ok(0.0, 0.5), ok(0.0, 0.51)]
    second = [ok(0.41, 0.6)] + [ok(0.42, end) for end in (0.61, 0.62, 0.63)]
    part = judge_timeout("d: DELAY after default_timeout_microseconds 400000", DELAY, 0, 2, EXEC_MS, 10, 0.41, backlog,
                         second, 0, 0)
    assert part.problems == ("3 expired requests were still queued when 4 fresh ones came, and none was served after "
                             "the first of them: no expired request was delayed",)


def test_a_backlog_request_sent_with_the_fresh_wave_is_not_one_it_passed():
    # the arrival-order failure, and one more request sent at 410 ms with the fresh ones, answered after them
    backlog = [ok(0.0, 0.425 + 0.01 * k) for k in range(10)] + [ok(0.41, 0.6)]
    part = delay([0.525, 0.535, 0.545, 0.555], backlog)
    assert verdict(part)[0] == "fail" and part.evidence["backlog_answered_after_a_fresh_one"] == 0


@pytest.mark.parametrize("third_end, judged", [(0.5625, False), (0.5626, True)])
def test_still_queued_means_answered_more_than_an_execution_after_the_fresh_wave(third_end, judged):
    # executions of 62.5 ms, the fresh wave at 500 ms: still queued when answered after 562.5 ms
    backlog = [ok(0.0, 0.3 + 0.01 * k) for k in range(7)] + [ok(0.0, 0.6), ok(0.0, 0.61), ok(0.0, third_end)]
    part = judge_timeout("d: DELAY after default_timeout_microseconds 400000", DELAY, 0, 2, 62.5, 10, 0.5, backlog,
                         [ok(0.5, end) for end in (0.8, 0.81, 0.82, 0.83)], 0, 0)
    if judged:
        assert part.skipped == "" and part.problems[0].startswith("3 expired requests were still queued")
    else:
        assert part.skipped == ("2 of the backlog still queued when the second wave came: too few to show a delayed "
                                "one beside the 2 executing") and part.problems == ()


def test_a_fresh_wave_answered_in_three_executions_and_the_slack_is_not_fast():
    # executions of 21.5 ms: fast under 3 x 21.5 + 30 = 94.5 ms; the fresh wave answered in that (to 0.1 ms)
    backlog = [ok(0.0, 0.1 + 0.01 * k) for k in range(7)] + [ok(0.0, 0.53), ok(0.0, 0.54), ok(0.0, 0.55)]
    part = judge_timeout("d: DELAY after default_timeout_microseconds 400000", DELAY, 0, 2, 21.5, 10, 0.5, backlog,
                         [ok(0.5, 0.5945)] * 4, 0, 0)
    assert part.evidence["second_latency_ms"] == [94.5] * 4
    assert part.skipped == "" and part.problems == (
        "3 expired requests were still queued when 4 fresh ones came, and none was served after the first of them: "
        "no expired request was delayed",)


def test_delay_without_a_fresh_wave_has_nothing_to_show():
    part = judge_timeout("d: DELAY after default_timeout_microseconds 400000", DELAY, 0, 2, EXEC_MS, 10, 0.41,
                         [ok(0.0, 0.425 + 0.01 * k) for k in range(10)], [], 0, 0)
    assert part.skipped == ("0 of the backlog still queued when the second wave came: too few to show a delayed one "
                            "beside the 2 executing")


@pytest.mark.parametrize("drained_ms, judged", [(350.0, True), (350.5, False)])
def test_a_backlog_that_fell_behind_its_sized_pace_leaves_the_override_unjudged(drained_ms, judged):
    """A backlog sized to last 200 ms (executions of 10 ms) answered after more than 1.5 x that, two executions and
    the slack: the server fell behind (a busy host), and probes answered past their own timeout are no evidence."""
    p = Policy("REJECT", 400_000, True, 0)
    backlog = [ok(0.0, 0.01 * k) for k in range(1, 20)] + [ok(0.0, drained_ms / 1e3)]
    part = judge_override("default_queue_policy: allow_timeout_override true", p, 0, 2, EXEC_MS, EXEC_MS, 20, 200.0,
                          backlog, probes_answered_after(300))
    if judged:
        assert verdict(part)[0] == "fail"
    else:
        assert verdict(part) == ("skipped", "default_queue_policy: the backlog of 20 sized to last 200 ms was answered "
                                            "after up to 350 ms: the server fell behind the pace it was sized from "
                                            "(a busy host), so the probes' fate says nothing of their own timeout")
        assert part.problems == () and part.evidence["backlog_latency_ms"][-1] == 350.5
