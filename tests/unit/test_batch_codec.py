"""The batch dimension, added and dropped in one place (tritonsuite.load.client ``batch_first`` and ``as_sent``): the
suite holds every request and answer batch first; a batchless deployment (``max_batch_size: 0``) has no batch
dimension on the wire, so its batch of one is sent without it and its answers get it back."""
from __future__ import annotations

import numpy as np
import pytest

from tritonsuite.load.client import ClientError, as_sent, batch_first, infer_tensors


def test_a_batching_deployments_tensors_are_batch_first_on_the_wire_too():
    request = {"X": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert as_sent(request, True) == request and batch_first(request, True) == request


def test_a_batchless_deployments_batch_of_one_goes_without_its_batch_dimension_and_comes_back_with_it():
    request = {"X": np.arange(3, dtype=np.float32)[None], "S": np.array([[b"a", b"b"]], dtype=object)}
    sent = as_sent(request, False)
    assert sent["X"].shape == (3,) and sent["S"].shape == (2,) and sent["S"].tolist() == [b"a", b"b"]
    back = batch_first(sent, False)
    assert all(back[k].shape == request[k].shape and np.array_equal(back[k], request[k]) for k in request)
    assert batch_first({"X": [1.0, 2.0]}, False)["X"].shape == (1, 2)  # whatever array-like the data came as


def test_a_batchless_deployment_takes_one_sample_per_request():
    with pytest.raises(ClientError, match=r"takes one sample per request; got \[2\]"):
        as_sent({"X": np.zeros((2, 3), np.float32)}, False)


def test_the_codec_sends_a_batchless_request_with_the_configurations_dims(tmp_path):
    from tritonsuite.judge.conformance.result import Target

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.pbtxt").write_text(
        'name: "m" backend: "python" max_batch_size: 0 '
        'input [{ name: "X" data_type: TYPE_FP32 dims: [3] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [3] }]')
    request = Target(server=None, directory=tmp_path / "m").request(1)  # a check's request: as the wire carries it
    assert request["X"].shape == (3,)
    held = batch_first(request, False)
    assert held["X"].shape == (1, 3) and np.array_equal(held["X"][0], request["X"])
    (tensor,), _ = infer_tensors(held, ["Y"], batched=False, protocol="grpc")
    assert tensor.shape() == [3]
    (tensor,), _ = infer_tensors(held, ["Y"], batched=True, protocol="grpc")
    assert tensor.shape() == [1, 3]
