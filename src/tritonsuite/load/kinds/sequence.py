"""A sequence model (the sequence batcher), its kind and its request pattern: one live sequence per slot, with its id
and start/end flags, one sample per request.

A deployment with ``sequence_batching`` (``direct`` or ``oldest``; its control inputs START/END/READY/CORRID are
filled by the server, never sent) needs every request to name its sequence: ``sequence_id``, ``sequence_start`` on
the first request, ``sequence_end`` on the last. perf_analyzer's semantics, with its option names (the
description's :class:`~tritonsuite.core.description.SequenceSettings`):

- ``--sequence-length`` (20): requests per sequence, varied by ``--sequence-length-variation`` (20 %): a length is
  drawn uniformly from length x (1 ± variation), at least 1 (perf_analyzer's ``GetRandomSequenceLength``), from a
  seeded generator, so a point's sequences repeat run to run;
- ``--sequence-id-range START[:END]`` (1): ids from START upwards, wrapping to START after END - 1 when an end is
  given; an id still live is skipped, so two live sequences never share one;
- closed loop: one live sequence per concurrency slot (a slot's next request continues its sequence, and a new one
  starts when it ends); open loop: each scheduled request goes to the sequence that has waited longest with no
  request in flight (a new one when every live sequence is waiting), so a sequence's requests stay in order and
  none waits past the server's idle timeout while others are sent;
- when a point ends, every sequence still open gets one more request carrying ``sequence_end`` (outside the
  measured windows), so no sequence is left for the server's idle timeout.

The request itself is serialised once (:mod:`tritonsuite.load.http`, :mod:`tritonsuite.load.grpc`); per request only
the sequence parameters change: appended as a second serialised ``ModelInferRequest`` for gRPC (protobuf merges
concatenated messages, later map entries winning), written into the JSON header for HTTP.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tritonsuite.core.description import SequenceSettings, SequenceSettingsError
from tritonsuite.load.http import PreparedRequest
from tritonsuite.load.kinds.base import Kind

#: why a sequence model is sent batch 1 alone: Triton refuses more, on any server ("inference request to model ...
#: must specify batch-size 1 due to requirements of sequence batcher")
BATCH_ONE = "Triton's sequence batcher takes batch 1 per request"


def draw_length(rng: np.random.Generator, settings: SequenceSettings) -> int:
    """A sequence's length: uniform in length x (1 ± variation), at least 1 (as perf_analyzer draws it)."""
    offset = (2.0 * rng.random() - 1.0) * settings.variation_percent / 100.0 * settings.length
    return max(1, int(settings.length + offset))


#: (sequence id, start, end) -> the request carrying them
Decorate = Callable[[int, bool, bool], PreparedRequest]


def decorator(grpc: bool) -> Callable[[PreparedRequest], Decorate]:
    """The encoder of a sequence's id and flags for a request serialised for gRPC or for HTTP."""
    return grpc_decorator if grpc else http_decorator


def grpc_decorator(request: PreparedRequest) -> Decorate:
    """Sequence parameters for a request serialised by :func:`tritonsuite.load.grpc.prepare_grpc_request`."""
    from tritonclient.grpc import service_pb2

    def decorate(sequence_id: int, start: bool, end: bool) -> PreparedRequest:
        extra = service_pb2.ModelInferRequest()
        extra.parameters["sequence_id"].int64_param = sequence_id
        extra.parameters["sequence_start"].bool_param = start
        extra.parameters["sequence_end"].bool_param = end
        return PreparedRequest(request.data + extra.SerializeToString(), request.decode_outputs, request.batched)

    return decorate


def http_decorator(request: PreparedRequest) -> Decorate:
    """Sequence parameters written into the JSON header of a request from :func:`tritonsuite.load.http.prepare_request`
    (its binary tensors are kept as they are)."""
    head, _, body = request.data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    json_size = next((int(v) for k, _, v in (line.partition(b":") for line in lines)
                      if k.strip().lower() == b"inference-header-content-length"), None)
    header = json.loads(body[:json_size] if json_size is not None else body)
    binary = body[json_size:] if json_size is not None else b""
    kept = [line for line in lines if line.split(b":")[0].strip().lower() not in
            (b"inference-header-content-length", b"content-length")]

    def decorate(sequence_id: int, start: bool, end: bool) -> PreparedRequest:
        parameters = {**header.get("parameters", {}), "sequence_id": sequence_id, "sequence_start": start,
                      "sequence_end": end}
        text = json.dumps({**header, "parameters": parameters}, separators=(",", ":")).encode()
        new_head = b"\r\n".join(kept + [b"Inference-Header-Content-Length: %d" % len(text),
                                        b"Content-Length: %d" % (len(text) + len(binary))])
        return PreparedRequest(new_head + b"\r\n\r\n" + text + binary, request.decode_outputs,
                               request.batched)

    return decorate


@dataclass
class _Live:
    sequence_id: int
    length: int
    sent: int = 0
    in_flight: bool = False
    answered: int = 0  # when its last request was answered, in the pattern's count of answers (0: never)


