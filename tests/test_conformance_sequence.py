"""The ``sequence`` and ``state`` checks (tritonsuite.judge.conformance.sequence, .state) on the real embedded server:
each passes a sound sequence model and fails one served otherwise than its config.pbtxt declares (a longer or shorter
idle time, fewer or more slots, no control inputs, no sequence batcher) or whose model does not keep state as declared
(ignores it, or keeps one state for every sequence). Python-backend models written here.

r24.10's python backend reads an implicit state input (the server fills it with ``initial_state``) but never stores
the state output (it does not call TRITONBACKEND_StateNew/StateUpdate): a python model's output state is dropped
(:func:`test_the_python_backend_drops_the_output_state`). The sound state model therefore keeps, per correlation id,
what the core would carry; from outside it behaves as implicit state does."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.kinds import _write
from tests.test_conformance_checks import load_with, python_model, sixteen
from tests.test_conformance_kinds import check
from tritonsuite.deploy.repository import config_of
from tritonsuite.judge.conformance import Target
from tritonsuite.judge.conformance.sequence import NO_CORRID
from tritonsuite.server import EmbeddedServer

SEQUENCE_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils

CONTROLS = ("START", "END", "READY", "CORRID")


class TritonPythonModel:
    """OUTPUT = running sum of INPUT over the sequence (kept by CORRID, reset at START). A control input missing
    from the request is answered with an error naming it (the served configuration does not declare it)."""

    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            got = {n: pb_utils.get_input_tensor_by_name(request, n) for n in CONTROLS}
            missing = [n for n, t in got.items() if t is None]
            if missing:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"control input {missing[0]} not given by the server")))
                continue
            start, end, corrid = (int(got[n].as_numpy().reshape(-1)[0]) for n in ("START", "END", "CORRID"))
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().astype(np.int64)
            total = (0 if start else self.sums.get(corrid, 0)) + x
            self.sums[corrid] = total
            if end:
                self.sums.pop(corrid, None)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", total.astype(np.int32))]))
        return responses
'''

SEQUENCE_CONFIG = '''
name: "{name}"
backend: "python"
max_batch_size: 2
input [{{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }}]
output [{{ name: "OUTPUT" data_type: TYPE_INT32 dims: [1] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
sequence_batching {{
  max_sequence_idle_microseconds: 200000
  {strategy}
  control_input [
    {{ name: "START" control [{{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }}] }},
    {{ name: "END" control [{{ kind: CONTROL_SEQUENCE_END fp32_false_true: [0, 1] }}] }},
    {{ name: "READY" control [{{ kind: CONTROL_SEQUENCE_READY bool_false_true: [false, true] }}] }},
    {{ name: "CORRID" control [{{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }}] }}
  ]
}}
'''

# behaviour "sound": the state carried per sequence (what the core does with implicit state), its start the served
# initial state; "ignores": every request computed from the initial state (the state input as served); "leak": one
# state for every sequence, never reset; "implicit": only the state input and output (what a backend with implicit
# state support needs; r24.10's python backend drops the output)
STATE_MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.behaviour = config["parameters"]["behaviour"]["string_value"]
        self.kept = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().astype(np.int64)
            given = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE")  # absent: served without the state
            served = given.as_numpy().astype(np.int64) if given is not None else np.zeros_like(x)
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0])
            key = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0])
            if self.behaviour == "sound":
                state = served if start else self.kept.get(key, served)  # CORRID 0: an empty slot's null request
            elif self.behaviour == "leak":
                key, state = 0, self.kept.get(0, served)
            elif self.behaviour == "ignores":
                state = np.zeros_like(x)
            else:
                state = served
            new = state * 3 + x
            self.kept[key] = new
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", new.astype(np.int32)),
                                                         pb_utils.Tensor("OUTPUT_STATE", new.astype(np.int32))]))
        return responses
'''

STATE_CONFIG = '''
name: "{name}"
backend: "python"
max_batch_size: 2
input [{{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }}]
output [{{ name: "OUTPUT" data_type: TYPE_INT32 dims: [1] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
parameters {{ key: "behaviour" value {{ string_value: "{behaviour}" }} }}
sequence_batching {{
  max_sequence_idle_microseconds: 200000
  control_input [
    {{ name: "START" control [{{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }}] }},
    {{ name: "CORRID" control [{{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }}] }}
  ]
  state [{{ input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_INT32 dims: [1]
            initial_state {{ data_type: TYPE_INT32 dims: [1] zero_data: true name: "zero" }} }}]
}}
'''


INPUT = {"name": "INPUT", "data_type": "TYPE_INT32", "dims": [1]}
#: the control inputs of SEQUENCE_CONFIG as JSON (START first)
CONTROLS = [{"name": n, "control": [{"kind": f"CONTROL_SEQUENCE_{k}", **v}]} for n, k, v in (
    ("START", "START", {"int32_false_true": [0, 1]}), ("END", "END", {"fp32_false_true": [0, 1]}),
    ("READY", "READY", {"bool_false_true": [False, True]}), ("CORRID", "CORRID", {"data_type": "TYPE_UINT64"}))]


def sequence_model(repo: Path, name: str, oldest: bool = False) -> Path:
    """Slots: direct 2 (max_batch_size 2 x 1 instance), oldest 3 (max_candidate_sequences 3 x 1)."""
    strategy = ("oldest { max_candidate_sequences: 3 preferred_batch_size: [2] max_queue_delay_microseconds: 500 }"
                if oldest else "direct { }")
    return _write(repo / name, SEQUENCE_CONFIG.format(name=name, strategy=strategy), "model.py", SEQUENCE_MODEL)


def state_model(repo: Path, name: str, behaviour: str = "sound") -> Path:
    return _write(repo / name, STATE_CONFIG.format(name=name, behaviour=behaviour), "model.py", STATE_MODEL)


def served_with(server, directory: Path, **changes) -> Path:
    """Load ``directory`` with its sequence_batching's ``max_sequence_idle_microseconds`` or ``control_input``
    changed (None: removed), ``sequence_batching`` None (removed), or other top-level fields overridden."""
    config = config_of(directory)
    sb = dict(config["sequence_batching"])
    for key in ("max_sequence_idle_microseconds", "control_input"):
        if key in changes:
            sb[key] = changes.pop(key)
    config.update(changes, sequence_batching={k: v for k, v in sb.items() if v is not None})
    if "sequence_batching" in changes:
        config["sequence_batching"] = changes["sequence_batching"]
    load_with(server, directory, **config)
    return directory


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return tmp_path_factory.mktemp("sequence-conformance")


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        yield server


# ------------------------------------------------------------------------------------------------- sequence check
@pytest.mark.parametrize("oldest", [False, True], ids=["direct", "oldest"])
def test_a_sound_sequence_model_passes(server, repo, oldest):
    directory = sequence_model(repo, f"seq_{'oldest' if oldest else 'direct'}", oldest)
    server.load(directory)
    result = check(server, directory, "sequence")
    assert result.verdict == "pass", result.line()
    slots = 3 if oldest else 2
    backlog = result.evidence["backlog"]
    assert backlog["live_at_once"] == slots and backlog["waited"] == 2 == backlog["answered_after_an_end"]
    assert all(NO_CORRID in result.evidence["refusals"][k] for k in ("no correlation id",
                                                                     "no correlation id, START+END"))
    assert all("START flag" in e for e in result.evidence["idle"]["released"])
    assert f"{slots} slots" in result.declared and "max_sequence_idle_microseconds 200000" in result.declared
    assert result.declared.endswith("controls START, END, READY, CORRID"), result.declared


@pytest.mark.parametrize("stalls", [1, 3])
def test_a_live_sequence_released_after_a_stall_sends_the_backlog_again(server, repo, monkeypatch, stalls):
    """On CI's busy host the client once paused longer than the model's 0.2 s idle time: the server rightly released
    a live sequence, a waiting one took its slot, and the check failed this sound model ("4 of 4 sequences were live
    at once ..."). Here one live sequence's client pauses 0.6 s before its third request, in the first ``stalls``
    tries: the part is sent again, and judged once a try is not stalled, or says it was not judged."""
    import asyncio

    from tritonsuite.judge.conformance import sequence_backlog

    real, tries = sequence_backlog.send_backlog, []

    async def stalling(wire, declared):
        tries.append(declared)
        if len(tries) > stalls:
            return await real(wire, declared)
        send, sent, paused = wire.send, {}, []

        async def pausing(conn, sid, start, end):
            sent[sid] = sent.get(sid, 0) + 1
            if sent[sid] == 3 and not paused:  # START, one request, then the pause: a live sequence's
                paused.append(sid)
                await asyncio.sleep(0.6)
            return await send(conn, sid, start, end)

        wire.send = pausing
        try:
            return await real(wire, declared)
        finally:
            del wire.send

    monkeypatch.setattr(sequence_backlog, "send_backlog", stalling)
    directory = sequence_model(repo, "seq_stalled")
    server.load(directory)
    result = check(server, directory, "sequence")
    assert result.verdict == "pass", result.line()
    backlog = result.evidence["backlog"]
    assert backlog["tries"] == len(tries) == min(stalls + 1, 3)
    if stalls == 1:
        assert backlog["live_at_once"] == 2 and not backlog["released"] and "not judged" not in result.reason
    else:
        assert backlog["released"][0]["span_s"] > 0.6 and "backlog not judged in 3 tries" in result.observed
        assert result.reason.startswith("backlog not judged: in each of 3 tries 1 live sequence(s) released after "
                                        "0.6"), result.reason
        assert result.reason.endswith("over max_sequence_idle_microseconds 200000 (the host stalled)")


def test_an_instance_group_without_a_count_is_judged_as_triton_serves_it(server, repo):
    """An ONNX sequence model with START/READY controls and ``instance_group [{ kind: KIND_CPU }]``, as outside
    generators write it: Triton runs two instances of an onnxruntime model there (its default count for KIND_CPU;
    a python model gets one), so 2 x 4 slots are served as configured. The check counted one instance from the
    file and failed this sound deployment ("6 of 6 sequences were live at once (declared 4 slots")."""
    from tests.corpus import _sequence

    _sequence(repo, "int32", "direct", "onnx")
    directory = repo / "seq_onnx_int32_direct"
    config = directory / "config.pbtxt"
    config.write_text(config.read_text().replace("{ kind: KIND_CPU count: 1 }", "{ kind: KIND_CPU }"))
    server.load(directory)
    assert server.model_description(directory.name).instance_count == 2  # what Triton 2.51 runs here
    result = check(server, directory, "sequence")
    assert result.verdict == "pass", result.line()
    assert result.evidence["backlog"]["live_at_once"] == 8 and "8 slots" in result.declared


@pytest.mark.parametrize("served, words", [
    ({"max_sequence_idle_microseconds": 10_000_000}, "max_sequence_idle_microseconds 200000: 2/2 sequences idle 0.4 "
                                                     "s were not released (answered)"),
    ({"max_sequence_idle_microseconds": 20_000}, "sequences sending every 0.05 s were cut ("),
    ({"max_batch_size": 1}, "1 of 4 sequences were live at once (declared 2 "
                            "slots: max_batch_size/max_candidate_sequences x instances); fewer slots than declared"),
    ({"instance_group": [{"kind": "KIND_CPU", "count": 2}]}, "4 of 4 sequences were live at once (declared 2 "
     "slots: max_batch_size/max_candidate_sequences x instances); no backlog: the server has more slots"),
    ({"control_input": None}, "the START "
                              "request of a whole sequence failed (the control inputs the server fills reach the model):"
                              " inference request failed with HTTP 500: control input START not given"),
    ({"control_input": CONTROLS[1:], "input": [INPUT, {**INPUT, "name": "START", "optional": True}]},
     "control input START (CONTROL_SEQUENCE_START"
     ") sent as a client tensor was answered: the served configuration takes it from the client, not from the sequence batcher"),
    ({"sequence_batching": None}, "no correlation id: refused with another error"),
], ids=["idle-longer", "idle-shorter", "fewer-slots", "more-slots", "no-controls", "start-from-client",
        "no-sequence-batcher"])
def test_a_sequence_model_served_otherwise_fails(server, repo, served, words):
    directory = sequence_model(repo, f"seq_broken_{len(list(repo.iterdir()))}")
    served_with(server, directory, **served)
    result = check(server, directory, "sequence")
    assert result.verdict == "fail" and words in result.reason, result.line()


def test_a_sequence_batcher_without_control_inputs_is_judged_and_says_so(server, repo):
    """A stateless model put behind a sequence batcher only for routing (no control_input): the slots, the backlog
    and the idle release are judged as for any sequence model; the declaration says it has no controls."""
    directory = python_model(repo, "seq_no_controls", "echo", max_batch_size=2, extra=(
        "sequence_batching { max_sequence_idle_microseconds: 200000 direct { } }"))
    server.load(directory)
    result = check(server, directory, "sequence", inputs=sixteen)
    assert result.verdict == "pass", result.line()
    assert result.declared.endswith("controls none"), result.declared
    assert result.evidence["declared_controls"] == [] and result.evidence["backlog"]["live_at_once"] == 2


def test_the_idle_part_waits_no_longer_than_its_bound(server, repo):
    from tritonsuite.judge.conformance.sequence import check_sequence

    directory = sequence_model(repo, "seq_long_idle")
    server.load(directory)
    result = check_sequence(Target(server, directory), idle_bound_s=0.1)
    assert result.verdict == "pass" and "idle release not shown (declared 0.2 s > bound 0.1 s)" in result.observed


def test_checks_of_sequences_skip_other_deployments(server, repo):
    plain = python_model(repo, "plain_echo", "echo")
    server.load(plain)
    for name in ("sequence", "state"):
        result = check(server, plain, name, inputs=sixteen)
        assert result.verdict == "skipped" and "no sequence_batching declared" in result.reason, result.line()


# ---------------------------------------------------------------------------------------------------- state check
def test_a_sound_state_model_passes_and_a_sequence_model_without_state_skips(server, repo):
    directory = state_model(repo, "state_sound")
    server.load(directory)
    result = check(server, directory, "state")
    assert result.verdict == "pass", result.line()
    assert result.evidence["repeat_answers"][0] == result.evidence["repeat_answers"][1]
    assert "refused" in result.observed and result.evidence["state_sent_by_client"] != "answered"
    plain = sequence_model(repo, "seq_no_state")
    server.load(plain)
    stateless = check(server, plain, "state")
    assert stateless.verdict == "skipped" and "no sequence_batching.state declared" in stateless.reason


@pytest.mark.parametrize("behaviour, words", [
    ("ignores", "3/3 "
                "pairs of sequences answered their second request identically after different first requests: the state the first left did not reach it"),
    ("leak", "the same sequence sent again after 14 others answered differently ("),
])
def test_a_model_that_does_not_keep_state_as_declared_fails(server, repo, behaviour, words):
    directory = state_model(repo, f"state_{behaviour}", behaviour)
    server.load(directory)
    result = check(server, directory, "state")
    assert result.verdict == "fail" and words in result.reason, result.line()
    if behaviour == "leak":
        assert "state leaked across sequences" in result.reason
        assert "sequences interleaved answered otherwise than alone (" in result.reason


def test_the_python_backend_drops_the_output_state(server, repo):
    """A model written for implicit state alone (state in, state out) carries nothing on r24.10's python backend."""
    directory = state_model(repo, "state_implicit", "implicit")
    server.load(directory)
    result = check(server, directory, "state")
    words = "pairs of sequences answered their second request identically after different first requests: the state the first left did not reach it"
    assert result.verdict == "fail" and words in result.reason, result.line()


def test_a_state_model_served_with_its_state_as_a_client_input_fails(server, repo):
    """Served with the state input an (optional) ordinary input instead of implicit state: a client can set it."""
    directory = state_model(repo, "state_from_client")
    config = config_of(directory)
    state = config["sequence_batching"].pop("state")[0]
    load_with(server, directory, **{**config, "input": config["input"] + [
        {"name": "INPUT_STATE", "data_type": state["data_type"], "dims": state["dims"], "optional": True}]})
    result = check(server, directory, "state")
    assert result.verdict == "fail" and result.reason == (
        "state input INPUT_STATE sent as a client tensor was answered: the served configuration takes it from the client"), result.line()
