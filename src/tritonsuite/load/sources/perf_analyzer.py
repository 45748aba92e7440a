"""perf_analyzer 2.51 as a load source (``--loadgen perf_analyzer``): NVIDIA's load generator in a child process
(:mod:`tritonsuite.load.perfanalyzer`), one closed-loop point of one deployment at a time, the deployment's kind
given by its driver's options (sequences, streaming, BLS composing models). It carries no accuracy probes, sends no
request rate, cannot stop a point early, tells no progress per window and measures one deployment at a time: it
has none of the capabilities, and says so when asked (:meth:`~tritonsuite.load.sources.base.LoadSource.check`)."""
from __future__ import annotations

from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load import perfanalyzer
from tritonsuite.load.engine import Measurement, Progress, StopEarly, Traffic
from tritonsuite.load.sources.base import LoadSource


class PerfAnalyzerSource(LoadSource):
    name = "perf_analyzer"
    capabilities = frozenset()

    def unavailable(self) -> str | None:
        return perfanalyzer.unavailable_reason()  # fetched once, checked; a one-line reason where it cannot start

    def measure(self, server, traffic: Traffic, settings: MeasurementSettings = MeasurementSettings(),
                stop_early: StopEarly | None = None, progress: Progress | None = None) -> Measurement:
        self.check(traffic, stop_early)  # progress is advisory: the point is measured the same, told at its end
        return perfanalyzer.measure_with_perf_analyzer(server, traffic.model, traffic.inputs, traffic.outputs,
                                                       traffic.point, settings,
                                                       extra=traffic.driver.arguments())


SOURCE = PerfAnalyzerSource()
