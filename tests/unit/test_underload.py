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
    with pytest.raises(ValueError, match="no samples"):
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
    assert not result.passed and "no probe was answered under load" in result.failures[0]
    assert "--load-probe-share" in result.failures[0]
