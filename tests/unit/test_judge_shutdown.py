"""The shutdown check's judging (tritonsuite.judge.conformance.shutdown): which requests were sent before the
signal, in flight at it, lost or unanswered, and what that says, as answers built to cause each reason (the check
itself runs on a twin of the real server in tests/test_conformance_tensors.py)."""
from __future__ import annotations

from tritonsuite.judge.conformance.result import Target
from tritonsuite.judge.conformance.shutdown import (BOUND_S, EXIT_S, _protocols, _unnamed_callee, judge_shutdown,
                                                    split)
from tritonsuite.load.exchange import Answer

SIGNAL = 10.0
HUNG = f"no answer within {BOUND_S:g} s"


def ok(start: float, end: float) -> Answer:
    return Answer(start, end, True, version="1")


def failed(start: float, end: float, error: str) -> Answer:
    return Answer(start, end, False, error=error)


def refused_late() -> dict[str, Answer]:
    return {"http": failed(SIGNAL + 0.05, SIGNAL + 0.06, "[Errno 111] Connection refused"),
            "grpc": ok(SIGNAL + 0.05, SIGNAL + 0.4)}


def test_requests_sent_before_the_signal_and_in_flight_at_it_are_told_apart():
    answers = [ok(9.0, 9.5), ok(9.5, SIGNAL), ok(9.9, 10.3), failed(SIGNAL, 10.1, "refused")]
    before, in_flight, lost, hung = split(answers, refused_late(), SIGNAL)
    assert before == answers[:3] and in_flight == answers[1:3] and lost == [] and hung == []


def test_a_drained_shutdown_with_late_requests_refused_passes():
    answers = [ok(9.0, 9.5), ok(9.9, 10.3), failed(10.2, 10.21, "Connection refused")]
    assert judge_shutdown(answers, refused_late(), SIGNAL, exited=True) == []


def test_a_request_sent_before_the_signal_that_failed_fails():
    answers = [ok(9.0, 9.5), failed(9.9, 10.3, "Stub process 'm_0_0' is not healthy."), ok(9.95, 10.3)]
    assert judge_shutdown(answers, refused_late(), SIGNAL, exited=True) == [
        "1 of 3 requests sent before the shutdown failed (Stub process 'm_0_0' is not healthy.)"]


def test_a_request_unanswered_within_its_bound_fails_whether_sent_before_or_after():
    late = refused_late()
    late["grpc"] = failed(SIGNAL + 0.05, SIGNAL + BOUND_S, HUNG)
    answers = [ok(9.0, 9.5), failed(SIGNAL + 0.01, SIGNAL + BOUND_S, HUNG)]
    assert judge_shutdown(answers, late, SIGNAL, exited=True) == [
        f"2 request(s) unanswered within {BOUND_S:g} s during the shutdown"]


def test_a_hang_before_the_signal_is_both_lost_and_unanswered():
    answers = [ok(9.0, 9.5), failed(9.9, 9.9 + BOUND_S, HUNG)]
    assert judge_shutdown(answers, refused_late(), SIGNAL, exited=True) == [
        f"1 of 2 requests sent before the shutdown failed ({HUNG})",
        f"1 request(s) unanswered within {BOUND_S:g} s during the shutdown"]


def test_a_server_that_did_not_exit_fails():
    answers = [ok(9.0, 9.5), ok(9.9, 10.3)]
    assert judge_shutdown(answers, refused_late(), SIGNAL, exited=False) == [
        f"the server had not exited {EXIT_S:g} s after SIGTERM"]
    assert EXIT_S == 45.0


def test_a_lost_request_s_reason_keeps_the_first_160_characters_of_its_error():
    answers = [ok(9.0, 9.5), failed(9.9, 10.3, "x" * 159 + "yz")]
    assert judge_shutdown(answers, refused_late(), SIGNAL, exited=True) == [
        f"1 of 2 requests sent before the shutdown failed ({'x' * 159}y)"]


def target(tmp_path, name: str = "bls", composing: tuple[str, ...] = (), **config) -> Target:
    """A deployment read from its config.pbtxt as Triton would (no server): a python one unless ``config`` says."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    for model in (name, *composing):
        cfg = {"name": model, "backend": "python", "max_batch_size": 0,
               "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
               "output": [{"name": "z", "data_type": "TYPE_FP32", "dims": [4]}], **(config if model == name else {})}
        (tmp_path / model).mkdir()
        (tmp_path / model / "config.pbtxt").write_text(
            text_format.MessageToString(json_format.ParseDict(cfg, model_config_pb2.ModelConfig())))
    return Target(server=None, directory=tmp_path / name, composing=composing)


def test_a_python_deployment_s_lost_requests_name_the_callee_it_found_missing(tmp_path):
    t = target(tmp_path)
    lost = [failed(9.0, 9.1, "Stub process 'bls_0_0' is not healthy."),
            failed(9.1, 9.2, "Model 'bls' is not ready"),  # its own name: not a callee
            failed(9.2, 9.3, "Failed to process the request(s) for model 'bls_0_0', message: Model callee.v2 is not "
                             "ready"),
            failed(9.3, 9.4, "Request for unknown model: 'other'")]
    assert _unnamed_callee(t, lost) == "callee.v2"
    assert _unnamed_callee(t, lost[3:]) == "other"
    assert _unnamed_callee(t, [failed(9.3, 9.4, "unknown model 'other-1'")]) == "other-1"
    assert _unnamed_callee(t, lost[:2]) == ""


def test_a_deployment_whose_callees_are_named_or_that_is_not_python_names_no_callee(tmp_path):
    lost = [failed(9.0, 9.1, "Model 'callee' is not ready")]
    (tmp_path / "a").mkdir()
    assert _unnamed_callee(target(tmp_path / "a", composing=("callee",)), lost) == ""
    (tmp_path / "b").mkdir()
    assert _unnamed_callee(target(tmp_path / "b", backend="onnxruntime", platform="onnxruntime_onnx"), lost) == ""


def test_a_decoupled_deployment_is_shut_down_under_grpc_alone(tmp_path):
    (tmp_path / "a").mkdir()
    assert _protocols(target(tmp_path / "a")) == ("http", "grpc")
    (tmp_path / "b").mkdir()
    assert _protocols(target(tmp_path / "b", model_transaction_policy={"decoupled": True})) == ("grpc",)
