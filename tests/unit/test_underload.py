"""The accuracy-under-load verdict (tritonsuite.judge.underload.judge) on hand-made responses: no server."""
import numpy as np
import pytest

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec
from tritonsuite.judge.underload import judge, probe_set

WIDTH = 4


def _spec(atol: float = 1e-5, outputs=None) -> ModelSpec:
    return ModelSpec(name="probe", size="tiny", build=lambda checkpoint=None: None,
                     inputs=(TensorSpec("INPUT__0", "float32", (WIDTH,)),),
                     outputs=outputs or (TensorSpec("OUTPUT__0", "float32", (WIDTH,)),),
                     example_inputs=lambda b, seed=0: {"INPUT__0": np.zeros((b, WIDTH), np.float32)},
                     tolerances={"fp32": {"OUTPUT__0": (atol, atol)}})


def _data(n: int = 10) -> AccuracyData:
    inputs = {"INPUT__0": np.random.default_rng(1).standard_normal((n, WIDTH)).astype(np.float32)}

    def score(served, reference, precision):
        agree = served["OUTPUT__0"].argmax(1) == reference["OUTPUT__0"].argmax(1)
        return [Metric("argmax_agreement", float(agree.mean()), 0.99)]

    return AccuracyData(inputs=inputs, score=score)


def _alone(probes):
    return [{"OUTPUT__0": r["INPUT__0"] * 2} for r in probes.requests]  # what the model answers one at a time


def test_probe_set_cuts_the_accuracy_set_into_requests_of_the_batch_size():
    probes = probe_set({"INPUT__0": np.arange(5)[:, None]}, 2)
    assert [list(s) for s in probes.samples] == [[0, 1], [2, 3], [4, 0]]  # the last one filled from the start
    assert [list(r["INPUT__0"][:, 0]) for r in probes.requests] == [[0, 1], [2, 3], [4, 0]]
    assert probes.total == 5
    with pytest.raises(ValueError, match=r"^the accuracy set holds no samples$"):
        probe_set({"INPUT__0": np.zeros((0, 1))}, 1)


def test_responses_equal_to_one_at_a_time_pass_and_the_metric_matches():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    responses = [(j, {"OUTPUT__0": alone[j]["OUTPUT__0"].copy()}) for j in (3, 7, 3, 0)]
    result = judge(spec, "fp32", data, probes, alone, responses, deployment="d", concurrency=4, share=0.2, seed=5)
    assert result.passed, result.failures
    assert (result.answered, result.samples_probed, result.samples, result.mismatched_responses) == (4, 3, 10, 0)
    assert [(m.name, m.alone, m.under_load) for m in result.metrics] == [("argmax_agreement", 1.0, 1.0)]
    assert result.describe().startswith("passed: 4 probe responses at concurrency 4 (share 0.2, seed 5) over 3 of 10")
    row = result.to_dict()
    assert row["passed"] is True and row["metrics"]["argmax_agreement"]["under_load"] == 1.0


def test_another_requests_output_fails_naming_the_sample_and_the_output():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    responses = [(2, alone[2]), (6, alone[5]), (5, alone[6])]  # 6 and 5 got each other's answers
    result = judge(spec, "fp32", data, probes, alone, responses)
    assert not result.passed and result.mismatched_responses == 2
    assert result.mismatches[0].startswith("sample 6: OUTPUT__0: max abs error ")
    assert result.mismatches[1].startswith("sample 5: OUTPUT__0: ")
    assert "2 of 3 probe responses differ from the same samples sent one at a time" in result.failures[0]
    expected = float(np.abs(alone[5]["OUTPUT__0"] - alone[6]["OUTPUT__0"]).max())
    assert f"max abs error {expected:.3g}" in result.mismatches[0]


