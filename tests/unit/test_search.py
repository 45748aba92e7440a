"""Open-loop schedules, latency bounds and the search for the most load within a bound, on modelled deployments
(the search's logic; test_engine runs open-loop points and a clearly-over stop against the real server)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import points_of
from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.load.engine import LoadPoint, Measurement, arrival_gaps, schedule_tolerance_ms
from tritonsuite.load.search import CLEARLY_OVER, judge, search, stop_when_clearly_over
from tritonsuite.load.windows import Window, stability

SETTINGS = MeasurementSettings(search_resolution_percent=5, search_max_steps=14)


def measured(p99_ms: float, *, status: str = "OK", rate: float | None = None, achieved: float | None = None,
             reasons: tuple[str, ...] = ()) -> Measurement:
    """A measured point whose request latencies have the given p99 (1000 latencies, 1% of them at p99_ms x 1.5)."""
    latencies = np.full(1000, p99_ms * 0.5)
    latencies[-11:] = p99_ms  # percentile 99 of 1000 sorted values interpolates between the 990th and 991st
    latencies[-5:] = p99_ms * 1.5
    meta = {} if rate is None else {"offered_rate": rate, "achieved_rate": rate if achieved is None else achieved}
    return Measurement(LoadPoint(1, request_rate=rate) if rate else LoadPoint(1, 1), {"Inferences/Second": 1.0},
                       meta, status=status, reasons=list(reasons), latencies_s=latencies / 1e3)


def queue_model(capacity: float, base_ms: float = 1.9):
    """An M/M/1-like deployment: p99 = base / (1 - load/capacity), unbounded at capacity. Records each load."""
    calls: list[float] = []

    def measure_at(load: float) -> Measurement:
        calls.append(load)
        p99 = base_ms / (1 - load / capacity) if load < capacity else 10_000.0
        return measured(p99, rate=load)
    return measure_at, calls


def test_latency_bound_parses_percentiles_and_the_average():
    assert LatencyBound.parse("p99 <= 50 ms") == LatencyBound("p99", 50.0)
    assert LatencyBound.parse("p99.9<=5ms") == LatencyBound("p99.9", 5.0)
    assert LatencyBound.parse(" avg <= 20 ") == LatencyBound("avg", 20.0)
    assert str(LatencyBound.parse("p95<=12.5ms")) == "p95 <= 12.5 ms" and LatencyBound("p99", 50).slug == "p99le50ms"
    values = np.arange(1, 101, dtype=float)
    assert LatencyBound("p50", 1).value(values) == pytest.approx(50.5)
    assert LatencyBound("avg", 1).value(values) == pytest.approx(50.5)
    assert LatencyBound("p99", 1).value([]) == math.inf


@pytest.mark.parametrize("text", ["p100 <= 5 ms", "p0<=5", "max <= 5", "p99 <= 0 ms", "p99 >= 5", "p99", ""])
def test_a_bad_latency_bound_names_the_value_and_the_form(text):
    with pytest.raises(ValueError, match=f"latency bound {text!r}: expected '<statistic> <= <ms> ms'.*e.g. 'p99 <= 50 ms'"):
        LatencyBound.parse(text)


def test_arrivals_are_seeded_poisson_or_constant():
    def take(n, *args):
        gen = arrival_gaps(*args)
        return np.array([next(gen) for _ in range(n)])

    poisson = take(20_000, 100.0, "poisson", 7)
    assert np.array_equal(poisson, take(20_000, 100.0, "poisson", 7))  # same seed, same schedule
    assert not np.array_equal(poisson[:100], take(100, 100.0, "poisson", 8))
    assert poisson.mean() == pytest.approx(0.01, rel=0.03)  # mean gap 1/rate
    assert poisson.std() / poisson.mean() == pytest.approx(1.0, rel=0.05)  # exponential: coefficient of variation 1
    assert np.all(take(3000, 250.0, "constant", 0) == 0.004)
    with pytest.raises(ValueError, match="distribution 'uniform'; valid choices: poisson, constant"):
        next(arrival_gaps(10.0, "uniform"))


@pytest.mark.parametrize("kwargs, message", [
    ({"request_rate": 0.0}, "request rate 0.0: expected a number of requests/s > 0"),
    ({"request_rate": 5.0, "distribution": "bursty"}, "distribution 'bursty'; valid choices: poisson, constant"),
])
def test_a_bad_open_loop_point_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LoadPoint(1, **kwargs)


def test_judge_needs_a_valid_point_within_the_bound():
    bound = LatencyBound("p99", 10)
    assert judge(measured(8.0), bound) == (True, "p99 8.00 ms")
    # judged on counts: 11 of 1000 over the bound (1.1% against the 1% p99 allows) cannot tell over from within
    within, why = judge(measured(12.0), bound)
    assert not within and why.startswith("p99 12.00 ms, undecided: 11 of 1000 requests over 10 ms (1.1%, limit 1%")
    assert judge(measured(12.0), LatencyBound("p90", 10))[0]  # 1.1% over: well within what p90 allows
    over = measured(8.0)
    over.latencies_s[-30:] = 0.012  # 3% over the bound: significantly more than 1%
    assert judge(over, bound) == (False, "p99 12.00 ms > 10 ms (30 of 1000 requests over it, p=2.1e-07)")
    within, why = judge(measured(8.0, status="INVALID", reasons=("client bound",)), bound)
    assert not within and why == "p99 8.00 ms but the point is INVALID: client bound"
    # open loop, the achieved rate (a Poisson count over the windows) is reported, not judged
    assert judge(measured(8.0, rate=100.0, achieved=84.0), bound) == (True, "p99 8.00 ms")
    assert judge(measured(30.0, status="STOPPED", reasons=("stopped early: over",)), bound) == (False, "stopped early: over")


def test_a_point_is_stopped_after_two_windows_in_a_row_clearly_over_the_bound():
    bound = LatencyBound("p99", 10)
    stop = stop_when_clearly_over(bound)

    def window(ms):
        return Window(0.0, 1.0, np.column_stack([np.full(100, ms / 1e3), np.zeros((100, 3))]), {}, 0.0)

    over, fine = window(CLEARLY_OVER * 10 + 1), window(5)
    assert stop([over]) is None  # one noisy window does not end a point
    assert stop([fine, over]) is None and stop([over, fine]) is None
    assert stop([fine, over, over]) == "p99 21.0 and 21.0 ms in two windows in a row, more than 2x the bound 10 ms"


def test_rate_search_brackets_bisects_and_confirms_the_highest_rate_within_the_bound():
    measure_at, calls = queue_model(capacity=1000.0)  # p99 <= 10 ms up to 810 req/s
    result = search(measure_at, "request_rate", LatencyBound("p99", 10), 100.0, SETTINGS)
    assert result.found and 810 * 0.95 <= result.best.load <= 810
    phases = [s.role for s in result.steps]
    assert phases[:4] == ["bracket"] * 4 and calls[:4] == [100, 200, 400, 800]  # grows by 2 while within
    assert calls[4] == 1600 and not result.steps[4].within  # over: the bracket is [800, 1600]
    assert set(phases[5:-1]) == {"bisect"} and phases[-1] == "re-measure"
    assert result.best is result.steps[-1] and result.best.load == max(s.load for s in result.steps if s.within)
    assert len(result.steps) <= SETTINGS.search_max_steps + 3
    assert result.describe().startswith("max req/s at p99 <= 10 ms: ")


def test_rate_search_halves_from_a_start_over_the_bound():
    measure_at, calls = queue_model(capacity=100.0)  # within up to 81 req/s
    result = search(measure_at, "request_rate", LatencyBound("p99", 10), 400.0, SETTINGS)
    assert calls[:4] == [400, 200, 100, 50] and result.found and 81 * 0.95 <= result.best.load <= 81


def test_rate_search_goes_no_lower_than_an_eighth_of_its_start():
    measure_at, calls = queue_model(capacity=10.0)  # within up to 8.1 req/s: below start / 8
    result = search(measure_at, "request_rate", LatencyBound("p99", 10), 1000.0, SETTINGS)
    assert calls == [1000, 500, 250, 125] and not result.found
    assert result.reason.startswith("even 125 req/s is not within it: p99 ")


def test_concurrency_search_steps_in_whole_requests():
    result = search(lambda c: measured(1.5 * c), "concurrency", LatencyBound("p99", 10), 1, SETTINGS)
    assert result.best.load == 6 and all(float(s.load).is_integer() for s in result.steps)
    assert result.describe() == (f"max concurrency at p99 <= 10 ms: concurrency 6 (p99 9.00 ms; 1.0 inf/s; "
                                 f"{len(result.steps)} points measured)")


def test_a_ceiling_ends_the_bracket_where_the_bound_still_holds():
    """Within the bound up to concurrency 6: with a ceiling of 4 the answer is 4 (measured again); a ceiling above the
    answer changes nothing; the ceiling is never exceeded, even from a start above it."""
    calls = []

    def at(c):
        calls.append(c)
        return measured(1.5 * c)

    bound = LatencyBound("p99", 10)
    result = search(at, "concurrency", bound, 1, SETTINGS, highest=4)
    assert result.best.load == 4 and calls == [1, 2, 4, 4]
    assert [s.role for s in result.steps] == ["bracket", "bracket", "bracket", "re-measure"]
    assert search(lambda c: measured(1.5 * c), "concurrency", bound, 1, SETTINGS, highest=64).best.load == 6
    calls.clear()
    assert search(at, "concurrency", bound, 16, SETTINGS, highest=5).best.load == 5 and max(calls) == 5


def test_no_load_within_the_bound_is_an_answer_of_none_with_the_reason():
    result = search(lambda c: measured(50.0), "concurrency", LatencyBound("p99", 10), 1, SETTINGS)
    assert not result.found and result.reason == ("even concurrency 1 is not within it: p99 50.00 ms > 10 ms "
                                                   "(1000 of 1000 requests over it, p=0)")
    assert result.describe().startswith("max concurrency at p99 <= 10 ms: none (even concurrency 1")


def test_points_measured_count_the_start_the_caller_measured():
    measure_at, _ = queue_model(capacity=100.0)
    result = search(measure_at, "request_rate", LatencyBound("p99", 10), 50.0, SETTINGS, measured_before=1)
    assert result.points == len(result.steps) + 1
    assert result.describe().endswith(f"; {len(result.steps) + 1} points measured)")


def test_a_noisy_confirmation_falls_back_to_the_next_lower_point_within_the_bound():
    measure_at, calls = queue_model(capacity=1000.0)
    remeasured = []

    def noisy(load):
        seen = load in calls
        m = measure_at(load)
        if seen and not remeasured:  # the first re-measure breaks the bound
            remeasured.append(load)
            return measured(50.0, rate=load)
        return m

    result = search(noisy, "request_rate", LatencyBound("p99", 10), 100.0, SETTINGS)
    assert result.found and remeasured and not result.unstable
    # the next try steps clear of the point that broke: at least twice the resolution lower
    assert result.best.load <= remeasured[0] * (1 - 2 * SETTINGS.search_resolution_percent / 100)
    assert [s.role for s in result.steps][-2:] == ["re-measure", "re-measure"]


def test_an_answer_that_never_holds_is_no_answer():
    flips = iter([True, True, False, False, False, False, False, False])

    def flaky(c):
        return measured(5.0 if next(flips, False) else 50.0)

    result = search(flaky, "concurrency", LatencyBound("p99", 10), 1, SETTINGS)
    assert not result.found and result.unstable and "no answer is stable on this host" in result.reason


def test_the_search_stops_after_its_step_budget():
    result = search(lambda r: measured(1.0, rate=r), "request_rate", LatencyBound("p99", 10), 1.0,
                    MeasurementSettings(search_max_steps=5))
    assert [s.load for s in result.steps[:5]] == [1, 2, 4, 8, 16] and result.found  # never over: the last one


def test_unknown_search_kind():
    with pytest.raises(ValueError, match="search kind 'latency'; valid choices: request_rate, concurrency"):
        search(lambda x: measured(1.0), "latency", LatencyBound("p99", 10), 1, SETTINGS)


def test_lateness_is_judged_against_the_gap_between_arrivals():
    settings = MeasurementSettings(schedule_tolerance_ms=5.0)
    assert schedule_tolerance_ms(LoadPoint(1, request_rate=1000.0), settings) == 5.0
    assert schedule_tolerance_ms(LoadPoint(1, request_rate=2.5), settings) == pytest.approx(40.0)  # a tenth of 400 ms
    assert schedule_tolerance_ms(LoadPoint(1, 4), settings) == 5.0


def test_open_loop_windows_are_judged_on_latency_alone():
    def window(n, latency_ms):  # n requests in one second
        return Window(0.0, 1.0, np.column_stack([np.full(n, latency_ms / 1e3), np.zeros((n, 3))]), {}, 0.0)

    poisson_counts = [window(16, 20.0), window(24, 20.5), window(19, 19.8)]  # 20 req/s offered: counts vary
    assert stability(poisson_counts, 10.0, open_loop=True)[0]
    assert not stability(poisson_counts, 10.0)[0]  # closed loop, the throughput must agree too
    assert not stability([window(20, 20.0), window(20, 30.0), window(20, 20.0)], 10.0, open_loop=True)[0]


def test_a_search_tells_its_progress_point_by_point():
    lines = []
    result = search(lambda c: measured(1.5 * c), "concurrency", LatencyBound("p99", 10), 1, SETTINGS,
                    progress=lines.append)
    assert len(lines) == len(result.steps)
    assert lines[0].startswith("point 1: concurrency 1 (bracket): within: p99 1.50 ms; bracket 1..? (within..over)")
    over = next(line for line, step in zip(lines, result.steps) if not step.within)
    assert " (bracket): over: p99 " in over and "(within..over), at most " in over
    assert lines[-1].startswith(f"point {len(result.steps)}: concurrency 6 (re-measure): within: ")
    assert lines[-1].endswith("; the answer")
    # each line counts the search's points, of at most its budget (a terminal's bar)
    assert [(line.done, line.total) for line in lines] == [(i, SETTINGS.search_max_steps)
                                                          for i in range(1, len(lines) + 1)]


def test_the_progress_line_says_what_a_point_waits_for():
    import numpy as np

    from tritonsuite.load.windows import Window, progress_line

    def window(requests: int, latency_s: float, factor: int = 1) -> Window:
        samples = np.zeros((requests, 4))
        samples[:, 0] = latency_s
        return Window(0.0, 1.0, samples, {}, 0.0, factor=factor)

    settings = MeasurementSettings(stability_percentage=10, max_trials=10)
    assert progress_line([window(100, 0.01)], settings) == (
        "window 1 of <=10, 100 requests; waiting for 3 windows to compare (latency and throughput within 10%)")
    noisy = [window(100, 0.01), window(100, 0.02), window(50, 0.01, factor=2)]
    assert progress_line(noisy, settings) == (
        "window 3 of <=10 (x2), 250 requests; last 3: throughput spread 40.0%, latency 50.0%: waiting for the last 3 "
        "windows to agree within 10%")
    steady = [window(100, 0.01)] * 3
    assert progress_line(steady, settings).endswith("throughput spread 0.0%, latency 0.0%: stable")
    assert progress_line(noisy, settings, stopped_early="p99 over").endswith("; given up: p99 over")
    assert progress_line(noisy * 4, settings).endswith("no 3 windows agreed within 10% in 10: UNSTABLE")


def test_a_point_the_count_test_cannot_decide_asks_to_be_lengthened():
    """The search's stop-early check also tells the load generator when its pooled windows cannot be judged yet (the
    generator then measures on, within settings.sample_windows)."""
    undecided = stop_when_clearly_over(LatencyBound("p99", 10)).undecided

    def window(over: int, n: int = 100):
        ms = np.full(n, 5.0)
        ms[:over] = 11.0
        return Window(0.0, 1.0, np.column_stack([ms / 1e3, np.zeros((n, 3))]), {}, 0.0)

    assert undecided([window(2), window(1)])  # 3 of 200 over a 1% share: cannot tell
    assert not undecided([window(0), window(1)])  # 0.5%: within
    assert not undecided([window(10), window(10)])  # 10%: clearly over
    assert not stop_when_clearly_over(LatencyBound("avg", 10)).undecided([window(50)])  # no count test for avg


def test_a_point_measured_again_says_how_far_it_moved():
    from tritonsuite.load.search import remeasure_drift

    moved = remeasure_drift({"Inferences/Second": 54.0, "p99 latency": 70.0},
                            {"Inferences/Second": 41.0, "p99 latency": 84.0}, 10.0)
    assert moved == {"throughput_change_percent": -24.07, "p99_change_percent": 20.0, "limit_percent": 10.0,
                     "drifting": True}
    held = remeasure_drift({"Inferences/Second": 54.0, "p99 latency": None}, {"Inferences/Second": 53.0}, 10.0)
    assert held["p99_change_percent"] is None and not held["drifting"]


def test_the_search_table_says_how_far_a_remeasured_point_moved():
    from tests.unit.test_report import load_rows_with_rates_and_a_search
    from tritonsuite.report import render_markdown

    rows = load_rows_with_rates_and_a_search()
    evidence = [r for r in rows if r.measurement.get("search", {}).get("role") == "evidence"]
    evidence[-1].measurement["remeasure"] = {"throughput_change_percent": -24.07, "p99_change_percent": 20.0,
                                             "limit_percent": 10.0, "drifting": True}
    md = render_markdown("bert", "online", points_of(rows), plots=[])
    assert "since first measured: inf/s -24.1%, p99 +20.0% (drift beyond the stability limit)" in md
