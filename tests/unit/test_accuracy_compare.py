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
    assert "worst at sample 2" in c.describe()


def test_a_share_is_judged_per_sample_and_names_the_worst_sample():
    ref = np.zeros((3, 16), np.float32)
    got = ref.copy()
    got[0, 0] = 1  # 1/16 of sample 0
    (c,) = compare_outputs({"OUTPUT__0": got}, {"OUTPUT__0": ref}, _spec(0.1), "fp32")
    assert c.passed and c.mismatched == 1 and c.allowed_share == 0.1
    got[1, :4] = 1  # 4/16 of sample 1: over the share, though the whole tensor is only 5/48 out
    (c,) = compare_outputs({"OUTPUT__0": got}, {"OUTPUT__0": ref}, _spec(0.1), "fp32")
    assert not c.passed and c.worst_sample == 1 and c.worst_sample_share == 0.25
    assert "0.25 of sample 1's" in c.describe()


def test_identical_outputs_pass_with_or_without_a_share():
    ref = np.arange(32, dtype=np.float32).reshape(2, 16)
    for share in (None, 0.01):
        (c,) = compare_outputs({"OUTPUT__0": ref.copy()}, {"OUTPUT__0": ref}, _spec(share), "fp32")
        assert c.passed and c.mismatched == 0 and c.worst_sample_share == 0.0
