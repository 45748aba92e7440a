"""The decoupled check's judging (tritonsuite.judge.conformance.decoupled ``_judge_streams``) on streams built to
cause each reason, and its stream reader (``_exchange``) against a gRPC peer on 127.0.0.1 that does on the stream
what tritonserver is never seen to do (close it, answer an id nobody sent, fail it with a status): the reasons
that arise only in the reader."""
from __future__ import annotations

import asyncio

import grpc
import pytest
from tritonclient.grpc import service_pb2

from tritonsuite.judge.conformance import decoupled
from tritonsuite.judge.conformance.decoupled import _exchange, _judge_streams, _Stream

NAMES = ["INDEX", "OUT"]


def stream(*responses, errors=()):
    """A request's stream: ``responses`` as (output names, final flag)."""
    return _Stream(0.0, [(0.001 * i, list(o), f) for i, (o, f) in enumerate(responses)], list(errors))


def sound():
    return {"conformance-0": stream((NAMES, False), (NAMES, False), ([], True)),
            "conformance-1": stream(([], True)),
            "conformance-2": stream((NAMES, True))}


def judge(streams, stray=(), served=True):
    return _judge_streams(streams, list(stray), served, NAMES)


def test_decoupled_passes_one_final_flag_per_request_alone_or_with_outputs():
    assert judge(sound()) == []
    assert judge(sound(), served=None) == []  # the served configuration not known: the stream alone judges


def test_decoupled_fails_a_model_served_as_not_decoupled():
    problems = judge(sound(), served=False)
    assert problems == ["the server serves model_transaction_policy.decoupled false"]
    assert ("fail" if problems else "pass") == "fail"


def test_decoupled_names_the_first_of_the_streams_own_errors():
    assert judge(sound(), ["the server closed the stream", "a response for unknown request id 'x': "]) == [
        "the server closed the stream"]


def test_decoupled_fails_requests_that_got_no_final_flag():
    streams = {**sound(), "conformance-1": stream((NAMES, False)), "conformance-2": stream()}
    assert judge(streams) == [f"2 of 3 requests got no final flag (conformance-1: no message for "
                              f"{decoupled.IDLE_S:g} s after 1 response(s))"]
    # a request answered with an error has no final flag to wait for: the error is its fault
    errored = {**sound(), "conformance-1": stream(errors=["boom"])}
    assert judge(errored) == ["1 request(s) answered with an error (conformance-1: boom)"]


def test_decoupled_fails_a_request_with_a_second_final_flag():
    streams = {**sound(), "conformance-2": stream((NAMES, True), ([], True))}
    assert judge(streams) == ["1 request(s) got more than one final flag (conformance-2: 2)",
                              "1 request(s) got a response after their final one (conformance-2)"]


def test_decoupled_fails_a_response_after_the_final_one():
    streams = {**sound(), "conformance-2": stream((NAMES, True), (NAMES, False))}
    assert judge(streams) == ["1 request(s) got a response after their final one (conformance-2)"]


def test_decoupled_fails_responses_without_the_declared_outputs():
    streams = {**sound(), "conformance-0": stream((["OUT"], False), (["OUT"], False), ([], True))}
    assert judge(streams) == ["2 response(s) without the declared outputs ['INDEX', 'OUT'] (conformance-0 carried "
                              "['OUT'])"]


def test_decoupled_fails_an_empty_response_not_flagged_final():
    streams = {**sound(), "conformance-1": stream(([], False), ([], True))}
    assert judge(streams) == ["1 request(s) got an empty response not flagged final (conformance-1)"]


def test_decoupled_fails_requests_answered_with_an_error():
    streams = {**sound(), "conformance-0": stream((NAMES, False), errors=["model raised", "again"]),
               "conformance-2": stream(errors=["stub died"])}
    assert judge(streams) == ["2 request(s) answered with an error (conformance-0: model raised)"]


