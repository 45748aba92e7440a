"""The interference ratio of a deployment in a mix: what it does together with the others ÷ what it does alone.

The evidence is the stable windows of every measurement (``window_throughputs`` / ``window_avg_latency_ms`` over
``pooled_windows`` of each row), pooled per side over the interleaved rounds (alone, together, alone, together,
:mod:`tritonsuite.load.mix`). The metric is the one the deployment's traffic leaves free to move:

- closed loop (a concurrency): throughput, inferences/s per window; interference makes the ratio fall below 1;
- open loop (a request rate): the schedule fixes the throughput, so the mean latency per window; interference
  makes the ratio rise above 1.

The ratio is the Hodges-Lehmann estimate on the log scale (the median of every together-window ÷ alone-window
ratio), its interval the distribution-free Mann-Whitney interval of that shift (order statistics of the pairwise
log ratios) at ``confidence``, and its significance the two-sided Mann-Whitney U test on the windows
(:func:`tritonsuite.judge.compare.mann_whitney_greater`). Windows of one measurement are neighbours in time and not
independent; interleaving the rounds is what keeps a busy spell on the host from landing on one side only, and the
verdict needs windows from at least two rounds. A deployment **suffers interference** when the test is significant
at ``alpha`` *and* the ratio is worse than 1 by more than ``min_effect`` (the ratio's interval then lies wholly on
the bad side of 1), so neither noise nor a real but negligible effect on a shared host reads as interference; and
the effect shows in **every round** (each round's median together ÷ median alone on the same side of 1), as a real
one does: windows of one measurement share its moment, and a busy spell on the host during some rounds' together
measurements made a light companion read as interference once (0.691 [0.432, 0.980] on three pytest workers,
2026-11-30).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from tritonsuite.core.rows import Row
from tritonsuite.judge.compare import mann_whitney_greater

DEFAULT_MIN_EFFECT = 10.0  # percent, as the run-to-run comparison (asv's factor 1.1)
DEFAULT_ALPHA = 0.01
DEFAULT_CONFIDENCE = 0.99
VERDICTS = ("interference", "improvement", "no significant effect", "undecided")


@dataclass(frozen=True)
class Interference:
    deployment: str
    metric: str  # "Inferences/Second" (closed loop: lower together is worse) or "avg latency" (open loop: higher)
    ratio: float  # together ÷ alone (Hodges-Lehmann)
    low: float  # its interval at ``confidence``
    high: float
    p_value: float  # two-sided Mann-Whitney U on the windows
    alone_windows: int
    together_windows: int
    rounds: int  # rounds with windows on both sides
    verdict: str
    confidence: float = DEFAULT_CONFIDENCE
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    indicative: bool = False  # too few valid measurements: the figures come from rows that are not valid (no verdict)
    agreeing: int = 0  # rounds whose own ratio (median together ÷ median alone) lies on the pooled ratio's side of 1

    @property
    def higher_is_better(self) -> bool:
        return self.metric == "Inferences/Second"

    def describe(self) -> str:
        what = "throughput" if self.higher_is_better else "mean latency"
        return (f"{self.deployment}: {what} together ÷ alone {'~' if self.indicative else ''}{self.ratio:.3f} "
                f"[{self.low:.3f}, {self.high:.3f}] ({self.confidence * 100:g}% interval; p={self.p_value:.2g}, "
                f"Mann-Whitney on {self.together_windows} together and {self.alone_windows} alone windows from "
                f"{self.rounds} rounds, {self.agreeing} of them on the same side of 1"
                f"{'; indicative: from measurements that are not valid' if self.indicative else ''}): {self.verdict}")

    def to_dict(self) -> dict:
        return {**asdict(self), "line": self.describe()}


def _evidence(row: Row, metric: str) -> list[float]:
    """The per-window values of a row's pooled (stable) windows."""
    m = row.measurement
    values = m.get("window_throughputs" if metric == "Inferences/Second" else "window_avg_latency_ms") or []
    start, stop = m.get("pooled_windows") or (max(0, len(values) - 3), len(values))
    return [float(v) for v in values[start:stop] if v is not None and v > 0]


def metric_of(row: Row) -> str:
    return "avg latency" if row.request_rate else "Inferences/Second"


