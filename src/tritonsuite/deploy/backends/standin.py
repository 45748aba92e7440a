"""Stand-ins for Triton's stock ``onnxruntime`` and ``pytorch`` backends, run as python-based backends.

The wheel's tritonserver ships only the python backend. Triton (>= 2.35) loads a *python-based backend* when its
backend directory holds ``<name>/model.py`` and no ``libtriton_<name>.so``: the embedded launcher copies this file
as ``onnxruntime/model.py`` and ``pytorch/model.py`` there, so a stock repository (``platform: "onnxruntime_onnx"``
+ ``model.onnx``, ``platform: "pytorch_libtorch"`` + ``model.pt``) loads unchanged, and ``/v2/models/<m>/config``
says ``"runtime": "model.py"``.

It behaves as the stock backends do, as far as a deployment can observe:
- the model file is ``default_model_filename`` or the platform's default (``model.onnx``, ``model.pt``) in the
  version directory;
- the requests of one execution (one batch the dynamic batcher formed, or one request) are concatenated along the
  batch dimension, run once, and the outputs sliced back per request; an output padded to the batch's longest
  sample is returned padded, as the stock backends return it;
- onnxruntime: ``intra_op_thread_count``, ``inter_op_thread_count``, ``execution_mode``, ``enable_mem_arena``,
  ``enable_mem_pattern`` parameters, ``optimization { graph { level } }`` and the ``tensorrt`` GPU execution
  accelerator (``precision_mode``, ``max_workspace_size_bytes``) through onnxruntime's TensorRT execution provider,
  failing the load where that provider cannot run, as the stock backend does; tensors bound by name;
- pytorch: ``INTRA_OP_THREAD_COUNT``, ``INTER_OP_THREAD_COUNT``, ``ENABLE_TENSOR_FUSER``, ``INFERENCE_MODE``
  (default on), ``DISABLE_OPTIMIZED_EXECUTION``, ``ENABLE_JIT_PROFILING``, ``ENABLE_JIT_EXECUTOR`` parameters;
  inputs bound by ``forward`` argument names, else the ``<name>__<index>`` convention, else config order; outputs by
  the convention, else config order (pytorch_backend's ``GetNamingConvention``).

It imports nothing from tritonsuite (the stub runs it from the backend directory), and the suite's export
verification and self-benchmark run artifacts through the same sessions (:func:`open_session`), so what is verified
in-process is what is served.
"""
from __future__ import annotations

import json
import os

import numpy as np

if __name__.startswith("tritonsuite."):
    import tritonsuite.deploy.backends.stockchecks as stockchecks
else:  # <backend directory>/<name>/model.py in a server's stub, stockchecks.py beside it
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import stockchecks

DEFAULT_MODEL_FILENAMES = {"onnxruntime": "model.onnx", "pytorch": "model.pt"}
#: the environment variable the embedded launcher names its model repository in (for auto-complete)
REPOSITORY_ENV = "TRITONSUITE_MODEL_REPOSITORY"
onnx_auto_complete = stockchecks.onnx_auto_complete
#: why a deployment with implicit state does not load here (the stock backends keep it through Triton's state API)
IMPLICIT_STATE = ("implicit state (sequence_batching state) is kept by the stock onnxruntime, pytorch and tensorrt "
                  "backends through Triton's backend state API (TRITONBACKEND_State*), which a python-based backend "
                  "such as the embedded server's stand-in cannot call: serve it with --server container or remote")
_TRUE = ("1", "true", "yes", "on")

#: nvidia-pytriton's python-backend stub is built against numpy 1 (the wheel pins numpy<2): under numpy 2 a tensor
#: handed over as a numpy array comes back empty ("cannot reshape array of size 0"), so there every tensor but a
#: BYTES one goes by DLPack, which does not pass through numpy's C interface (the lent GPU machines run numpy 2);
#: ``TRITONSUITE_BY_DLPACK=1`` takes that path under numpy 1 too, which is how the suite's tests run it
BY_DLPACK_ENV = "TRITONSUITE_BY_DLPACK"
BY_DLPACK = int(np.__version__.split(".")[0]) >= 2 or os.environ.get(BY_DLPACK_ENV, "").lower() in _TRUE


def parameters(config: dict) -> dict[str, str]:
    """A model configuration's ``parameters`` as plain strings (the JSON form Triton hands a backend)."""
    return {k: str(v.get("string_value", "")) if isinstance(v, dict) else str(v)
            for k, v in config.get("parameters", {}).items()}


def _flag(params: dict[str, str], key: str) -> bool | None:
    return None if key not in params else params[key].strip().lower() in _TRUE


