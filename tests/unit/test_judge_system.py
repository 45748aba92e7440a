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


def judged04(a: list[dict], b: list[dict], errors=(), again=None):
    return _verdict("m", "test04", "no response_cache", NAMES, {"A": a, "B": b}, list(errors), failing="A", why=WHY,
                    again=again)


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


def test_a_decisive_gap_the_second_set_does_not_repeat_passes_and_says_so():
    result = judged04(rounds(1.0, 1.0, 1.0, 1.0), rounds(2.0, 2.0, 2.0, 2.0),
                      again={"A": rounds(1.0, 1.1, 1.0, 0.9), "B": rounds(1.05, 0.95, 1.0, 1.1)})
    assert (result.verdict, result.reason) == ("pass", "")
    assert result.evidence["decisive"] and result.evidence["second_set"]["confirmed"] is False
    assert result.observed.endswith("; a second set of 8 rounds: one input repeated 1 ms, inputs never sent before "
                                    "1.02 ms, gap 2%, spread 20%, not decisive the same way (the first set's gap was "
                                    "the host's, not the model's)")


def test_a_decisive_gap_repeated_the_same_way_fails_naming_both_sets():
    result = judged04(rounds(1.0, 1.0, 1.0, 1.0), rounds(2.0, 2.0, 2.0, 2.0),
                      again={"A": rounds(1.0, 1.0, 1.0, 1.0), "B": rounds(3.0, 3.0, 3.0, 3.0)})
    assert result.verdict == "fail" and result.evidence["second_set"]["confirmed"] is True
    assert result.reason == ("one input repeated cost 1 ms per inference against 2 ms for inputs never sent before "
                             "(server compute): 100% apart, beyond 2x the rounds' own spread (0%), every round of one "
                             "beyond every round of the other, and again in a second set of rounds (200% apart): no "
                             "response_cache is declared, so something answers repeats without computing them")


def test_a_second_set_decisive_the_other_way_passes():
    names = {"A": "seed 0 inputs", "B": "seed 1000000 inputs"}
    result = _verdict("m", "test05", "-", names, {"A": rounds(3.0, 3.0, 3.0, 3.0), "B": rounds(1.0, 1.0, 1.0, 1.0)},
                      [], failing=None, why=("throughput depends on the input seed: ", ""),
                      again={"A": rounds(1.0, 1.0, 1.0, 1.0), "B": rounds(3.0, 3.0, 3.0, 3.0)})
    assert result.verdict == "pass" and result.evidence["second_set"]["faster"] == "A"


@pytest.mark.parametrize("first, failing, repeated", [
    ((rounds(1.0, 1.0, 1.0, 1.0), rounds(2.0, 2.0, 2.0, 2.0)), "A", True),   # decisive, the failing label faster
    ((rounds(2.0, 2.0, 2.0, 2.0), rounds(1.0, 1.0, 1.0, 1.0)), "A", False),  # decisive the way that passes
    ((rounds(2.0, 2.0, 2.0, 2.0), rounds(1.0, 1.0, 1.0, 1.0)), None, True),  # test05: either way fails
    ((rounds(1.0, 1.1, 1.0, 0.9), rounds(1.05, 0.95, 1.0, 1.1)), None, False),  # not decisive
])
def test_a_second_set_is_taken_only_where_the_first_would_fail(monkeypatch, first, failing, repeated):
    from tritonsuite.judge.conformance import system

    sets = iter([({"A": first[0], "B": first[1]}, []), ({"A": rounds(1.0), "B": rounds(1.0)}, ["HTTP 500: late"])])
    monkeypatch.setattr(system, "_rounds", lambda target, make: next(sets))
    found, errors, again = system._judged_rounds(None, None, failing)
    assert found == {"A": first[0], "B": first[1]}
    assert (again is not None, errors) == ((True, ["HTTP 500: late"]) if repeated else (False, []))


