"""One load point and what measuring it gives: :class:`LoadPoint` (batch and concurrency, or a request rate),
:class:`Measurement` (the seeds' columns, how it was measured, the status and its reasons), and the ``Progress`` a
measurement tells as it goes."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from tritonsuite.core.rows import Row, not_measured
from tritonsuite.core.settings import DISTRIBUTIONS


class MeasurementError(RuntimeError):
    """A point could not be measured (request failed, server unreachable); the suite records it as a FAILED row."""


class Hang(MeasurementError):
    """The server gave no answer within the hang bound (``MeasurementSettings.timeout_s``): the deployment is given
    up for the rest of the run (:mod:`tritonsuite.run.isolation`), its requests would wait the same way."""


class Silence:
    """No completion at all among load generators for longer than ``bound_s`` is a :class:`Hang`: the warm-up and
    every window ask :meth:`check` after each wake-up."""

    def __init__(self, generators, bound_s: float, where: str = ""):
        self.generators, self.bound_s, self.where = generators, bound_s, where
        self.seen, self.since = self._completed(), time.perf_counter()

    def _completed(self) -> int:
        return sum(g.completed for g in self.generators)

    def check(self) -> None:
        completed, now = self._completed(), time.perf_counter()
        if completed != self.seen:
            self.seen, self.since = completed, now
        elif now - self.since > self.bound_s:
            raise Hang(f"no response within {self.bound_s:.0f} s{self.where}")


@dataclass(frozen=True)
class LoadPoint:
    """A batch size and either a concurrency (closed loop) or a request rate in requests/s (open loop, arrivals
    ``distribution``-distributed from ``seed``; ``concurrency`` is then unused)."""

    batch_size: int
    concurrency: int = 1
    shared_memory: bool = False
    request_rate: float | None = None
    distribution: str = "poisson"
    seed: int = 0
    protocol: str = "http"  # how requests travel: http or grpc (load.grpc)

    def __post_init__(self):
        if self.batch_size < 1 or self.concurrency < 1:
            raise ValueError(f"batch size and concurrency must be >= 1, got {self.batch_size}, {self.concurrency}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise ValueError(f"request rate {self.request_rate!r}: expected a number of requests/s > 0")
        if self.protocol not in ("http", "grpc"):
            raise ValueError(f"protocol {self.protocol!r}; valid choices: http, grpc")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution {self.distribution!r}; valid choices: {', '.join(DISTRIBUTIONS)}")

    @property
    def open_loop(self) -> bool:
        return self.request_rate is not None

    def describe(self) -> str:
        load = (f"{self.request_rate:g} requests/s ({self.distribution})" if self.open_loop
                else f"concurrency {self.concurrency}")
        return f"batch {self.batch_size}, {load}"


@dataclass
class Measurement:
    point: LoadPoint
    result: dict[str, float]
    meta: dict
    status: str = "OK"
    reasons: list[str] = field(default_factory=list)
    latencies_s: np.ndarray | None = None  # every request latency of the stable windows (pytest-benchmark's rounds)
    comparison: Any = None  # a tritonsuite.judge.compare.PointComparison when the run compares with a stored one
    accuracy_under_load: Any = None  # a tritonsuite.judge.underload.UnderLoadResult when the point carried probes
    # (probe index, decoded outputs) of every accuracy probe answered during the point (see ``measure(probes=)``)
    probe_responses: list[tuple[int, dict[str, np.ndarray]]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.status == "OK"

    @property
    def not_measured(self) -> bool:
        """No valid figures, although every request was answered (:func:`tritonsuite.core.rows.not_measured`)."""
        return not_measured(self.status, self.meta)

    def to_row(self, **identity) -> Row:
        """The measured row; ``identity`` names the point (scenario, model, deployment, format, ...)."""
        point = self.point
        return Row(**identity, batch=point.batch_size, concurrency=None if point.open_loop else point.concurrency,
                   request_rate=point.request_rate, result=self.result, measurement=self.meta, status=self.status,
                   reasons=list(self.reasons))


def arrival_gaps(rate: float, distribution: str = "poisson", seed: int = 0, chunk: int = 1024) -> Iterator[float]:
    """Seconds between scheduled sends at ``rate`` requests/s, without end: exponential (Poisson arrivals) from a
    generator seeded with ``seed``, or constant. The same arguments give the same schedule."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r}; valid choices: {', '.join(DISTRIBUTIONS)}")
    rng = np.random.default_rng(seed)
    while True:
        gaps = rng.exponential(1.0 / rate, chunk) if distribution == "poisson" else np.full(chunk, 1.0 / rate)
        yield from gaps.tolist()


#: Told one line at a time how a point (or a search) is going and what it waits for (a terminal shows them; ``print``
#: will do). A line may be a :class:`ProgressLine`, counting its teller's steps.
Progress = Callable[[str], None]


class ProgressLine(str):
    """A progress line that also says how many of its teller's steps are done, of at most how many (a point's
    windows, a search's points, a mix's steps, a tune's configurations): a terminal draws them as a bar. A caller
    wrapping the line in its own text (``f"{what}: {line}"``) has a plain string again, and its own count to give."""

    done: int | None
    total: int | None

    def __new__(cls, line: str, done: int | None = None, total: int | None = None) -> "ProgressLine":
        told = super().__new__(cls, line)
        told.done, told.total = done, total
        return told
