"""Performance comparison between two runs: per point, throughput and p99 then and now, and a verdict that noise
cannot trip.

Points are joined by scenario, deployment (model, size, format, precision), batch, concurrency and host (the
``Host`` parameter: CPU, cores, GPU). A point is judged from the evidence both rows keep (``latency_samples_ms``,
``window_throughputs``):

- **regression** when throughput fell by more than the minimum effect *and* the requests of the new run are slower
  (one-sided Mann-Whitney U on the request latencies, p < ``alpha``); **improvement** the other way round;
- otherwise **no significant change**. The minimum effect is the larger of ``min_effect`` (default 10%, asv's
  factor 1.1) and the two points' own window-to-window spread, so a difference inside a run's own variation is
  never an effect.

**Throughput within a latency bound** (:func:`compare_within_bound`): two configurations, each measured at its own
load at the bound (the most concurrency or request rate within it), interleaved A B A B over rounds. Their latencies
are not comparable (each is near the bound by construction), so the objective itself is judged: the throughput
within the bound, every stable window of a round counted (0 inf/s for a round whose point broke the bound), B above
A by Mann-Whitney U on those windows (p < ``alpha``) and by more than the minimum effect. A round in which either
point is not valid (unstable, failed) is not compared; at least ``MIN_ROUNDS`` must be. A round's point is found by
:func:`at_the_bound`: where the load found minutes before is over the bound now (or undecided by its request counts),
the round measures again a step lower, so that a configuration at the edge of its bound counts for what it bears a
step lower rather than as 0 (with three rounds one such 0 outweighed the others: docs/tune.md, 2026-11-30).

Points measured on another host, or by another Triton version, are never compared silently: another host does not
join, and a different server is named at the top of the comparison. ``--perf-gate PCT`` (pytest) or
``tritonsuite compare THEN NOW --perf-gate PCT`` (:mod:`tritonsuite.report.commands`) turns significant regressions beyond PCT into failures; without it
a comparison is informational. Stored runs are compared later with the command, without rerunning.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tritonsuite.core.rows import Row
from tritonsuite.core.store import PERFORMANCE_SCENARIOS, differences as manifest_differences
from tritonsuite.core.reasons import reason

#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("verdict",)
#: functions that return failure reasons (tritonsuite.core.reasons)
REASON_FUNCTIONS = ("describe",)
DEFAULT_MIN_EFFECT = 10.0  # percent
DEFAULT_ALPHA = 0.01
MIN_ROUNDS = 2  # rounds with both points valid, so that one unstable point on a busy host does not decide
STEP_DOWN = 0.85  # a round's point over the bound is measured again this much lower (at least one lower) ...
ROUND_STEPS = 2  # ... at most this many times


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{}: {}: throughput {} -> {} inf/s ({}%, minimum effect {}%, p={}); p99 {} -> {} ms",
           "unit/test_compare.py::test_a_significant_drop_beyond_the_minimum_effect_is_a_regression"),
    reason("{}: {} -> {} inf/s within {} ({}%, minimum effect {}%, p={}, {} rounds{})",
           "unit/test_compare.py::test_a_clear_gain_within_the_bound_is_a_gain_where_latencies_barely_move"),
    reason("{} the point was {}",
           "unit/test_compare.py::test_invalid_points_and_rows_without_samples_are_not_comparable"),
    reason("a row has no latency samples (written before tritonsuite kept them)",
           "unit/test_compare.py::test_invalid_points_and_rows_without_samples_are_not_comparable"),
    reason("no significant change",
           "unit/test_compare.py::test_noise_is_not_a_verdict",
           "unit/test_compare.py::test_the_same_configuration_within_the_bound_is_no_significant_change",
           "unit/test_compare.py::test_the_minimum_effect_and_alpha_decide_on_their_boundary"),
    reason("regression",
           "unit/test_compare.py::test_a_significant_drop_beyond_the_minimum_effect_is_a_regression",
           "unit/test_compare.py::test_the_minimum_effect_and_alpha_decide_on_their_boundary",
           "test_gates.py::test_benchmark_records_manifest_and_comparisons"),
    reason("neither point was within the bound in any round",
           "unit/test_compare.py::test_throughput_within_the_bound_needs_rounds_with_both_points_valid"),
    reason("{} of {} rounds had both points valid ({} needed)",
           "unit/test_compare.py::test_throughput_within_the_bound_needs_rounds_with_both_points_valid"),
    reason("improvement",
           "unit/test_compare.py::test_the_minimum_effect_and_alpha_decide_on_their_boundary",
           "unit/test_compare.py::test_a_clear_gain_within_the_bound_is_a_gain_where_latencies_barely_move",
           "test_tune_accuracy.py::test_the_same_search_recommends_the_winner_of_a_correct_model"),
)


def mann_whitney_greater(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided p-value that values in ``b`` tend to be larger than in ``a`` (Mann-Whitney U, normal approximation
    with tie and continuity corrections; exact enough from about 8 samples a side)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return 1.0
    combined = np.concatenate([x, y])
    order = np.argsort(combined, kind="mergesort")
    ranks = np.empty(len(combined))
    sorted_values = combined[order]
    # average ranks over ties
    _, starts, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    average = starts + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    u_b = ranks[n1:].sum() - n2 * (n2 + 1) / 2.0  # how often a b-value exceeds an a-value
    mean = n1 * n2 / 2.0
    tie_term = float(((counts ** 3) - counts).sum()) / ((n1 + n2) * (n1 + n2 - 1)) if n1 + n2 > 1 else 0.0
    variance = n1 * n2 / 12.0 * ((n1 + n2 + 1) - tie_term)
    if variance <= 0:
        return 1.0
    z = (u_b - mean - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def host_of(row: Row) -> str:
    named = row.extra.get("host")  # the host name of rows merged from several hosts (tritonsuite.report.merge)
    host = str(row.parameters.get("Host") or row.measurement.get("host") or "unknown host")
    return f"{named} ({host})" if named and named != host else host


def server_of(row: Row) -> str:
    return str(row.parameters.get("Server") or "unknown server")


def point_key(row: Row) -> tuple:
    """What joins a point across runs: scenario, deployment, batch, load (a concurrency, or "<rate> req/s"), host;
    a row perf_analyzer measured joins only another perf_analyzer row."""
    load = f"{row.request_rate:g} req/s" if row.request_rate is not None else row.concurrency
    deployment = row.deployment if row.loadgen == "suite" else f"{row.deployment} [{row.loadgen}]"
    return (row.scenario, deployment, row.batch, load, host_of(row))


def comparable(row: Row) -> bool:
    """A performance point another run can have measured too: not a latency-bound search's (whose loads come from
    its own measurements)."""
    return row.scenario in PERFORMANCE_SCENARIOS and not row.measurement.get("search")


@dataclass
class PointComparison:
    key: tuple
    then: Row
    now: Row
    verdict: str  # regression | improvement | no significant change | not comparable
    throughput_delta_percent: float | None = None
    p_value: float | None = None
    min_effect_percent: float | None = None
    reason: str = ""

    def regressions_beyond(self, gate_percent: float) -> bool:
        """A significant regression that lost more than ``gate_percent`` of the throughput."""
        return self.verdict == "regression" and -self.throughput_delta_percent > gate_percent

    def describe(self) -> str:
        scenario, deployment, batch, load, _ = self.key
        where = f"{deployment} batch {batch}, " + (load if isinstance(load, str) else f"concurrency {load}")
        if self.throughput_delta_percent is None:
            return f"{where}: {self.verdict} ({self.reason})"
        t0, t1 = throughput_of(self.then), throughput_of(self.now)
        return (f"{where}: {self.verdict}: throughput {t0:.1f} -> {t1:.1f} inf/s "
                f"({self.throughput_delta_percent:+.1f}%, minimum effect {self.min_effect_percent:.1f}%, "
                f"p={self.p_value:.2g}); p99 {p99_of(self.then):.2f} -> {p99_of(self.now):.2f} ms")


@dataclass
class Comparison:
    then_label: str
    now_label: str
    points: list[PointComparison] = field(default_factory=list)
    only_then: list[tuple] = field(default_factory=list)
    only_now: list[tuple] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # what differs between the runs (hosts, servers)

    def regressions(self, gate_percent: float | None = None) -> list[PointComparison]:
        """Significant regressions; with ``gate_percent``, only those that lost more than that share."""
        return [p for p in self.points if p.regressions_beyond(gate_percent or 0.0)]


def throughput_of(row: Row) -> float:
    return float(row.result.get("Inferences/Second") or 0.0)


def p99_of(row: Row) -> float:
    value = row.result.get("p99 latency")
    return float(value) if value is not None else float("nan")


def _own_spread(row: Row) -> float:
    """The point's window-to-window throughput variation over its stable windows (percent of the mean)."""
    values = row.measurement.get("window_throughputs") or []
    stable = values[-int(row.measurement.get("stable_windows") or 3):]
    if len(stable) < 2 or np.mean(stable) <= 0:
        return float(row.measurement.get("throughput_spread_percent") or 0.0)
    return float(np.max(np.abs(np.asarray(stable) - np.mean(stable))) / np.mean(stable) * 100.0)


