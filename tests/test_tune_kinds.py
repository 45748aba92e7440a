"""`pytest -m tune` on a user repository's sequence and decoupled deployments (python backend, run for real by the
wheel's python backend on the embedded server): each candidate is the deployment's own configuration with its tuned
fields set (a sequence model's sequence batcher, never dynamic batching beside it), measured by its kind (sequences,
streams); the winner is checked by its kind's whole exchanges (neither takes accuracy probes in its load) and
interleaved A B against the deployment's own configuration; the shipped config.pbtxt loads.

Each model spends its time in a sleep, one request at a time per instance (``seq_direct`` with one batch slot and
sequences of one step, so at two sequences in flight every request waits for the other's; ``stream_n`` 10 ms per
response), so at two in flight a second instance halves every request's latency and doubles the throughput on any
host: the search's second configuration (2 instances) wins, and its check recommends it, whatever the host's
speed. With longer sequences half the steps are as fast on one instance as on two, and the interleaved comparison's
latency test then hangs on the host's noise (measured: one of three pairs at p 0.04 in one run of three)."""
import json
import re
import shutil

import pytest

from tests.helpers import raw_rows, run_pytest
from tests.kinds import decoupled_model, sequence_model
from tritonsuite.server import EmbeddedServer

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 4, warmup_ms: 100,
              client_bound_percent: 1000}
