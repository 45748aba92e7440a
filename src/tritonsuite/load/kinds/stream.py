"""A decoupled model: any number of responses per request, over a gRPC bidirectional stream
(:mod:`tritonsuite.load.streams`, perf_analyzer's ``--streaming``); a request completes at its final response, and
the row adds time to first response, inter-response latency and responses per request and per second."""
from __future__ import annotations

from dataclasses import replace

from tritonsuite.load.kinds.base import Kind


class Stream(Kind):
    accuracy = "streams"  # judged by whole exchanges (judge.responses), not by probes in the load
    protocols = ("grpc",)
    lacks = {"cached responses": "decoupled: Triton does not cache decoupled responses"}

    @staticmethod
    def applies(description) -> bool:
        return description.decoupled

    def point(self, point):
        note = "decoupled: inputs and outputs travel on a gRPC stream, not through shared memory" \
            if point.shared_memory else ""
        return replace(point, shared_memory=False, protocol="grpc"), note

    def refuse(self, point, probes) -> str:
        return ("is decoupled: its responses come over a gRPC stream, not through shared memory"
                if point.shared_memory else "")

    def transport(self, server, bound_s: float, shared: bool):
        from tritonsuite.load.streams import StreamTransport

        return StreamTransport(server.grpc_url, bound_s, shared=shared, access=server.access)

    def summarise(self, measurement, windows, generator) -> None:
        from tritonsuite.load.streams import summarise_streams

        summarise_streams(measurement, windows, generator.pool)

    def arguments(self) -> list[str]:
        return ["--streaming"]
