"""Distribution-free percentile intervals and count-based share verdicts (tritonsuite.core.stats)."""
import numpy as np
import pytest

from tests.helpers import points_of
from tritonsuite.core.stats import (binom_cdf, judge_share, min_samples, percentile_estimate, quantile_ranks,
                                     share_pvalue)


def test_binomial_cdf_matches_its_definition():
    from math import comb
    n, p = 30, 0.2
    for k in (0, 3, 6, 15, 30):
        assert binom_cdf(k, n, p) == pytest.approx(sum(comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1)))
    assert binom_cdf(-1, n, p) == 0.0 and binom_cdf(n, n, p) == 1.0


def test_the_interval_covers_the_true_percentile_as_often_as_it_says():
    """Exponential latencies (known quantiles: -ln(1-q)); 2000 samples of 400 each: the 95% interval of p90 and p99
    holds the true value in at least ~95% of them, and the interval is bounded by order statistics of the sample."""
    rng = np.random.default_rng(7)
    for q in (0.5, 0.9, 0.99):
        truth = -np.log(1 - q)
        hits = trials = 0
        for _ in range(2000):
            x = rng.exponential(size=400)
            e = percentile_estimate(x, q * 100, 0.95, precision=1.0)
            if e.low is None or e.high is None:
                continue
            trials += 1
            hits += e.low <= truth <= e.high
            assert e.low in x and e.high in x
        assert trials > 1900
        # exact binomial coverage is >= 95% by construction; 2000 trials put 3 standard errors at about 1.5%
        assert hits / trials >= 0.935, (q, hits / trials)


def test_the_maximum_of_71_latencies_is_no_p99():
    x = np.random.default_rng(0).exponential(size=71)
    e = percentile_estimate(x, 99)
    assert e.indicative and e.high is None and "needs 368" in e.why and e.n == 71
    assert quantile_ranks(71, 0.99)[1] is None and quantile_ranks(368, 0.99)[1] == 368
    assert min_samples(99) == 368 and min_samples(95) == 72 and min_samples(90) == 36 and min_samples(50) == 6
    assert not percentile_estimate(x, 50, precision=1.0).indicative


def test_a_wide_interval_is_indicative():
    x = np.random.default_rng(1).exponential(size=400)  # p99 of 400 exponentials: interval far wider than 10%
    e = percentile_estimate(x, 99, precision=0.1)
    assert e.high is not None and e.indicative and "wider than" in e.why
    narrow = percentile_estimate(np.random.default_rng(1).normal(100, 1, 5000), 99, precision=0.1)
    assert not narrow.indicative and narrow.low < narrow.value < narrow.high


def test_one_late_request_of_71_decides_nothing():
    one = judge_share(1, 71, 0.01)
    assert one.verdict == "undecided" and one.p_value == pytest.approx(1 - 0.99 ** 71)
    assert judge_share(0, 71, 0.01).verdict == "within"
    assert judge_share(10, 1000, 0.01).verdict == "within"  # at the limit
    assert judge_share(40, 71, 0.01).verdict == "over"
    assert judge_share(20, 1000, 0.01).verdict == "over" and share_pvalue(20, 1000, 0.01) < 0.05
    assert "1 of 71 requests late (1.4%, limit 1%" in one.describe("requests late")
    with pytest.raises(ValueError, match="share limit 2"):
        judge_share(1, 10, 2)


def test_tables_show_each_percentile_with_its_samples_and_interval_or_mark_it_indicative():
    """A row as the engine writes it (judge.stats estimates of 71 latencies): p50/p90 with their intervals, p99
    marked '~' with no upper end, the Samples column, and the rule above the table."""
    from tests.unit.test_report import make_row, results_tables, split_cells
    from tritonsuite.load.windows import percentile_estimates, percentile_rule
    from tritonsuite.report import render_markdown
    from tritonsuite.core.settings import MeasurementSettings

    settings = MeasurementSettings()
    latencies = np.random.default_rng(3).normal(20.0, 0.5, 71)
    row = make_row("online", "bert_cpu_onnx_fp32_online", 1, 2)
    estimates = percentile_estimates(latencies, settings)
    for q, e in estimates.items():
        row.result[f"p{q} latency"] = e.value
    row.measurement.update(percentiles={f"p{q}": e.to_json() for q, e in estimates.items()},
                           percentile_rule=percentile_rule(settings), measured_requests=71)
    md = render_markdown("bert", "online", points_of([row]), plots=[])
    table = results_tables(md)[0]
    cells = dict(zip(split_cells(table[0]), split_cells(table[2])))
    p50, p99 = estimates[50], estimates[99]
    assert cells["Samples"] == "71"
    assert cells["p50 latency (ms)"] == f"{p50.value:.1f} [{p50.low:.1f}, {p50.high:.1f}]"
    assert cells["p99 latency (ms)"] == f"~{p99.value:.1f} [{p99.low:.1f}, -]"
    assert "'~' marks an indicative percentile" in md and "p90/p95/p99 need 36/72/368 latencies" in md


