"""The checks Triton's stock onnxruntime and pytorch backends (r24.10, the release of the wheel's tritonserver 2.51)
make when a model loads and when it executes, made the same way by the embedded server's stand-ins.

Read from onnxruntime_backend's ``ModelInstanceState`` (``ValidateInputs``, ``ValidateOutputs``,
``Validate*SequenceControl``, ``CompareDimsSupported``) and pytorch_backend's (``ValidateInputs``,
``ValidateOutputs``, ``GetNamingConvention``, ``ModelConfigDataTypeToTorchType``, ``ReadOutputTensors``): a
deployment the stock backend refuses at load is refused here with the stock backend's words, so a repository that
passes on the embedded server loads on an NGC container too. docs/stock-backends.md has the table, one test per row
in tests/unit/test_stockchecks.py.

Like :mod:`standin`, it imports nothing of tritonsuite: both files are copied into the embedded server's backend
directory.
"""
from __future__ import annotations

import os

#: data types pytorch_backend r24.10 maps to torch (``ModelConfigDataTypeToTorchType``); TYPE_STRING is a List[str]
TORCH_TYPES = ("TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16",
               "TYPE_FP32", "TYPE_FP64")
#: the sequence controls in the order the stock backends validate them
CONTROL_KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY",
                 "CONTROL_SEQUENCE_CORRID")
#: where a server's stand-ins note that one model set pytorch's process-wide inter-op thread count
INTEROP_MARK_ENV = "TRITONSUITE_INTEROP_MARK"
#: the onnxruntime backend's ``default-max-batch-size`` (what auto-complete gives a model that can batch)
DEFAULT_MAX_BATCH_SIZE = 4
ORT_TYPES = {"float": "FP32", "float16": "FP16", "double": "FP64", "bfloat16": "BF16", "bool": "BOOL",
             "string": "STRING", **{f"{s}int{b}": f"{s.upper()}INT{b}" for s in ("", "u") for b in (8, 16, 32, 64)}}


class Refused(ValueError):
    """A model the stock backend refuses to load (or a response it answers with an error), in its words."""


