"""The conformance checks on the kinds beyond one stateless model, their traffic sent through the drivers
(tritonsuite.load.exchange): batching, instances and reload on a sequence model and on an ensemble (judged at its
steps), refusals and counters on a decoupled one. Each passes a sound deployment and fails a broken one of its kind,
on the real embedded server (python-backend models written here and in tests/kinds.py)."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.kinds import DECOUPLED_CONFIG, DECOUPLED_MODEL, _write, sequence_model
from tests.test_conformance_checks import load_with, python_model, sixteen
from tritonsuite.judge.conformance import Target, run_check
from tritonsuite.server import EmbeddedServer

WORK_MS = 20  # each sequence execution sleeps this long: requests wait, so the batcher has something to group

ENSEMBLE = '''
name: "{name}"
platform: "ensemble"
max_batch_size: 8
input {{ name: "INPUT0" data_type: TYPE_FP32 dims: [16] }}
output {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [16] }}
ensemble_scheduling {{ step [ {{ model_name: "{step}" model_version: -1
  input_map {{ key: "INPUT0" value: "INPUT0" }} output_map {{ key: "{output}" value: "OUTPUT0" }} }} ] }}
'''


def ensemble(repo: Path, name: str, step: str, output: str = "OUTPUT0") -> Path:
    """An ensemble of one step (``output``: the step's output it maps; another name than the step's breaks it)."""
    directory = repo / name
    (directory / "1").mkdir(parents=True)
    (directory / "config.pbtxt").write_text(ENSEMBLE.format(name=name, step=step, output=output))
    return directory


def sequences(repo: Path, name: str, instances: int = 1, only_version_1: bool = False) -> Path:
    directory = sequence_model(repo, name, "direct", work_ms=WORK_MS)
    config = directory / "config.pbtxt"
    config.write_text(config.read_text().replace("count: 1", f"count: {instances}"))
    if only_version_1:  # a new version that fails to load (its initialize raises)
        code = directory / "1" / "model.py"
        code.write_text(code.read_text().replace("        self.state = {}", "        self.state = {}\n        if "
                                                 "args['model_version'] != '1':\n            raise RuntimeError("
                                                 "'this model loads as version 1 only')"))
    return directory


def decoupled(repo: Path, name: str, dies: bool = False) -> Path:
    """stream_n with a variable DATA dim; ``dies``: its stub exits on DATA of another length than 4."""
    code = DECOUPLED_MODEL.replace("            data = pb_utils.get_input_tensor_by_name(request, \"DATA\").as_numpy()\n",
                                   "            data = pb_utils.get_input_tensor_by_name(request, \"DATA\").as_numpy()\n"
                                   + ("            if data.shape[-1] != 4:\n                __import__('os')._exit(1)\n"
                                      if dies else ""))
    assert dies == (code != DECOUPLED_MODEL)
    config = DECOUPLED_CONFIG.format(name=name).replace('name: "DATA" data_type: TYPE_FP32 dims: [4]',
                                                        'name: "DATA" data_type: TYPE_FP32 dims: [-1]')
    return _write(repo / name, config, "model.py", code)


def counts(batch: int, seed: int = 0) -> dict:
    return {"COUNT": np.full((batch, 1), 3, np.int32),
            "DATA": np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return tmp_path_factory.mktemp("kinds-conformance")


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        yield server


def check(server, directory: Path, name: str, inputs=None):
    result = run_check(Target(server, directory, inputs), name)
    assert "\n" not in result.reason, result.reason
    return result


# ------------------------------------------------------------------------------------------------ sequence model
def test_a_sequence_model_batches_across_its_slots_and_runs_its_instances(repo, server):
    sound = sequences(repo, "seq_sound", instances=2)
    server.load(sound)
    batching = check(server, sound, "batching")
    assert batching.verdict == "pass", batching.line()
    assert max(batching.evidence["batch_stats"]) > 1 and "sequence_batching direct" in batching.declared
    instances = check(server, sound, "instances")
    assert instances.verdict == "pass" and instances.evidence["overlap"] > 1.2, instances.line()


def test_batching_keeps_an_oldest_batcher_s_load_within_its_candidate_sequences(repo, server):
    """Two candidates under max_batch_size 8: the load keeps two sequences live, not sixteen, so no request's queue
    time is spent in the backlog where no execution could group it (16 live sequences queued ~0.1 s each there,
    past the bound of the queue delay plus the executions ahead, a false red on a sound deployment)."""
    sound = sequence_model(repo, "seq_two_candidates", "oldest", work_ms=WORK_MS)
    config = sound / "config.pbtxt"
    config.write_text(config.read_text().replace("max_candidate_sequences: 8", "max_candidate_sequences: 2"))
    server.load(sound)
    result = check(server, sound, "batching")
    assert result.verdict == "pass", result.line()
    assert result.evidence["concurrency"] == 2 and max(result.evidence["batch_stats"]) == 2, result.evidence
    assert result.evidence["queue_ms_per_request"] <= result.evidence["queue_bound_ms"] * 1.25, result.evidence


def test_batching_catches_a_sequence_model_served_with_one_slot(repo, server):
    broken = sequences(repo, "seq_one_slot")
    load_with(server, broken, max_batch_size=1)  # declares 8 slots, served with one: sequences wait in the backlog
    result = check(server, broken, "batching")
    assert result.verdict == "fail", result.line()
    assert "sequence batching declared, but every one of" in result.reason
    assert set(result.evidence["batch_stats"]) == {1}


def test_instances_catches_a_sequence_model_served_with_one_instance(repo, server):
    broken = sequences(repo, "seq_one_instance", instances=2)
    load_with(server, broken, instance_group=[{"count": 1, "kind": "KIND_CPU"}])
    result = check(server, broken, "instances")
    assert result.verdict == "fail", result.line()
    assert "2 instances declared, but executions did not overlap (compute" in result.reason


def test_reload_of_a_sequence_model_counts_the_sequences_it_cuts(repo, server):
    sound = sequences(repo, "seq_reload")
    server.load(sound)
    result = check(server, sound, "reload")
    assert result.verdict == "pass", result.line()
    switch = result.evidence["new_version"]
    assert switch["failed"] == 0 and set(switch["answers_by_version"]) == {"1", "2"}
    # every failure the check forgave is the new model refusing a sequence begun before it (for want of START)
    assert all("START" in e for e in switch["errors"]), switch["errors"]
    assert (switch["sequences_cut"] > 0) == bool(switch["errors"])
    assert result.observed.startswith(result.evidence["observed_new_version"]), result.observed
    assert result.observed.startswith("version 1 -> 2"), result.observed
    # and the changed configuration's part after it (a fourth mutation sample found the key unasserted)
    assert result.observed.endswith("; " + result.evidence["observed_changed_config"]), result.observed
    assert result.evidence["observed_changed_config"].startswith("config with parameter "), result.evidence


def test_reload_catches_a_sequence_model_whose_new_version_does_not_load(repo, server):
    broken = sequences(repo, "seq_v1_only", only_version_1=True)
    server.load(broken)
    result = check(server, broken, "reload")
    assert result.verdict == "fail", result.line()
    assert "loading version 2 under load failed" in result.reason
    assert result.evidence["new_version"]["failed"] == 0  # the old version kept serving its sequences


# ------------------------------------------------------------------------------------------------------ ensemble
def test_an_ensemble_is_judged_at_its_steps(repo, server):
    step = python_model(repo, "ens_step", "sleep", instances=2,
                        extra="dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000 }")
    sound = ensemble(repo, "ens_sound", "ens_step")
    server.load(step)
    server.load(sound)
    batching = check(server, sound, "batching", sixteen)
    assert batching.verdict == "pass", batching.line()
    assert max(batching.evidence["models"]["ens_step"]["batch_stats"]) > 1
    assert batching.declared.startswith("ens_step: dynamic_batching")
    instances = check(server, sound, "instances", sixteen)
    assert instances.verdict == "pass", instances.line()
    assert instances.evidence["models"]["ens_step"]["overlap"] > 1.2
    reload = check(server, sound, "reload", sixteen)
    assert reload.verdict == "pass", reload.line()
    assert set(reload.evidence["new_version"]["answers_by_version"]) == {"1", "2"}


def test_batching_and_instances_catch_an_ensemble_whose_step_is_served_otherwise(repo, server):
    step = python_model(repo, "ens_step_served_otherwise", "sleep", instances=2,
                        extra="dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000 }")
    broken = ensemble(repo, "ens_broken", "ens_step_served_otherwise")
    server.load(broken)  # loads its step as declared; then the step is served otherwise
    load_with(server, step, dynamic_batching=None, instance_group=[{"count": 1, "kind": "KIND_CPU"}])
    batching = check(server, broken, "batching", sixteen)
    assert batching.verdict == "fail", batching.line()
    assert "ens_step_served_otherwise: dynamic batching declared, but every one of" in batching.reason
    instances = check(server, broken, "instances", sixteen)
    assert instances.verdict == "fail", instances.line()
    assert "ens_step_served_otherwise: 2 instances declared, but executions did not overlap (compute" \
        in instances.reason


def test_reload_catches_an_ensemble_whose_configuration_does_not_load(repo, server):
    """Unlike a model whose new version fails to load (the old one keeps serving), an ensemble whose configuration
    does not validate is taken down by the failed load on Triton r24.10: its requests then fail."""
    step = python_model(repo, "ens_step_echo", "echo")
    server.load(step)
    served = ensemble(repo, "ens_edited", "ens_step_echo")
    server.load(served)  # what the server runs; then the file is edited to map an output the step does not have
    config = served / "config.pbtxt"
    config.write_text(config.read_text().replace('key: "OUTPUT0" value: "OUTPUT0"', 'key: "NO_SUCH" value: "OUTPUT0"'))
    result = run_check(Target(server, served, sixteen), "reload")
    assert result.verdict == "fail", result.line()
    assert "loading version 2 under load failed: " in result.reason, result.reason
    assert "ensemble tensor OUTPUT0 is mapped from non-exist" in result.reason
    assert "requests failed while version 2 was added" in result.reason
    assert any("has no available versions" in e for e in result.evidence["new_version"]["errors"])


# ------------------------------------------------------------------------------------------------ decoupled model
def test_a_decoupled_model_refuses_on_its_stream_and_counts_what_it_answered(repo, server):
    sound = decoupled(repo, "stream_sound")
    server.load(sound)
    refusals = check(server, sound, "refusals", counts)
    assert refusals.verdict == "pass", refusals.line()
    assert {p["protocol"] for p in refusals.evidence["probes"]} == {"grpc stream"}
    counters = check(server, sound, "counters", counts)
    assert counters.verdict == "pass", counters.line()
    assert counters.evidence["statistics"]["success_count"] == counters.evidence["client"]["answered"] == 10


def test_refusals_catch_a_decoupled_model_that_dies_on_bad_input(repo, server):
    broken = decoupled(repo, "stream_dies", dies=True)
    server.load(broken)
    result = check(server, broken, "refusals", counts)
    assert result.verdict == "fail", result.line()
    assert "grpc stream other size of a variable dim: " in result.reason, result.reason
    assert server.is_alive()


def test_counters_catch_a_second_client_on_a_decoupled_model(repo, server):
    from tritonsuite.judge.conformance.traffic import statistics
    from tritonsuite.load.exchange import exchange

    shared = decoupled(repo, "stream_shared")
    server.load(shared)
    target = Target(server, shared, counts)
    stop = threading.Event()
    other = threading.Thread(target=exchange, args=(server, "stream_shared", target.description, [counts(1, 5)],
                                                    target.output_names), kwargs={"stop": stop}, daemon=True)
    other.start()
    try:
        for _ in range(600):  # the other client is answered before the check starts (at most 30 s)
            if statistics(server, "stream_shared").get("success_count", 0):
                break
            time.sleep(0.05)
        result = run_check(target, "counters")
    finally:
        stop.set()
        other.join(30)
    assert result.verdict == "fail", result.line()
    assert "successes, the client got 10 answers" in result.reason
