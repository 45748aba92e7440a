"""Triton's stock backends, one class per platform: which export formats it serves, the model file it reads, the
``config.pbtxt`` parameters it understands, whether a spec can be served by it, and its embedded stand-in.

A new backend is one more class registered in :data:`BACKENDS`; the repository writer, the launchers, export
verification and the report ask the registry and never name a platform themselves.
"""
from __future__ import annotations

import keyword
from pathlib import Path
from typing import Mapping

from tritonsuite.deploy.backends.standin import (DEFAULT_MODEL_FILENAMES, gpu_execution_accelerators,
                                                 libtorch_input_binding, libtorch_output_binding, open_session)

STANDIN_FILE = Path(__file__).with_name("standin.py")
STOCKCHECKS_FILE = Path(__file__).with_name("stockchecks.py")  # copied beside it: the stock backends' checks


def instance_kind(config: Mapping) -> str:
    """KIND_GPU when any instance group of a configuration (JSON) runs on a GPU, else KIND_CPU."""
    return "KIND_GPU" if any(g.get("kind") == "KIND_GPU" for g in config.get("instance_group", [])) else "KIND_CPU"


def parameter(config: Mapping, key: str) -> str:
    """A configuration's ``parameters[key].string_value`` ("" when absent)."""
    return str(((config.get("parameters") or {}).get(key) or {}).get("string_value", ""))


class Backend:
    """One stock Triton backend (named by its ``platform`` in ``config.pbtxt``). Every method that judges a
    deployment reads its configuration as JSON (Triton's ``ModelConfig``,
    :func:`~tritonsuite.deploy.repository.config_json`)."""

    platform = ""  # config.pbtxt ``platform``
    name = ""  # Triton's backend name: what ``/v2/models/<m>/config`` reports as "backend"
    formats: tuple[str, ...] = ()  # export formats whose artifact this backend serves
    standin = True  # the embedded server serves it through standin.py as a python-based backend
    thread_parameters: tuple[str, ...] = ()  # its ``parameters`` that set threads per instance (the first: intra-op)

    @property
    def file_name(self) -> str:
        """The model file's default name in the version directory (Triton's model repository docs)."""
        return DEFAULT_MODEL_FILENAMES[self.name]

    def parameters(self, threads: int, instance_kind: str) -> dict[str, str]:
        """The stock backend's own ``parameters`` for ``threads`` per instance (0: its default) on ``instance_kind``."""
        return {}

    def threads(self, config: Mapping) -> int:
        """Threads per instance a configuration sets through this backend's parameters (0: the backend's default)."""
        value = parameter(config, self.thread_parameters[0]) if self.thread_parameters else ""
        return int(value) if value.isdigit() else 0

    def with_threads(self, config: Mapping, threads: int) -> dict:
        """``config`` with its thread parameters set for ``threads`` (0: removed), its other parameters kept."""
        found = {**config, "parameters": {k: v for k, v in (config.get("parameters") or {}).items()
                                          if k not in self.thread_parameters}}
        found["parameters"].update({k: {"string_value": v} for k, v in self.parameters(
            threads, instance_kind(config)).items() if k in self.thread_parameters})
        if not found["parameters"]:
            del found["parameters"]
        return found

    def accelerators(self, accelerator: str, precision_mode: str,
                     max_workspace_size_bytes: int) -> list[tuple[str, dict[str, str]]]:
        """``optimization { execution_accelerators { gpu_execution_accelerator [...] } }`` entries for a backend
        accelerator (``BACKEND_ACCELERATORS``): (name, parameters) each; none unless the backend has accelerators."""
        return []

    def refuses(self, config: Mapping) -> str | None:
        """Why this backend cannot serve a deployment of this configuration (instance kind, accelerator), or None."""
        return None

    def check_artifact(self, artifact, server) -> None:
        """Raise, in one line, when ``server`` cannot load this exported artifact (checked before loading)."""

    def standin_refuses(self, config: Mapping) -> str | None:
        """Why this host's stand-in (the embedded server runs it here) cannot serve ``config``, or None."""
        return None

    def accelerator_description(self, config: Mapping) -> str:
        """The report's "Backend accelerator" row."""
        return "-"

    def supports(self, spec) -> str | None:
        """Why ``spec`` cannot be served by this backend, or None when it can."""
        return None

    def session(self, path: str | Path, model_config: dict, device: str = "cpu"):
        """Run a model file in-process as this backend runs it (export verification, self-benchmark)."""
        return open_session(self.name, str(path), model_config, device)


