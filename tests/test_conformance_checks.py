"""The conformance checks (tritonsuite.judge.conformance) on the real embedded server: each catches a deliberately
broken deployment with a one-line reason, and passes a sound one. Every repository is written here (tmp_path):
the identity model's ONNX export, and python-backend models written below."""
from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.judge.conformance import Target, run_check
from tritonsuite.models import default_registry
from tritonsuite.server import EmbeddedServer, RemoteServer, ServerError

# One python-backend model whose behaviour a parameter chooses: "echo" (output = input), "sleep" (echo after 40 ms),
# "die" (the stub
# exits on an input of another length than 16), "random" (a fresh random draw per request), "exclusive" (holds an
# exclusive lock from initialize on: a second copy cannot load, so a reload cannot swap it).
MODEL_PY = '''
import fcntl, json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.behaviour, self.lock_path = params.get("behaviour", "echo"), params.get("lock", "")
        if self.behaviour == "exclusive":
            self.held = open(self.lock_path, "w")
            fcntl.flock(self.held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a second copy raises: it cannot load

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if self.behaviour == "die" and x.shape[-1] != 16:
                os._exit(1)
            if self.behaviour == "sleep":
                time.sleep(0.04)
            y = np.random.default_rng().standard_normal(x.shape).astype(np.float32) if self.behaviour == "random" \\
                else x.astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", y)]))
        return responses
'''


def python_model(repo: Path, name: str, behaviour: str, *, dims=(16,), max_batch_size=8, instances=1, extra="",
                 versions=(1,), lock: Path | None = None) -> Path:
    directory = repo / name
    for v in versions:
        (directory / str(v)).mkdir(parents=True)
        (directory / str(v) / "model.py").write_text(MODEL_PY)
    dims_text = ", ".join(str(d) for d in dims)
    (directory / "config.pbtxt").write_text(f'''
name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input {{ name: "INPUT0" data_type: TYPE_FP32 dims: [{dims_text}] }}
output {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [{dims_text}] }}
instance_group {{ count: {instances} kind: KIND_CPU }}
parameters {{ key: "behaviour" value {{ string_value: "{behaviour}" }} }}
parameters {{ key: "lock" value {{ string_value: "{lock or ''}" }} }}
{extra}
''')
    return directory


def sixteen(batch: int, seed: int = 0) -> dict:
    return {"INPUT0": np.random.default_rng(seed).standard_normal((batch, 16)).astype(np.float32)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return tmp_path_factory.mktemp("conformance-repo")


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        yield server


@pytest.fixture(scope="module")
def identity_online(repo, server, tmp_path_factory):
    """The identity model's ONNX export, dynamic batching (preferred 4, 2 ms), its response cache enabled."""
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path_factory.mktemp("cache"))
    directory = build_deployment(repo, model_config(
        "ident_online", spec, artifact.format, max_batch_size=8, dynamic_batching=True, preferred_batch_sizes=(4,),
        max_queue_delay_microseconds=2000), artifact)
    (directory / "config.pbtxt").write_text((directory / "config.pbtxt").read_text()
                                            + "response_cache { enable: true }\n")
    server.load(directory)
    return directory


def load_with(server, directory: Path, **override) -> None:
    """Load a deployment with a configuration override through the repository API: the server then runs
    something other than the config.pbtxt on disk (as a server someone configured by hand would)."""
    from tritonsuite.deploy.repository import config_of

    config = {k: v for k, v in {**config_of(directory), **override}.items() if v is not None}
    conn = server.client()
    try:
        conn.load_model(directory.name, config=json.dumps(config))
    finally:
        conn.close()


def check(server, directory, name, inputs=sixteen, **target):
    result = run_check(Target(server, directory, inputs, **target), name)
    assert "\n" not in result.reason, result.reason  # a one-line reason
    return result