# ------------------------------------------------------------------------- the reader against a misbehaving peer
def _peer(behaviour: str):
    """ModelStreamInfer that reads every request, then: "close": ends the stream; "unknown": answers an id nobody
    sent and ends it; "abort": fails it with UNAVAILABLE."""
    async def model_stream_infer(requests, context):
        async for _ in requests:
            if behaviour == "unknown":
                response = service_pb2.ModelStreamInferResponse()
                response.infer_response.id = "stranger"
                yield response.SerializeToString()
            break
        if behaviour == "abort":
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the server is going away")
    return model_stream_infer


def exchange_against(model_stream_infer, requests=1):
    """The reader's exchange of ``requests`` requests with a local gRPC peer (127.0.0.1) whose ModelStreamInfer is
    ``model_stream_infer``: (streams, stray, seconds)."""
    async def run():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(model_stream_infer)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            return await asyncio.wait_for(_exchange(f"127.0.0.1:{port}", [b""] * requests), 30)
        finally:
            await server.stop(None)
    return asyncio.run(run())


def exchange_with(behaviour: str):
    streams, stray, _ = exchange_against(_peer(behaviour))
    return streams, stray


@pytest.mark.parametrize("behaviour, reasons", [
    ("close", ["the server closed the stream"]),
    ("unknown", ["a response for unknown request id 'stranger': ", "the server closed the stream"]),
    ("abort", ["the stream failed with gRPC UNAVAILABLE: the server is going away"]),
])
def test_decoupled_fails_a_stream_closed_answered_strangely_or_failed(behaviour, reasons):
    streams, stray = exchange_with(behaviour)
    assert stray == reasons
    problems = _judge_streams(streams, stray, True, NAMES)
    assert problems[0] == reasons[0]  # the stream's first error leads; the request it left open follows
    assert problems[1:] == [f"1 of 1 requests got no final flag (conformance-0: no message for "
                            f"{decoupled.IDLE_S:g} s after 0 response(s))"]


# ---------------------------------------------------------------- the reader against a peer that answers each request
def _answering(script):
    """ModelStreamInfer answering each request as ``script(request id)`` says: a list of (output names, final flag,
    error message) responses; the stream is kept open (tritonserver's is, until the client goes)."""
    async def model_stream_infer(requests, context):
        async for body in requests:
            request = service_pb2.ModelInferRequest.FromString(body)
            assert request.parameters["triton_enable_empty_final_response"].bool_param
            for names, final, error in script(request.id):
                response = service_pb2.ModelStreamInferResponse(error_message=error)
                response.infer_response.id = request.id
                for name in names:
                    response.infer_response.outputs.add(name=name)
                if final is not None:
                    response.infer_response.parameters["triton_final_response"].bool_param = final
                yield response.SerializeToString()
    return model_stream_infer


def exchange_script(script, requests=2):
    return exchange_against(_answering(script), requests)


def shape(streams):
    """Each request's responses without their times."""
    return {i: [(names, final) for _, names, final in s.responses] for i, s in streams.items()}


def test_the_reader_keeps_each_requests_responses_in_order_with_their_outputs_and_final_flags():
    streams, stray, seconds = exchange_script(lambda i: [(["OUT", "INDEX"], False, ""), (["OUT", "INDEX"], None, ""),
                                                         ([], True, "")])
    assert stray == [] and list(streams) == ["conformance-0", "conformance-1"]
    assert shape(streams) == {i: [(["INDEX", "OUT"], False), (["INDEX", "OUT"], False), ([], True)] for i in streams}
    assert all(s.errors == [] and s.finals == 1 for s in streams.values())
    # every final flag came at once: the reader listens LINGER_S more, not IDLE_S
    assert decoupled.LINGER_S <= seconds < decoupled.IDLE_S
    assert all(0 <= at < seconds for s in streams.values() for at, _, _ in s.responses)
    assert _judge_streams(streams, stray, True, NAMES) == []


