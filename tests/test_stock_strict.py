"""On the embedded server, the stand-ins do what Triton's stock backends (r24.10) do with deployments they refuse
or must serve (docs/stock-backends.md): a graph fixed to batch 1 under ``max_batch_size: 8`` is refused at load in
the stock backend's words (it used to load, and its first batch of two crashed the server); an ONNX sequence model
gets its START/READY control tensors as inputs; a failed execution is answered per request and the server and the
model stay up; a BF16 TorchScript deployment is refused as pytorch_backend r24.10 refuses it."""
from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import kinds_fixture
from tritonsuite.server import EmbeddedServer, ServerError


def _onnx(path, nodes, inputs, outputs) -> None:
    import onnx
    from onnx import TensorProto, helper

    types = {"f": TensorProto.FLOAT, "i": TensorProto.INT32, "l": TensorProto.INT64}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, types[t], s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, types[t], s) for n, t, s in outputs])
    path.parent.mkdir(parents=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def _repository(root):
    from onnx import helper

    _onnx(root / "batch_one" / "1" / "model.onnx", [helper.make_node("Identity", ["x"], ["y"])],
          [("x", "f", [1, 4])], [("y", "f", [1, 4])])
    (root / "batch_one" / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nmax_batch_size: 8\ndynamic_batching {}\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [4]}]\noutput [{name: "y" data_type: TYPE_FP32 dims: [4]}]\n')
    # y = x * READY + START: both control tensors must reach the graph
    _onnx(root / "seq_onnx" / "1" / "model.onnx",
          [helper.make_node("Cast", ["START"], ["s"], to=1), helper.make_node("Cast", ["READY"], ["r"], to=1),
           helper.make_node("Mul", ["x", "r"], ["xr"]), helper.make_node("Add", ["xr", "s"], ["y"])],
          [("x", "f", ["b", 1]), ("START", "i", ["b", 1]), ("READY", "i", ["b", 1])], [("y", "f", ["b", 1])])
    (root / "seq_onnx" / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nmax_batch_size: 1\nsequence_batching {\n'
        '  control_input [{name: "START" control [{kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1]}]},\n'
        '                 {name: "READY" control [{kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1]}]}]\n}\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [1]}]\noutput [{name: "y" data_type: TYPE_FP32 dims: [1]}]\n')
    # y = Expand(Squeeze(x, 0), Shape(x)): loads (batch dimension -1), runs a batch of 1, fails in onnxruntime on
    # any larger batch: the dynamic batcher groups four requests into one failing execution
    _onnx(root / "fails" / "1" / "model.onnx",
          [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("a", 7, [1], [0])),
           helper.make_node("Squeeze", ["x", "axes"], ["squeezed"]), helper.make_node("Shape", ["x"], ["shape"]),
           helper.make_node("Expand", ["squeezed", "shape"], ["y"])], [("x", "f", ["b", 4])], [("y", "f", ["b", 4])])
    (root / "fails" / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000000 }\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [4]}]\noutput [{name: "y" data_type: TYPE_FP32 dims: [4]}]\n')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("strict")
    _repository(root / "repo")
    with EmbeddedServer(root / "repo", root / "logs") as server:
        yield server


def _infer(server, model, x, **sequence):
    import tritonclient.http as httpclient

    client = server.client(timeout=30)
    try:
        tensor = httpclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        return client.infer(model, [tensor], **sequence).as_numpy("y")
    finally:
        client.close()


def test_a_graph_fixed_to_batch_1_is_refused_at_load_in_the_stock_backends_words(server):
    with pytest.raises(ServerError, match="for the model to support batching the shape should have at least 1 "
                                          "dimension and the first dimension must be -1; but shape expected by the "
                                          "model is \\[1,4\\]"):
        server.load(server.model_repository / "batch_one")
    assert server.is_alive()


def test_an_onnx_sequence_model_gets_its_control_tensors(server):
    server.load(server.model_repository / "seq_onnx")
    one = np.array([[2.0]], np.float32)
    first = _infer(server, "seq_onnx", one, sequence_id=7, sequence_start=True)
    later = _infer(server, "seq_onnx", one, sequence_id=7, sequence_end=True)
    assert first.tolist() == [[3.0]] and later.tolist() == [[2.0]]  # START 1 then 0, READY 1 both times


def test_a_failed_execution_is_answered_per_request_and_the_server_stays_up(server):
    """Four requests batched into one execution that onnxruntime fails: each gets the error, as from the stock
    backend. The stand-in used to answer them with one error object shared by the four responses, and the python
    backend 2.51 died of it (Signal 11 in libtriton_python.so's TRITONBACKEND_ModelInstanceExecute)."""
    from concurrent.futures import ThreadPoolExecutor

    server.load(server.model_repository / "fails")

    def one(_):
        try:
            return _infer(server, "fails", np.ones((1, 4), np.float32))
        except Exception as exc:  # noqa: BLE001 - the error each request was answered with
            return str(exc)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(one, range(4)))
    assert all(isinstance(a, str) and "Squeeze" in a for a in answers), answers
    assert server.is_alive()
    assert _infer(server, "fails", np.ones((1, 4), np.float32)).tolist() == [[1.0] * 4]  # a batch of 1 still runs


def test_a_bf16_torchscript_deployment_is_refused_as_pytorch_backend_r24_10_refuses_it(server, tmp_path):
    import shutil

    repo = kinds_fixture().make(tmp_path / "kinds")
    shutil.copytree(repo / "bf16", server.model_repository / "bf16")
    with pytest.raises(ServerError, match="unsupported datatype TYPE_BF16 for input 'INPUT__0' for model 'bf16'"):
        server.load(server.model_repository / "bf16")


def test_a_torchscript_model_with_an_input_too_many_is_refused_in_the_stock_words(server, tmp_path):
    import torch

    class Two(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    directory = server.model_repository / "two_inputs"
    (directory / "1").mkdir(parents=True)
    torch.jit.script(Two()).save(str(directory / "1" / "model.pt"))
    (directory / "config.pbtxt").write_text(
        'platform: "pytorch_libtorch"\nmax_batch_size: 8\ninput [{name: "INPUT__0" data_type: TYPE_FP32 dims: [4]}]\n'
        'output [{name: "OUTPUT__0" data_type: TYPE_FP32 dims: [4]}]\n')
    with pytest.raises(ServerError, match="unable to load model 'two_inputs', configuration expects 1 inputs, model "
                                          "provides 2"):
        server.load(directory)
