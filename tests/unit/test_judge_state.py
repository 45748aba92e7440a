"""The state check's judging (tritonsuite.judge.conformance.state) on answers built to cause each failure reason:
pairs of sequences that differ in their first request, a sequence repeated after the others, sequences interleaved and
alone, the state input sent by a client. The server-based tests (tests/test_conformance_sequence.py) show the same
reasons from deployments."""
from __future__ import annotations

import numpy as np
import pytest

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
                        "differently (sequence 0: step 1 output OUTPUT: 1 of 1 elements beyond atol 1e-05 + rtol 1e-05, "
                        "max |diff| 0.5): state leaked across sequences"]


def test_sequences_interleaved_answered_otherwise_than_alone_fail():
    seen = sound_state()
    seen["together"] = [steps(0, 1, 2), steps(1, 2, 9)] + seen["alone"][2:]
    problems, evidence = judge_state(**seen)
    assert problems == [f"1/{INTERLEAVED} sequences interleaved answered otherwise than alone (sequence 1: step 2 "
                        "output OUTPUT: 1 of 1 elements beyond atol 1e-05 + rtol 1e-05, max |diff| 6)"]
    assert evidence["interleaved_differ"] == 1


def test_the_state_input_answered_from_a_client_fails():
    seen = {**sound_state(), "client": ""}
    problems, evidence = judge_state(**seen)
    assert problems == ["state input INPUT_STATE "
                        "sent as a client tensor was answered: the served configuration takes it from the client"]
    assert evidence["state_sent_by_client"] == "answered"


def test_every_fault_at_once_is_named_in_order_with_the_whole_evidence():
    seen = sound_state()
    seen["pairs"][3] = steps(1.5, 11)  # pair 1: different first answers, the same second one
    seen["pairs"][5] = steps(2.5, 12)  # pair 2 too
    seen["after"] = [[{"OUTPUT": np.array([1.0], np.float32), "INDEX": np.array([4], np.int64)}] + steps(2, 3)]
    seen["before"] = [[{"OUTPUT": np.array([1.0], np.float32), "INDEX": np.array([4], np.int64)}] + steps(2, 4)]
    seen["together"] = [steps(0, 1, 2), steps(1, 2, 3), steps(2, 3, 5), steps(3, 5, 5)]
    seen["client"] = ""
    problems, evidence = judge_state(**seen)
    assert problems == [
        f"state INPUT_STATE <- OUTPUT_STATE: 2/{PAIRS} pairs of sequences answered their second request identically "
        f"after different first requests: the state the first left did not reach it",
        f"the same sequence sent again after {2 * PAIRS + 2 * INTERLEAVED} others answered differently (sequence 0: "
        f"step 2 output OUTPUT: 1 of 1 elements beyond atol 1e-05 + rtol 1e-05, max |diff| 1): state leaked across "
        f"sequences",
        f"2/{INTERLEAVED} sequences interleaved answered otherwise than alone (sequence 2: step 2 output OUTPUT: 1 of 1 "
        f"elements beyond atol 1e-05 + rtol 1e-05, max |diff| 1)",
        "state input INPUT_STATE sent as a client tensor was answered: the served configuration takes it from the "
        "client"]
    assert evidence == {
        "pairs_same_second_answer": [1, 2],
        "repeat_differs": "sequence 0: step 2 output OUTPUT: 1 of 1 elements beyond atol 1e-05 + rtol 1e-05, max |diff| 1",
        "interleaved_differ": 2, "interleaved_steps": 3 * INTERLEAVED, "state_sent_by_client": "answered",
        "repeat_answers": [[{"OUTPUT": [1.0], "INDEX": [4]}, {"OUTPUT": [2.0]}, {"OUTPUT": [4.0]}],
                           [{"OUTPUT": [1.0], "INDEX": [4]}, {"OUTPUT": [2.0]}, {"OUTPUT": [3.0]}]]}


def test_a_sound_model_reports_the_refusal_and_the_steps_compared():
    problems, evidence = judge_state(**sound_state())
    assert problems == [] and evidence["interleaved_steps"] == 3 * INTERLEAVED
    assert evidence["state_sent_by_client"] == "HTTP 400: unexpected inference input 'INPUT_STATE'"
    assert (PAIRS, INTERLEAVED) == (3, 4)


# --------------------------------------------------------------------------- what the check takes of a target
def target_of(tmp_path, config: dict, inputs=None):
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    from tritonsuite.judge.conformance.result import Target

    directory = tmp_path / config["name"]
    directory.mkdir(parents=True)
    (directory / "config.pbtxt").write_text(
        text_format.MessageToString(json_format.ParseDict(config, model_config_pb2.ModelConfig())))
    return Target(server=None, directory=directory, inputs=inputs)


CONFIG = {"name": "m", "backend": "python", "max_batch_size": 1,
          "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [1]}],
          "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [1]}]}


def test_a_first_request_unlike_the_other_is_the_first_seed_that_differs_within_fifty(tmp_path):
    from tritonsuite.judge.conformance.state import _differs

    small = target_of(tmp_path / "a", CONFIG, inputs=lambda batch, seed: {"INPUT0": np.full((batch, 1), seed // 3, np.int32)})
    other = small.request(1, 1)  # seeds 0, 1, 2 give 0
    assert _differs(small, 2, other)["INPUT0"].tolist() == [[1]]  # seed 3
    assert _differs(small, 9, other)["INPUT0"].tolist() == [[3]]  # the seed itself, when it differs
    late = target_of(tmp_path / "b", CONFIG, inputs=lambda batch, seed: {"INPUT0": np.array([[int(seed >= 50)]],
                                                                                           np.int32)})
    assert _differs(late, 1, late.request(1, 0))["INPUT0"].tolist() == [[1]]  # seed 50: the last one tried
    with pytest.raises(ValueError) as raised:
        _differs(late, 0, late.request(1, 0))  # seeds 0 to 49 all alike
    assert str(raised.value) == "m: seeded requests are all the same: the state check needs different inputs"
