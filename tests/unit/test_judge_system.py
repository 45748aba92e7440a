"""The MLPerf-style system checks' judging (tritonsuite.judge.conformance.system) on observations built to cause each
verdict: TEST01's answers under load and alone, TEST04's and TEST05's rounds' costs, both sides of each threshold.
The server-based tests (tests/test_conformance_system.py) show the same reasons from deployments."""
from __future__ import annotations

import numpy as np
import pytest

from tritonsuite.judge.conformance.system import CLEAR, FLOOR_MS, MIN_GAP, _verdict, judge_test01
from tritonsuite.load.exchange import Answer


# ------------------------------------------------------------------------------------------------------ TEST01
def outputs(*values: float) -> list[dict]:
    """One answer: its one response's outputs."""
    return [{"OUTPUT": np.array(values, dtype=np.float32)}]


def run(pairs, failed=(), picked=None) -> dict:
    return {"unit": "input", "failed": list(failed), "batches": {1: 2, 4: 3}, "pairs": list(pairs),
            "picked": list(range(len(pairs))) if picked is None else picked}


def test_answers_under_load_equal_to_alone_pass():
    problems, compared, differ, worst = judge_test01(run([(outputs(1.0, 2.0), outputs(1.0, 2.0))] * 3), "response")
    assert (problems, compared, differ, worst) == ([], 3, 0, 0.0)


@pytest.mark.parametrize("under_load, differs", [(1.00015, False), (1.0003, True)], ids=["within", "beyond"])
def test_an_answer_under_load_beyond_the_tolerance_of_its_answer_alone_fails(under_load, differs):
    problems, compared, differ, worst = judge_test01(
        run([(outputs(1.0), outputs(1.0)), (outputs(under_load), outputs(1.0))], picked=[0, 5]), "response")
    assert (compared, differ) == (2, int(differs))
    assert worst == pytest.approx(under_load - 1.0, rel=1e-3)
    if differs:
        assert problems == ["1 of 2 input"
                            "s answered under load (executions by batch size"
                            " {1: 2, 4: 3}) differ from the same input sent alone; first, input 5: response 0 output "
                            "OUTPUT: 1 of 1 elements beyond atol 0.0001 + rtol 0.0001, max |diff| 0.0003"]
    else:
        assert problems == []


def test_failed_requests_fail_and_an_input_failed_alone_is_not_compared():
    failed = [Answer(0.0, 0.1, False, error="HTTP 500: gone")]
    problems, compared, differ, _ = judge_test01(run([(outputs(1.0), outputs(1.0)), (outputs(2.0), None)],
                                                     failed=failed), "response")
    assert problems == ["1 requests failed (HTTP 500: gone)"] and (compared, differ) == (1, 0)


def test_nothing_compared_and_nothing_failed_fails():
    assert judge_test01(run([]), "response") == (["no answer under load could be compared"], 0, 0, 0.0)


def test_every_answer_alone_failed_fails_on_the_failures_only():
    failed = [Answer(0.0, 0.1, False, error="HTTP 503: busy")]
    problems, compared, _, _ = judge_test01(run([(outputs(1.0), None)], failed=failed), "response")
    assert problems == ["1 requests failed (HTTP 503: busy)"] and compared == 0


# --------------------------------------------------------------------------------------------- TEST04 and TEST05
NAMES = {"A": "one input repeated", "B": "inputs never sent before"}
WHY = ("", ": no response_cache is declared, so something answers repeats without computing them")


def rounds(*costs: float, wall: float = 5.0) -> list[dict]:
    return [{"requests": 12, "failed": 0, "compute_ms_per_inference": c, "wall_ms_per_inference": wall,
             "inferences_per_s": 100.0} for c in costs]


def judged04(a: list[dict], b: list[dict], errors=()):
    return _verdict("m", "test04", "no response_cache", NAMES, {"A": a, "B": b}, list(errors), failing="A", why=WHY)


def test_repeats_computed_as_fast_as_fresh_inputs_pass():
    result = judged04(rounds(1.0, 1.1, 1.0, 0.9), rounds(1.05, 0.95, 1.0, 1.1))
    assert (result.verdict, result.reason) == ("pass", "") and not result.evidence["decisive"]


