"""The kinds' pure parts: sequence parameters spliced into a request serialised once (gRPC and HTTP), the stream
columns from response timings, perf_analyzer's options per kind, and the options' usage errors."""
import json

import numpy as np
import pytest

from tritonsuite.core.description import describe
from tritonsuite.load.composing import parse_composing
from tritonsuite.load.grpc import prepare_grpc_request
from tritonsuite.load.http import prepare_request
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.kinds.sequence import grpc_decorator, http_decorator
from tritonsuite.load.streams import StreamTiming, stream_columns
from tritonsuite.run.checks import OptionError
from tritonsuite.run.kindoptions import parse_bls_composing

INPUTS = {"INPUT": np.arange(6, dtype=np.int32).reshape(2, 3)}


def test_grpc_sequence_parameters_merge_into_the_serialised_request():
    from tritonclient.grpc import service_pb2

    base = prepare_grpc_request("seq", INPUTS, ["OUTPUT"])
    first = service_pb2.ModelInferRequest.FromString(grpc_decorator(base)(42, True, False).data)
    last = service_pb2.ModelInferRequest.FromString(grpc_decorator(base)(42, False, True).data)
    assert first.model_name == "seq" and first.inputs[0].name == "INPUT"
    assert first.parameters["sequence_id"].int64_param == 42 and first.parameters["sequence_start"].bool_param
    assert not first.parameters["sequence_end"].bool_param and last.parameters["sequence_end"].bool_param
    assert bytes(first.raw_input_contents[0]) == INPUTS["INPUT"].tobytes()  # the tensors untouched


