"""The field checks decoupled, ordering, ragged and warmup (tritonsuite.judge.conformance) on the real embedded server:
each passes a sound deployment and fails a broken one (a config.pbtxt declaring the field, served without it by a
configuration override, or a model that does not do what the field promises), with a one-line reason. Every model
is a python-backend model written here, a few ms per execution."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.kinds import DECOUPLED_CONFIG, DECOUPLED_MODEL, _write
from tests.test_conformance_checks import load_with
from tritonsuite.judge.conformance import Target, decoupled, run_check
from tritonsuite.server import EmbeddedServer, RemoteServer

# sleeps the first value of its first request's INPUT0 (seconds), then echoes; "first_slow": sleeps 0.3 s on its
# first execution only (what a warm-up absorbs); "first_slow_data": on its first execution of data other than zeros
# (a warm-up of zeros does not absorb it)
MODEL_PY = '''
import json, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.behaviour = params.get("behaviour", {}).get("string_value", "sleep")
        self.first = True

    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        if self.behaviour.startswith("first_slow"):  # "first_slow_data": zeros (a warm-up's) do not warm it
            warms = self.behaviour == "first_slow" or bool(np.any(xs[0]))
            time.sleep(0.3 if self.first and warms else 0.002)
            self.first = self.first and not warms
        else:
            time.sleep(float(xs[0].reshape(-1)[0]))
            self.first = False
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x.astype(np.float32))]) for x in xs]
'''


def model(repo: Path, name: str, behaviour: str = "sleep", *, instances: int = 1, dims: str = "4", extra: str = "",
          ragged: bool = False) -> Path:
    config = f'''
name: "{name}"
backend: "python"
max_batch_size: 8
input {{ name: "INPUT0" data_type: TYPE_FP32 dims: [{dims}] {"allow_ragged_batch: true" if ragged else ""} }}
output {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [{dims}] }}
instance_group {{ count: {instances} kind: KIND_CPU }}
parameters {{ key: "behaviour" value {{ string_value: "{behaviour}" }} }}
{extra}
'''
    return _write(repo / name, config, "model.py", MODEL_PY)


def seconds(value):
    """Target.inputs: every request's INPUT0 filled with ``value(seed)``: the seconds the model sleeps."""
    return lambda batch, seed=0: {"INPUT0": np.full((batch, 4), value(seed), dtype=np.float32)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return tmp_path_factory.mktemp("fields-repo")


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        yield server


def check(server, directory, name, inputs=None, **target):
    result = run_check(Target(server, directory, inputs, **target), name)
    assert "\n" not in result.reason, result.reason  # a one-line reason
    return result


# --------------------------------------------------------------------------------------------------------- decoupled
def stream_inputs(batch, seed=0):
    """stream_n's request: COUNT = seed % 3 responses (seed 0: none, only the final flag)."""
    return {"COUNT": np.full((batch, 1), seed % 3, dtype=np.int32),
            "DATA": np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)}


def stream_model(repo: Path, name: str, code: str = DECOUPLED_MODEL) -> Path:
    return _write(repo / name, DECOUPLED_CONFIG.format(name=name), "model.py", code)


def test_decoupled_passes_a_stream_with_one_final_flag_per_request(repo, server):
    directory = stream_model(repo, "stream_sound")
    server.load(directory)
    result = check(server, directory, "decoupled", stream_inputs)
    assert result.verdict == "pass", result.line()
    assert result.evidence["final_flags"] == [1] * decoupled.REQUESTS
    assert result.evidence["responses_with_outputs"] == [i % 3 for i in range(decoupled.REQUESTS)]
    assert result.evidence["requests_without_output_responses"] == 3  # seeds 0, 3, 6: the final flag alone


def test_decoupled_catches_a_stream_that_never_ends_in_bounded_time(repo, server, monkeypatch):
    late = DECOUPLED_MODEL.replace("            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)",
                                   "            __import__('threading').Timer(3.0, sender.send, kwargs={'flags': "
                                   "pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL}).start()")
    assert late != DECOUPLED_MODEL
    directory = stream_model(repo, "stream_late_final", late)
    server.load(directory)
    monkeypatch.setattr(decoupled, "IDLE_S", 1.0)
    result = check(server, directory, "decoupled", stream_inputs)
    assert result.verdict == "fail"
    assert result.reason == (f"{decoupled.REQUESTS} of {decoupled.REQUESTS} requests got no final flag (conformance-0: "
                             f"no message for 1 s after 0 response(s))"), result.reason
    assert result.evidence["seconds"] < 3.0