def shape_text(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def onnx_tensors(values) -> list[tuple[str, str, list[int]]]:
    """onnxruntime's NodeArgs as (name, Triton data type, dims with -1 for a symbolic or unknown dim)."""
    found = []
    for v in values:
        element = v.type[len("tensor("):-1] if v.type.startswith("tensor(") else ""
        data_type = f"TYPE_{ORT_TYPES.get(element, 'INVALID')}"
        found.append((v.name, data_type, [d if isinstance(d, int) and d >= 0 else -1 for d in (v.shape or [])]))
    return found


def control_inputs(config: dict) -> list[tuple[str, str, str]]:
    """The sequence batcher's control tensors as (kind, tensor name, data type), in :data:`CONTROL_KINDS` order:
    Triton fills them and the stock backends hand them to the model as inputs."""
    found = {}
    for tensor in (config.get("sequence_batching") or {}).get("control_input", []):
        for control in tensor.get("control", []):
            kind = control.get("kind", "CONTROL_SEQUENCE_START")
            if kind == "CONTROL_SEQUENCE_CORRID":
                data_type = control.get("data_type", "TYPE_UINT64")
            elif control.get("fp32_false_true"):
                data_type = "TYPE_FP32"
            elif control.get("bool_false_true"):
                data_type = "TYPE_BOOL"
            else:
                data_type = "TYPE_INT32"
            found[kind] = (kind, tensor["name"], data_type)
    return [found[k] for k in CONTROL_KINDS if k in found]


def onnx_auto_complete(path: str, default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> dict:
    """What the onnxruntime backend's auto-complete fills in for an ONNX file: its inputs and outputs (Triton data
    types, dims), ``max_batch_size`` (``default_max_batch_size`` when every input and output has a dynamic first
    dimension, else 0 with the full shapes) and, for a model that batches, dynamic batching."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])

    def tensors(values):
        return [(v.name, ORT_TYPES[v.type[len("tensor("):-1]],
                 [d if isinstance(d, int) and d >= 0 else -1 for d in v.shape]) for v in values]

    inputs, outputs = tensors(session.get_inputs()), tensors(session.get_outputs())
    batching = all(dims and dims[0] == -1 for _, _, dims in inputs + outputs)
    written = [[{"name": n, "data_type": f"TYPE_{t}", "dims": d[1:] if batching else d} for n, t, d in found]
               for found in (inputs, outputs)]
    completed = {"max_batch_size": default_max_batch_size if batching else 0, "input": written[0],
                 "output": written[1]}
    if batching and default_max_batch_size > 1:
        completed["dynamic_batching"] = {}
    return completed


def _extra_inputs(config: dict) -> int:
    """Inputs the model has beyond the configured ones: batch inputs, sequence controls and implicit states."""
    states = (config.get("sequence_batching") or {}).get("state", [])
    return len(config.get("batch_input", [])) + len(control_inputs(config)) + len(states)


def _dims(io: dict) -> list[int]:
    shape = io["reshape"].get("shape", []) if "reshape" in io else io.get("dims", [])
    return [int(d) for d in shape]


def compare_dims(model: str, tensor: str, model_shape: list[int], dims: list[int], max_batch_size: int,
                 exact: bool) -> None:
    """onnxruntime_backend's ``CompareDimsSupported``: with batching the model's first dim must be -1, then the
    rest match the configuration's (a -1 of the model matches anything unless ``exact``, as for outputs)."""
    if max_batch_size > 0:
        if not model_shape or model_shape[0] != -1:
            raise Refused(f"model '{model}', tensor '{tensor}': for the model to support batching the shape should "
                          f"have at least 1 dimension and the first dimension must be -1; but shape expected by the "
                          f"model is {shape_text(model_shape)}")
        full = [-1] + dims
        if len(model_shape) != len(full) or any((exact or m != -1) and m != d for m, d in zip(model_shape, full)):
            raise Refused(f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions "
                          f"(shape {shape_text(model_shape)}) but the model configuration specifies {len(full)} "
                          f"dimensions (an initial batch dimension because max_batch_size > 0 followed by the "
                          f"explicit tensor shape, making complete shape {shape_text(full)})")
    elif len(model_shape) != len(dims) or any((exact or m != -1) and m != d for m, d in zip(model_shape, dims)):
        raise Refused(f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions (shape "
                      f"{shape_text(model_shape)}) but the model configuration specifies {len(dims)} dimensions "
                      f"(shape {shape_text(dims)})")


def check_onnx(config: dict, inputs, outputs, overridable=()) -> None:
    """Raise :class:`Refused` where onnxruntime_backend refuses ``config`` for a model with these ``inputs``,
    ``outputs`` and overridable initializers (each (name, data type, dims), :func:`onnx_tensors`)."""
    model, batch = config.get("name", "?"), int(config.get("max_batch_size", 0))
    model_inputs = {n: (t, d) for n, t, d in inputs}
    for _kind, name, data_type in control_inputs(config):
        if name not in model_inputs:
            raise Refused(f"configuration specified sequence control '{name}', but model does not provide that "
                          f"input")
        found_type, dims = model_inputs[name]
        if dims[1 if batch > 0 else 0:] != [1]:
            raise Refused(f"unable to load model '{model}', sequence control '{name}' in model has dims "
                          f"{shape_text(dims[1 if batch > 0 else 0:])} but dims [1] is expected")
        if found_type != data_type:
            raise Refused(f"unable to load model '{model}', sequence control '{name}', the model expects data-type "
                          f"{found_type} but the model configuration specifies data-type {data_type}")
    expected = sum(1 for io in config.get("input", []) if not io.get("optional")) + _extra_inputs(config)
    if len(inputs) != expected:
        raise Refused(f"unable to load model '{model}', configuration expects {expected} inputs, model provides "
                      f"{len(inputs)}")
    model_inputs.update({n: (t, d) for n, t, d in overridable})
    batch_outputs = {t for b in config.get("batch_output", []) for t in b.get("target_name", [])}
    for kind, ios, found in (("input", config.get("input", []), model_inputs),
                             ("output", config.get("output", []), {n: (t, d) for n, t, d in outputs})):
        for io in ios:
            name, data_type = io["name"], io["data_type"]
            if kind == "input" and io.get("optional") and batch != 0:
                raise Refused(f"unable to load model '{model}', optional input '{name}' is not supported for models "
                              f"that support batching")
            if name not in found:
                raise Refused(f"unexpected inference {kind} '{name}', allowed {kind}s are: {', '.join(sorted(found))}")
            found_type, model_shape = found[name]
            if found_type != data_type:
                raise Refused(f"unable to load model '{model}', configuration expects datatype {data_type} for "
                              f"{kind} '{name}', model provides {found_type}")
            dims = _dims(io)
            if kind == "input" and io.get("allow_ragged_batch"):
                if model_shape != [-1]:
                    raise Refused(f"unable to load model '{model}', configuration expects model provides input with "
                                  f"shape [-1]  for ragged input '{name}', model provides {shape_text(model_shape)}")
            elif name in batch_outputs:
                continue
            elif model_shape:
                compare_dims(model, name, model_shape, dims, batch, exact=kind == "output")
            elif any(d != 1 for d in dims):
                raise Refused(f"unable to load model '{model}', scalar tensor '{name}', should only provide 1 in the "
                              f"model configuration when the model doesn't support batching. Model configuration "
                              f"provided: {shape_text(dims)}.")


def convention_index(name: str) -> int | None:
    """``<name>__<index>`` -> index, as pytorch_backend parses it (after the first ``__``), else None."""
    head, sep, tail = name.partition("__")
    return int(tail) if sep and tail.isdigit() else None


def check_libtorch(config: dict, arguments: list[tuple[str, str]]) -> None:
    """Raise :class:`Refused` where pytorch_backend refuses ``config`` for a TorchScript model whose ``forward``
    takes ``arguments`` ((name, type kind: "Tensor", "List", "Dict" or the type's text), ``self`` excluded)."""
    model, batching = config.get("name", "?"), int(config.get("max_batch_size", 0)) > 0
    for kind, name, data_type in control_inputs(config):
        if convention_index(name) is None:
            raise Refused(f"input '{name}' does not follow <name>__<index> naming convention.")
        if kind == "CONTROL_SEQUENCE_CORRID" and data_type not in TORCH_TYPES:
            raise Refused(f"input '{name}' type '{data_type}' is not supported by PyTorch.")
    kinds = [k for _, k in arguments]
    if not (len(kinds) == 1 and kinds[0] == "Dict"):
        if kinds.count("Dict") > 0 and len(kinds) > 1:
            raise Refused("Multiple inputs of kind DictType were detected. Only a single input of type Dict(str, "
                          "Tensor) is supported.")
        other = [k for k in kinds if k not in ("Tensor", "List")]
        if other:
            raise Refused(f"An input of type '{other[0]}' was detected in the model. Only a single input of type "
                          f"Dict(str, Tensor) or input(s) of type Tensor are supported.")
        expected = len(config.get("input", [])) + _extra_inputs(config)
        if len(arguments) != expected:
            raise Refused(f"unable to load model '{model}', configuration expects {expected} inputs, model provides "
                          f"{len(arguments)}")
    for kind in ("input", "output"):
        ios = config.get(kind, [])
        if not ios:
            raise Refused(f"model configuration must contain at least one {kind}, none were specified.")
        for io in ios:
            name, data_type = io["name"], io["data_type"]
            if data_type not in TORCH_TYPES and data_type != "TYPE_STRING":
                raise Refused(f"unsupported datatype {data_type} for {kind} '{name}' for model '{model}'")
            if data_type == "TYPE_STRING" and len(_dims(io)) + batching > 1:
                raise Refused(f"Triton only supports 1 dimensional List of String as {kind} for '{name}' for model "
                              f"'{model}'")


def check_libtorch_output(name: str, data_type: str, found_type: str, ndim: int) -> None:
    """pytorch_backend's checks of one output after ``forward`` (answered to every request of the execution)."""
    if found_type != data_type:
        raise Refused(f"configuration expects datatype {data_type} for output '{name}', model provides {found_type}")
    if ndim == 0:
        raise Refused(f"output '{name}' is a scalar which is not supported.")


def claim_interop_threads(model: str) -> None:
    """pytorch_backend calls ``at::set_num_interop_threads`` at every load that sets INTER_OP_THREAD_COUNT; torch
    throws at the second call in a process and the server aborts (Signal 6). The stand-ins run each model in a
    process of its own, so the server's first such load leaves a mark (:data:`INTEROP_MARK_ENV`, one per server
    launch) and every later one is refused with the error the stock server dies of."""
    mark = os.environ.get(INTEROP_MARK_ENV, "")
    if not mark:
        return
    try:
        fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        with open(mark, encoding="utf-8") as f:
            first = f.read().strip() or "another model"
        raise Refused(f"model '{model}' sets INTER_OP_THREAD_COUNT after '{first}' did on this server: the stock "
                      f"pytorch backend aborts the server here (c10::Error: cannot set number of interop threads "
                      f"after parallel work has started or set_num_interop_threads called); set it in one model "
                      f"at most") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(model)
