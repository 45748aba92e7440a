"""The suite's own engine as a load source (``--loadgen suite``): asyncio load generators in this process
(:mod:`tritonsuite.load.engine`), closed and open loop, accuracy probes, early stops, progress, and several
deployments together. Every capability; the reference the others are compared with."""
from __future__ import annotations

from typing import Sequence

from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load import engine
from tritonsuite.load.engine import Measurement, Progress, StopEarly, Traffic
from tritonsuite.load.sources.base import CAPABILITIES, LoadSource


class InProcessSource(LoadSource):
    name = "suite"
    capabilities = frozenset(CAPABILITIES)

    def measure(self, server, traffic: Traffic, settings: MeasurementSettings = MeasurementSettings(),
                stop_early: StopEarly | None = None, progress: Progress | None = None) -> Measurement:
        t = traffic
        return engine.measure(server, t.model, t.inputs, t.outputs, t.point, settings, stop_early,
                              description=t.description, probes=t.probes, probe_share=t.probe_share,
                              probe_seed=t.probe_seed, progress=progress)

    def measure_together(self, server, traffic: Sequence[Traffic],
                         settings: MeasurementSettings = MeasurementSettings(),
                         progress: Progress | None = None) -> list[Measurement]:
        return engine.measure_together(server, traffic, settings, progress)


SOURCE = InProcessSource()