def test_no_second_set_after_a_first_with_failed_requests(monkeypatch):
    from tritonsuite.judge.conformance import system

    sets = iter([({"A": rounds(1.0, 1.0, 1.0, 1.0), "B": rounds(2.0, 2.0, 2.0, 2.0)}, ["HTTP 500: gone"])])
    monkeypatch.setattr(system, "_rounds", lambda target, make: next(sets))
    assert system._judged_rounds(None, None, "A")[1:] == (["HTTP 500: gone"], None)


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


# ------------------------------------------------------------------ TEST01's comparison: each kind of difference
def test_a_count_of_answers_that_differs_is_infinitely_far():
    from tritonsuite.judge.conformance.system import _difference

    worst, why = _difference(outputs(1.0) * 2, outputs(1.0) * 3, "step")
    assert (worst, why) == (np.inf, "2 steps vs 3 alone")
    assert _difference([], [], "step") == (0.0, "")


def test_an_output_missing_or_of_another_shape_is_infinitely_far():
    from tritonsuite.judge.conformance.system import _difference

    assert _difference([{"OTHER": np.zeros(1)}], outputs(1.0)) == (np.inf, "response 0: no output OUTPUT")
    assert _difference(outputs(1.0, 2.0), outputs(1.0)) == (np.inf, "response 0 output OUTPUT: shape (2,) vs (1,)")
    # outputs the answer alone does not have are not compared
    assert _difference([{"OUTPUT": np.array([1.0], np.float32), "EXTRA": np.zeros(3)}], outputs(1.0)) == (0.0, "")


def test_strings_are_compared_exactly_and_their_differences_counted():
    from tritonsuite.judge.conformance.system import _difference

    alone = [{"TEXT": np.array([b"a", b"b", b"c"], dtype=object)}]
    assert _difference([{"TEXT": np.array([b"a", b"b", b"c"], dtype=object)}], alone) == (0.0, "")
    assert _difference([{"TEXT": np.array([b"a", b"x", b"y"], dtype=object)}], alone, "step") == (
        np.inf, "step 0 output TEXT: 2 elements differ")


def test_integers_are_compared_exactly_with_the_largest_difference_told():
    from tritonsuite.judge.conformance.system import _difference

    alone = [{"INDEX": np.array([1, 2, 3], np.int64)}]
    assert _difference([{"INDEX": np.array([1, 2, 3], np.int64)}], alone) == (0.0, "")
    worst, why = _difference([{"INDEX": np.array([1, 5, 3], np.int32)}], alone)
    assert (worst, why) == (3.0, "response 0 output INDEX: 1 of 3 elements differ")
    # an earlier output's difference within tolerance is the worst one told when a later one differs exactly
    first = [{"A": np.array([1.00005], np.float32), "INDEX": np.array([7], np.uint8)}]
    assert _difference(first, [{"A": np.array([1.0], np.float32), "INDEX": np.array([9], np.uint8)}]) == (
        2.0, "response 0 output INDEX: 1 of 1 elements differ")
    assert _difference([{"I": np.zeros(0, np.int64)}], [{"I": np.zeros(0, np.int64)}]) == (0.0, "")


def test_floats_are_compared_within_the_tolerance_of_their_type():
    from tritonsuite.judge.conformance.system import HALF_TOLERANCE, TOLERANCE, _difference, _tolerance

    assert (TOLERANCE, HALF_TOLERANCE) == ((1e-4, 1e-4), (2e-3, 1e-2))
    assert _tolerance(np.float16) == HALF_TOLERANCE and _tolerance(np.int16) == HALF_TOLERANCE
    assert _tolerance(np.float32) == TOLERANCE and _tolerance(np.float64) == TOLERANCE
    half = [{"OUTPUT": np.array([1.0], np.float16)}]
    worst, why = _difference([{"OUTPUT": np.array([1.01], np.float16)}], half)
    assert why == "" and worst == pytest.approx(0.01, abs=1e-3)  # within fp16's 2e-3 + 1e-2
    worst, why = _difference([{"OUTPUT": np.array([1.02], np.float16)}], half)
    assert why == "response 0 output OUTPUT: 1 of 1 elements beyond atol 0.002 + rtol 0.01, max |diff| 0.0195"
    # an integer answer against a floating one alone: compared within the floating one's tolerance
    assert _difference([{"OUTPUT": np.array([1], np.int32)}], half)[1] == ""
    assert _difference([{"OUTPUT": np.array([1.0], np.float16)}], [{"OUTPUT": np.array([1], np.int32)}]) == (0.0, "")
    worst, why = _difference([{"OUTPUT": np.array([1.0005], np.float32)}], [{"OUTPUT": np.array([1], np.int32)}])
    assert why == "response 0 output OUTPUT: 1 of 1 elements beyond atol 0.0001 + rtol 0.0001, max |diff| 0.0005"