def interference(deployment: str, alone: Sequence[Row], together: Sequence[Row],
                 confidence: float = DEFAULT_CONFIDENCE, alpha: float = DEFAULT_ALPHA,
                 min_effect: float = DEFAULT_MIN_EFFECT) -> Interference:
    """The ratio of ``together`` rows ÷ ``alone`` rows of one deployment (valid rows only: an unstable, failed or
    client-bound measurement is no evidence). When the valid rows cannot decide, the figures of every measured row
    are given instead, marked indicative, with the verdict "undecided"."""
    found = _interference(deployment, [r for r in alone if r.valid], [r for r in together if r.valid], confidence,
                          alpha, min_effect)
    if found.verdict != "undecided":
        return found
    measured = [[r for r in rows if r.status != "FAILED" and r.result] for rows in (alone, together)]
    if sum(map(len, measured)) <= sum(r.valid for r in [*alone, *together]) or not all(measured):
        return found
    from dataclasses import replace

    loose = _interference(deployment, *measured, confidence, alpha, min_effect)
    if not loose.alone_windows or not loose.together_windows:
        return found
    return replace(loose, verdict="undecided", indicative=True)


#: an effect within this (in log ratio) of the minimum is at it, not beyond: a ratio computed as exp of a mean of logs
#: lands a rounding step either side of an exact boundary depending on the host's libm (0.5 came out 0.49999999999999994)
BOUNDARY = 1e-9


def _interference(deployment: str, alone: Sequence[Row], together: Sequence[Row], confidence: float, alpha: float,
                  min_effect: float) -> Interference:
    metric = metric_of((alone or together)[0]) if (alone or together) else "Inferences/Second"
    by_round: dict[int, tuple[list[float], list[float]]] = {}
    for side, rows in ((0, alone), (1, together)):
        for row in rows:
            by_round.setdefault(_round(row), ([], []))[side].extend(_evidence(row, metric))
    a = [v for pair in by_round.values() for v in pair[0]]
    t = [v for pair in by_round.values() for v in pair[1]]
    each = [float(np.median(tt) / np.median(aa)) for aa, tt in by_round.values() if aa and tt]
    ratio, low, high = ratio_interval(a, t, confidence)
    p = min(1.0, 2.0 * min(mann_whitney_greater(a, t), mann_whitney_greater(t, a))) if a and t else 1.0
    worse = (ratio < 1.0) if metric == "Inferences/Second" else (ratio > 1.0)
    effect = abs(math.log(ratio)) if ratio > 0 else math.inf
    agreeing = sum((r < 1.0) == (ratio < 1.0) and r != 1.0 for r in each)
    if len(each) < 2 or len(a) < 4 or len(t) < 4:
        verdict = "undecided"
    elif p < alpha and effect > math.log1p(min_effect / 100.0) + BOUNDARY and agreeing == len(each):
        verdict = "interference" if worse else "improvement"
    else:  # no effect, one below the minimum, or one some round does not show: a busy spell on the host, not the mix
        verdict = "no significant effect"
    return Interference(deployment, metric, ratio, low, high, p, len(a), len(t), len(each), verdict, confidence,
                        alpha, min_effect, agreeing=agreeing)


def _round(row: Row) -> int:
    return int((row.extra.get("mix") or {}).get("round", 0))


def ratio_interval(alone: Sequence[float], together: Sequence[float],
                   confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float, float]:
    """(ratio, low, high): the Hodges-Lehmann ratio together ÷ alone and its distribution-free interval (NaN when a
    side has no values; the interval is the range of pairwise ratios when the samples are too few for the level)."""
    if not len(alone) or not len(together):
        return math.nan, math.nan, math.nan
    d = np.sort((np.log(np.asarray(together, float))[:, None] - np.log(np.asarray(alone, float))[None, :]).ravel())
    n, m = len(together), len(alone)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    k = int(math.floor(n * m / 2.0 - z * math.sqrt(n * m * (n + m + 1) / 12.0)))
    k = min(max(k, 1), len(d))
    return float(np.exp(np.median(d))), float(np.exp(d[k - 1])), float(np.exp(d[len(d) - k]))
