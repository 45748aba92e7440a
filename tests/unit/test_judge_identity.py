"""The identity check's judging (judge/conformance/identity.py: judge_identity) on observations built to cause each
of its failure reasons: the configuration the server completed, the model's metadata, the version directories on
disk and each READY version's answer. The requests themselves are sent in tests/test_conformance_checks.py."""
from __future__ import annotations

import numpy as np

from tritonsuite.core.description import describe
from tritonsuite.judge.conformance.identity import judge_identity
from tritonsuite.load.exchange import Answer


def config(**override) -> dict:
    return {"name": "m", "backend": "python", "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}]} | override


def metadata(versions=("1",), shape=(-1, 16), name="INPUT0") -> dict:
    return {"name": "m", "versions": list(versions),
            "inputs": [{"name": name, "datatype": "FP32", "shape": list(shape)}]}


def answer(version="1", output=None, ok=True, error="") -> Answer:
    outputs = {"OUTPUT0": np.zeros((1, 16), np.float32) if output is None else output} if ok else None
    return Answer(0.0, 0.001, ok, version=version, error=error, outputs=outputs)


def judge(declared=None, served=None, meta=None, on_disk=(1,), answers=None):
    declared = describe(declared or config())
    return judge_identity("m", declared, describe(served) if served else declared, meta or metadata(),
                          list(on_disk), answers if answers is not None else {1: answer()})


def test_a_deployment_served_as_declared_passes():
    result = judge()
    assert result.verdict == "pass" and result.reason == ""
    assert result.evidence["ready"] == [1] and result.evidence["answers"] == {
        1: "answered by version 1 (1 response(s) with outputs)"}


def test_a_platform_and_the_backend_it_maps_to_are_the_same_thing():
    result = judge(declared=config(backend="onnxruntime"), served=config(backend="onnxruntime",
                                                                        platform="onnxruntime_onnx"))
    assert result.verdict == "pass", result.reason


def test_a_configuration_served_otherwise_fails_naming_each_field():
    result = judge(served=config(max_batch_size=4))
    assert result.verdict == "fail"
    assert result.reason == "max_batch_size: declared 8, served 4"
    result = judge(served=config(backend="onnxruntime"))
    assert result.verdict == "fail" and result.reason == "platform/backend: declared python, served onnxruntime"


def test_metadata_without_a_declared_input_fails():
    result = judge(meta=metadata(name="OTHER"))
    assert result.verdict == "fail" and result.reason == "metadata has no input INPUT0"
    bare = judge(meta={"name": "m", "versions": ["1"]})  # metadata that lists no inputs at all
    assert bare.verdict == "fail" and bare.reason == "metadata has no input INPUT0"


def test_metadata_of_another_shape_fails():
    result = judge(meta=metadata(shape=(-1, 17)))
    assert result.verdict == "fail"
    assert result.reason == "metadata: input INPUT0 shape [-1, 17], declared [-1, 16]"
    result = judge(meta=metadata(shape=(16,)))  # no batch dimension although max_batch_size 8
    assert result.verdict == "fail" and result.reason == "metadata: input INPUT0 shape [16], declared [-1, 16]"


def test_ready_versions_other_than_the_policy_selects_fail():
    result = judge(meta=metadata(versions=("1",)), on_disk=(1, 2, 3))
    assert result.verdict == "fail"
    assert result.reason == ("READY versions [1], but version policy latest {num_versions: 1} selects [3] "
                             "of the version directories [1, 2, 3]")
    every = judge(declared=config(version_policy={"all": {}}), meta=metadata(versions=("1", "2")), on_disk=(1, 2),
                  answers={1: answer("1"), 2: answer("2")})
    assert every.verdict == "pass", every.reason


def test_a_version_that_refuses_the_declared_request_fails():
    result = judge(answers={1: answer(ok=False, error="unexpected shape for input 'INPUT0'")})
    assert result.verdict == "fail"
    assert result.reason == ("version 1 did not answer a request of the declared inputs (refused: unexpected shape "
                             "for input 'INPUT0')")


def test_outputs_unlike_the_declared_ones_fail():
    shape = judge(answers={1: answer(output=np.zeros((1, 17), np.float32))})
    assert shape.verdict == "fail"
    assert shape.reason == "version 1 answered outputs unlike the declared ones: OUTPUT0 [1, 17] float32"
    dtype = judge(answers={1: answer(output=np.zeros((1, 16), np.float64))})
    assert dtype.verdict == "fail"
    assert dtype.reason == "version 1 answered outputs unlike the declared ones: OUTPUT0 [1, 16] float64"
    unbatched = judge(answers={1: answer(output=np.zeros(16, np.float32))})  # no batch dimension
    assert unbatched.verdict == "fail" and "outputs unlike the declared ones: OUTPUT0 [16]" in unbatched.reason
    missing = judge(answers={1: Answer(0.0, 0.001, True, version="1", outputs={"OTHER": np.zeros((1, 16))})})
    assert missing.verdict == "fail"  # a declared output the response lacks is named, not a KeyError
    assert missing.reason == "version 1 answered outputs unlike the declared ones: OUTPUT0 missing"
    dynamic = judge(declared=config(output=[{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]),
                    answers={1: answer(output=np.zeros((1, 5), np.float32))})
    assert dynamic.verdict == "pass", dynamic.reason  # a variable dim fits any size


def test_a_request_answered_by_another_version_fails():
    result = judge(meta=metadata(versions=("2",)), on_disk=(1, 2), answers={2: answer(version="1")})
    assert result.verdict == "fail"
    assert result.reason == "a request for version 2 was answered by version 1"
    unnamed = judge(answers={1: answer(version="")})  # a transport that does not say the version: nothing to judge
    assert unnamed.verdict == "pass" and unnamed.evidence["answers"][1].startswith("answered by version ?")


# ------------------------------------------------------------------- the whole result, as the report receives it
def test_a_sound_deployment_reports_what_was_declared_observed_and_the_whole_evidence():
    result = judge()
    assert (result.deployment, result.check, result.verdict, result.reason) == ("m", "identity", "pass", "")
    assert result.declared == ("python, max_batch_size 8, inputs INPUT0 float32 [16]; outputs OUTPUT0 float32 [16]; "
                               "latest {num_versions: 1} of versions [1] -> [1]")
    assert result.observed == "python, max_batch_size 8; READY [1]; v1 answered by version 1 (1 response(s) with outputs)"
    signature = {"platform/backend": "python", "max_batch_size": "8", "scheduler": "none",
                 "inputs": "INPUT0 float32 [16]", "outputs": "OUTPUT0 float32 [16]"}
    assert result.evidence == {"declared": signature, "served": signature, "versions_on_disk": [1], "selected": [1],
                               "ready": [1], "answers": {1: "answered by version 1 (1 response(s) with outputs)"},
                               "server_platform": "", "server_backend": "python"}


def test_every_fault_is_named_in_order_and_the_evidence_holds_what_the_server_served():
    two = config(input=[{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]},
                        {"name": "INPUT1", "data_type": "TYPE_INT32", "dims": [2, 3]}])
    served = config(max_batch_size=4, dynamic_batching={},
                    output=[{"name": "OUTPUT0", "data_type": "TYPE_FP16", "dims": [16]}])
    meta = {"name": "m", "versions": ["3", "1", "x"], "inputs": [{"name": "INPUT0", "datatype": "FP32",
                                                                 "shape": ["-1", "16"]}]}
    result = judge(declared=two, served=served, meta=meta, on_disk=(1, 3),
                   answers={1: answer(ok=False, error="e" * 300), 3: answer(version="1")})
    assert result.verdict == "fail"
    assert result.reason == (
        "max_batch_size: declared 8, served 4; scheduler: declared none, served dynamic; inputs: declared INPUT0 "
        "float32 [16], INPUT1 int32 [2, 3], served INPUT0 float32 [16]; outputs: declared OUTPUT0 float32 [16], "
        "served OUTPUT0 float16 [16]; metadata has no input INPUT1; READY versions [1, 3], but version policy "
        "latest {num_versions: 1} selects [3] of the version directories [1, 3]; version 1 did not answer a request "
        f"of the declared inputs (refused: {'e' * 200}); a request for version 3 was answered by version 1")
    assert result.evidence["served"] == {"platform/backend": "python", "max_batch_size": "4", "scheduler": "dynamic",
                                         "inputs": "INPUT0 float32 [16]", "outputs": "OUTPUT0 float16 [16]"}
    assert result.evidence["ready"] == [1, 3] and result.evidence["selected"] == [3]
    assert result.evidence["answers"] == {1: f"refused: {'e' * 200}",
                                          3: "answered by version 1 (1 response(s) with outputs)"}
    assert result.observed == (f"python, max_batch_size 4; READY [1, 3]; v1 refused: {'e' * 200}; v3 answered by "
                               f"version 1 (1 response(s) with outputs)")


def test_a_declared_platform_served_as_its_backend_alone_is_the_same_thing_both_ways():
    onnx = config(backend="onnxruntime", platform="onnxruntime_onnx")
    result = judge(declared=onnx, served=config(backend="onnxruntime"))
    assert result.verdict == "pass", result.reason
    assert result.evidence["served"]["platform/backend"] == "onnxruntime_onnx"
    assert (result.evidence["server_platform"], result.evidence["server_backend"]) == ("", "onnxruntime")
    # a platform on both sides is compared as written: another one served is a fault
    other = judge(declared=onnx, served=config(backend="onnxruntime", platform="onnxruntime_other"))
    assert other.reason == "platform/backend: declared onnxruntime_onnx, served onnxruntime_other"


def test_a_batchless_deployment_declares_its_inputs_and_outputs_without_a_batch_dimension():
    batchless = config(max_batch_size=0)
    assert judge(declared=batchless, meta=metadata(shape=(16,)),
                 answers={1: answer(output=np.zeros(16, np.float32))}).verdict == "pass"
    result = judge(declared=batchless, meta=metadata(shape=(-1, 16)),
                   answers={1: answer(output=np.zeros((1, 16), np.float32))})
    assert result.reason == ("metadata: input INPUT0 shape [-1, 16], declared [16]; version 1 answered outputs "
                             "unlike the declared ones: OUTPUT0 [1, 16] float32")


def test_string_and_bfloat16_outputs_are_judged_by_shape_only():
    typed = config(output=[{"name": "OUTPUT0", "data_type": "TYPE_STRING", "dims": [16]}])
    assert judge(declared=typed, answers={1: answer(output=np.zeros((1, 16), object))}).verdict == "pass"
    bf16 = config(output=[{"name": "OUTPUT0", "data_type": "TYPE_BF16", "dims": [16]}])
    assert judge(declared=bf16, answers={1: answer(output=np.zeros((1, 16), np.float32))}).verdict == "pass"
    assert judge(declared=bf16, answers={1: answer(output=np.zeros((1, 15), np.float32))}).reason == (
        "version 1 answered outputs unlike the declared ones: OUTPUT0 [1, 15] float32")


def test_each_response_with_outputs_is_judged_and_counted_an_empty_final_one_is_not():
    good, bad = {"OUTPUT0": np.zeros((1, 16), np.float32)}, {"OUTPUT0": np.zeros((1, 3), np.float32)}
    streamed = Answer(0.0, 0.001, True, version="1", outputs=[good, good, {}])
    result = judge(answers={1: streamed})
    assert result.verdict == "pass"
    assert result.evidence["answers"] == {1: "answered by version 1 (2 response(s) with outputs)"}
    worse = judge(answers={1: Answer(0.0, 0.001, True, version="1", outputs=[good, bad, bad])})
    assert worse.reason == ("version 1 answered outputs unlike the declared ones: OUTPUT0 [1, 3] float32, "
                            "OUTPUT0 [1, 3] float32")


def test_only_the_ready_versions_are_asked_and_a_version_not_ready_is_not_judged():
    # version 2 is on disk and answered (it should not have been asked), but the metadata says only 1 is READY
    result = judge(meta=metadata(versions=("1",)), on_disk=(1,),
                   answers={1: answer(), 2: answer(ok=False, error="not ready")})
    assert result.verdict == "pass" and list(result.evidence["answers"]) == [1]


def test_the_versions_served_and_on_disk_are_the_numbered_ones_in_order(tmp_path):
    from tritonsuite.judge.conformance.identity import fits_dims, _served_versions, _versions_on_disk
    from tritonsuite.judge.conformance.result import Target

    assert _served_versions({"versions": ["10", "2", "x", 1]}) == [1, 2, 10] and _served_versions({}) == []
    directory = tmp_path / "m"
    for name in ("10", "2", "1", "latest"):
        (directory / name).mkdir(parents=True)
    (directory / "3").write_text("a file, not a version")
    (directory / "config.pbtxt").write_text('name: "m" backend: "python" max_batch_size: 8 '
                                            'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [16] }] '
                                            'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [16] }]')
    assert _versions_on_disk(Target(server=None, directory=directory)) == [1, 2, 10]
    assert fits_dims([4, 16], [16], True) and fits_dims([16], [16], False) and fits_dims([2, 7], [-1], True)
    assert not fits_dims([16], [16], True) and not fits_dims([1, 16], [16], False) and not fits_dims([1, 15], [16], True)
    assert not fits_dims([1, 16, 1], [16], True)
    assert fits_dims([1, 0], [0], True) and not fits_dims([1, 5], [0], True)  # a dim of 0 is a size, not a variable one
