"""compare_outputs with an allowed mismatch share per sample (discrete outputs such as argmax label maps)."""
import dataclasses

import numpy as np

from tritonsuite.core.tensors import compare_outputs
from tritonsuite.models import default_registry


def _spec(share):
    identity = default_registry().get("identity", "tiny")
    tol = (0.0, 0.0, share) if share is not None else (0.0, 0.0)
    return dataclasses.replace(identity, tolerances={"fp32": {"OUTPUT__0": tol}})


def test_without_a_share_every_element_must_match():
    ref = np.zeros((3, 16), np.float32)
    got = ref.copy()
    got[2, 5] = 1
    (c,) = compare_outputs({"OUTPUT__0": got}, {"OUTPUT__0": ref}, _spec(None), "fp32")
    assert not c.passed and c.mismatched == 1 and c.worst_index == (2, 5)
    assert c.describe() == ("OUTPUT__0: max abs error 1, max rel error 1e+12 (atol 0, rtol 0); 1/48 elements out of "
                            "tolerance, worst at sample 2 index (5,)")


def test_a_share_is_judged_per_sample_and_names_the_worst_sample():
    ref = np.zeros((3, 16), np.float32)
    got = ref.copy()
    got[0, 0] = 1  # 1/16 of sample 0
    (c,) = compare_outputs({"OUTPUT__0": got}, {"OUTPUT__0": ref}, _spec(0.1), "fp32")
    assert c.passed and c.mismatched == 1 and c.allowed_share == 0.1
    got[1, :4] = 1  # 4/16 of sample 1: over the share, though the whole tensor is only 5/48 out
    (c,) = compare_outputs({"OUTPUT__0": got}, {"OUTPUT__0": ref}, _spec(0.1), "fp32")
    assert not c.passed and c.worst_sample == 1 and c.worst_sample_share == 0.25
    assert c.describe() == ("OUTPUT__0: max abs error 1, max rel error 1e+12 (atol 0, rtol 0, at most 0.1 of a "
                            "sample's elements outside); 5/48 elements out of tolerance, at most 0.25 of sample 1's")


def test_identical_outputs_pass_with_or_without_a_share():
    ref = np.arange(32, dtype=np.float32).reshape(2, 16)
    for share in (None, 0.01):
        (c,) = compare_outputs({"OUTPUT__0": ref.copy()}, {"OUTPUT__0": ref}, _spec(share), "fp32")
        assert c.passed and c.mismatched == 0 and c.worst_sample_share == 0.0


def _tol(atol, rtol, share=None):
    identity = default_registry().get("identity", "tiny")
    return dataclasses.replace(identity, tolerances={"fp32": {"OUTPUT__0": (atol, rtol) + ((share,) if share else ())}})


def _compare(got, ref, spec):
    (c,) = compare_outputs({"OUTPUT__0": np.asarray(got)}, {"OUTPUT__0": np.asarray(ref)}, spec, "fp32")
    return c


def test_served_nan_and_inf_fail_naming_the_tensor_and_their_counts():
    ref = np.ones((2, 16), np.float32)
    got = ref.copy()
    got[0, :3] = np.nan
    got[1, 7] = np.inf
    c = _compare(got, ref, _tol(1e-3, 1e-3))
    assert not c.passed and (c.nan, c.inf, c.mismatched) == (3, 1, 4)
    assert c.describe().startswith("OUTPUT__0: ") and "3 NaN and 1 inf of 32 served elements the reference does not have" in \
        c.describe()


def test_a_share_of_allowed_mismatches_never_covers_a_nan():
    ref = np.zeros((1, 100), np.float32)
    got = ref.copy()
    got[0, 0] = np.nan  # 1% of the sample, under a 5% share of discrete mismatches: still a failure
    c = _compare(got, ref, _tol(0.0, 0.0, 0.05))
    assert not c.passed and c.nan == 1


def test_an_infinity_the_other_side_lacks_fails_and_a_shared_one_passes():
    ref = np.array([[np.inf, -np.inf, 1.0, np.nan]])
    assert _compare(ref.copy(), ref, _tol(1e-3, 1e-3)).passed  # the same infinities, NaN where the reference has one
    finite = np.array([[1e30, -np.inf, 1.0, np.nan]])  # a finite value where the reference is inf: inf - inf is NaN
    c = _compare(finite, ref, _tol(1e-3, 1e3))
    assert not c.passed and c.mismatched == 1 and c.worst_index == (0, 0) and c.inf == 0
    flipped = np.array([[-np.inf, -np.inf, 1.0, np.nan]])
    c = _compare(flipped, ref, _tol(1e-3, 1e3))
    assert not c.passed and c.inf == 1
    c = _compare(np.array([[np.inf, -np.inf, 1.0, 0.0]]), ref, _tol(1e-3, 1e-3))  # a number where NaN was
    assert not c.passed and c.mismatched == 1 and c.nan == 0


def test_every_element_infinite_on_both_sides_compares_without_error():
    ref = np.full((2, 4), np.inf)
    assert _compare(ref.copy(), ref, _tol(0.0, 0.0)).passed


def test_tolerance_is_atol_plus_rtol_of_the_reference_inclusive():
    """|served - reference| <= atol + rtol x |reference|: on the boundary passes, rtol scales the reference, not
    the served value."""
    assert _compare([[1.5]], [[1.0]], _tol(0.5, 0.0)).passed  # exactly atol away
    assert not _compare([[1.5000001]], [[1.0]], _tol(0.5, 0.0)).passed
    assert _compare([[3.0]], [[2.0]], _tol(0.0, 0.5)).passed  # exactly rtol x |reference| away
    # 1 apart: within 0.0101 x 100 (the served value) but not within 0.0101 x 99 (the reference)
    assert not _compare([[100.0]], [[99.0]], _tol(0.0, 0.0101)).passed
    assert _compare([[99.0]], [[100.0]], _tol(0.0, 0.0101)).passed
