"""Accuracy under load on the real embedded Triton with dynamic batching: small ONNX models (built with the onnx
helper API) made to break it. One mixes a sample with its batch-mates (y = x + the batch's mean), one hands a request
another request's output (the batch reversed), and a correct one (y = 2x) must pass."""
from types import SimpleNamespace

import numpy as np
import pytest

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.judge.underload import accuracy_under_load
from tritonsuite.load.engine import LoadPoint, MeasurementSettings
from tritonsuite.server import EmbeddedServer

WIDTH = 16
# plumbing: any spread counts as stable and no point is client bound (the probes' answers are the verdict here)
FAST = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=100, max_trials=4,
                           warmup_ms=100, client_bound_percent=1000)
# a queue delay long enough that concurrent requests are batched together (preferred batch 4)
BATCHING = dict(max_batch_size=8, intra_op_threads=1, dynamic_batching=True, preferred_batch_sizes=(4,),
                max_queue_delay_microseconds=20_000)


def _graph(kind: str):
    """An ONNX model INPUT__0 float32 [-1, WIDTH] -> OUTPUT__0 of the given kind."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("INPUT__0", TensorProto.FLOAT, ["batch", WIDTH])
    y = helper.make_tensor_value_info("OUTPUT__0", TensorProto.FLOAT, ["batch", WIDTH])

    def const(name, values):
        return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)

    if kind == "mixing":  # each sample plus the mean over the batch: an answer that depends on the batch-mates
        nodes = [helper.make_node("ReduceMean", ["INPUT__0"], ["mean"], axes=[0], keepdims=1),
                 helper.make_node("Add", ["INPUT__0", "mean"], ["OUTPUT__0"])]
        init = []
    elif kind == "reversing":  # the batch reversed: request i gets request n-1-i's output
        nodes = [helper.make_node("Slice", ["INPUT__0", "starts", "ends", "axes", "steps"], ["OUTPUT__0"])]
        init = [const("starts", [-1]), const("ends", [-(2 ** 62)]), const("axes", [0]), const("steps", [-1])]
    else:  # correct: 2x, per sample
        nodes = [helper.make_node("Add", ["INPUT__0", "INPUT__0"], ["OUTPUT__0"])]
        init = []
    graph = helper.make_graph(nodes, kind, [x], [y], initializer=init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _spec(kind: str) -> ModelSpec:
    def accuracy_data(dataset=None, checkpoint=None) -> AccuracyData:
        inputs = {"INPUT__0": np.random.default_rng(7).standard_normal((24, WIDTH)).astype(np.float32)}

        def score(served, reference, precision):
            agree = served["OUTPUT__0"].argmax(1) == reference["OUTPUT__0"].argmax(1)
            return [Metric("argmax_agreement", float(agree.mean()), 1.0)]

        return AccuracyData(inputs=inputs, score=score, description="24 seeded vectors")

    return ModelSpec(name=kind, size="tiny", build=lambda checkpoint=None: None,
                     inputs=(TensorSpec("INPUT__0", "float32", (WIDTH,)),),
                     outputs=(TensorSpec("OUTPUT__0", "float32", (WIDTH,)),),
                     example_inputs=lambda b, seed=0: {
                         "INPUT__0": np.random.default_rng(seed).standard_normal((b, WIDTH)).astype(np.float32)},
                     formats=("onnx",), precisions=("fp32",), tolerances={"fp32": {"OUTPUT__0": (1e-5, 1e-5)}},
                     accuracy_data=accuracy_data)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import onnx

    models, repo = tmp_path_factory.mktemp("onnx"), tmp_path_factory.mktemp("repo")
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        for kind in ("mixing", "reversing", "correct"):
            onnx.save(_graph(kind), models / f"{kind}.onnx")
            artifact = SimpleNamespace(path=models / f"{kind}.onnx", format="onnx")
            server.load(build_deployment(repo, model_config(kind, _spec(kind), "onnx", **BATCHING), artifact))
        yield server


def _run(server, kind: str, share: float = 0.5):
    spec = _spec(kind)
    data = spec.accuracy_data()
    return spec, data, *accuracy_under_load(server, kind, spec, "fp32", data, LoadPoint(1, 4), FAST, share=share,
                                            seed=3, description=server.model_description(kind))


# what each model answers a request of one sample sent alone, from the graphs above
ALONE = {"mixing": lambda x: x + x, "reversing": lambda x: x, "correct": lambda x: x + x}


def _first_wrong_sample(kind, data, measurement) -> int:
    """Recomputed here from the raw probe responses: the first response unlike its sample's answer alone."""
    inputs = data.inputs["INPUT__0"]
    for probe, outputs in measurement.probe_responses:
        if not np.allclose(outputs["OUTPUT__0"], ALONE[kind](inputs[probe:probe + 1]), atol=1e-5, rtol=1e-5):
            return probe
    raise AssertionError("no probe response differed")


def _counted_as_requests(measurement) -> None:
    """Probes are requests like the others: the server counted every request the client completed, probes included,
    and none failed. (Whether the windows agreed is the host's matter: the verdict does not wait on it.)"""
    meta = measurement.meta
    assert meta["server_success_delta"] == meta["requests_sent"] and meta["server_fail_delta"] == 0, \
        measurement.reasons