@dataclass
class Sequences:
    """The live sequences of one point (see the module docstring): ``request(slot)`` gives a slot's next request,
    ``closing()`` the requests that end the sequences still open."""

    settings: SequenceSettings
    decorate: Decorate
    live: dict[int, _Live] = field(default_factory=dict)
    started: int = 0  # sequences begun
    ended: int = 0  # sequences whose end request was sent
    _next_id: int = 0
    _answers: int = 0  # requests answered so far (the order free_slot serves waiting sequences in)

    def __post_init__(self):
        self._rng = np.random.default_rng(self.settings.seed)
        self._next_id = self.settings.id_start

    def _new_id(self) -> int:
        s, taken = self.settings, {q.sequence_id for q in self.live.values()}
        span = (s.id_end - s.id_start) if s.id_end else None
        for _ in range(span or 1):
            candidate = self._next_id
            self._next_id += 1
            if s.id_end and self._next_id >= s.id_end:
                self._next_id = s.id_start
            if candidate not in taken:
                return candidate
        raise SequenceSettingsError(f"--sequence-id-range {s.id_start}:{s.id_end}: {span} ids, all live; give a "
                                    f"range wider than the concurrency")

    def has_more(self, slot: int) -> bool:  # a drawn sequence follows every one that ends
        return True

    def free_slot(self) -> int:
        """Open loop: the slot whose sequence has waited longest with no request in flight (a new slot when all are
        waiting). The longest-waiting, not the first: with fast answers the first free slot is nearly always the
        same, and a sequence begun while it was busy would wait past the server's idle timeout, which then forgets
        it (its next request refused for want of START; seen on a busy host at 60 requests/s)."""
        free = [(live.answered, slot) for slot, live in self.live.items() if not live.in_flight]
        return min(free)[1] if free else max(self.live, default=-1) + 1

    def request(self, slot: int) -> PreparedRequest:
        live = self.live.get(slot)
        if live is None:
            live = self.live[slot] = _Live(self._new_id(), draw_length(self._rng, self.settings))
            self.started += 1
        start, end = live.sent == 0, live.sent == live.length - 1
        live.sent += 1
        live.in_flight = True
        if end:
            self.ended += 1
        return self.decorate(live.sequence_id, start, end)

    def done(self, slot: int) -> None:
        """The slot's request was answered: its sequence may take the next one. An ended sequence leaves only now,
        so its id is not taken again while its end request is still on its way (a new sequence's START could
        otherwise reach the server before the old one's END, which would then end the new one)."""
        live = self.live.get(slot)
        if live is None:
            return
        live.in_flight = False
        self._answers += 1
        live.answered = self._answers
        if live.sent >= live.length:
            del self.live[slot]

    def closing(self, slot: int | None = None) -> list[PreparedRequest]:
        """One request with ``sequence_end`` for every sequence still open (started, not ended), or for ``slot``'s
        alone; they are then ended."""
        ending = [s for s in self.live if slot is None or s == slot]
        requests = [self.decorate(q.sequence_id, q.sent == 0, True) for q in (self.live.pop(s) for s in ending)
                    if 0 < q.sent < q.length]
        self.ended += len(requests)
        return requests

    def summary(self, closing: int) -> dict:
        return {**self.settings.to_json(), "sequences_started": self.started, "sequences_ended": self.ended,
                "ended_when_the_point_ended": closing}


class Scripted:
    """Whole sequences given step by step (each step one prepared request), sent as :class:`Sequences` sends any: a
    slot's requests continue its sequence, each with its id and START/END flags. ``together``: slot i sends sequence
    i; else slot 0 sends them one after another. Ids run from ``first_id``, in the given order."""

    def __init__(self, script: list[list[PreparedRequest]], decorator: Callable[[PreparedRequest], Decorate],
                 first_id: int = 1, together: bool = False):
        self.script, self.decorator, self.first_id = script, decorator, first_id
        self.todo = {i: [i] for i in range(len(script))} if together else {0: list(range(len(script)))}
        self.live: dict[int, _Live] = {}
        self._index: dict[int, int] = {}  # slot -> the sequence it sends now
        self._answers = 0  # as Sequences counts them (its done is this pattern's)

    def has_more(self, slot: int) -> bool:
        return slot in self.live or bool(self.todo.get(slot))

    def request(self, slot: int) -> PreparedRequest:
        if slot not in self.live:
            index = self._index[slot] = self.todo[slot].pop(0)
            self.live[slot] = _Live(self.first_id + index, len(self.script[index]))
        live = self.live[slot]
        step = self.script[self._index[slot]][live.sent]
        start, end = live.sent == 0, live.sent == live.length - 1
        live.sent, live.in_flight = live.sent + 1, True
        return self.decorator(step)(live.sequence_id, start, end)

    done = Sequences.done

    def closing(self, slot: int | None = None) -> list[PreparedRequest]:
        return []  # every sequence's last step carries its END


class Sequence(Kind):
    accuracy = "sequences"  # judged by whole exchanges (judge.responses), not by probes in the load
    sequenced = True
    max_request_batch = 1  # Triton's sequence batcher takes one sample per request, on any server
    lacks = {"stateless requests": "a sequence model refuses a request without a sequence id and START/END flags "
                                   "(tritonsuite.load.kinds.sequence sends them)"}

    @staticmethod
    def applies(description) -> bool:
        return description.sequence

    def refuse(self, point, probes) -> str:  # refused by Triton itself, on any server
        return f"at batch {point.batch_size}: {BATCH_ONE}" if point.batch_size > self.max_request_batch else ""

    def _settings(self, point=None) -> SequenceSettings:
        return self.description.sequence_settings(point.seed if point is not None else 0)

    def pattern(self, request, grpc: bool, point):
        return Sequences(self._settings(point), decorator(grpc)(request))

    def summarise(self, measurement, windows, generator) -> None:
        measurement.meta["sequences"] = generator.sequences.summary(generator.closing_sent)

    def arguments(self) -> list[str]:
        s = self._settings()
        return ["--sequence-length", str(s.length), "--sequence-length-variation", f"{s.variation_percent:g}",
                "--sequence-id-range", f"{s.id_start}:{s.id_end}" if s.id_end else str(s.id_start)]

    def unqueued(self) -> str:
        return "sequence_batching: Triton's sequence batcher has no queue policy or priority levels"