def test_decoupled_catches_responses_without_the_declared_outputs(repo, server):
    code = DECOUPLED_MODEL.replace(",\n                    pb_utils.Tensor(\"INDEX\", np.full((data.shape[0], 1), i, "
                                   "dtype=np.int32))", "")
    assert code != DECOUPLED_MODEL
    directory = stream_model(repo, "stream_no_index", code)
    server.load(directory)
    result = check(server, directory, "decoupled", stream_inputs)
    assert result.verdict == "fail"
    assert "response(s) without the declared outputs ['INDEX', 'OUT']" in result.reason, result.reason
    assert "carried ['OUT']" in result.reason


def test_decoupled_catches_a_model_served_as_not_decoupled(repo, server, monkeypatch):
    """One response per request, the final flag sent with it, which a model served as not decoupled may send: the
    stream looks the same, the served configuration tells. (A response and then a final flag alone, as the sound
    model sends them, crashed r24.10's tritonserver in TRITONBACKEND_ResponseFactorySendFlags once in CI when the
    model is not decoupled.)"""
    one_shot = DECOUPLED_MODEL.replace("""                time.sleep(0.001)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)""", """                time.sleep(0.001)""")
    one_shot = one_shot.replace("""dtype=np.int32))]))""", """dtype=np.int32))]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if i == count - 1 else 0)""")
    assert one_shot.count("COMPLETE_FINAL") == 1, one_shot
    directory = stream_model(repo, "stream_not_decoupled", one_shot)
    load_with(server, directory, model_transaction_policy={"decoupled": False})
    one_each = lambda batch, seed=0: {**stream_inputs(batch, seed), "COUNT": np.ones((batch, 1), dtype=np.int32)}
    monkeypatch.setattr(decoupled, "IDLE_S", 1.0)
    result = check(server, directory, "decoupled", one_each)
    assert result.verdict == "fail"
    assert result.reason.startswith("the server serves model_transaction_policy.decoupled false"), result.reason
    assert result.evidence["served_decoupled"] is False
    # each request's one response reaches the stream carrying its final flag: the stream alone cannot tell
    assert result.evidence["responses_with_outputs"] == [1] * decoupled.REQUESTS
    assert result.evidence["final_flags"] == [1] * decoupled.REQUESTS


def test_decoupled_is_skipped_for_a_model_that_is_not(repo, server):
    directory = model(repo, "not_a_stream")
    server.load(directory)
    result = check(server, directory, "decoupled", seconds(lambda s: 0.0))
    assert result.verdict == "skipped" and result.reason.startswith("not decoupled: one response per request")


# ---------------------------------------------------------------------------------------------------------- ordering
ORDERED = "dynamic_batching { preserve_ordering: true }"
VARYING = seconds(lambda seed: 0.12 if seed % 3 == 0 else 0.01)  # every third request 120 ms, the others 10 ms


def test_ordering_passes_responses_held_in_order_and_catches_them_reordered(repo, server):
    sound = model(repo, "ordered", instances=3, extra=ORDERED)
    server.load(sound)
    passed = check(server, sound, "ordering", VARYING)
    assert passed.verdict == "pass", passed.line()
    assert passed.evidence["contested_pairs"] > 0 and passed.evidence["overlap"] > 1.2
    broken = model(repo, "unordered", instances=3, extra=ORDERED)
    load_with(server, broken, dynamic_batching={})  # served without preserve_ordering
    result = check(server, broken, "ordering", VARYING)
    assert result.verdict == "fail"
    assert "dynamic_batching.preserve_ordering true, but" in result.reason
    assert "contested request pairs came back in the other order (request" in result.reason, result.reason
    assert [r["reversed_pairs"] > 0 for r in result.evidence["rounds"]] == [True, True]  # sent twice: both reordered


def test_ordering_is_inconclusive_where_one_instance_runs_equal_executions(repo, server):
    directory = model(repo, "ordered_one", extra=ORDERED)
    server.load(directory)
    result = check(server, directory, "ordering", seconds(lambda seed: 0.03))
    assert result.verdict == "skipped", result.line()
    assert result.reason.startswith("inconclusive: executions never overlapped"), result.reason


def test_ordering_is_skipped_where_not_declared(repo, server):
    directory = model(repo, "batched_any_order", extra="dynamic_batching { }")
    server.load(directory)
    result = check(server, directory, "ordering", seconds(lambda seed: 0.0))
    assert result.verdict == "skipped" and "not declared" in result.reason


def test_ordering_of_the_oldest_sequence_strategy_is_skipped_with_why(repo, server):
    directory = model(repo, "oldest_ordered", extra="sequence_batching { oldest { max_candidate_sequences: 4 "
                                                    "preserve_ordering: true } }")
    server.load(directory)
    result = check(server, directory, "ordering", seconds(lambda seed: 0.0))
    assert result.verdict == "skipped" and "within each instance's batcher only" in result.reason, result.line()