class OnnxRuntimeBackend(Backend):
    platform, name, formats = "onnxruntime_onnx", "onnxruntime", ("onnx",)
    thread_parameters = ("intra_op_thread_count", "inter_op_thread_count")

    def parameters(self, threads: int, instance_kind: str) -> dict[str, str]:
        if not threads:
            return {}
        # sequential execution (the default) runs one node at a time: inter-op threads would only idle
        return {"intra_op_thread_count": str(threads), "inter_op_thread_count": "1"}

    def accelerators(self, accelerator: str, precision_mode: str,
                     max_workspace_size_bytes: int) -> list[tuple[str, dict[str, str]]]:
        """The TensorRT execution accelerator (the onnxruntime backend's README: ``name: "tensorrt"`` with
        ``precision_mode`` and ``max_workspace_size_bytes``); it runs on GPU instances (:meth:`refuses`)."""
        if accelerator != "trt":
            return []
        parameters = {"precision_mode": precision_mode}
        if max_workspace_size_bytes:
            parameters["max_workspace_size_bytes"] = str(max_workspace_size_bytes)
        return [("tensorrt", parameters)]

    def refuses(self, config: Mapping) -> str | None:
        if "tensorrt" in gpu_execution_accelerators(config) and instance_kind(config) != "KIND_GPU":
            return (f"the onnxruntime backend's TensorRT accelerator runs on GPU instances; this deployment's are "
                    f"{instance_kind(config)}")
        return None

    def standin_refuses(self, config: Mapping) -> str | None:
        if "tensorrt" not in gpu_execution_accelerators(config):
            return None
        import onnxruntime as ort

        from tritonsuite.core.device import cuda_available
        from tritonsuite.deploy.formats.tensorrt import tensorrt_import_error

        if "TensorrtExecutionProvider" not in ort.get_available_providers():
            return (f"the embedded server's onnxruntime stand-in runs the TensorRT accelerator through onnxruntime's "
                    f"TensorRT execution provider, which onnxruntime {ort.__version__} here lacks (install "
                    f"onnxruntime-gpu)")
        reason = tensorrt_import_error()
        if reason:
            return f"onnxruntime's TensorRT execution provider needs TensorRT's libraries: {reason}"
        if not cuda_available():
            return "the TensorRT accelerator runs on a CUDA device; this host has none"
        return None

    def accelerator_description(self, config: Mapping) -> str:
        accelerators = gpu_execution_accelerators(config)
        if "tensorrt" not in accelerators or instance_kind(config) != "KIND_GPU":
            return "-"
        workspace = int(accelerators["tensorrt"].get("max_workspace_size_bytes", 0))
        return (f"TensorRT ({accelerators['tensorrt'].get('precision_mode', 'FP32')}, workspace "
                f"{f'{workspace / 2**30:g} GiB' if workspace else 'the backend default, 1 GiB'})")


class PyTorchBackend(Backend):
    platform, name, formats = "pytorch_libtorch", "pytorch", ("ts-trace", "ts-script")

    thread_parameters = ("INTRA_OP_THREAD_COUNT",)

    def parameters(self, threads: int, instance_kind: str) -> dict[str, str]:
        params = {"INFERENCE_MODE": "true"}
        if threads:
            # at::set_num_threads at each model's load: process-wide on a stock server (the last pytorch model
            # loaded sets it for all), safe to call again. INTER_OP_THREAD_COUNT is never written: the stock backend
            # calls at::set_num_interop_threads at each load, which throws on its second call in a process and
            # aborts the server (measured on pytorch_backend r24.10: every TorchScript deployment after the first)
            params["INTRA_OP_THREAD_COUNT"] = str(threads)
        if instance_kind == "KIND_CPU":
            # TorchScript's TensorExpr fuser compiles kernels per input shape; on CPU, with shapes that vary (text
            # lengths, frame counts, batch sizes) it recompiled and ran FastPitch 3-50x slower than eager.
            params["ENABLE_TENSOR_FUSER"] = "false"
        return params

    def supports(self, spec) -> str | None:
        """Every spec binds: the export gives ``forward`` the spec's input names as arguments when they are
        identifiers, and otherwise orders its arguments and results by the backend's ``<name>__<index>`` or
        config-order rule (:func:`torchscript_signature`)."""
        try:
            torchscript_signature([t.name for t in spec.inputs], [t.name for t in spec.outputs])
        except ValueError as exc:
            return str(exc)
        return None


