"""The ``mixed`` precision's recipes (docs/precision.md): the casts an autocast trace records, the fp32 islands of a
scripted module, the ops a converted ONNX keeps in fp32, the output-dtype check every export makes, and mixed judged
by fp16's rules."""
import numpy as np
import pytest

from tritonsuite.deploy.export import ExportMismatch, ExportUnsupported, artifact_session, cache_key, \
    check_output_dtypes, export
from tritonsuite.core.spec import FP32_MODULES, PRECISIONS, ModelSpec, TensorSpec, rule_precision
from tritonsuite.deploy.formats.onnx import MIXED_OP_BLOCK_LIST

WIDTH = 8


def _build(checkpoint=None, norm=True):
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH)]
    layers += [torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, WIDTH), torch.nn.Softmax(-1)] if norm else \
        [torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH)]
    net = torch.nn.Sequential(*layers).eval()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return (self.net(x),)

    return Net().eval()


def _example(batch_size, seed=0):
    return {"INPUT__0": np.random.default_rng(seed).standard_normal((batch_size, WIDTH)).astype(np.float32)}


def _spec(norm=True) -> ModelSpec:
    return ModelSpec(name="mixednet" if norm else "plainnet", size="tiny",
                     build=lambda checkpoint=None: _build(checkpoint, norm),
                     inputs=(TensorSpec("INPUT__0", "float32", (WIDTH,)),),
                     outputs=(TensorSpec("OUTPUT__0", "float32", (WIDTH,)),), example_inputs=_example,
                     tolerances={"fp32": {"OUTPUT__0": (1e-5, 1e-5)}, "fp16": {"OUTPUT__0": (2e-2, 2e-2)}},
                     config={"norm": norm})


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("artifacts")


def test_mixed_is_a_named_precision_judged_by_fp16s_rules():
    assert PRECISIONS == ("fp32", "fp16", "mixed")
    assert rule_precision("mixed") == "fp16" and rule_precision("fp32") == "fp32"
    spec = _spec()
    assert spec.tolerance("mixed", "OUTPUT__0") == spec.tolerance("fp16", "OUTPUT__0") == (2e-2, 2e-2)
    # its own cache entries, apart from fp16's, keyed on its recipe
    assert len({cache_key(spec, "onnx", p) for p in PRECISIONS}) == 3


def _cast_to(value) -> str | None:
    """The dtype an ``aten::to`` producing ``value`` casts to ("half", "float"), or None when no cast produced it."""
    node = value.node()
    if node.kind() != "aten::to":
        return None
    return {5: "half", 6: "float"}.get(node.inputsAt(1).toIValue())


def test_trace_records_autocast_casts_and_keeps_fp32_islands(cache):
    import torch

    spec = _spec()
    artifact = export(spec, "ts-trace", "mixed", cache)
    nodes = list(torch.jit.load(str(artifact.path)).inlined_graph.nodes())
    # the casts autocast made are in the graph: each linear's input, weight and bias cast to half
    linears = [n for n in nodes if n.kind() == "aten::linear"]
    assert len(linears) == 2 and all(_cast_to(i) == "half" for n in linears for i in n.inputs()), linears
    # the LayerNorm and Softmax islands take fp32 (CPU autocast alone would run them in half)
    islands = [n for n in nodes if n.kind() in ("aten::layer_norm", "aten::softmax")]
    assert len(islands) == 2 and all(_cast_to(n.inputsAt(0)) == "float" for n in islands), islands
    # and the output is cast to the configuration's fp32
    assert _cast_to(list(nodes[-1].inputs())[0]) == "float"
    out = artifact_session(spec, artifact.path, "ts-trace")(_example(3, 1))["OUTPUT__0"]
    assert out.dtype == np.float32


