"""The reload check's judging (tritonsuite.judge.conformance.reload): what the answers during a switch, the reload's
refusal and the restore afterwards say, as observations built to cause each reason (the check itself runs on the
real server in tests/test_conformance_checks.py and tests/test_conformance_kinds.py)."""
from __future__ import annotations

from tritonsuite.judge.conformance.reload import (_describe, _failed, _latency, _refusal, judge_changed_config,
                                                  judge_new_version, restoring)
from tritonsuite.load.exchange import Answer

END = 10.0  # when the reload returned
START_REFUSED = "inference request for sequence 7 to model 'm' must specify the START flag on the first request"


def ok(start: float, version: str, sequence=None, end: float | None = None) -> Answer:
    return Answer(start, start + 0.1 if end is None else end, True, version=version, sequence=sequence)


def failed(start: float, error: str, sequence=None) -> Answer:
    return Answer(start, start + 0.1, False, error=error, sequence=sequence)


def switch() -> list[Answer]:
    """Version 1 answers until the reload, version 2 after (its first answer back at 9.6)."""
    return [ok(9.0, "1"), ok(9.3, "1"), ok(9.5, "2", end=9.6), ok(9.6, "1"), ok(9.7, "2"), ok(10.2, "2")]


def test_a_clean_switch_passes():
    assert judge_new_version(switch(), "1", "2", END, "") == []


def test_a_refused_version_load_fails_and_no_new_answer_is_then_expected():
    answers = [ok(9.0, "1"), ok(9.5, "1"), ok(10.2, "1")]
    assert judge_new_version(answers, "1", "2", END, "failed to load 'm' version 2: initialize raised") == [
        "loading version 2 under load failed: failed to load 'm' version 2: initialize raised"]


def test_requests_that_failed_while_a_version_was_added_fail():
    answers = switch() + [failed(9.8, "Request for unknown model: 'm' has no available versions")]
    assert judge_new_version(answers, "1", "2", END, "") == [
        "1 of 7 requests failed while version 2 was added (Request for unknown model: 'm' has no available "
        "versions)"]


def test_a_sequence_cut_is_forgiven_only_if_begun_before_the_reload_returned():
    began_before = [ok(9.2, "1", (7, 0)), failed(10.1, START_REFUSED, (7, 1))]
    assert judge_new_version(switch() + began_before, "1", "2", END, "") == []
    began_at_the_end = [ok(END, "2", (7, 0)), failed(10.1, START_REFUSED, (7, 1))]
    assert judge_new_version(switch() + began_at_the_end, "1", "2", END, "") == [
        f"1 of 8 requests failed while version 2 was added ({START_REFUSED[:120]})"]
    other_error = [ok(9.2, "1", (7, 0)), failed(10.1, "Stub process is not healthy", (7, 1))]
    assert judge_new_version(switch() + other_error, "1", "2", END, "") == [
        "1 of 8 requests failed while version 2 was added (Stub process is not healthy)"]


def test_a_reload_that_returned_without_an_answer_of_the_new_version_fails():
    answers = [ok(9.0, "1"), ok(9.5, "1"), ok(10.2, "1")]
    assert judge_new_version(answers, "1", "2", END, "") == ["no answer came from the new version 2 after the reload"]


def test_an_old_answer_sent_after_the_first_new_answer_is_a_mixed_switch():
    first_new_back = 9.6  # the answer to the request sent at 9.5
    at_it = switch() + [ok(first_new_back, "1")]  # sent as the first new answer came back: not after it
    assert judge_new_version(at_it, "1", "2", END, "") == []
    after_it = switch() + [ok(first_new_back + 0.01, "1"), ok(9.9, "1")]
    assert judge_new_version(after_it, "1", "2", END, "") == [
        "2 request(s) sent after the first answer of version 2 were answered by version 1 (a mixed switch)"]


def test_a_changed_configuration_served_without_failures_passes():
    assert judge_changed_config([ok(9.0, "1"), ok(10.2, "1")], True, END, "") == []


def test_a_refused_changed_configuration_fails_and_is_then_not_expected_served():
    assert judge_changed_config([ok(9.0, "1"), ok(10.2, "1")], False, END, "load failed: bad config") == [
        "loading the changed configuration under load failed: load failed: bad config"]


def test_requests_that_failed_while_a_changed_configuration_was_loaded_fail():
    answers = [ok(9.0, "1"), failed(9.9, "Request for unknown model"), ok(10.2, "1")]
    assert judge_changed_config(answers, True, END, "") == [
        "1 of 3 requests failed while a changed configuration was loaded (Request for unknown model)"]


