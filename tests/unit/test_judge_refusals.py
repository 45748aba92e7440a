"""The refusals check's judging (tritonsuite.judge.conformance.refusals): what one malformed request's answer and
the deployment's state after it say, as observations built to cause each reason (the probes themselves run on the
real server in tests/test_conformance_checks.py), and the malformed requests the probes are, built from a deployment's
config.pbtxt alone, tensor by tensor."""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance.refusals import (BOUND_S, Tensor, _grpc_request, _refused_connection, _wire, harm,
                                                    judge_probe, probes)
from tritonsuite.judge.conformance.result import Target

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


def test_an_error_that_does_not_name_the_problem_is_quoted_to_120_characters():
    assert judge_probe(DTYPE, "wrong dtype", 400, "x" * 119 + "yz", 0.1, "") == [
        f"{DTYPE}: error 400 does not name the problem: {'x' * 119 + 'y'!r}"]


# ------------------------------------------------------------------------------------------------------ probes
def target(tmp_path, declared: list[dict], max_batch_size: int = 8, **fields) -> Target:
    """A deployment declaring the inputs ``declared`` (outputs z, w), read from its config.pbtxt as Triton would
    (no server)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    config = {"name": "m", "platform": "onnxruntime_onnx", "max_batch_size": max_batch_size, "input": declared,
              "output": [{"name": "z", "data_type": "TYPE_FP32", "dims": [3]},
                         {"name": "w", "data_type": "TYPE_INT64", "dims": [1]}]}
    directory = tmp_path / "m"
    directory.mkdir()
    (directory / "config.pbtxt").write_text(
        text_format.MessageToString(json_format.ParseDict(config, model_config_pb2.ModelConfig())))
    return Target(server=None, directory=directory, **fields)


def test_bytes_go_on_the_wire_each_after_its_little_endian_length_and_numbers_as_their_bytes():
    assert _wire(np.array([[b"ab"], [b"cde"]], dtype=object)) == b"\x02\x00\x00\x00ab\x03\x00\x00\x00cde"
    numbers = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]  # not contiguous
    assert _wire(numbers) == np.array([[0, 2], [4, 6], [8, 10]], dtype=np.int32).tobytes()


def test_the_probes_of_a_batching_deployment_each_change_one_thing_of_the_good_request(tmp_path):
    t = target(tmp_path, [{"name": "x", "data_type": "TYPE_FP32", "dims": [1, 3]},
                          {"name": "y", "data_type": "TYPE_INT64", "dims": [-1]},
                          {"name": "s", "data_type": "TYPE_STRING", "dims": [2]}])
    request = t.request(1)
    xb, yb = request["x"].tobytes(), request["y"].tobytes()
    sb = b"".join(len(v).to_bytes(4, "little") + v for v in request["s"].ravel())  # Triton's BYTES wire form
    x, y, s = Tensor("x", "FP32", [1, 1, 3], xb), Tensor("y", "INT64", [1, 1], yb), Tensor("s", "BYTES", [1, 2], sb)
    outputs = ["z", "w"]
    assert probes(t) == [
        ("batch above max_batch_size", [Tensor("x", "FP32", [9, 1, 3], xb * 9),
                                        Tensor("y", "INT64", [9, 1], yb * 9), Tensor("s", "BYTES", [9, 2], sb * 9)],
         outputs),
        ("wrong dtype", [Tensor("x", "INT32", [1, 1, 3], xb), y, s], outputs),
        ("wrong shape", [Tensor("x", "FP32", [1, 2, 3], xb * 2), y, s], outputs),  # its first fixed dim, one more
        ("other size of a variable dim", [x, Tensor("y", "INT64", [1, 2], yb * 2), s], outputs),
        ("missing input", [y, s], outputs),
        ("unknown output", [x, y, s], ["z", "conformance_no_such_output"]),
        ("truncated body", [Tensor("x", "FP32", [1, 1, 3], xb[:6]), y, s], outputs),
        ("oversized body", [Tensor("x", "FP32", [1, 1, 3], xb * 2), y, s], outputs)]


def test_the_probes_of_a_batchless_deployment_send_no_batch_and_change_its_first_fixed_dim(tmp_path):
    t = target(tmp_path, [{"name": "x", "data_type": "TYPE_INT8", "dims": [-1, 3, 2]}], max_batch_size=0)
    xb = t.request(1)["x"].tobytes()
    assert len(xb) == 6
    x, outputs = Tensor("x", "INT8", [1, 3, 2], xb), ["z", "w"]
    assert probes(t) == [
        ("wrong dtype", [Tensor("x", "UINT8", [1, 3, 2], xb)], outputs),
        ("wrong shape", [Tensor("x", "INT8", [1, 4, 2], xb + xb[:2])], outputs),
        ("other size of a variable dim", [Tensor("x", "INT8", [2, 3, 2], xb * 2)], outputs),
        ("missing input", [], outputs),
        ("unknown output", [x], ["z", "conformance_no_such_output"]),
        ("truncated body", [Tensor("x", "INT8", [1, 3, 2], xb[:3])], outputs),
        ("oversized body", [Tensor("x", "INT8", [1, 3, 2], xb * 2)], outputs)]


def test_an_input_of_variable_dims_only_gets_a_dim_more_for_its_wrong_shape(tmp_path):
    t = target(tmp_path, [{"name": "x", "data_type": "TYPE_FP16", "dims": [-1]}])
    xb = t.request(1)["x"].tobytes()
    sent = {problem: tensors for problem, tensors, _ in probes(t)}
    assert sent["wrong dtype"] == [Tensor("x", "INT16", [1, 1], xb)]
    assert sent["wrong shape"] == [Tensor("x", "FP16", [1, 1, 2], xb * 2)]
    assert sent["other size of a variable dim"] == [Tensor("x", "FP16", [1, 2], xb * 2)]
    assert sent["truncated body"] == [Tensor("x", "FP16", [1, 1], xb[:1])]


def test_a_one_byte_input_is_truncated_to_nothing(tmp_path):
    t = target(tmp_path, [{"name": "x", "data_type": "TYPE_BOOL", "dims": [1]}], max_batch_size=0)
    xb = t.request(1)["x"].tobytes()
    sent = {problem: tensors for problem, tensors, _ in probes(t)}
    assert list(sent) == ["wrong dtype", "wrong shape", "missing input", "unknown output", "truncated body",
                          "oversized body"]  # no variable dim: no probe of one
    assert sent["wrong dtype"] == [Tensor("x", "INT8", [1], xb)]
    assert sent["wrong shape"] == [Tensor("x", "BOOL", [2], xb * 2)]
    assert sent["truncated body"] == [Tensor("x", "BOOL", [1], b"")]


def test_an_input_of_a_dtype_triton_does_not_name_is_sent_as_fp32_for_the_wrong_dtype(tmp_path):
    t = target(tmp_path, [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
               inputs=lambda batch, seed: {"x": np.zeros((batch, 4), np.complex64)})
    (wrong,) = [tensors for problem, tensors, _ in probes(t) if problem == "wrong dtype"]
    assert wrong == [Tensor("x", "FP32", [1, 4], bytes(32))]


def test_a_request_that_failed_at_the_socket_is_a_refused_connection_one_the_server_answered_is_not():
    assert _refused_connection(ConnectionRefusedError(111, "Connection refused"))
    try:
        raise RuntimeError("request failed") from ConnectionResetError(104, "reset")
    except RuntimeError as exc:
        assert _refused_connection(exc)
    assert not _refused_connection(RuntimeError("HTTP 400: unexpected shape"))


def test_a_grpc_probe_carries_its_tensors_bytes_as_raw_contents_and_asks_its_outputs():
    tensors = [Tensor("x", "FP32", [1, 2], b"\x00" * 8), Tensor("y", "BYTES", [1, 1], b"\x01\x00\x00\x00a")]
    request = _grpc_request("m", tensors, ["z", "w"], "conformance")
    assert (request.model_name, request.id) == ("m", "conformance")
    assert [(t.name, t.datatype, list(t.shape)) for t in request.inputs] == [("x", "FP32", [1, 2]),
                                                                          ("y", "BYTES", [1, 1])]
    assert list(request.raw_input_contents) == [b"\x00" * 8, b"\x01\x00\x00\x00a"]
    assert [o.name for o in request.outputs] == ["z", "w"]
    assert _grpc_request("m", tensors[:1], []).id == ""


def test_the_variable_dim_changed_is_counted_past_the_batch_dim(tmp_path):
    t = target(tmp_path, [{"name": "x", "data_type": "TYPE_INT32", "dims": [2, -1]}])
    xb = t.request(1)["x"].tobytes()
    sent = {problem: tensors for problem, tensors, _ in probes(t)}
    assert sent["other size of a variable dim"] == [Tensor("x", "INT32", [1, 2, 2], xb * 2)]