def test_script_keeps_the_spec_fp32_types_as_islands(cache):
    import torch

    spec = _spec()
    artifact = export(spec, "ts-script", "mixed", cache)
    scripted = torch.jit.load(str(artifact.path))
    params = {name: p.dtype for name, p in scripted.named_parameters()}
    assert params["inner.net.0.weight"] == torch.float16  # the rest is half
    assert params["inner.net.1.inner.weight"] == torch.float32  # LayerNorm, an island
    assert "inner.net.3.inner" in {name for name, _ in scripted.named_modules()}  # Softmax, an island
    assert artifact_session(spec, artifact.path, "ts-script")(_example(2))["OUTPUT__0"].dtype == np.float32


def test_script_refuses_a_model_without_fp32_types(cache):
    spec = _spec(norm=False)
    with pytest.raises(ExportUnsupported, match=r"plainnet:tiny has no module of the fp32 types \(LayerNorm, .*\): "
                                                r"its mixed would be its fp16"):
        export(spec, "ts-script", "mixed", cache)
    assert "LayerNorm" in FP32_MODULES


def test_converted_onnx_keeps_blocked_ops_in_fp32_and_its_io_types(cache):
    import onnx

    spec = _spec()
    model = onnx.shape_inference.infer_shapes(onnx.load(str(export(spec, "onnx", "mixed", cache).path)))
    types = {v.name: v.type.tensor_type.elem_type for v in
             list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)}
    types.update({i.name: i.data_type for i in model.graph.initializer})
    float32, float16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    assert [types[i.name] for i in model.graph.input] == [float32]
    assert [types[o.name] for o in model.graph.output] == [float32]
    ops = {n.op_type for n in model.graph.node}
    blocked = [n for n in model.graph.node if n.op_type in MIXED_OP_BLOCK_LIST]
    assert {"LayerNormalization", "Softmax"} <= {n.op_type for n in blocked}, ops
    for node in blocked:  # every floating input and output of a blocked op is fp32
        assert {types[t] for t in list(node.input) + list(node.output) if t in types} <= {float32, 1 << 20}, node
    matmuls = [n for n in model.graph.node if n.op_type in ("Gemm", "MatMul")]
    assert matmuls and all(types[n.output[0]] == float16 for n in matmuls)


def test_output_dtypes_are_checked_in_one_line():
    spec = _spec()
    check_output_dtypes({"OUTPUT__0": np.zeros((2, WIDTH), np.float32)}, spec, "onnx mixed artifact of x")
    with pytest.raises(ExportMismatch) as raised:
        check_output_dtypes({"OUTPUT__0": np.zeros((2, WIDTH), np.float16)}, spec, "onnx mixed artifact of x")
    assert str(raised.value) == ("onnx mixed artifact of x: output OUTPUT__0 is float16, the configuration declares "
                                 "float32 (TYPE_FP32)")


def test_an_artifact_with_half_outputs_fails_its_export(cache, monkeypatch):
    """A conversion that leaves its outputs half fails the export (nothing cached), not only the check above."""
    from tritonsuite.deploy.formats import onnx as onnx_format

    def half_outputs(path, block_list=()):  # a conversion that ends with a cast of its output to half
        import onnx

        model = onnx.load(str(path))
        out = model.graph.output[0]
        for node in model.graph.node:
            node.output[:] = [f"{o}__fp32" if o == out.name else o for o in node.output]
        model.graph.node.append(onnx.helper.make_node("Cast", [f"{out.name}__fp32"], [out.name],
                                                      to=onnx.TensorProto.FLOAT16))
        out.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
        onnx.save(model, str(path))

    monkeypatch.setattr(onnx_format, "to_float16", half_outputs)
    spec = _spec(norm=False)
    with pytest.raises(ExportMismatch, match=r"^onnx mixed artifact of plainnet:tiny: output OUTPUT__0 is float16, "
                                             r"the configuration declares float32 \(TYPE_FP32\)$"):
        export(spec, "onnx", "mixed", cache / "half-outputs")
    assert not list((cache / "half-outputs").glob("*onnx*")), "a refused export leaves nothing in the cache"


def test_mixed_is_supported_wherever_fp16_is():
    from tritonsuite.models import default_registry

    assert _spec().supported_precisions == ("fp32", "fp16", "mixed")
    registry = default_registry()
    for name in ("bert", "fastpitch", "nnunet", "tft", "wide_deep"):
        assert "mixed" in registry.get(name, "tiny").supported_precisions
    assert registry.get("identity", "tiny").supported_precisions == ("fp32",)


