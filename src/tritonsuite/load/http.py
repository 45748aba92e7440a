"""HTTP/1.1 transport of the engine: a persistent connection (an asyncio protocol, responses parsed by httptools as
they arrive), and a request serialised once with tritonclient's protocol code (binary tensor extension, or system
shared-memory references) for repeated sending."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.load.client import SharedMemoryRegions, batch_first, infer_tensors
from tritonsuite.load.point import MeasurementError


class Response(NamedTuple):
    """One HTTP/1.1 response: its status, Triton's inference header length (binary tensor extension), its body, when
    its headers had arrived (perf_counter) and whether the connection stays open after it."""

    status: int
    header_length: int | None
    body: bytes
    t_head: float
    keep_alive: bool


def error_text(status: int, body: bytes, access: Access = PLAIN) -> str:
    """An answer that is not 200 in one line: a proxy's or a restricted API's said as such
    (:func:`tritonsuite.server.reach.status_problem`), else the server's own error."""
    from tritonsuite.server.reach import body_text, status_problem

    return status_problem(status, body, access) or f"{status}: {body_text(body)}"


class Connection(asyncio.Protocol):
    """A persistent HTTP/1.1 connection, one request in flight: the bytes of a response are parsed as they arrive
    (httptools, llhttp's C parser: Content-Length or chunked bodies, keep-alive as the server says) and handed to
    the request waiting for them in one wake-up. A response that ends the connection (``Connection: close``: a proxy
    such as nginx after its ``keepalive_requests``) or a server that closed it while idle: the next request opens it
    again; a connection lost while a response is awaited fails that request. ``access``: TLS (HTTPS to a proxy in
    front of the endpoint) and the headers every request carries, put after its request line as it is written."""

    def __init__(self, host: str, port: int, access: Access = PLAIN):
        self.host, self.port, self.access = host, port, access
        self._ssl = access.http_ssl_context()
        self._headers = access.header_lines().encode()
        self.transport: asyncio.Transport | None = None
        self.reopened = 0  # how often the server ended the connection and it was opened again
        self._parser = None
        self._waiter: asyncio.Future | None = None
        self._open, self._served, self._received = False, 0, False
        self._reset()

    def _reset(self) -> None:
        self._header_length: int | None = None
        self._body: list[bytes] = []
        self._t_head = 0.0

    async def open(self) -> "Connection":
        import httptools

        self._parser = httptools.HttpResponseParser(self)
        self._reset()
        await asyncio.get_running_loop().create_connection(
            lambda: self, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None)
        return self

    async def roundtrip(self, data: bytes) -> tuple[float, Response]:
        """Send one request's bytes; (time written, its response). On a connection that served responses before,
        closed by the server before any byte of this one came (an idle keep-alive connection closed as the request
        went out), the request is sent once more on a new connection, as curl does; never after a byte came."""
        for attempt in (0, 1):
            if not self._open:  # ended by the server after the last response, or while idle
                self.close()
                self.reopened += 1
                await self.open()
            reused, self._received = self._served > 0, False
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            if self._headers:  # after the request line: the body is not copied where the transport need not
                line = data.index(b"\r\n") + 2
                self.transport.writelines((data[:line], self._headers, memoryview(data)[line:]))
            else:
                self.transport.write(data)
            t_written = time.perf_counter()
            try:
                response = await waiter
            except ConnectionError:
                if attempt or not reused or self._received:
                    raise
                continue
            finally:
                self._waiter = None
            self._served += 1
            return t_written, response
        raise AssertionError("unreachable")  # pragma: no cover

    async def get_json(self, path: str) -> dict:
        _, response = await self.roundtrip(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        if response.status != 200:
            raise MeasurementError(f"GET {path} answered {error_text(response.status, response.body, self.access)}")
        return json.loads(response.body)

    def close(self):
        if self.transport is not None:
            self.transport.close()
        self._open = False

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport, self._open, self._served = transport, True, 0

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except Exception as exc:  # noqa: BLE001 - httptools' parser errors and upgrades: the response is unusable
            self._fail(MeasurementError(f"unreadable HTTP response from {self.host}:{self.port}: {exc}"))
            self.close()

    def connection_lost(self, exc) -> None:
        if self.transport is not None and not self.transport.is_closing():
            return  # the connection closed before this one was opened, telling it late: not this one's loss
        self._open = False
        self._fail(ConnectionError(f"connection to {self.host}:{self.port} closed before the response"
                                   + (f" ({exc})" if exc else "")))

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 31 and name.lower() == b"inference-header-content-length":
            self._header_length = int(value)

    def on_headers_complete(self) -> None:
        self._t_head = time.perf_counter()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        keep_alive = self._parser.should_keep_alive()
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        response = Response(self._parser.get_status_code(), self._header_length, body, self._t_head, keep_alive)
        self._reset()
        if not keep_alive:
            self._open = False  # the server closes it: the next request opens another
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(response)


class HttpTransport:
    """The load generator's HTTP side (:mod:`tritonsuite.load.grpc` has the gRPC one): open a persistent
    connection, exchange one prepared request."""

    protocol = "http"

    def __init__(self, host: str, port: int, access: Access = PLAIN):
        self.host, self.port, self.access = host, port, access
        self._connections: list[Connection] = []

    @property
    def reconnects(self) -> int:
        """How often the server (or a proxy in front of it) ended one of this transport's connections and it was
        opened again: a row's ``http_reconnects``."""
        return sum(c.reopened for c in self._connections)

    @classmethod
    def of(cls, server) -> "HttpTransport":
        """The transport to a server's HTTP endpoint, reached as its ``access`` says."""
        host, port = server.http_url.rsplit(":", 1)
        return cls(host, int(port), server.access)

    async def open(self) -> Connection:
        conn = Connection(self.host, self.port, self.access)
        self._connections.append(conn)
        return await conn.open()

    async def exchange(self, conn: Connection, request: "PreparedRequest"):
        """Send ``request``; return (time written, time the response headers arrived, decoded outputs or None)."""
        t_written, response = await conn.roundtrip(request.data)
        if response.status != 200:
            raise MeasurementError(f"inference request failed with HTTP "
                                   f"{error_text(response.status, response.body, self.access)}")
        decoded = None
        if request.decode_outputs:
            import tritonclient.http as httpclient

            result = httpclient.InferenceServerClient.parse_response_body(response.body,
                                                                         header_length=response.header_length)
            decoded = request.decode(result)
        return t_written, response.t_head, decoded


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
        return Outputs(batch_first({n: result.as_numpy(n) for n in self.decode_outputs}, self.batched),
                       response_version(result))


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