def _int(params: dict[str, str], key: str, default: int) -> int:
    try:
        return int(params.get(key, default))
    except ValueError:
        raise ValueError(f"parameter {key}={params[key]!r} is not an integer") from None


def gpu_execution_accelerators(config: dict) -> dict[str, dict[str, str]]:
    """A configuration's ``optimization.execution_accelerators.gpu_execution_accelerator`` as {name: parameters}."""
    found = config.get("optimization", {}).get("execution_accelerators", {}).get("gpu_execution_accelerator", [])
    return {a.get("name", ""): {k: str(v) for k, v in a.get("parameters", {}).items()} for a in found}


def tensorrt_provider(parameters: dict[str, str]) -> tuple[str, dict[str, str]]:
    """onnxruntime's TensorRT execution provider with the options the onnxruntime backend maps the accelerator's
    parameters to (``precision_mode`` FP16 -> ``trt_fp16_enable``, ``max_workspace_size_bytes`` ->
    ``trt_max_workspace_size``)."""
    mode = parameters.get("precision_mode", "FP32").upper()
    if mode not in ("FP32", "FP16"):
        raise ValueError(f"tensorrt accelerator precision_mode {mode!r}; valid choices: FP32, FP16")
    options = {"trt_fp16_enable": "True" if mode == "FP16" else "False"}
    if "max_workspace_size_bytes" in parameters:
        options["trt_max_workspace_size"] = str(int(parameters["max_workspace_size_bytes"]))
    return "TensorrtExecutionProvider", options


class OnnxRuntimeSession:
    """An ONNX model as Triton's onnxruntime backend runs it: callable over {name: array} (batch first)."""

    def __init__(self, path: str, config: dict, device: str = "cpu"):
        import onnxruntime as ort

        params = parameters(config)
        options = ort.SessionOptions()
        options.intra_op_num_threads = _int(params, "intra_op_thread_count", 0)
        options.inter_op_num_threads = _int(params, "inter_op_thread_count", 0)
        if _int(params, "execution_mode", 0) == 1:
            options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        if _flag(params, "enable_mem_arena") is not None:
            options.enable_cpu_mem_arena = bool(_flag(params, "enable_mem_arena"))
        if _flag(params, "enable_mem_pattern") is not None:
            options.enable_mem_pattern = bool(_flag(params, "enable_mem_pattern"))
        level = int(config.get("optimization", {}).get("graph", {}).get("level", 0) or 0)
        options.graph_optimization_level = {-1: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                            1: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                            2: ort.GraphOptimizationLevel.ORT_DISABLE_ALL}.get(
            level, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        providers = (["CUDAExecutionProvider", "CPUExecutionProvider"] if device.startswith("cuda")
                     else ["CPUExecutionProvider"])
        accelerators = gpu_execution_accelerators(config)
        if "tensorrt" in accelerators:
            if not device.startswith("cuda"):
                raise ValueError("the tensorrt execution accelerator runs on GPU instances (KIND_GPU)")
            if "TensorrtExecutionProvider" not in ort.get_available_providers():
                raise RuntimeError(f"the tensorrt execution accelerator needs onnxruntime's TensorRT execution "
                                   f"provider; onnxruntime {ort.__version__} here has "
                                   f"{', '.join(ort.get_available_providers())} (install onnxruntime-gpu)")
            providers = [tensorrt_provider(accelerators["tensorrt"])] + providers
        self._session = ort.InferenceSession(path, sess_options=options, providers=providers)
        if "tensorrt" in accelerators and "TensorrtExecutionProvider" not in self._session.get_providers():
            # onnxruntime falls back to the next provider when TensorRT's libraries do not load; the stock backend
            # fails the load instead, and a table must not say TensorRT where CUDA ran
            raise RuntimeError("onnxruntime's TensorRT execution provider did not load (TensorRT's libraries are "
                               "missing: pip install tensorrt --extra-index-url https://pypi.nvidia.com)")
        self.output_names = [t["name"] for t in config["output"]]
        # the graph's inputs: the configured ones and the sequence batcher's control tensors, which the stock
        # backend hands to the model as inputs (an optional input a request left out is not fed)
        self._feeds = [i.name for i in self._session.get_inputs()]

    def check(self, config: dict) -> None:
        """Refuse, in the stock backend's words, a configuration onnxruntime_backend refuses for this graph."""
        s = self._session
        stockchecks.check_onnx(config, stockchecks.onnx_tensors(s.get_inputs()),
                               stockchecks.onnx_tensors(s.get_outputs()),
                               stockchecks.onnx_tensors(s.get_overridable_initializers()))

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self._session.run(self.output_names,
                                    {n: _ort_strings(inputs[n]) for n in self._feeds if n in inputs})
        return {n: _triton_bytes(v) for n, v in zip(self.output_names, outputs)}


def _ort_strings(array: np.ndarray) -> np.ndarray:
    """BYTES elements (``bytes``, as Triton hands them) as the ``str`` onnxruntime's string tensors take (it would
    turn ``b"ab"`` into ``"b'ab'"``), decoded as UTF-8 as the stock backend does."""
    if array.dtype != object:
        return array
    return np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in array.reshape(-1)],
                    dtype=object).reshape(array.shape)


