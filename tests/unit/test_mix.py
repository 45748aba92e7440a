"""Mixed load without a server: the interference judge, the profile's mix: section, the mix cases and pages."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tritonsuite.core.rows import Row
from tritonsuite.core.store import RawWriter, load_rows, raw_path
from tritonsuite.judge.interference import interference, ratio_interval
from tritonsuite.profiles import ProfileError, load_profile, narrow
from tritonsuite.profiles.mix import MixError, check_mixes, parse_mixes
from tritonsuite.report.merge import merge_reports
from tritonsuite.report import write_reports
from tritonsuite.report.mix import mix_summary_lines, render_mix
from tritonsuite.report.records import mixes_of
from tritonsuite.run.cases import profile_cases


def _row(deployment: str, role: str, rnd: int, windows, rate: float | None = None, status: str = "OK",
         host: str = "") -> Row:
    key = "window_avg_latency_ms" if rate else "window_throughputs"
    measurement = {key: [999.0] + list(windows), "pooled_windows": [1, 1 + len(windows)], "measured_requests": 400,
                   "client_cpu_percent": 30.0, "deployment_client_cpu_percent": 12.0}
    extra = {"mix": {"name": "m", "role": role, "round": rnd, "start_s": rnd * 10.0 + (role == "together") * 5,
                     "end_s": rnd * 10.0 + 4 + (role == "together") * 5, "traffic": "concurrency 1"}}
    if host:
        extra["host"] = host
    return Row(scenario="mix", model=deployment, deployment=deployment, status=status, concurrency=None if rate else 1,
               request_rate=rate, result={"Inferences/Second": float(np.mean(windows)), "p99 latency": 10.0},
               measurement=measurement, extra=extra)


def _rounds(deployment, alone, together, rounds=3, rate=None, seed=0, host=""):
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(1, rounds + 1):
        rows.append(_row(deployment, "alone", r, alone * (1 + 0.03 * rng.standard_normal(4)), rate, host=host))
        rows.append(_row(deployment, "together", r, together * (1 + 0.03 * rng.standard_normal(4)), rate, host=host))
    return rows


def _split(rows):
    return ([r for r in rows if r.extra["mix"]["role"] == "alone"],
            [r for r in rows if r.extra["mix"]["role"] == "together"])


def test_ratio_interval_recovers_a_known_ratio():
    rng = np.random.default_rng(1)
    alone = 100 * (1 + 0.05 * rng.standard_normal(30))
    ratio, low, high = ratio_interval(alone, 0.6 * 100 * (1 + 0.05 * rng.standard_normal(30)))
    assert low < 0.6 < high and ratio == pytest.approx(0.6, rel=0.05) and high - low < 0.1
    assert all(np.isnan(ratio_interval([], [1.0])))


def test_a_clear_drop_is_interference_and_equal_windows_are_not():
    hit = interference("bert", *_split(_rounds("bert", 100.0, 55.0)))
    assert hit.verdict == "interference" and hit.high < 1 and hit.p_value < 0.01 and hit.rounds == 3
    assert (hit.alone_windows, hit.together_windows) == (12, 12)  # the pooled windows only, not the first
    same = interference("bert", *_split(_rounds("bert", 100.0, 100.0, seed=2)))
    assert same.verdict == "no significant effect" and same.low < 1 < same.high


def test_an_effect_some_round_does_not_show_is_no_interference():
    """A busy spell on the host during three of four rounds' together measurements: pooled, the windows say a 30%
    loss (significant); round by round, the fourth says none. The mix did not do it."""
    rows = _rounds("bert", 100.0, 70.0, rounds=4)
    last = [r for r in rows if r.extra["mix"]["round"] == 4 and r.extra["mix"]["role"] == "together"][0]
    last.measurement["window_throughputs"] = [999.0, 101.0, 103.0, 99.0, 102.0]
    spell = interference("bert", *_split(rows))
    assert spell.p_value < 0.01 and spell.ratio < 0.9 and (spell.rounds, spell.agreeing) == (4, 3)
    assert spell.verdict == "no significant effect", spell.describe()
    every = interference("bert", *_split(_rounds("bert", 100.0, 70.0, rounds=4)))  # every round shows it
    assert (every.agreeing, every.verdict) == (4, "interference")


def test_a_small_significant_change_is_below_the_minimum_effect():
    small = interference("bert", *_split(_rounds("bert", 100.0, 95.0, rounds=6)))
    assert small.p_value < 0.01 and small.verdict == "no significant effect"


def test_open_loop_judges_latency_and_one_round_is_undecided():
    slower = interference("tft", *_split(_rounds("tft", 10.0, 20.0, rate=20.0)))
    assert slower.metric == "avg latency" and slower.ratio == pytest.approx(2.0, rel=0.1)
    assert slower.verdict == "interference"
    assert interference("tft", *_split(_rounds("tft", 10.0, 20.0, rounds=1, rate=20.0))).verdict == "undecided"


def test_invalid_rows_are_no_evidence_only_an_indicative_figure():
    alone, together = _split(_rounds("bert", 100.0, 50.0))
    together = [Row(**{**t.__dict__, "status": "UNSTABLE"}) for t in together]
    found = interference("bert", alone, together)
    assert found.verdict == "undecided" and found.indicative and found.ratio == pytest.approx(0.5, rel=0.05)
    assert "~0.5" in found.describe() and "indicative: from measurements that are not valid" in found.describe()
    failed = [Row.failed(reason="x", scenario="mix", model="bert", deployment="bert") for _ in together]
    assert not interference("bert", alone, failed).indicative  # a failed row has no figures at all


def test_the_cpu_profile_ships_a_mix_of_bert_and_tft():
    profile = load_profile("cpu")
    mix = profile.mixes["bert_tft"]
    assert mix.models == ("bert", "tft") and mix.rounds >= 2
    assert [m.format for m in mix.members] == ["onnx", "onnx"]
    assert [c.id for c in profile_cases(profile, "mix")] == ["bert_tft", "bert_tft-maxscale", "bert_tft-tune"]
    assert mix.weights() == [1.0, 0.1] and mix.tune["budget"] >= 1
    assert mix.settings(profile.measurement).stability_percentage == 20  # the mix's own change
    assert mix.settings(profile.measurement).window_ms == profile.measurement.window_ms
    assert narrow(profile, models=["bert"]).mixes == {}  # a member narrowed out: the mix is left out
    assert "bert_tft" in narrow(profile, models=["bert", "tft"], formats=["onnx"]).mixes
    assert narrow(profile, formats=["ts-trace"]).mixes == {}


@pytest.mark.parametrize("body, message", [
    ({"deployments": {"bert": {"concurrency": 2}}}, "at least two"),
    ({"deployments": {"bert": {"concurrency": 2, "request_rate": 3}, "tft": {"share": 0.5}}}, "exactly one"),
    ({"deployments": {"bert": {"share": 0.5}, "tft": {"share": 0.5}}}, "total_rate"),
    ({"total_rate": 10, "deployments": {"bert": {"share": 0.7}, "tft": {"share": 0.5}}}, "add up to 1.2"),
    ({"rounds": 0, "deployments": {"bert": {"concurrency": 1}, "tft": {"concurrency": 1}}}, "rounds 0"),
    ({"deployment": {}}, "unknown key deployment; valid keys: rounds, total_rate, measurement, tune, deployments"),
    ({"deployments": {"bert": {"concurrency": 1.5}, "tft": {"concurrency": 1}}}, "concurrency 1.5"),
])
def test_bad_mix_sections_are_one_line_naming_the_choices(body, message):
    with pytest.raises(MixError, match=message.replace("(", r"\(")):
        parse_mixes({"m": body}, "p.yaml:mix")


def test_members_are_checked_against_the_profile_models():
    models = load_profile("cpu").models
    mixes = parse_mixes({"m": {"total_rate": 20, "deployments": {"bert": {"share": 0.25}, "tft": {"format": "ts-trace",
                                                                                           "share": 0.75}}}}, "x")
    checked = check_mixes(mixes, models)["m"]
    assert [m.format for m in checked.members] == ["onnx", "ts-trace"]
    assert [m.rate(20) for m in checked.members] == [5.0, 15.0]
    with pytest.raises(MixError, match="'nope' is not a model of the profile; valid choices: bert"):
        check_mixes(parse_mixes({"m": {"deployments": {"nope": {"concurrency": 1}, "tft": {"concurrency": 1}}}}, "x"),
                    models)
    with pytest.raises(MixError, match="format 'trt5'; valid choices: onnx"):
        check_mixes(parse_mixes({"m": {"deployments": {"bert": {"format": "trt5", "concurrency": 1},
                                                       "tft": {"concurrency": 1}}}}, "x"), models)


def test_a_profile_with_a_bad_mix_is_a_profile_error(tmp_path):
    (tmp_path / "p.yaml").write_text("device: cpu\nmodels: {}\nmix: {m: {deployments: {a: {concurrency: 1}}}}\n")
    with pytest.raises(ProfileError, match="p.yaml:mix.m.deployments"):
        load_profile("p", tmp_path)


def test_the_mix_page_puts_alone_beside_together_with_the_ratio(tmp_path):
    rows = _rounds("bert", 100.0, 50.0) + _rounds("tft", 10.0, 10.0, rate=20.0, seed=3)
    page = render_mix("m", mixes_of(rows)["m"], "m/timeline.png")
    assert "# Mix: m" in page and "throughput 0.5" in page and "interference" in page
    assert "mean latency 0.98" in page and "no significant effect" in page and "![throughput and p99" in page
    assert "30.0 / 12.0" in page  # client CPU, the whole generator's and the deployment's part
    writer = RawWriter(raw_path(tmp_path, "mix", "r1"))
    for row in rows:
        writer.append(row)
    written = [p for p in write_reports(tmp_path, presenters=("markdown",)) if "mix" in p.parts]
    assert [p.name for p in written] == ["m.md", "timeline.png"]
    lines = mix_summary_lines(rows)
    assert len(lines) == 2 and lines[0].startswith("mix m: bert: throughput together ÷ alone 0.5")


def test_merged_hosts_give_one_section_each(tmp_path):
    for host in ("a", "b"):
        writer = RawWriter(raw_path(tmp_path / host, "mix", f"run{host}", "main"))
        for row in _rounds("bert", 100.0, 50.0 if host == "a" else 100.0):
            row.run_id = f"run{host}"
            row.extra["host"] = host
            writer.append(row)
    merge_reports([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    page = render_mix("m", mixes_of(load_rows(tmp_path / "out"))["m"])
    assert "## Host: a" in page and "## Host: b" in page
    assert page.index("interference") < page.index("## Host: b") < page.index("no significant effect")


def test_the_page_shows_the_most_mixed_load_and_who_bound_it():
    rows = []
    for step, (factor, within) in enumerate(((1.0, True), (2.0, False), (1.5, True)), 1):
        for dep, bound in (("bert", "p99 <= 500 ms"), ("tft", None)):
            row = _row(dep, "search", 1, [10.0, 10.0, 10.0])
            row.extra["mix"].update(role="search", step=step, factor=factor, bound=bound, within=within or dep == "tft",
                                    why="p99 612 ms > 500 ms" if not within and dep == "bert" else "ok")
            rows.append(row)
    answer = _row("bert", "search-answer", 1, [10.0])
    answer.extra["mix"].update(answer="the most mixed load within every bound: x1.5 ...; above it bert over p99")
    page = render_mix("m", mixes_of(rows + [answer])["m"])
    assert "### The most mixed load within every bound" in page and "**the most mixed load within every bound: x1.5" in page
    assert "| 2     | x2     | bert" in page and "p99 612 ms > 500 ms" in page
    assert mix_summary_lines(rows + [answer])[-1].endswith("above it bert over p99")


@pytest.mark.parametrize("tune, message", [
    ({"weights": {"nope": 1}}, "weights of the mix's deployments \\(bert, tft\\)"),
    ({"weights": {"bert": -1}}, "weights.bert -1: expected a number >= 0"),
    ({"budget": 0}, "budget 0"), ({"objective": "x"}, "expected a mapping with keys weights, budget, minutes"),
])
def test_bad_tune_blocks_name_the_choices(tune, message):
    with pytest.raises(MixError, match=message):
        parse_mixes({"m": {"tune": tune, "deployments": {"bert": {"concurrency": 1}, "tft": {"concurrency": 1}}}}, "x")


def test_the_page_shows_the_set_search_and_its_configs():
    rows = []
    for role, score in (("tune-evidence", 120.0), ("tune-abab-default", 100.0), ("tune-abab-winner", 130.0)):
        for dep in ("bert", "tft"):
            row = _row(dep, role, 1, [10.0])
            row.extra["mix"].update(role=role, label="2 inst | 1 inst", within=True, weighted_score=score)
            rows.append(row)
    answer = _row("bert", "tune-answer", 1, [10.0])
    answer.extra["mix"].update(role="tune-answer", answer="ship 2 inst | 1 inst: ...", recommended=True,
                               configs=["reports/mix/m/tune/bert/config.pbtxt"])
    page = render_mix("m", mixes_of(rows + [answer])["m"])
    assert "### Configuration search for the set" in page and "**Recommended**: ship 2 inst | 1 inst" in page
    assert "`reports/mix/m/tune/bert/config.pbtxt`" in page and "| abab-winner  | tft        | 1 inst" in page
    assert mix_summary_lines(rows + [answer])[-1] == "mix m: configuration search: ship 2 inst | 1 inst: ..."


def _doubled(rounds=(1, 2), alone=(100.0, 101.0, 102.0, 103.0), rate=None):
    a = [_row("d", "alone", r, list(alone), rate) for r in rounds]
    t = [_row("d", "together", r, [2 * v for v in alone], rate) for r in rounds]
    return a, t


def test_the_whole_interference_record_and_its_line():
    from tritonsuite.judge.interference import DEFAULT_ALPHA, DEFAULT_CONFIDENCE, DEFAULT_MIN_EFFECT, VERDICTS

    assert (DEFAULT_ALPHA, DEFAULT_CONFIDENCE, DEFAULT_MIN_EFFECT) == (0.01, 0.99, 10.0)
    assert VERDICTS == ("interference", "improvement", "no significant effect", "undecided")
    found = interference("d", *_doubled())
    data = found.to_dict()
    assert data["p_value"] == pytest.approx(0.000875, rel=1e-3)
    assert data["low"] == pytest.approx(2 * 100 / 102) and data["high"] == pytest.approx(2 * 102 / 100)
    assert {k: v for k, v in data.items() if k not in ("p_value", "low", "high", "line")} == {
        "deployment": "d", "metric": "Inferences/Second", "ratio": 2.0, "alone_windows": 8, "together_windows": 8,
        "rounds": 2, "verdict": "improvement", "confidence": 0.99, "alpha": 0.01, "min_effect": 10.0,
        "indicative": False, "agreeing": 2}
    assert data["line"] == found.describe() == (
        "d: throughput together ÷ alone 2.000 [1.961, 2.040] (99% interval; p=0.00088, Mann-Whitney on 8 together "
        "and 8 alone windows from 2 rounds, 2 of them on the same side of 1): improvement")
    assert found.higher_is_better
    slower = interference("d", *_doubled(rate=5.0), confidence=0.9)
    assert not slower.higher_is_better and slower.verdict == "interference"
    assert slower.describe().startswith("d: mean latency together ÷ alone 2.000 [") and "(90% interval;" in \
        slower.describe()


def test_the_minimum_effect_and_alpha_decide_on_their_boundary():
    found = interference("d", *_doubled())
    assert interference("d", *_doubled(), min_effect=100.0).verdict == "no significant effect"  # ratio 2 is +100%
    assert interference("d", *_doubled(), min_effect=99.99).verdict == "improvement"
    assert interference("d", *_doubled(), alpha=found.p_value).verdict == "no significant effect"
    assert interference("d", *_doubled(), alpha=found.p_value * 1.000001).verdict == "improvement"
    assert interference("d", *_doubled(), min_effect=99.99, alpha=0.0005).alpha == 0.0005
    halved = interference("d", *reversed(_doubled()))
    assert halved.ratio == pytest.approx(0.5, rel=1e-12) and halved.verdict == "interference"  # exp(log) rounds
    assert interference("d", *reversed(_doubled()), min_effect=50.0).verdict == "interference"  # |log 0.5| > log 1.5
    assert interference("d", *reversed(_doubled()), min_effect=100.0).verdict == "no significant effect"


def test_two_rounds_and_four_windows_a_side_are_the_least_that_decide():
    assert interference("d", *_doubled(rounds=(1,))).verdict == "undecided"
    a, t = _doubled(rounds=(1, 2, 3))
    assert interference("d", a, t[:2]).rounds == 2  # the rounds with windows on both sides
    assert interference("d", a[:2], t).rounds == 2
    assert interference("d", a[:1], t).rounds == 1 and interference("d", a[:1], t).verdict == "undecided"
    few = [_row("d", r, n, [100.0, 101.0]) for r in ("alone", "together") for n in (1, 2)]
    rows = _split(few)
    assert interference("d", rows[0], [_row("d", "together", n, [200.0, 201.0]) for n in (1, 2)],
                        alpha=0.05).verdict == "improvement"  # 4 windows a side
    three = [_row("d", "together", 1, [200.0, 201.0]), _row("d", "together", 2, [202.0])]
    assert interference("d", rows[0], three, alpha=0.05).verdict == "undecided"
    assert interference("d", [_row("d", "alone", 1, [100.0]), _row("d", "alone", 2, [101.0, 102.0])],
                        three + [_row("d", "together", 3, [203.0])], alpha=0.05).verdict == "undecided"


def test_the_evidence_is_the_pooled_windows_or_the_last_three_and_only_positive_values():
    from tritonsuite.judge.interference import _evidence, metric_of

    row = _row("d", "alone", 1, [1.0, 2.0, 3.0, 4.0])
    assert _evidence(row, "Inferences/Second") == [1.0, 2.0, 3.0, 4.0]  # pooled [1, 5): not the first 999
    assert _evidence(row, "avg latency") == []
    del row.measurement["pooled_windows"]
    assert _evidence(row, "Inferences/Second") == [2.0, 3.0, 4.0]
    row.measurement["window_throughputs"] = [5.0, 6.0]
    assert _evidence(row, "Inferences/Second") == [5.0, 6.0]
    row.measurement["window_throughputs"] = [5.0, None, 0.0, -1.0, 7]
    row.measurement["pooled_windows"] = [0, 5]
    assert _evidence(row, "Inferences/Second") == [5.0, 7.0]
    row.measurement["window_throughputs"] = None
    assert _evidence(row, "Inferences/Second") == []
    latency = _row("d", "alone", 1, [9.0, 8.0], rate=2.0)
    assert _evidence(latency, "avg latency") == [9.0, 8.0] and metric_of(latency) == "avg latency"
    assert metric_of(row) == "Inferences/Second"
    assert metric_of(_row("d", "alone", 1, [9.0], rate=0.5)) == "avg latency"


def test_equal_sides_have_a_p_value_of_one_and_no_rows_give_nan():
    same = interference("d", *_split([_row("d", role, n, [100.0, 100.0]) for role in ("alone", "together")
                                      for n in (1, 2)]))
    assert same.p_value == 1.0 and same.ratio == 1.0 and same.verdict == "no significant effect"
    nothing = interference("d", [], [])
    assert nothing.metric == "Inferences/Second" and nothing.verdict == "undecided" and nothing.p_value == 1.0
    assert math.isnan(nothing.ratio) and (nothing.alone_windows, nothing.together_windows, nothing.rounds) == (0, 0, 0)
    latency_only = interference("d", [], [_row("d", "together", 1, [3.0], rate=1.0)])
    assert latency_only.metric == "avg latency" and latency_only.p_value == 1.0


def test_a_round_is_read_from_the_mix_record_or_is_zero():
    from tritonsuite.judge.interference import _round

    assert _round(_row("d", "alone", 3, [1.0])) == 3
    row = _row("d", "alone", 3, [1.0])
    row.extra["mix"] = {}
    assert _round(row) == 0
    del row.extra["mix"]
    assert _round(row) == 0


def test_ratio_interval_order_statistics_on_small_samples():
    assert ratio_interval([1.0, 2.0, 4.0], [2.0, 4.0, 8.0], 0.5) == pytest.approx((2.0, 1.0, 4.0))  # k = 2 of 9 log ratios
    assert ratio_interval([1.0, 2.0, 4.0], [2.0, 4.0, 8.0], 0.9) == pytest.approx((2.0, 0.5, 8.0))  # the range
    assert ratio_interval([1.0, 2.0, 4.0], [2.0, 4.0, 8.0]) == pytest.approx((2.0, 0.5, 8.0))
    ratio, low, high = ratio_interval([2.0], [3.0], 0.0)
    assert (ratio, low, high) == pytest.approx((1.5, 1.5, 1.5))
    assert all(np.isnan(ratio_interval([1.0], [])))
    rng = np.random.default_rng(3)
    alone, together = 100 * (1 + 0.1 * rng.standard_normal(12)), 50 * (1 + 0.1 * rng.standard_normal(12))
    d = np.sort((np.log(together)[:, None] - np.log(alone)[None, :]).ravel())
    # k = floor(nm/2 - z sqrt(nm(n+m+1)/12)) at 95%: floor(72 - 1.96 * sqrt(300)) = 38
    assert ratio_interval(alone, together, 0.95) == pytest.approx((np.exp(np.median(d)), np.exp(d[37]),
                                                                   np.exp(d[144 - 38])))


def test_undecided_valid_rows_fall_back_to_every_measured_row_only_when_it_adds_evidence():
    alone, together = _split(_rounds("bert", 100.0, 50.0))
    unstable = [Row(**{**t.__dict__, "status": "UNSTABLE"}) for t in together]
    loose = interference("bert", alone, unstable)
    assert loose.indicative and (loose.alone_windows, loose.together_windows, loose.rounds) == (12, 12, 3)
    no_result = [Row(**{**t.__dict__, "status": "UNSTABLE", "result": {}}) for t in together]
    assert not interference("bert", alone, no_result).indicative  # nothing measured on one side
    empty = [Row(**{**t.__dict__, "status": "UNSTABLE", "measurement": {}}) for t in together]
    plain = interference("bert", alone, empty)
    assert not plain.indicative and plain.together_windows == 0  # measured but no windows: nothing to show
    one_round = _split(_rounds("bert", 100.0, 50.0, rounds=1))
    assert not interference("bert", *one_round).indicative  # valid yet undecided: nothing more to add


def test_which_side_of_one_is_worse_depends_on_the_metric():
    alone = (100.0, 101.0, 102.0, 103.0)
    a = [_row("d", "alone", r, list(alone)) for r in (1, 2)]
    t = [_row("d", "together", r, [1.5 * v for v in alone]) for r in (1, 2)]
    assert interference("d", a, t).verdict == "improvement"  # throughput 1.5x together
    assert interference("d", t, a).verdict == "interference"
    la = [_row("d", "alone", r, list(alone), rate=5.0) for r in (1, 2)]
    lt = [_row("d", "together", r, [v / 1.5 for v in alone], rate=5.0) for r in (1, 2)]
    assert interference("d", la, lt).verdict == "improvement"  # latency 1/1.5 together
    assert interference("d", lt, la).verdict == "interference"


def test_the_levels_asked_for_are_the_ones_used_and_recorded():
    wide = interference("d", *_doubled())
    narrow = interference("d", *_doubled(), confidence=0.5, alpha=0.02, min_effect=99.99)
    assert (narrow.confidence, narrow.alpha, narrow.min_effect) == (0.5, 0.02, 99.99)
    assert wide.low < narrow.low <= narrow.ratio <= narrow.high < wide.high
    alone, together = _doubled()
    unstable = [Row(**{**t.__dict__, "status": "UNSTABLE"}) for t in together]
    loose = interference("d", alone, unstable, confidence=0.5, alpha=0.02, min_effect=99.99)
    assert loose.indicative and (loose.confidence, loose.alpha, loose.min_effect) == (0.5, 0.02, 99.99)
    assert (loose.low, loose.high) == (narrow.low, narrow.high) and loose.deployment == "d"


def test_the_indicative_line_whole_and_a_failed_row_with_figures_is_no_evidence():
    alone, together = _split(_rounds("bert", 100.0, 50.0))
    unstable = [Row(**{**t.__dict__, "status": "UNSTABLE"}) for t in together]
    found = interference("bert", alone, unstable)
    assert found.describe().endswith(
        " alone windows from 3 rounds, 3 of them on the same side of 1; indicative: from measurements that are not"
        " valid): undecided")
    failed = [Row(**{**t.__dict__, "status": "FAILED"}) for t in together]  # failed after measuring: no evidence
    assert all(r.result for r in failed)
    assert not interference("bert", alone, failed).indicative
