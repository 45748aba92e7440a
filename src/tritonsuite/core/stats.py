"""Distribution-free statistics behind the suite's numbers: confidence intervals of percentiles from order statistics,
the samples a percentile needs, and one-sided binomial tests for share rules ("at most 1% of requests late").

A percentile of n latencies is an order statistic; how many of the n fall below the true percentile q is
Binomial(n, q), whatever the latency distribution. So the ranks l < u with P(l <= X < u) >= confidence bound an
interval [x_(l), x_(u)] that holds the true percentile with at least that confidence. When u would be past the
largest sample (p99 of 71 latencies: its estimate is their maximum) the interval has no upper end and the
percentile is *indicative*: a number, not a measurement. It is also indicative when the interval is wider than
the stated relative precision around the estimate.

A share rule judges counts, not a raw percentage: k late of n is *over* the limit only when a one-sided binomial
test says the share is significantly above it (p < alpha), *within* when the share observed is at most the limit,
and *undecided* in between (one late send of 71 against a 1% limit): the point should be measured longer.

A leaf module: numpy and the standard library only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Percentiles every performance row reports (the seeds' columns).
REPORTED_PERCENTILES = (50, 90, 95, 99)


def binom_cdf(k, n: int, p: float):
    """P(X <= k) for X ~ Binomial(n, p); ``k`` a number or an array of them (exact, summed in log space)."""
    ks = np.atleast_1d(np.asarray(k, dtype=np.int64))
    cdf = np.minimum(np.cumsum(_binom_pmf(n, p)), 1.0)
    # equivalent mutant: the clip's lower 0 (a negative k is 0.0 by the outer where, whatever index it reads)
    out = np.where(ks < 0, 0.0, np.where(ks >= n, 1.0, cdf[np.clip(ks, 0, n)]))  # pragma: no mutate
    return float(out[0]) if np.ndim(k) == 0 else out


def _binom_pmf(n: int, p: float) -> np.ndarray:
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"binomial with n={n!r}, p={p!r}: expected n >= 0 and 0 <= p <= 1")
    j = np.arange(n + 1)
    if p in (0.0, 1.0):
        pmf = (j == (0 if p == 0.0 else n)).astype(np.float64)  # pragma: no mutate (astype(None) is float64 too)
    else:
        log_pmf = (np.array([math.lgamma(n + 1)]) - np.vectorize(math.lgamma)(j + 1)
                   - np.vectorize(math.lgamma)(n - j + 1) + j * math.log(p) + (n - j) * math.log1p(-p))
        pmf = np.exp(log_pmf)
    return pmf


def quantile_ranks(n: int, q: float, confidence: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics bounding the ``q`` quantile (0 < q < 1) of ``n`` samples with at
    least ``confidence``: P(x_(l) <= true quantile <= x_(u)) >= confidence. None where the interval has no end in the
    sample (l below the smallest, u past the largest)."""
    if not 0.0 < q < 1.0 or not 0.0 < confidence < 1.0:
        raise ValueError(f"quantile {q!r} and confidence {confidence!r}: expected both strictly between 0 and 1")
    if n <= 0:  # pragma: no mutate (equivalent: n = 0 gives (None, None) through the general path too)
        return None, None
    tail = (1.0 - confidence) / 2.0
    # cdf[j] = P(X <= j), X = samples below the true quantile (equivalent mutant: a longer range adds cdf 1.0 past n)
    cdf = binom_cdf(np.arange(n + 1), n, q)  # pragma: no mutate
    below = np.nonzero(cdf <= tail)[0]  # P(X <= l - 1) <= tail  ->  l = j + 1
    lower = int(below[-1]) + 1 if below.size else None
    above = np.nonzero(cdf >= 1.0 - tail)[0]  # P(X <= u - 1) >= 1 - tail  ->  u = j + 1
    upper = int(above[0]) + 1 if above.size and above[0] + 1 <= n else None
    return lower, upper


def min_samples(percentile: float, confidence: float = 0.95) -> int:
    """The fewest samples whose ``percentile`` has an interval with both ends inside the sample (p99 at 95%: 367)."""
    q = percentile / 100.0
    tail = (1.0 - confidence) / 2.0
    # the upper end needs P(all n below) = q**n <= tail; the lower end needs (1-q)**n <= tail
    return int(math.ceil(max(math.log(tail) / math.log(q), math.log(tail) / math.log1p(-q))))