def _triton_bytes(array: np.ndarray) -> np.ndarray:
    """onnxruntime's ``str`` outputs as the UTF-8 ``bytes`` a BYTES tensor holds."""
    if array.dtype != object:
        return array
    return np.array([v.encode("utf-8") if isinstance(v, str) else v for v in array.reshape(-1)],
                    dtype=object).reshape(array.shape)


def libtorch_input_binding(config_names: list[str], forward_arguments: list[str]) -> dict[str, int]:
    """Which ``forward`` argument each configured input feeds, by pytorch_backend's rules: every name is a
    ``forward`` argument -> by name; else every name is ``<name>__<index>`` -> by index; else config order."""
    if all(n in forward_arguments for n in config_names):
        return {n: forward_arguments.index(n) for n in config_names}
    indices = [stockchecks.convention_index(n) for n in config_names]
    if all(i is not None for i in indices):
        return dict(zip(config_names, indices))
    return {n: i for i, n in enumerate(config_names)}


def libtorch_output_binding(config_names: list[str]) -> dict[str, int]:
    """Which element of the ``forward`` result each configured output is: by ``<name>__<index>``, else config
    order."""
    indices = [stockchecks.convention_index(n) for n in config_names]
    if all(i is not None for i in indices):
        return dict(zip(config_names, indices))
    return {n: i for i, n in enumerate(config_names)}


class LibTorchSession:
    """A TorchScript model as Triton's pytorch backend runs it: callable over {name: array} (batch first)."""

    def __init__(self, path: str, config: dict, device: str = "cpu"):
        import torch

        params = parameters(config)
        # process-wide settings, as the stock backend applies them (at::set_num_threads, ...) when given
        if _int(params, "INTRA_OP_THREAD_COUNT", 0) > 0:
            torch.set_num_threads(_int(params, "INTRA_OP_THREAD_COUNT", 0))
        if _int(params, "INTER_OP_THREAD_COUNT", 0) > 0:
            stockchecks.claim_interop_threads(config.get("name", "?"))  # refused after another model set it
            try:
                torch.set_num_interop_threads(_int(params, "INTER_OP_THREAD_COUNT", 0))
            except RuntimeError:
                pass  # can only be set once per process; another instance set it first
        if _flag(params, "ENABLE_TENSOR_FUSER") is not None:
            torch._C._jit_set_texpr_fuser_enabled(bool(_flag(params, "ENABLE_TENSOR_FUSER")))
        if _flag(params, "ENABLE_JIT_PROFILING") is not None:
            torch._C._jit_set_profiling_mode(bool(_flag(params, "ENABLE_JIT_PROFILING")))
        if _flag(params, "ENABLE_JIT_EXECUTOR") is not None:
            torch._C._jit_set_profiling_executor(bool(_flag(params, "ENABLE_JIT_EXECUTOR")))
        torch._C._set_graph_executor_optimize(not _flag(params, "DISABLE_OPTIMIZED_EXECUTION"))
        self._inference_mode = _flag(params, "INFERENCE_MODE") is not False
        self._torch, self._device = torch, device
        self._module = torch.jit.load(path, map_location=device).eval()
        self._arguments = [(a.name, a.type.kind().replace("Type", "") if a.type.kind() in
                            ("TensorType", "ListType", "DictType") else str(a.type))
                           for a in self._module.forward.schema.arguments[1:]]
        arguments = [a for a, _ in self._arguments]
        inputs = [t["name"] for t in config["input"]]
        # the sequence batcher's control tensors are forward arguments too, each at its <name>__<index>
        controls = {n: stockchecks.convention_index(n) for _, n, _ in stockchecks.control_inputs(config)}
        if len(inputs) + len(controls) != len(arguments):
            stockchecks.check_libtorch(config, self._arguments)  # the stock backend's words where it refuses
            raise ValueError(f"the model's forward takes {len(arguments)} inputs ({', '.join(arguments)}), the "
                             f"configuration declares {len(inputs) + len(controls)} "
                             f"({', '.join(inputs + list(controls))})")
        binding = {**libtorch_input_binding(inputs, arguments), **controls}
        self._argument_order = sorted(binding, key=lambda n: -1 if binding[n] is None else binding[n])
        self._outputs = libtorch_output_binding([t["name"] for t in config["output"]])
        self._types = {t["name"]: t["data_type"] for t in config["output"]}
        self._strict = False

    def check(self, config: dict) -> None:
        """Refuse, in the stock backend's words, a configuration pytorch_backend refuses for this module; its
        outputs are then checked as the stock backend checks them after ``forward``."""
        stockchecks.check_libtorch(config, self._arguments)
        self._strict = True

    def __call__(self, inputs: dict[str, np.ndarray], on_device: bool = False) -> dict:
        """Outputs as numpy arrays, or with ``on_device`` as torch tensors where the model left them (a GPU)."""
        torch = self._torch
        context = torch.inference_mode() if self._inference_mode else torch.no_grad()
        with context:
            args = [_torch_tensor(torch, inputs[n]).to(self._device) for n in self._argument_order]
            result = self._module(*args)
            if not isinstance(result, (tuple, list)):
                result = (result,)
            if self._strict:
                for n, i in self._outputs.items():
                    stockchecks.check_libtorch_output(n, self._types[n], _TORCH_TYPES.get(str(result[i].dtype),
                                                                                            "TYPE_INVALID"),
                                                      result[i].dim())
            if on_device:
                return {n: result[i].detach() for n, i in self._outputs.items()}
            return {n: _numpy_array(torch, result[i]) for n, i in self._outputs.items()}