def test_the_reader_keeps_a_response_after_the_final_one_and_a_second_final_flag():
    streams, stray, _ = exchange_script(lambda i: [(["OUT"], True, ""), (["OUT"], False, ""), ([], True, "")], 1)
    assert stray == [] and shape(streams) == {"conformance-0": [(["OUT"], True), (["OUT"], False), ([], True)]}
    assert streams["conformance-0"].finals == 2


def test_the_reader_keeps_an_errors_first_line_and_waits_no_final_flag_for_it(monkeypatch):
    monkeypatch.setattr(decoupled, "IDLE_S", 0.5)  # no final flag comes: the reader waits out IDLE_S
    long = "x" * 300
    streams, stray, _ = exchange_script(
        lambda i: [([], None, "model raised\nTraceback ...")] if i == "conformance-0" else [([], None, long)])
    assert stray == [] and shape(streams) == {"conformance-0": [], "conformance-1": []}
    assert streams["conformance-0"].errors == ["model raised"] and streams["conformance-1"].errors == ["x" * 200]
    assert _judge_streams(streams, stray, True, NAMES) == [
        "2 request(s) answered with an error (conformance-0: model raised)"]


def test_the_reader_stops_waiting_for_a_final_flag_after_idle_s_without_a_message(monkeypatch):
    monkeypatch.setattr(decoupled, "IDLE_S", 0.3)
    monkeypatch.setattr(decoupled, "LINGER_S", 5.0)  # lingering is only after every final flag
    streams, stray, seconds = exchange_script(lambda i: [(["OUT"], False, "")], 1)
    assert stray == [] and shape(streams) == {"conformance-0": [(["OUT"], False)]}
    assert 0.3 <= seconds < 3.0


def test_the_reader_stops_at_total_s_however_chatty_the_stream(monkeypatch):
    monkeypatch.setattr(decoupled, "TOTAL_S", 0.0)
    streams, stray, seconds = exchange_script(lambda i: [(["OUT"], True, "")], 1)
    assert stray == [] and shape(streams) == {"conformance-0": []} and seconds < 3.0


def test_a_stream_counts_its_final_flags():
    assert stream().finals == 0 and stream((NAMES, False), ([], True), ([], True)).finals == 2


# ------------------------------------------------------------------------------ what the check takes of a target
def target_of(tmp_path, config: dict):
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    from tritonsuite.judge.conformance.result import Target

    directory = tmp_path / config["name"]
    directory.mkdir(parents=True)
    (directory / "config.pbtxt").write_text(
        text_format.MessageToString(json_format.ParseDict(config, model_config_pb2.ModelConfig())))
    return Target(server=None, directory=directory)


