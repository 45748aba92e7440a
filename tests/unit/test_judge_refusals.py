"""The refusals check's judging (tritonsuite.judge.conformance.refusals): what one malformed request's answer and
the deployment's state after it say, as observations built to cause each reason (the probes themselves run on the
real server in tests/test_conformance_checks.py)."""
from __future__ import annotations

from tritonsuite.judge.conformance.refusals import BOUND_S, harm, judge_probe

DTYPE = "http wrong dtype"


def test_a_healthy_deployment_after_a_probe_is_no_harm():
    assert harm() == ""


def test_a_died_server_is_the_first_thing_wrong():
    assert harm(alive=False, live=False, ready=False, error="x", same_answer=False) == "the server died"


def test_a_server_that_is_not_live():
    assert harm(live=False, ready=False) == "the server is not live"


def test_a_model_that_is_not_ready():
    assert harm(ready=False, error="x") == "the model is not ready"


def test_a_reference_request_that_failed_says_the_first_line_of_why():
    assert harm(error="Stub process 'm_0_0' is not healthy.\nmore") == \
        "the reference request failed (Stub process 'm_0_0' is not healthy.)"
    assert harm(error="") == "the reference request failed ()"
    assert harm(error="e" * 300) == f"the reference request failed ({'e' * 200})"


def test_a_reference_answered_differently():
    assert harm(same_answer=False) == "the reference request was answered differently than before"


def test_a_probe_refused_in_time_naming_the_problem_passes():
    assert judge_probe(DTYPE, "wrong dtype", 400, "inference input 'x' data-type is 'INT32'", 0.01, "") == []
    assert judge_probe("grpc wrong shape", "wrong shape", "INVALID_ARGUMENT", "unexpected shape for input", 0.01,
                       "") == []
    assert judge_probe("grpc stream missing input", "missing input", "stream error", "expected 2 INPUTS", 0.01,
                       "") == []


def test_a_probe_accepted_is_not_refused():
    assert judge_probe(DTYPE, "wrong dtype", 200, "", 0.01, "") == [f"{DTYPE}: not refused: accepted ()"]
    assert judge_probe("grpc wrong dtype", "wrong dtype", "OK", "", 0.01, "") == \
        ["grpc wrong dtype: not refused: accepted ()"]


def test_a_probe_with_no_answer_is_not_refused():
    message = "TimeoutError: timed out " + "x" * 200
    assert judge_probe(DTYPE, "wrong dtype", "no answer", message, BOUND_S + 1, "") == \
        [f"{DTYPE}: not refused: no answer ({message[:120]})"]


def test_an_error_that_does_not_name_the_problem():
    assert judge_probe(DTYPE, "wrong dtype", 400, "something went wrong", 0.01, "") == \
        [f"{DTYPE}: error 400 does not name the problem: 'something went wrong'"]
    # the names are matched case-insensitively
    assert judge_probe(DTYPE, "wrong dtype", 400, "unexpected DATATYPE", 0.01, "") == []


def test_a_refusal_after_the_bound_is_a_hang_one_at_the_bound_is_not():
    message = "inference input 'x' data-type is 'INT32'"
    assert judge_probe(DTYPE, "wrong dtype", 400, message, BOUND_S, "") == []
    assert judge_probe(DTYPE, "wrong dtype", 400, message, BOUND_S + 0.05, "") == \
        [f"{DTYPE}: refused after {BOUND_S + 0.05:.1f} s (bound {BOUND_S:g} s)"]
    assert judge_probe(DTYPE, "wrong dtype", 400, message, 12.5, "") == \
        [f"{DTYPE}: refused after 12.5 s (bound 10 s)"]


def test_harm_afterwards_fails_a_probe_the_configuration_allows_it_to_answer():
    what = "http other size of a variable dim"
    assert judge_probe(what, "other size of a variable dim", 200, "", 0.01, "") == []
    assert judge_probe(what, "other size of a variable dim", 400, "anything", 0.01, "") == []
    assert judge_probe(what, "other size of a variable dim", 200, "", 0.01, harm(ready=False)) == \
        [f"{what}: afterwards the model is not ready"]


def test_harm_afterwards_comes_first_and_the_refusal_is_judged_too():
    assert judge_probe(DTYPE, "wrong dtype", 200, "", 0.01, harm(same_answer=False)) == \
        [f"{DTYPE}: afterwards the reference request was answered differently than before",
         f"{DTYPE}: not refused: accepted ()"]


def test_a_probe_after_which_the_server_died_is_judged_by_that_alone():
    assert judge_probe(DTYPE, "wrong dtype", "no answer", "ConnectionRefusedError", 0.01, harm(alive=False)) == \
        [f"{DTYPE}: afterwards the server died"]
