"""The stand-ins refuse what Triton's stock onnxruntime and pytorch backends (r24.10) refuse, in their words: one
case per row of docs/stock-backends.md (the ids match; a row without a case, or a case without a row, fails)."""
import re
from pathlib import Path

import pytest

from tritonsuite.deploy.backends.stockchecks import (Refused, check_libtorch, check_libtorch_output, check_onnx,
                                                     claim_interop_threads, control_inputs, INTEROP_MARK_ENV)

DOC = Path(__file__).resolve().parents[2] / "docs" / "stock-backends.md"
X = ("INPUT__0", "TYPE_FP32", [-1, 16])
Y = ("OUTPUT__0", "TYPE_FP32", [-1, 16])


def config(inputs=(("INPUT__0", "TYPE_FP32", [16]),), outputs=(("OUTPUT__0", "TYPE_FP32", [16]),), batch=8, **extra):
    return {"name": "m", "max_batch_size": batch,
            "input": [{"name": n, "data_type": t, "dims": d} for n, t, d in inputs],
            "output": [{"name": n, "data_type": t, "dims": d} for n, t, d in outputs], **extra}


def sequence(*controls):
    """sequence_batching with control tensors: (kind, name, how) with how int32 / fp32 / bool / a CORRID type."""
    found = []
    for kind, name, how in controls:
        control = {"kind": kind}
        if kind == "CONTROL_SEQUENCE_CORRID":
            control["data_type"] = how
        else:
            control[f"{how}_false_true"] = [0, 1]
        found.append({"name": name, "control": [control]})
    return {"sequence_batching": {"control_input": found}}


START = ("CONTROL_SEQUENCE_START", "START", "int32")
ONNX_START = ("START", "TYPE_INT32", [-1, 1])

#: row id -> (check, its arguments, the stock backend's words, or None where it loads)
ONNX = {
    "onnx-input-count": (config(), [X, ("EXTRA", "TYPE_FP32", [-1, 1])], [Y],
                         "configuration expects 1 inputs, model provides 2"),
    "onnx-dropped-input": (config(inputs=(("INPUT__0", "TYPE_FP32", [16]), ("UNUSED__1", "TYPE_FP32", [1]))),
                           [X], [Y], "configuration expects 2 inputs, model provides 1"),
    "onnx-input-name": (config(inputs=(("IN", "TYPE_FP32", [16]),)), [X], [Y],
                        "unexpected inference input 'IN', allowed inputs are: INPUT__0"),
    "onnx-output-name": (config(outputs=(("OUT", "TYPE_FP32", [16]),)), [X], [Y],
                         "unexpected inference output 'OUT', allowed outputs are: OUTPUT__0"),
    "onnx-dtype": (config(inputs=(("INPUT__0", "TYPE_INT64", [16]),)), [X], [Y],
                   "configuration expects datatype TYPE_INT64 for input 'INPUT__0', model provides TYPE_FP32"),
    "onnx-batch-dimension": (config(), [("INPUT__0", "TYPE_FP32", [1, 16])], [("OUTPUT__0", "TYPE_FP32", [1, 16])],
                             "for the model to support batching the shape should have at least 1 dimension and "
                             "the first dimension must be -1; but shape expected by the model is [1,16]"),
    "onnx-input-dims": (config(inputs=(("INPUT__0", "TYPE_FP32", [8]),)), [X], [Y],
                        "the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 2 "
                        "dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit "
                        "tensor shape, making complete shape [-1,8])"),
    "onnx-dynamic-input-dim": (config(inputs=(("INPUT__0", "TYPE_FP32", [16]),)),
                               [("INPUT__0", "TYPE_FP32", [-1, -1])], [Y], None),
    "onnx-output-dims-exact": (config(), [X], [("OUTPUT__0", "TYPE_FP32", [-1, -1])],
                               "tensor 'OUTPUT__0': the model expects 2 dimensions (shape [-1,-1])"),
    "onnx-batchless-dims": (config(batch=0, inputs=(("INPUT__0", "TYPE_FP32", [16]),),
                                   outputs=(("OUTPUT__0", "TYPE_FP32", [16]),)), [X], [Y],
                            "the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 1 "
                            "dimensions (shape [16])"),
    "onnx-reshape": (config(inputs=(("INPUT__0", "TYPE_FP32", [4, 4]),))
                     | {"input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [4, 4],
                                   "reshape": {"shape": [16]}}]}, [X], [Y], None),
    "onnx-optional-batching": (config() | {"input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [16],
                                                      "optional": True}]}, [], [Y],
                               "optional input 'INPUT__0' is not supported for models that support batching", [X]),
    "onnx-ragged": (config() | {"input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [16],
                                           "allow_ragged_batch": True}]}, [X], [Y],
                    "configuration expects model provides input with shape [-1]  for ragged input 'INPUT__0', model "
                    "provides [-1,16]"),
    "onnx-scalar": (config(batch=0, inputs=(("INPUT__0", "TYPE_FP32", [2]),)), [("INPUT__0", "TYPE_FP32", [])],
                    [("OUTPUT__0", "TYPE_FP32", [16])],
                    "scalar tensor 'INPUT__0', should only provide 1 in the model configuration"),
    "onnx-control-missing": (config(**sequence(START)), [X], [Y],
                             "configuration specified sequence control 'START', but model does not provide that "
                             "input"),
    "onnx-control-dims": (config(**sequence(START)), [X, ("START", "TYPE_INT32", [-1, 2])], [Y],
                          "sequence control 'START' in model has dims [2] but dims [1] is expected"),
    "onnx-control-dtype": (config(**sequence(START)), [X, ("START", "TYPE_FP32", [-1, 1])], [Y],
                           "sequence control 'START', the model expects data-type TYPE_FP32 but the model "
                           "configuration specifies data-type TYPE_INT32"),
    "onnx-control-counted": (config(**sequence(START)), [X, ONNX_START], [Y], None),
}
LIBTORCH = {
    "pytorch-input-count": (config(), [("x", "Tensor"), ("y", "Tensor")],
                            "configuration expects 1 inputs, model provides 2"),
    "pytorch-control-counted": (config(**sequence(("CONTROL_SEQUENCE_START", "START__1", "int32"))),
                                [("x", "Tensor"), ("start", "Tensor")], None),
    "pytorch-control-name": (config(**sequence(START)), [("x", "Tensor"), ("start", "Tensor")],
                             "input 'START' does not follow <name>__<index> naming convention."),
    "pytorch-corrid-dtype": (config(**sequence(("CONTROL_SEQUENCE_CORRID", "CORRID__1", "TYPE_STRING"))),
                             [("x", "Tensor"), ("corrid", "Tensor")],
                             "input 'CORRID__1' type 'TYPE_STRING' is not supported by PyTorch."),
    "pytorch-argument-type": (config(), [("x", "int")],
                              "An input of type 'int' was detected in the model. Only a single input of type "
                              "Dict(str, Tensor) or input(s) of type Tensor are supported."),
    "pytorch-dict-input": (config(inputs=(("a", "TYPE_FP32", [16]), ("b", "TYPE_FP32", [16]))), [("d", "Dict")],
                           None),
    "pytorch-dtype": (config(inputs=(("INPUT__0", "TYPE_BF16", [16]),)), [("x", "Tensor")],
                      "unsupported datatype TYPE_BF16 for input 'INPUT__0' for model 'm'"),
    "pytorch-output-dtype": (config(outputs=(("OUTPUT__0", "TYPE_UINT32", [16]),)), [("x", "Tensor")],
                             "unsupported datatype TYPE_UINT32 for output 'OUTPUT__0' for model 'm'"),
    "pytorch-strings": (config(inputs=(("INPUT__0", "TYPE_STRING", [2]),)), [("x", "List")],
                        "Triton only supports 1 dimensional List of String as input for 'INPUT__0' for model 'm'"),
    "pytorch-no-output": (config(outputs=()), [("x", "Tensor")],
                          "model configuration must contain at least one output, none were specified."),
}
EXECUTE = {
    "pytorch-execute-output-dtype": (("OUTPUT__0", "TYPE_FP32", "TYPE_FP64", 2),
                                     "configuration expects datatype TYPE_FP32 for output 'OUTPUT__0', model "
                                     "provides TYPE_FP64"),
    "pytorch-execute-scalar": (("OUTPUT__0", "TYPE_FP32", "TYPE_FP32", 0),
                               "output 'OUTPUT__0' is a scalar which is not supported."),
}


