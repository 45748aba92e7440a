"""The accuracy verdict and its row (tritonsuite.judge.accuracy) on hand-made outputs: no server."""
import numpy as np
import pytest

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec
from tritonsuite.core.tensors import OutputComparison
from tritonsuite.judge.accuracy import AccuracyResult, evaluate


def _spec() -> ModelSpec:
    return ModelSpec(name="probe", size="tiny", build=lambda checkpoint=None: None,
                     inputs=(TensorSpec("INPUT__0", "float32", (2,)),),
                     outputs=(TensorSpec("OUTPUT__0", "float32", (2,)),),
                     example_inputs=lambda b, seed=0: {"INPUT__0": np.zeros((b, 2), np.float32)},
                     tolerances={"fp32": {"OUTPUT__0": (0.5, 0.0)}, "fp16": {"OUTPUT__0": (2.0, 0.0)}})


def test_to_row_carries_every_metric_comparison_threshold_and_status():
    passed = OutputComparison("OUTPUT__0", 0.25, 0.5, 0.5, 0.001, 0, 8)
    shared = OutputComparison("OUTPUT__1", 3.0, 1.5, 0.0, 0.0, 2, 16, (1, 3), allowed_share=0.25, worst_sample=1,
                              worst_sample_share=0.125)
    failed = OutputComparison("OUTPUT__2", 4.0, 2.0, 0.1, 0.0, 3, 8, (0, 1), worst_sample_share=0.375)
    result = AccuracyResult("m", "m_onnx_fp32", "fp32", 4,
                            [passed, shared, failed],
                            [Metric("f1", 90.0, 80.0), Metric("q_risk", 0.5, 0.25, higher_is_better=False)],
                            1.23456, "four samples", failures=["f", "g"])
    row = result.to_row(model="M", format="onnx", run_id="r1")
    assert (row.scenario, row.model, row.deployment, row.precision, row.format, row.run_id) == (
        "accuracy", "M", "m_onnx_fp32", "fp32", "onnx", "r1")
    assert (row.samples, row.description, row.status, row.reasons, row.seconds) == (
        4, "four samples", "FAILED", ["f", "g"], 1.235)
    assert row.metrics == {"f1": 90.0, "q_risk": 0.5, "OUTPUT__0 max abs error": 0.25, "OUTPUT__0 max rel error": 0.5,
                           "OUTPUT__1 max abs error": 3.0, "OUTPUT__1 max rel error": 1.5,
                           "OUTPUT__2 max abs error": 4.0, "OUTPUT__2 max rel error": 2.0}
    assert row.thresholds == {
        "f1": ">= 80", "q_risk": "<= 0.25",
        "OUTPUT__0 max abs error": "each element within atol 0.5 + rtol 0.001 x |ref|",
        "OUTPUT__1 max abs error": "atol 0 + rtol 0 x |ref| for all but 0.25 of each sample",
        "OUTPUT__2 max abs error": "each element within atol 0.1 + rtol 0 x |ref|"}
    assert row.metric_status == {"f1": "OK", "q_risk": "FAILED", "OUTPUT__0 max abs error": "OK",
                                 "OUTPUT__1 max abs error": "OK (2/16 out)", "OUTPUT__2 max abs error": "FAILED (3/8 out)"}
    assert list(row.metrics) == ["f1", "q_risk", "OUTPUT__0 max abs error", "OUTPUT__0 max rel error",
                                 "OUTPUT__1 max abs error", "OUTPUT__1 max rel error", "OUTPUT__2 max abs error",
                                 "OUTPUT__2 max rel error"]
    assert not result.passed
    ok = AccuracyResult("m", "d", "fp16", 1, [], [Metric("auc", 0.123456, 0.98765)], 0.0)
    assert ok.passed and ok.description == "" and ok.failures == []
    row = ok.to_row()
    assert (row.model, row.status, row.reasons, row.thresholds, row.metric_status) == (
        "m", "OK", [], {"auc": ">= 0.9877"}, {"auc": "FAILED"})


def test_evaluate_runs_both_sides_in_batches_and_judges_outputs_and_metrics():
    inputs = {"INPUT__0": np.arange(10, dtype=np.float32).reshape(5, 2)}
    seen = {"served": [], "reference": []}
    rules = []

    def score(served, reference, precision):
        rules.append(precision)
        gap = float(np.abs(served["OUTPUT__0"] - reference["OUTPUT__0"]).max())
        return [Metric("gap", gap, 0.75, higher_is_better=False)]

    def infer(side, offset):
        def run(batch):
            seen[side].append(len(batch["INPUT__0"]))
            out = batch["INPUT__0"] * 2
            out[batch["INPUT__0"][:, 0] == 4] += offset  # sample 2 only
            return {"OUTPUT__0": out}
        return run

    data = AccuracyData(inputs=inputs, score=score, description="five samples")
    good = evaluate(_spec(), "dep", "fp32", data, infer("served", 0.25), infer("reference", 0.0), 2)
    assert seen == {"served": [2, 2, 1], "reference": [2, 2, 1]}
    assert good.passed and good.failures == [] and rules == ["fp32"]
    assert (good.model, good.deployment, good.precision, good.samples, good.description) == (
        "probe", "dep", "fp32", 5, "five samples")
    assert [(c.name, c.max_abs_error, c.mismatched) for c in good.comparisons] == [("OUTPUT__0", 0.25, 0)]
    assert [(m.name, m.value) for m in good.metrics] == [("gap", 0.25)]
    assert 0 <= good.seconds < 5
    bad = evaluate(_spec(), "dep", "fp32", data, infer("served", 1.0), infer("reference", 0.0), 5)
    assert bad.failures == [bad.comparisons[0].describe(), "gap = 1.0000 (threshold <= 0.7500)"]
    assert bad.comparisons[0].describe().startswith("OUTPUT__0: max abs error 1, ")
    rules.clear()
    mixed = evaluate(_spec(), "dep", "mixed", data, infer("served", 1.0), infer("reference", 0.0), 5)
    assert rules == ["fp16"]  # mixed precision is judged by fp16's rules
    assert mixed.precision == "mixed"


@pytest.mark.parametrize("offset, passed", [(0.5, True), (0.5 + 2 ** -10, False)])
def test_evaluate_holds_the_tolerance_on_its_boundary(offset, passed):
    data = AccuracyData(inputs={"INPUT__0": np.ones((2, 2), np.float32)}, score=lambda s, r, p: [])
    result = evaluate(_spec(), "dep", "fp32", data, lambda b: {"OUTPUT__0": b["INPUT__0"] + offset},
                      lambda b: {"OUTPUT__0": b["INPUT__0"]}, 1)
    assert result.passed is passed


def test_evaluate_compares_by_the_tolerances_of_the_precision():
    data = AccuracyData(inputs={"INPUT__0": np.ones((2, 2), np.float32)}, score=lambda s, r, p: [])
    served, reference = (lambda b: {"OUTPUT__0": b["INPUT__0"] + 1.0}), (lambda b: {"OUTPUT__0": b["INPUT__0"]})
    fp16 = evaluate(_spec(), "dep", "fp16", data, served, reference, 2)
    assert fp16.passed and fp16.comparisons[0].atol == 2.0  # fp16's atol 2, not fp32's 0.5
    assert not evaluate(_spec(), "dep", "fp32", data, served, reference, 2).passed
