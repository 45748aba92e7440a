"""The state check's judging (tritonsuite.judge.conformance.state) on answers built to cause each failure reason:
pairs of sequences that differ in their first request, a sequence repeated after the others, sequences interleaved and
alone, the state input sent by a client. The server-based tests (tests/test_conformance_sequence.py) show the same
reasons from deployments."""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance.state import INTERLEAVED, PAIRS, judge_state


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
