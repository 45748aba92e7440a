"""The sequence and state checks' judging (tritonsuite.judge.conformance.sequence) on observations built to cause each
failure reason: what the server answered to each probe, the backlog's and idle parts' figures, the state check's
answers. The server-based tests (tests/test_conformance_sequence.py) show the same reasons from deployments."""
from __future__ import annotations

import numpy as np
import pytest

from tritonsuite.judge.conformance.sequence import (INTERLEAVED, NO_CORRID, NO_START, PAIRS, judge_backlog,
                                                    judge_controls, judge_idle, judge_refusals, judge_state)

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


# ------------------------------------------------------------------------------------------------------- state
def steps(*values: float) -> list[dict]:
    return [{"OUTPUT": np.array([v], dtype=np.float32)} for v in values]


def sound_state() -> dict:
    """The state check's answers from a model that keeps state: each pair's second answers differ, the repeat and
    the interleaved sequences answer as alone, the state input sent by a client is refused."""
    pairs = [s for p in range(PAIRS) for s in (steps(p, 10 + p), steps(p + 0.5, 10.5 + p))]
    mixed = [steps(s, s + 1, s + 2) for s in range(INTERLEAVED)]
    return {"names": "INPUT_STATE <- OUTPUT_STATE", "name": "INPUT_STATE", "pairs": pairs,
            "before": [steps(1, 2, 3)], "after": [steps(1, 2, 3)], "together": mixed, "alone": mixed,
            "client": "HTTP 400: unexpected inference input 'INPUT_STATE'"}


def test_state_carried_within_a_sequence_and_never_across_is_sound():
    problems, evidence = judge_state(**sound_state())
    assert problems == []
    assert evidence["pairs_same_second_answer"] == [] and evidence["interleaved_differ"] == 0
    assert evidence["repeat_answers"][0] == evidence["repeat_answers"][1] == [{"OUTPUT": [1.0]}, {"OUTPUT": [2.0]},
                                                                             {"OUTPUT": [3.0]}]
    assert evidence["repeat_differs"] == ""


def test_second_answers_the_same_after_different_firsts_show_no_state_carried():
    seen = sound_state()
    seen["pairs"][3] = seen["pairs"][2]  # the second pair answers its second request alike
    problems, evidence = judge_state(**seen)
    assert problems == [f"state INPUT_STATE <- OUTPUT_STATE: 1/{PAIRS} "
                        "pairs of sequences answered their second request identically after different first requests: the state the first left did not reach it"]
    assert evidence["pairs_same_second_answer"] == [1]


def test_a_repeat_answered_otherwise_leaked_state_across_sequences():
    seen = sound_state()
    seen["after"] = [steps(1, 2.5, 3)]
    problems, _ = judge_state(**seen)
    assert problems == [f"the same sequence sent again after {2 * PAIRS + 2 * INTERLEAVED} others answered "
                        "differently (sequence 0: step 1 output OUTPUT: 1 elements beyond atol 1e-05 + rtol 1e-05, "
                        "max |diff| 0.5): state leaked across sequences"]


def test_sequences_interleaved_answered_otherwise_than_alone_fail():
    seen = sound_state()
    seen["together"] = [steps(0, 1, 2), steps(1, 2, 9)] + seen["alone"][2:]
    problems, evidence = judge_state(**seen)
    assert problems == [f"1/{INTERLEAVED} sequences interleaved answered otherwise than alone (sequence 1: step 2 "
                        "output OUTPUT: 1 elements beyond atol 1e-05 + rtol 1e-05, max |diff| 6)"]
    assert evidence["interleaved_differ"] == 1


def test_the_state_input_answered_from_a_client_fails():
    seen = {**sound_state(), "client": ""}
    problems, evidence = judge_state(**seen)
    assert problems == ["state input INPUT_STATE "
                        "sent as a client tensor was answered: the served configuration takes it from the client"]
    assert evidence["state_sent_by_client"] == "answered"
