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
    dynamic = judge(declared=config(output=[{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]),
                    answers={1: answer(output=np.zeros((1, 5), np.float32))})
    assert dynamic.verdict == "pass", dynamic.reason  # a variable dim fits any size


def test_a_request_answered_by_another_version_fails():
    result = judge(meta=metadata(versions=("2",)), on_disk=(1, 2), answers={2: answer(version="1")})
    assert result.verdict == "fail"
    assert result.reason == "a request for version 2 was answered by version 1"
    unnamed = judge(answers={1: answer(version="")})  # a transport that does not say the version: nothing to judge
    assert unnamed.verdict == "pass" and unnamed.evidence["answers"][1].startswith("answered by version ?")