def test_tensorrt_mixed_pins_the_listed_layers_to_fp32():
    """TensorRT cannot be installed here: the pinning walks a network through TensorRT's documented Python API,
    exercised with a stand-in exposing those names (layer types, the concrete classes' ``op``, ``precision``,
    ``set_output_type``, the builder flag). A build on a TensorRT host is still to be done."""
    from enum import Enum
    from types import SimpleNamespace

    from tritonsuite.deploy.formats.tensorrt import pin_fp32_layers

    LayerType = Enum("LayerType", "NORMALIZATION SOFTMAX REDUCE UNARY ELEMENTWISE MATRIX_MULTIPLY SHUFFLE")
    UnaryOperation = Enum("UnaryOperation", "EXP LOG SQRT RECIP ABS")
    ElementWiseOperation = Enum("ElementWiseOperation", "POW SUM PROD")
    float32, float16, int32 = "float32", "float16", "int32"

    class Layer:
        def __init__(self, kind, op=None, dtype=float16):
            self.type, self.op, self.precision, self.num_outputs = kind, op, None, 1
            self._out, self.set_types = SimpleNamespace(dtype=dtype), {}

        def get_output(self, i):
            return self._out

        def set_output_type(self, i, dtype):
            self.set_types[i] = dtype

    class IUnaryLayer(Layer):
        pass

    class IElementWiseLayer(Layer):
        pass

    layers = [Layer(LayerType.MATRIX_MULTIPLY), Layer(LayerType.NORMALIZATION), Layer(LayerType.SOFTMAX),
              Layer(LayerType.REDUCE), Layer(LayerType.REDUCE, dtype=int32), Layer(LayerType.UNARY, UnaryOperation.EXP),
              Layer(LayerType.UNARY, UnaryOperation.ABS), Layer(LayerType.ELEMENTWISE, ElementWiseOperation.POW),
              Layer(LayerType.ELEMENTWISE, ElementWiseOperation.SUM), Layer(LayerType.SHUFFLE)]
    flags = []
    trt = SimpleNamespace(LayerType=LayerType, UnaryOperation=UnaryOperation,
                          ElementWiseOperation=ElementWiseOperation, IUnaryLayer=IUnaryLayer,
                          IElementWiseLayer=IElementWiseLayer, float32=float32, float16=float16,
                          BuilderFlag=SimpleNamespace(OBEY_PRECISION_CONSTRAINTS="obey"))
    network = SimpleNamespace(num_layers=len(layers), get_layer=lambda i: layers[i])
    config = SimpleNamespace(set_flag=flags.append)
    assert pin_fp32_layers(trt, network, config) == 5
    assert [i for i, layer in enumerate(layers) if layer.precision == float32] == [1, 2, 3, 5, 7]
    assert all(layers[i].set_types == {0: float32} for i in (1, 2, 3, 5, 7))
    assert flags == ["obey"]


def test_trace_refuses_an_lstm_under_cpu_autocast_on_every_cpu():
    """CPU autocast's fp16 LSTM is oneDNN's: refused by a CPU without AVX512-FP16, mis-traced (float times half) on
    one with it, so the verdict would depend on the host: the case skips with its reason everywhere."""
    import torch

    from tritonsuite.deploy.formats import get_format

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(WIDTH, WIDTH, batch_first=True)

        def forward(self, x):
            return (self.lstm(x.unsqueeze(1))[0][:, 0],)

    spec = _spec()
    with pytest.raises(ExportUnsupported, match=r"mixednet:tiny as ts-trace mixed on the CPU: autocast's fp16 LSTM "
                                                r"is oneDNN's, refused or mis-traced depending on the CPU"):
        get_format("ts-trace").prepare(Recurrent().eval(), spec, "mixed", "cpu")
    assert get_format("ts-trace").prepare(_build(), spec, "mixed", "cpu") is not None  # no LSTM: traced as before
