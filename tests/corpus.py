"""A corpus of model repositories written the way teams and Triton's own examples write them, sound and broken, by
the tests (nothing downloaded). :func:`write_corpus` fills one repository; :data:`SOUND` and :data:`BROKEN` name its
deployments (BROKEN with the words each one's failures must carry).

Sound:
- ``add_sub_<dtype>``: ONNX, OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1 (the python backend's add_sub
  example), one per numeric dtype; version policies in turn ``latest`` (1 of 2), ``all`` (2) and ``specific`` [1],
  the ``specific`` ones with a label file on OUTPUT0;
- ``batchless``, ``strings`` (BYTES), ``pipeline`` (an ensemble of ``scale`` and ``pool``): from the kinds fixture;
- ``seq_onnx_<control dtype>_<strategy>`` and ``seq_ts_...``: stateless sequence models, y = x * READY + START,
  control inputs of TYPE_INT32, TYPE_FP32 and TYPE_BOOL, ``direct`` and ``oldest``, idle times as teams write them
  (:data:`IDLE_US`);
- ``seq_python``: the python accumulator with one slot (``max_batch_size: 1``), so a second sequence waits in the
  backlog;
- ``repeat`` and ``square_int32``: python decoupled models shaped as the python backend's examples;
- ``bls_add`` calling ``add_onnx``.

Broken: a graph fixed to batch 1 under ``max_batch_size: 8``, a stub that exits, a model that kills the server
under it, a model that hangs, a decoupled model that never sends its final response, outputs of the wrong shape, and
a config that does not parse.
"""
from __future__ import annotations

from pathlib import Path

from tests import kinds
from tests.helpers import kinds_fixture

DTYPES = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16",
          "uint32": "UINT32", "uint64": "UINT64", "float16": "FP16", "float32": "FP32", "float64": "FP64"}
POLICIES = ("latest", "all", "specific")
CONTROLS = (("int32", "direct", "onnx"), ("fp32", "oldest", "onnx"), ("bool", "direct", "onnx"),
            ("int32", "oldest", "ts"), ("fp32", "direct", "ts"))
#: max_sequence_idle_microseconds of the sequence models CONTROLS names: Triton's examples' 5 s on one, the field left
#: out (Triton's default, 1 s) on one, 2 s on the others. The conformance check waits each out once and a half (7.6 s
#: at 5 s): 5 s on all five cost the corpus 30 s
IDLE_US = {"seq_onnx_fp32_oldest": 5000000, "seq_ts_fp32_direct": 0}

SOUND = ([f"add_sub_{d}" for d in DTYPES] + ["batchless", "strings", "pipeline"]
         + [f"seq_{fmt}_{c}_{s}" for c, s, fmt in CONTROLS] + ["seq_python", "repeat", "square_int32", "bls_add"])
#: the corpus in two halves of about equal time, one per xdist worker (tests/test_corpus.py, test_corpus_kinds.py):
#: the plain deployments, and the sequence, decoupled and BLS ones
HALVES = {
    "plain": {f"add_sub_{d}" for d in DTYPES} | {"batchless", "strings", "pipeline", "batch_one", "stub_exits",
                                                 "kills_server", "unparsable", "wrong_shape"},
    "kinds": {f"seq_{fmt}_{c}_{s}" for c, s, fmt in CONTROLS} | {"seq_python", "repeat", "square_int32", "bls_add",
                                                                  "hangs", "never_final"},
}
#: what a deployment of a half needs beside it (an ensemble's steps, a BLS model's callee)
NEEDS = {"pipeline": ("scale", "pool"), "bls_add": ("add_onnx",)}
#: each broken deployment, and what its failures must say
BROKEN = {
    "batch_one": "for the model to support batching",
    "stub_exits": "is not healthy",
    "kills_server": "died",
    "hangs": "Hang: no response within",
    "never_final": "no final response within",
    "wrong_shape": "shape",
    "unparsable": "not a ModelConfig",
}

