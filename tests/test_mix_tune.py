"""The configuration search for a set of deployments on the real embedded Triton: two ONNX deployments of the tiny
identity model, each joint configuration loaded in place and measured with both deployments' traffic together, the
winner re-measured against the profile's configurations interleaved, and stock config.pbtxt files written."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import DeploymentConfig, build_deployment
from tritonsuite.load.engine import LoadPoint, Traffic
from tritonsuite.models import default_registry
from tritonsuite.profiles.tunespace import Budget, Candidate, parse_space
from tritonsuite.server import EmbeddedServer
from tritonsuite.tune.mix import JointCandidate, JointSpace, tune_set, write_configs
from tritonsuite.tune.runner import TuneTarget

SETTINGS = MeasurementSettings(window_ms=300, min_requests_per_window=5, stability_percentage=50, max_trials=8,
                               warmup_ms=150)
CONFIG = DeploymentConfig(max_batch_size=8, intra_op_threads=1, dynamic_batching=True, preferred_batch_sizes=(4,),
                          max_queue_delay_microseconds=100)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path_factory.mktemp("cache"))
    repo = tmp_path_factory.mktemp("repo")
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs")) as server:
        targets = []
        for name in ("ida", "idb"):
            server.load(build_deployment(repo, name, spec, artifact, CONFIG))
            targets.append(TuneTarget(server, name, spec, artifact, CONFIG, repo, "fp32", 1))
        yield server, spec, targets


def test_the_joint_space_walks_one_setting_of_one_deployment_at_a_time():
    space = parse_space({"instance_count": [1, 2], "preferred_batch_sizes": [[4]],
                         "max_queue_delay_microseconds": [100, 1000]}, "t", max_batch_size=8, instance_count=1,
                        preferred_batch_sizes=(4,), max_queue_delay_microseconds=100, intra_op_threads=1,
                        concurrency=(1,))
    joint = JointSpace((space, space))
    start = JointCandidate((Candidate.of(CONFIG), Candidate.of(CONFIG)))
    assert getattr(start, "1:instance_count") == 1 and joint.size() == 16
    moved = joint.with_value(start, "1:instance_count", 2)
    assert moved.members[0] == start.members[0] and moved.members[1].instance_count == 2
    assert "0:max_queue_delay_microseconds" in joint.dimensions and joint.values("0:instance_count") == (1, 2)


def test_a_set_search_measures_together_and_writes_stock_configs(setup, tmp_path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    server, spec, targets = setup
    space = parse_space({"instance_count": [1, 2], "preferred_batch_sizes": [[4]],
                         "max_queue_delay_microseconds": [100, 2000]}, "t", max_batch_size=8, instance_count=1,
                        preferred_batch_sizes=(4,), max_queue_delay_microseconds=100, intra_op_threads=1,
                        concurrency=(1,))
    inputs = spec.example_inputs(1, 0)
    traffic = [Traffic(t.name, inputs, spec.outputs, LoadPoint(1, c)) for t, c in zip(targets, (4, 2))]
    recorded = []

    def record(m, role, candidate, i, meta):
        recorded.append((role, i, candidate, meta, m))

    result = tune_set(targets, [space, space], traffic, [LatencyBound.parse("avg <= 500 ms"), None], [1.0, 0.5],
                      replace(SETTINGS), record, Budget(3, 5.0))
    print(result.describe())
    evidence = [r for r in recorded if r[0] == "tune-evidence"]
    assert len(result.evaluations) == 3 and len(evidence) == 6  # each joint configuration: both deployments' rows
    assert {i for _, i, *_ in evidence} == {0, 1} and evidence[0][2] == result.default
    for _, _, candidate, meta, m in evidence:  # the score is the weighted throughput of the two rows measured together
        assert meta["weighted_score"] in (0.0, pytest.approx(meta["weighted_score"]))
    first = [m for _, _, c, _, m in evidence[:2]]
    expected = first[0].result["Inferences/Second"] + 0.5 * first[1].result["Inferences/Second"]
    assert result.evaluations[0].score in (0.0, pytest.approx(expected, rel=1e-6))
    assert result.best is not None
    abab = [r[0] for r in recorded if r[0].startswith("tune-abab")]
    if result.best.candidate != result.default:  # re-measured interleaved: default, winner, default, winner, ...
        assert abab == ["tune-abab-default"] * 2 + ["tune-abab-winner"] * 2 + (["tune-abab-default"] * 2 + [
            "tune-abab-winner"] * 2) * 2 and len(result.pairs) == 3
    else:
        assert not abab and not result.recommended
    paths = write_configs(tmp_path, targets, result.shipped)
    for path, target, candidate in zip(paths, targets, result.shipped.members):
        config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
        assert config.name == target.name and config.instance_group[0].count == candidate.instance_count
        assert config.dynamic_batching.max_queue_delay_microseconds == candidate.max_queue_delay_microseconds
    client = server.client()
    try:
        assert not client.is_model_ready("ida_mixtune")  # the candidates are unloaded after the search
        assert client.is_model_ready("ida") and np.isfinite(result.seconds)
    finally:
        client.close()
