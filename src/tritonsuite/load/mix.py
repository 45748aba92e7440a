"""Mixed load: several deployments on one server, each with its own traffic, measured alone and together.

A mix is a list of :class:`~tritonsuite.load.engine.Traffic` (a deployment and its load point: a concurrency or a
request rate). :func:`run_mix` measures it in interleaved rounds with one load source (:mod:`tritonsuite.load.sources`:
the suite's engine unless told otherwise; it must have the ``together`` capability), alone (``measure``) and
together (``measure_together``)::

    round 1: A alone, B alone, A+B together;  round 2: B alone, A alone, A+B together;  ...

so drift on a shared host (other processes, onnxruntime's arena growing) falls on both sides alike, and each
deployment's together ÷ alone ratio (:mod:`tritonsuite.judge.interference`) compares windows measured minutes apart
at most. The order of the alone measurements alternates round by round. Each measurement is handed to
``on_measured`` the moment it exists (the suite records its row then), with its place in the run's timeline.

:func:`scale` multiplies every deployment's traffic by one factor (rates and concurrencies together), what the
search for the most mixed load within every bound steps through.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.load import sources as load_sources
from tritonsuite.load.engine import Measurement, Progress, Traffic
from tritonsuite.load.point import ProgressLine
from tritonsuite.load.sources import TOGETHER, LoadSource
from tritonsuite.server import TritonServer

ROLES = ("alone", "together")
DEFAULT_ROUNDS = 3


@dataclass
class Step:
    """One measurement of a mix run: alone (one deployment, ``index``) or together (all), in round ``round``."""

    role: str
    round: int
    index: int | None  # the deployment measured alone; None together
    start_s: float  # seconds since the run began
    end_s: float
    measurements: list[Measurement]  # one (alone) or one per deployment (together), in the mix's order


@dataclass
class MixRun:
    """Every measurement of a mix run, in the order measured."""

    models: list[str]
    steps: list[Step] = field(default_factory=list)

    def of(self, index: int, role: str) -> list[Measurement]:
        """Deployment ``index``'s measurements in ``role`` (alone or together), in round order."""
        return [s.measurements[0 if s.role == "alone" else index] for s in self.steps
                if s.role == role and (role == "together" or s.index == index)]


OnMeasured = Callable[[Step], None]


def scale(traffic: Traffic, factor: float) -> Traffic:
    """The same deployment's traffic ``factor`` times heavier: a rate multiplied, a concurrency multiplied and
    rounded (at least 1)."""
    point = traffic.point
    if point.open_loop:
        point = dataclasses.replace(point, request_rate=point.request_rate * factor)
    else:
        point = dataclasses.replace(point, concurrency=max(1, round(point.concurrency * factor)))
    return dataclasses.replace(traffic, point=point)


def run_mix(server: TritonServer, traffic: Sequence[Traffic], settings: MeasurementSettings,
            rounds: int = DEFAULT_ROUNDS, progress: Progress | None = None,
            on_measured: OnMeasured | None = None, source: LoadSource | None = None) -> MixRun:
    """Measure the mix in ``rounds`` interleaved rounds (each: every deployment alone, then all together) with
    ``source`` (the default load source when None)."""
    if rounds < 1:
        raise ValueError(f"rounds {rounds!r}: expected an integer >= 1")
    if len(traffic) < 2:
        raise ValueError(f"a mix needs at least two deployments, got {len(traffic)}")
    source = _together(source)
    run = MixRun([t.model for t in traffic])
    began = time.perf_counter()

    steps = rounds * (len(traffic) + 1)

    def tell(what: str):
        # the bar counts the mix's steps (each deployment alone, then together, per round), not a step's windows
        done = len(run.steps)
        return None if progress is None else (lambda line: progress(ProgressLine(f"{what}: {line}", done, steps)))

    for r in range(1, rounds + 1):
        order = range(len(traffic)) if r % 2 else reversed(range(len(traffic)))
        for i in order:
            t = traffic[i]
            start = time.perf_counter() - began
            m = source.measure(server, t, settings, progress=tell(f"round {r}/{rounds}, {t.model} alone"))
            _record(run, Step("alone", r, i, start, time.perf_counter() - began, [m]), on_measured)
        start = time.perf_counter() - began
        together = source.measure_together(server, traffic, settings, tell(f"round {r}/{rounds}, together"))
        _record(run, Step("together", r, None, start, time.perf_counter() - began, together), on_measured)
    return run