# ------------------------------------------------------------------------------------------------------------ ragged
BATCHER = "dynamic_batching { max_queue_delay_microseconds: 5000 }"
WORK = seconds(lambda seed: 0.02)


def test_ragged_batches_shapes_together_only_where_allowed(repo, server):
    sound = model(repo, "ragged", dims="-1", ragged=True, extra=BATCHER)
    server.load(sound)
    passed = check(server, sound, "ragged", WORK)
    assert passed.verdict == "pass", passed.line()
    assert max(passed.evidence["batch_stats"]) > 1
    broken = model(repo, "ragged_served_without", dims="-1", ragged=True, extra=BATCHER)
    load_with(server, broken, input=[{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}])
    result = check(server, broken, "ragged", WORK)
    assert result.verdict == "fail"
    assert "allow_ragged_batch declared on ['INPUT0'], but every one of" in result.reason, result.reason
    assert "executions held one request while" in result.reason, result.reason
    assert set(result.evidence["batch_stats"]) == {1}


def test_ragged_default_keeps_shapes_apart_and_catches_a_batcher_that_mixes_them(repo, server):
    apart = model(repo, "not_ragged", dims="-1", extra=BATCHER)
    server.load(apart)
    passed = check(server, apart, "ragged", WORK)
    assert passed.verdict == "pass", passed.line()
    assert set(passed.evidence["batch_stats"]) == {1}
    mixing = model(repo, "ragged_undeclared", dims="-1", extra=BATCHER)
    load_with(server, mixing, input=[{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1],
                                      "allow_ragged_batch": True}])  # served with what it does not declare
    result = check(server, mixing, "ragged", WORK)
    assert result.verdict == "fail"
    assert "no allow_ragged_batch on ['INPUT0'], but" in result.reason, result.reason
    assert "execution(s) held requests of different shapes (batch sizes" in result.reason, result.reason


def test_ragged_is_skipped_without_a_variable_dim(repo, server):
    directory = model(repo, "fixed_dims", extra=BATCHER)
    server.load(directory)
    result = check(server, directory, "ragged", WORK)
    assert result.verdict == "skipped" and "no input has a variable dim" in result.reason


# ------------------------------------------------------------------------------------------------------------ warmup
WARMUP = ('model_warmup [{ name: "zeros" batch_size: 1 count: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 '
          'dims: [4] zero_data: true } } }]')


def test_warmup_makes_the_first_request_fast_and_its_absence_is_caught(repo, server):
    sound = model(repo, "warmed", "first_slow", extra=WARMUP)
    server.load(sound)
    passed = check(server, sound, "warmup", WORK)
    assert passed.verdict == "pass", passed.line()
    assert passed.declared.startswith("model_warmup zeros (batch 1, count 1, inputs ['INPUT0']): "), passed.declared
    assert passed.evidence["rounds"][0]["warmup_in_statistics"]["executions"] == 1  # r24.10 counts the warm-up
    assert server.model_config("warmed").get("model_warmup")  # restored as served
    broken = model(repo, "cold", "first_slow", extra=WARMUP)
    load_with(server, broken, model_warmup=None)  # served without its warm-up
    result = check(server, broken, "warmup", WORK)
    assert result.verdict == "fail"
    assert "model_warmup declared, but the first request after each of 2 loads took" in result.reason, result.reason
    assert "(the server serves no model_warmup)" in result.reason
    assert all(r["first_ms"] >= 250 for r in result.evidence["rounds"])
    assert not server.model_config("cold").get("parameters", {}).get("tritonsuite_conformance_warmup")


def test_a_warm_up_served_but_missing_the_requests_path_is_caught(repo, server):
    """Served with its model_warmup, whose zeros do not warm what requests with data use: the first request after
    each load is still slow, and the reason does not blame a missing warm-up."""
    missed = model(repo, "warmed_wrong", "first_slow_data", extra=WARMUP)
    server.load(missed)
    result = check(server, missed, "warmup", WORK)
    assert result.verdict == "fail", result.line()
    assert result.reason.startswith("model_warmup declared, but the first request after each of 2 loads took "), \
        result.reason
    assert "the server serves no model_warmup" not in result.reason and result.evidence["served_model_warmup"]


def test_warmup_is_skipped_where_not_declared_or_not_ours_to_reload(repo, server):
    plain = model(repo, "no_warmup")
    server.load(plain)
    assert check(server, plain, "warmup", WORK).reason.startswith("no model_warmup declared")
    declared = model(repo, "warmed_remote", "first_slow", extra=WARMUP)
    server.load(declared)
    result = check(RemoteServer(server.http_url), declared, "warmup", WORK)
    assert result.verdict == "skipped" and "--allow-reload" in result.reason