_TORCH_TYPES = {"torch.bool": "TYPE_BOOL", "torch.uint8": "TYPE_UINT8", "torch.int8": "TYPE_INT8",
                "torch.int16": "TYPE_INT16", "torch.int32": "TYPE_INT32", "torch.int64": "TYPE_INT64",
                "torch.float16": "TYPE_FP16", "torch.float32": "TYPE_FP32", "torch.float64": "TYPE_FP64"}


def _torch_tensor(torch, array: np.ndarray):
    """A numpy array as a torch tensor; BF16 (ml_dtypes' ``bfloat16``, as tritonclient holds it) by its bits, which
    ``torch.from_numpy`` does not take."""
    array = np.ascontiguousarray(array)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _numpy_array(torch, tensor) -> np.ndarray:
    """A torch tensor as a numpy array on the host; ``torch.bfloat16`` as ml_dtypes' ``bfloat16`` (by its bits)."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


SESSIONS = {"onnxruntime": OnnxRuntimeSession, "pytorch": LibTorchSession}


def open_session(backend: str, path: str, config: dict, device: str = "cpu"):
    """The stock backend's behaviour for ``backend`` over the model file ``path`` and its configuration (JSON)."""
    if backend not in SESSIONS:
        raise ValueError(f"no stand-in for backend {backend!r}; valid choices: {', '.join(SESSIONS)}")
    return SESSIONS[backend](path, config, device)


