"""The driver of a deployment and the hooks a kind fills; a stateless deployment has no kind beside its driver."""
from __future__ import annotations

from tritonsuite.core.description import ModelDescription
from tritonsuite.load.point import LoadPoint


class Kind:
    """What one kind changes. Every hook's default leaves the stateless behaviour as it is."""

    def __init__(self, description: ModelDescription):
        self.description = description

    @staticmethod
    def applies(description: ModelDescription) -> bool:
        raise NotImplementedError

    def point(self, point: LoadPoint) -> tuple[LoadPoint, str]:
        """The point as this kind sends it, and a note for its row ("" when the change needs none)."""
        return point, ""

    def refuse(self, point: LoadPoint, probes) -> str:
        """Why the engine cannot drive this point of this kind ("" when it can), after :meth:`point` changed it: a
        point the kind cannot take (a caller's mistake to the engine; a case the suite skips)."""
        return ""

    #: its requests travel in sequences (a correlation id and START/END flags on each): a request sent alone is one
    #: step of a sequence of its own, and a stateless one is refused
    sequenced = False
    #: the most samples one request may carry (None: the point's batch size)
    max_request_batch: int | None = None
    #: the protocols its requests can travel on (a decoupled model's responses come over a gRPC stream)
    protocols: tuple[str, ...] = ("http", "grpc")

    #: how the kind's accuracy is judged when it is not by probes riding in the load: "sequences" (each sequence
    #: sent interleaved against the same sent alone) or "streams" (each request's responses against it sent alone);
    #: "" where probes may ride in the load
    accuracy = ""

    def transport(self, server, bound_s: float, shared: bool):
        """The transport its requests travel on to ``server`` (None: the point's protocol decides)."""
        return None

    def pattern(self, request, grpc: bool, point: LoadPoint):
        """The request pattern the load generator follows (None: independent requests)."""
        return None

    def composing(self) -> list[str]:
        """The models whose time the row breaks down (an ensemble's steps, a BLS model's callees)."""
        return []

    def scheduled(self) -> list[ModelDescription] | None:
        """The models whose own schedulers execute this deployment's requests, whose batching and instances a check
        judges (None: the deployment's own)."""
        return None

    def summarise(self, measurement, windows, generator) -> None:
        """Add what this kind adds to a measured row."""

    def arguments(self) -> list[str]:
        """perf_analyzer's options for this kind, the engine's semantics in its names."""
        return []

    #: what a deployment of this kind lacks that a stateless one has, each with why: "stateless requests" (a
    #: request may be sent alone, without a sequence's id and flags), "cached responses" (Triton's response cache
    #: may answer it). A caller needing one asks :meth:`Driver.lacks`
    lacks: dict[str, str] = {}

    def loaded_beside(self) -> list[str]:
        """The models a server must have loaded for this deployment to answer, that loading it does not load (a
        BLS model's callees; an ensemble's steps load with it)."""
        return []

    def unqueued(self) -> str:
        """Why its requests wait in no batcher queue of its own ("" when a dynamic batcher may queue them)."""
        return ""

    def untunable(self) -> str:
        """Why its own configuration cannot be tuned ("" when it can)."""
        return ""