def test_nan_and_inf_equal_to_themselves_pass_and_a_nan_against_a_number_is_infinitely_far():
    from tritonsuite.judge.conformance.system import _difference

    same = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert _difference([{"OUTPUT": same.copy()}], [{"OUTPUT": same}]) == (0.0, "")
    worst, why = _difference([{"OUTPUT": np.array([np.nan, 1.0], np.float32)}],
                             [{"OUTPUT": np.array([1.0, 1.0], np.float32)}])
    assert worst == np.inf
    assert why == "response 0 output OUTPUT: 1 of 2 elements beyond atol 0.0001 + rtol 0.0001, max |diff| nan"
    worst, why = _difference([{"OUTPUT": np.array([np.inf], np.float32)}], [{"OUTPUT": np.array([-np.inf], np.float32)}])
    assert worst >= np.finfo(np.float64).max
    assert why == "response 0 output OUTPUT: 1 of 1 elements beyond atol 0.0001 + rtol 0.0001, max |diff| inf"


def test_a_padded_axis_is_cut_only_on_an_answer_of_as_many_dimensions():
    from tritonsuite.judge.conformance.system import _difference

    alone = [{"MEL": np.ones((1, 3), np.float32)}]
    longer = [{"MEL": np.concatenate([np.ones((1, 3)), np.zeros((1, 2))], axis=1).astype(np.float32)}]
    assert _difference(longer, alone, padded={"MEL": 1}) == (0.0, "")
    assert _difference(longer, alone, padded={"MEL": 2})[1] == "response 0 output MEL: shape (1, 5) vs (1, 3)"
    assert _difference(longer, alone, padded={"OTHER": 1})[1] == "response 0 output MEL: shape (1, 5) vs (1, 3)"
    flat = [{"MEL": np.ones(5, np.float32)}]  # fewer dimensions than alone: not cut, a shape that differs
    assert _difference(flat, alone, padded={"MEL": 0})[1] == "response 0 output MEL: shape (5,) vs (1, 3)"
    assert _difference(longer, alone, padded={"MEL": 0})[1] == "response 0 output MEL: shape (1, 5) vs (1, 3)"


def test_a_sequence_run_names_its_steps_and_sequences_and_every_problem_in_order():
    sequences = {"unit": "sequence", "failed": [Answer(0.0, 0.1, False, error="HTTP 400: a"),
                                                Answer(0.0, 0.1, False, error="HTTP 400: b")],
                 "batches": {2: 4}, "picked": [0, 1, 2, 3],
                 "pairs": [(outputs(1.0) * 2, outputs(1.0) * 2), (outputs(1.0) * 2, None),
                           (outputs(1.0, 2.0) * 2, outputs(1.0, 2.5) * 2), (outputs(3.0) * 2, outputs(3.0) * 3)]}
    problems, compared, differ, worst = judge_test01(sequences, "step")
    assert (compared, differ, worst) == (3, 2, np.inf)
    assert problems == ["2 requests failed (HTTP 400: a)",
                        "2 of 3 sequences answered under load (executions by batch size {2: 4}) differ from the same "
                        "sequence sent alone; first, sequence 2: step 0 output OUTPUT: 1 of 2 elements beyond atol "
                        "0.0001 + rtol 0.0001, max |diff| 0.5"]
    padded = judge_test01(run([(outputs(1.0, 0.0), outputs(1.0))]), "response", {"OUTPUT": 0})
    assert padded == ([], 1, 0, 0.0)


