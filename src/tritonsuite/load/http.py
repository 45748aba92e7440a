"""HTTP/1.1 transport of the engine: a persistent connection, one response read, and a request serialised once with
tritonclient's protocol code (binary tensor extension, or system shared-memory references) for repeated sending."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.load.client import SharedMemoryRegions, infer_tensors
from tritonsuite.load.point import MeasurementError


async def read_response(reader: asyncio.StreamReader) -> tuple[int, int | None, bytes, float]:
    """Read one HTTP/1.1 response: (status, inference header length, body, time the headers arrived)."""
    head = await reader.readuntil(b"\r\n\r\n")
    t_head = time.perf_counter()
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, header_length = 0, None
    for line in lines[1:]:
        key, _, value = line.partition(b":")
        key = key.strip().lower()
        if key == b"content-length":
            length = int(value)
        elif key == b"inference-header-content-length":
            header_length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, header_length, body, t_head


def error_text(body: bytes) -> str:
    try:
        return json.loads(body).get("error", body.decode(errors="replace"))
    except ValueError:
        return body.decode(errors="replace")


class Connection:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def get_json(self, path: str) -> dict:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        status, _, body, _ = await read_response(self.reader)
        if status != 200:
            raise MeasurementError(f"GET {path} answered {status}: {error_text(body)}")
        return json.loads(body)

    def close(self):
        if self.writer is not None:
            self.writer.close()


class HttpTransport:
    """The load generator's HTTP side (:mod:`tritonsuite.load.grpc` has the gRPC one): open a persistent
    connection, exchange one prepared request."""

    protocol = "http"

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    async def open(self) -> Connection:
        return await Connection(self.host, self.port).open()

    async def exchange(self, conn: Connection, request: "PreparedRequest"):
        """Send ``request``; return (time written, time the response headers arrived, decoded outputs or None)."""
        import tritonclient.http as httpclient

        conn.writer.write(request.data)
        t_written = time.perf_counter()
        status, header_length, body, t_head = await read_response(conn.reader)
        if status != 200:
            raise MeasurementError(f"inference request failed with HTTP {status}: {error_text(body)}")
        decoded = None
        if request.decode_outputs:
            result = httpclient.InferenceServerClient.parse_response_body(body, header_length=header_length)
            decoded = request.decode(result)
        return t_written, t_head, decoded


@dataclass(frozen=True)
class RequestOptions:
    """What a request carries beside its tensors, in Triton's protocol: ``priority`` (0: the model's default level),
    ``timeout_us`` (the request's queue timeout in microseconds; None: the model's default), ``classes`` ((output,
    count) pairs: each named output asked for as the classification extension's top ``count`` classes, the others
    as tensors; never a BYTES output: tritonserver 2.51 dies of it, docs/faults-and-limits.md). The engine sends the
    defaults; a conformance check sets them to show a field of the configuration at work."""

    priority: int = 0
    timeout_us: int | None = None
    classes: tuple[tuple[str, int], ...] = ()


@dataclass
class PreparedRequest:
    data: bytes
    decode_outputs: Sequence[str]  # outputs returned in the body (not through shared memory)
    batched: bool = True  # False: a batchless deployment's; decoded outputs get a batch dimension of one

    def decode(self, result) -> "Outputs":
        return Outputs({n: result.as_numpy(n) if self.batched else result.as_numpy(n)[None]
                        for n in self.decode_outputs}, response_version(result))


class Outputs(dict):
    """One response's decoded outputs by name, and the model version that answered (``version``)."""

    def __init__(self, tensors, version: str = ""):
        super().__init__(tensors)
        self.version = version


def response_version(result) -> str:
    """The model version that answered, from tritonclient's result (HTTP: the JSON header; gRPC: the message)."""
    response = result.get_response()
    return str(response.get("model_version", "") if isinstance(response, dict) else response.model_version)


def model_path(model: str) -> str:
    """``/v2/models/<name>`` or, for ``name:version``, ``/v2/models/<name>/versions/<version>``."""
    from tritonsuite.core.description import model_and_version

    name, version = model_and_version(model)
    return f"/v2/models/{name}" + (f"/versions/{version}" if version else "")


def prepare_request(host: str, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str],
                    shm: "SharedMemoryRegions | None" = None, batched: bool = True,
                    options: "RequestOptions | None" = None) -> PreparedRequest:
    """Serialise one inference request with tritonclient's protocol code, once, for repeated sending."""
    import tritonclient.http as httpclient

    options = options or RequestOptions()
    infer_inputs, infer_outputs = infer_tensors(inputs, outputs, shm, batched=batched,
                                                class_counts=dict(options.classes))
    body, json_size = httpclient.InferenceServerClient.generate_request_body(
        infer_inputs, infer_outputs, priority=options.priority, timeout=options.timeout_us)
    head = f"POST {model_path(model)}/infer HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/octet-stream\r\n"
    if json_size is not None:
        head += f"Inference-Header-Content-Length: {json_size}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return PreparedRequest(head.encode() + body, [] if shm is not None else list(outputs), batched)
