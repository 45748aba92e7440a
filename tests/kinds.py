"""Hand-written model repositories of the kinds beyond one stateless model, written by the tests into a directory:
a sequence model with control inputs accumulating state per sequence (``direct`` and ``oldest``), a decoupled model
emitting N responses per request, and a BLS model calling an ONNX model. All python-backend models: the wheel's
python backend runs them for real on the embedded server."""
from __future__ import annotations

import textwrap
from pathlib import Path

from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.server.embedded import EmbeddedServer

SEQUENCE_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """OUTPUT = running sum of INPUT over the sequence (state keyed by CORRID), reset at START; READY and END
    echoed so a test sees the server fill every control input."""

    def initialize(self, args):
        self.state = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().astype(np.int64)
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0]
            end = pb_utils.get_input_tensor_by_name(request, "END").as_numpy().reshape(-1)[0]
            ready = pb_utils.get_input_tensor_by_name(request, "READY").as_numpy().reshape(-1)[0]
            corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0])
            total = (0 if start else self.state.get(corrid, 0)) + x
            self.state[corrid] = total
            if end:
                self.state.pop(corrid, None)
            flags = np.array([[start, end, ready]] * x.shape[0], dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", total.astype(np.int32)),
                                                         pb_utils.Tensor("FLAGS", flags)]))
        return responses
'''

SEQUENCE_CONFIG = '''
name: "{name}"
backend: "python"
max_batch_size: 8
input [{{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }}]
output [{{ name: "OUTPUT" data_type: TYPE_INT32 dims: [1] }}, {{ name: "FLAGS" data_type: TYPE_INT32 dims: [3] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
sequence_batching {{
  max_sequence_idle_microseconds: 5000000
  {strategy}
  control_input [
    {{ name: "START" control [{{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }}] }},
    {{ name: "END" control [{{ kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] }}] }},
    {{ name: "READY" control [{{ kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1] }}] }},
    {{ name: "CORRID" control [{{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }}] }}
  ]
}}
'''

DECOUPLED_MODEL = '''
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """COUNT responses per request, response i carrying OUT = DATA * (i + 1) and INDEX = i, a millisecond apart; the
    final flag travels alone (an empty final response)."""

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy().reshape(-1)[0])
            data = pb_utils.get_input_tensor_by_name(request, "DATA").as_numpy()
            for i in range(count):
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", (data * (i + 1)).astype(np.float32)),
                    pb_utils.Tensor("INDEX", np.full((data.shape[0], 1), i, dtype=np.int32))]))
                time.sleep(0.001)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

DECOUPLED_CONFIG = '''
name: "{name}"
backend: "python"
max_batch_size: 8
input [{{ name: "COUNT" data_type: TYPE_INT32 dims: [1] }}, {{ name: "DATA" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "OUT" data_type: TYPE_FP32 dims: [4] }}, {{ name: "INDEX" data_type: TYPE_INT32 dims: [1] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
model_transaction_policy {{ decoupled: true }}
'''

BLS_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Y = add_onnx(X, X) + 1, the addition run by the ONNX model through BLS."""

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            inner = pb_utils.InferenceRequest(model_name="add_onnx", requested_output_names=["SUM"],
                                              inputs=[pb_utils.Tensor("A", x), pb_utils.Tensor("B", x)]).exec()
            if inner.has_error():
                raise pb_utils.TritonModelException(inner.error().message())
            total = pb_utils.get_output_tensor_by_name(inner, "SUM").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (total + 1).astype(np.float32))]))
        return responses
'''

BLS_CONFIG = '''
name: "bls_add"
backend: "python"
max_batch_size: 8
input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [4] }]
instance_group [{ kind: KIND_CPU count: 1 }]
'''

ADD_CONFIG = '''
name: "add_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [{ name: "A" data_type: TYPE_FP32 dims: [4] }, { name: "B" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "SUM" data_type: TYPE_FP32 dims: [4] }]
instance_group [{ kind: KIND_CPU count: 1 }]
'''


def _write(directory: Path, config: str, model_file: str, body) -> Path:
    (directory / "1").mkdir(parents=True, exist_ok=True)
    (directory / "config.pbtxt").write_text(textwrap.dedent(config).strip() + "\n")
    target = directory / "1" / model_file
    if isinstance(body, bytes):
        target.write_bytes(body)
    else:
        target.write_text(body.lstrip())
    return directory


def sequence_model(repo: Path, name: str = "seq_direct", strategy: str = "direct", broken: bool = False,
                   work_ms: float = 0.0, direct_delay_us: int = 0, max_batch_size: int = 8) -> Path:
    """The accumulator; ``strategy`` "direct" or "oldest" (dynamic-batched across sequences). ``broken``: one state
    for every sequence (CORRID ignored), the bug the interleaved-vs-alone check exists to catch. ``work_ms``: time
    each execution takes (a sleep), so a comparison of load generators measures the server, not the client.
    ``direct_delay_us``: the direct batcher waits this long for every live sequence's request (slot utilization 1),
    so how requests group into executions does not hang on how fast a client sends the next one. ``max_batch_size``
    1: one slot, so a second live sequence waits in the sequence batcher's backlog."""
    code = SEQUENCE_MODEL.replace("corrid = int(", "corrid = 0 * int(") if broken else SEQUENCE_MODEL
    if work_ms:
        code = code.replace("        responses = []\n",
                            f"        responses = []\n        __import__('time').sleep({work_ms / 1000})\n")
    waits = f"max_queue_delay_microseconds: {direct_delay_us} minimum_slot_utilization: 1.0" if direct_delay_us else ""
    block = f"direct {{ {waits} }}" if strategy == "direct" else "oldest { max_candidate_sequences: 8 max_queue_delay_microseconds: 500 }"
    config = SEQUENCE_CONFIG.format(name=name, strategy=block).replace("max_batch_size: 8",
                                                                        f"max_batch_size: {max_batch_size}")
    return _write(Path(repo) / name, config, "model.py", code)


