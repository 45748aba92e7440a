"""The pieces behind the deployment kinds, without a server: model references with a version, an ensemble's
statistics per step, BYTES input data and comparison, the steps composed in data-flow order, ONNX auto-complete."""
import base64
import json

import numpy as np
import pytest

from tritonsuite.core import inputdata
from tritonsuite.core.description import describe, model_and_version
from tritonsuite.core.spec import TensorSpec
from tritonsuite.load.windows import composing_columns, delta, snapshot

TEXT = TensorSpec("text", "bytes", (2,))


def test_model_references_name_a_version_or_none():
    assert model_and_version("m:3") == ("m", "3")
    assert model_and_version("m") == ("m", "")
    assert model_and_version("a:b") == ("a:b", "")  # only a number is a version


def _stats(name, version, success, queue_ns, infer_ns):
    part = {"count": success, "ns": 0}
    return {"name": name, "version": version, "inference_stats": {
        "success": part, "fail": {"count": 0, "ns": 0}, "queue": {"count": success, "ns": queue_ns},
        "compute_input": {"count": success, "ns": 0}, "compute_infer": {"count": success, "ns": infer_ns},
        "compute_output": {"count": success, "ns": 0}}}


def test_an_ensembles_steps_are_read_from_one_statistics_response():
    before = {"model_stats": [_stats("ens", "1", 10, 0, 50), _stats("a", "1", 10, 1_000_000, 20_000_000),
                              _stats("b", "1", 5, 0, 10_000_000), _stats("b", "2", 5, 0, 10_000_000),
                              _stats("other", "1", 99, 0, 0)]}
    after = {"model_stats": [_stats("ens", "1", 20, 0, 100), _stats("a", "1", 30, 3_000_000, 60_000_000),
                             _stats("b", "1", 10, 0, 20_000_000), _stats("b", "2", 10, 0, 30_000_000),
                             _stats("other", "1", 500, 0, 0)]}
    moved = delta(snapshot(after, "ens", ("a", "b")), snapshot(before, "ens", ("a", "b")))
    assert moved["success_count"] == 10  # the ensemble's own counters
    steps = composing_columns(moved)
    assert set(steps) == {"a", "b"}  # nothing of models outside the ensemble
    assert steps["a"]["requests"] == 20 and steps["a"]["per request"] == 2.0 and steps["a"]["Server Queue"] == pytest.approx(0.1)
    assert steps["a"]["Server Compute Infer"] == pytest.approx(2.0)
    assert steps["b"]["requests"] == 10 and steps["b"]["Server Compute Infer"] == pytest.approx(3.0)  # versions summed


def test_strings_in_perf_analyzers_json_forms(tmp_path):
    import struct

    raw = b"".join(struct.pack("<I", len(v)) + v for v in (b"x", b"yz"))  # Triton's serialised BYTES
    doc = {"data": [{"text": ["ab", "cd"]}, {"text": {"b64": base64.b64encode(raw).decode()}}],
           "validation_data": [{"text": {"content": ["ab", "cd"], "shape": [2]}}, {"text": ["x", "yz"]}]}
    path = tmp_path / "strings.json"
    path.write_text(json.dumps(doc))
    data = inputdata.read_json(path, [TEXT], [TEXT])
    batch = data.batch(2)["text"]
    assert batch.dtype == object and batch.tolist() == [[b"ab", b"cd"], [b"x", b"yz"]]
    assert data.expected()["text"].tolist() == batch.tolist()
    assert inputdata.to_json(data)["data"][1]["text"]["content"] == ["x", "yz"]  # written back as strings
    random = inputdata.generated("random", [TEXT]).batch(1)["text"]
    assert random.shape == (1, 2) and all(len(v) == inputdata.STRING_LENGTH for v in random.reshape(-1))


def test_strings_compare_exactly():
    from tritonsuite.core.tensors import compare_outputs
    from tritonsuite.deploy.validation import _ToleranceView

    view = _ToleranceView((TEXT,), {})
    served = {"text": np.array([[b"ab!", b"cd!"], [b"x!", b"yz!"]], dtype=object)}
    same = compare_outputs(served, {"text": np.array([["ab!", "cd!"], ["x!", "yz!"]], dtype=object)}, view, "fp32")
    assert same[0].mismatched == 0
    off = compare_outputs(served, {"text": np.array([["ab!", "cd!"], ["x!", "yz?"]], dtype=object)}, view, "fp32")
    assert off[0].mismatched == 1 and off[0].worst_index == (1, 1)