class Driver:
    """A deployment's kinds composed: every stage asks the driver, never the description, what its kind changes."""

    def __init__(self, description: ModelDescription, kinds: tuple[Kind, ...] = ()):
        self.description, self.kinds = description, kinds

    @property
    def names(self) -> tuple[str, ...]:
        """The kinds in words, as rows carry them (``("model",)`` for a stateless one)."""
        return self.description.kinds

    @property
    def batched(self) -> bool:
        """False for a batchless deployment (max_batch_size 0): the codec sends no batch dimension."""
        return self.description.batching

    @property
    def probes(self) -> bool:
        """Whether accuracy probes may ride in its load (a sequence or a stream is judged by whole exchanges)."""
        return not self.accuracy

    @property
    def accuracy(self) -> str:
        """How its accuracy is judged by whole exchanges (:attr:`Kind.accuracy`; the first kind's that has one), ""
        where probes ride in its load."""
        return next((kind.accuracy for kind in self.kinds if kind.accuracy), "")

    def point(self, point: LoadPoint) -> tuple[LoadPoint, list[str]]:
        """The point as the kinds need it, and the notes its row carries on what changed. A point the kinds still
        refuse then (a sequence model at batch > 1, which Triton's sequence batcher refuses on any server) raises
        ExportUnsupported: the case skips with the reason, nothing is sent."""
        notes = []
        for kind in self.kinds:
            point, note = kind.point(point)
            notes += [note] if note else []
        for kind in self.kinds:
            if reason := kind.refuse(point, ()):
                from tritonsuite.deploy.export import ExportUnsupported

                raise ExportUnsupported(f"{self.description.name} {reason}")
        return point, notes

    def check(self, model: str, point: LoadPoint, probes) -> None:
        """Raise ValueError naming why the engine cannot drive this point of this deployment."""
        if probes and not self.probes:
            raise ValueError(f"{model} is {' and '.join(self.names)}: its accuracy is checked by whole sequences of "
                             f"requests and responses (load.kinds.sequence, load.streams), not by probes")
        for kind in self.kinds:
            if reason := kind.refuse(point, probes):
                raise ValueError(f"{model} {reason}")

    def transport(self, server, bound_s: float, point: LoadPoint):
        """How its requests travel to ``server``: a kind's own transport, else unary gRPC when the point asks, else
        HTTP (None). The server's gRPC address is read only where a gRPC transport is made: a server known by its
        HTTP address alone (``--server remote`` without ``--triton-grpc-url``) serves HTTP points, and a gRPC one
        raises the server's own line saying what to give."""
        for kind in self.kinds:
            found = kind.transport(server, bound_s, point.open_loop)
            if found is not None:
                return found
        if point.protocol == "grpc":
            from tritonsuite.load.grpc import GrpcTransport

            return GrpcTransport(server.grpc_url, bound_s, shared=point.open_loop, access=server.access)
        return None

    def protocol(self, point: LoadPoint, transport) -> str:
        """The row's protocol, in words."""
        return "grpc (bidirectional stream)" if getattr(transport, "streaming", False) else point.protocol

    def pattern(self, request, grpc: bool, point: LoadPoint):
        for kind in self.kinds:
            found = kind.pattern(request, grpc, point)
            if found is not None:
                return found
        return None

    def composing(self) -> list[str]:
        return [name for kind in self.kinds for name in kind.composing()]

    def scheduled(self) -> list[ModelDescription]:
        """The models whose schedulers execute its requests (their batching and instances are judged under its
        load): an ensemble's steps, else the deployment itself."""
        return next((found for kind in self.kinds if (found := kind.scheduled()) is not None), [self.description])

    def summarise(self, measurement, windows, generator) -> None:
        measurement.meta["kind"] = list(self.names)
        for kind in self.kinds:
            kind.summarise(measurement, windows, generator)

    def arguments(self) -> list[str]:
        """perf_analyzer's options for the deployment's kinds (none for a stateless one)."""
        return [arg for kind in self.kinds for arg in kind.arguments()]

    def lacks(self, capability: str) -> str:
        """Why the deployment lacks ``capability`` (:attr:`Kind.lacks`; "" when it has it)."""
        return next((why for kind in self.kinds if (why := kind.lacks.get(capability, ""))), "")

    @property
    def sequenced(self) -> bool:
        """Whether its requests travel in sequences (:attr:`Kind.sequenced`)."""
        return any(kind.sequenced for kind in self.kinds)

    def request_batch(self, batch: int) -> int:
        """The samples one of its requests carries at ``batch`` (a sequence model's: one)."""
        return min([max(batch, 1)] + [k.max_request_batch for k in self.kinds if k.max_request_batch is not None])

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocols its requests can travel on (every kind's allows them)."""
        return tuple(p for p in ("http", "grpc") if all(p in kind.protocols for kind in self.kinds))

    def loaded_beside(self) -> list[str]:
        return [name for kind in self.kinds for name in kind.loaded_beside()]

    def unqueued(self) -> str:
        return next((why for kind in self.kinds if (why := kind.unqueued())), "")

    def untunable(self) -> str:
        """Why its configuration cannot be tuned: a kind's reason, or batchless (nothing a batcher could vary)."""
        found = next((why for kind in self.kinds if (why := kind.untunable())), "")
        if found or self.batched:
            return found
        return ("is batchless (max_batch_size 0): Triton batches none of its requests, so neither a batcher's "
                "settings nor max_batch_size can vary")