SQUARE_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """IN responses per request, each OUT = IN (the python backend's square_int32 example), then the final flag."""

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)[0])
            sender = request.get_response_sender()
            for _ in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
SQUARE_CONFIG = '''
name: "square_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]
instance_group [{ kind: KIND_CPU count: 1 }]
'''
# python models that break in their own way, each on a plain [4] FP32 in and out
PLAIN_CONFIG = '''
name: "{name}"
backend: "python"
max_batch_size: 4
input [{{ name: "X" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "Y" data_type: TYPE_FP32 dims: [4] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
{extra}
'''
PLAIN_MODEL = '''
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        {body}
'''
BREAKS = {
    "stub_exits": "os._exit(3)",
    "kills_server": "os.kill(os.getppid(), 9)",  # the stub's parent is tritonserver: the server dies under it
    "hangs": "time.sleep(3600)",
    "wrong_shape": ("return [pb_utils.InferenceResponse([pb_utils.Tensor('Y', np.zeros((pb_utils.get_input_tensor_by_"
                    "name(r, 'X').as_numpy().shape[0], 3), np.float32))]) for r in requests]"),
    "never_final": ("[r.get_response_sender().send(pb_utils.InferenceResponse([pb_utils.Tensor('Y', pb_utils.get_"
                    "input_tensor_by_name(r, 'X').as_numpy())])) for r in requests]"),
}


def _onnx(path: Path, nodes, inputs, outputs, initializers=()) -> None:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, path.parent.parent.name, [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(initializers))
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), str(path))


def _config(repo: Path, name: str, text: str) -> None:
    (repo / name).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(f'name: "{name}"\n' + text.strip() + "\n")


