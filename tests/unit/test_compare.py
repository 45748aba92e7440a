"""Run-to-run performance comparison: the significance test, the verdict rules, joining, and what differs."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tritonsuite.cli import main
from tritonsuite.core.rows import Row
from tritonsuite.core.store import RawWriter, StoreError, load_run, raw_path
from tritonsuite.core.settings import LatencyBound
from tritonsuite.judge.compare import (at_the_bound, compare_points, compare_runs, compare_within_bound,
                                       mann_whitney_greater, within_bound)
from tritonsuite.report.comparison import render_comparison

HOST = "AMD EPYC 7B13, 2 cores"


def perf_row(throughput: float, latencies: np.ndarray, *, batch=1, concurrency=1, host=HOST, status="OK",
             windows=(1.0, 1.0, 1.0), server="tritonserver 2.51.0 (embedded)", run_id="r1") -> Row:
    return Row(scenario="offline", model="identity", deployment="identity_tiny_onnx_fp32_offline", status=status,
               run_id=run_id, batch=batch, concurrency=concurrency,
               parameters={"Host": host, "Server": server},
               result={"Inferences/Second": throughput, "p99 latency": float(np.percentile(latencies, 99))},
               measurement={"latency_samples_ms": [float(v) for v in latencies], "stable_windows": 3,
                            "window_throughputs": [throughput * w for w in windows]})


def latencies(mean: float, n: int = 400, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, mean * 0.05, n)


def test_mann_whitney_matches_the_normal_approximation_by_hand():
    # U for b over a is 9 of 9 pairs; mean 4.5, variance 3*3/12*7 = 5.25; z = (9 - 4.5 - 0.5)/sqrt(5.25)
    expected = 0.5 * math.erfc((4.0 / math.sqrt(5.25)) / math.sqrt(2))
    assert mann_whitney_greater([1, 2, 3], [4, 5, 6]) == pytest.approx(expected)
    assert mann_whitney_greater([4, 5, 6], [1, 2, 3]) > 0.95
    assert mann_whitney_greater([1, 1, 1], [1, 1, 1]) == 1.0  # all tied: no evidence
    assert mann_whitney_greater([], [1.0]) == 1.0


def test_a_significant_drop_beyond_the_minimum_effect_is_a_regression():
    then, now = perf_row(1000, latencies(1.0)), perf_row(800, latencies(1.25, seed=1))
    verdict = compare_points(then, now)
    assert verdict.verdict == "regression" and verdict.throughput_delta_percent == pytest.approx(-20)
    assert verdict.p_value < 1e-6 and verdict.regressions_beyond(15) and not verdict.regressions_beyond(25)
    assert verdict.describe() == ("identity_tiny_onnx_fp32_offline batch 1, concurrency 1: regression: throughput "
                                  "1000.0 -> 800.0 inf/s (-20.0%, minimum effect 10.0%, p=2.3e-132); p99 1.12 -> "
                                  "1.38 ms")
    assert compare_points(now, then).verdict == "improvement"


def test_the_minimum_effect_and_alpha_decide_on_their_boundary():
    """A change of exactly the minimum effect, or a p-value of exactly alpha, is no verdict; a hair beyond is."""
    then, slower, faster = perf_row(1024, latencies(1.0)), perf_row(768, latencies(1.25, seed=1)), \
        perf_row(1280, latencies(0.8, seed=1))
    assert compare_points(then, slower, min_effect=25).verdict == "no significant change"  # -25.0% exactly
    regression = compare_points(then, slower, min_effect=24.9)
    assert regression.verdict == "regression" and regression.throughput_delta_percent == -25.0
    assert regression.regressions_beyond(24.9) and not regression.regressions_beyond(25)
    assert compare_points(then, faster, min_effect=25).verdict == "no significant change"  # +25.0% exactly
    improvement = compare_points(then, faster, min_effect=24.9)
    assert improvement.verdict == "improvement" and not improvement.regressions_beyond(0)
    p = regression.p_value
    assert compare_points(then, slower, min_effect=24.9, alpha=p).verdict == "no significant change"
    assert compare_points(then, slower, min_effect=24.9, alpha=float(np.nextafter(p, 1))).verdict == "regression"
    p = improvement.p_value
    assert compare_points(then, faster, min_effect=24.9, alpha=p).verdict == "no significant change"
    assert compare_points(then, faster, min_effect=24.9, alpha=float(np.nextafter(p, 1))).verdict == "improvement"
    # either point's own window spread raises the minimum effect: 25% here, on then's side or on now's
    spread = perf_row(1024, latencies(1.0), windows=(0.75, 1.0, 1.25))
    assert compare_points(spread, slower, min_effect=1).verdict == "no significant change"
    assert compare_points(then, perf_row(768, latencies(1.25, seed=1), windows=(0.75, 1.0, 1.25)),
                          min_effect=1).min_effect_percent == pytest.approx(25)
    # fewer than two windows kept: the row's own spread figure stands in
    few = perf_row(1024, latencies(1.0), windows=(1.0,))
    few.measurement["throughput_spread_percent"] = 30.0
    assert compare_points(few, slower, min_effect=1).min_effect_percent == 30.0


def test_an_unchanged_throughput_is_judged_as_a_possible_improvement():
    """At no change in throughput the question asked is "is now faster?": slower requests give no small p."""
    result = compare_points(perf_row(1000, latencies(1.0)), perf_row(1000, latencies(1.25, seed=1)), min_effect=0)
    assert result.verdict == "no significant change" and result.throughput_delta_percent == 0 and result.p_value > 0.5


def test_noise_is_not_a_verdict():
    # same distribution: not significant whatever the throughput figures say
    then, now = perf_row(1000, latencies(1.0)), perf_row(850, latencies(1.0, seed=2))
    assert compare_points(then, now).verdict == "no significant change"
    # significant but small: below the 10% minimum effect
    then, now = perf_row(1000, latencies(1.0)), perf_row(950, latencies(1.05, seed=3))
    assert compare_points(then, now).verdict == "no significant change"
    # a 20% drop inside a point's own window-to-window spread (25%) is not an effect either
    then = perf_row(1000, latencies(1.0), windows=(0.75, 1.0, 1.25))
    result = compare_points(then, perf_row(800, latencies(1.25, seed=1)))
    assert result.verdict == "no significant change" and result.min_effect_percent == pytest.approx(25)


def test_invalid_points_and_rows_without_samples_are_not_comparable():
    good, bad = perf_row(1000, latencies(1.0)), perf_row(900, latencies(1.0), status="UNSTABLE")
    result = compare_points(good, bad)
    assert (result.verdict, result.reason) == ("not comparable", "now the point was UNSTABLE")
    assert result.describe() == ("identity_tiny_onnx_fp32_offline batch 1, concurrency 1: not comparable (now the "
                                 "point was UNSTABLE)")
    assert compare_points(perf_row(1000, latencies(1.0), status="INVALID"), good).reason == "then the point was INVALID"
    assert compare_points(perf_row(1000, latencies(1.0), status="INVALID"), bad).reason == "then the point was INVALID"
    for side in ("then", "now"):
        rows = {"then": perf_row(1000, latencies(1.0)), "now": perf_row(1000, latencies(1.0))}
        rows[side].measurement = {}  # written before tritonsuite kept latency samples
        result = compare_points(rows["then"], rows["now"])
        assert (result.verdict, result.reason) == (
            "not comparable", "a row has no latency samples (written before tritonsuite kept them)")
        assert result.throughput_delta_percent is None
    assert compare_points(perf_row(0, latencies(1.0)), good).verdict == "not comparable"  # no throughput to divide by


def test_points_join_by_host_and_a_different_host_or_server_is_named():
    then = [perf_row(1000, latencies(1.0)), perf_row(500, latencies(2.0), batch=8)]
    now = [perf_row(1000, latencies(1.0, seed=4), host="Intel Xeon, 16 cores", server="tritonserver 2.52.0"),
           perf_row(500, latencies(2.0), batch=8, server="tritonserver 2.52.0")]
    comparison = compare_runs(then, now, then_label="run A", now_label="run B")
    assert len(comparison.points) == 1 and comparison.points[0].key[2] == 8
    assert len(comparison.only_then) == 1 and len(comparison.only_now) == 1
    text = "\n".join(comparison.differences)
    assert "host: run A ran on AMD EPYC 7B13, 2 cores; run B on AMD EPYC 7B13, 2 cores, Intel Xeon" in text
    assert "server:" in text and "2.52.0" in text
    page = render_comparison(comparison, 5)
    assert "The runs differ:" in page and "Only in run A:" in page and "fails" in page


def test_manifest_differences_are_named():
    rows = [perf_row(1000, latencies(1.0))]
    a = {"versions": {"torch": "2.12.0"}, "suite": {"git_revision": "abc"}}
    b = {"versions": {"torch": "2.13.0"}, "suite": {"git_revision": "abc"}}
    comparison = compare_runs(rows, rows, then_manifest=a, now_manifest=b)
    assert comparison.differences == ["versions.torch: 2.12.0 -> 2.13.0"]


def _store(reports, rows):
    writer = RawWriter(raw_path(reports, "offline", rows[0].run_id))
    for row in rows:
        writer.append(row)


def test_load_run_by_file_directory_and_run_id(tmp_path):
    reports = tmp_path / "reports"
    _store(reports, [perf_row(1000, latencies(1.0), run_id="20261101T000000-1")])
    _store(reports, [perf_row(900, latencies(1.0), run_id="20261102T000000-2")])
    rows, label, manifest = load_run(reports)
    assert label == "run 20261102T000000-2" and [r.result["Inferences/Second"] for r in rows] == [900]
    rows, label, _ = load_run("20261101T000000-1", reports)
    assert [r.result["Inferences/Second"] for r in rows] == [1000]
    file = next((reports / "raw").glob("offline-20261101*.jsonl"))
    (reports / "raw" / "manifest-20261101T000000-1.json").write_text(json.dumps({"run_id": "x"}))
    rows, label, manifest = load_run(file)
    assert label == file.name and manifest == {"run_id": "x"}
    with pytest.raises(StoreError, match=r"--compare 'nope': not a file, a directory or a run id .*valid run ids: "
                                           r"20261101T000000-1, 20261102T000000-2"):
        load_run("nope", reports)
    (tmp_path / "notrows.jsonl").write_text('{"scenario": "accuracy", "model": "m", "deployment": "d"}\n')
    with pytest.raises(StoreError, match="holds no offline or online rows"):
        load_run(tmp_path / "notrows.jsonl")


def test_the_command_gates_on_stored_runs_without_rerunning(tmp_path, capsys):
    reports = tmp_path / "reports"
    _store(reports, [perf_row(1000, latencies(1.0), run_id="a")])
    _store(reports, [perf_row(700, latencies(1.43, seed=5), run_id="b")])
    assert main(["compare", "a", "b", "--reports-dir", str(reports)]) == 0  # informational without a gate
    assert main(["compare", "a", "b", "--reports-dir", str(reports), "--perf-gate", "40"]) == 0  # lost 30%: within 40
    assert main(["compare", "a", "b", "--reports-dir", str(reports), "--perf-gate", "20", "--out", str(tmp_path / "c.md")]) == 1
    captured = capsys.readouterr()
    assert "perf gate: identity_tiny_onnx_fp32_offline batch 1, concurrency 1: regression" in captured.err
    assert "| regression |" in (tmp_path / "c.md").read_text()
    with pytest.raises(SystemExit):
        main(["compare", "a", "b", "--reports-dir", str(reports), "--perf-gate", "-5"])
    assert "--perf-gate -5: out of range" in capsys.readouterr().err


def test_request_rate_points_join_by_rate_and_search_points_do_not_join():
    def rate_row(rate, throughput, mean, **search):
        row = perf_row(throughput, latencies(mean), concurrency=None)
        row.request_rate = rate
        if search:
            row.measurement["search"] = search
        return row

    then = [rate_row(20.0, 20.0, 10.0), rate_row(40.0, 40.0, 12.0),
            rate_row(33.0, 33.0, 11.0, kind="request_rate", bound="p99 <= 50 ms", role="evidence", step=2)]
    now = [rate_row(20.0, 20.0, 10.1), rate_row(40.0, 28.0, 30.0),
           rate_row(33.0, 33.0, 11.0, kind="request_rate", bound="p99 <= 50 ms", role="evidence", step=2)]
    comparison = compare_runs(then, now)
    assert sorted(p.key[3] for p in comparison.points) == ["20 req/s", "40 req/s"]
    assert {p.key[3]: p.verdict for p in comparison.points}["40 req/s"] == "regression"
    assert not comparison.only_then and not comparison.only_now  # search points are neither joined nor missing
    assert "identity_tiny_onnx_fp32_offline batch 1, 40 req/s: regression" in comparison.regressions()[0].describe()


def test_the_whole_comparison_page():
    from tritonsuite.judge.compare import Comparison, PointComparison

    then, slower = perf_row(1024, latencies(1.0)), perf_row(768, latencies(1.25, seed=1), batch=8)
    regression = compare_points(perf_row(1024, latencies(1.0), batch=8), slower)
    unstable = compare_points(then, perf_row(900, latencies(1.0), status="UNSTABLE"))
    rate = PointComparison(("offline", "d", 2, "5 req/s", "h"), then, then, "no significant change", 0.0, 0.75, 10.0)
    comparison = Comparison("run A", "run B", [regression, unstable, rate],
                            only_then=[("offline", "gone", 4, 2, "h")], only_now=[("offline", "new", 1, "5 req/s", "h")],
                            differences=["server: x"])
    p99_then, p99_now = float(np.percentile(latencies(1.0), 99)), float(np.percentile(latencies(1.25, seed=1), 99))
    assert render_comparison(comparison, 12.5) == "\n".join([
        "# Performance comparison: run B against run A", "",
        "The runs differ:", "", "- server: x", "",
        "3 joined points: 1 no significant change, 1 not comparable, 1 regression; gate: a significant regression of "
        "more than 12.5% fails. A verdict needs the change to exceed the minimum effect (the larger of the set minimum "
        "and both points' own window spread) and the request latencies to differ significantly (one-sided "
        "Mann-Whitney U).", "",
        "| deployment | batch | concurrency or rate | inf/s then | inf/s now | delta | p99 then (ms) | p99 now (ms) | "
        "min effect | p | verdict |",
        "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|:--|",
        "| d | 2 | 5 req/s | 1024.0 | 1024.0 | +0.0% | "
        f"{p99_then:.2f} | {p99_then:.2f} | 10.0% | 0.75 | no significant change |",
        "| identity_tiny_onnx_fp32_offline | 1 | 1 | - | - | - | - | - | - | - | not comparable: now the point was "
        "UNSTABLE |",
        f"| identity_tiny_onnx_fp32_offline | 8 | 1 | 1024.0 | 768.0 | -25.0% | {p99_then:.2f} | {p99_now:.2f} | 10.0% "
        f"| {regression.p_value:.2g} | regression |", "",
        "Only in run A:", "", "- gone batch 4, concurrency 2 (h)", "",
        "Only in run B:", "", "- new batch 1, concurrency 5 req/s (h)", ""])
    empty = render_comparison(Comparison("a", "b"))
    assert empty == ("# Performance comparison: b against a\n\n0 joined points: no joined points; informational (no "
                     "--perf-gate). A verdict needs the change to exceed the minimum effect (the larger of the set "
                     "minimum and both points' own window spread) and the request latencies to differ significantly "
                     "(one-sided Mann-Whitney U).\n")
    assert "gate: a significant regression of more than 0% fails" in render_comparison(Comparison("a", "b"), 0)


def test_what_joins_a_point_host_server_and_load_generator():
    from tritonsuite.judge.compare import comparable, host_of, point_key, server_of

    row = perf_row(1000, latencies(1.0), batch=4, concurrency=3)
    assert point_key(row) == ("offline", "identity_tiny_onnx_fp32_offline", 4, 3, HOST)
    row.loadgen = "perf_analyzer"
    assert point_key(row) == ("offline", "identity_tiny_onnx_fp32_offline [perf_analyzer]", 4, 3, HOST)
    row.request_rate = 12.5
    assert point_key(row)[3] == "12.5 req/s"
    row.extra["host"] = "runner-a"
    assert host_of(row) == f"runner-a ({HOST})"
    row.extra["host"] = HOST
    assert host_of(row) == HOST
    bare = Row(scenario="online", model="m", deployment="m", measurement={"host": "from the measurement"})
    assert host_of(bare) == "from the measurement" and server_of(bare) == "unknown server"
    assert host_of(Row(scenario="online", model="m", deployment="m")) == "unknown host"
    assert server_of(row) == "tritonserver 2.51.0 (embedded)"
    assert comparable(row) and not comparable(Row(scenario="accuracy", model="m", deployment="m"))
    row.measurement["search"] = {"kind": "concurrency"}
    assert not comparable(row)
    online = perf_row(1.0, latencies(1.0))
    online.scenario = "online"
    assert comparable(online)


def test_mann_whitney_with_ties_and_one_sample():
    # a = [1, 2], b = [2, 3]: ranks 1, 2.5 | 2.5, 4; U_b = 6.5 - 3 = 3.5; ties: one pair, (8 - 2) / (4 * 3) = 0.5
    variance = 2 * 2 / 12.0 * (5 - 0.5)
    expected = 0.5 * math.erfc(((3.5 - 2.0 - 0.5) / math.sqrt(variance)) / math.sqrt(2))
    assert mann_whitney_greater([1, 2], [2, 3]) == pytest.approx(expected, rel=1e-12)
    assert mann_whitney_greater([2, 1], [3, 2]) == pytest.approx(expected, rel=1e-12)  # order is no matter
    # one each: U_b = 1, mean 0.5, variance 1/12 * 3 = 0.25; z = 0
    assert mann_whitney_greater([1.0], [2.0]) == 0.5
    assert mann_whitney_greater([1.0], []) == 1.0
    # three tied in a row among five: ranks 1, 3, 3, 3, 5
    a, b = [1.0, 2.0], [2.0, 2.0, 3.0]
    tie = (27 - 3) / (5 * 4)
    variance = 2 * 3 / 12.0 * (6 - tie)
    u_b = (3 + 3 + 5) - 6
    assert mann_whitney_greater(a, b) == pytest.approx(0.5 * math.erfc(((u_b - 3 - 0.5) / math.sqrt(variance))
                                                                        / math.sqrt(2)), rel=1e-12)


def test_the_own_spread_of_a_point_is_of_its_stable_windows():
    from tritonsuite.judge.compare import _own_spread

    row = perf_row(100.0, latencies(1.0), windows=(5.0, 3.0, 1.0, 1.5, 0.5))
    assert _own_spread(row) == pytest.approx(50.0)  # the last 3: mean 1, max deviation 0.5
    row.measurement["stable_windows"] = 5
    assert _own_spread(row) == pytest.approx((5.0 - 2.2) / 2.2 * 100)
    row.measurement["stable_windows"] = 4
    assert _own_spread(row) == pytest.approx(100.0)  # mean 1.5, max deviation 1.5
    row.measurement["stable_windows"] = None
    assert _own_spread(row) == pytest.approx(50.0)  # 3 when unset
    row.measurement["window_throughputs"] = [0.0, 0.0, 0.0]
    assert _own_spread(row) == 0.0
    row.measurement["throughput_spread_percent"] = 7.0
    assert _own_spread(row) == 7.0
    row.measurement["window_throughputs"] = [2.0, 4.0]
    assert _own_spread(row) == pytest.approx(100 / 3)
    del row.measurement["window_throughputs"]
    assert _own_spread(row) == 7.0


def test_throughput_and_p99_of_a_row_without_them():
    from tritonsuite.judge.compare import p99_of as _p99, throughput_of as _throughput

    row = Row(scenario="offline", model="m", deployment="m", result={"Inferences/Second": None})
    assert _throughput(row) == 0.0 and math.isnan(_p99(row))
    assert _p99(Row(scenario="offline", model="m", deployment="m", result={"p99 latency": 0})) == 0.0


def test_a_regression_gates_only_beyond_its_share_and_without_a_share_every_one_counts():
    from tritonsuite.judge.compare import Comparison

    then = perf_row(1024, latencies(1.0))
    regression = compare_points(then, perf_row(768, latencies(1.25, seed=1)))
    improvement = compare_points(then, perf_row(1280, latencies(0.8, seed=1)))
    comparison = Comparison("a", "b", [regression, improvement])
    assert comparison.regressions() == [regression] and comparison.regressions(25) == []
    assert comparison.regressions(24.99) == [regression]
    assert not regression.regressions_beyond(25.0) and regression.regressions_beyond(24.99)


def test_the_command_checks_its_percentages_and_writes_nothing_but_the_page(tmp_path, capsys):
    reports = tmp_path / "reports"
    _store(reports, [perf_row(1000, latencies(1.0), run_id="a")])
    _store(reports, [perf_row(1000, latencies(1.0, seed=9), run_id="b")])
    for flag, value in (("--min-effect", "1000"), ("--perf-gate", "1000"), ("--min-effect", "-0.5")):
        with pytest.raises(SystemExit):
            main(["compare", "a", "b", "--reports-dir", str(reports), flag, value])
        assert f"{flag} {float(value):g}: out of range; valid: 0 to 1000 (percent)" in capsys.readouterr().err
    assert main(["compare", "a", "b", "--reports-dir", str(reports), "--perf-gate", "0", "--min-effect", "0"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("# Performance comparison: run b against run a\n") and out.err == ""
    assert "gate: a significant regression of more than 0% fails" in out.out
    with pytest.raises(SystemExit):
        main(["compare", "a", "nope", "--reports-dir", str(reports)])
    assert "nope" in capsys.readouterr().err
    assert main(["compare", "a", "b", "--reports-dir", str(reports), "--out", str(tmp_path / "p.md")]) == 0
    assert (tmp_path / "p.md").read_text(encoding="utf-8") == capsys.readouterr().out


def test_a_regression_below_one_percent_counts_without_a_gate():
    from tritonsuite.judge.compare import Comparison

    then, now = perf_row(1000, latencies(1.0)), perf_row(995, latencies(1.25, seed=1))
    regression = compare_points(then, now, min_effect=0.25)
    assert regression.verdict == "regression" and regression.throughput_delta_percent == pytest.approx(-0.5)
    assert Comparison("a", "b", [regression]).regressions() == [regression]
    assert Comparison("a", "b", [regression]).regressions(0.6) == []


def test_mann_whitney_of_one_tied_pair_is_no_evidence():
    assert mann_whitney_greater([1.0], [1.0]) == 1.0
    assert mann_whitney_greater([1.0, 1.0], [1.0]) == 1.0


def test_what_differs_between_runs_whole_and_nothing_against_an_empty_run():
    then = [perf_row(1000, latencies(1.0))]
    now = [perf_row(1000, latencies(1.0), host="Intel Xeon, 16 cores", server="tritonserver 2.52.0"),
           perf_row(500, latencies(1.0), batch=8)]
    manifest_a = {"server": "2.51", "host": {"cpu": "a"}, "versions": {"torch": "1"}}
    manifest_b = {"server": "2.52", "host": {"cpu": "b"}, "versions": {"torch": "2"}}
    comparison = compare_runs(then, now, then_label="A", now_label="B", then_manifest=manifest_a,
                              now_manifest=manifest_b)
    assert comparison.differences == [
        f"host: A ran on {HOST}; B on {HOST}, Intel Xeon, 16 cores (points of another host are not joined)",
        "server: A ran on tritonserver 2.51.0 (embedded); B on tritonserver 2.51.0 (embedded), tritonserver 2.52.0 "
        "(points are compared, and this difference may explain them)",
        "versions.torch: 1 -> 2"]  # the manifests' host and server lines are the ones above
    assert [p.key[2] for p in comparison.points] == [] and comparison.only_now == sorted(
        [p for p in (("offline", "identity_tiny_onnx_fp32_offline", 8, 1, HOST),
                     ("offline", "identity_tiny_onnx_fp32_offline", 1, 1, "Intel Xeon, 16 cores"))], key=str)
    assert comparison.only_then == [("offline", "identity_tiny_onnx_fp32_offline", 1, 1, HOST)]
    assert compare_runs(then, []).differences == [] and compare_runs([], then).differences == []
    assert compare_runs([], then).only_now == [("offline", "identity_tiny_onnx_fp32_offline", 1, 1, HOST)]
    same = compare_runs(then, then)
    assert (same.differences, same.then_label, same.now_label) == ([], "then", "now")
    assert [p.verdict for p in same.points] == ["no significant change"]
    accuracy = Row(scenario="accuracy", model="m", deployment="d")
    assert compare_runs([accuracy], [accuracy]).points == []


def test_the_judged_points_use_the_given_minimum_effect_and_alpha():
    then, now = [perf_row(1024, latencies(1.0))], [perf_row(768, latencies(1.25, seed=1))]
    assert [p.verdict for p in compare_runs(then, now).points] == ["regression"]
    assert [p.verdict for p in compare_runs(then, now, min_effect=25).points] == ["no significant change"]
    assert [p.verdict for p in compare_runs(then, now, alpha=1e-300).points] == ["no significant change"]
    assert compare_runs(then, now).points[0].min_effect_percent == 10.0


def test_the_commands_options_their_defaults_and_help():
    import argparse

    from tritonsuite.report.commands import add_compare_arguments as add_arguments

    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    assert {a.dest: (a.option_strings, a.default, a.type, a.metavar, a.help) for a in parser._actions} == {
        "then": ([], None, None, None, "the earlier run: a raw rows file, a reports directory, or a run id"),
        "now": ([], None, None, None, "the later run, likewise"),
        "reports_dir": (["--reports-dir"], "reports", None, None, "where run ids are looked up (default: reports)"),
        "perf_gate": (["--perf-gate"], None, float, "PCT",
                      "exit 1 when a point regressed significantly by more than PCT percent"),
        "min_effect": (["--min-effect"], 10.0, float, "PCT", "smallest change that counts (default 10)"),
        "out": (["--out"], None, None, None, "also write the markdown page here")}


def test_the_command_judges_with_the_minimum_effect_given_and_names_what_the_manifests_say(tmp_path, capsys):
    reports = tmp_path / "reports"
    _store(reports, [perf_row(1000, latencies(1.0), run_id="a")])
    _store(reports, [perf_row(950, latencies(1.25, seed=1), run_id="b")])
    for run_id, torch in (("a", "1"), ("b", "2")):
        (reports / "raw" / f"manifest-{run_id}.json").write_text(json.dumps({"versions": {"torch": torch}}))
    assert main(["compare", "a", "b", "--reports-dir", str(reports), "--perf-gate", "2"]) == 0  # 5% < 10% effect
    page = capsys.readouterr().out
    assert "- versions.torch: 1 -> 2\n" in page and "1 no significant change" in page
    assert main(["compare", "a", "b", "--reports-dir", str(reports), "--perf-gate", "2", "--min-effect", "1"]) == 1
    assert "perf gate: identity_tiny_onnx_fp32_offline batch 1, concurrency 1: regression: throughput 1000.0 -> " \
           "950.0 inf/s (-5.0%, minimum effect 1.0%, " in capsys.readouterr().err


def test_points_below_one_inference_a_second_are_compared_and_their_spread_taken():
    from tritonsuite.judge.compare import _own_spread

    slow = perf_row(0.5, latencies(1.0), windows=(0.5, 1.0, 1.5))  # windows 0.25, 0.5, 0.75: mean 0.5
    assert _own_spread(slow) == pytest.approx(50.0)
    result = compare_points(slow, perf_row(0.5, latencies(1.0, seed=1)))
    assert result.verdict == "no significant change" and result.min_effect_percent == pytest.approx(50.0)


def test_a_point_not_comparable_keeps_both_rows():
    then, now = perf_row(1000, latencies(1.0)), perf_row(900, latencies(1.0), status="UNSTABLE")
    result = compare_points(then, now)
    assert result.then is then and result.now is now
    bare = perf_row(1000, latencies(1.0))
    bare.measurement = {}
    result = compare_points(then, bare)
    assert result.then is then and result.now is bare and result.verdict == "not comparable"


def test_the_page_counts_each_verdict():
    from tritonsuite.judge.compare import Comparison

    then = perf_row(1024, latencies(1.0))
    regression = compare_points(then, perf_row(768, latencies(1.25, seed=1)))
    other = compare_points(perf_row(1024, latencies(1.0), batch=2), perf_row(768, latencies(1.25, seed=1), batch=2))
    page = render_comparison(Comparison("a", "b", [regression, other]))
    assert "\n2 joined points: 2 regression; informational (no --perf-gate). " in page


def test_points_of_one_run_only_are_listed_in_the_order_of_their_text_and_every_host_named():
    then = [perf_row(1000, latencies(1.0), batch=8), perf_row(1000, latencies(1.0), batch=16),
            perf_row(1000, latencies(1.0), batch=2, host="other host")]
    now = [perf_row(1000, latencies(1.0), batch=4, host="third host")]
    comparison = compare_runs(then, now, then_label="A", now_label="B")
    assert [k[2] for k in comparison.only_then] == [16, 2, 8]  # as text: "16" sorts before "2" and "8"
    assert comparison.differences[0] == (f"host: A ran on {HOST}, other host; B on third host (points of another host "
                                         "are not joined)")
    rate = perf_row(1000, latencies(1.0), concurrency=None)
    rate.request_rate = 5.0
    mixed = compare_runs([], [rate, perf_row(1000, latencies(1.0), batch=32)])
    assert [k[2] for k in mixed.only_now] == [1, 32]  # a rate and a concurrency sort together as text


def test_points_of_the_later_run_only_are_listed_in_the_order_of_their_text():
    now = [perf_row(1000, latencies(1.0), batch=8), perf_row(1000, latencies(1.0), batch=16)]
    assert [k[2] for k in compare_runs([], now).only_now] == [16, 8]


# ------------------------------------------------------------------------ throughput within a latency bound
BOUND = LatencyBound.parse("p99 <= 100 ms")


def bound_row(throughput: float, latency_ms, *, windows=(0.98, 1.0, 1.02), status="OK", seed=0) -> Row:
    """A point measured at its load at the bound: its stable windows' throughput and its request latencies (ms):
    given, or normal around a mean."""
    lat = (np.random.default_rng(seed).normal(latency_ms, latency_ms * 0.1, 2000) if np.isscalar(latency_ms)
           else latency_ms)
    return perf_row(throughput, lat, concurrency=16, status=status, windows=windows)


def test_a_clear_gain_within_the_bound_is_a_gain_where_latencies_barely_move():
    """The tune's re-measure judged a pair by Mann-Whitney on request latencies. At one closed-loop load a batcher
    that ends a long tail (a fifth of the requests at 60 ms, the rest at 20 ms) for 21 ms each gives +33% inferences/s
    while most requests get a little slower: the latency test finds no significant change in any pair. Judged by the
    objective, throughput within the bound over three interleaved rounds, it is a gain."""
    rng = np.random.default_rng(0)
    tail = [np.where(rng.random(2000) < 0.2, 60.0, 20.0) + rng.normal(0, 0.5, 2000) for _ in range(3)]
    even = [rng.normal(21.0, 0.5, 2000) for _ in range(3)]
    a = [bound_row(1000, lat) for lat in tail]
    b = [bound_row(1000 * 28 / 21, lat) for lat in even]
    found = compare_within_bound(a, b, BOUND)
    assert found.verdict == "improvement" and found.delta_percent == pytest.approx(100 / 3)
    assert found.rounds == 3 and found.over == (0, 0) and found.p_value < 1e-3
    assert found.describe() == (f"improvement: 1000.0 -> 1333.3 inf/s within p99 <= 100 ms (+33.3%, minimum "
                                f"effect 10.0%, p={found.p_value:.2g}, 3 rounds)")
    assert compare_within_bound(b, a, BOUND).verdict == "regression"
    assert {compare_points(x, y).verdict for x, y in zip(a, b)} == {"no significant change"}


def test_the_same_configuration_within_the_bound_is_no_significant_change():
    """Two measurements of one configuration: window noise of a few percent either way is no verdict, nor is a
    difference under the minimum effect however consistent."""
    a = [bound_row(1000, 20.0, windows=(0.96, 1.0, 1.04), seed=i) for i in range(3)]
    b = [bound_row(1010, 20.0, windows=(1.03, 0.97, 1.0), seed=10 + i) for i in range(3)]
    assert compare_within_bound(a, b, BOUND).verdict == "no significant change"
    assert compare_within_bound(b, a, BOUND).verdict == "no significant change"
    steady = [bound_row(1080, 20.0, seed=20 + i) for i in range(3)]  # +8%, every window above: under 10%
    found = compare_within_bound(a, steady, BOUND)
    assert found.verdict == "no significant change" and found.p_value < 0.01
    assert compare_within_bound(a, steady, BOUND, min_effect=5).verdict == "improvement"


def test_a_point_over_the_bound_gives_no_throughput_within_it():
    """More inferences/s bought with a p99 over the bound is none within it: that round counts 0 for that side."""
    a = [bound_row(1000, 20.0, seed=i) for i in range(3)]
    fast_but_late = [bound_row(1500, 90.0, seed=10 + i) for i in range(3)]  # p99 about 111 ms: over 100 ms
    assert within_bound(fast_but_late[0], BOUND)[0] is False
    assert within_bound(a[0], BOUND) == (True, f"p99 {BOUND.value(a[0].measurement['latency_samples_ms']):.2f} ms")
    found = compare_within_bound(a, fast_but_late, BOUND)
    assert found.verdict == "regression" and found.now_throughput == 0.0 and found.over == (0, 3)
    once = fast_but_late[:1] + [bound_row(1500, 20.0, seed=20 + i) for i in range(2)]  # over in one round of three
    found = compare_within_bound(a, once, BOUND)
    assert found.over == (0, 1) and found.now_throughput == pytest.approx(1000.0, rel=0.01)
    assert found.verdict == "no significant change"


def test_a_round_over_the_bound_at_the_load_found_measures_a_step_lower():
    """The sequence deployment of 2026-11-30: two configurations of the same throughput, one found within the bound
    at concurrency 31 with its p99 at the bound's edge, the other at 30 with a margin. Measured at 31 in three rounds
    the first broke the bound in one, which counted 0 and made it lose to a tie. A round now measures a step lower
    where the load found is over the bound: the edge costs that round a step's throughput, not the round."""
    def edge(late_at: set):  # the edge configuration: over the bound at 31 in the rounds named, within a step lower
        calls = []

        def measure(concurrency: int) -> Row:
            calls.append(concurrency)
            over = concurrency >= 31 and len(calls) in late_at
            return perf_row(36.0 * concurrency, latencies(108.0 if over else 80.0, seed=len(calls)),
                            concurrency=concurrency, windows=(0.98, 1.0, 1.02))
        return measure, calls

    measure, calls = edge({1})
    rows = at_the_bound(measure, 31, BOUND)
    assert calls == [31, 26] and [r.concurrency for r in rows] == [31, 26]
    assert not within_bound(rows[0], BOUND)[0] and within_bound(rows[1], BOUND)[0]
    rows = at_the_bound(measure, 31, BOUND)  # within at the load found: one point
    assert calls == [31, 26, 31] and len(rows) == 1

    margin = [perf_row(1110.0, latencies(75.0, seed=50 + i), concurrency=30, windows=(0.98, 1.0, 1.02))
              for i in range(3)]
    measure, calls = edge({1})
    rounds = [at_the_bound(measure, 31, BOUND)[-1] for _ in range(3)]
    found = compare_within_bound(margin, rounds, BOUND)
    assert found.verdict == "no significant change" and found.over == (0, 0), found.describe()
    at_load_only = [measure(31) if i else perf_row(1116.0, latencies(108.0), concurrency=31) for i in range(3)]
    assert compare_within_bound(margin, at_load_only, BOUND).over == (0, 1)  # the round that counted 0 before

    always_late_rows = at_the_bound(lambda c: perf_row(36.0 * c, latencies(200.0), concurrency=c), 31, BOUND)
    assert [r.concurrency for r in always_late_rows] == [31, 26, 22]  # ROUND_STEPS steps, then the round is lost
    assert [r.concurrency for r in at_the_bound(lambda c: perf_row(36.0, latencies(200.0), concurrency=c), 1,
                                                BOUND)] == [1]  # nothing lower than 1
    assert [r.concurrency for r in at_the_bound(lambda c: perf_row(36.0 * c, latencies(200.0), concurrency=c), 2,
                                                BOUND)] == [2, 1]


def test_throughput_within_the_bound_needs_rounds_with_both_points_valid():
    a = [bound_row(1000, 20.0, seed=i) for i in range(3)]
    b = [bound_row(1300, 20.0, status="UNSTABLE", seed=10), bound_row(1300, 20.0, seed=11),
         bound_row(1300, 20.0, status="UNSTABLE", seed=12)]
    found = compare_within_bound(a, b, BOUND)
    assert found.verdict == "not comparable" and found.reason == "1 of 3 rounds had both points valid (2 needed)"
    assert found.describe() == "not comparable (1 of 3 rounds had both points valid (2 needed))"
    assert within_bound(b[0], BOUND) == (False, "the point was UNSTABLE")
    late = [bound_row(1000, 200.0, seed=i) for i in range(2)]
    found = compare_within_bound(late, late[::-1], BOUND)
    assert found.verdict == "no significant change" and found.reason == \
        "neither point was within the bound in any round"
    with pytest.raises(ValueError, match="3 rounds of A against 2 of B"):
        compare_within_bound(a, late, BOUND)
