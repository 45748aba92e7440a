"""One description of every kind of deployment (tritonsuite.core.description), from config.pbtxt files and from a
server's JSON."""
from __future__ import annotations

import pytest

from tritonsuite.core.description import DescriptionError, VersionPolicy, describe
from tritonsuite.deploy.repository import describe_deployment

PREPROCESS = """
name: "preprocess"
backend: "python"
max_batch_size: 8
input [{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }]
output [{ name: "IDS", data_type: TYPE_INT64, dims: [ -1 ] }]
"""
CLASSIFIER = """
name: "classifier"
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { specific: { versions: [ 1, 3 ] } }
input [{ name: "input_ids", data_type: TYPE_INT64, dims: [ -1 ] }]
output [{ name: "logits", data_type: TYPE_FP32, dims: [ 2 ] }]
instance_group [{ kind: KIND_CPU, count: 2 }]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 500 }
response_cache { enable: true }
"""
INNER = """
name: "inner"
platform: "ensemble"
max_batch_size: 8
input [{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }]
output [{ name: "IDS", data_type: TYPE_INT64, dims: [ -1 ] }]
ensemble_scheduling { step [{ model_name: "preprocess", model_version: -1,
  input_map { key: "TEXT" value: "TEXT" } output_map { key: "IDS" value: "IDS" } }] }
"""
OUTER = """
platform: "ensemble"
max_batch_size: 8
input [{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }]
output [{ name: "LOGITS", data_type: TYPE_FP32, dims: [ 2 ] }]
ensemble_scheduling { step [
  { model_name: "inner", model_version: -1, input_map { key: "TEXT" value: "TEXT" } output_map { key: "IDS" value: "ids" } },
  { model_name: "classifier", model_version: 3, input_map { key: "input_ids" value: "ids" }
    output_map { key: "logits" value: "LOGITS" } } ] }
"""
STATEFUL = """
name: "stateful"
backend: "python"
max_batch_size: 4
model_transaction_policy { decoupled: true }
input [{ name: "INPUT", data_type: TYPE_BF16, dims: [ 3 ] }]
output [{ name: "OUTPUT", data_type: TYPE_BOOL, dims: [ 3 ] }]
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 }
  control_input [
    { name: "START", control [{ kind: CONTROL_SEQUENCE_START, int32_false_true: [ 0, 1 ] }] },
    { name: "CORRID", control [{ kind: CONTROL_SEQUENCE_CORRID, data_type: TYPE_UINT64 }] } ]
  state [{ input_name: "STATE_IN", output_name: "STATE_OUT", data_type: TYPE_FP32, dims: [ 3 ] }]
}
"""


def _repository(tmp_path, **configs):
    for name, text in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.pbtxt").write_text(text)
    return tmp_path


def test_a_nested_ensemble_resolves_its_steps_and_composing_models(tmp_path):
    repo = _repository(tmp_path, preprocess=PREPROCESS, classifier=CLASSIFIER, inner=INNER, outer=OUTER)
    outer = describe_deployment(repo / "outer")
    assert outer.name == "outer" and outer.ensemble and outer.kinds == ("ensemble",)
    assert [(s.model, s.version) for s in outer.steps] == [("inner", -1), ("classifier", 3)]
    assert outer.steps[1].input_map == {"input_ids": "ids"}
    assert [m.name for m in outer.composing] == ["inner", "classifier"]
    assert [m.name for m in outer.all_composing()] == ["inner", "preprocess", "classifier"]
    assert outer.inputs[0].dtype == "bytes" and outer.inputs[0].triton_dtype == "BYTES"
    classifier = outer.composing[1]
    assert classifier.backend == "onnxruntime" and classifier.instance_count == 2 and classifier.response_cache
    assert classifier.dynamic_batching.preferred_batch_sizes == (4, 8)
    assert classifier.dynamic_batching.max_queue_delay_microseconds == 500
    assert classifier.version_policy.served([1, 2, 3, 4]) == (1, 3)


def test_a_missing_step_or_a_cycle_is_one_line(tmp_path):
    repo = _repository(tmp_path, inner=INNER, loop=OUTER.replace('"classifier"', '"loop"'))
    with pytest.raises(DescriptionError, match="composing model 'preprocess' is not in the repository"):
        describe_deployment(repo / "inner")
    (repo / "preprocess").mkdir()
    (repo / "preprocess" / "config.pbtxt").write_text(PREPROCESS)
    with pytest.raises(DescriptionError, match=r"a cycle: loop"):
        describe_deployment(repo / "loop")


def test_sequence_decoupled_and_python_kinds(tmp_path):
    found = describe_deployment(_repository(tmp_path, stateful=STATEFUL) / "stateful")
    assert found.sequence and found.decoupled and found.python
    assert found.kinds == ("sequence (oldest)", "python", "decoupled")
    seq = found.sequence_batching
    assert seq.strategy == "oldest" and seq.max_sequence_idle_microseconds == 5_000_000
    assert [(c.name, c.kind, c.datatype) for c in seq.controls] == [
        ("START", "CONTROL_SEQUENCE_START", "INT32"), ("CORRID", "CONTROL_SEQUENCE_CORRID", "UINT64")]
    assert seq.states == (("STATE_IN", "STATE_OUT"),)
    assert found.inputs[0].dtype == "bfloat16" and found.outputs[0].dtype == "bool"