def test_in_a_request_of_several_samples_the_wrong_one_is_named_by_its_index_in_the_set():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 3)  # requests of samples 0-2, 3-5, 6-8, 9,0,1
    alone = _alone(probes)
    wrong = {"OUTPUT__0": alone[1]["OUTPUT__0"].copy()}
    wrong["OUTPUT__0"][2, 1] += 1.0  # sample 5, element 1
    result = judge(spec, "fp32", data, probes, alone, [(1, wrong)], batch_size=3)
    assert not result.passed
    assert result.mismatches[0].startswith("sample 5 (request of samples 3-5): OUTPUT__0: max abs error 1, ")
    assert "worst at sample 5 index (1,)" in result.mismatches[0]


def test_the_task_metric_must_match_even_when_every_response_is_within_tolerance():
    data, spec = _data(), _spec(atol=10.0)  # a tolerance loose enough to let argmax flip
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    flipped = {"OUTPUT__0": alone[4]["OUTPUT__0"].copy()}
    flipped["OUTPUT__0"][0, int(np.argmin(flipped["OUTPUT__0"][0]))] += 9.0
    result = judge(spec, "fp32", data, probes, alone, [(4, flipped)])
    assert result.mismatched_responses == 0
    assert result.failures == [("task metric differs: argmax_agreement: 0.9 under load, 1 one at a time "
                                "(difference -0.1, allowed 0.001)")]


def test_padding_past_a_samples_valid_frames_is_not_judged():
    outputs = (TensorSpec("OUTPUT__0", "float32", (-1,), valid_length=("OUTPUT__1", 0)),
               TensorSpec("OUTPUT__1", "int64", (1,)))
    spec = _spec(outputs=outputs)
    data = AccuracyData(inputs={"INPUT__0": np.zeros((2, WIDTH), np.float32)}, score=lambda s, r, p: [])
    probes = probe_set(data.inputs, 1)
    alone = [{"OUTPUT__0": np.array([[1.0, 2.0, 3.0]]), "OUTPUT__1": np.array([[3]])},
             {"OUTPUT__0": np.array([[4.0, 5.0]]), "OUTPUT__1": np.array([[2]])}]
    # under load sample 1 came back padded to a longer batch-mate's length: padding is not output
    padded = {"OUTPUT__0": np.array([[4.0, 5.0, 0.0, 0.0, 0.0]]), "OUTPUT__1": np.array([[2]])}
    assert judge(spec, "fp32", data, probes, alone, [(1, padded)]).passed
    wrong = {"OUTPUT__0": np.array([[4.0, 6.0, 0.0]]), "OUTPUT__1": np.array([[2]])}
    result = judge(spec, "fp32", data, probes, alone, [(1, wrong)])
    assert result.mismatches[0].startswith("sample 1: OUTPUT__0: max abs error 1, ")


def test_no_probe_answered_is_a_failure_that_says_what_to_change():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 1)
    result = judge(spec, "fp32", data, probes, _alone(probes), [])
    assert not result.passed and result.failures == [
        "no probe was answered under load: raise the share (--load-probe-share) or the measurement windows"]
    assert result.metrics == [] and result.samples_probed == 0


def test_the_whole_result_of_a_passing_point():
    data, spec = _data(4), _spec()
    probes = probe_set(data.inputs, 2)
    alone = _alone(probes)
    responses = [(1, {"OUTPUT__0": alone[1]["OUTPUT__0"].copy()})]
    result = judge(spec, "fp32", data, probes, alone, responses, deployment="d", batch_size=2, concurrency=3,
                   share=0.25, seed=7)
    row = result.to_dict()
    assert 0 <= row.pop("seconds") < 5
    assert row == {"deployment": "d", "batch_size": 2, "concurrency": 3, "share": 0.25, "seed": 7, "samples": 4,
                   "probe_requests": 2, "answered": 1, "samples_probed": 2, "mismatched_responses": 0,
                   "mismatches": [], "failures": [], "passed": True,
                   "metrics": {"argmax_agreement": {"alone": 1.0, "under_load": 1.0, "allowed": 0.001,
                                                    "passed": True}},
                   "verdict": "passed: 1 probe responses at concurrency 3 (share 0.25, seed 7) over 2 of 4 samples "
                              "equal the samples sent one at a time; argmax_agreement 1"}
    defaults = judge(spec, "fp32", data, probes, alone, responses)
    assert (defaults.deployment, defaults.batch_size, defaults.concurrency, defaults.share, defaults.seed) == (
        "", 1, 1, 0.1, 0)
    bare = AccuracyData(inputs=data.inputs, score=lambda s, r, p: [])
    assert judge(spec, "fp32", bare, probes, alone, responses).describe().endswith(
        "one at a time; no task metric")


