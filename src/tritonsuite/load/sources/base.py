"""What every load source is: one interface (:class:`LoadSource`), the capabilities a caller may ask of it, and the
one error a source answers when asked for what it cannot do. The registry that names the sources is the package
(:mod:`tritonsuite.load.sources`)."""
from __future__ import annotations

from typing import Sequence

from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load.engine import Measurement, Progress, StopEarly, Traffic

#: A source carries accuracy probes inside its load (``Traffic.probes``: their decoded outputs come back in
#: ``Measurement.probe_responses``; accuracy under load).
PROBES = "probes"
#: A source measures several deployments at once over the same windows (:meth:`LoadSource.measure_together`: a mix).
TOGETHER = "together"
#: A source sends a request rate (open loop, ``LoadPoint.request_rate``) as well as a concurrency (closed loop).
OPEN_LOOP = "open_loop"
#: A source asks a ``stop_early`` check after each window and gives the point up when told (searches, tune).
STOP_EARLY = "stop_early"
#: A source tells a ``progress`` callable after each window how the point is going (a source without it says
#: nothing until the point ends; the point is measured the same).
PROGRESS = "progress"
CAPABILITIES = (PROBES, TOGETHER, OPEN_LOOP, STOP_EARLY, PROGRESS)


class Unsupported(ValueError):
    """A caller asked a source for something it cannot do (one line: the source, what, and why)."""


class LoadSource:
    """Who sends a point's requests and measures it: one point of one deployment (:meth:`measure`), or several
    deployments together (:meth:`measure_together`), each answered with the engine's :class:`Measurement` (the same
    row schema, whoever measured it; ``meta["loadgen"]`` says who).

    ``name`` is the value of ``--loadgen`` that chooses it and of the row's ``loadgen``; ``capabilities`` what it
    can do beyond a closed-loop point of one deployment (:data:`CAPABILITIES`): a caller asks :meth:`can`, never
    the name. A source asked for what it cannot do raises :class:`Unsupported` (:meth:`require`)."""

    name: str = ""
    capabilities: frozenset[str] = frozenset()

    def can(self, capability: str) -> bool:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown load-source capability {capability!r}; valid: {', '.join(CAPABILITIES)}")
        return capability in self.capabilities

    def require(self, capability: str, what: str) -> None:
        """Raise :class:`Unsupported` naming ``what`` the caller asked for unless this source can ``capability``."""
        if not self.can(capability):
            raise Unsupported(f"load generator {self.name} cannot {what} (it lacks the {capability!r} capability)")

    def unavailable(self) -> str | None:
        """Why this source cannot run on this host (one line), or None. Asked once, before anything starts."""
        return None

    def measure(self, server, traffic: Traffic, settings: MeasurementSettings = MeasurementSettings(),
                stop_early: StopEarly | None = None, progress: Progress | None = None) -> Measurement:
        """One point of ``traffic.model`` at ``traffic.point``; its row's columns and status."""
        raise NotImplementedError

    def measure_together(self, server, traffic: Sequence[Traffic],
                         settings: MeasurementSettings = MeasurementSettings(),
                         progress: Progress | None = None) -> list[Measurement]:
        """Several deployments at once, over the same windows: one Measurement each, in order (:data:`TOGETHER`)."""
        self.require(TOGETHER, "measure several deployments together (a mix)")
        raise NotImplementedError

    def check(self, traffic: Traffic, stop_early: StopEarly | None = None) -> None:
        """Refuse, in one line, what this point asks that the source cannot do (probes, a rate, an early stop)."""
        if traffic.probes:
            self.require(PROBES, "carry accuracy probes in its load")
        if traffic.point.open_loop:
            self.require(OPEN_LOOP, f"send a request rate ({traffic.point.describe()})")
        if stop_early is not None:
            self.require(STOP_EARLY, "give a point up early (a search's or a tune's stop check)")

    def __repr__(self) -> str:
        return f"<load source {self.name}: {', '.join(sorted(self.capabilities)) or 'closed loop only'}>"
