"""The sequence check's judging (tritonsuite.judge.conformance.sequence) on observations built to cause each failure
reason: what the server answered to each probe, the backlog's and idle parts' figures. The server-based tests
(tests/test_conformance_sequence.py) show the same reasons from deployments."""
from __future__ import annotations

import pytest

from tritonsuite.judge.conformance.sequence import (NO_CORRID, NO_START, judge_controls, judge_idle,
                                                    judge_refusals)
from tritonsuite.judge.conformance.sequence_backlog import judge_backlog, stalled

SOUND_REFUSALS = [("no correlation id", f"HTTP 400: {NO_CORRID}", NO_CORRID),
                  ("new sequence without START", f"HTTP 400: {NO_START}", NO_START),
                  ("START", "", ""), ("middle", "", ""), ("END", "", ""),
                  ("after END without START", f"HTTP 400: {NO_START}", NO_START)]


# ---------------------------------------------------------------------------------------------------- refusals
def test_refusals_as_triton_words_them_and_a_whole_sequence_answered_are_sound():
    assert judge_refusals(SOUND_REFUSALS) == []


def test_a_probe_answered_or_refused_otherwise_names_triton_s_refusal():
    found = [("no correlation id", "", NO_CORRID), ("new sequence without START", "HTTP 500: boom", NO_START)]
    assert judge_refusals(found) == [
        f"no correlation id: answered (Triton refuses it: {NO_CORRID!r})",
        f"new sequence without START: refused with another error: HTTP 500: boom (Triton refuses it: {NO_START!r})"]


def test_a_request_of_a_whole_sequence_refused_fails():
    problems = judge_refusals([("START", "", ""), ("middle", "HTTP 500: control input START not given", "")])
    assert problems == ["the middle "
                        "request of a whole sequence failed (the control inputs the server fills reach the model):"
                        " HTTP 500: control input START not given"]


def test_a_refusal_reason_keeps_the_first_150_characters_of_the_error():
    (problem,) = judge_refusals([("END", "x" * 200, "")])
    assert problem.endswith(": " + "x" * 150)


# ---------------------------------------------------------------------------------------------------- controls
def test_a_control_input_answered_from_a_client_fails():
    sent = [("START", "CONTROL_SEQUENCE_START", ""), ("READY", "CONTROL_SEQUENCE_READY", "HTTP 400: unexpected input")]
    assert judge_controls(sent) == ["control input START (CONTROL_SEQUENCE_START"
                                    ") sent as a client tensor was answered: the served configuration takes it from the client, not from the sequence batcher"]
    assert judge_controls(sent[1:]) == []


# ----------------------------------------------------------------------------------------------------- backlog
def backlog(live: int, errors=()) -> dict:
    return {"sequences": 4, "live_at_once": live, "errors": list(errors)}


def test_exactly_the_declared_slots_live_is_sound():
    assert judge_backlog(backlog(2), 2) == []


@pytest.mark.parametrize("live, words", [
    (3, "3 of 4 sequences were live at once (declared 2 "
        "slots: max_batch_size/max_candidate_sequences x instances); no backlog: the server has more slots"),
    (1, "1 of 4 sequences were live at once (declared 2 "
        "slots: max_batch_size/max_candidate_sequences x instances); fewer slots than declared"),
], ids=["one-more", "one-fewer"])
def test_one_sequence_more_or_fewer_live_than_the_slots_fails(live, words):
    assert judge_backlog(backlog(live), 2) == [words]


def test_a_backlog_request_refused_fails_with_the_first_error():
    problems = judge_backlog(backlog(2, ["sequence 7 request 3: HTTP 500: gone", "sequence 8 END: gone"]), 2)
    assert problems == ["backlog: 2 requests refused (sequence 7 request 3: HTTP 500: gone)"]


