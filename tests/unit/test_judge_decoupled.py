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
    return grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {
        "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(model_stream_infer)})


def exchange_with(behaviour: str):
    async def run():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((_peer(behaviour),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            return await asyncio.wait_for(_exchange(f"127.0.0.1:{port}", [b""]), 30)
        finally:
            await server.stop(None)
    streams, stray, _ = asyncio.run(run())
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