def test_ensemble_steps_run_in_data_flow_order_nested_included():
    from tritonsuite.deploy.ensemble import ComposedReference

    def config(name, steps, inputs, outputs):
        return {"name": name, "platform": "ensemble", "max_batch_size": 4,
                "input": [{"name": n, "data_type": "TYPE_FP32", "dims": [2]} for n in inputs],
                "output": [{"name": n, "data_type": "TYPE_FP32", "dims": [2]} for n in outputs],
                "ensemble_scheduling": {"step": steps}}

    def leaf(name):
        return {"name": name, "platform": "onnxruntime_onnx", "max_batch_size": 4,
                "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [2]}],
                "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [2]}]}

    def step(model, x, y):
        return {"model_name": model, "model_version": -1, "input_map": {"x": x}, "output_map": {"y": y}}

    configs = {"double": leaf("double"), "inc": leaf("inc"),
               # listed out of order: inc reads what double writes
               "inner": config("inner", [step("inc", "mid", "OUT"), step("double", "IN", "mid")], ["IN"], ["OUT"])}
    outer = describe(config("outer", [{"model_name": "inner", "model_version": -1, "input_map": {"IN": "A"},
                                       "output_map": {"OUT": "B"}}, step("double", "B", "C")], ["A"], ["C"]),
                     configs.__getitem__)
    runs = {"double": lambda t: {"y": t["x"] * 2}, "inc": lambda t: {"y": t["x"] + 1}}
    reference = ComposedReference(outer, lambda model, version: runs[model.name])
    assert reference({"A": np.array([[1.0, 2.0]])})["C"].tolist() == [[6.0, 10.0]]  # ((x*2)+1)*2


def test_onnx_auto_complete_is_the_onnxruntime_backends(tmp_path):
    from tritonsuite.deploy.backends.standin import onnx_auto_complete
    from tests.helpers import kinds_fixture

    repo = kinds_fixture().make(tmp_path / "repo")
    batched = onnx_auto_complete(str(repo / "no_config" / "1" / "model.onnx"))
    assert batched["max_batch_size"] == 4 and "dynamic_batching" in batched
    assert batched["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]
    batchless = onnx_auto_complete(str(repo / "batchless" / "1" / "model.onnx"))
    assert batchless["max_batch_size"] == 0 and batchless["output"][0]["dims"] == [2, 3]
    strings = onnx_auto_complete(str(repo / "strings" / "1" / "model.onnx"))
    assert strings["input"][0]["data_type"] == "TYPE_STRING"


def test_the_pytorch_stand_in_takes_and_returns_bf16_as_ml_dtypes_bfloat16(tmp_path):
    """numpy has no BF16: the session takes tritonclient's ml_dtypes bfloat16 arrays and returns them, bit for bit
    what torch computes in bfloat16 (the server hands the same bits over DLPack)."""
    import ml_dtypes
    import torch

    from tritonsuite.deploy.backends.standin import open_session
    from tests.helpers import kinds_fixture

    kinds_fixture()._torchscript_bf16(tmp_path / "model.pt")
    config = {"input": [{"name": "INPUT__0", "data_type": "TYPE_BF16", "dims": [4]}],
              "output": [{"name": "OUTPUT__0", "data_type": "TYPE_BF16", "dims": [4]}]}
    x = np.array([[1.0, -2.5, 3.0e3, 0.1]], dtype=ml_dtypes.bfloat16)
    y = open_session("pytorch", str(tmp_path / "model.pt"), config)({"INPUT__0": x})["OUTPUT__0"]
    assert y.dtype == np.dtype(ml_dtypes.bfloat16) and y.shape == (1, 4)
    expected = (torch.tensor(x.astype(np.float32)).to(torch.bfloat16).float() * 0.5 + 1).to(torch.bfloat16)
    assert y.astype(np.float32).tolist() == expected.float().tolist()
    assert y.astype(np.float32)[0, 1] == -0.25


PA_CONSOLE = """Request concurrency: 2
  Client: 
    Request count: 5109
    Throughput: 1412.31 infer/sec
  Server: 
    Successful request count: 5107
    Avg request latency: 1048 usec (overhead 0 usec + queue 204 usec + compute 1509 usec)

  Composing models: 
  pipeline, version: 1
      Inference count: 5107
      Successful request count: 5107
      Avg request latency: 1007 usec (overhead 0 usec + queue 121 usec + compute 957 usec)

    Composing models: 
    pool, version: 1
        Successful request count: 5107
        Avg request latency: 444 usec (overhead 1 usec + queue 38 usec + compute input 8 usec + compute infer 343 usec + compute output 54 usec)

    scale, version: 1
        Successful request count: 10214
        Avg request latency: 636 usec (overhead 1 usec + queue 83 usec + compute input 17 usec + compute infer 446 usec + compute output 87 usec)

  scale, version: 1
      Successful request count: 10214
      Avg request latency: 636 usec (overhead 1 usec + queue 83 usec + compute input 17 usec + compute infer 446 usec + compute output 87 usec)

Inferences/Second vs. Client Average Batch Latency
"""


def test_perf_analyzers_composing_figures_are_read_from_its_console():
    from tritonsuite.load.composing import parse_composing

    steps = parse_composing(PA_CONSOLE)  # (perf_analyzer 2.51 on the nested ensemble of the kinds repository)
    assert list(steps) == ["pipeline", "pool", "scale"]  # scale printed twice, taken once
    assert steps["scale"] == {"requests": 10214, "per request": 2.0, "Server Queue": 0.083, "Server Compute Input": 0.017,
                              "Server Compute Infer": 0.446, "Server Compute Output": 0.087}
    assert steps["pipeline"] == {"requests": 5107, "per request": 1.0, "Server Queue": 0.121}  # an ensemble's compute is not split
    assert parse_composing("Request concurrency: 1\n  Client: \n") == {}


def test_bf16_is_tritonclients_ml_dtypes_bfloat16_end_to_end_on_the_client():
    from tritonclient.utils import np_to_triton_dtype

    from tritonsuite.core.tensors import compare_outputs
    from tritonsuite.deploy.validation import _ToleranceView

    t = TensorSpec("h", "bfloat16", (3,))
    step = inputdata.generated("random", [t]).batch(1)["h"]
    assert step.dtype.name == "bfloat16" and np_to_triton_dtype(step.dtype) == "BF16"
    assert inputdata.to_json(inputdata.InputData("x", ({"h": step[0]},)))["data"][0]["h"]["content"] == [
        float(v) for v in step[0].astype(np.float32)]
    view = _ToleranceView((t,), {"h": (0.0, 0.01)})
    assert compare_outputs({"h": step}, {"h": step.astype(np.float32)}, view, "fp32")[0].mismatched == 0


def test_a_deployment_with_implicit_state_is_refused_by_the_stand_in_naming_why(tmp_path):
    import json

    from tritonsuite.deploy.backends.standin import IMPLICIT_STATE, TritonPythonModel

    config = {"name": "stateful", "backend": "onnxruntime", "max_batch_size": 4, "input": [], "output": [],
              "sequence_batching": {"state": [{"input_name": "s_in", "output_name": "s_out", "data_type": "TYPE_FP32",
                                               "dims": [1]}]}}
    with pytest.raises(RuntimeError) as raised:
        TritonPythonModel().initialize({"model_config": json.dumps(config), "model_repository": str(tmp_path),
                                        "model_version": "1"})
    assert str(raised.value) == IMPLICIT_STATE and "--server container or remote" in IMPLICIT_STATE


def test_a_bare_deployment_name_stands_for_every_version_it_serves():
    from tritonsuite.profiles.repooptions import served_versions

    known = ["latest_two:2", "latest_two:3", "scale", "bert", "v:x"]
    assert served_versions(["latest_two"], known) == ["latest_two:2", "latest_two:3"]
    assert served_versions(["latest_two:3", "scale"], known) == ["latest_two:3", "scale"]
    assert served_versions(["nope", "v"], known) == ["nope", "v"]  # unknown names are left to the usage error
