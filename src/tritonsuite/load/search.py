"""The most load a deployment takes within a latency bound ("max req/s at p99 <= 50 ms").

A search measures points through its caller's ``at(load)`` (the suite's: the case's load source,
:mod:`tritonsuite.load.sources`, with a stop check after each window), one after another:
1. bracket: from a start, the load doubles while the bound holds (or halves while it does not, three times at most
   for a rate: sparse arrivals need long windows) until one point is within the bound and the next is over it, or
   the caller's ``highest`` load is within it (a ceiling: perf_analyzer runs a thread per concurrent request, and
   beyond the server's saturation more of them add only latency and load on the client's own cores);
2. bisect between them until the bracket is narrower than ``search_resolution_percent`` of its lower end (for
   concurrency: until the two are neighbours), within ``search_max_steps`` points in all;
3. re-measure the highest point within the bound; if that one now breaks it (a noisy host), the next lower point
   that was within it is measured again, three attempts at most; the answer is the first that holds, or none.

A point is within the bound when its row is valid (OK) and the bound's statistic over the stable windows' request
latencies is at most the bound. (Open loop, a server that falls behind shows as latency that grows window after
window, so the point is over the bound or UNSTABLE; its achieved rate, a Poisson count, is not judged.) A point is
given up after two windows in a row whose statistic is more than twice the bound (clearly over: its row is
STOPPED), so an overloaded point does not run its full windows, and one noisy window does not end a point. Every
measured point is kept as evidence.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.load.engine import Measurement, Progress, StopEarly
from tritonsuite.load.point import ProgressLine

CLEARLY_OVER = 2.0  # two windows in a row whose statistic exceeds this many times the bound end their point
RE_MEASURES = 3  # attempts to confirm the answer, each lower than the last
GROWTH = 2.0
LOWEST_HALVINGS = 3  # a rate search goes no lower than start / 2**3 (low rates need long windows)


@dataclass
class SearchStep:
    load: float  # the request rate (requests/s) or the concurrency measured
    measurement: Measurement
    within: bool
    why: str  # the statistic as measured, or why the point is not within the bound
    role: str = "bracket"  # bracket | bisect | re-measure


@dataclass
class SearchResult:
    kind: str  # "request_rate" or "concurrency"
    bound: LatencyBound
    steps: list[SearchStep] = field(default_factory=list)
    best: SearchStep | None = None  # the re-measured highest point within the bound
    reason: str = ""  # how the search ended when it found nothing
    measured_before: int = 0  # points the caller measured for it first (a rate search's single-stream start)
    unstable: bool = False  # points were within the bound but none stayed so when measured again: not measured

    @property
    def found(self) -> bool:
        return self.best is not None

    @property
    def points(self) -> int:
        """Every point measured for this search, its start included."""
        return self.measured_before + len(self.steps)

    @property
    def unit(self) -> str:
        return {"request_rate": "req/s", "concurrency": "concurrency"}.get(self.kind, "x")

    def headline(self) -> str:
        """ "max req/s at p99 <= 50 ms" / "max concurrency at p99 <= 50 ms" """
        return f"max {self.unit} at {self.bound}"

    def describe(self) -> str:
        if self.best is None:
            return f"{self.headline()}: none ({self.reason}; {self.points} points measured)"
        m = self.best.measurement
        load = f"{self.best.load:.1f} req/s" if self.kind == "request_rate" else f"concurrency {self.best.load:g}"
        return (f"{self.headline()}: {load} ({self.best.why}; {m.result['Inferences/Second']:.1f} inf/s; "
                f"{self.points} points measured)")


def statistic_ms(measurement: Measurement, bound: LatencyBound) -> float:
    latencies = measurement.latencies_s
    return bound.value(latencies * 1e3) if latencies is not None else math.inf


def count_verdict(latencies_ms, bound: LatencyBound, alpha: float = 0.05):
    """A percentile bound judged on counts ("p99 <= 50 ms": at most 1% of requests over 50 ms): the requests over the
    bound against that share, one-sided binomial (:func:`tritonsuite.core.stats.judge_share`); None for "avg"."""
    import numpy as np

    from tritonsuite.core.stats import judge_share

    if bound.statistic == "avg":
        return None
    values = np.asarray(latencies_ms, dtype=np.float64)
    return judge_share(int((values > bound.ms).sum()), int(values.size), 1.0 - float(bound.statistic[1:]) / 100.0,
                       alpha)


def judge(measurement: Measurement, bound: LatencyBound, alpha: float = 0.05) -> tuple[bool, str]:
    """(within the bound, why) for one measured point. A percentile bound is judged on counts: over when the share
    of requests above the bound is significantly above what the percentile allows, within when it is at most that
    share, and not within while undecided (too few requests to tell; the engine lengthens such a point first)."""
    value = statistic_ms(measurement, bound)
    stat = f"{bound.statistic} {value:.2f} ms"
    if measurement.status == "STOPPED":
        return False, measurement.reasons[0]
    verdict = (count_verdict(measurement.latencies_s * 1e3, bound, alpha)
               if measurement.latencies_s is not None else None)
    if verdict is not None and verdict.verdict == "undecided":
        return False, f"{stat}, undecided: {verdict.describe(f'requests over {bound.ms:g} ms')}"
    if verdict is not None and verdict.verdict == "over":
        return False, f"{stat} > {bound.ms:g} ms ({verdict.k} of {verdict.n} requests over it, p={verdict.p_value:.2g})"
    if verdict is None and value > bound.ms:
        return False, f"{stat} > {bound.ms:g} ms"
    if not measurement.valid:
        return False, f"{stat} but the point is {measurement.status}: {'; '.join(measurement.reasons)}"
    return True, stat


def stop_when_clearly_over(bound: LatencyBound) -> StopEarly:
    """A ``measure(stop_early=...)`` check: give the point up after two windows in a row more than CLEARLY_OVER x
    the bound."""
    def check(windows) -> str | None:
        values = [bound.value(w.samples[:, 0] * 1e3) if len(w.samples) else math.inf for w in windows[-2:]]
        if len(values) == 2 and min(values) > CLEARLY_OVER * bound.ms:
            return (f"{bound.statistic} {values[0]:.1f} and {values[1]:.1f} ms in two windows in a row, more than "
                    f"{CLEARLY_OVER:g}x the bound {bound.ms:g} ms")
        return None

    def undecided(windows) -> bool:
        """Whether the count test cannot yet tell the pooled windows within or over the bound (lengthen them)."""
        import numpy as np

        latencies = np.concatenate([w.samples[:, 0] for w in windows]) * 1e3 if windows else np.zeros(0)
        verdict = count_verdict(latencies, bound)
        return verdict is not None and verdict.verdict == "undecided"

    check.undecided = undecided  # read by the load generator: an undecided point is lengthened, not judged
    return check


def search(measure_at: Callable[[float], Measurement], kind: str, bound: LatencyBound, start: float,
           settings: MeasurementSettings, measured_before: int = 0, progress: Progress | None = None,
           judge_at: Callable[[object], tuple[bool, str]] | None = None,
           highest: float | None = None) -> SearchResult:
    """Search for the highest load within ``bound``; ``measure_at(load)`` measures one point (a request rate in
    requests/s for ``kind`` "request_rate", an integer concurrency for "concurrency"). ``measured_before`` counts
    the points the caller measured to choose ``start``, so the answer's count of points measured includes them.
    ``progress`` is told each point's verdict and what the search does next, e.g. "point 5: 12.5 req/s (bisect):
    within: p99 310.2 ms; bracket 12.5..25 req/s, bisecting to 5%".

    Kind "scale" searches a factor (continuous, as a rate) applied to several deployments' traffic at once
    (:func:`tritonsuite.load.mix.max_mix`): ``measure_at`` then returns what ``judge_at`` judges (every
    deployment's measurement against its own bound). ``highest``: the most load measured; within the bound there, it
    is the answer (confirmed as any other)."""
    if kind not in ("request_rate", "concurrency", "scale"):
        raise ValueError(f"search kind {kind!r}; valid choices: request_rate, concurrency, scale")
    integer = kind == "concurrency"
    result = SearchResult(kind, bound, measured_before=measured_before)

    def shown(load: float | None) -> str:
        return "?" if load is None else f"{load:g}" if integer else f"{load:.3g}"

    def probe(load: float, role: str) -> bool:
        m = measure_at(int(load) if integer else load)
        within, why = judge(m, bound) if judge_at is None else judge_at(m)
        result.steps.append(SearchStep(load, m, within, why, role))
        if progress is not None:
            unit = "" if integer else " req/s" if kind == "request_rate" else "x"
            if role == "re-measure":
                next_ = "the answer" if within else "next: a lower point that was within it"
            else:  # the bracket as the caller is about to update it with this point
                low, high = (load, hi) if within else (lo, load)
                next_ = (f"bracket {shown(low)}..{shown(high)}{unit} (within..over), at most "
                         f"{max(settings.search_max_steps - len(result.steps), 0)} points more before re-measuring")
            progress(ProgressLine(f"point {result.points}: {'concurrency ' if integer else ''}{shown(load)}{unit} "
                                  f"({role}): {'within' if within else 'over'}: {why}; {next_}",
                                  len(result.steps), max(settings.search_max_steps, len(result.steps))))
        return within

    def budget() -> bool:
        return len(result.steps) < settings.search_max_steps

    lo: float | None = None
    hi: float | None = None
    load = max(1.0, float(round(start))) if integer else float(start)
    if highest is not None:
        load = min(load, float(highest))
    lowest = 1.0 if integer else start / 2 ** LOWEST_HALVINGS
    while budget():  # bracket
        if probe(load, "bracket"):
            lo = load
            if hi is not None or (highest is not None and load >= highest):
                break
            load = load * GROWTH if highest is None else min(load * GROWTH, float(highest))
        else:
            hi = load
            if lo is not None or load / GROWTH < lowest:
                break
            load = math.floor(load / GROWTH) if integer else load / GROWTH
    while lo is not None and hi is not None and budget():  # bisect
        if integer:
            if hi - lo <= 1:
                break
            mid = float((lo + hi) // 2)
        else:
            if (hi - lo) / lo * 100.0 <= settings.search_resolution_percent:
                break
            mid = (lo + hi) / 2
        if probe(mid, "bisect"):
            lo = mid
        else:
            hi = mid
    if lo is None:
        last = result.steps[-1]
        result.reason = f"even {'concurrency ' if integer else ''}{last.load:g}{'' if integer else ' ' + result.unit} " \
                        f"is not within it: {last.why}"
        return result
    # confirm: the highest point within the bound is measured again; when it now breaks the bound, the highest point
    # that was within it at least twice the resolution lower (else that step down) is tried, RE_MEASURES times at
    # most: a point just under the bound breaks it on noise alone, so each try steps clear of the last
    attempt = lo
    for _ in range(RE_MEASURES):
        if probe(attempt, "re-measure"):
            result.best = result.steps[-1]
            return result
        step_down = attempt * (1 - 2 * settings.search_resolution_percent / 100)
        lower = [s.load for s in result.steps if s.within and s.load <= step_down]
        attempt = max(lower) if lower else (min(attempt - 1, math.floor(step_down)) if integer else step_down)
        if attempt < lowest:
            break
    result.unstable = True
    result.reason = (f"the highest point within the bound, {lo:g}, and the {RE_MEASURES - 1} tried below it broke "
                     f"the bound when measured again ({result.steps[-1].why}): no answer is stable on this host")
    return result


def remeasure_drift(then: dict, now: dict, limit_percent: float) -> dict:
    """How a point measured again moved (``result`` columns of the earlier and the later measurement): throughput and
    p99 change in %, flagged beyond the stability limit. Recorded on the later row as ``measurement.remeasure``."""
    def change(column: str) -> float | None:
        a, b = then.get(column), now.get(column)
        return round((b / a - 1.0) * 100.0, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a \
            else None

    tput, p99 = change("Inferences/Second"), change("p99 latency")
    return {"throughput_change_percent": tput, "p99_change_percent": p99, "limit_percent": limit_percent,
            "drifting": any(v is not None and abs(v) > limit_percent for v in (tput, p99))}