def test_the_whole_failure_lists_three_mismatches_and_counts_the_rest():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    wrong = [(j, {"OUTPUT__0": alone[j]["OUTPUT__0"] + 1.0}) for j in (1, 2, 3, 4)]
    result = judge(spec, "fp32", data, probes, alone, [(0, alone[0])] + wrong, concurrency=2)
    assert result.mismatched_responses == 4 and len(result.mismatches) == 3
    assert [m.split(":")[0] for m in result.mismatches] == ["sample 1", "sample 2", "sample 3"]
    assert result.failures[0] == ("4 of 5 probe responses differ from the same samples sent one at a time: "
                                  + " | ".join(result.mismatches) + " | ...")
    assert result.describe() == ("FAILED: 5 probe responses at concurrency 2 (share 0.1, seed 0) over 5 of 10 "
                                 "samples: " + "; ".join(result.failures))
    three = judge(spec, "fp32", data, probes, alone, wrong[:3])
    assert three.failures[0].endswith(three.mismatches[-1])  # all listed: no "..."
    assert three.to_dict()["passed"] is False and three.to_dict()["verdict"].startswith("FAILED: 3 probe")


def test_a_response_of_another_shape_is_a_mismatch_naming_its_first_sample():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 2)
    alone = _alone(probes)
    shorter = {"OUTPUT__0": alone[2]["OUTPUT__0"][:, :3]}
    result = judge(spec, "fp32", data, probes, alone, [(2, shorter)], batch_size=2)
    assert result.mismatched_responses == 1
    assert result.mismatches == ["sample 4 (request of samples 4-5): output 'OUTPUT__0' has shape (2, 3), reference has (2, 4)"]


def test_a_response_without_an_output_is_a_mismatch_naming_it_and_the_metric_is_scored_on_the_others():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    result = judge(spec, "fp32", data, probes, alone, [(2, {"OTHER": alone[2]["OUTPUT__0"]}), (3, alone[3])])
    assert (result.answered, result.mismatched_responses, result.samples_probed) == (2, 1, 1)
    assert result.mismatches == ["sample 2: output 'OUTPUT__0' missing; got ['OTHER']"]
    assert [(m.name, m.alone, m.under_load) for m in result.metrics] == [("argmax_agreement", 1.0, 1.0)]
    assert result.failures[0].startswith("1 of 2 probe responses differ from the same samples sent one at a time")


def test_a_repeated_probe_counts_each_response_and_scores_the_first():
    data, spec = _data(), _spec(atol=10.0)
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    flipped = {"OUTPUT__0": alone[4]["OUTPUT__0"].copy()}
    flipped["OUTPUT__0"][0, int(np.argmin(flipped["OUTPUT__0"][0]))] += 9.0
    first_right = judge(spec, "fp32", data, probes, alone, [(4, alone[4]), (4, flipped)])
    assert first_right.passed and (first_right.answered, first_right.samples_probed) == (2, 1)
    assert not judge(spec, "fp32", data, probes, alone, [(4, flipped), (4, alone[4])]).passed


