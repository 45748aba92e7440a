"""gRPC transport of the engine, beside :mod:`tritonsuite.load.http`: one ``grpc.aio`` channel per connection of
the load generator, each request a ``ModelInfer`` call of Triton's ``inference.GRPCInferenceService`` whose
``ModelInferRequest`` is serialised once with tritonclient's protocol code (tensors in the message, or system
shared-memory references) and sent as those bytes; responses decoded by tritonclient's ``InferResult``.

Timing as for HTTP: Client Send ends when the call is handed to the channel, Client Recv from the response
message's arrival to the outputs decoded (a probe's; a load request's are not decoded: Client Recv 0). The point's server statistics are still read over HTTP (the same
counters Triton keeps for both protocols).
"""
from __future__ import annotations

import asyncio
import time
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.load.client import SharedMemoryRegions, infer_tensors
from tritonsuite.load.http import PreparedRequest, RequestOptions
from tritonsuite.load.point import MeasurementError

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
_MAX_MESSAGE = 2 ** 31 - 1  # tritonclient's own channel limit


def prepare_grpc_request(model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str],
                         shm: "SharedMemoryRegions | None" = None, batched: bool = True,
                         options: RequestOptions | None = None) -> PreparedRequest:
    """Serialise one ``ModelInferRequest`` with tritonclient's protocol code, once, for repeated sending."""
    from tritonclient.grpc._utils import _get_inference_request

    from tritonsuite.core.description import model_and_version

    name, version = model_and_version(model)
    options = options or RequestOptions()
    infer_inputs, infer_outputs = infer_tensors(inputs, outputs, shm, protocol="grpc", batched=batched,
                                                class_counts=dict(options.classes))
    request = _get_inference_request(model_name=name, inputs=infer_inputs, model_version=version, request_id="",
                                     outputs=infer_outputs, sequence_id=0, sequence_start=False, sequence_end=False,
                                     priority=options.priority, timeout=options.timeout_us, parameters=None)
    return PreparedRequest(request.SerializeToString(), [] if shm is not None else list(outputs), batched)


#: every channel's options: tritonclient's own message limits
CHANNEL_OPTIONS = (("grpc.max_send_message_length", _MAX_MESSAGE), ("grpc.max_receive_message_length", _MAX_MESSAGE))


class GrpcConnection:
    def __init__(self, url: str, timeout_s: float, access: Access = PLAIN):
        self.channel = access.grpc_channel(url, CHANNEL_OPTIONS)  # Triton's own TLS where access asks for it
        self.call = self.channel.unary_unary(MODEL_INFER)  # bytes in, bytes out: the request is serialised once
        self.metadata = access.grpc_metadata() or None  # the headers, on every call
        self.timeout_s = timeout_s
        self.users = 1

    def close(self):
        self.users -= 1
        if self.users > 0:
            return
        try:
            asyncio.get_running_loop().create_task(self.channel.close())
        except RuntimeError:  # no loop any more: the channel goes with the process's garbage
            pass


class GrpcTransport:
    """The load generator's gRPC side: open a connection, exchange one prepared request."""

    protocol = "grpc"

    def __init__(self, url: str, timeout_s: float = 120.0, shared: bool = False, access: Access = PLAIN):
        self.url, self.timeout_s, self.shared, self.access = url, timeout_s, shared, access
        self._channel: GrpcConnection | None = None

    async def open(self) -> GrpcConnection:
        """A channel per connection (closed loop: one per concurrent request, as HTTP's connections); ``shared``
        (open loop): one channel that multiplexes every request in flight, as gRPC is meant to be used, instead
        of a new channel (a new TCP connection and HTTP/2 handshake) at each send that finds none idle."""
        if not self.shared:
            return GrpcConnection(self.url, self.timeout_s, self.access)
        if self._channel is None or self._channel.users <= 0:
            self._channel = GrpcConnection(self.url, self.timeout_s, self.access)
        else:
            self._channel.users += 1
        return self._channel

    async def exchange(self, conn: GrpcConnection, request: PreparedRequest):
        """Send ``request``; return (time handed to the channel, time the response arrived, decoded outputs)."""
        import grpc

        call = conn.call(request.data, timeout=conn.timeout_s, metadata=conn.metadata)
        t_written = time.perf_counter()
        try:
            body = await call
        except grpc.aio.AioRpcError as exc:
            raise MeasurementError(f"inference request failed with gRPC {exc.code().name}: {exc.details()}") from None
        t_head = time.perf_counter()
        decoded = None
        if request.decode_outputs:
            from tritonclient.grpc import InferResult, service_pb2

            decoded = request.decode(InferResult(service_pb2.ModelInferResponse.FromString(body)))
        return t_written, t_head, decoded
