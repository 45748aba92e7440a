"""Decoupled models as a transport of the engine: gRPC bidirectional streams (``ModelStreamInfer``).

A decoupled model (``model_transaction_policy { decoupled: true }``) answers a request with any number of responses,
HTTP and unary gRPC refuse it. :class:`ModelStream` is the suite's one client of such a stream (this transport and
the decoupled conformance check speak through it). Each connection of the load generator is one stream (closed loop:
one per concurrency slot, one request in flight; open loop: one stream multiplexing every request in flight); each
request carries a unique ``id`` (appended to the request serialised once: protobuf merges concatenated messages) and
``triton_enable_empty_final_response``, so the server always closes a request with a response flagged
``triton_final_response`` even when the model sends the final flag alone. Responses are matched to their request by
that id; a request is complete at its final response (its latency runs to it, as perf_analyzer measures).

Per request the transport keeps when each response arrived: time to first response (the first response carrying
outputs, else the final one), the gaps between successive responses (inter-response latency), and how many
responses carried outputs. :func:`stream_columns` turns them into the row's columns; :func:`exchange_alone`
collects the whole sequence of responses of requests (the accuracy of a decoupled model compares it).
"""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.core.rows import STREAM_COLUMNS
from tritonsuite.load.grpc import CHANNEL_OPTIONS
from tritonsuite.load.http import PreparedRequest
from tritonsuite.load.interrupt import within
from tritonsuite.load.point import Hang, MeasurementError

__all__ = ["STREAM_COLUMNS", "ModelStream", "StreamTiming", "StreamTransport", "StreamedResponse", "exchange_alone",
           "stream_columns", "summarise_streams"]

MODEL_STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"


@dataclass
class StreamTiming:
    """When a request's responses arrived (perf_counter seconds) and how many carried outputs."""

    sent: float
    arrivals: list[float] = field(default_factory=list)  # responses with outputs
    final: float = 0.0

    @property
    def first(self) -> float:
        return (self.arrivals[0] if self.arrivals else self.final) - self.sent

    @property
    def gaps(self) -> np.ndarray:
        return np.diff(np.asarray(self.arrivals, dtype=np.float64))


@dataclass
class _Pending:
    timing: StreamTiming
    done: asyncio.Future
    request: PreparedRequest  # its decode() turns each response into outputs (a batchless one's too)
    responses: list = field(default_factory=list)


@dataclass(frozen=True)
class StreamedResponse:
    """One message read from a stream: when it arrived (perf_counter seconds), the request id it answers, the error
    Triton sent for that request ('' when none) and the response itself (``ModelInferResponse``)."""

    at: float
    request_id: str
    error: str
    infer: object

    @property
    def final(self) -> bool:
        """Whether the response carries ``triton_final_response`` true (read without adding the key to the map)."""
        parameters = self.infer.parameters
        return parameters["triton_final_response"].bool_param if "triton_final_response" in parameters else False


class ModelStream:
    """The one gRPC stream client: a ``ModelStreamInfer`` call to Triton on its own channel (tritonclient's message
    limits, reached as ``access`` says), requests written one at a time with their id and
    ``triton_enable_empty_final_response`` (so every request ends with a response flagged final, even when the model
    sends the flag alone), responses read as they come. The load's transport and the decoupled conformance check
    both speak through it; what they make of the responses is their own."""

    def __init__(self, url: str, access: Access = PLAIN):
        from tritonclient.grpc import service_pb2

        extra = service_pb2.ModelInferRequest()
        extra.parameters["triton_enable_empty_final_response"].bool_param = True
        self._final_parameters = extra.SerializeToString()
        self.channel = access.grpc_channel(url, CHANNEL_OPTIONS)
        self.call = self.channel.stream_stream(MODEL_STREAM_INFER)(metadata=access.grpc_metadata() or None)
        self._write_lock = asyncio.Lock()  # a stream takes one write at a time

    async def send(self, body: bytes, request_id: str) -> None:
        """Write the serialised ``ModelInferRequest`` ``body`` with ``request_id`` (appended to the bytes: protobuf
        merges concatenated messages, so the request is serialised once however often it is sent)."""
        from tritonclient.grpc import service_pb2

        suffix = service_pb2.ModelInferRequest(id=request_id).SerializeToString()
        async with self._write_lock:
            await self.call.write(body + self._final_parameters + suffix)

    async def receive(self) -> StreamedResponse | None:
        """The next message; None when the server closed the stream (``grpc.aio.AioRpcError`` when gRPC failed it:
        each user says so in its own words)."""
        import grpc
        from tritonclient.grpc import service_pb2

        message = await self.call.read()
        if message is grpc.aio.EOF:
            return None
        at = time.perf_counter()
        response = service_pb2.ModelStreamInferResponse.FromString(message)
        return StreamedResponse(at, response.infer_response.id, response.error_message, response.infer_response)

    def cancel(self) -> None:
        """End the call at once (no loop needed); :meth:`close` also closes the channel."""
        self.call.cancel()

    async def close(self) -> None:
        self.call.cancel()
        await self.channel.close()