CONFIG = {"name": "m", "backend": "python", "max_batch_size": 4, "model_transaction_policy": {"decoupled": True},
          "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [3]}],
          "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]}]}


def test_the_requests_are_seeded_one_per_seed_and_a_sequence_models_each_a_sequence_of_its_own(tmp_path):
    from tritonsuite.judge.conformance.decoupled import REQUESTS, _requests

    target = target_of(tmp_path / "a", CONFIG)
    bodies = [service_pb2.ModelInferRequest.FromString(b) for b in _requests(target, "127.0.0.1:1")]
    assert REQUESTS == 8 and len(bodies) == REQUESTS
    assert {b.model_name for b in bodies} == {"m"} and [o.name for o in bodies[0].outputs] == ["OUT"]
    assert [list(b.inputs[0].shape) for b in bodies] == [[1, 3]] * REQUESTS
    assert len({b.raw_input_contents[0] for b in bodies}) == REQUESTS  # seeds 0 to 7: each its own data
    assert bodies[0].raw_input_contents[0] == target.request(1, 0)["INPUT0"].tobytes()
    assert all("sequence_id" not in b.parameters for b in bodies)
    sequence = target_of(tmp_path / "b", CONFIG | {"sequence_batching": {}})
    flagged = [service_pb2.ModelInferRequest.FromString(b) for b in _requests(sequence, "127.0.0.1:1")]
    assert [b.parameters["sequence_id"].int64_param for b in flagged] == [90_000 + s for s in range(REQUESTS)]
    assert all(b.parameters["sequence_start"].bool_param and b.parameters["sequence_end"].bool_param
               for b in flagged)


def test_each_request_is_counted_once_however_many_responses_follow_its_final_one():
    streams = {**sound(), "conformance-2": stream((NAMES, True), (NAMES, False), ([], False), (NAMES, True))}
    assert judge(streams) == ["1 request(s) got more than one final flag (conformance-2: 2)",
                              "1 request(s) got a response after their final one (conformance-2)"]
    empties = {**sound(), "conformance-1": stream(([], False), ([], False), ([], True))}
    assert judge(empties) == ["2 request(s) got an empty response not flagged final (conformance-1)"]


def test_the_first_missing_output_is_named_of_every_response_without_them():
    streams = {**sound(), "conformance-0": stream((["OUT"], False), ([], True)),
               "conformance-2": stream((["INDEX"], True))}
    assert judge(streams) == ["2 response(s) without the declared outputs ['INDEX', 'OUT'] (conformance-0 carried "
                              "['OUT'])"]


def test_the_reader_listens_linger_s_after_the_last_final_flag_not_after_each_message(monkeypatch):
    # margins of 0.6 s or more on each side, so a busy host's scheduling delays cannot move the outcome
    monkeypatch.setattr(decoupled, "LINGER_S", 2.0)

    async def model_stream_infer(requests, context):
        async for body in requests:
            request_id = service_pb2.ModelInferRequest.FromString(body).id
            for final in (True, False, False, False):  # after the final flag, a response every 1.4 s
                response = service_pb2.ModelStreamInferResponse()
                response.infer_response.id = request_id
                response.infer_response.outputs.add(name="OUT")
                response.infer_response.parameters["triton_final_response"].bool_param = final
                yield response.SerializeToString()
                await asyncio.sleep(1.4)

    streams, stray, seconds = exchange_against(model_stream_infer)
    # the final flag at 0, one response 1.4 s after it, LINGER_S (2 s) after the final flag: done (listening 2 s
    # after each message instead would have kept the response at 2.8 s too)
    assert stray == [] and shape(streams) == {"conformance-0": [(["OUT"], True), (["OUT"], False)]}
    assert 2.0 <= seconds < 2.8
    times = [at for at, _, _ in streams["conformance-0"].responses]  # seconds after the request, to 0.1 ms
    assert times[0] < 0.6 and 1.2 < times[1] < 2.0 and all(at == round(at, 4) for at in times)


def test_a_batchless_models_requests_go_without_their_batch_dimension(tmp_path):
    from tritonsuite.judge.conformance.decoupled import _requests

    target = target_of(tmp_path, CONFIG | {"max_batch_size": 0})
    bodies = [service_pb2.ModelInferRequest.FromString(b) for b in _requests(target, "127.0.0.1:1")]
    assert [list(b.inputs[0].shape) for b in bodies] == [[3]] * len(bodies)
    assert bodies[0].raw_input_contents[0] == target.request(1, 0)["INPUT0"].tobytes()


def test_the_streams_own_errors_are_cut_to_200_characters():
    async def model_stream_infer(requests, context):
        async for body in requests:
            response = service_pb2.ModelStreamInferResponse(error_message="e" * 300)
            response.infer_response.id = "stranger"
            yield response.SerializeToString()
            await context.abort(grpc.StatusCode.INTERNAL, "d" * 300)

    _, stray, _ = exchange_against(model_stream_infer)
    unknown = "a response for unknown request id 'stranger': "
    failed = "the stream failed with gRPC INTERNAL: "
    assert stray == [unknown + "e" * (200 - len(unknown)), failed + "d" * (200 - len(failed))]