def compare_points(then: Row, now: Row, min_effect: float = DEFAULT_MIN_EFFECT,
                   alpha: float = DEFAULT_ALPHA) -> PointComparison:
    key = point_key(now)
    if not then.valid or not now.valid:
        which = "then" if not then.valid else "now"
        row = then if not then.valid else now
        return PointComparison(key, then, now, "not comparable", reason=f"{which} the point was {row.status}")
    before, after = throughput_of(then), throughput_of(now)
    lat0 = then.measurement.get("latency_samples_ms") or []
    lat1 = now.measurement.get("latency_samples_ms") or []
    if before <= 0 or not lat0 or not lat1:
        return PointComparison(key, then, now, "not comparable",
                               reason="a row has no latency samples (written before tritonsuite kept them)")
    delta = (after / before - 1.0) * 100.0
    effect = max(min_effect, _own_spread(then), _own_spread(now))
    if delta < 0:
        p = mann_whitney_greater(lat0, lat1)  # now slower?
        verdict = "regression" if -delta > effect and p < alpha else "no significant change"
    else:
        p = mann_whitney_greater(lat1, lat0)  # now faster?
        verdict = "improvement" if delta > effect and p < alpha else "no significant change"
    return PointComparison(key, then, now, verdict, delta, p, effect)


