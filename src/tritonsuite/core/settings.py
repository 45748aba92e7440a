"""Measurement settings: how long a window is, when a point is stable, how long to wait. A leaf module, so
profiles (which carry them) need not import the measurement engine."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

STABLE_WINDOWS = 3  # a point is stable when its last this-many windows agree
MIN_TIMEOUT_S = 60.0  # the least hang bound a derived request timeout gives
COUNT_WINDOW_TIMEOUT_S = 120.0  # the derived hang bound under count-based windows

# field -> (type, lowest, highest, inclusive low): checked when settings are made, so a profile or option names the
# bad value and the valid range before anything starts
_RANGES = {
    "window_ms": (float, 0.0, None, True),
    "window_requests": (int, 0, None, True),
    "min_requests_per_window": (int, 1, None, True),
    "stability_percentage": (float, 0.0, 100.0, False),
    "max_trials": (int, STABLE_WINDOWS, 10_000, True),
    "max_window_factor": (int, 1, 64, True),
    "warmup_ms": (float, 0.0, None, True),
    "request_timeout_s": (float, 0.0, 3600.0, True),
    "client_bound_percent": (float, 0.0, None, False),
    "schedule_tolerance_ms": (float, 0.0, None, False),
    "max_late_percent": (float, 0.0, 100.0, True),
    "max_outstanding": (int, 1, 100_000, True),
    "search_resolution_percent": (float, 0.0, 100.0, False),
    "search_max_steps": (int, 2, 1000, True),
    "percentile_confidence": (float, 50.0, 99.9, True),
    "percentile_precision_percent": (float, 0.0, 100.0, False),
    "sample_windows": (int, 0, 1000, True),
    "verdict_alpha": (float, 0.0, 0.5, False),
}


@dataclass(frozen=True)
class MeasurementSettings:
    window_ms: float = 1000.0  # time-based windows of this length...
    window_requests: int = 0  # ...or, when > 0, count-based windows of this many completed requests
    min_requests_per_window: int = 10  # a time-based window lasts until at least this many requests completed
    stability_percentage: float = 10.0
    max_trials: int = 10
    # when the last windows disagree, windows double (after each STABLE_WINDOWS of them) up to this factor of the
    # set length before the point is given up as UNSTABLE, as Model Analyzer lengthens perf_analyzer's windows
    max_window_factor: int = 4
    warmup_ms: float = 500.0
    # how long the server may give no answer before the point (or a request sent alone) counts as hung; 0: derived
    # from the windows (timeout_s)
    request_timeout_s: float = 0.0
    client_bound_percent: float = 90.0  # load generator CPU (% of one core) above which a row is client bound
    # open loop (request rates): a request sent more than this (or a tenth of the mean gap between arrivals, if
    # longer) after its scheduled time is late; a point with more
    # than max_late_percent late requests is not the server's number; at most max_outstanding requests in flight
    schedule_tolerance_ms: float = 5.0
    max_late_percent: float = 1.0
    max_outstanding: int = 256
    # the search for the most load within a latency bound: stop bisecting when the bracket is this narrow (% of
    # its lower end), and after this many measured points
    search_resolution_percent: float = 5.0
    search_max_steps: int = 14
    # sample-aware percentiles (tritonsuite.core.stats): each percentile carries an order-statistic interval at
    # this confidence (%) and is indicative when the interval has no end in the sample or is wider than +-precision
    # (% of the estimate); a stable point measures up to sample_windows more windows (pooled with its stable ones,
    # while they stay stable) when that gets its widest percentile (p99) enough samples, or a share rule (late
    # sends) is undecided. Share rules are one-sided binomial tests at verdict_alpha.
    percentile_confidence: float = 95.0
    percentile_precision_percent: float = 10.0
    sample_windows: int = 2
    verdict_alpha: float = 0.05

    def __post_init__(self):
        for f in fields(self):
            kind, low, high, inclusive = _RANGES[f.name]
            value = getattr(self, f.name)
            ok_type = isinstance(value, (int, float)) and not isinstance(value, bool) and \
                (kind is float or float(value).is_integer())
            in_range = ok_type and (value >= low if inclusive else value > low) and (high is None or value <= high)
            if not in_range:
                what = "an integer" if kind is int else "a number"
                bounds = f"{'>=' if inclusive else '>'} {low:g}" + (f" and <= {high:g}" if high is not None else "")
                raise ValueError(f"{f.name} {value!r}: expected {what} {bounds}")
        if self.window_ms <= 0 and self.window_requests <= 0:
            raise ValueError("a measurement window needs window_ms > 0 or window_requests > 0")

    @property
    def timeout_s(self) -> float:
        """The hang bound: ``request_timeout_s`` when set; else twice what the longest window of a point may take
        (warm-up plus ``max_window_factor`` windows), and never under MIN_TIMEOUT_S (count-based windows, whose
        length is not known ahead: COUNT_WINDOW_TIMEOUT_S). A window in which no request completes for this long
        fails its point; a request sent alone (accuracy, checks, a sequence's closing request) waits this long."""
        if self.request_timeout_s > 0:
            return self.request_timeout_s
        if self.window_requests > 0:
            return COUNT_WINDOW_TIMEOUT_S
        return max(MIN_TIMEOUT_S, 2.0 * (self.warmup_ms + self.window_ms * self.max_window_factor) / 1000.0)

    def describe_window(self, factor: int = 1) -> str:
        """The window as set, or ``factor`` times it ("2000 ms (min 20 requests), lengthened x2 from 1000 ms")."""
        if self.window_requests > 0:
            text = f"{self.window_requests * factor} requests"
            return text + (f", lengthened x{factor} from {self.window_requests}" if factor > 1 else "")
        text = f"{self.window_ms * factor:g} ms (min {self.min_requests_per_window * factor} requests)"
        return text + (f", lengthened x{factor} from {self.window_ms:g} ms" if factor > 1 else "")


#: Arrival processes of open-loop points.
DISTRIBUTIONS = ("poisson", "constant")
_BOUND = re.compile(r"^\s*(avg|p(\d{1,2}(?:\.\d+)?))\s*<=?\s*(\d+(?:\.\d*)?)\s*(ms)?\s*$")


@dataclass(frozen=True)
class LatencyBound:
    """A latency objective, "p99 <= 50 ms": a percentile (p1..p99.9) or the average of request latencies, in ms."""

    statistic: str  # "avg" or "p<percentile>"
    ms: float

    @classmethod
    def parse(cls, text: str) -> "LatencyBound":
        match = _BOUND.match(str(text))
        if not match or float(match.group(3)) <= 0 or (match.group(2) and not 0 < float(match.group(2)) < 100):
            raise ValueError(f"latency bound {text!r}: expected '<statistic> <= <ms> ms' with statistic avg or "
                             f"p<percentile> (p50, p90, p95, p99, p99.9) and a positive bound, e.g. 'p99 <= 50 ms'")
        return cls(match.group(1), float(match.group(3)))

    def value(self, latencies_ms) -> float:
        """The statistic over request latencies (ms); inf when there are none."""
        import numpy as np

        values = np.asarray(latencies_ms, dtype=np.float64)
        if values.size == 0:
            return math.inf
        return float(values.mean() if self.statistic == "avg" else np.percentile(values, float(self.statistic[1:])))

    @property
    def slug(self) -> str:
        """For test ids: "p99le50ms"."""
        return f"{self.statistic}le{self.ms:g}ms"

    def __str__(self) -> str:
        return f"{self.statistic} <= {self.ms:g} ms"


#: ``--workers auto`` (and a profile's ``workers: auto``): the worker-process source chooses from the load and the
#: cores (:mod:`tritonsuite.load.sources.workers`)
WORKERS_AUTO = "auto"
MAX_WORKERS = 256
#: ``--workers ray[:ADDRESS][@N]``: the worker processes as Ray actors (:mod:`tritonsuite.load.sources.raycluster`)
WORKERS_RAY = "ray"
_RAY = re.compile(r"ray(?::(?P<address>[A-Za-z0-9_.\[\]:-]+?))?(?:@(?P<per_node>\d+))?")


@dataclass(frozen=True)
class RayWorkers:
    """``--workers ray[:ADDRESS][@N]``: the engine's workers as Ray actors, ``per_node`` on each alive node of the
    cluster at ``address`` (``host:port`` of its head; empty: ``RAY_ADDRESS``, else the cluster a script using the
    library has started itself: the suite starts none)."""

    address: str = ""
    per_node: int = 1

    def __str__(self) -> str:
        return WORKERS_RAY + (f":{self.address}" if self.address else "") + \
            (f"@{self.per_node}" if self.per_node != 1 else "")


def parse_workers(value, option: str = "--workers") -> int | str | RayWorkers:
    """``--workers``' value (or a profile's ``workers:``) as a number of worker processes (1: the engine in this
    process), ``"auto"``, or Ray actors (:class:`RayWorkers`); any other value is a ValueError of one line naming it
    and the valid choices."""
    text = str(value).strip()
    if text.lower() == WORKERS_AUTO:
        return WORKERS_AUTO
    ray = _RAY.fullmatch(text)
    if ray is not None and 1 <= int(ray["per_node"] or 1) <= MAX_WORKERS:
        return RayWorkers(ray["address"] or "", int(ray["per_node"] or 1))
    try:
        n = int(text)
    except ValueError:
        n = 0
    if isinstance(value, bool) or not 1 <= n <= MAX_WORKERS or str(n) != text.lstrip("+"):
        raise ValueError(f"{option} {value!r}: valid choices: a whole number of worker processes from 1 to "
                         f"{MAX_WORKERS} (1: the engine in this process), {WORKERS_AUTO} (chosen from the load "
                         f"and the cores), or {WORKERS_RAY}[:ADDRESS][@N] (N Ray actors on each node of a Ray "
                         f"cluster)")
    return n