# ---------------------------------------------------------------------------------------------- sound deployments
NUM = r"\d+(?:\.\d+)?"
#: what each check declares and observes for the sound identity deployment, whole (the measured figures as numbers),
#: and the keys of its evidence: the words a reader gets are asserted, not only the verdict
SOUND = {
    "identity": (re.escape("onnxruntime_onnx, max_batch_size 8, inputs INPUT__0 float32 [16]; outputs OUTPUT__0 "
                           "float32 [16]; latest {num_versions: 1} of versions [1] -> [1]"),
                 re.escape("onnxruntime_onnx, max_batch_size 8; READY [1]; v1 answered by version 1 (1 response(s) "
                           "with outputs)"),
                 {"declared", "served", "versions_on_disk", "selected", "ready", "answers", "server_platform",
                  "server_backend"}),
    "instances": (re.escape("instance_group 1 x KIND_CPU: 1 execution(s) at a time"),
                  rf"{NUM} executions at concurrency 8: compute {NUM} s over {NUM} s of wall time \(overlap {NUM}\)",
                  {"concurrency", "requests", "wall_s", "instances", "executions", "compute_infer_s", "overlap"}),
    "refusals": (re.escape("7 malformed requests (batch above max_batch_size, missing input, oversized body, truncated "
                           "body, unknown output, wrong dtype, wrong shape) over grpc and http: each refused naming "
                           "the problem, the deployment unharmed"),
                 rf"14/14 refused, slowest {NUM} s; 14/14 followed by a healthy reference answer", {"probes"}),
    "counters": (re.escape("client: 10 answered (15 samples, batches [1, 2]), 0 failed, 2 refused for a wrong shape"),
                 re.escape("statistics: success 10, fail 0, inferences 15, executions 10; metrics: success 10, "
                           "failure 0, inferences 15, executions 10"),
                 {"client", "statistics", "metrics"}),
    "cache": (re.escape("response_cache { enable: true }"),
              re.escape("repeat: {'cache_hit_count': 1, 'cache_miss_count': 0}, other input: {'cache_hit_count': 0, "
                        "'cache_miss_count': 1}, fresh computation agrees"),
              {"first", "repeat", "other_input", "fresh_equals_cached"}),
    "reload": (re.escape("reloads under load at concurrency 2: a new version (latest {num_versions: 1}) and a changed "
                         "configuration, zero failed requests, no old answer after a new one"),
               rf"version 1 -> 2: {NUM} requests, 0 failed; latency before p99 {NUM} ms / max {NUM} ms \({NUM} "
               rf"samples\), during p99 {NUM} ms / max {NUM} ms \({NUM} samples\); config with parameter "
               rf"tritonsuite_conformance_reload: {NUM} requests, 0 failed; latency before p99 {NUM} ms / max {NUM} ms "
               rf"\({NUM} samples\), during p99 {NUM} ms / max {NUM} ms \({NUM} samples\)",
               {"added", "new_version", "observed_new_version", "changed_config"}),
}


@pytest.mark.parametrize("name", list(SOUND))
def test_a_sound_deployment_passes_every_check(server, identity_online, name):
    result = check(server, identity_online, name, inputs=None)
    assert result.verdict == "pass", result.line()
    declared, observed, evidence = SOUND[name]
    assert re.fullmatch(declared, result.declared), result.declared
    assert re.fullmatch(observed, result.observed), result.observed
    assert evidence <= set(result.evidence), sorted(result.evidence)
    assert result.reason == ""


def test_batching_skips_a_batchless_deployment_with_its_reason(repo, server):
    directory = python_model(repo, "batchless", "echo", max_batch_size=0)
    server.load(directory)
    result = check(server, directory, "batching", inputs=None)
    assert (result.verdict, result.declared, result.observed, result.reason) == (
        "skipped", "none", "-", "max_batch_size 0: no batch dimension, nothing to batch"), result.line()


def test_a_sound_batcher_passes_batching_with_requests_waiting_on_any_host(repo, server):
    """Batching is judged only where requests waited for the batcher (identity answers in well under a millisecond,
    so on a fast host none waits and the check says so): a model that takes 40 ms an execution keeps the load's
    requests waiting on any host, and its dynamic batcher groups them."""
    directory = python_model(repo, "sound_batcher", "sleep", extra="dynamic_batching { preferred_batch_size: [4] "
                                                                  "max_queue_delay_microseconds: 2000 }")
    server.load(directory)
    result = check(server, directory, "batching")
    assert result.verdict == "pass", result.line()
    assert max(int(size) for size in result.evidence["batch_stats"]) > 1, result.evidence["batch_stats"]


