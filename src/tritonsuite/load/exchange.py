"""Requests sent through a deployment's driver with every answer kept: the engine's transports and request
patterns (:mod:`tritonsuite.load.kinds`), without windows.

A measurement (:func:`tritonsuite.load.engine.measure`) wants windows of stable throughput; a check
(:mod:`tritonsuite.judge.conformance`) wants each answer: when it was sent and came back, whether it failed and
why, the model version that answered and its outputs. :func:`exchange` sends ``count`` requests (or until ``stop``
is set) from ``concurrency`` connections, each keeping one request in flight, as the driver sends them: a sequence
model's requests continue one live sequence per connection (and the sequences still open are ended when the
requests run out), a decoupled model's travel on gRPC streams (an answer is complete at its final response, its
outputs are the list of responses), any other over HTTP or unary gRPC.
"""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.core.description import ModelDescription
from tritonsuite.load.http import HttpTransport, PreparedRequest, RequestOptions, prepare_request
from tritonsuite.load.interrupt import within
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.point import Hang, LoadPoint

#: each request's bound when neither the caller nor the server gives one (a request unanswered for longer failed)
TIMEOUT_S = 60.0
#: a staggered burst's first request is sent this long after the burst begins (its connections open meanwhile)
STAGGER_LEAD_S = 0.05
#: whole sequences (:func:`send_sequences`) are all sent within this, whatever their number (each step has its bound)
DEADLINE_S = 600.0


@dataclass
class Answer:
    """One request and its answer (``ok`` False: ``error`` says why, in one line)."""

    start: float  # monotonic seconds
    end: float
    ok: bool
    version: str = ""  # the model version that answered
    error: str = ""
    outputs: object = None  # decoded outputs by name; a decoupled model's: the list of its responses' outputs
    sequence: tuple[int, int] | None = None  # a sequence model's: (sequence id, the request's place in it from 0)

    @property
    def latency_ms(self) -> float:
        return (self.end - self.start) * 1e3


def prepare(host: str, model: str, tensors: Mapping[str, np.ndarray], outputs: Sequence[str], grpc: bool,
            batched: bool = True, shm=None, options: RequestOptions | None = None,
            decode: bool = True) -> PreparedRequest:
    """One request serialised once for its transport: gRPC's ``ModelInferRequest`` or the HTTP body. ``decode``
    False: its answers are read whole but their outputs not decoded (a load request's: only probes' are kept)."""
    if grpc:
        from tritonsuite.load.grpc import prepare_grpc_request

        request = prepare_grpc_request(model, tensors, outputs, shm, batched, options)
    else:
        request = prepare_request(host, model, tensors, outputs, shm, batched, options)
    if not decode:
        request.decode_outputs = []
    return request