def compare_runs(then_rows: Iterable[Row], now_rows: Iterable[Row], *, then_label: str = "then",
                 now_label: str = "now", min_effect: float = DEFAULT_MIN_EFFECT, alpha: float = DEFAULT_ALPHA,
                 then_manifest: dict | None = None, now_manifest: dict | None = None) -> Comparison:
    """Join two runs' performance rows point by point and judge each joined point; with both runs' manifests, name
    what else differs between them (versions, revision, profile)."""
    then_map = {point_key(r): r for r in then_rows if comparable(r)}
    now_map = {point_key(r): r for r in now_rows if comparable(r)}
    result = Comparison(then_label, now_label)
    for key, row in now_map.items():
        if key in then_map:
            result.points.append(compare_points(then_map[key], row, min_effect, alpha))
    result.only_then = sorted((k for k in then_map if k not in now_map), key=str)
    result.only_now = sorted((k for k in now_map if k not in then_map), key=str)
    for name, describe in (("host", host_of), ("server", server_of)):
        before = sorted({describe(r) for r in then_map.values()})
        after = sorted({describe(r) for r in now_map.values()})
        if before and after and before != after:
            extra = (" (points of another host are not joined)" if name == "host" else
                     " (points are compared, and this difference may explain them)")
            result.differences.append(f"{name}: {then_label} ran on {', '.join(before)}; {now_label} on "
                                      f"{', '.join(after)}{extra}")
    result.differences += [line for line in manifest_differences(then_manifest, now_manifest)
                           if not line.startswith(("host.", "server:"))]  # host and server are named above
    return result


def within_bound(row: Row, bound) -> tuple[bool, str]:
    """(within ``bound``, why) for a measured row: valid, and the bound's statistic judged on counts over its latency
    samples (:func:`tritonsuite.load.search.count_verdict`: over only when significantly above the share the
    percentile allows, not within while undecided), or, without samples, the row's own column for the statistic."""
    from tritonsuite.load.search import count_verdict

    if not row.valid:
        return False, f"the point was {row.status}"
    samples = row.measurement.get("latency_samples_ms") or []
    value = bound.value(samples) if samples else row.result.get(
        "avg latency" if bound.statistic == "avg" else f"{bound.statistic} latency")
    if value is None:
        return False, f"the row has neither latency samples nor a {bound.statistic} column"
    stat = f"{bound.statistic} {value:.2f} ms"
    verdict = count_verdict(samples, bound) if samples else None
    if verdict is not None and verdict.verdict != "within":
        return False, f"{stat}, {verdict.verdict}: {verdict.describe(f'requests over {bound.ms:g} ms')}"
    if verdict is None and value > bound.ms:
        return False, f"{stat} > {bound.ms:g} ms"
    return True, stat


