"""The one gRPC stream client (tritonsuite.load.streams ``ModelStream``, which the load's stream transport and the
decoupled conformance check both speak through) against a ModelStreamInfer peer on 127.0.0.1: what it writes with
each request, how it reads each response, the server closing the stream."""
from __future__ import annotations

import asyncio

import grpc
from tritonclient.grpc import service_pb2

from tritonsuite.load.streams import ModelStream


def _echo(seen: list):
    """ModelStreamInfer that keeps each request and answers it twice (outputs, then the final flag alone; a request
    whose id is "bad" gets an error instead), then ends the stream after the second request."""
    async def model_stream_infer(requests, context):
        async for body in requests:
            request = service_pb2.ModelInferRequest.FromString(body)
            seen.append(request)
            if request.id == "bad":
                response = service_pb2.ModelStreamInferResponse(error_message="model raised")
                response.infer_response.id = request.id
                yield response.SerializeToString()
            else:
                first = service_pb2.ModelStreamInferResponse()
                first.infer_response.id = request.id
                first.infer_response.outputs.add(name="OUT")
                yield first.SerializeToString()
                final = service_pb2.ModelStreamInferResponse()
                final.infer_response.id = request.id
                final.infer_response.parameters["triton_final_response"].bool_param = True
                yield final.SerializeToString()
            if len(seen) == 2:
                return
    return model_stream_infer


def test_a_model_stream_sends_each_request_with_its_id_and_the_empty_final_response_and_reads_each_answer():
    seen: list = []

    async def run():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(_echo(seen))}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        client = ModelStream(f"127.0.0.1:{port}")
        try:
            body = service_pb2.ModelInferRequest(model_name="m").SerializeToString()
            await client.send(body, "7")
            got = [await client.receive(), await client.receive()]
            await client.send(body, "bad")
            got += [await client.receive(), await client.receive()]
            return got
        finally:
            await client.close()
            await server.stop(None)

    first, final, error, closed = asyncio.run(asyncio.wait_for(run(), 30))
    # the request as serialised once, with the id and triton_enable_empty_final_response merged in
    assert [(r.model_name, r.id) for r in seen] == [("m", "7"), ("m", "bad")]
    assert all(r.parameters["triton_enable_empty_final_response"].bool_param for r in seen)
    assert (first.request_id, first.error, [o.name for o in first.infer.outputs], first.final) == ("7", "", ["OUT"],
                                                                                                  False)
    assert "triton_final_response" not in first.infer.parameters  # reading the flag does not add it
    assert (final.request_id, list(final.infer.outputs), final.final) == ("7", [], True)
    assert first.at <= final.at <= error.at  # perf_counter seconds at arrival
    assert (error.request_id, error.error, error.final) == ("bad", "model raised", False)
    assert closed is None  # the server ended the stream
