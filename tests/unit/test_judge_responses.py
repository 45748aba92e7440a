"""The pure parts of the accuracy of sequence, decoupled and python deployments (tritonsuite.judge.responses): how
two runs' outputs are compared, the samples a run sends, which deployments it judges and what against. The
exchanges themselves (sequences sent, streams opened) are the server tests'."""
from types import SimpleNamespace

import numpy as np

from tritonsuite.core.description import describe
from tritonsuite.core.tensors import answer_difference
from tritonsuite.judge.responses import (DEFAULT_TOLERANCE, _samples, compare_runs, composing_models,
                                         judged_by_kind, reference_name)



def _same(a, b, tolerance) -> str:
    """One output compared by the one comparison (core.tensors.answer_difference) within ``tolerance``."""
    return answer_difference([{"x": a}], [{"x": b}], tolerance=lambda name, dtype: tolerance)[1]

def test_same_names_what_differs_shape_floats_beyond_tolerance_and_exact_elements():
    assert DEFAULT_TOLERANCE == (1e-5, 1e-5)
    assert _same(np.zeros((2, 3)), np.zeros((3, 2)), (0.0, 0.0)) == "response 0 output x: shape (2, 3) vs (3, 2)"
    a = np.array([1.0, 2.0, 3.0, np.nan], np.float32)
    assert _same(a, a.copy(), (0.0, 0.0)) == ""  # NaN where the other has NaN is equal
    # atol and rtol both count: |diff| <= atol + rtol * |b|
    assert _same(np.array([1.0, 10.0]), np.array([1.5, 10.0]), (0.5, 0.0)) == ""
    assert _same(np.array([10.0]), np.array([12.0]), (0.0, 0.25)) == ""  # rtol of the second, 8 would not do
    assert _same(np.array([12.0]), np.array([10.0]), (0.0, 0.125)) != ""
    assert _same(np.array([1.0, 10.0, 7.0]), np.array([1.3, 10.0, 7.5]), (0.1, 0.01)) == (
        "response 0 output x: 2 of 3 elements beyond atol 0.1 + rtol 0.01, max |diff| 0.5")
    assert _same(np.array([1.0]), np.array([1.0 + 2e-5]), (1e-5, 0.0)) == (
        "response 0 output x: 1 of 1 elements beyond atol 1e-05 + rtol 0, max |diff| 2e-05")
    # either side floating makes it a floating comparison
    assert _same(np.array([1, 2], np.int64), np.array([1.0, 2.05]), (0.1, 0.0)) == ""
    assert _same(np.array([1.0, 2.05]), np.array([1, 2], np.int64), (0.1, 0.0)) == ""
    assert _same(np.array([1, 2, 3]), np.array([1, 2, 3]), (1.0, 1.0)) == ""
    assert _same(np.array([1, 2, 3]), np.array([1, 5, 4]), (10.0, 10.0)) == \
        "response 0 output x: 2 of 3 elements differ"  # integers: no tolerance
    assert _same(np.array([b"a", b"b"], object), np.array([b"a", b"c"], object), (0.0, 0.0)) == \
        "response 0 output x: 1 elements differ"


def test_compare_runs_counts_the_units_that_differ_and_names_the_first_difference():
    one = {"y": np.array([1.0]), "z": np.array([1])}
    two = {"y": np.array([2.0]), "z": np.array([2])}
    expected = [[one, two], [one, two], [one, two], [one]]
    got = [[one, two],  # equal
           [one, {"y": np.array([2.0])}],  # step 1 lacks z
           [{"y": np.array([1.5]), "z": np.array([1])}, {"y": np.array([9.0]), "z": np.array([2])}],  # both differ
           [one, one]]  # one step too many
    assert compare_runs(got, expected, "sequence", "step") == (3, 7, "sequence 1: step 1: no output z")
    differ, compared, first = compare_runs(got[2:], expected[2:], "sequence", "step")
    assert (differ, compared) == (2, 3)
    assert first == "sequence 0: step 0 output y: 1 of 1 elements beyond atol 1e-05 + rtol 1e-05, max |diff| 0.5"
    assert compare_runs(got[3:], expected[3:], "request", "response") == (1, 1, "request 0: 2 responses vs 1")
    # a tolerance per output, the default for the others
    assert compare_runs(got[2:3], expected[2:3], "sequence", "step", {"y": (10.0, 0.0)}) == (0, 2, "")
    assert compare_runs(got[2:3], expected[2:3], "sequence", "step", {"z": (10.0, 0.0)})[0] == 1
    assert compare_runs([], [], "request", "response") == (0, 0, "")
    assert compare_runs([[one]], [[one]], "request", "response", None) == (0, 1, "")
    # outputs the run gave beyond the expected ones are not judged; an expected one missing is
    assert compare_runs([[{**one, "extra": np.array([5])}]], [[one]], "request", "response") == (0, 1, "")


def test_samples_one_per_request_with_or_without_the_batch_dimension():
    inputs = {"a": np.arange(6).reshape(3, 2), "b": np.arange(3)}
    batched = _samples(inputs, True)
    assert len(batched) == 3
    assert [s["a"].tolist() for s in batched] == [[[0, 1]], [[2, 3]], [[4, 5]]]
    assert [s["b"].tolist() for s in batched] == [[0], [1], [2]]
    batchless = _samples(inputs, False)
    assert [s["a"].tolist() for s in batchless] == [[0, 1], [2, 3], [4, 5]]
    assert [s["b"].tolist() for s in batchless] == [0, 1, 2]


def test_composing_models_are_a_python_deployments_own_or_everyones():
    python = SimpleNamespace(name="bls", backend="python")
    named = {"bls": ["a", "b"], "": ["c"]}
    assert composing_models(python, named) == ("a", "b")
    assert composing_models(python, {"": ["c"]}) == ("c",)
    assert composing_models(python, {"other": ["c"]}) == ()
    assert composing_models(python, {"bls": []}) == ()
    assert composing_models(SimpleNamespace(name="bls", backend="onnxruntime"), named) == ()
    assert composing_models(SimpleNamespace(name="bls"), named) == ()


def _description(**config):
    return describe({"name": "m", "backend": "onnxruntime", "max_batch_size": 8,
                     "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                     "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [4]}], **config})


def test_which_deployments_are_judged_by_whole_exchanges_and_what_against():
    plain = SimpleNamespace(served_from=None)
    referenced = SimpleNamespace(served_from=SimpleNamespace(reference="ref.py"))
    onnx = _description()
    assert not judged_by_kind(onnx, plain) and reference_name(onnx, plain) == "fp32 eager model on the CPU"
    sequence = _description(sequence_batching={})
    assert judged_by_kind(sequence, plain) and reference_name(sequence, plain) == "each sequence sent alone"
    decoupled = _description(model_transaction_policy={"decoupled": True})
    assert judged_by_kind(decoupled, plain) and reference_name(decoupled, plain) == "each request sent alone"
    assert reference_name(decoupled, referenced) == "each request sent alone and the reference file"
    python = _description(backend="python")
    assert judged_by_kind(python, plain) and reference_name(python, plain) == "validation_data"
    assert judged_by_kind(python, SimpleNamespace(served_from=SimpleNamespace(reference=None)))
    assert not judged_by_kind(python, referenced)  # its reference runs in-process: the eager comparison
    assert reference_name(python, referenced) == "fp32 eager model on the CPU"