# --------------------------------------------------------------------------- TEST04 and TEST05: the whole verdict
def test_rounds_within_their_spread_report_every_figure():
    result = judged04(rounds(1.0, 1.1, 1.0, 0.9), rounds(1.05, 0.95, 1.0, 1.1), errors=["HTTP 503: busy"])
    assert (result.deployment, result.check, result.declared) == ("m", "test04", "no response_cache")
    assert (result.verdict, result.reason) == ("fail", "1 requests failed (HTTP 503: busy)")
    assert result.observed == ("8 alternated rounds of 12 requests at concurrency 2, server compute per inference: "
                               "one input repeated 1 ms (rounds [1.0, 1.1, 1.0, 0.9]), inputs never sent before "
                               "1.02 ms (rounds [1.05, 0.95, 1.0, 1.1]); gap 2%, rounds' spread 20%")
    assert result.evidence == {
        "measure": "server compute", "costs_ms": {"A": [1.0, 1.1, 1.0, 0.9], "B": [1.05, 0.95, 1.0, 1.1]},
        "median_ms": {"A": 1.0, "B": 1.025}, "spread": 0.2, "gap": 0.025, "faster": "A", "decisive": False,
        "rounds": {"one input repeated": rounds(1.0, 1.1, 1.0, 0.9),
                   "inputs never sent before": rounds(1.05, 0.95, 1.0, 1.1)},
        "order": "ABBAABBA", "requests_per_round": 12, "concurrency": 2, "failed": 1}


def test_the_figures_are_rounded_and_equal_medians_name_a_faster_one():
    result = judged04(rounds(1.00004, 1.00004, 2.00004, 2.00004), rounds(1.5, 1.5, 1.5, 1.50004))
    assert result.evidence["costs_ms"] == {"A": [1.0, 1.0, 2.0, 2.0], "B": [1.5, 1.5, 1.5, 1.5]}
    assert result.evidence["median_ms"] == {"A": 1.5, "B": 1.5} and result.evidence["faster"] == "B"  # 1.50004
    assert (result.evidence["spread"], result.evidence["gap"]) == (0.667, 0.0)
    tied = judged04(rounds(1.0, 1.0, 2.0, 2.0), rounds(1.5, 1.5, 1.5, 1.5))
    assert tied.evidence["faster"] == "A" and tied.verdict == "pass"


def test_a_cost_of_zero_has_no_spread_and_the_gap_above_it_is_measured_from_a_nanosecond():
    from tritonsuite.judge.conformance.system import _compare

    judged = _compare({"A": rounds(0.0, 0.0, 0.0, 0.0, wall=0.0), "B": rounds(0.0, 0.0, 0.0, 0.0, wall=2.0)})
    assert judged == {"measure": "wall time", "costs_ms": {"A": [0.0] * 4, "B": [2.0] * 4},
                      "median_ms": {"A": 0.0, "B": 2.0}, "spread": 0.0, "gap": 1999999999.0, "faster": "A",
                      "decisive": True}


def test_one_round_the_server_counted_no_compute_for_judges_every_round_on_wall_time():
    result = judged04(rounds(1.0, 1.0, 1.0, 0.0, wall=1.0), rounds(1.0, 1.0, 1.0, 1.0, wall=1.0))
    assert result.evidence["measure"] == "wall time" and result.evidence["costs_ms"]["A"] == [1.0] * 4
    assert "wall time per inference" in result.observed and result.verdict == "pass"


