"""Accuracy baselines: regressions beyond the allowance fail (named with baseline, now, delta, allowance),
improvements are reported, Triton-vs-eager errors are informational, rewriting keeps edited allowances."""
import json

import pytest

from tritonsuite.core.rows import Row
from tritonsuite.judge.baselines import BaselineError, BaselineStore, default_allowance


def _row(**metrics) -> Row:
    thresholds = {"f1_vs_ground_truth": ">= 80", "q_risk_P50": "<= 0.05", "dice_vs_ground_truth_edema": ">= 0.65",
                  "auc": ">= 0.9"}
    return Row(scenario="accuracy", model="m", deployment="m_cpu_onnx_fp32_offline", run_id="r1",
               metrics=dict(metrics), thresholds={k: v for k, v in thresholds.items() if k in metrics})


def test_default_allowances_per_metric_kind():
    assert default_allowance("f1_vs_ground_truth") == {"absolute": 0.1}  # SQuAD points
    assert default_allowance("dice_vs_ground_truth_edema") == {"absolute": 0.002}
    assert default_allowance("q_risk_P50") == {"relative": 0.01}
    assert default_allowance("auc") == {"absolute": 0.001}
    assert default_allowance("q_risk_P50_relative_to_eager") == {"absolute": 0.001}


def test_regressions_improvements_and_informational_errors(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    base = _row(f1_vs_ground_truth=88.0, q_risk_P50=0.0200, dice_vs_ground_truth_edema=0.820, auc=0.912,
                **{"output__0 max abs error": 1e-6})
    assert store.compare(base).missing.startswith("no baseline for m_cpu_onnx_fp32_offline")
    store.update(base, {"run_id": "r1"})
    same = store.compare(_row(f1_vs_ground_truth=87.95, q_risk_P50=0.0201, dice_vs_ground_truth_edema=0.819,
                              auc=0.912, **{"output__0 max abs error": 5e-6}))
    assert not same.regressions and not same.improvements and same.to_dict()["compared"] == 4
    worse = store.compare(_row(f1_vs_ground_truth=87.6, q_risk_P50=0.0203, dice_vs_ground_truth_edema=0.81,
                               auc=0.915, **{"output__0 max abs error": 1e-3}))
    assert sorted(v.describe() for v in worse.regressions) == [
        "dice_vs_ground_truth_edema: baseline 0.82, now 0.81, delta -0.01, allowed -0.002",
        "f1_vs_ground_truth: baseline 88, now 87.6, delta -0.4, allowed -0.1",
        "q_risk_P50: baseline 0.02, now 0.0203, delta +0.0003, allowed +0.0002"]  # 1% of the baseline, lower better
    assert [v.metric for v in worse.improvements] == ["auc"]  # reported, never failed
    # an error that grew 1000x is not a baseline regression: the accuracy scenario's tolerances gate it
    assert "output__0 max abs error" not in {v.metric for v in worse.regressions}


def test_rewriting_keeps_edited_allowances_and_other_deployments(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    store.update(_row(f1_vs_ground_truth=88.0), {"run_id": "r1"})
    other = Row(scenario="accuracy", model="m", deployment="m_cpu_ts_trace_fp32_offline", metrics={"auc": 0.9},
                thresholds={"auc": ">= 0.5"})
    store.update(other, {"run_id": "r1"})
    path = store.path("m")
    data = json.loads(path.read_text())
    data["deployments"]["m_cpu_onnx_fp32_offline"]["metrics"]["f1_vs_ground_truth"]["allowance"] = {"absolute": 1.0}
    path.write_text(json.dumps(data))  # the team loosened one allowance by hand
    store.update(_row(f1_vs_ground_truth=87.5), {"run_id": "r2"})
    data = json.loads(path.read_text())
    kept = data["deployments"]["m_cpu_onnx_fp32_offline"]
    assert kept["metrics"]["f1_vs_ground_truth"] == {"value": 87.5, "better": "higher", "allowance": {"absolute": 1.0}}
    assert kept["provenance"] == {"run_id": "r2"} and "m_cpu_ts_trace_fp32_offline" in data["deployments"]
    assert not store.compare(_row(f1_vs_ground_truth=86.6)).regressions  # within the edited 1.0


def test_an_unreadable_baseline_file_is_one_line(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "m.json").write_text("{not json")
    with pytest.raises(BaselineError, match=r"cpu/m\.json: not a readable baseline file"):
        BaselineStore(tmp_path, "cpu").compare(_row(auc=0.9))


def test_a_baseline_measured_with_other_weights_or_data_is_refused_in_one_line_not_judged(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    base = _row(q_risk_P50=0.0200, auc=0.912)
    base.extra.update(weights_sha256="a" * 64, dataset_sha256="d" * 64)
    store.update(base, {"run_id": "r1", "checkpoint": "shipped with tritonsuite (m.pt, sha256 aaaaaaaaaaaa)"})
    stored = json.loads(store.path("m").read_text())["deployments"]["m_cpu_onnx_fp32_offline"]
    assert stored["weights_sha256"] == "a" * 64 and stored["dataset_sha256"] == "d" * 64
    same = _row(q_risk_P50=0.0300, auc=0.912)  # the same weights and data, worse: a regression
    same.extra.update(weights_sha256="a" * 64, dataset_sha256="d" * 64)
    assert [v.metric for v in store.compare(same).regressions] == ["q_risk_P50"]
    other = _row(q_risk_P50=0.0300, auc=0.80)  # other weights: much worse, yet not judged as a regression
    other.extra.update(weights_sha256="b" * 64, dataset_sha256="d" * 64)
    refused = store.compare(other)
    assert not refused.verdicts and not refused.regressions and not refused.missing
    assert "\n" not in refused.refused and refused.to_dict()["refused"] == refused.refused
    assert refused.refused.startswith("m_cpu_onnx_fp32_offline: not judged against its baseline: measured with "
                                      "weights sha256 aaaaaaaaaaaa, this run's weights sha256 bbbbbbbbbbbb")
    assert "--update-baselines" in refused.refused and "(shipped with tritonsuite (m.pt" in refused.refused
    data = _row(q_risk_P50=0.0200)
    data.extra.update(weights_sha256="a" * 64, dataset_sha256="e" * 64)
    assert "dataset sha256 dddddddddddd, this run's dataset sha256 eeeeeeeeeeee" in store.compare(data).refused
    unrecorded = _row(q_risk_P50=0.0200)  # a baseline that recorded no weights cannot vouch for a row that has them
    store.update(_row(q_risk_P50=0.0200), {"run_id": "old"})
    unrecorded.extra.update(weights_sha256="a" * 64, dataset_sha256="d" * 64)
    assert "weights sha256 unrecorded, this run's weights sha256 aaaaaaaaaaaa" in store.compare(unrecorded).refused


def test_the_report_names_a_refused_baseline_not_as_metrics_within_allowances():
    from tritonsuite.report.pages import render_metrics_markdown, render_summary
    from tritonsuite.report.records import Accuracy, group_run

    line = ("m_cpu_onnx_fp32_offline: not judged against its baseline: measured with weights sha256 aaaaaaaaaaaa, "
            "this run's weights sha256 bbbbbbbbbbbb (m.json); rewrite it with --update-baselines, or run with ...")
    row = _row(auc=0.9)
    row.extra["baseline"] = {"file": "m.json", "missing": "", "refused": line, "regressions": [], "improvements": [],
                             "compared": 0}
    page = render_metrics_markdown("m", "accuracy", [Accuracy.of(row)])
    assert f"- m_cpu_onnx_fp32_offline: {line}" in page
    assert "within their allowances" not in page
    assert "not judged: measured with other weights or data" in render_summary(group_run(".", [row], "r1"))


def test_every_metric_kind_has_its_allowance_and_the_first_fragment_wins():
    assert [default_allowance(m) for m in ("x_relative_to_eager", "x_difference_to_reference", "exact_match",
                                           "map_at_10", "share_agreed", "label_agreement", "something_else")] == [
        {"absolute": 0.001}, {"absolute": 0.001}, {"absolute": 0.1}, {"absolute": 0.001}, {"absolute": 0.001},
        {"absolute": 0.001}, {"absolute": 0.001}]
    assert default_allowance("f1_dice") == {"absolute": 0.1}  # f1 is listed before dice


def test_direction_from_the_threshold_and_errors_are_lower():
    from tritonsuite.judge.baselines import direction, informational

    assert direction("auc", ">= 0.9") == "higher" and direction("auc", None) == "higher"
    assert direction("q_risk", "  <= 0.05") == "lower" and direction("q_risk", "< 0.05") == "higher"
    assert direction("out max abs error", ">= 1") == "lower" and direction("out max rel error", None) == "lower"
    assert informational("y max rel error") and not informational("max error")


@pytest.mark.parametrize("now, kind", [(87.9, "same"), (87.9 - 1e-9, "regression"), (88.1, "same"),
                                       (88.1 + 1e-9, "improvement"), (88.0, "same")])
def test_a_verdict_on_each_side_of_its_allowance(now, kind):
    from tritonsuite.judge.baselines import Verdict

    assert Verdict("f1", 88.0, now, 0.1, "higher").kind == kind
    mirrored = {"regression": "improvement", "improvement": "regression"}.get(kind, kind)
    assert Verdict("q_risk", 88.0, now, 0.1, "lower").kind == mirrored


def test_a_zero_allowance_regresses_on_any_worsening_and_informational_never_judges():
    from tritonsuite.judge.baselines import Verdict

    assert Verdict("m", 1.0, 1.0, 0.0, "higher").kind == "same"
    assert Verdict("m", 1.0, 1.0 - 1e-11, 0.0, "higher").kind == "regression"
    assert Verdict("m", 1.0, 1.0 + 1e-11, 0.0, "higher").kind == "improvement"
    assert Verdict("m", 1.0, 1.0 + 1e-13, 0.0, "higher").kind == "same"  # rounding is not a change
    info = Verdict("o max abs error", 1e-6, 1.0, None, "lower")
    assert info.kind == "informational" and (info.delta, info.worsening) == (1.0 - 1e-6, 1.0 - 1e-6)
    assert info.describe() == "o max abs error: baseline 1e-06, now 1, delta +1, allowed -"
    assert Verdict("m", 2.0, 1.5, 0.25, "higher").worsening == 0.5
    assert Verdict("m", 2.0, 1.5, 0.25, "lower").describe() == "m: baseline 2, now 1.5, delta -0.5, allowed +0.25"


def test_the_comparison_row_names_its_verdicts_whole(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    base = _row(f1_vs_ground_truth=88.0, auc=0.9, q_risk_P50=0.02, **{"o max abs error": 1e-6})
    store.update(base, {"run_id": "r1"})
    now = _row(f1_vs_ground_truth=87.0, auc=0.95, q_risk_P50=0.02, **{"o max abs error": 1.0})
    now.metrics["dice_vs_ground_truth_edema"] = 0.5  # not in the baseline: not compared
    comparison = store.compare(now)
    assert comparison.to_dict() == {
        "file": str(tmp_path / "cpu" / "m.json"), "missing": "", "refused": "",
        "regressions": ["f1_vs_ground_truth: baseline 88, now 87, delta -1, allowed -0.1"],
        "improvements": ["auc: baseline 0.9, now 0.95, delta +0.05, allowed -0.001"], "compared": 3}
    assert [(v.metric, v.better, v.allowed) for v in comparison.verdicts] == [
        ("auc", "higher", 0.001), ("f1_vs_ground_truth", "higher", 0.1), ("o max abs error", "lower", None),
        ("q_risk_P50", "lower", 0.01 * 0.02)]
    unmeasured = _row(f1_vs_ground_truth=None, auc=0.9)  # a metric this run did not give is not compared
    assert [v.metric for v in store.compare(unmeasured).verdicts] == ["auc"]
    missing = BaselineStore(tmp_path, "gpu").compare(now)
    assert missing.to_dict() == {"file": str(tmp_path / "gpu" / "m.json"), "refused": "", "regressions": [],
                                 "missing": f"no baseline for m_cpu_onnx_fp32_offline in {tmp_path / 'gpu' / 'm.json'}",
                                 "improvements": [], "compared": 0}
    other = Row(scenario="accuracy", model="m", deployment="m_other", metrics={"auc": 0.9})
    assert store.compare(other).missing == f"no baseline for m_other in {tmp_path / 'cpu' / 'm.json'}"


def test_a_relative_allowance_is_of_the_baselines_magnitude_and_a_stored_direction_wins(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    path = store.path("m")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"deployments": {"m_cpu_onnx_fp32_offline": {"metrics": {
        "q_risk_P50": {"value": -2.0, "allowance": {"relative": 0.5, "absolute": 0.25}},
        "auc": {"value": 0.5, "better": "lower", "allowance": {}},
        "f1_vs_ground_truth": {"value": 80.0, "better": "higher"}}}}}))
    found = {v.metric: v for v in store.compare(_row(q_risk_P50=-1.0, auc=0.6, f1_vs_ground_truth=80.0)).verdicts}
    assert (found["q_risk_P50"].allowed, found["q_risk_P50"].better) == (1.0, "lower")  # 0.5 x |-2|, above 0.25
    assert found["q_risk_P50"].kind == "same"
    assert (found["auc"].allowed, found["auc"].better, found["auc"].kind) == (0.001, "lower", "regression")
    assert (found["f1_vs_ground_truth"].allowed, found["f1_vs_ground_truth"].kind) == (0.1, "same")
    path.write_text(json.dumps({"deployments": {"m_cpu_onnx_fp32_offline": {"metrics": {
        "q_risk_P50": {"value": 2.0, "allowance": {"absolute": 0.25}}}}}}))
    assert store.compare(_row(q_risk_P50=2.25)).verdicts[0].allowed == 0.25


def test_the_written_baseline_whole(tmp_path):
    store = BaselineStore(tmp_path / "b", "cpu")
    row = _row(f1_vs_ground_truth=88.0, auc=None, q_risk_P50=0.02, **{"o max abs error": 1e-6})
    row.extra.update(weights_sha256="a" * 64, dataset_sha256="", other="x")
    path = store.update(row, {"run_id": "r1"})
    assert path == tmp_path / "b" / "cpu" / "m.json"
    assert path.read_text().endswith("}\n") and '\n  "deployments"' in path.read_text()
    assert json.loads(path.read_text()) == {"profile": "cpu", "model": "m", "deployments": {
        "m_cpu_onnx_fp32_offline": {
            "metrics": {"f1_vs_ground_truth": {"value": 88.0, "better": "higher", "allowance": {"absolute": 0.1}},
                        "q_risk_P50": {"value": 0.02, "better": "lower", "allowance": {"relative": 0.01}},
                        "o max abs error": {"value": 1e-6, "better": "lower", "allowance": None}},
            "provenance": {"run_id": "r1"}, "weights_sha256": "a" * 64}}}
    assert sorted(p.name for p in path.parent.iterdir()) == [".m.lock", "m.json"]  # no temporary file left


def test_a_file_without_a_deployments_mapping_is_refused_in_one_line(tmp_path):
    from tritonsuite.judge.baselines import BaselineError

    store = BaselineStore(tmp_path, "cpu")
    assert store.read("m") == {}
    store.path("m").parent.mkdir()
    for text in ("[1, 2]", '{"deployments": [1]}'):
        store.path("m").write_text(text)
        with pytest.raises(BaselineError) as raised:
            store.read("m")
        assert str(raised.value) == f"{store.path('m')}: not a baseline file (no 'deployments' mapping)"
    store.path("m").write_text("{}")
    assert store.read("m") == {} and store.compare(_row(auc=0.9)).missing.startswith("no baseline for")


def test_the_refusal_whole_naming_the_checkpoint_or_the_weights():
    from pathlib import Path

    from tritonsuite.judge.baselines import refusal

    row = _row(auc=0.9)
    row.extra.update(weights_sha256="b" * 64, dataset_sha256="d" * 64)
    entry = {"weights_sha256": "a" * 64, "dataset_sha256": "d" * 64,
             "provenance": {"checkpoint": "ckpt.pt", "weights": "w.bin"}}
    assert refusal(row, entry, Path("m.json")) == (
        "m_cpu_onnx_fp32_offline: not judged against its baseline: measured with weights sha256 aaaaaaaaaaaa, this "
        "run's weights sha256 bbbbbbbbbbbb (m.json); rewrite it with --update-baselines, or run with the weights it "
        "names (ckpt.pt)")
    entry["provenance"]["checkpoint"] = "-"
    assert refusal(row, entry, Path("m.json")).endswith("run with the weights it names (w.bin)")
    entry["provenance"] = {}
    assert refusal(row, entry, Path("m.json")).endswith("run with the weights it names (-)")
    entry["provenance"] = {"weights": "w.bin"}
    assert refusal(row, entry, Path("m.json")).endswith("run with the weights it names (w.bin)")
    entry["weights_sha256"] = "b" * 64
    entry["dataset_sha256"] = None
    assert refusal(row, entry, Path("m.json")) == (
        "m_cpu_onnx_fp32_offline: not judged against its baseline: measured with dataset sha256 unrecorded, this "
        "run's dataset sha256 dddddddddddd (m.json); rewrite it with --update-baselines, or run with the dataset it "
        "names (its dataset)")
    entry["dataset_sha256"] = "d" * 64
    assert refusal(row, entry, Path("m.json")) == ""
    assert refusal(_row(auc=0.9), {}, Path("m.json")) == ""  # neither recorded


def test_provenance_names_the_run_host_versions_and_checkpoint():
    import platform

    from tritonsuite.judge.baselines import provenance

    row = _row(auc=0.9)
    row.parameters["Checkpoint"] = "ckpt.pt"
    row.extra["weights"] = "w.bin"
    row.samples = 64
    found = provenance(row, "2.51.0")
    assert {k: v for k, v in found.items() if k not in ("written", "versions")} == {
        "run_id": "r1", "host": platform.node(), "machine": platform.machine(), "tritonserver": "2.51.0",
        "checkpoint": "ckpt.pt", "weights": "w.bin", "samples": 64}
    assert "tritonsuite" in found["versions"] and "numpy" not in found["versions"]
    assert len(found["written"]) >= 19 and found["written"][4] == "-" and "T" in found["written"]
    bare = provenance(_row(auc=0.9), "")
    assert (bare["checkpoint"], bare["weights"], bare["samples"]) == ("-", "-", None)


def test_a_row_without_the_hash_its_baseline_recorded_is_refused_and_a_missing_metric_skipped(tmp_path):
    from pathlib import Path

    from tritonsuite.judge.baselines import refusal

    entry = {"weights_sha256": "a" * 64}
    assert refusal(_row(auc=0.9), entry, Path("m.json")).startswith(
        "m_cpu_onnx_fp32_offline: not judged against its baseline: measured with weights sha256 aaaaaaaaaaaa, this "
        "run's weights sha256 unrecorded (m.json)")
    store = BaselineStore(tmp_path, "cpu")
    store.update(_row(auc=0.9, f1_vs_ground_truth=80.0, q_risk_P50=0.1), {"run_id": "r1"})
    # stored in the order auc, f1, q_risk: a row without auc is still judged on the others
    assert [v.metric for v in store.compare(_row(q_risk_P50=0.2, f1_vs_ground_truth=80.0)).verdicts] == [
        "f1_vs_ground_truth", "q_risk_P50"]


def test_rewriting_keeps_an_edited_direction(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    store.update(_row(auc=0.9), {"run_id": "r1"})
    data = json.loads(store.path("m").read_text())
    data["deployments"]["m_cpu_onnx_fp32_offline"]["metrics"]["auc"]["better"] = "lower"  # the team knows better
    store.path("m").write_text(json.dumps(data))
    store.update(_row(auc=0.8), {"run_id": "r2"})
    kept = json.loads(store.path("m").read_text())["deployments"]["m_cpu_onnx_fp32_offline"]["metrics"]["auc"]
    assert kept == {"value": 0.8, "better": "lower", "allowance": {"absolute": 0.001}}
    assert [v.kind for v in store.compare(_row(auc=0.7)).verdicts] == ["improvement"]


def test_a_refusal_names_the_baseline_file_and_an_entry_without_metrics_judges_nothing(tmp_path):
    store = BaselineStore(tmp_path, "cpu")
    base = _row(auc=0.9)
    base.extra["weights_sha256"] = "a" * 64
    store.update(base, {"run_id": "r1"})
    other = _row(auc=0.9)
    other.extra["weights_sha256"] = "b" * 64
    refused = store.compare(other)
    assert f"bbbbbbbbbbbb ({store.path('m')}); rewrite it" in refused.refused
    assert refused.to_dict()["file"] == str(store.path("m"))
    store.path("m").write_text(json.dumps({"deployments": {"m_cpu_onnx_fp32_offline": {"provenance": {}}}}))
    empty = store.compare(_row(auc=0.9))
    assert empty.verdicts == [] and not empty.missing and not empty.refused and empty.to_dict()["compared"] == 0


def test_provenance_lists_the_versions_of_what_produced_the_metrics_and_the_time_it_was_written():
    import importlib.metadata
    import re

    from tritonsuite.judge.baselines import provenance

    expected = {}
    for dist in ("tritonsuite", "torch", "onnxruntime", "onnx", "tritonclient", "transformers"):
        try:
            expected[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    found = provenance(_row(auc=0.9), "2.51.0")
    assert found["versions"] == expected and len(expected) >= 3
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", found["written"])