"""
BOUND = "p99 <= 5000 ms"


def _repository(tmp_path):
    repo = tmp_path / "kinds"
    sequence_model(repo, "seq_direct", "direct", work_ms=20, max_batch_size=1)
    stream = decoupled_model(repo, "stream_n")
    code = stream / "1" / "model.py"
    code.write_text(code.read_text().replace("time.sleep(0.001)", "time.sleep(0.01)"))
    data = {"seq_direct": {"data": [{"INPUT": [v]} for v in (3, 1, 4, 1, 5)]},
            "stream_n": {"data": [{"COUNT": [c], "DATA": [c, 1.5, -2, 0.25]} for c in (2, 3, 1, 2)]}}
    for name, doc in data.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    return repo


def _tune(tmp_path, model: str):
    repo = _repository(tmp_path)
    result = run_pytest(["-m", "tune", "--gpu", "tiny", "--model-repository", str(repo), "--models", model,
                         "--input-data", f"{model}={tmp_path / f'{model}.json'}", "--latency-bound", BOUND,
                         "--tune-budget", "2", "--concurrency", "2", "--sequence-length", "1",
                         "--sequence-length-variation", "0",
                         "tests/test_tune.py", "-p", "no:warnings", "-v"], tmp_path, profile=PROFILE, timeout=300)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    rows = raw_rows(tmp_path / "reports", "tune")
    roles = [r["measurement"]["tune"]["role"] for r in rows]
    # two configurations, the step's gain confirmed (both measured once more) before the walk moved
    assert roles == ["evidence"] * 4 + ["abab-winner", "abab-default"] * 3 + ["answer"], roles
    # at -v each measured point is told as it comes, counting the configurations; then the tune's line
    told = re.findall(rf"^  {model}-\S+ \[\d+ s\] (.*)$", result.stdout, re.M)
    assert [line.split(":")[0] for line in told] == ["configuration 1", "configuration 2"] * 2 + \
        ["abab-winner", "abab-default"] * 3, told
    assert all("measured again to confirm a gain; " in line for line in told[2:4]), told
    assert re.match(r"configuration 2: .+ at concurrency 2: (within|over): ", told[1]), told
    assert re.search(rf"^  \[1/1\] {model}-\S+ passed in [\d.]+ s: ship ", result.stdout, re.M), result.stdout
    page = (tmp_path / "reports" / "tune" / model / "summary.md").read_text()  # the session's pages of the stored rows
    assert page.startswith(f"# Tune: {model}\n") and rows[-1]["measurement"]["tune"]["answer"] in page
    assert (tmp_path / "reports" / "tune" / model / "throughput_vs_latency.png").stat().st_size > 0
    return repo, rows


def _shipped_loads(tmp_path, repo, model: str):
    """The shipped config.pbtxt, beside the deployment's own files in a fresh repository, loads on the embedded
    server; its description as the server runs it."""
    fresh = tmp_path / "shipped"
    shutil.copytree(repo / model, fresh / model)
    shutil.copy(tmp_path / "reports" / "tune" / model / "config.pbtxt", fresh / model / "config.pbtxt")
    with EmbeddedServer(fresh, tmp_path / "logs", auto_complete=False) as server:
        server.load(fresh / model)
        return server.model_description(model)


def _check_answer(answer, kinds: str, scheduler: str):
    tune = answer["measurement"]["tune"]
    assert answer["status"] == "OK" and answer["measurement"]["kind"] == kinds.split(", ")
    assert tune["candidate"]["instance_count"] == 2 and tune["candidate"]["scheduler"] == scheduler, tune
    # verified: its kind's whole exchanges instead of probes, then interleaved A B x3 against its own configuration
    assert tune["accuracy"].startswith(f"accuracy passed, judged by whole exchanges, not by probes under load (a "
                                       f"{kinds} deployment takes none)"), tune["accuracy"]
    assert tune["recommended"] is True and tune["shipped"] == tune["candidate"], tune["answer"]
    assert tune["answer"].startswith(f"ship {tune['label']}: ") and "interleaved A B x3" in tune["answer"]
    assert tune["accuracy"] in tune["answer"]
    return tune


def test_a_sequence_deployment_is_tuned_through_its_sequence_batcher(tmp_path):
    repo, rows = _tune(tmp_path, "seq_direct")
    for row in rows[:-1]:  # every point measured with sequences, each candidate a direct sequence batcher's
        sequences = row["measurement"]["sequences"]
        assert sequences["sequence_length"] == 1 and sequences["sequences_started"] > 0
        assert row["measurement"]["tune"]["candidate"]["scheduler"] == "direct"
        assert row["parameters"]["Deployment kind"] == "sequence (direct), python"
    tune = _check_answer(rows[-1], "sequence (direct), python", "direct")
    assert rows[-1]["measurement"]["sequences"]["sequences_started"] > 0
    assert "sequence_batching.direct.max_queue_delay_microseconds" in tune["varied"]
    assert not any(v.startswith("dynamic_batching") for v in tune["varied"]), tune["varied"]
    assert "sequence batcher direct" in tune["label"]
    shipped = (tmp_path / "reports" / "tune" / "seq_direct" / "config.pbtxt").read_text()
    assert "dynamic_batching" not in shipped and "sequence_batching" in shipped  # Triton refuses the two together
    served = _shipped_loads(tmp_path, repo, "seq_direct")
    assert served.sequence and served.sequence_batching.strategy == "direct" and served.instance_count == 2
    assert served.dynamic_batching is None and served.max_batch_size == 1


def test_a_decoupled_deployment_is_tuned_over_streams(tmp_path):
    repo, rows = _tune(tmp_path, "stream_n")
    for row in rows[:-1]:
        stream = row["measurement"]["stream"]
        assert row["measurement"]["protocol"] == "grpc (bidirectional stream)"
        assert stream["responses"] >= stream["requests"] > 0 and stream["responses_per_request_max"] >= 2
        assert "avg time to first response" in row["result"]
    tune = _check_answer(rows[-1], "python, decoupled", "dynamic")
    assert "dynamic_batching.max_queue_delay_microseconds" in tune["varied"]
    served = _shipped_loads(tmp_path, repo, "stream_n")
    assert served.decoupled and served.instance_count == 2 and served.dynamic_batching is not None


def test_an_ensemble_or_a_batchless_deployment_is_refused_in_one_line_saying_why(tmp_path):
    from types import SimpleNamespace

    from tritonsuite.core.description import describe
    from tritonsuite.tune import TuneError
    from tritonsuite.deploy.deployment import Deployment
    from tritonsuite.tune.runner import TuneTarget

    config = {"name": "ens", "platform": "ensemble", "max_batch_size": 8, "ensemble_scheduling": {
        "step": [{"model_name": "add_onnx", "model_version": -1}]}}
    description = describe(config, lambda name: {"name": name, "platform": "onnxruntime_onnx", "max_batch_size": 8})
    target = TuneTarget(SimpleNamespace(), Deployment("ens", None, None, config, tmp_path, "", description, description),
                        tmp_path, 1)
    assert target.refuses() == ("ens is an ensemble: it has no instance group or batcher of its own; tune its "
                                "composing models (add_onnx)")
    batchless = describe({"name": "b", "platform": "onnxruntime_onnx"})
    with pytest.raises(TuneError, match=r"^b is batchless \(max_batch_size 0\): Triton batches none of its requests, so "
                                        r"neither a batcher's settings nor max_batch_size can vary$"):
        TuneTarget(SimpleNamespace(), Deployment("b", None, None, {}, tmp_path, "", batchless, batchless), tmp_path,
                   1).check()