class StreamConnection:
    """One :class:`ModelStream` of the load; a reader task hands each response to the request it answers."""

    def __init__(self, url: str, timeout_s: float, access: Access = PLAIN):
        self.stream = ModelStream(url, access)
        self.timeout_s = timeout_s
        self.pending: dict[str, _Pending] = {}
        self.users = 1
        self.error: BaseException | None = None
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        import grpc
        from tritonclient.grpc import InferResult

        try:
            while True:
                response = await self.stream.receive()
                if response is None:
                    raise MeasurementError("the server closed the stream")
                pending = self.pending.get(response.request_id)
                if pending is None:
                    raise MeasurementError(f"a streamed response for unknown request id {response.request_id!r}"
                                           + (f": {response.error}" if response.error else ""))
                if response.error:
                    self.pending.pop(response.request_id)
                    pending.done.set_exception(MeasurementError(f"streamed inference failed: {response.error}"))
                    continue
                if response.infer.outputs:
                    pending.timing.arrivals.append(response.at)
                    if pending.request.decode_outputs:
                        pending.responses.append(pending.request.decode(InferResult(response.infer)))
                if response.final:
                    pending.timing.final = response.at
                    self.pending.pop(response.request_id)
                    pending.done.set_result(pending)
        except BaseException as exc:  # noqa: BLE001 - every waiting request learns why
            if isinstance(exc, grpc.aio.AioRpcError):
                exc = MeasurementError(f"the stream failed with gRPC {exc.code().name}: {exc.details()}")
            self.error = exc
            for pending in self.pending.values():
                if not pending.done.done():
                    pending.done.set_exception(exc if isinstance(exc, Exception) else MeasurementError(str(exc)))
            self.pending.clear()

    def close(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        self.reader.cancel()
        self.stream.cancel()
        try:
            asyncio.get_running_loop().create_task(self.stream.close())
        except RuntimeError:
            pass


class StreamTransport:
    """The load generator's side of a decoupled model: open a stream, exchange one request over it."""

    protocol = "grpc"
    streaming = True

    def __init__(self, url: str, timeout_s: float = 120.0, shared: bool = False, access: Access = PLAIN):
        self.url, self.timeout_s, self.shared, self.access = url, timeout_s, shared, access
        self._stream: StreamConnection | None = None
        self._ids = itertools.count(1)

    async def open(self) -> StreamConnection:
        if not self.shared:
            return StreamConnection(self.url, self.timeout_s, self.access)
        if self._stream is None or self._stream.users <= 0 or self._stream.error is not None:
            self._stream = StreamConnection(self.url, self.timeout_s, self.access)
        else:
            self._stream.users += 1
        return self._stream

    async def exchange(self, conn: StreamConnection, request: PreparedRequest):
        """Send ``request``; return (time written, time of the final response, decoded responses or None, timing)."""
        if conn.error is not None:
            raise MeasurementError(f"the stream failed: {conn.error}")
        request_id = str(next(self._ids))
        pending = _Pending(StreamTiming(time.perf_counter()), asyncio.get_running_loop().create_future(), request)
        conn.pending[request_id] = pending
        try:
            await conn.stream.send(request.data, request_id)
        except Exception as exc:
            conn.pending.pop(request_id, None)
            raise MeasurementError(f"writing to the stream failed: {exc}") from None
        t_written = time.perf_counter()
        try:
            await within(asyncio.shield(pending.done), conn.timeout_s)
        except asyncio.TimeoutError:
            conn.pending.pop(request_id, None)
            raise Hang(f"no final response within {conn.timeout_s:.0f} s (the stream was ended)") from None
        decoded = pending.responses if request.decode_outputs else None
        return t_written, pending.timing.final, decoded, pending.timing


def _percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def stream_columns(timings: Sequence[StreamTiming], duration_s: float, batch_size: int) -> tuple[dict, dict]:
    """The row's stream columns (ms) from the stable windows' requests, and the measurement's evidence: each figure
    with the number of samples behind it."""
    first = np.asarray([t.first for t in timings], dtype=np.float64) * 1e3
    gaps = (np.concatenate([t.gaps for t in timings]) if timings else np.zeros(0)) * 1e3
    counts = np.asarray([len(t.arrivals) for t in timings], dtype=np.float64)
    result = {
        "Responses/Request": float(counts.mean()) if len(counts) else None,
        "Responses/Second": float(counts.sum() / duration_s) if duration_s > 0 else None,
        "avg time to first response": float(first.mean()) if len(first) else None,
        "p50 time to first response": _percentile(first, 50),
        "p99 time to first response": _percentile(first, 99),
        "avg inter-response latency": float(gaps.mean()) if len(gaps) else None,
        "p50 inter-response latency": _percentile(gaps, 50),
        "p99 inter-response latency": _percentile(gaps, 99),
    }
    evidence = {"requests": int(len(timings)), "responses": int(counts.sum()),
                "time_to_first_response_samples": int(len(first)), "inter_response_samples": int(len(gaps)),
                "responses_per_request_min": int(counts.min()) if len(counts) else None,
                "responses_per_request_max": int(counts.max()) if len(counts) else None,
                "batch_size": batch_size,
                "complete_at": "the response flagged triton_final_response (empty final responses asked for)"}
    return result, evidence


async def _exchange_all(url: str, requests: Sequence[PreparedRequest], timeout_s: float, together: bool,
                        access: Access):
    transport = StreamTransport(url, timeout_s, shared=True, access=access)
    conn = await transport.open()
    try:
        if together:
            found = await asyncio.gather(*(transport.exchange(conn, r) for r in requests))
        else:
            found = [await transport.exchange(conn, r) for r in requests]
        return [f[2] for f in found]
    finally:
        conn.close()
        await asyncio.sleep(0)


def exchange_alone(url: str, model: str, requests: Sequence[Mapping[str, np.ndarray]], outputs: Sequence[str],
                   timeout_s: float = 120.0, together: bool = False,
                   access: Access = PLAIN) -> list[list[dict[str, np.ndarray]]]:
    """Every response (decoded outputs, in arrival order) of each request: sent one at a time, or all at once
    multiplexed on one stream (``together``: the interleaved, loaded case), reached as ``access`` says."""
    from tritonsuite.load.grpc import prepare_grpc_request

    prepared = [prepare_grpc_request(model, {k: np.ascontiguousarray(v) for k, v in r.items()}, outputs)
                for r in requests]
    return asyncio.run(_exchange_all(url, prepared, timeout_s, together, access))


def summarise_streams(measurement, windows: Sequence, pool: tuple[int, int] | None) -> None:
    """Add the stream columns of the row's windows (the stable ones, as :func:`tritonsuite.load.windows.summarise`
    pools them) to ``measurement``: its result gets :data:`STREAM_COLUMNS`, its meta the samples behind them."""
    from tritonsuite.core.settings import STABLE_WINDOWS

    stable = windows[-STABLE_WINDOWS:] if pool is None else windows[pool[0]:pool[1]]
    timings = [t for w in stable for t in (w.timings or ())]
    duration = sum(w.end - w.start for w in stable)
    columns, evidence = stream_columns(timings, duration, measurement.point.batch_size)
    measurement.result.update(columns)
    measurement.meta["stream"] = evidence
