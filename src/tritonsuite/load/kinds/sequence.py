"""A sequence model (the sequence batcher): requests in sequences, each with its id and START/END flags
(:mod:`tritonsuite.load.sequences`, perf_analyzer's ``--sequence-length``, ``--sequence-length-variation`` and
``--sequence-id-range``), one sample per request."""
from __future__ import annotations

from tritonsuite.load.kinds.base import Kind
from tritonsuite.load.sequences import BATCH_ONE, SequenceSettings, Sequences, grpc_decorator, http_decorator

class Sequence(Kind):
    accuracy = "sequences"  # judged by whole exchanges (judge.responses), not by probes in the load
    sequenced = True
    max_request_batch = 1  # Triton's sequence batcher takes one sample per request, on any server
    lacks = {"stateless requests": "a sequence model refuses a request without a sequence id and START/END flags "
                                   "(tritonsuite.load.sequences sends them)"}

    @staticmethod
    def applies(description) -> bool:
        return description.sequence

    def refuse(self, point, probes) -> str:  # refused by Triton itself, on any server
        return f"at batch {point.batch_size}: {BATCH_ONE}" if point.batch_size > self.max_request_batch else ""

    def _settings(self, point=None) -> SequenceSettings:
        return self.sequences or (SequenceSettings(seed=point.seed) if point is not None else SequenceSettings())

    def pattern(self, request, grpc: bool, point):
        return Sequences(self._settings(point), (grpc_decorator if grpc else http_decorator)(request))

    def summarise(self, measurement, windows, generator) -> None:
        measurement.meta["sequences"] = generator.sequences.summary(generator.closing_sent)

    def arguments(self) -> list[str]:
        s = self._settings()
        return ["--sequence-length", str(s.length), "--sequence-length-variation", f"{s.variation_percent:g}",
                "--sequence-id-range", f"{s.id_start}:{s.id_end}" if s.id_end else str(s.id_start)]

    def unqueued(self) -> str:
        return "sequence_batching: Triton's sequence batcher has no queue policy or priority levels"