def test_repeats_are_interleaved_rounds_and_the_report_gives_their_median_and_drift():
    from tests.unit.test_report import make_row
    from tritonsuite.run.cases import Case, ordered_cases
    from tritonsuite.report import render_markdown

    sweep = [Case("bert", "onnx", "fp32", "online", 1, c) for c in (1, 2, 4)]
    search = Case("bert", "onnx", "fp32", "online", 1, search="concurrency", bound="p99 <= 500 ms")
    rounds = ordered_cases(sweep + [search], repeat=3)
    assert [(c.concurrency, c.round) for c in rounds[:-1]] == [(1, 1), (2, 1), (4, 1), (1, 2), (2, 2), (4, 2),
                                                               (1, 3), (2, 3), (4, 3)]  # ABC ABC ABC, not AAA
    assert rounds[-1] == search and rounds[0].id == "bert-onnx-fp32-concurrency1-round1"
    assert [c.concurrency for c in ordered_cases(sweep, 1, "descending")] == [4, 2, 1]
    shuffled = [c.concurrency for c in ordered_cases(sweep * 1, 2, "shuffled", seed=5)]
    assert shuffled == [c.concurrency for c in ordered_cases(sweep, 2, "shuffled", seed=5)]  # seeded
    assert ordered_cases(sweep, 1, "ascending") == sweep
    with pytest.raises(ValueError, match="valid orders ascending, descending, shuffled"):
        ordered_cases(sweep, 1, "random")

    rows = []
    for r, tput in enumerate((54.0, 47.0, 41.0), 1):  # throughput falling round after round
        row = make_row("online", "bert_cpu_onnx_fp32_online", 1, 4, second=r)
        row.result["Inferences/Second"] = tput
        row.measurement["repeat"] = {"round": r, "of": 3, "order": "ascending"}
        row.measurement["drift"] = {"throughput_change_percent": -12.0, "latency_change_percent": 14.0,
                                    "limit_percent": 10.0, "drifting": r == 3}
        rows.append(row)
    md = render_markdown("bert", "online", points_of(rows), plots=[])
    line = next(l for l in md.splitlines() if l.startswith("| batch 1, concurrency 4"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:6] == ["3 of 3", "54.0 / 47.0 / 41.0", "47.0", f"{13 / 47 * 100:.1f}", f"{(41 / 54 - 1) * 100:+.1f}"]
    assert "the median of the valid rounds (the figure this point reports)" in md
    assert "Points that drifted while measured" in md
    assert "- batch 1, concurrency 4 (round 3 of 3): throughput -12.0%, mean latency +14.0%" in md


def test_a_stable_point_is_lengthened_only_when_that_can_make_its_p99_a_measurement():
    from tritonsuite.load.point import LoadPoint
    from tritonsuite.load.windows import Window, wants_more_samples
    from tritonsuite.core.settings import MeasurementSettings

    settings = MeasurementSettings()
    rng = np.random.default_rng(2)

    def windows(n_each, spread=0.01, late=0):
        out = []
        for _ in range(3):
            samples = np.zeros((n_each, 4))
            samples[:, 0] = rng.normal(0.02, 0.02 * spread, n_each)
            samples[:late, 3] = 0.1  # sent 100 ms late
            out.append(Window(0.0, 1.0, samples, {}, 0.0))
        return out

    closed = LoadPoint(1, 1)
    assert not wants_more_samples(windows(20), closed, settings, 2)  # 60 -> 100 latencies: p99 out of reach
    assert wants_more_samples(windows(100), closed, settings, 2)  # 300 -> 500: p99 gets its upper end
    assert not wants_more_samples(windows(100), closed, settings, 0)  # no budget left
    assert not wants_more_samples(windows(1000), closed, settings, 2)  # narrow already: a measurement
    assert not wants_more_samples(windows(1000, spread=3.0), closed, settings, 2)  # far too wide to be helped
    rate = LoadPoint(1, request_rate=25.0)
    assert wants_more_samples(windows(24, late=1)[:1] + windows(24)[1:], rate, settings, 2)  # 1 of 72 late
    assert not wants_more_samples(windows(24, late=10), rate, settings, 2)  # clearly over: decided


def test_a_count_the_server_never_caught_up_with_is_told_apart_from_another_client():
    from tritonsuite.core.settings import MeasurementSettings
    from tritonsuite.load.point import LoadPoint
    from tritonsuite.load.windows import Window, summarise

    server = {"success_count": 4, "fail_count": 0, **{f"{p}_ns": 4000 for p in
                                                        ("queue", "compute_input", "compute_infer", "compute_output")}}
    samples = np.full((4, 4), 0.01)
    windows = [Window(float(i), float(i + 1), samples, dict(server), 0.0) for i in range(3)]

    def reasons(success: int) -> list[str]:
        m = summarise(LoadPoint(1, 1), windows, {"success_count": success, "fail_count": 0}, 12, MeasurementSettings(),
                      "http")
        return [m.status, *m.reasons]

    assert reasons(12) == ["OK"]
    assert reasons(14) == ["INVALID", "server counted 14 successful requests, client completed 12: another client "
                                      "used the model during measurement"]
    assert reasons(11) == ["INVALID", "server counted 11 requests, client completed 12: the server's statistics had "
                                      "not counted them 5 s after the last"]


def _ranks_by_definition(n: int, q: float, confidence: float = 0.95):
    """The interval's ranks from their definition, summed term by term with exact integers' floats: the largest l
    with P(X <= l-1) <= tail and the smallest u with P(X <= u-1) >= 1 - tail, X ~ Binomial(n, q)."""
    from math import comb

    tail = (1 - confidence) / 2
    cdf, total = [], 0.0
    for j in range(n + 1):
        total += comb(n, j) * q ** j * (1 - q) ** (n - j)
        cdf.append(total)
    lower = max((j + 1 for j in range(n + 1) if cdf[j] <= tail), default=None)
    upper = min((j + 1 for j in range(n + 1) if cdf[j] >= 1 - tail and j + 1 <= n), default=None)
    return lower, upper


@pytest.mark.parametrize("n, q", [(400, 0.99), (368, 0.99), (1000, 0.99), (200, 0.9), (50, 0.5), (73, 0.95)])
def test_the_order_statistics_are_the_ones_the_definition_gives(n, q):
    """Each end exactly, not merely a covering interval: an end one rank out still covers in simulation."""
    assert quantile_ranks(n, q) == _ranks_by_definition(n, q)


def test_an_interval_wide_below_the_estimate_alone_is_indicative():
    """Indicative when either half is wider than the precision: here only the lower one is."""
    x = np.concatenate([np.linspace(0, 80, 240), np.linspace(100, 101, 260)])  # a gap just below the median
    e = percentile_estimate(x, 50, precision=0.1)
    assert e.high - e.value <= 0.1 * e.value < e.value - e.low and e.indicative and "wider than" in e.why
    e = percentile_estimate(-x + 300, 50, precision=0.1)  # mirrored: only the upper half wide
    assert e.value - e.low <= 0.1 * e.value < e.high - e.value and e.indicative


def test_a_metric_on_its_threshold_passes_and_a_nan_never_does():
    from tritonsuite.core.spec import Metric

    assert Metric("f1", 0.9, 0.9).passed and not Metric("f1", 0.8999999, 0.9).passed
    assert Metric("q-risk", 0.1, 0.1, higher_is_better=False).passed
    assert not Metric("q-risk", 0.1000001, 0.1, higher_is_better=False).passed
    assert not Metric("f1", float("nan"), 0.0).passed and not Metric("err", float("inf"), 1.0, False).passed


def test_a_failed_metric_says_its_value_threshold_direction_and_worst_example():
    from tritonsuite.core.spec import Metric

    assert Metric("f1", 0.85, 0.9, worst="question 7").describe() == \
        "f1 = 0.8500 (threshold >= 0.9000); worst example: question 7"
    assert Metric("q_risk", 0.2, 0.1, higher_is_better=False).describe() == "q_risk = 0.2000 (threshold <= 0.1000)"