def at_the_bound(measure: Callable[[int], Row], load: int, bound, steps: int = ROUND_STEPS) -> list[Row]:
    """One round's point of a configuration at ``bound``: ``measure(load)`` at the load it was found to bear and,
    while that point is not within the bound (over it, undecided by its request counts, or not valid) and a step is
    left, again ``STEP_DOWN`` lower (at least one lower, never below 1). The rows measured, in order; the last is
    the round's point for :func:`compare_within_bound`. A configuration that no longer bears its load loses what the
    step costs it, not the whole round."""
    rows = [measure(load)]
    while steps > 0 and load > 1 and not within_bound(rows[-1], bound)[0]:
        load, steps = max(1, min(load - 1, int(load * STEP_DOWN))), steps - 1
        rows.append(measure(load))
    return rows


def _windows(row: Row) -> list[float]:
    """The throughput of the point's stable windows (its row's figure when it kept none)."""
    values = row.measurement.get("window_throughputs") or []
    stable = [float(v) for v in values[-int(row.measurement.get("stable_windows") or 3):]]
    return stable or [throughput_of(row)]


@dataclass
class BoundComparison:
    """Throughput within a latency bound of configuration B (``now``) against A (``then``), each measured at its own
    load at the bound in interleaved rounds (``then[i]`` and ``now[i]`` are round i)."""

    bound: object  # LatencyBound
    then: list[Row]
    now: list[Row]
    verdict: str  # improvement | regression | no significant change | not comparable
    then_throughput: float | None = None  # mean inf/s within the bound over the compared rounds
    now_throughput: float | None = None
    delta_percent: float | None = None
    p_value: float | None = None
    min_effect_percent: float | None = None
    rounds: int = 0  # rounds compared (both points valid)
    over: tuple[int, int] = (0, 0)  # compared rounds in which A's, B's point broke the bound
    reason: str = ""

    def describe(self) -> str:
        if self.delta_percent is None:
            return f"{self.verdict} ({self.reason})"
        broke = [f"{side} broke the bound in {n} of {self.rounds} rounds" for side, n in zip("AB", self.over) if n]
        return (f"{self.verdict}: {self.then_throughput:.1f} -> {self.now_throughput:.1f} inf/s within {self.bound} "
                f"({self.delta_percent:+.1f}%, minimum effect {self.min_effect_percent:.1f}%, p={self.p_value:.2g}, "
                f"{self.rounds} rounds{'; ' + ', '.join(broke) if broke else ''})")


def compare_within_bound(then: Sequence[Row], now: Sequence[Row], bound, min_effect: float = DEFAULT_MIN_EFFECT,
                         alpha: float = DEFAULT_ALPHA) -> BoundComparison:
    """Judge B (``now``) against A (``then``) by their throughput within ``bound`` over interleaved rounds (the
    module docstring): every stable window of a compared round counts, 0 inf/s for a point over the bound;
    improvement when B's windows are higher (one-sided Mann-Whitney U, p < ``alpha``) and its mean is more than
    ``min_effect`` percent above A's, regression the other way round."""
    if len(then) != len(now):
        raise ValueError(f"{len(then)} rounds of A against {len(now)} of B: each round measures both")
    pairs = [(a, b) for a, b in zip(then, now) if a.valid and b.valid]
    result = BoundComparison(bound, list(then), list(now), "not comparable", rounds=len(pairs),
                             min_effect_percent=min_effect)
    if len(pairs) < MIN_ROUNDS:
        result.reason = f"{len(pairs)} of {len(then)} rounds had both points valid ({MIN_ROUNDS} needed)"
        return result
    sides: list[list[float]] = [[], []]
    over = [0, 0]
    for pair in pairs:
        for i, row in enumerate(pair):
            within, _ = within_bound(row, bound)
            windows = _windows(row)
            sides[i] += windows if within else [0.0] * len(windows)
            over[i] += not within
    a, b = float(np.mean(sides[0])), float(np.mean(sides[1]))
    result.then_throughput, result.now_throughput, result.over = a, b, (over[0], over[1])
    if a <= 0 and b <= 0:
        result.verdict = "no significant change"
        result.reason = "neither point was within the bound in any round"
        result.delta_percent, result.p_value = 0.0, 1.0
        return result
    result.delta_percent = (b / a - 1.0) * 100.0 if a > 0 else math.inf
    if b >= a:
        result.p_value = mann_whitney_greater(sides[0], sides[1])  # B higher?
        gained = result.delta_percent > min_effect and result.p_value < alpha
        result.verdict = "improvement" if gained else "no significant change"
    else:
        result.p_value = mann_whitney_greater(sides[1], sides[0])  # A higher?
        lost = -result.delta_percent > min_effect and result.p_value < alpha
        result.verdict = "regression" if lost else "no significant change"
    return result
