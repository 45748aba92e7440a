"""One driver per deployment, chosen in one place: :func:`driver_for` reads a deployment's
:class:`~tritonsuite.core.description.ModelDescription` and returns the :class:`Driver` every stage uses to know
what its kind changes: the point it can take (and the notes its row carries), refusals, the transport its
requests travel on, the pattern they follow, the composing models whose time the row breaks down, what the kind adds
to a row, perf_analyzer's arguments for it and which conformance checks apply.

A deployment may be several kinds at once (a decoupled sequence model, a BLS model that streams): the driver
composes the :class:`Kind` of each that applies, in :data:`KINDS`' order; a deployment none applies to is
stateless (one independent request at a time, over HTTP or unary gRPC). How a batchless deployment's tensors or a
dtype travel is the codec's (:mod:`tritonsuite.load.http`, :mod:`tritonsuite.load.grpc`), not a kind.

Adding a kind: one module here with a :class:`Kind` subclass (its ``applies`` reads the description), named in
:data:`KINDS`, and its tests. Nothing else decides on which kind a deployment is: the checks, the tune and the
workers ask the driver what they need (``sequenced``, ``request_batch``, ``protocols``, ``lacks``,
``loaded_beside``, ``unqueued``, ``untunable``). ``tests/unit/test_kind_seam.py`` walks the package's syntax for
any other place that does, each legitimate one listed with its reason (reading a team's repository, building a
reference, the field a check judges, describing the kind in words). perf_analyzer likewise chooses its load manager
by mode, never by kind, and keeps sequences and streaming in the request layer.
"""
from __future__ import annotations

from tritonsuite.core.description import ModelDescription
from tritonsuite.load.kinds.base import Driver, Kind
from tritonsuite.load.kinds.composing import Composing
from tritonsuite.load.kinds.ragged import Ragged
from tritonsuite.load.kinds.sequence import Sequence
from tritonsuite.load.kinds.stream import Stream

#: The kinds beyond stateless, in the order a driver composes them
KINDS: tuple[type[Kind], ...] = (Sequence, Stream, Composing, Ragged)

__all__ = ["Driver", "KINDS", "Kind", "driver_for"]


def driver_for(description: ModelDescription) -> Driver:
    """The driver of a deployment: its description's kinds composed (a sequence model's sequences sent as its
    description's ``sequences`` say)."""
    return Driver(description, tuple(kind(description) for kind in KINDS if kind.applies(description)))
