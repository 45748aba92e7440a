"""ONNX through ``torch.onnx.export`` (TorchScript-based exporter, fixed opset), every batch and -1 dim dynamic.

fp16: torch's exporter writes graphs onnxruntime refuses from a half module (BERT's LayerNormalization bound to
float and float16), so a half module is exported in fp32 (its half-rounded weights, widened) and the graph converted
with onnxconverter-common's ``convert_float_to_float16`` keeping its I/O types: the graph takes and gives the dtypes
the configuration declares (Cast nodes at its edges), computes in fp16 inside, and deploys with the same config.pbtxt
as its fp32 artifact. That is fp16 storage; onnxruntime's CPU provider computes fp32 inside most ops.

mixed: the fp32 module exported in fp32 and converted the same way with :data:`MIXED_OP_BLOCK_LIST` (besides the
converter's own default block list): those op types stay fp32, with Cast nodes around them. Exporting under autocast
instead gave an ONNX onnxruntime refused.
"""
from __future__ import annotations

import copy
from pathlib import Path

from tritonsuite.deploy.formats.base import Format

ONNX_OPSET = 17
#: op types a mixed ONNX keeps in fp32: normalisations, softmax, reductions and the range-hungry element-wise ops
#: that follow them (Exp, Log, Pow, Sqrt, Reciprocal)
MIXED_OP_BLOCK_LIST = ("LayerNormalization", "BatchNormalization", "InstanceNormalization", "GroupNormalization",
                       "Softmax", "LogSoftmax", "ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                       "ReduceLogSumExp", "ReduceProd", "CumSum", "Exp", "Log", "Pow", "Sqrt", "Reciprocal")


class OnnxFormat(Format):
    name, display = "onnx", "ONNX"

    def prepare(self, module, spec, precision: str, device: str):
        return module if precision == "mixed" else super().prepare(module, spec, precision, device)

    def mixed_recipe(self, spec) -> dict:
        return {"op_block_list": list(MIXED_OP_BLOCK_LIST)}

    def write(self, module, spec, path: Path, example: tuple, source: Path | None = None,
              batch_sizes: tuple[int, ...] = (), precision: str = "fp32") -> None:
        import torch

        dynamic_axes = {}
        for t in spec.inputs + spec.outputs:
            dynamic_axes[t.name] = {0: "batch"}
            for axis, dim in enumerate(t.shape, start=1):
                if dim == -1:
                    dynamic_axes[t.name][axis] = f"{t.name}_dim{axis}"
        if precision == "fp16":  # the .half() module's rounded weights, exported in fp32
            module = copy.deepcopy(module).float()
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(module, example, str(path), input_names=[t.name for t in spec.inputs],
                              output_names=[t.name for t in spec.outputs], dynamic_axes=dynamic_axes,
                              opset_version=ONNX_OPSET, dynamo=False)
        keep_declared_inputs(path, spec.inputs)
        if precision == "mixed":
            to_float16(path, MIXED_OP_BLOCK_LIST)
        elif precision == "fp16":
            to_float16(path)


def keep_declared_inputs(path: Path, inputs) -> None:
    """Give the graph back every declared input the exporter dropped (it keeps only those the graph reads: TFT's
    placeholders of its fixed eight-tensor signature). The stock onnxruntime backend refuses a configuration whose
    input count differs from the model's ("configuration expects 8 inputs, model provides 3"), so the graph takes the
    whole signature, in the declared order, and ignores what it never reads, as the TorchScript artifacts do."""
    import onnx

    model = onnx.load(str(path))
    present = {i.name: i for i in model.graph.input}
    if all(t.name in present for t in inputs):
        return
    from tritonsuite.core.spec import numpy_dtype

    declared = []
    for t in inputs:
        if t.name in present:
            declared.append(present.pop(t.name))
            continue
        shape = ["batch"] + [d if d >= 0 else f"{t.name}_dim{axis}" for axis, d in enumerate(t.shape, start=1)]
        elem = onnx.helper.np_dtype_to_tensor_dtype(numpy_dtype(t.dtype))
        declared.append(onnx.helper.make_tensor_value_info(t.name, elem, shape))
    rest = list(present.values())  # initializers listed as inputs, if any: after the declared ones
    del model.graph.input[:]
    model.graph.input.extend(declared + rest)
    onnx.save(model, str(path))


def to_float16(path: Path, block_list: tuple[str, ...] = ()) -> None:
    """Convert the fp32 ONNX at ``path`` to fp16 in place, keeping its inputs' and outputs' types; ops in
    ``block_list`` (op types) and in the converter's default block list stay fp32 with casts around them."""
    import onnx
    from onnxconverter_common import float16

    model = onnx.load(str(path))
    _separate_consumed_outputs(model)
    if block_list:
        _inline_initializer_identities(model)
    # the model's own casts to float stay casts: converted, their output would be typed float16 while the node
    # still casts to float, and onnxruntime refuses the graph. The ops after them are converted: an fp32 export
    # has no cast back to half to mark where a model's fp32 island ends (a known limit, docs/precision.md)
    casts = [n.name for n in model.graph.node if n.op_type == "Cast"
             and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in n.attribute)]
    blocked = list(dict.fromkeys(list(float16.DEFAULT_OP_BLOCK_LIST) + list(block_list))) if block_list else None
    declared = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
    converted = float16.convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked,
                                                 node_block_list=casts)
    _restore_output_types(converted, declared)
    onnx.save(converted, str(path))


def _restore_output_types(model, declared: dict[str, int]) -> None:
    """onnxconverter-common 1.16 types a graph output float16 despite ``keep_io_types`` when a blocked op produces
    it (a Softmax last: its output is cast to half, measured); the Cast to half becomes a Cast to the declared type.
    Any other mistyped output is left for export's output-dtype check to refuse."""
    producers = {o: n for n in model.graph.node for o in n.output}
    for out in model.graph.output:
        want = declared.get(out.name)
        if want is None or out.type.tensor_type.elem_type == want:
            continue
        node = producers.get(out.name)
        if node is not None and node.op_type == "Cast":
            for a in node.attribute:
                if a.name == "to":
                    a.i = want
            out.type.tensor_type.elem_type = want


def _inline_initializer_identities(model) -> None:
    """torch's exporter shares equal initializers through Identity nodes (every LayerNorm's zero bias read from
    one); onnxconverter-common 1.16 converts the initializer to half but leaves the Identity's output typed float
    where a blocked op reads it, and onnxruntime refuses the graph (measured on BERT, FastPitch, nnU-Net, TFT). Each
    such Identity becomes its own copy of the initializer."""
    from onnx import numpy_helper

    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    outputs = {o.name for o in graph.output}
    for node in [n for n in graph.node if n.op_type == "Identity" and n.input[0] in initializers
                 and n.output[0] not in outputs]:
        graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(initializers[node.input[0]]),
                                                         node.output[0]))
        graph.node.remove(node)


def _separate_consumed_outputs(model) -> None:
    """A graph output that other nodes also read (FastPitch's pitch, fed to its decoder) gets its own Identity:
    with ``keep_io_types`` the converter types the output float32 but its internal readers float16, and onnxruntime
    refuses the graph."""
    import onnx

    graph = model.graph
    outputs = {o.name for o in graph.output}
    read = {i for n in graph.node for i in n.input}
    for name in sorted(outputs & read):
        internal = f"{name}__internal"
        for node in graph.node:
            node.output[:] = [internal if o == name else o for o in node.output]
            node.input[:] = [internal if i == name else i for i in node.input]
        graph.node.append(onnx.helper.make_node("Identity", [internal], [name], name=f"{name}__output"))