def _together(source: LoadSource | None) -> LoadSource:
    """``source`` (the default one when None), refused in one line unless it measures deployments together."""
    source = source or load_sources.get()
    source.require(TOGETHER, "measure several deployments together (a mix)")
    return source


def _record(run: MixRun, step: Step, on_measured: OnMeasured | None) -> None:
    run.steps.append(step)
    if on_measured is not None:
        on_measured(step)


@dataclass
class MixSearch:
    """The most mixed load within every deployment's latency bound: the highest factor on every deployment's traffic
    (re-measured), and which deployment's bound broke first above it."""

    models: list[str]
    result: object  # the tritonsuite.load.search.SearchResult of kind "scale" (its steps hold every point)
    traffic: list[Traffic]  # the mix at factor 1

    @property
    def factor(self) -> float | None:
        return self.result.best.load if self.result.best is not None else None

    @property
    def bound_by(self) -> str:
        """Why the lowest factor above the answer (or, with no answer, the last point) broke: the deployments over
        their bounds, each with its statistic."""
        over = [s for s in self.result.steps if not s.within and (self.factor is None or s.load > self.factor)]
        return min(over, key=lambda s: s.load).why if over else "no point over a bound was measured"

    def describe(self) -> str:
        points = self.result.points
        if self.factor is None:
            return f"the most mixed load within every bound: none ({self.result.reason}; {points} points measured)"
        loads = ", ".join(f"{t.model} {_load(scale(t, self.factor))}" for t in self.traffic)
        return (f"the most mixed load within every bound: x{self.factor:.3g} of the mix's traffic ({loads}); above it "
                f"{self.bound_by}; {points} points measured")


def _load(t: Traffic) -> str:
    return f"{t.point.request_rate:.3g} req/s" if t.point.open_loop else f"concurrency {t.point.concurrency}"


def max_mix(server: TritonServer, traffic: Sequence[Traffic], bounds: Sequence[LatencyBound | None],
            settings: MeasurementSettings, progress: Progress | None = None,
            on_point: Callable[[float, list[Measurement]], None] | None = None,
            source: LoadSource | None = None) -> MixSearch:
    """Scale every deployment's traffic by one factor (:func:`scale`) until the first deployment's latency bound
    breaks, with :func:`tritonsuite.load.search.search`'s bracket, bisection and re-measure; a point is within when
    every deployment with a bound (``bounds[i]``, None: not judged) is within its own (valid row, the bound's count
    test), and the stability rules apply to the whole mix. ``on_point(factor, measurements)`` gets every point;
    ``source`` measures them (the default load source when None)."""
    from tritonsuite.load.search import judge, search

    source = _together(source)

    judged = [(i, b) for i, b in enumerate(bounds) if b is not None]
    if not judged:
        raise ValueError("the most mixed load needs a latency bound on at least one deployment (its model's "
                         "online.latency_bound in the profile)")

    def at(factor: float) -> list[Measurement]:
        told = None if progress is None else (lambda line: progress(f"x{factor:.3g}: {line}"))  # the search counts
        found = source.measure_together(server, [scale(t, factor) for t in traffic], settings, told)
        if on_point is not None:
            on_point(factor, found)
        return found

    def judge_at(found: list[Measurement]) -> tuple[bool, str]:
        verdicts = [(traffic[i].model, b, *judge(found[i], b)) for i, b in judged]
        over = [f"{model} not within {b}: {why}" for model, b, within, why in verdicts if not within]
        return not over, "; ".join(over) if over else "; ".join(f"{m} {why}" for m, _, _, why in verdicts)

    result = search(at, "scale", judged[0][1], 1.0, settings, progress=progress, judge_at=judge_at)
    return MixSearch([t.model for t in traffic], result, list(traffic))