def test_a_live_sequence_released_within_the_idle_time_is_the_server_s():
    """A live sequence refused without START was released for idleness. After a span from a request's send to the
    next one's answer over the idle time (a stalled host) the release was right and a waiting sequence took its
    slot: the part says nothing (it is sent again); within that span the server released what it had not seen
    idle, and the part fails."""
    refused = [f"sequence 7 request 31: HTTP 400: {NO_START}"]
    found = {**backlog(3, refused), "released": [{"sequence": 7, "span_s": 0.201}]}
    assert stalled(found, 200_000) == ("1 live sequence(s) released after 0.201 s from a request's send to the next "
                                       "one's answer, over max_sequence_idle_microseconds 200000 (the host stalled)")
    found["released"][0]["span_s"] = 0.2
    assert stalled(found, 200_000) == ""
    assert judge_backlog(found, 2)[-1] == f"backlog: 1 requests refused ({refused[0]})"


# -------------------------------------------------------------------------------------------------------- idle
def test_idle_sequences_released_and_sending_ones_continued_are_sound():
    assert judge_idle({"released": [f"HTTP 400: {NO_START}"] * 2, "continued": ["answered"] * 2}, 200_000) == []


def test_an_idle_sequence_still_answered_was_not_released():
    idle = {"released": [f"HTTP 400: {NO_START}", "answered"], "continued": ["answered", "answered"]}
    assert judge_idle(idle, 200_000) == [
        "max_sequence_idle_microseconds 200000: 1/2 sequences idle 0.4 s were not released (answered)"]


def test_a_sending_sequence_refused_was_cut():
    idle = {"released": [f"HTTP 400: {NO_START}"], "continued": [f"HTTP 400: {NO_START}", "answered"]}
    assert judge_idle(idle, 200_000) == [
        f"max_sequence_idle_microseconds 200000: 1/2 sequences sending every 0.05 s were cut (HTTP 400: {NO_START})"]


def test_a_reason_keeps_the_first_150_characters_of_another_error_and_of_a_backlog_error():
    (problem,) = judge_refusals([("no correlation id", "x" * 149 + "yz", NO_CORRID)])
    assert problem == f"no correlation id: refused with another error: {'x' * 149}y (Triton refuses it: {NO_CORRID!r})"
    assert judge_backlog(backlog(2, ["x" * 149 + "yz"]), 2) == [f"backlog: 1 requests refused ({'x' * 149}y)"]


def test_the_idle_reasons_give_the_idle_and_sending_times_in_seconds_and_keep_120_characters_of_the_error():
    idle = {"released": ["x" * 119 + "yz"], "continued": ["z" * 119 + "yx"]}
    assert judge_idle(idle, 4_000_000) == [
        f"max_sequence_idle_microseconds 4000000: 1/1 sequences idle 6.1 s were not released ({'x' * 119}y)",
        f"max_sequence_idle_microseconds 4000000: 1/1 sequences sending every 1 s were cut ({'z' * 119}y)"]


def test_a_cut_after_a_stall_longer_than_the_idle_timeout_is_not_judged_and_one_within_it_fails():
    """From a request's send to the next one's answer the server saw the sequence idle at most that long: a cut
    within the timeout is the server's; one after a span over it (a host that stalled) may be a right release."""
    from tritonsuite.judge.conformance.sequence import unjudged_idle

    idle = {"released": [f"HTTP 400: {NO_START}"], "continued": [f"HTTP 400: {NO_START}", "answered"],
            "continued_span_s": [0.201, 0.06]}
    assert judge_idle(idle, 200_000) == []
    assert unjudged_idle(idle, 200_000) == (
        "idle release not judged for 1 cut sequence(s): 0.201 s from a request's send to the next one's answer, over "
        "max_sequence_idle_microseconds 200000 (the host stalled)")
    idle["continued_span_s"] = [0.2, 0.06]  # within the timeout: the server cut a sequence it had not seen idle
    assert judge_idle(idle, 200_000) == [
        f"max_sequence_idle_microseconds 200000: 1/2 sequences sending every 0.05 s were cut (HTTP 400: {NO_START})"]
    assert unjudged_idle(idle, 200_000) == ""
    assert unjudged_idle({"released": [], "continued": ["answered"], "continued_span_s": [0.5]}, 200_000) == ""