def decoupled_model(repo: Path, name: str = "stream_n") -> Path:
    return _write(Path(repo) / name, DECOUPLED_CONFIG.format(name=name), "model.py", DECOUPLED_MODEL)


def add_onnx_bytes() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 4])
    b = helper.make_tensor_value_info("B", TensorProto.FLOAT, ["N", 4])
    s = helper.make_tensor_value_info("SUM", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Add", ["A", "B"], ["SUM"])], "add", [a, b], [s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def bls_models(repo: Path) -> tuple[Path, Path]:
    """``bls_add`` (python, BLS) calling ``add_onnx`` (onnxruntime)."""
    return (_write(Path(repo) / "bls_add", BLS_CONFIG, "model.py", BLS_MODEL),
            _write(Path(repo) / "add_onnx", ADD_CONFIG, "model.onnx", add_onnx_bytes()))


def dense_onnx_bytes(rows: int, width: int, layers: int, seed: int) -> bytes:
    """[N, 4] -> [N, 4]: each sample spread over a [rows, width] activation, ``layers`` ReLU layers of
    width x width over it, the mean over the rows, back to 4 (fixed random weights). A matrix product per layer, not a
    vector one: at 64 x 1024 and 4 layers a step costs about 2 ms of onnxruntime time per request (2 threads), so a
    comparison of load generators measures the server, not the client."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)

    weights = [weight("W_in", (4, rows * width)), weight("W_out", (width, 4)),
               numpy_helper.from_array(np.array([-1, rows, width], np.int64), "shape")]
    nodes = [helper.make_node("MatMul", ["X", "W_in"], ["spread"]),
             helper.make_node("Reshape", ["spread", "shape"], ["H0"])]
    for i in range(layers):
        weights.append(weight(f"W{i}", (width, width)))
        nodes += [helper.make_node("MatMul", [f"H{i}", f"W{i}"], [f"M{i}"]),
                  helper.make_node("Relu", [f"M{i}"], [f"H{i + 1}"])]
    nodes += [helper.make_node("ReduceMean", [f"H{layers}"], ["pooled"], axes=[1], keepdims=0),
              helper.make_node("MatMul", ["pooled", "W_out"], ["Y"])]
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


DENSE_CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [{{ name: "X" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "Y" data_type: TYPE_FP32 dims: [4] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
"""

DENSE_ENSEMBLE_CONFIG = """
name: "dense_pipeline"
platform: "ensemble"
max_batch_size: 4
input [{ name: "INPUT" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [
  { model_name: "dense_a" model_version: -1 input_map { key: "X" value: "INPUT" } output_map { key: "Y" value: "hidden" } },
  { model_name: "dense_b" model_version: -1 input_map { key: "X" value: "hidden" } output_map { key: "Y" value: "OUTPUT" } }
] }
"""


def dense_ensemble(repo: Path, rows: int = 64, width: int = 1024, layers: int = 4) -> Path:
    """``dense_pipeline``: an ensemble of two ONNX MLP steps (``dense_a`` then ``dense_b``) that each cost
    milliseconds, for comparing the engine with perf_analyzer on an ensemble where the server's time dominates."""
    for seed, name in enumerate(("dense_a", "dense_b")):
        _write(Path(repo) / name, DENSE_CONFIG.format(name=name), "model.onnx", dense_onnx_bytes(rows, width, layers, seed))
    ensemble = Path(repo) / "dense_pipeline"
    (ensemble / "1").mkdir(parents=True, exist_ok=True)  # an ensemble's version directory is empty
    (ensemble / "config.pbtxt").write_text(DENSE_ENSEMBLE_CONFIG.strip() + "\n")
    return ensemble


#: the kinds' engine tests measure plumbing, not figures: short windows, a stability limit any window meets
FAST = MeasurementSettings(window_ms=300, warmup_ms=100, max_trials=4, stability_percentage=90.0,
                           client_bound_percent=1000.0)


def served(tmp_path_factory, write):
    """A module fixture's body: ``write(repo)`` fills a fresh repository and returns the deployment directories; an
    embedded server over it with each loaded is yielded, and stopped afterwards."""
    repo = tmp_path_factory.mktemp("repo")
    directories = write(repo)
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        for directory in directories:
            server.load(directory)
        yield server


def all_kinds(repo: Path) -> Path:
    sequence_model(repo, "seq_direct", "direct")
    sequence_model(repo, "seq_oldest", "oldest")
    decoupled_model(repo)
    bls_models(repo)
    return Path(repo)