class TensorRTBackend(Backend):
    """``tensorrt_plan``: a serialized TensorRT plan (``model.plan``), on GPU instances. The embedded server has no
    stand-in for it: the nvidia-pytriton wheel's tritonserver ships no tensorrt backend."""

    platform, name, formats = "tensorrt_plan", "tensorrt", ("trt",)
    standin = False

    @property
    def file_name(self) -> str:
        return "model.plan"

    def refuses(self, config: Mapping) -> str | None:
        if instance_kind(config) != "KIND_GPU":
            return f"tensorrt_plan runs on GPU instances; this deployment's are {instance_kind(config)}"
        return None

    def check_artifact(self, artifact, server) -> None:
        """A plan loads only in the TensorRT version that built it (recorded beside it when it was built)."""
        from tritonsuite.deploy.backends.tensorrt import check_plan_version

        check_plan_version(artifact.versions["tensorrt"], server.tensorrt_version(), server.describe())

    def session(self, path: str | Path, model_config: dict, device: str = "cuda"):
        from tritonsuite.deploy.backends.tensorrt import TensorRTSession

        return TensorRTSession(str(path), model_config, device)


class PythonBackend(Backend):
    """``backend: "python"``: a ``model.py`` (possibly BLS, calling other models), run by Triton's python backend,
    which the nvidia-pytriton wheel ships: the embedded server runs it for real. The suite never exports to it; a
    user's repository brings it (:mod:`tritonsuite.deploy.userrepo`)."""

    platform, name, formats = "python", "python", ("python",)
    standin = False

    @property
    def file_name(self) -> str:
        return "model.py"

    def session(self, path, model_config: dict, device: str = "cpu"):
        raise NotImplementedError("a python-backend model.py runs inside Triton only: name a reference for it")


def torchscript_signature(inputs: list[str], outputs: list[str]) -> tuple[list[str], list[int], list[int]]:
    """How an exported TorchScript ``forward`` must look for pytorch_backend to bind the configured tensors right.

    Returns (forward argument names, spec input index per argument position, spec output index per result
    position). Names that are identifiers become the arguments themselves (bound by name); otherwise the
    arguments are ordered as the backend will read them (``<name>__<index>``, else config order).
    """
    if all(n.isidentifier() and not keyword.iskeyword(n) and n != "self" for n in inputs):
        arguments = list(inputs)
    else:
        arguments = [f"input_{i}" for i in range(len(inputs))]
    binding = libtorch_input_binding(inputs, arguments)
    results = libtorch_output_binding(outputs)
    for kind, names, index in (("input", inputs, binding), ("output", outputs, results)):
        if sorted(index.values()) != list(range(len(names))):
            raise ValueError(f"pytorch_libtorch binds {kind}s {', '.join(names)} to positions "
                             f"{[index[n] for n in names]} (the <name>__<index> convention): they must be 0..."
                             f"{len(names) - 1}, each once; rename the {kind}s or use onnx")
    argument_inputs = [inputs.index(n) for n in sorted(binding, key=binding.get)]
    result_outputs = [outputs.index(n) for n in sorted(results, key=results.get)]
    return arguments, argument_inputs, result_outputs


BACKENDS: dict[str, Backend] = {b.platform: b for b in (OnnxRuntimeBackend(), PyTorchBackend(), TensorRTBackend(),
                                                        PythonBackend())}


def backend_of(config: Mapping) -> Backend | None:
    """The stock backend a configuration (JSON) names by its platform or backend; None for any other (an ensemble)."""
    for backend in BACKENDS.values():
        if config.get("platform") == backend.platform or (config.get("backend") or None) == backend.name:
            return backend
    return None


def backend_for(fmt: str) -> Backend:
    """The stock backend that serves artifacts of export format ``fmt``."""
    for backend in BACKENDS.values():
        if fmt in backend.formats:
            return backend
    served = sorted(f for b in BACKENDS.values() for f in b.formats)
    raise ValueError(f"no backend serves format {fmt!r}; valid choices: {', '.join(served)}")


def standin_backends() -> list[str]:
    """Backend names the embedded server provides as python-based stand-ins."""
    return [b.name for b in BACKENDS.values() if b.standin]


def native_backends(directory: str | Path | None) -> list[str]:
    """The backends a user's backend directory holds as shared libraries (``<name>/libtriton_<name>.so``), e.g.
    ``/opt/tritonserver/backends`` copied from an NGC image or a build of their own."""
    if not directory:
        return []
    root = Path(directory)
    return sorted(d.name for d in root.iterdir() if (d / f"libtriton_{d.name}.so").is_file() and d.name != "python")