def test_a_share_output_names_its_worst_sample_not_its_worst_element():
    outputs = (TensorSpec("OUTPUT__0", "float32", (WIDTH,)),)
    spec = ModelSpec(name="probe", size="tiny", build=lambda checkpoint=None: None,
                     inputs=(TensorSpec("INPUT__0", "float32", (WIDTH,)),), outputs=outputs,
                     example_inputs=lambda b, seed=0: {"INPUT__0": np.zeros((b, WIDTH), np.float32)},
                     tolerances={"fp32": {"OUTPUT__0": (0.0, 0.0, 0.25)}})
    data = AccuracyData(inputs={"INPUT__0": np.zeros((6, WIDTH), np.float32)}, score=lambda s, r, p: [])
    probes = probe_set(data.inputs, 3)
    alone = _alone(probes)
    wrong = {"OUTPUT__0": alone[1]["OUTPUT__0"].copy()}
    wrong["OUTPUT__0"][0, 0] = 5.0  # sample 3: a quarter, allowed
    wrong["OUTPUT__0"][2, :2] = 1.0  # sample 5: half
    result = judge(spec, "fp32", data, probes, alone, [(1, wrong)], batch_size=3)
    assert result.mismatches[0].startswith("sample 5 (request of samples 3-5): OUTPUT__0: ")


@pytest.mark.parametrize("alone, under_load, allowance, passed", [
    (0.5, 0.5 + 2 ** -10, {"absolute": 2 ** -10}, True), (0.5, 0.5 + 2 ** -9, {"absolute": 2 ** -10}, False),
    (0.5, 0.5 - 2 ** -10, {"absolute": 2 ** -10}, True), (0.5, 0.5 - 2 ** -9, {"absolute": 2 ** -10}, False),
    (-4.0, -5.0, {"relative": 0.25}, True), (-4.0, -5.0 - 2 ** -9, {"relative": 0.25}, False),
    (1.0, 1.5, {"relative": 0.25, "absolute": 0.25}, True), (1.0, 1.0, {}, True), (1.0, 1.0 + 1e-13, {}, True),
    (1.0, 1.0 + 1e-11, {}, False),
    (float("nan"), float("nan"), {}, True), (float("nan"), 1.0, {}, False), (1.0, float("nan"), {}, False),
    (float("inf"), float("inf"), {}, True), (float("inf"), float("-inf"), {}, False), (1.0, float("inf"), {}, False),
    (float("-inf"), 1.0, {"absolute": 1e300}, False)])
def test_a_task_metric_matches_within_its_allowance_on_both_sides(alone, under_load, allowance, passed):
    from tritonsuite.judge.underload import MetricMatch

    assert MetricMatch("m", alone, under_load, allowance).passed is passed


def test_a_task_metric_difference_in_words():
    from tritonsuite.judge.underload import MetricMatch

    found = MetricMatch("q_risk", 2.0, 2.5, {"absolute": 0.25, "relative": 0.125})
    assert found.allowed == 0.5
    assert found.describe() == "q_risk: 2.5 under load, 2 one at a time (difference +0.5, allowed 0.5)"


def test_a_probe_set_of_a_batch_below_one_is_refused():
    with pytest.raises(ValueError, match=r"^batch size 0: expected >= 1$"):
        probe_set({"INPUT__0": np.zeros((3, 1))}, 0)
    probes = probe_set({"INPUT__0": np.arange(3)[:, None]}, 1)
    assert [list(s) for s in probes.samples] == [[0], [1], [2]]
    assert probes.requests[1]["INPUT__0"].flags["C_CONTIGUOUS"]
    assert [list(s) for s in probe_set({"INPUT__0": np.arange(2)[:, None]}, 5).samples] == [[0, 1, 0, 1, 0]]


def _two_metric_data(n: int = 10, seen=None) -> AccuracyData:
    inputs = {"INPUT__0": np.random.default_rng(1).standard_normal((n, WIDTH)).astype(np.float32)}

    def score(served, reference, precision):
        if seen is not None:
            seen.append(precision)
        agree = served["OUTPUT__0"].argmax(1) == reference["OUTPUT__0"].argmax(1)
        return [Metric("argmax_agreement", float(agree.mean()), 0.99),
                Metric("mean_output", float(served["OUTPUT__0"].mean()), -100.0)]

    return AccuracyData(inputs=inputs, score=score)


