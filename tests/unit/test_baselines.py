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

    line = ("m_cpu_onnx_fp32_offline: not judged against its baseline: measured with weights sha256 aaaaaaaaaaaa, "
            "this run's weights sha256 bbbbbbbbbbbb (m.json); rewrite it with --update-baselines, or run with ...")
    row = _row(auc=0.9)
    row.extra["baseline"] = {"file": "m.json", "missing": "", "refused": line, "regressions": [], "improvements": [],
                             "compared": 0}
    data = row.to_dict()
    assert f"- m_cpu_onnx_fp32_offline: {line}" in render_metrics_markdown("m", "accuracy", [data])
    assert "within their allowances" not in render_metrics_markdown("m", "accuracy", [data])
    assert "not judged: measured with other weights or data" in render_summary([data], "r1")
