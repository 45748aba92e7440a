"""Triton's ``tensorrt_plan`` platform: running a plan in-process as Triton's tensorrt backend runs it (export
verification), and the TensorRT version a plan needs from the server.

A serialized plan deserializes only in the TensorRT version that built it (on GPUs of the compute capability it was
built for); Triton then fails the model load with a serialization error that does not name either version — the
most reported TensorRT failure on Triton. The suite records the building TensorRT's version beside each plan
(``artifact.json``) and refuses, in one line, a deployment on a server whose TensorRT is another version
(:func:`check_plan_version`). The server's TensorRT version is not in Triton's metadata: it follows from the NGC
container release (:data:`TRITON_TENSORRT`, from NVIDIA's container release notes) or is stated with
``TRITONSUITE_SERVER_TENSORRT`` for a server built otherwise.

``tensorrt`` and CUDA are imported lazily, here only.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

#: Triton server version -> the TensorRT of the NGC ``tritonserver:<yy.mm>-py3`` container that ships it (NVIDIA's
#: container release notes, and listings that quote them). Only releases whose TensorRT version could be confirmed
#: here are listed; another server's TensorRT is unknown unless stated with TRITONSUITE_SERVER_TENSORRT.
TRITON_TENSORRT = {
    "2.13.0": "8.0.1.6",  # 21.08
    "2.16.0": "8.0.3.4",  # 21.11
    "2.19.0": "8.2.3",  # 22.02
    "2.22.0": "8.2.5.1",  # 22.05
    "2.25.0": "8.4.2.4",  # 22.08
    "2.28.0": "8.5.1",  # 22.11
    "2.44.0": "8.6.3",  # 24.03
    "2.51.0": "10.5.0.18",  # 24.10 (the nvidia-pytriton wheel's tritonserver; the wheel has no tensorrt backend)
    "2.53.0": "10.7.0.23",  # 24.12
}
SERVER_TENSORRT_ENV = "TRITONSUITE_SERVER_TENSORRT"


class PlanVersionMismatch(ValueError):
    """A plan built with one TensorRT version deployed on a server running another."""


def _release(version: str) -> tuple[int, ...]:
    """major.minor.patch of a TensorRT version string ("10.5.0.18" -> (10, 5, 0))."""
    numbers = re.findall(r"\d+", version)
    if len(numbers) < 2:
        raise ValueError(f"TensorRT version {version!r}: expected <major>.<minor>[.<patch>[.<build>]]")
    return tuple(int(n) for n in (numbers + ["0"])[:3])


def server_tensorrt_version(triton_version: str, environ: dict | None = None) -> str | None:
    """The TensorRT version a Triton server of ``triton_version`` runs: ``TRITONSUITE_SERVER_TENSORRT`` when set,
    else the NGC release's, else None (unknown)."""
    environ = os.environ if environ is None else environ
    return environ.get(SERVER_TENSORRT_ENV) or TRITON_TENSORRT.get(triton_version.strip())


def check_plan_version(plan_tensorrt: str, server_tensorrt: str | None, where: str = "the server") -> None:
    """Refuse, in one line, a plan built with a TensorRT version other than the server's (compared as
    major.minor.patch). An unknown server version (None) is not refused: Triton's own load error then tells."""
    if server_tensorrt is None or _release(plan_tensorrt) == _release(server_tensorrt):
        return
    raise PlanVersionMismatch(
        f"model.plan was built with TensorRT {plan_tensorrt} but {where} runs TensorRT {server_tensorrt}: a plan "
        f"loads only in the TensorRT version that built it; build it with tensorrt=={server_tensorrt} (pip install "
        f"tensorrt=={server_tensorrt} --extra-index-url https://pypi.nvidia.com) or serve it on a Triton with "
        f"TensorRT {plan_tensorrt}")


class TensorRTSession:
    """A plan as Triton's tensorrt backend runs it: callable over {name: array} (batch first), on a CUDA device.

    Inputs are bound by name; those the engine does not have (the ONNX exporter drops inputs a graph never reads)
    are not fed. Outputs whose shape depends on the data are not supported here.
    """

    def __init__(self, path: str, config: dict, device: str = "cuda"):
        import tensorrt as trt
        import torch

        self._trt, self._torch = trt, torch
        self._device = device if device.startswith("cuda") else "cuda"
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self._engine = self._runtime.deserialize_cuda_engine(Path(path).read_bytes())
        if self._engine is None:
            raise RuntimeError(f"TensorRT {trt.__version__} cannot deserialize {path}: it was built by another "
                               f"TensorRT version or for another GPU")
        self._context = self._engine.create_execution_context()
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        self._inputs = [n for n in names if self._engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.output_names = [t["name"] for t in config["output"]]

    def _torch_dtype(self, name: str):
        return self._torch.from_numpy(np.empty(0, dtype=self._trt.nptype(self._engine.get_tensor_dtype(name)))).dtype

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch, context = self._torch, self._context
        buffers = {}
        for name in self._inputs:
            array = np.ascontiguousarray(inputs[name])
            tensor = torch.from_numpy(array).to(self._device, self._torch_dtype(name))
            buffers[name] = tensor
            context.set_input_shape(name, tuple(tensor.shape))
            context.set_tensor_address(name, tensor.data_ptr())
        for name in self.output_names:
            shape = tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise NotImplementedError(f"output {name} has a data-dependent shape {shape}: this runner has no "
                                          f"output allocator")
            buffers[name] = torch.empty(shape, dtype=self._torch_dtype(name), device=self._device)
            context.set_tensor_address(name, buffers[name].data_ptr())
        stream = torch.cuda.current_stream(self._device)
        if not context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execution failed (its log above says why)")
        stream.synchronize()
        return {name: buffers[name].cpu().numpy() for name in self.output_names}