def test_every_failure_and_every_metric_is_named_in_the_verdict():
    data, spec = _two_metric_data(), _spec(atol=10.0)
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    passed = judge(spec, "fp32", data, probes, alone, [(0, alone[0])])
    mean = float(np.mean([a["OUTPUT__0"] for a in alone]))
    assert passed.describe() == ("passed: 1 probe responses at concurrency 1 (share 0.1, seed 0) over 1 of 10 samples "
                                 f"equal the samples sent one at a time; argmax_agreement 1, mean_output {mean:.4g}")
    flipped = {"OUTPUT__0": alone[4]["OUTPUT__0"].copy()}
    flipped["OUTPUT__0"][0, int(np.argmin(flipped["OUTPUT__0"][0]))] += 9.0
    far = {"OUTPUT__0": alone[5]["OUTPUT__0"] + 20.0}
    failed = judge(spec, "fp32", data, probes, alone, [(4, flipped), (5, far)])
    assert len(failed.failures) == 3 and failed.failures[1].startswith("task metric differs: argmax_agreement: ")
    assert failed.failures[2].startswith("task metric differs: mean_output: ")
    assert failed.describe() == ("FAILED: 2 probe responses at concurrency 1 (share 0.1, seed 0) over 2 of 10 samples: "
                                 + "; ".join(failed.failures))


def test_a_response_wrong_in_two_outputs_names_both():
    outputs = (TensorSpec("OUTPUT__0", "float32", (WIDTH,)), TensorSpec("OUTPUT__1", "float32", (WIDTH,)))
    spec = _spec(outputs=outputs)
    data = AccuracyData(inputs={"INPUT__0": np.ones((2, WIDTH), np.float32)}, score=lambda s, r, p: [])
    probes = probe_set(data.inputs, 1)
    alone = [{"OUTPUT__0": r["INPUT__0"], "OUTPUT__1": r["INPUT__0"]} for r in probes.requests]
    wrong = {"OUTPUT__0": alone[1]["OUTPUT__0"] + 1, "OUTPUT__1": alone[1]["OUTPUT__1"] + 2}
    (line,) = judge(spec, "fp32", data, probes, alone, [(1, wrong)]).mismatches
    assert line.startswith("sample 1: OUTPUT__0: max abs error 1, ")
    assert "index (0,); OUTPUT__1: max abs error 2, " in line


def test_the_task_metric_is_scored_by_the_rules_of_the_precision():
    seen = []
    data = _two_metric_data(seen=seen)
    spec = dataclasses_replace_tolerances(_spec(), "fp16")
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    judge(spec, "mixed", data, probes, alone, [(0, alone[0])])
    assert seen == ["fp16", "fp16"]  # mixed precision: fp16's rules, for both sides
    seen.clear()
    judge(spec, "fp16", data, probes, alone, [(0, alone[0])])
    assert seen == ["fp16", "fp16"]


def dataclasses_replace_tolerances(spec, precision):
    import dataclasses

    return dataclasses.replace(spec, tolerances={precision: spec.tolerances["fp32"], "mixed": spec.tolerances["fp32"]})


def test_a_metric_the_responses_under_load_do_not_give_is_a_difference():
    inputs = {"INPUT__0": np.random.default_rng(1).standard_normal((4, WIDTH)).astype(np.float32)}

    def score(served, reference, precision):  # only computable where every output is finite
        return [Metric("finite_mean", float(served["OUTPUT__0"].mean()), -100.0)] if \
            np.isfinite(served["OUTPUT__0"]).all() else []

    data = AccuracyData(inputs=inputs, score=score)
    spec = _spec()
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    wrong = {"OUTPUT__0": alone[2]["OUTPUT__0"].copy()}
    wrong["OUTPUT__0"][0, 0] = np.inf
    result = judge(spec, "fp32", data, probes, alone, [(2, wrong)])
    (metric,) = result.metrics
    assert metric.name == "finite_mean" and np.isnan(metric.under_load) and not metric.passed
    assert result.failures[-1].startswith("task metric differs: finite_mean: nan under load, ")


