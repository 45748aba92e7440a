"""A tune on the real embedded Triton never recommends a configuration that breaks accuracy under load: the
"mixing" ONNX model of test_underload (each sample plus its batch's mean: right alone, wrong when batched) against
the correct one (2x), with the same space. The profile's configuration waits 100 ms for a batch of 8 that never
fills at concurrency 4, so it serves at most 40 requests/s on any host; the other candidate waits 2 ms, which is
faster on any host that runs Triton, and batches requests (one instance, four in flight)."""
from types import SimpleNamespace

import pytest

from tests.test_underload import FAST, _graph, _spec
from tritonsuite.core.settings import LatencyBound
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.server import EmbeddedServer
from tritonsuite.tune import parse_space
from tritonsuite.deploy.deployment import Deployment
from tritonsuite.tune.runner import TuneTarget, tune

SLOW = dict(max_batch_size=8, intra_op_threads=1, dynamic_batching=True, preferred_batch_sizes=(8,),
            max_queue_delay_microseconds=100_000)
SPACE = parse_space({"instance_count": [1], "preferred_batch_sizes": [[8]],
                     "max_queue_delay_microseconds": [2_000, 100_000], "concurrency": [4]}, "test.tune",
                    max_batch_size=8, instance_count=1, preferred_batch_sizes=(8,), max_queue_delay_microseconds=100_000,
                    intra_op_threads=1, concurrency=(4,))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import onnx

    models, repo = tmp_path_factory.mktemp("onnx"), tmp_path_factory.mktemp("repo")
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        targets = {}
        for kind in ("mixing", "correct"):
            onnx.save(_graph(kind), models / f"{kind}.onnx")
            artifact = SimpleNamespace(path=models / f"{kind}.onnx", format="onnx", precision="fp32")
            config = model_config(kind, _spec(kind), artifact.format, **SLOW)
            directory = build_deployment(repo, config, artifact)
            server.load(directory)
            served = server.model_description(kind)
            targets[kind] = TuneTarget(server, Deployment(kind, _spec(kind), artifact, config, directory, "onnxruntime",
                                                          served, served), repo, 1)
        yield targets


def _tune(target):
    rows = []

    def record(measurement, name, config, meta):
        row = measurement.to_row(scenario="tune", model=target.name, deployment=name)
        row.measurement["tune"] = meta
        rows.append(row)
        return row

    result = tune(target, SPACE, LatencyBound.parse("p99 <= 2000 ms"), FAST, record,
                  accuracy_data=target.spec.accuracy_data(), probe_share=0.5, probe_seed=3)
    return result, rows


def test_a_winner_that_breaks_accuracy_under_load_is_not_recommended(served):
    result, rows = _tune(served["mixing"])
    assert result.best is not None and result.best.candidate.max_queue_delay_microseconds == 2_000, result.describe()
    assert result.accuracy is not None and not result.accuracy.passed
    assert not result.recommended
    assert result.shipped == result.default  # the profile's configuration stays
    assert result.reason.startswith("the best configuration (") and "broke accuracy under load FAILED" in \
        result.reason, result.reason
    assert result.describe().startswith("keep the deployment's own configuration")
    assert [r.measurement["tune"]["role"] for r in rows].count("accuracy") == 1


def test_the_same_search_recommends_the_winner_of_a_correct_model(served):
    result, rows = _tune(served["correct"])
    assert result.best is not None and result.best.candidate.max_queue_delay_microseconds == 2_000, result.describe()
    assert result.accuracy is not None and result.accuracy.passed, result.accuracy.describe()
    # the interleaved rounds (A B A B A B): a significant improvement in throughput within the bound
    assert result.comparison.verdict == "improvement" and result.comparison.rounds == 3, result.describe()
    assert result.recommended and result.shipped == result.best.candidate
    roles = [r.measurement["tune"]["role"] for r in rows]
    assert roles.count("evidence") == 4 and roles[-6:] == ["abab-winner", "abab-default"] * 3
    # the step's gain confirmed before the walk moved: the own configuration and the step measured once more each
    again = [r.measurement["tune"]["why"].startswith("measured again to confirm a gain; ") for r in rows[:4]]
    assert again == [False, False, True, True] and len(result.best.scores) == 2