def _add_sub(repo: Path, dtype: str, policy: str) -> None:
    import numpy as np
    from onnx import helper

    proto = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    name = f"add_sub_{dtype}"
    for version in (1, 2):
        _onnx(repo / name / str(version) / "model.onnx",
              [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
               helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
              [(n, proto, ["b", 4]) for n in ("INPUT0", "INPUT1")], [(n, proto, ["b", 4]) for n in ("OUTPUT0", "OUTPUT1")])
    triton = DTYPES[dtype]
    labels = ' label_filename: "add_labels.txt"' if policy == "specific" else ""
    rule = {"latest": "latest { num_versions: 1 }", "all": "all { }", "specific": "specific { versions: [1] }"}[policy]
    _config(repo, name, f'''
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: {{ {rule} }}
input [{{ name: "INPUT0" data_type: TYPE_{triton} dims: [4] }}, {{ name: "INPUT1" data_type: TYPE_{triton} dims: [4] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_{triton} dims: [4]{labels} }}, {{ name: "OUTPUT1" data_type: TYPE_{triton} dims: [4] }}]
dynamic_batching {{ }}''')
    if labels:
        (repo / name / "add_labels.txt").write_text("w\nx\ny\nz\n")


def _sequence(repo: Path, control: str, strategy: str, fmt: str) -> None:
    """y = x * READY + START, stateless: both control tensors must reach the model with their declared type."""
    from onnx import TensorProto, helper

    name = f"seq_{fmt}_{control}_{strategy}"
    proto = {"int32": TensorProto.INT32, "fp32": TensorProto.FLOAT, "bool": TensorProto.BOOL}[control]
    pair = {"int32": "int32_false_true: [0, 1]", "fp32": "fp32_false_true: [0, 1]",
            "bool": "bool_false_true: [false, true]"}[control]
    if fmt == "onnx":
        _onnx(repo / name / "1" / "model.onnx",
              [helper.make_node("Cast", ["START"], ["s"], to=TensorProto.FLOAT),
               helper.make_node("Cast", ["READY"], ["r"], to=TensorProto.FLOAT),
               helper.make_node("Mul", ["x", "r"], ["xr"]), helper.make_node("Add", ["xr", "s"], ["y"])],
              [("x", TensorProto.FLOAT, ["b", 1]), ("START", proto, ["b", 1]), ("READY", proto, ["b", 1])],
              [("y", TensorProto.FLOAT, ["b", 1])])
        tensors = ('input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
                   'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]')
        start, ready = "START", "READY"
    else:
        import torch

        class Seq(torch.nn.Module):
            def forward(self, x: torch.Tensor, start: torch.Tensor, ready: torch.Tensor) -> torch.Tensor:
                return x * ready.float() + start.float()

        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        torch.jit.script(Seq()).save(str(repo / name / "1" / "model.pt"))
        tensors = ('input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [1] }]\n'
                   'output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [1] }]')
        start, ready = "START__1", "READY__2"
    block = "direct { }" if strategy == "direct" else "oldest { max_candidate_sequences: 4 }"
    idle_us = IDLE_US.get(name, 2000000)
    idle = f"\n  max_sequence_idle_microseconds: {idle_us}" if idle_us else ""
    _config(repo, name, f'''
platform: "{'onnxruntime_onnx' if fmt == 'onnx' else 'pytorch_libtorch'}"
max_batch_size: 4
{tensors}
sequence_batching {{{idle}
  {block}
  control_input [
    {{ name: "{start}" control [{{ kind: CONTROL_SEQUENCE_START {pair} }}] }},
    {{ name: "{ready}" control [{{ kind: CONTROL_SEQUENCE_READY {pair} }}] }}
  ]
}}
instance_group [{{ kind: KIND_CPU count: 1 }}]''')


def _python(repo: Path, name: str, body: str, extra: str = "") -> None:
    kinds._write(repo / name, PLAIN_CONFIG.format(name=name, extra=extra), "model.py",
                 PLAIN_MODEL.replace("{body}", body))


def write_corpus(repo: Path, half: str = "") -> Path:
    """The corpus, or one of its :data:`HALVES` (the others' directories removed, what a kept one needs kept)."""
    repo = Path(repo)
    repo.mkdir(parents=True, exist_ok=True)
    for i, dtype in enumerate(DTYPES):
        _add_sub(repo, dtype, POLICIES[i % len(POLICIES)])
    fixture = kinds_fixture().make(repo / ".kinds")
    for name in ("batchless", "strings", "pipeline", "scale", "pool"):
        (fixture / name).rename(repo / name)
    import shutil

    shutil.rmtree(fixture)
    for control, strategy, fmt in CONTROLS:
        _sequence(repo, control, strategy, fmt)
    kinds.sequence_model(repo, "seq_python", "direct", max_batch_size=1)
    kinds.decoupled_model(repo, "repeat")
    kinds._write(repo / "square_int32", SQUARE_CONFIG, "model.py", SQUARE_MODEL)
    kinds.bls_models(repo)
    _broken(repo)
    if half:
        import shutil

        kept = HALVES[half] | {n for name in HALVES[half] for n in NEEDS.get(name, ())}
        for directory in [d for d in repo.iterdir() if d.is_dir() and d.name not in kept]:
            shutil.rmtree(directory)
    return repo


def _broken(repo: Path) -> None:
    from onnx import TensorProto, helper

    _onnx(repo / "batch_one" / "1" / "model.onnx", [helper.make_node("Identity", ["x"], ["y"])],
          [("x", TensorProto.FLOAT, [1, 4])], [("y", TensorProto.FLOAT, [1, 4])])
    _config(repo, "batch_one", '''
platform: "onnxruntime_onnx"
max_batch_size: 8
dynamic_batching { }
input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]''')
    for name, body in BREAKS.items():
        _python(repo, name, body, "model_transaction_policy { decoupled: true }" if name == "never_final" else "")
    _config(repo, "unparsable", 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\ninput [{ name: "x" data_type: ')
    (repo / "unparsable" / "1").mkdir()