def test_a_cheaper_rounds_worst_equal_to_the_others_best_is_not_decisive():
    # every other condition holds: a gap of 9x against a spread of 0.85 and 9 ms apart
    result = judged04(rounds(1.0, 1.0, 1.0, 1.5), rounds(1.5, 10.0, 10.0, 10.0))
    assert (result.evidence["gap"], result.evidence["spread"]) == (9.0, 0.85)
    assert not result.evidence["decisive"] and result.verdict == "pass"
    beyond = judged04(rounds(1.0, 1.0, 1.0, 1.5), rounds(1.51, 10.0, 10.0, 10.0))
    assert beyond.evidence["decisive"] and beyond.verdict == "fail"


def test_decisive_rounds_with_failed_requests_name_both_and_test05_the_faster_stream():
    names = {"A": "seed 0 inputs", "B": "seed 1000000 inputs"}
    result = _verdict("m", "test05", "-", names, {"A": rounds(1.0, 1.0, 1.0, 1.0), "B": rounds(3.0, 3.0, 3.0, 3.0)},
                      ["HTTP 500: gone"], failing=None, why=("throughput depends on the input seed: ", ""))
    assert result.reason == ("1 requests failed (HTTP 500: gone); throughput depends on the input seed: seed 0 "
                             "inputs cost 1 ms per inference against 3 ms for seed 1000000 inputs (server compute): "
                             "200% apart, beyond 2x the rounds' own spread (0%), every round of one beyond every round "
                             "of the other")
    assert result.evidence["rounds"] == {"seed 0 inputs": rounds(1.0, 1.0, 1.0, 1.0),
                                         "seed 1000000 inputs": rounds(3.0, 3.0, 3.0, 3.0)}


def test_a_failed_untimed_round_reports_its_failures_alone():
    result = judged04([], [], errors=["HTTP 400: bad input", "HTTP 400: again"])
    assert (result.deployment, result.check, result.verdict) == ("m", "test04", "fail")
    assert (result.declared, result.observed) == ("no response_cache", "2 requests of the first round failed")
    assert (result.reason, result.evidence) == ("2 requests failed (HTTP 400: bad input)", {"failed": 2})


# ----------------------------------------------------------------------------- what the checks take of a target
def target_of(tmp_path, config: dict, batch_size: int = 1):
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    from tritonsuite.judge.conformance.result import Target

    directory = tmp_path / config["name"]
    directory.mkdir(parents=True)
    (directory / "config.pbtxt").write_text(
        text_format.MessageToString(json_format.ParseDict(config, model_config_pb2.ModelConfig())))
    return Target(server=None, directory=directory, batch_size=batch_size)