def test_a_changed_configuration_the_server_does_not_serve_fails():
    assert judge_changed_config([ok(9.0, "1"), ok(10.2, "1")], False, END, "") == [
        "the server did not serve the changed configuration after the reload"]


def test_a_restore_that_failed_fails():
    assert restoring("") == []
    assert restoring("failed to load 'm': version 1 is at UNAVAILABLE state") == [
        "restoring the deployment afterwards failed: failed to load 'm': version 1 is at UNAVAILABLE state"]


def test_the_sequences_a_switch_cut_are_named_and_their_refusals_not_counted_as_failed():
    refused_elsewhere = failed(9.9, "Request for unknown model")
    answers = [ok(9.2, "1", (7, 0)), failed(10.1, START_REFUSED, (7, 1)), ok(9.3, "1", (9, 0)),
               failed(10.2, START_REFUSED, (9, 2)), refused_elsewhere]
    assert _failed(answers, END) == ([refused_elsewhere], [7, 9])


def test_a_start_refusal_of_a_sequence_never_begun_is_a_failure():
    never_begun = failed(10.1, START_REFUSED, (7, 1))  # its first request is not among the answers
    assert _failed([never_begun], END) == ([never_begun], [])
    assert judge_new_version(switch() + [never_begun], "1", "2", END, "") == [
        f"1 of 7 requests failed while version 2 was added ({START_REFUSED})"]


def test_a_sequence_cut_by_a_changed_configuration_is_forgiven():
    answers = [ok(9.0, "1"), ok(9.2, "1", (7, 0)), failed(10.1, START_REFUSED, (7, 1)), ok(10.2, "1")]
    assert judge_changed_config(answers, True, END, "") == []


def test_a_failure_reason_keeps_the_first_120_characters_of_the_error():
    error = "x" * 119 + "yz"
    assert judge_new_version(switch() + [failed(9.8, error)], "1", "2", END, "") == [
        f"1 of 7 requests failed while version 2 was added ({'x' * 119}y)"]
    assert judge_changed_config([ok(9.0, "1"), failed(9.9, error)], True, END, "") == [
        f"1 of 2 requests failed while a changed configuration was loaded ({'x' * 119}y)"]


def timed() -> list[Answer]:
    """Answers around a reload from 2.0 to 3.0 s: two ended before it, three overlap it (one ended as it began, one
    sent as it returned), one failed, one sent after."""
    return [Answer(1.0, 1.1, True), Answer(1.2, 1.45, True), Answer(1.5, 2.0, True), Answer(1.6, 2.112345, True),
            Answer(2.0, 2.05, False, error="e"), Answer(3.0, 3.12345, True), Answer(3.01, 3.2, True)]


def test_the_latency_before_and_during_a_reload_counts_answers_at_its_edges_as_during():
    assert _latency(timed(), 2.0, 3.0) == {
        "before": {"samples": 2, "p99_ms": 248.5, "p99_indicative": True, "max_ms": 250.0},
        "during": {"samples": 3, "p99_ms": 512.1, "p99_indicative": True, "max_ms": 512.34}}
    assert _latency([], 2.0, 3.0)["during"] == {"samples": 0, "p99_ms": None, "p99_indicative": True,
                                                "max_ms": None}


def test_a_switch_is_described_by_its_requests_failures_cut_sequences_and_latency():
    answers = timed()
    latency = _latency(answers, 2.0, 3.0)
    assert _describe("version 1 -> 2", answers, latency, [answers[4]], []) == (
        "version 1 -> 2: 7 requests, 1 failed; latency before p99 248.5 ms / max 250.0 ms (2 samples), during p99 "
        "512.1 ms / max 512.34 ms (3 samples)")
    assert _describe("version 1 -> 2", answers, latency, [], [7]) == (
        "version 1 -> 2: 7 requests, 0 failed, 1 refused in the 1 sequence(s) live at the switch (cut by it); "
        "latency before p99 248.5 ms / max 250.0 ms (2 samples), during p99 512.1 ms / max 512.34 ms (3 samples)")
    cut = answers + [failed(2.5, START_REFUSED, (7, 1)), failed(2.6, START_REFUSED, (7, 2))]
    assert _describe("version 1 -> 2", cut, latency, [answers[4]], [7]).startswith(
        "version 1 -> 2: 9 requests, 1 failed, 2 refused in the 1 sequence(s) live at the switch (cut by it); ")


def test_a_refused_reload_says_the_first_line_of_what_it_raised_to_200_characters():
    assert _refusal(None) == ""
    assert _refusal(RuntimeError("failed to load 'm' version 2\ninitialize raised")) == "failed to load 'm' version 2"
    assert _refusal(RuntimeError("x" * 199 + "yz")) == "x" * 199 + "y"