@dataclass(frozen=True)
class PercentileEstimate:
    """A percentile of ``n`` values with its distribution-free interval [low, high] (None: no end in the sample)."""

    percentile: float
    value: float
    n: int
    low: float | None
    high: float | None
    confidence: float  # e.g. 0.95
    precision: float  # the relative half-width asked for, e.g. 0.1
    indicative: bool
    why: str = ""  # why it is indicative

    def to_json(self) -> dict:
        return {"n": self.n, "value": round(self.value, 4),
                "low": None if self.low is None else round(self.low, 4),
                "high": None if self.high is None else round(self.high, 4),
                "confidence": self.confidence, "indicative": self.indicative, **({"why": self.why} if self.why else {})}


def percentile_estimate(values, percentile: float, confidence: float = 0.95,
                        precision: float = 0.1) -> PercentileEstimate:
    """The ``percentile`` of ``values`` (numpy's linear interpolation, as the seeds' columns) with its order-statistic
    interval; indicative when the interval has no end in the sample or its larger half exceeds ``precision`` of the
    estimate."""
    x = np.sort(np.asarray(values, dtype=np.float64))  # pragma: no mutate (equivalent: each use casts to float)
    n = int(x.size)
    if n == 0:
        return PercentileEstimate(percentile, math.nan, 0, None, None, confidence, precision, True, "no samples")
    value = float(np.percentile(x, percentile))
    lower, upper = quantile_ranks(n, percentile / 100.0, confidence)
    low = float(x[lower - 1]) if lower is not None else None
    high = float(x[upper - 1]) if upper is not None else None
    why = ""
    if low is None or high is None:
        why = (f"{n} samples; p{percentile:g} needs {min_samples(percentile, confidence)} for a "
               f"{confidence * 100:g}% interval inside the sample")
    elif value > 0 and max(high - value, value - low) > precision * value:
        why = (f"{confidence * 100:g}% interval [{low:.4g}, {high:.4g}] is wider than ±{precision * 100:g}% "
               f"of {value:.4g}")
    return PercentileEstimate(percentile, value, n, low, high, confidence, precision, bool(why), why)


def share_pvalue(k: int, n: int, limit: float) -> float:
    """One-sided p-value that the true share is above ``limit`` given ``k`` of ``n``: P(X >= k | Binomial(n, limit))."""
    if k <= 0 or n <= 0:
        return 1.0
    return float(min(1.0, _binom_pmf(n, limit)[k:].sum()))  # the upper tail summed: no 1 - cdf cancellation


@dataclass(frozen=True)
class ShareVerdict:
    """A share rule judged on counts: ``k`` of ``n`` against ``limit`` (a share from 0 to 1)."""

    k: int
    n: int
    limit: float
    alpha: float
    p_value: float
    verdict: str  # "within", "over" or "undecided"

    @property
    def share(self) -> float:
        return self.k / self.n if self.n else 0.0

    def describe(self, what: str) -> str:
        """'3 of 71 requests sent late (4.2%, limit 1%; one-sided binomial p=0.03)'"""
        return (f"{self.k} of {self.n} {what} ({self.share * 100:.1f}%, limit {self.limit * 100:g}%; one-sided "
                f"binomial p={self.p_value:.2g}, {self.verdict} at alpha {self.alpha:g})")

    def to_json(self) -> dict:
        return {"count": self.k, "of": self.n, "limit": self.limit, "p_value": round(self.p_value, 6),
                "alpha": self.alpha, "verdict": self.verdict}


def judge_share(k: int, n: int, limit: float, alpha: float = 0.05) -> ShareVerdict:
    """Over when k of n is significantly above ``limit`` (one-sided binomial, p < alpha); within when k/n <= limit;
    otherwise undecided (too few samples to tell: measure longer)."""
    if not 0.0 <= limit <= 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError(f"share limit {limit!r} and alpha {alpha!r}: expected 0 <= limit <= 1 and 0 < alpha < 1")
    p = share_pvalue(k, n, limit)
    if n > 0 and k <= limit * n:
        verdict = "within"
    elif p < alpha:
        verdict = "over"
    else:
        verdict = "undecided"
    return ShareVerdict(k, n, limit, alpha, p, verdict)