def test_repeats_decisively_cheaper_than_fresh_inputs_fail_test04():
    result = judged04(rounds(1.0, 1.0, 1.0, 1.0), rounds(2.0, 2.0, 2.0, 2.0))
    assert result.verdict == "fail"
    assert result.reason == ("one input repeated cost 1 ms per inference against 2 ms for inputs never sent before "
                             "(server compute): 100% apart, beyond 2x the rounds' own spread (0%"
                             "), every round of one beyond every round of the other"
                             ": no response_cache is declared, so something answers repeats without computing them")


def test_fresh_inputs_decisively_cheaper_pass_test04_which_fails_only_cheap_repeats():
    result = judged04(rounds(2.0, 2.0, 2.0, 2.0), rounds(1.0, 1.0, 1.0, 1.0))
    assert result.verdict == "pass" and result.evidence["decisive"] and result.evidence["faster"] == "B"


def test_a_seed_stream_decisively_cheaper_fails_test05_either_way():
    names = {"A": "seed 0 inputs", "B": "seed 1000000 inputs"}
    result = _verdict("m", "test05", "-", names, {"A": rounds(3.0, 3.0, 3.0, 3.0), "B": rounds(1.0, 1.0, 1.0, 1.0)},
                      [], failing=None, why=("throughput depends on the input seed: ", ""))
    assert result.verdict == "fail"
    assert result.reason == ("throughput depends on the input seed: seed 1000000 inputs cost 1 ms per inference "
                             "against 3 ms for seed 0 inputs (server compute): 200% apart, beyond 2x the rounds' own "
                             "spread (0%), every round of one beyond every round of the other")


@pytest.mark.parametrize("slower, decisive", [(1 + MIN_GAP, False), (1.26, True)])
def test_a_gap_must_exceed_min_gap(slower, decisive):
    result = judged04(rounds(1.0, 1.0, 1.0, 1.0), rounds(*[slower] * 4))
    assert result.evidence["decisive"] is decisive and result.verdict == ("fail" if decisive else "pass")


@pytest.mark.parametrize("slower, decisive", [(1.4, False), (1.41, True)])
def test_a_gap_must_exceed_clear_times_the_rounds_own_spread(slower, decisive):
    result = judged04(rounds(0.9, 1.0, 1.0, 1.1), rounds(*[slower] * 4))  # spread 20%: CLEAR x 20% = 40%
    assert CLEAR == 2.0 and result.evidence["spread"] == 0.2
    assert result.evidence["decisive"] is decisive and result.verdict == ("fail" if decisive else "pass")


@pytest.mark.parametrize("slower, decisive", [(0.2, False), (0.21, True)])
def test_a_gap_must_exceed_the_floor_in_ms(slower, decisive):
    result = judged04(rounds(0.1, 0.1, 0.1, 0.1), rounds(*[slower] * 4))
    assert FLOOR_MS == 0.1 and result.evidence["decisive"] is decisive


def test_a_round_of_the_cheaper_condition_beyond_one_of_the_other_is_not_decisive():
    result = judged04(rounds(1.0, 1.0, 1.0, 2.5), rounds(2.0, 2.0, 2.0, 2.0))
    assert result.verdict == "pass" and not result.evidence["decisive"]


def test_rounds_without_server_compute_are_judged_on_wall_time():
    result = judged04(rounds(0.0, 0.0, 0.0, 0.0, wall=1.0), rounds(0.0, 0.0, 0.0, 0.0, wall=3.0))
    assert result.verdict == "fail" and result.evidence["measure"] == "wall time"
    assert "(wall time): 200% apart" in result.reason


def test_failed_requests_of_the_rounds_fail():
    result = judged04(rounds(1.0, 1.0, 1.0, 1.0), rounds(1.0, 1.0, 1.0, 1.0), errors=["HTTP 500: gone"] * 2)
    assert (result.verdict, result.reason) == ("fail", "2 requests failed (HTTP 500: gone)")


def test_a_failed_untimed_round_fails_with_nothing_to_compare():
    result = judged04([], [], errors=["HTTP 400: bad input"])
    assert (result.verdict, result.reason) == ("fail", "1 requests failed (HTTP 400: bad input)")
    assert result.observed == "1 requests of the first round failed"