def test_a_set_of_one_request_is_scored_whole_and_the_time_taken_is_kept_in_milliseconds():
    import time

    def score(served, reference, precision):
        time.sleep(0.012)
        return [Metric("agree", float((served["OUTPUT__0"] == reference["OUTPUT__0"]).mean()), 1.0)]

    data = AccuracyData(inputs={"INPUT__0": np.arange(2 * WIDTH, dtype=np.float32).reshape(2, WIDTH)}, score=score)
    probes = probe_set(data.inputs, 2)
    alone = _alone(probes)
    result = judge(_spec(), "fp32", data, probes, alone, [(0, alone[0])], batch_size=2)
    assert result.passed and [(m.name, m.alone, m.under_load) for m in result.metrics] == [("agree", 1.0, 1.0)]
    assert 0.024 <= result.seconds < 3 and result.seconds == round(result.seconds, 3)


def test_the_reference_sends_each_probe_request_once_in_order():
    from tritonsuite.judge.underload import DEFAULT_PROBE_SEED, DEFAULT_PROBE_SHARE, MAX_LISTED, run_alone

    assert (DEFAULT_PROBE_SHARE, DEFAULT_PROBE_SEED, MAX_LISTED) == (0.1, 0, 3)
    probes = probe_set({"INPUT__0": np.arange(5)[:, None]}, 2)
    sent = []

    def infer(request):
        sent.append(request["INPUT__0"][:, 0].tolist())
        return {"OUTPUT__0": request["INPUT__0"] * 2}

    answers = run_alone(infer, probes)
    assert sent == [[0, 1], [2, 3], [4, 0]]
    assert [a["OUTPUT__0"][:, 0].tolist() for a in answers] == [[0, 2], [4, 6], [8, 0]]


def test_the_result_keeps_its_keys_in_order_with_the_metrics_after_the_time():
    data, spec = _data(4), _spec()
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    assert list(judge(spec, "fp32", data, probes, alone, [(0, alone[0])]).to_dict()) == [
        "deployment", "batch_size", "concurrency", "share", "seed", "samples", "probe_requests", "answered",
        "samples_probed", "mismatched_responses", "mismatches", "failures", "seconds", "metrics", "passed", "verdict"]


def test_without_a_share_the_sample_named_is_the_one_with_the_largest_error_not_the_most_errors():
    data, spec = _data(), _spec()
    probes = probe_set(data.inputs, 2)
    alone = _alone(probes)
    wrong = {"OUTPUT__0": alone[1]["OUTPUT__0"].copy()}
    wrong["OUTPUT__0"][0, 0] += 5.0  # sample 2: one element far off
    wrong["OUTPUT__0"][1, :] += 0.5  # sample 3: every element a little off
    result = judge(spec, "fp32", data, probes, alone, [(1, wrong)], batch_size=2)
    assert result.mismatches[0].startswith("sample 2 (request of samples 2-3): OUTPUT__0: max abs error 5, ")


def test_responses_are_compared_by_the_tolerances_of_the_precision():
    import dataclasses

    data = AccuracyData(inputs={"INPUT__0": np.ones((2, WIDTH), np.float32)}, score=lambda s, r, p: [])
    spec = dataclasses.replace(_spec(), tolerances={"fp32": {"OUTPUT__0": (1e-5, 0.0)},
                                                    "fp16": {"OUTPUT__0": (2.0, 0.0)}})
    probes = probe_set(data.inputs, 1)
    alone = _alone(probes)
    off = {"OUTPUT__0": alone[1]["OUTPUT__0"] + 1.0}
    assert judge(spec, "fp16", data, probes, alone, [(1, off)]).passed
    assert not judge(spec, "fp32", data, probes, alone, [(1, off)]).passed
