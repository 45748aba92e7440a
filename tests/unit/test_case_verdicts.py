"""The case verdicts (tritonsuite.run.verdicts) on results built to cause each: a point or a search that could not be
measured is skipped, and fails under --strict-stability or a --perf-gate; a significant regression beyond the gate
fails; an accuracy run that missed its thresholds fails with each metric. The measured points are the engine's own
rows (tritonsuite.load.windows.summarise over windows built for them), the comparisons compare's."""
from __future__ import annotations

from tests.unit.test_compare import latencies, perf_row
from tests.unit.test_point_verdicts import CLOSED, steady, window
from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.judge.accuracy import AccuracyResult
from tritonsuite.judge.compare import compare_points
from tritonsuite.judge.underload import UnderLoadResult
from tritonsuite.load.search import SearchResult, SearchStep
from tritonsuite.load.windows import summarise
from tritonsuite.core.rows import Row
from tritonsuite.run.mixcase import MixResult
from tritonsuite.run.verdicts import PASSED, Verdict, accuracy_verdict, mix_verdict, performance_verdict, search_verdict

CASE = "identity-onnx-fp32-batch1"


def point(windows=None, fail: int = 0, **settings):
    windows = windows or steady()
    completed = sum(len(w.samples) for w in windows)
    return summarise(CLOSED, windows, {"success_count": completed - fail, "fail_count": fail}, completed,
                     MeasurementSettings(**settings), "http")


def unstable():
    return point([window(n, start=float(i)) for i, n in enumerate((3, 4, 5))], stability_percentage=10)


def wrong_under_load() -> UnderLoadResult:
    return UnderLoadResult("identity_tiny_onnx_fp32_online", 1, 4, 0.1, 0, 64, 64, 64, 64, 1,
                           failures=["sample 3 answered differently under load"])


def test_a_point_without_valid_figures_is_skipped_as_not_measured_unless_strict():
    m = unstable()
    assert m.status == "UNSTABLE" and m.not_measured
    lenient = performance_verdict(CASE, m)
    assert (lenient.outcome, lenient.line) == (
        "skipped", f"not measured: {CASE}: UNSTABLE: {m.reasons[0]} (--strict-stability fails such a point)")
    for strict in (performance_verdict(CASE, m, strict_stability=True), performance_verdict(CASE, m, gate=0.0)):
        assert (strict.outcome, strict.line) == ("failed", f"{CASE}: UNSTABLE: {m.reasons[0]}")
    bound = point(steady(client_cpu=0.95))  # client bound: INVALID, every request answered
    assert performance_verdict(CASE, bound).line == (
        f"not measured: {CASE}: INVALID: client bound: the load generator used 95% of a core (limit 90%) "
        f"(--strict-stability fails such a point)")
    # a failed request is a wrong answer, never "not measured"
    failed = performance_verdict(CASE, point(fail=1))
    assert (failed.outcome, failed.line) == ("failed", f"{CASE}: INVALID: server counted 1 failed requests")
    # nor is a point whose answers under load were wrong
    m.accuracy_under_load = wrong_under_load()
    both = performance_verdict(CASE, m)
    assert both.outcome == "failed" and both.line == (f"{CASE}: UNSTABLE: {m.reasons[0]}\n{CASE}: accuracy under "
                                                      f"load {m.accuracy_under_load.describe()}")


def test_wrong_answers_under_load_fail_a_valid_point():
    m = point()
    m.accuracy_under_load = wrong_under_load()
    found = performance_verdict(CASE, m)
    assert (found.outcome, found.line) == ("failed", f"{CASE}: accuracy under load FAILED: 64 probe responses at "
                                                     "concurrency 4 (share 0.1, seed 0) over 64 of 64 samples: sample "
                                                     "3 answered differently under load")