def flagged(request: PreparedRequest, grpc: bool, flags: tuple[int, bool, bool]) -> PreparedRequest:
    """``request`` with a sequence id and START/END flags as given (the driver's sequence pattern chooses them
    otherwise)."""
    from tritonsuite.load.kinds.sequence import decorator

    return decorator(grpc)(request)(*flags)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def exchange(server, model: str, description: ModelDescription, requests: Sequence[Mapping[str, np.ndarray]],
             outputs: Sequence[str], concurrency: int = 1, *, count: int | None = None,
             stop: threading.Event | None = None, deadline_s: float = 120.0, protocol: str = "http",
             timeout_s: float | None = None, options: RequestOptions | None = None,
             flags: tuple[int, bool, bool] | None = None, give_up: int = 0,
             script: Sequence[Sequence[Mapping[str, np.ndarray]]] = (), together: bool = False,
             first_id: int = 1, stagger_ms: float = 0.0) -> list[Answer]:
    """Send ``requests`` in turn (each one request's tensors, batch first where the deployment batches) from
    ``concurrency`` connections until ``count`` were sent, ``stop`` is set or ``deadline_s`` passed; every answer,
    in the order sent. ``protocol``: http or grpc for a stateless deployment (a decoupled one always streams);
    a sequence model's sequences are sent as its description's ``sequences`` say; ``timeout_s``:
    one request's bound (default: the server's ``request_timeout_s``, which the suite sets from the profile; an
    unanswered request fails, and its connection is opened again); ``options``: the
    priority, queue timeout or classification every request carries; ``flags``: (sequence id, START, END) set on
    every request as given instead of the sequence pattern ((0, False, False): a request to a sequence model
    without a correlation id); ``give_up``: send no more once this many requests went unanswered within their bound
    (a hanging deployment's verdict needs no more of them; 0: never). ``script``: a sequence model's whole sequences
    as given (each step one request's tensors) instead of ``requests`` and the drawn pattern, with ids from
    ``first_id``: ``together`` each on its own connection at once, else one after another on one
    (:func:`send_sequences`). ``stagger_ms``: each connection sends one request, the k-th k x ``stagger_ms`` after
    the first, all from this one event loop (a burst whose send and answer times no thread scheduling skews)."""
    if script:
        concurrency, count, requests = len(script) if together else 1, sum(map(len, script)), [script[0][0]]
    if count is None and stop is None:
        raise ValueError("exchange needs a count of requests or a stop event: it never sends without an end")
    timeout_s = timeout_s or getattr(server, "request_timeout_s", None) or TIMEOUT_S
    driver = driver_for(description)
    if script and not driver.sequenced:
        raise ValueError(f"{model} is not a sequence model ({', '.join(driver.names)}): whole sequences are sent to "
                         f"a deployment with sequence_batching only")
    batch = len(next(iter(requests[0].values()))) if description.batching and requests[0] else 1
    point, _ = driver.point(LoadPoint(batch_size=max(batch, 1), concurrency=concurrency, protocol=protocol))
    host, port = server.http_url.rsplit(":", 1)
    names = list(outputs)

    async def run() -> list[Answer]:
        transport = driver.transport(server, timeout_s, point)
        grpc = transport is not None
        transport = transport or HttpTransport.of(server)

        def made(r) -> PreparedRequest:
            return prepare(host, model, {k: np.ascontiguousarray(v) for k, v in r.items()}, names, grpc,
                           driver.batched, options=options)

        prepared, pattern = [made(r) for r in requests], None
        if script:
            from tritonsuite.load.kinds.sequence import Scripted, decorator

            pattern = Scripted([[made(step) for step in steps] for steps in script], decorator(grpc), first_id,
                               together)
        elif flags is not None:
            prepared = [flagged(r, grpc, flags) for r in prepared]
        elif driver.sequenced:  # the callers' requests are sent as given, only a sequence's flags are added
            pattern = driver.pattern(prepared[0], grpc, point)
        answers: list[Answer] = []
        sent, hung = [0], [0]
        end_by = time.monotonic() + deadline_s

        def more() -> PreparedRequest | None:
            if (count is not None and sent[0] >= count) or (stop is not None and stop.is_set()) \
                    or time.monotonic() > end_by or (give_up and hung[0] >= give_up):
                return None
            sent[0] += 1
            return prepared[(sent[0] - 1) % len(prepared)]

        async def one(conn, request: PreparedRequest, sequence=None):
            start = time.monotonic()
            try:
                _, _, decoded, *_ = await within(transport.exchange(conn, request), timeout_s)
            except (asyncio.TimeoutError, Hang):
                hung[0] += 1
                answers.append(Answer(start, time.monotonic(), False, error=f"no answer within {timeout_s:g} s",
                                      sequence=sequence))
                return False  # the connection may still carry the lost request: a new one for the next
            except Exception as exc:  # noqa: BLE001 - the answer's verdict, kept
                answers.append(Answer(start, time.monotonic(), False, error=first_line(exc), sequence=sequence))
                return not getattr(conn, "error", None)
            first = decoded[0] if isinstance(decoded, list) and decoded else decoded
            answers.append(Answer(start, time.monotonic(), True, getattr(first, "version", ""), outputs=decoded,
                                  sequence=sequence))
            return True

        begin = time.monotonic() + STAGGER_LEAD_S

        async def worker(slot: int) -> None:
            conn = await transport.open()
            try:
                if stagger_ms:
                    await asyncio.sleep(max(begin + slot * stagger_ms / 1e3 - time.monotonic(), 0.0))
                while (pattern is None or pattern.has_more(slot)) and (request := more()) is not None:
                    sequence = None
                    if pattern is not None:
                        request = pattern.request(slot)
                        live = pattern.live[slot]
                        sequence = (live.sequence_id, live.sent - 1)
                    usable = await one(conn, request, sequence=sequence)
                    if pattern is not None:
                        pattern.done(slot)
                    if stagger_ms:
                        break  # one request per connection
                    if not usable:
                        conn.close()
                        conn = await transport.open()
                if pattern is not None and slot in pattern.live:
                    live = pattern.live[slot]
                    for request in pattern.closing(slot):
                        await one(conn, request, sequence=(live.sequence_id, live.sent))
            finally:
                conn.close()

        await asyncio.gather(*(worker(slot) for slot in range(concurrency)))
        await asyncio.sleep(0)  # let closed channels finish closing
        return sorted(answers, key=lambda a: a.start)

    return asyncio.run(run())


def send_sequences(server, description: ModelDescription, sequences: Sequence[Sequence[Mapping[str, np.ndarray]]],
                   outputs: Sequence[str], protocol: str = "grpc", together: bool = False, first_id: int = 1,
                   timeout_s: float | None = None) -> list[list[dict[str, np.ndarray]]]:
    """Whole sequences of a sequence model (each a list of one request's tensors per step, batch first where it
    batches), sent through :func:`exchange` as its driver sends any: each step's decoded outputs, by sequence.
    ``together``: every sequence at once, each on its own connection, so their requests interleave on the server;
    else one after another, alone. Sequence ids run from ``first_id``. A step that fails or is not answered within
    ``timeout_s`` (default: the server's bound) raises, naming the sequence and the step."""
    if protocol not in ("grpc", "http"):
        raise ValueError(f"protocol {protocol!r}: valid choices are 'grpc' and 'http'")
    answers = exchange(server, description.name, description, (), outputs, protocol=protocol, timeout_s=timeout_s,
                       script=sequences, together=together, first_id=first_id, deadline_s=DEADLINE_S)
    failed = next((a for a in answers if not a.ok), None)
    if failed is not None:
        where = "sequence {}, step {}".format(*failed.sequence)  # every scripted answer has its place
        raise (Hang if failed.error.startswith("no answer within") else RuntimeError)(f"{failed.error} ({where})")
    found: dict[int, list] = {}
    for answer in sorted(answers, key=lambda a: a.sequence):
        found.setdefault(answer.sequence[0], []).append(answer.outputs)
    if len(answers) < (steps := sum(map(len, sequences))):  # the deadline ran out before every step was sent
        raise Hang(f"{len(answers)} of {steps} steps sent within {DEADLINE_S:g} s")
    return [found.get(first_id + i, []) for i in range(len(sequences))]
