"""tritonsuite.core.stats on its edges: every argument it refuses, the degenerate binomials, exact boundaries of the
interval ranks and of the share rule, and every field of an estimate. Written against the mutants a mutation tester
left alive (docs/mutation.md): each assertion below fails for one of them."""
import math

import numpy as np
import pytest

from tritonsuite.core.stats import (PercentileEstimate, _binom_pmf, binom_cdf, judge_share, min_samples,
                                     percentile_estimate, quantile_ranks, share_pvalue)


@pytest.mark.parametrize("n, p", [(-1, 0.5), (3, -0.1), (3, 1.5)])
def test_a_binomial_outside_its_domain_is_refused(n, p):
    with pytest.raises(ValueError, match=rf"binomial with n={n}, p={p}: expected n >= 0 and 0 <= p <= 1"):
        _binom_pmf(n, p)


def test_the_degenerate_binomials_put_all_their_mass_on_one_count():
    assert _binom_pmf(3, 0.0).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert _binom_pmf(3, 1.0).tolist() == [0.0, 0.0, 0.0, 1.0]
    assert _binom_pmf(0, 0.3).tolist() == [1.0]


def test_the_cdf_is_exactly_one_from_n_on_and_never_above_one():
    assert binom_cdf(2, 2, 0.5) == 1.0 and binom_cdf(7, 2, 0.5) == 1.0  # the summed pmf stops at 0.9999999999999999
    assert binom_cdf(np.arange(51), 50, 0.5).max() <= 1.0  # there it sums to 1.0000000000000193
    assert isinstance(binom_cdf(1, 2, 0.5), float) and binom_cdf(np.array([1, 2]), 2, 0.5).shape == (2,)
    assert binom_cdf(np.array([1.0, 3.0]), 4, 0.5).tolist() == binom_cdf(np.array([1, 3]), 4, 0.5).tolist()


@pytest.mark.parametrize("q, confidence", [(0.0, 0.95), (1.0, 0.95), (1.5, 0.95), (0.5, 0.0), (0.5, 1.0),
                                           (0.5, 1.5)])
def test_a_quantile_or_confidence_outside_0_1_is_refused(q, confidence):
    with pytest.raises(ValueError, match=rf"quantile {q} and confidence {confidence}: expected both strictly"):
        quantile_ranks(10, q, confidence)


def test_interval_ranks_on_their_exact_boundaries():
    assert quantile_ranks(0, 0.5) == (None, None) and quantile_ranks(5, 0.5) == (None, None)
    assert quantile_ranks(1, 0.25, 0.5) == (None, 1)  # P(X <= 0) = 0.75 = 1 - tail exactly: u = 1
    assert quantile_ranks(4, 0.5, 0.875) == (1, None)  # P(X <= 0) = 0.0625 = tail exactly: l = 1
    assert quantile_ranks(20, 0.5) == (6, 15)


def test_min_samples_needs_both_ends_inside_the_sample():
    assert min_samples(1) == 368 and min_samples(5) == 72  # the lower end decides for a small percentile


def test_no_samples_and_one_sample():
    e = percentile_estimate([], 50, 0.9, 0.2)
    assert (e.percentile, e.n, e.low, e.high, e.confidence, e.precision, e.indicative, e.why) == \
        (50, 0, None, None, 0.9, 0.2, True, "no samples") and math.isnan(e.value)
    e = percentile_estimate([5.0], 50)
    assert (e.value, e.n, e.low, e.high, e.indicative) == (5.0, 1, None, None, True)
    assert e.why == "1 samples; p50 needs 6 for a 95% interval inside the sample"


def test_an_estimate_carries_what_it_was_asked_and_its_interval_ends():
    x = np.random.default_rng(3).normal(100, 1, 2000)
    e = percentile_estimate(x, 90, 0.9, 0.2)
    lower, upper = quantile_ranks(2000, 0.9, 0.9)
    assert (e.percentile, e.confidence, e.precision, e.why) == (90, 0.9, 0.2, "")
    assert e.low == np.sort(x)[lower - 1] and e.high == np.sort(x)[upper - 1] and not e.indicative
    assert percentile_estimate(x, 90).precision == 0.1 and percentile_estimate(x, 90).confidence == 0.95
    few = percentile_estimate(x[:50], 99, 0.9)
    assert few.why == f"50 samples; p99 needs {min_samples(99, 0.9)} for a 90% interval inside the sample"


def test_the_width_rule_on_its_boundary_and_at_zero():
    # p50 of 20: ranks 6 and 15; the larger half exactly precision x value is not wider
    x = np.array([10.0] * 5 + [60.0] + [100.0] * 8 + [150.0] + [200.0] * 5)
    e = percentile_estimate(x, 50, precision=0.5)
    assert (e.value, e.low, e.high) == (100.0, 60.0, 150.0) and not e.indicative
    wide = percentile_estimate(x, 50, precision=0.49)
    assert wide.why == "95% interval [60, 150] is wider than ±49% of 100"
    zero = percentile_estimate(np.array([0.0] * 52 + [1.0] * 48), 50)  # no relative width of zero
    assert (zero.value, zero.high) == (0.0, 1.0) and not zero.indicative
    small = percentile_estimate(np.linspace(0.1, 0.9, 200), 50)  # a value below 1 is judged as any other
    assert small.indicative


def test_share_rule_edges():
    assert share_pvalue(0, 2, 0.5) == 1.0 and share_pvalue(3, 0, 0.1) == 1.0  # the pmf sums to 0.9999999999999999
    assert share_pvalue(1, 1, 0.3) == pytest.approx(0.3) and share_pvalue(1, 50, 0.5) <= 1.0
    assert judge_share(0, 10, 0.0).verdict == "within" and judge_share(10, 10, 1.0).verdict == "within"
    assert judge_share(0, 0, 0.01).verdict == "undecided" and judge_share(0, 1, 0.5).verdict == "within"
    at = share_pvalue(1, 1, 0.05)  # 0.05, or a rounding step off it (exp of a log: the host's libm decides)
    assert judge_share(1, 1, 0.05, alpha=at).verdict == "undecided"  # p equal to alpha: not below it, on any host
    for limit, alpha in ((-0.1, 0.05), (1.1, 0.05), (0.1, 0.0), (0.1, 1.0), (0.1, 1.5)):
        with pytest.raises(ValueError, match=rf"share limit {limit} and alpha {alpha}: expected"):
            judge_share(1, 10, limit, alpha)


def test_json_of_an_estimate_and_a_verdict():
    e = PercentileEstimate(99, 12.34567, 400, 11.11111, None, 0.95, 0.1, True, "why")
    assert e.to_json() == {"n": 400, "value": 12.3457, "low": 11.1111, "high": None, "confidence": 0.95,
                           "indicative": True, "why": "why"}
    assert "why" not in PercentileEstimate(50, 1.0, 10, 1.0, 1.0, 0.95, 0.1, False).to_json()
    other = PercentileEstimate(50, 1.0, 10, None, 2.345678, 0.95, 0.1, True, "w").to_json()
    assert (other["low"], other["high"]) == (None, 2.3457)
    v = judge_share(3, 71, 0.01)
    assert v.to_json() == {"count": 3, "of": 71, "limit": 0.01, "p_value": round(v.p_value, 6), "alpha": 0.05,
                           "verdict": v.verdict}
    assert v.describe("requests sent late") == (f"3 of 71 requests sent late (4.2%, limit 1%; one-sided binomial "
                                                f"p={v.p_value:.2g}, {v.verdict} at alpha 0.05)")