def test_a_sequence_batcher_s_slots_are_counted_as_triton_s_scheduler_counts_them(tmp_path):
    """Per instance: oldest's max_candidate_sequences, else max_batch_size (at least 1); none without a batcher."""
    two = STATEFUL.replace("sequence_batching {", "instance_group [{ kind: KIND_CPU count: 2 }]\nsequence_batching {")
    no_candidates = two.replace("oldest { max_candidate_sequences: 4 }", "oldest { }")
    direct = two.replace("oldest { max_candidate_sequences: 4 }", "direct { }")
    repo = _repository(tmp_path, stateful=STATEFUL, two=two, no_candidates=no_candidates,
                       direct=direct.replace("max_batch_size: 4", "max_batch_size: 3"),
                       batchless=direct.replace("max_batch_size: 4", "max_batch_size: 0"), preprocess=PREPROCESS)
    found = {name: describe_deployment(repo / name) for name in
             ("stateful", "two", "no_candidates", "direct", "batchless", "preprocess")}
    assert found["stateful"].sequence_batching.max_candidate_sequences == 4
    assert found["stateful"].sequence_slots == 4 * found["stateful"].instance_count
    assert found["no_candidates"].sequence_batching.max_candidate_sequences == 0
    assert {name: d.sequence_slots for name, d in found.items()} == {
        "stateful": 4, "two": 8, "no_candidates": 8, "direct": 6, "batchless": 2, "preprocess": 0}


def test_a_bls_model_names_its_composing_models_from_the_user(tmp_path):
    repo = _repository(tmp_path, preprocess=PREPROCESS, classifier=CLASSIFIER)
    bls = describe_deployment(repo / "preprocess", composing=("classifier",))
    assert bls.kinds == ("BLS",) and [m.name for m in bls.composing] == ["classifier"]


def test_a_servers_json_reads_as_the_file_does():
    """/v2/models/<m>/config as the server sends it: numbers as numbers, defaults filled in."""
    served = {"name": "m", "platform": "onnxruntime_onnx", "backend": "onnxruntime", "max_batch_size": 0,
              "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [2, -1]}],
              "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [2]}],
              "version_policy": {"latest": {"num_versions": 2}},
              "instance_group": [{"name": "m", "kind": "KIND_CPU", "count": 1, "gpus": []}]}
    found = describe(served)
    assert not found.batching and found.kinds == ("batchless",) and found.scheduler == "none"
    assert found.inputs[0].shape == (2, -1)
    assert found.version_policy == VersionPolicy("latest", (2,)) and found.version_policy.served([1, 2, 3]) == (2, 3)
    assert VersionPolicy("all").served([3, 1]) == (1, 3) and VersionPolicy("latest", (1,)).served([]) == ()


def test_an_unknown_data_type_names_the_choices():
    with pytest.raises(DescriptionError, match="tensor 'x' has data type INVALID; valid choices: BOOL"):
        describe({"name": "m", "input": [{"name": "x"}]})


def _served(groups: list[dict], **config) -> dict:
    """/v2/models/<m>/config of the model ``m`` as Triton 2.51 completes it on a CPU host."""
    return {"name": "m", "backend": "python", "max_batch_size": 8,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [4]}], "instance_group": groups, **config}


@pytest.mark.parametrize("written, instances", [
    ([], 2),  # no instance group: Triton's default, two KIND_CPU instances here
    ([{"kind": "KIND_CPU"}], 2),  # a group without a count
    ([{"kind": "KIND_CPU", "count": 3}], 3),  # a count the file states is kept, whatever the server runs
])
def test_a_files_silence_on_instances_reads_as_triton_serves_it(written, instances):
    from tritonsuite.core.description import as_served

    declared = describe({**_served(written), "instance_group": written})
    served = describe(_served([{"name": "m_0", "kind": "KIND_CPU", "count": 2, "gpus": []}]))
    assert declared.instance_count == (3 if written and "count" in written[0] else 1)  # the file alone
    found = as_served(declared, served)
    assert found.instance_count == instances
    assert found.config == declared.config  # what the file declares stays what a check holds the server to


def test_a_gpu_group_counts_its_instances_per_listed_gpu():
    """count is per GPU: {count: 2, gpus: [0, 1]} is four instances (the served configuration lists the GPUs)."""
    from tritonsuite.core.description import as_served

    declared = describe({**_served([]), "instance_group": [{"kind": "KIND_GPU", "count": 2}]})
    served = describe(_served([{"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [0, 1]}]))
    assert declared.instance_count == 2 and as_served(declared, served).instance_count == 4


def test_a_composing_models_silence_is_filled_from_the_server_too(tmp_path):
    from tritonsuite.core.description import as_served

    outer = describe({"name": "e", "platform": "ensemble", "max_batch_size": 8,
                      "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                      "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [4]}],
                      "ensemble_scheduling": {"step": [{"model_name": "m", "model_version": -1,
                                                        "input_map": {"x": "x"}, "output_map": {"y": "y"}}]}},
                     lambda name: {**_served([]), "instance_group": []})
    served = describe({**outer.config}, lambda name: _served([{"kind": "KIND_CPU", "count": 2, "gpus": []}]))
    assert outer.composing[0].instance_count == 1 and as_served(outer, served).composing[0].instance_count == 2