def test_batching_shows_the_histogram_and_reload_its_latency_samples(server, identity_online):
    batching = check(server, identity_online, "batching", inputs=None)
    assert batching.evidence["batch_stats"] and sum(batching.evidence["batch_stats"].values()) > 0
    reload = check(server, identity_online, "reload", inputs=None)
    switch = reload.evidence["new_version"]
    assert switch["failed"] == 0 and switch["old_after_new"] == 0 and set(switch["answers_by_version"]) == {"1", "2"}
    assert switch["latency"]["before"]["samples"] >= 10 and switch["latency"]["during"]["samples"] >= 1
    assert not (identity_online / "2").exists(), "the added version is removed afterwards"


def test_every_ready_version_of_an_all_policy_answers(repo, server):
    directory = python_model(repo, "all_versions", "echo", versions=(1, 2), extra="version_policy { all { } }")
    server.load(directory)
    result = check(server, directory, "identity")
    assert result.verdict == "pass", result.line()
    assert result.evidence["ready"] == [1, 2] and set(result.evidence["answers"]) == {1, 2}


# --------------------------------------------------------------------------------------------- broken deployments
def test_dims_that_differ_from_the_model_never_load(repo, server, tmp_path):
    """As on Triton's onnxruntime backend, the deployment is refused at load in its words (docs/stock-backends.md),
    before any check could run; it used to load on the stand-in and fail identity's request."""
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path / "cache")
    directory = build_deployment(repo, model_config("wrong_dims", spec, artifact.format, max_batch_size=8), artifact)
    text = (directory / "config.pbtxt").read_text().replace("dims: 16", "dims: 17")
    assert "dims: 17" in text
    (directory / "config.pbtxt").write_text(text)
    with pytest.raises(ServerError, match="the model expects 2 dimensions \\(shape \\[-1,16\\]\\) but the model "
                                          "configuration specifies 2 dimensions"):
        server.load(directory)
    assert server.is_alive()


def test_identity_catches_a_version_policy_serving_the_wrong_version(repo, server):
    directory = python_model(repo, "wrong_version", "echo", versions=(1, 2, 3))
    load_with(server, directory, version_policy={"specific": {"versions": [1]}})
    result = check(server, directory, "identity")
    assert result.verdict == "fail"
    assert "READY versions [1], but version policy latest {num_versions: 1} selects [3] of the version directories " \
        "[1, 2, 3]" in result.reason


def test_batching_catches_a_deployment_that_runs_requests_one_by_one(repo, server):
    directory = python_model(repo, "one_by_one", "sleep",
                             extra="dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000 }")
    load_with(server, directory, dynamic_batching=None)  # served without the batcher it declares
    result = check(server, directory, "batching")
    assert result.verdict == "fail"
    assert "dynamic batching declared, but every one of" in result.reason
    assert set(result.evidence["batch_stats"]) == {1}


def test_instances_catches_instances_that_never_run_at_once(repo, server):
    sound = python_model(repo, "two_instances", "sleep", instances=2)
    server.load(sound)
    passed = check(server, sound, "instances")
    assert passed.verdict == "pass" and passed.evidence["overlap"] > 1.2, passed.line()
    broken = python_model(repo, "one_at_a_time", "sleep", instances=2)
    load_with(server, broken, instance_group=[{"count": 1, "kind": "KIND_CPU"}])  # served with one instance
    result = check(server, broken, "instances")
    assert result.verdict == "fail"
    assert "2 instances declared, but executions did not overlap (compute" in result.reason


def test_refusals_catch_a_model_that_dies_on_bad_input(repo, server):
    directory = python_model(repo, "dies", "die", dims=(-1,))
    server.load(directory)
    result = check(server, directory, "refusals")
    assert result.verdict == "fail"
    assert "http other size of a variable dim: afterwards the reference request failed (" in result.reason \
        or "http other size of a variable dim: afterwards the model is not ready" in result.reason, result.reason
    assert server.is_alive()


def test_counters_catch_a_second_client_on_the_model(repo, server):
    directory = python_model(repo, "shared", "echo")
    server.load(directory)
    assert check(server, directory, "counters").verdict == "pass"
    stop, sending = threading.Event(), threading.Event()

    def other_client():
        conn = server.client()
        try:
            from tritonsuite.load.client import infer_tensors
            while not stop.is_set():
                tensors, outputs = infer_tensors(sixteen(1, 5), ["OUTPUT0"])
                conn.infer("shared", tensors, outputs=outputs)
                sending.set()
                time.sleep(0.005)
        finally:
            conn.close()

    thread = threading.Thread(target=other_client, daemon=True)
    thread.start()
    assert sending.wait(30)
    try:
        result = check(server, directory, "counters")
    finally:
        stop.set()
        thread.join(10)
    assert result.verdict == "fail"
    assert "successes, the client got 10 answers" in result.reason