def outcome(check, *arguments) -> str | None:
    try:
        check(*arguments)
    except Refused as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("row", sorted(ONNX))
def test_onnxruntime_backend_checks(row):
    cfg, inputs, outputs, words, *overridable = ONNX[row]  # overridable initializers count as inputs by name
    found = outcome(check_onnx, cfg, inputs, outputs, *overridable)
    assert (found is None) if words is None else (found is not None and words in found), found


@pytest.mark.parametrize("row", sorted(LIBTORCH))
def test_pytorch_backend_checks(row):
    cfg, arguments, words = LIBTORCH[row]
    found = outcome(check_libtorch, cfg, arguments)
    assert (found is None) if words is None else (found is not None and words in found), found


@pytest.mark.parametrize("row", sorted(EXECUTE))
def test_pytorch_backend_checks_after_forward(row):
    arguments, words = EXECUTE[row]
    assert words in outcome(check_libtorch_output, *arguments)
    assert outcome(check_libtorch_output, "OUTPUT__0", "TYPE_FP32", "TYPE_FP32", 2) is None


def test_the_inter_op_thread_count_is_set_once_per_server(tmp_path, monkeypatch):
    """pytorch-interop-once: the stock server aborts at the second at::set_num_interop_threads; the stand-ins (a
    process per model) share a mark per server launch and refuse the second load instead."""
    monkeypatch.setenv(INTEROP_MARK_ENV, str(tmp_path / "mark"))
    claim_interop_threads("first")
    with pytest.raises(Refused, match="sets INTER_OP_THREAD_COUNT after 'first' did on this server"):
        claim_interop_threads("second")
    monkeypatch.delenv(INTEROP_MARK_ENV)
    claim_interop_threads("in-process")  # no server: a session of the suite's own (export, selfbench) is not marked


def test_control_inputs_in_the_order_the_backends_validate_them():
    cfg = sequence(("CONTROL_SEQUENCE_CORRID", "CORRID", "TYPE_UINT64"), ("CONTROL_SEQUENCE_READY", "READY", "bool"),
                   START, ("CONTROL_SEQUENCE_END", "END", "fp32"))
    assert control_inputs(cfg) == [("CONTROL_SEQUENCE_START", "START", "TYPE_INT32"),
                                   ("CONTROL_SEQUENCE_END", "END", "TYPE_FP32"),
                                   ("CONTROL_SEQUENCE_READY", "READY", "TYPE_BOOL"),
                                   ("CONTROL_SEQUENCE_CORRID", "CORRID", "TYPE_UINT64")]


def test_every_row_of_the_table_has_a_case_and_every_case_a_row():
    rows = set(re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), flags=re.MULTILINE))
    cases = set(ONNX) | set(LIBTORCH) | set(EXECUTE) | {"pytorch-interop-once", "execute-error-per-request",
                                                         "onnx-batch-1-graph-served"}
    assert rows == cases, (sorted(rows - cases), sorted(cases - rows))
