"""The configuration search for a set of deployments on the real embedded Triton: two ONNX deployments of the tiny
identity model, each joint configuration loaded in place and measured with both deployments' traffic together, the
winner re-measured against the profile's configurations interleaved, and stock config.pbtxt files written."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.load.engine import LoadPoint, Traffic
from tritonsuite.load.search import judge
from tritonsuite.models import default_registry
from tritonsuite.profiles.tunespace import Budget, Candidate, parse_space
from tritonsuite.server import EmbeddedServer
from tritonsuite.tune.mix import JointCandidate, JointSpace, MixTuneResult, _verify, tune_set, write_configs
from tritonsuite.deploy.deployment import Deployment
from tritonsuite.tune.runner import TuneTarget
from tritonsuite.tune.strategy import Evaluation

SETTINGS = MeasurementSettings(window_ms=300, min_requests_per_window=5, stability_percentage=100, max_trials=8,
                               warmup_ms=150)
SETTINGS_OF = dict(max_batch_size=8, intra_op_threads=1, dynamic_batching=True, preferred_batch_sizes=(4,),
                   max_queue_delay_microseconds=100)
CONFIG = model_config("ida", default_registry().get("identity", "tiny"), "onnx", **SETTINGS_OF)


#: the profile's configurations of the set search: a batcher that holds every request 200 ms waiting for a batch of
#: 8 that 4 requests in flight never fill, so the profile's own configuration is over its bound by construction
SLOW_DEFAULT = dict(SETTINGS_OF, preferred_batch_sizes=(8,), max_queue_delay_microseconds=200_000)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path_factory.mktemp("cache"))
    repo = tmp_path_factory.mktemp("repo")
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        targets = []
        for name in ("ida", "idb"):
            config = model_config(name, spec, artifact.format, **SLOW_DEFAULT)
            directory = build_deployment(repo, config, artifact)
            server.load(directory)
            served = server.model_description(name)
            targets.append(TuneTarget(server, Deployment(name, spec, artifact, config, directory, "onnxruntime",
                                                         served, served), repo, 1))
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


def _verify_with(scores, best=True):
    """The winner check (_verify) on fixed weighted scores, in the order measured: default, winner, default, ...
    (``best`` None: no joint configuration was within its bounds)."""
    default = JointCandidate((Candidate.of(CONFIG),) * 2)
    won = JointCandidate((replace(Candidate.of(CONFIG), instance_count=2), Candidate.of(CONFIG)))
    found = Evaluation(won if best else default, 50.0, order=2)
    result = MixTuneResult(["ida", "idb"], default, [found], 16, best=found if best is not None else None)
    measured, calls = iter(scores), []

    def measure_joint(names, role, candidate):
        calls.append((role, tuple(names), candidate))
        return next(measured), True

    _verify(result, [SimpleNamespace(name="ida"), SimpleNamespace(name="idb")],
            lambda candidate: ["ida_mixtune", "idb_mixtune"], measure_joint)
    return result, calls


def test_the_winner_is_recommended_when_it_beats_the_profile_by_10_percent_in_every_comparable_pair():
    result, calls = _verify_with([100, 120, 100, 111, 90, 150])
    assert result.recommended and result.pairs == [(100, 120), (100, 111), (90, 150)]
    assert result.shipped == result.best.candidate and result.describe().startswith("ship 2 inst")
    assert [(role, names, c == result.default) for role, names, c in calls] == [
        ("tune-abab-default", ("ida", "idb"), True), ("tune-abab-winner", ("ida_mixtune", "idb_mixtune"), False)] * 3
    assert _verify_with([0, 120, 100, 150, 100, 150])[0].recommended  # a pair with a score of 0 is not judged


def test_the_profiles_configuration_stays_unless_the_winner_holds_up_interleaved():
    result, _ = _verify_with([100, 120, 100, 109, 90, 150])  # 9% better in one pair
    assert not result.recommended and result.shipped == result.default and "100.0 vs 109.0" in result.reason
    result, _ = _verify_with([0, 120, 100, 150, 100, 0])  # one comparable pair of the two needed
    assert not result.recommended and result.reason.startswith("the best joint configuration measured (2 inst")
    assert "in every comparable pair (at least 2 needed) when measured again interleaved: 0.0 vs 120.0, " \
        "100.0 vs 150.0, 100.0 vs 0.0" in result.reason
    result, calls = _verify_with([], best=False)  # the profile's own configuration won: nothing measured again
    assert not calls and not result.recommended
    assert result.reason == "it is the best joint configuration measured (weighted 50.0 inf/s)"
    result, calls = _verify_with([], best=None)  # nothing within its bounds: nothing to measure again
    assert not calls and not result.recommended and result.shipped == result.default
    assert result.reason == "no joint configuration measured kept every deployment within its bound"


def test_a_set_search_measures_together_and_writes_stock_configs(setup, tmp_path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    server, spec, targets = setup
    # the one setting varied is the queue delay: the profile's 200 ms puts ida over its bound (avg <= 100 ms) by
    # construction, 100 us puts it far within, on any host; so the winner is another configuration, measured again
    # interleaved, and never shipped (the profile's pairs score 0: no comparable pair)
    space = parse_space({"instance_count": [1], "preferred_batch_sizes": [[8]],
                         "max_queue_delay_microseconds": [200_000, 100]}, "t", max_batch_size=8, instance_count=1,
                        preferred_batch_sizes=(8,), max_queue_delay_microseconds=200_000, intra_op_threads=1,
                        concurrency=(1,))
    inputs = spec.example_inputs(1, 0)
    traffic = [Traffic(t.name, inputs, spec.outputs, LoadPoint(1, c), t.description) for t, c in zip(targets, (4, 2))]
    recorded = []

    def record(m, role, candidate, i, meta):
        recorded.append((role, i, candidate, meta, m))

    bound = LatencyBound.parse("avg <= 100 ms")
    result = tune_set(targets, [space, space], traffic, [bound, None], [1.0, 0.5], SETTINGS, record, Budget(3, 5.0))
    print(result.describe())
    evidence = [r for r in recorded if r[0] == "tune-evidence"]
    joint = list(zip(evidence[::2], evidence[1::2]))  # each joint measurement: both deployments' rows
    assert len(result.evaluations) == 3 and [i for _, i, *_ in evidence] == [0, 1] * len(joint)
    # each configuration once, and again only to confirm a gain (here from a best within the bound)
    assert len(joint) == sum(max(1, len(e.scores)) for e in result.evaluations) and evidence[0][2] == result.default
    first = {}
    for pair in joint:
        first.setdefault(pair[0][2], pair)
    for evaluation in result.evaluations:
        (_, _, candidate, meta, m0), (_, _, _, meta1, m1) = first[evaluation.candidate]
        # the score is the weighted throughput of the two rows measured together, when each is within its bound
        within = judge(m0, bound)[0] and m1.valid
        weighted = 1.0 * m0.result["Inferences/Second"] + 0.5 * m1.result["Inferences/Second"]
        measured = evaluation.scores[0] if evaluation.scores else evaluation.score
        assert candidate == evaluation.candidate and meta["within"] == meta1["within"] == within
        assert measured == (pytest.approx(weighted, rel=1e-12) if within else 0.0)
        assert meta["weighted_score"] == meta1["weighted_score"] == round(measured, 3)
        if evaluation.scores:
            assert evaluation.score == pytest.approx(sum(evaluation.scores) / len(evaluation.scores))
    assert result.evaluations[0].candidate == result.default and result.evaluations[0].score == 0.0
    scored = [e for e in result.evaluations if e.score > 0]
    assert scored and result.best == max(scored, key=lambda e: (e.score, -e.order)) and result.best.candidate != \
        result.default
    assert result.best.candidate.members[0].max_queue_delay_microseconds == 100
    abab = [(role, i) for role, i, *_ in recorded if role.startswith("tune-abab")]
    # re-measured interleaved, both deployments each time: default, winner, default, winner, ...
    assert abab == [("tune-abab-default", 0), ("tune-abab-default", 1), ("tune-abab-winner", 0),
                    ("tune-abab-winner", 1)] * 3
    scores = [meta["weighted_score"] for role, i, _, meta, _ in recorded if role.startswith("tune-abab") and i == 0]
    assert [round(v, 3) for pair in result.pairs for v in pair] == scores
    assert [d for d, _ in result.pairs] == [0.0] * 3 and all(w > 0 for _, w in result.pairs), result.pairs
    assert not result.recommended and result.shipped == result.default
    assert "in every comparable pair (at least 2 needed) when measured again interleaved: 0.0 vs " in result.reason
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