@pytest.mark.parametrize("kind", ["mixing", "reversing"])
def test_a_deployment_that_batches_samples_into_each_other_fails_naming_the_sample(served, kind):
    _, data, measurement, result = _run(served, kind)
    _counted_as_requests(measurement)
    assert measurement.meta["accuracy_probes"]["answered"] == result.answered == len(measurement.probe_responses)
    assert not result.passed and result.mismatched_responses > 0
    sample = _first_wrong_sample(kind, data, measurement)
    assert result.mismatches[0].startswith(f"sample {sample}: OUTPUT__0: max abs error ")
    assert f"worst at sample {sample} index" in result.mismatches[0]
    assert f"of {result.answered} probe responses differ from the same samples sent one at a time" in \
        result.failures[0]
    assert result.describe().startswith(f"FAILED: {result.answered} probe responses at concurrency 4 (share 0.5")


def test_a_correct_deployment_passes_under_the_same_load(served):
    _, data, measurement, result = _run(served, "correct")
    _counted_as_requests(measurement)
    assert result.passed, result.failures
    assert result.answered > 0 and result.mismatched_responses == 0 and result.samples == 24
    assert [(m.name, m.alone, m.under_load) for m in result.metrics] == [("argmax_agreement", 1.0, 1.0)]
    # the probes really were answered under load: the server batched requests together during the point
    stats = served.client().get_inference_statistics("correct")["model_stats"][0]["batch_stats"]
    assert max(int(b["batch_size"]) for b in stats) > 1
    # every probe carried one sample of the set, answered as the model answers it alone (2x)
    for probe, outputs in measurement.probe_responses:
        np.testing.assert_allclose(outputs["OUTPUT__0"], data.inputs["INPUT__0"][probe:probe + 1] * 2, rtol=1e-6)


def test_probes_follow_the_seed(served):
    """One connection, so responses come in the order sent: the same seed sends the same samples in the same order
    (a seeded permutation of the set, then again), whatever the number of requests; another seed another order."""
    spec = _spec("correct")
    data = spec.accuracy_data()

    def probes(seed):
        m = accuracy_under_load(served, "correct", spec, "fp32", data, LoadPoint(1, 1), FAST, share=0.3, seed=seed,
                                description=served.model_description("correct"))[0]
        return [p for p, _ in m.probe_responses]

    first, again, other = probes(11), probes(11), probes(12)
    n = min(len(first), len(again), len(other))
    assert n >= 5, (first, again, other)
    assert first[:n] == again[:n] and first[:n] != other[:n]
    assert len(set(first[:24])) == len(first[:24])  # every sample once before any twice


MIXING_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 4, warmup_ms: 200,
              client_bound_percent: 1000}
models:
  mixing: &model
    size: tiny
    formats: [onnx]
    precisions: [fp32]
    max_batch_size: 8
    intra_op_threads: 1
    offline: {batch_sizes: [1]}
    online: {batch_size: 1, concurrency: [1, 4], preferred_batch_sizes: [4], max_queue_delay_microseconds: 20000}
  doubling: *model
"""


@pytest.mark.smoke
def test_pytest_m_online_fails_a_batch_mixing_deployment_at_its_highest_concurrency(tmp_path):
    """As a user runs it: the mixing model's highest-concurrency point fails naming a sample, its lower point and
    the correct model pass; the rows carry the verdicts and the report shows them per deployment."""
    from tests.helpers import ROOT, raw_rows, run_pytest

    spec_file = str(ROOT / "fixtures" / "specs" / "batch_mixing_spec.py")
    result = run_pytest(["--gpu", "tiny", "-m", "online", "--model-spec", spec_file, "-q", "-p", "no:warnings",
                         "-rf"], tmp_path, profile=MIXING_PROFILE)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "1 failed, 3 passed" in out, out
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "mixing-onnx-fp32-concurrency4" in failed[0], failed
    assert "accuracy under load FAILED: " in out and "probe responses differ from the same samples sent one at a" \
        " time: sample " in out, out
    rows = {(r["model"], r["concurrency"]): r for r in raw_rows(tmp_path / "reports", "online")}
    assert "accuracy_under_load" not in rows[("mixing", 1)]  # only the highest concurrency carries probes
    mixing, doubling = rows[("mixing", 4)]["accuracy_under_load"], rows[("doubling", 4)]["accuracy_under_load"]
    assert mixing["passed"] is False and mixing["mismatched_responses"] > 0 and mixing["answered"] > 0
    assert doubling["passed"] is True and doubling["mismatched_responses"] == 0 and doubling["answered"] > 0
    assert rows[("mixing", 4)]["measurement"]["accuracy_probes"]["share"] == 0.1
    page = (tmp_path / "reports" / "online" / "mixing.md").read_text()
    assert "Accuracy under load (batch 1, concurrency 4): FAILED: " in page
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "accuracy under load" in summary and "FAILED at concurrency 4" in summary
    assert "passed at concurrency 4" in summary

    (tmp_path / "off").mkdir()
    off = run_pytest(["--gpu", "tiny", "-m", "online", "--model-spec", spec_file, "--models", "mixing",
                      "--load-probe-share", "0", "-q", "-p", "no:warnings"], tmp_path / "off", profile=MIXING_PROFILE)
    assert off.returncode == 0 and "2 passed" in off.stdout, off.stdout + off.stderr  # 0 turns it off
    bad = run_pytest(["--gpu", "tiny", "-m", "online", "--model-spec", spec_file, "--load-probe-share", "1.5"],
                     tmp_path, profile=MIXING_PROFILE)
    assert bad.returncode == 4 and "--load-probe-share 1.5: expected a share from 0 to 1" in bad.stderr, bad.stderr