def model(**override) -> dict:
    return {"name": "m", "backend": "python", "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]} | override


@pytest.mark.parametrize("config, batch_size, concurrency", [
    (model(), 1, 2),  # no batcher: two connections
    (model(dynamic_batching={}), 1, 16),  # twice the largest batch, in requests of one
    (model(dynamic_batching={}), 3, 6),  # ... of three: ceil(16 / 3)
    (model(dynamic_batching={}), 0, 16),  # a batch size of 0 counts as 1
    (model(dynamic_batching={"preferred_batch_size": [2, 4]}), 1, 8),  # the largest preferred batch
    (model(max_batch_size=1, dynamic_batching={}), 1, 2),
    (model(max_batch_size=16, dynamic_batching={}), 1, 32),
    (model(max_batch_size=64, dynamic_batching={}), 1, 32),  # at most MAX_CONCURRENCY
], ids=["no-batcher", "batch-1", "batch-3", "batch-0", "preferred", "largest-1", "at-the-cap", "capped"])
def test_test01_loads_at_twice_the_largest_batch_in_requests(tmp_path, config, batch_size, concurrency):
    from tritonsuite.judge.conformance.system import MAX_CONCURRENCY, _concurrency, _judged

    target = target_of(tmp_path, config, batch_size)
    assert MAX_CONCURRENCY == 32 and _concurrency(target) == concurrency and _judged(target) == ["m"]


def test_the_models_that_cache_are_named(tmp_path):
    from tritonsuite.judge.conformance.system import _cached

    assert _cached(target_of(tmp_path / "a", model(dynamic_batching={}, response_cache={"enable": True}))) == "m"
    assert _cached(target_of(tmp_path / "b", model(response_cache={"enable": False}))) == ""
    assert _cached(target_of(tmp_path / "c", model())) == ""


def test_a_string_answer_against_a_numeric_one_alone_is_compared_exactly():
    from tritonsuite.judge.conformance.system import _difference

    assert _difference([{"OUTPUT": np.array([b"1"], dtype=object)}], outputs(1.0)) == (
        np.inf, "response 0 output OUTPUT: 1 elements differ")
    assert _difference(outputs(1.0), [{"OUTPUT": np.array([b"1"], dtype=object)}]) == (
        np.inf, "response 0 output OUTPUT: 1 elements differ")


def test_outputs_after_an_equal_string_or_integer_one_are_still_compared():
    from tritonsuite.judge.conformance.system import _difference

    text, index = np.array([b"a"], dtype=object), np.array([3], np.int64)
    alone = [{"TEXT": text, "INDEX": index, "OUTPUT": np.array([1.0], np.float32)}]
    under_load = [{"TEXT": text.copy(), "INDEX": index.copy(), "OUTPUT": np.array([1.5], np.float32)}]
    assert _difference(under_load, alone) == (0.5, "response 0 output OUTPUT: 1 of 1 elements beyond atol 0.0001 + "
                                                    "rtol 0.0001, max |diff| 0.5")
    assert _difference([{"F": np.zeros(0, np.float32)}], [{"F": np.zeros(0, np.float32)}]) == (0.0, "")


def test_a_mixed_pair_is_compared_within_the_floating_ones_tolerance():
    from tritonsuite.judge.conformance.system import _difference

    # an integer answer against a float32 one alone: float32's tolerance, not compared exactly
    assert _difference([{"OUTPUT": np.array([1], np.int32)}], [{"OUTPUT": np.array([1.00005], np.float32)}])[1] == ""
    # an fp16 answer against a float32 one alone: float32's tolerance (the one alone decides)
    assert _difference([{"OUTPUT": np.array([1.0], np.float16)}], [{"OUTPUT": np.array([1.001], np.float32)}])[1] == (
        "response 0 output OUTPUT: 1 of 1 elements beyond atol 0.0001 + rtol 0.0001, max |diff| 0.001")
    # an fp16 answer against an integer one alone: fp16's tolerance (the floating one decides)
    assert _difference([{"OUTPUT": np.array([1.0078125], np.float16)}], [{"OUTPUT": np.array([1], np.int32)}]) == (
        0.0078125, "")


def test_a_gap_of_exactly_clear_times_the_spread_is_not_decisive_and_the_gap_is_rounded_to_three_places():
    result = judged04(rounds(0.875, 1.0, 1.0, 1.125), rounds(1.5, 1.5, 1.5, 1.5))  # spread 25%, gap 50%
    assert (result.evidence["spread"], result.evidence["gap"]) == (0.25, 0.5)
    assert not result.evidence["decisive"] and result.verdict == "pass"
    assert judged04(rounds(1.0, 1.0, 1.0, 1.0), rounds(*[1.01234] * 4)).evidence["gap"] == 0.012


def test_an_ensembles_steps_that_cache_are_named_each(tmp_path):
    from tritonsuite.judge.conformance.system import _cached, _judged

    for name, cache in (("a", True), ("b", False), ("c", True)):
        target_of(tmp_path, model(name=name, response_cache={"enable": cache}))
    steps = [{"model_name": n, "model_version": -1, "input_map": {"INPUT0": "INPUT0"},
              "output_map": {"OUTPUT0": f"{n}_out"}} for n in "abc"]
    ensemble = target_of(tmp_path, model(name="e", platform="ensemble", backend="", ensemble_scheduling={"step": steps}))
    assert _cached(ensemble) == "a, c" and _judged(ensemble) == ["a", "b", "c"]