def test_the_perf_gate_fails_a_significant_regression_beyond_it():
    m = point()
    assert m.valid and performance_verdict(CASE, m, gate=5.0) == Verdict("passed", measured=m)
    m.comparison = compare_points(perf_row(1024, latencies(1.0)), perf_row(768, latencies(1.25, seed=1)))
    assert m.comparison.verdict == "regression" and m.comparison.throughput_delta_percent == -25.0
    gated = performance_verdict(CASE, m, gate=24.9)
    assert (gated.outcome, gated.line, gated.measured) == (
        "failed", f"{CASE}: perf gate (24.9%): {m.comparison.describe()}", m)
    assert gated.line.startswith(f"{CASE}: perf gate (24.9%): identity_tiny_onnx_fp32_offline batch 1, concurrency "
                                 f"1: regression: throughput 1024.0 -> 768.0 inf/s (-25.0%")
    for passed in (performance_verdict(CASE, m, gate=25.0), performance_verdict(CASE, m)):  # on the gate; no gate
        assert (passed.outcome, passed.measured) == ("passed", m)
    m.comparison = compare_points(perf_row(768, latencies(1.25, seed=1)), perf_row(1024, latencies(1.0)))
    assert m.comparison.verdict == "improvement" and performance_verdict(CASE, m, gate=0.0).outcome == "passed"


def search(found: bool = False, unstable: bool = False) -> SearchResult:
    result = SearchResult("concurrency", LatencyBound.parse("p99 <= 50 ms"), measured_before=5, unstable=unstable,
                          reason="concurrency 4 was within it, and not when measured again")
    if found:
        result.best = SearchStep(4, point(), True, "p99 12.00 ms")
    return result


def test_a_search_whose_answer_did_not_hold_is_not_measured_unless_strict():
    answer = ("max concurrency at p99 <= 50 ms: none (concurrency 4 was within it, and not when measured again; 5 "
              "points measured)")
    lenient = search_verdict(CASE, search(unstable=True))
    assert (lenient.outcome, lenient.line) == (
        "skipped", f"not measured: {CASE}: {answer} (--strict-stability fails such a search)")
    for strict in (search_verdict(CASE, search(unstable=True), strict_stability=True),
                   search_verdict(CASE, search(unstable=True), gate=0.0), search_verdict(CASE, search())):
        assert (strict.outcome, strict.line) == ("failed", f"{CASE}: {answer}")
    assert search_verdict(CASE, search(found=True)) is search_verdict(CASE, search(found=True, unstable=True)) is PASSED


def test_an_accuracy_run_that_missed_its_thresholds_fails_naming_each_metric():
    def run(*failures: str) -> AccuracyResult:
        return AccuracyResult("tiny", "tiny_onnx_fp16_offline", "fp16", 64, [], [], 0.1, "64 seeded samples",
                              list(failures))

    assert accuracy_verdict(run()) is PASSED
    found = accuracy_verdict(run("output_relative_l2_error = 0.0100 (threshold <= 0.0030)", "top1 = 0.5 (>= 0.9)"))
    assert (found.outcome, found.line) == (
        "failed", "tiny_onnx_fp16_offline (64 samples, 64 seeded samples) missed its thresholds:\n"
                  "  output_relative_l2_error = 0.0100 (threshold <= 0.0030)\n  top1 = 0.5 (>= 0.9)")


def test_a_mix_fails_on_wrong_answers_failed_requests_and_unmeasured_if_strict():
    def row(deployment: str, status: str = "OK", fail: int = 0, *reasons: str) -> Row:
        return Row(scenario="online", model="identity", deployment=deployment, status=status, reasons=list(reasons),
                   measurement={"server_fail_delta": fail}, extra={"mix": {"role": "together", "round": 2}})

    assert mix_verdict(CASE, MixResult("pair", rows=[row("a"), row("b")])) is PASSED
    wrong = MixResult("pair", rows=[row("a")], accuracy={"a": wrong_under_load()})
    assert mix_verdict(CASE, wrong).line == f"{CASE}: a: accuracy under the mix {wrong_under_load().describe()}"
    failed = MixResult("pair", rows=[row("a", "INVALID", 2, "server counted 2 failed requests"),
                                     row("b", "FAILED", 0, "connection refused")])
    assert mix_verdict(CASE, failed).line == (f"{CASE}: a (together, round 2): INVALID: server counted 2 failed "
                                              f"requests\nb (together, round 2): FAILED: connection refused")
    unmeasured = MixResult("pair", rows=[row("a", "UNSTABLE", 0, "throughput varied 30.0%", "client bound")])
    assert mix_verdict(CASE, unmeasured) is PASSED
    assert mix_verdict(CASE, unmeasured, strict_stability=True).line == (
        f"{CASE}: a (together, round 2): UNSTABLE: throughput varied 30.0%; client bound")