def test_http_sequence_parameters_in_the_json_header():
    base = prepare_request("127.0.0.1", "seq", INPUTS, ["OUTPUT"])
    data = http_decorator(base)(7, False, True).data
    head, _, body = data.partition(b"\r\n\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(b":") for l in head.split(b"\r\n")[1:])}
    size = int(fields[b"inference-header-content-length"])
    assert int(fields[b"content-length"]) == len(body)
    header = json.loads(body[:size])
    assert header["parameters"] == {"sequence_id": 7, "sequence_start": False, "sequence_end": True}
    assert body[size:] == INPUTS["INPUT"].tobytes() and head.startswith(b"POST /v2/models/seq/infer HTTP/1.1")


def test_stream_columns_count_their_samples():
    timings = [StreamTiming(0.0, [0.010, 0.012, 0.016], 0.017), StreamTiming(1.0, [1.020], 1.021),
               StreamTiming(2.0, [], 2.005)]  # the last: a request answered by the final flag alone
    result, evidence = stream_columns(timings, duration_s=2.0, batch_size=1)
    assert result["Responses/Request"] == pytest.approx(4 / 3) and result["Responses/Second"] == 2.0
    assert result["avg time to first response"] == pytest.approx((10 + 20 + 5) / 3)
    assert result["p50 inter-response latency"] == pytest.approx(3.0)
    assert evidence["inter_response_samples"] == 2 and evidence["time_to_first_response_samples"] == 3
    assert evidence["responses_per_request_min"] == 0 and evidence["responses_per_request_max"] == 3


def _config(**extra):
    return {"name": "m", "backend": "python", "max_batch_size": 8,
            "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}], **extra}


def test_perf_analyzer_options_per_kind():
    sequence = describe(_config(sequence_batching={"oldest": {}}))
    assert driver_for(sequence.with_sequences(length=7, variation_percent=10, id_start=5)).arguments() == [
        "--sequence-length", "7", "--sequence-length-variation", "10", "--sequence-id-range", "5"]
    assert driver_for(describe(_config(model_transaction_policy={"decoupled": True}))).arguments() == ["--streaming"]
    bls = describe(_config(), lambda name: _config(name=name, backend="onnxruntime"), ("a", "b"))
    assert driver_for(bls).arguments() == ["--bls-composing-models=a,b"] and bls.kinds == ("BLS",)
    assert driver_for(describe(_config())).arguments() == []


def test_what_each_kind_tells_the_checks_the_tune_and_the_workers():
    """The capabilities the stages ask the driver for instead of the kind (tests/unit/test_kind_seam.py)."""
    plain = driver_for(describe(_config()))
    sequence = driver_for(describe(_config(sequence_batching={"oldest": {}})))
    stream = driver_for(describe(_config(model_transaction_policy={"decoupled": True})))
    bls = driver_for(describe(_config(), lambda name: _config(name=name, backend="onnxruntime"), ("a", "b")))
    steps = {"step": [{"model_name": "a", "model_version": -1, "input_map": {"X": "X"}, "output_map": {"Y": "Y"}}]}
    ensemble = driver_for(describe(_config(platform="ensemble", backend="", ensemble_scheduling=steps),
                                   lambda name: _config(name=name, backend="onnxruntime")))
    batchless = driver_for(describe(_config(max_batch_size=0)))
    assert [d.sequenced for d in (plain, sequence, stream, bls, ensemble)] == [False, True, False, False, False]
    assert (plain.request_batch(8), sequence.request_batch(8), plain.request_batch(0)) == (8, 1, 1)
    assert (plain.protocols, stream.protocols) == (("http", "grpc"), ("grpc",))
    assert sequence.lacks("stateless requests").startswith("a sequence model refuses a request without a sequence id")
    assert stream.lacks("cached responses") == "decoupled: Triton does not cache decoupled responses"
    assert plain.lacks("stateless requests") == plain.lacks("cached responses") == stream.lacks("stateless requests")
    assert plain.lacks("cached responses") == ""
    assert (bls.loaded_beside(), ensemble.loaded_beside(), plain.loaded_beside()) == (["a", "b"], [], [])
    assert sequence.unqueued().startswith("sequence_batching: Triton's sequence batcher has no queue policy")
    assert ensemble.unqueued().startswith("ensemble: its scheduler has no queue") and plain.unqueued() == ""
    assert ensemble.untunable() == ("is an ensemble: it has no instance group or batcher of its own; tune its "
                                    "composing models (a)")
    assert batchless.untunable().startswith("is batchless (max_batch_size 0)") and plain.untunable() == ""


def test_bls_composing_models_option():
    known = ["bls", "a", "b"]
    assert parse_bls_composing(["a:3,b"], known) == (("", ("a:3", "b")),)
    assert parse_bls_composing(["bls=a"], known) == (("bls", ("a",)),)
    with pytest.raises(OptionError, match="'c' is not a deployment of the run.*valid choices: a, b, bls"):
        parse_bls_composing(["a,c"], known)
    with pytest.raises(OptionError, match="NAME or NAME:VERSION"):
        parse_bls_composing(["a:x"], known)


PA_CONSOLE = """
  Server:
    Inference count: 200
    Successful request count: 200
    Avg request latency: 937 usec (overhead 673 usec + queue 56 usec + compute 208 usec)

  Composing models:
  add_onnx, version: 1
      Inference count: 400
      Successful request count: 400
      Avg request latency: 265 usec (overhead 1 usec + queue 56 usec + compute input 15 usec + compute infer 159 usec + compute output 33 usec)

Inferences/Second vs. Client Average Batch Latency
Concurrency: 2, throughput: 1582.87 infer/sec, latency 1254 usec
"""


def test_perf_analyzers_bls_composing_models_read_from_its_console():
    """--bls-composing-models: the callee's block, read as an ensemble's steps are, per request of the BLS model."""
    found = parse_composing(PA_CONSOLE)
    assert found == {"add_onnx": {"requests": 400, "per request": 2.0, "Server Queue": 0.056,
                                  "Server Compute Input": 0.015, "Server Compute Infer": 0.159,
                                  "Server Compute Output": 0.033}}
    assert parse_composing("Server:\n  Successful request count: 3\n") == {}


def test_sequences_are_sent_over_grpc_or_http_only():
    from tritonsuite.load.exchange import send_sequences

    with pytest.raises(ValueError, match="^protocol 'HTTP': valid choices are 'grpc' and 'http'$"):
        send_sequences(object(), "seq", [[INPUTS]], ["OUTPUT"], protocol="HTTP")