def test_cache_catches_a_cached_non_deterministic_model(repo, server):
    directory = python_model(repo, "random_cached", "random", extra="response_cache { enable: true }")
    server.load(directory)
    result = check(server, directory, "cache")
    assert result.verdict == "fail"
    assert result.reason == ("the cached answer differs from what the model computes for the same input now (output"
                             " OUTPUT0; a non-deterministic model: caching freezes one draw)")
    assert result.evidence["repeat"]["cache_hit_count"] == 1


def test_reload_catches_a_model_that_cannot_be_swapped_under_load(repo, server, tmp_path):
    directory = python_model(repo, "exclusive", "exclusive", lock=tmp_path / "exclusive.lock")
    server.load(directory)
    result = check(server, directory, "reload")
    assert result.verdict == "fail"
    assert "loading version 2 under load failed: " in result.reason, result.reason
    assert result.evidence["new_version"]["failed"] == 0  # the old version kept answering
    assert check(server, directory, "identity").verdict == "pass"  # and the deployment is as it was


def test_reload_fails_at_once_a_deployment_that_does_not_answer_alone(repo, server):
    """Its requests under load would each wait the switch's bound (60 s): a request alone, within the profile's
    bound, decides first (two hanging deployments cost the corpus's reload 7.5 minutes)."""
    directory = python_model(repo, "dies_on_eight", "die", dims=(8,))  # its stub exits on any request
    server.load(directory)
    result = check(server, directory, "reload", inputs=lambda b, seed=0: {"INPUT0": np.zeros((b, 8), np.float32)})
    assert result.verdict == "fail"
    assert result.reason.startswith("a request sent alone before any reload failed: "), result.reason
    assert set(result.evidence) == {"alone_error"}  # no load ran, no version was added
    assert sorted(p.name for p in directory.iterdir()) == ["1", "config.pbtxt"]


def test_reload_of_a_remote_server_needs_an_explicit_flag(server, identity_online):
    remote = RemoteServer(server.http_url)
    result = check(remote, identity_online, "reload", inputs=None)
    assert result.verdict == "skipped" and "--allow-reload" in result.reason
    assert check(remote, identity_online, "refusals", inputs=None).verdict == "pass"


def test_cache_is_skipped_with_the_reason_on_a_server_without_a_response_cache(repo, identity_online, tmp_path):
    """A stock server started without --cache-config serves a deployment that enables response_cache uncached: no
    lookup is counted, and the model's configuration as served still enables it (not the deployment's fault)."""
    with EmbeddedServer(repo, tmp_path, response_cache=False, auto_complete=False) as plain:
        plain.load(identity_online)
        result = check(plain, identity_online, "cache", inputs=None)
    assert result.verdict == "skipped", result.line()
    assert result.reason == "the server has no response cache (start it with --cache-config local,size=...)"
    assert result.observed == "no cache lookup counted" and result.evidence["repeat"] == {
        "cache_hit_count": 0, "cache_miss_count": 0}


def test_rate_limiter_is_skipped_for_a_deployment_without_an_instance_group(repo, server):
    """No instance_group at all (Triton's default group): nothing declares rate_limiter resources."""
    directory = python_model(repo, "no_group", "echo")
    config = directory / "config.pbtxt"
    config.write_text(config.read_text().replace("instance_group { count: 1 kind: KIND_CPU }\n", ""))
    assert "instance_group" not in config.read_text()
    server.load(directory)
    result = check(server, directory, "rate_limiter")
    assert result.verdict == "skipped", result.line()
    assert result.reason == "no instance group declares rate_limiter resources"


def test_cache_is_skipped_with_the_reason_where_the_config_does_not_enable_it(repo, server):
    directory = python_model(repo, "uncached", "echo")
    server.load(directory)
    result = check(server, directory, "cache")
    assert result.verdict == "skipped" and result.reason == "the configuration does not enable response_cache"