class TritonPythonModel:
    """The python-based backend entry point: Triton calls it for every model of this backend."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        """The onnxruntime backend's auto-complete of a deployment shipped without its tensors (no config.pbtxt):
        inputs, outputs, max batch size and dynamic batching from the model file (:func:`onnx_auto_complete`). The
        model's directory comes from the launcher (``REPOSITORY_ENV``: a python-based backend is not told it)."""
        cfg = auto_complete_model_config
        config = cfg.as_dict()
        repository = os.environ.get(REPOSITORY_ENV, "")
        if config.get("backend") != "onnxruntime" or config.get("input") or config.get("output") or not repository:
            return cfg  # a configuration that declares its tensors is served as written
        directory = os.path.join(repository, config["name"])
        versions = sorted(int(d) for d in os.listdir(directory) if d.isdigit())
        if not versions:
            return cfg
        path = os.path.join(directory, str(versions[-1]), config.get("default_model_filename") or "model.onnx")
        completed = onnx_auto_complete(path)
        if not config.get("max_batch_size"):
            cfg.set_max_batch_size(completed["max_batch_size"])
        for tensor in completed["input"]:
            cfg.add_input(tensor)
        for tensor in completed["output"]:
            cfg.add_output(tensor)
        if "dynamic_batching" in completed and "dynamic_batching" not in config:
            cfg.set_dynamic_batching()
        return cfg

    def initialize(self, args):
        config = json.loads(args["model_config"])
        backend = config["backend"]
        if (config.get("sequence_batching") or {}).get("state"):
            raise RuntimeError(IMPLICIT_STATE)
        filename = config.get("default_model_filename") or DEFAULT_MODEL_FILENAMES[backend]
        path = os.path.join(args["model_repository"], args["model_version"], filename)
        device = "cpu"
        if args.get("model_instance_kind") == "GPU":
            device = f"cuda:{args.get('model_instance_device_id', 0)}"
        self.session = open_session(backend, path, config, device)
        self.session.check(config)  # what the stock backend refuses at load is refused here, in its words
        self.gpu_outputs = device.startswith("cuda") and isinstance(self.session, LibTorchSession)
        self.batching = int(config.get("max_batch_size", 0)) > 0
        # the configured inputs a request carries, and the control tensors the sequence batcher added to it
        self.input_names = [t["name"] for t in config["input"]] + [
            n for _, n, _ in stockchecks.control_inputs(config)]
        self.bf16_inputs = {t["name"] for t in config["input"] if t["data_type"] == "TYPE_BF16"}
        self.bytes_inputs = {t["name"] for t in config["input"] if t["data_type"] == "TYPE_STRING"}
        self.outputs = [(t["name"], t["data_type"]) for t in config["output"]]

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        try:
            arrays = [{n: self._array(t, n) for n in self.input_names
                       for t in [pb_utils.get_input_tensor_by_name(r, n)] if t is not None} for r in requests]
            run = (lambda a: self.session(a, on_device=True)) if self.gpu_outputs else self.session
            if self.batching and len(arrays) > 1:
                sizes = [len(a[self.input_names[0]]) for a in arrays]
                merged = run({n: np.concatenate([a[n] for a in arrays]) for n in arrays[0]})
                starts = np.cumsum([0] + sizes)
                results = [{n: v[starts[i]:starts[i + 1]] for n, v in merged.items()} for i in range(len(sizes))]
            else:
                results = [run(a) for a in arrays]
            responses = [pb_utils.InferenceResponse(output_tensors=[self._tensor(pb_utils, n, out[n], dtype)
                                                                    for n, dtype in self.outputs])
                         for out in results]
        except Exception as exc:  # every request of the execution gets the error; the stub lives on
            # one TritonError per response: the python backend 2.51 frees each response's error with it, and one
            # error object shared by the responses of a batch crashed the server (Signal 11 in libtriton_python.so)
            message = f"{type(exc).__name__}: {exc}"
            return [pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))
                    for _ in requests]
        return responses

    def _array(self, tensor, name: str) -> np.ndarray:
        """An input as numpy; a BF16 one, which the python backend hands over by DLPack only (numpy has no BF16),
        as ml_dtypes' ``bfloat16``; under numpy 2 every one but BYTES by DLPack (:data:`BY_DLPACK`)."""
        if name not in self.bf16_inputs and (not BY_DLPACK or name in self.bytes_inputs):
            return tensor.as_numpy()
        import torch
        import torch.utils.dlpack

        return _numpy_array(torch, torch.utils.dlpack.from_dlpack(tensor.to_dlpack()))

    @staticmethod
    def _tensor(pb_utils, name: str, value, dtype: str):
        if dtype == "TYPE_BF16":  # numpy has no BF16: handed to Triton by DLPack, as the python backend takes it
            import torch
            import torch.utils.dlpack

            tensor = value if not isinstance(value, np.ndarray) else _torch_tensor(torch, value)
            return pb_utils.Tensor.from_dlpack(name, torch.utils.dlpack.to_dlpack(
                tensor.to(torch.bfloat16).contiguous()))
        numpy_dtype = pb_utils.triton_string_to_numpy(dtype)
        if isinstance(value, np.ndarray) and (not BY_DLPACK or dtype == "TYPE_STRING"):
            return pb_utils.Tensor(name, np.ascontiguousarray(value, dtype=numpy_dtype))
        # by DLPack through torch (numpy's own capsules do not survive the python backend's renaming of a used one
        # under numpy 1); a GPU tensor is handed to Triton where it is, as the stock backend's outputs are
        import torch
        import torch.utils.dlpack

        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype=numpy_dtype)
            value = torch.from_numpy(array if array.flags.writeable else array.copy())  # torch takes writable ones
        target = torch.from_numpy(np.empty(0, dtype=numpy_dtype)).dtype
        return pb_utils.Tensor.from_dlpack(name, torch.utils.dlpack.to_dlpack(value.to(target).contiguous()))
