"""Triton model repositories in Triton's own form: ``<deployment>/config.pbtxt`` and ``<deployment>/1/<model file>``.

``config.pbtxt`` is written from Triton's model-configuration protobuf (``tritonclient.grpc.model_config_pb2``)
with ``google.protobuf.text_format`` and holds only what a stock backend understands: the platform, max batch
size, inputs and outputs, the instance group, dynamic batching, the backend's own parameters (threads, tensor
fuser, inference mode; :mod:`tritonsuite.deploy.backends`) and its execution accelerators (onnxruntime's TensorRT). The version directory holds the artifact alone, under the
platform's default file name, so the directory loads unchanged on any Triton that has the backend.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritonsuite.core.device import INSTANCE_KINDS
from tritonsuite.core.spec import ModelSpec
from tritonsuite.deploy.backends import Backend, backend_for

#: ``backend_accelerator`` choices: none, or the onnxruntime backend's TensorRT execution accelerator (GPU instances)
BACKEND_ACCELERATORS = ("none", "trt")
#: The TensorRT accelerator's ``precision_mode`` values the suite writes (INT8 needs a calibration table)
PRECISION_MODES = ("FP32", "FP16")


@dataclass(frozen=True)
class DeploymentConfig:
    """The Triton-side settings of one deployment (Triton's own vocabulary)."""

    max_batch_size: int
    instance_count: int = 1
    instance_kind: str = "KIND_CPU"
    intra_op_threads: int = 0  # threads per model instance, as the backend's own parameter; 0 = its default
    dynamic_batching: bool = False
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    backend_accelerator: str = "none"  # "trt": the onnxruntime backend's TensorRT execution accelerator
    precision_mode: str = "FP32"  # the TensorRT accelerator's precision
    max_workspace_size_bytes: int = 0  # the TensorRT accelerator's workspace; 0 = the backend's default (1 GiB)

    def __post_init__(self):
        if self.max_batch_size < 0:  # 0: batchless (a user's deployment as its config.pbtxt declares it)
            raise ValueError(f"max_batch_size must be >= 0, got {self.max_batch_size}")
        if self.instance_kind not in INSTANCE_KINDS.values():
            raise ValueError(f"instance_kind {self.instance_kind!r}; valid choices: "
                             f"{', '.join(INSTANCE_KINDS.values())}")
        too_big = [b for b in self.preferred_batch_sizes if b > self.max_batch_size]
        if too_big:
            raise ValueError(f"preferred batch sizes {too_big} exceed max_batch_size {self.max_batch_size}")
        if self.backend_accelerator not in BACKEND_ACCELERATORS:
            raise ValueError(f"backend_accelerator {self.backend_accelerator!r}; valid choices: "
                             f"{', '.join(BACKEND_ACCELERATORS)}")
        if self.precision_mode not in PRECISION_MODES:
            raise ValueError(f"precision_mode {self.precision_mode!r}; valid choices: {', '.join(PRECISION_MODES)}")
        if self.max_workspace_size_bytes < 0:
            raise ValueError(f"max_workspace_size_bytes must be >= 0, got {self.max_workspace_size_bytes}")


def deployment_name(spec: ModelSpec, fmt: str, precision: str, scenario: str) -> str:
    name = f"{spec.name}_{spec.size}_{fmt}_{precision}_{scenario}"
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def model_config(name: str, spec: ModelSpec, backend: Backend, config: DeploymentConfig):
    """The deployment's ``ModelConfig`` protobuf message."""
    from tritonclient.grpc import model_config_pb2 as mc

    cfg = mc.ModelConfig(name=name, platform=backend.platform, max_batch_size=config.max_batch_size)
    for tensors, target in ((spec.inputs, cfg.input), (spec.outputs, cfg.output)):
        for t in tensors:
            target.add(name=t.name, data_type=mc.DataType.Value(f"TYPE_{t.triton_dtype}"), dims=list(t.shape))
    cfg.instance_group.add(count=config.instance_count, kind=mc.ModelInstanceGroup.Kind.Value(config.instance_kind))
    if config.dynamic_batching:
        cfg.dynamic_batching.preferred_batch_size.extend(config.preferred_batch_sizes)
        cfg.dynamic_batching.max_queue_delay_microseconds = config.max_queue_delay_microseconds
    for key, value in backend.parameters(config).items():
        cfg.parameters[key].string_value = value
    for name, parameters in backend.gpu_execution_accelerators(config):
        accelerator = cfg.optimization.execution_accelerators.gpu_execution_accelerator.add(name=name)
        accelerator.parameters.update(parameters)
    return cfg


def config_json(cfg) -> dict:
    """A ``ModelConfig`` message as the JSON Triton hands a backend (and serves at ``/v2/models/<m>/config``)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(cfg, preserving_proto_field_name=True)


def _link_or_copy(src: Path, dst: Path) -> None:
    """The deployment's own copy of the cached artifact (a reflink where the filesystem has them, never a hard
    link): nothing written through ``<repository>/<deployment>/`` reaches the cache."""
    from tritonsuite.core.integrity import private_copy

    private_copy(src, dst)


def build_deployment(repository: str | Path, name: str, spec: ModelSpec, artifact, config: DeploymentConfig) -> Path:
    """Write ``<repository>/<name>/`` (config.pbtxt, 1/<model file>) for an exported
    :class:`~tritonsuite.deploy.export.Artifact` and return the directory.

    The directory is rebuilt in a temporary place and swapped in, so a concurrent reader never sees half of it.
    """
    from google.protobuf import text_format

    backend = backend_for(artifact.format)
    final = Path(repository) / name
    tmp = Path(repository) / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "1").mkdir(parents=True)
    (tmp / "config.pbtxt").write_text(text_format.MessageToString(model_config(name, spec, backend, config)))
    _link_or_copy(artifact.path, tmp / "1" / backend.file_name)
    old = final.with_name(f".{name}.old-{os.getpid()}")
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def read_config(deployment_dir: str | Path):
    """Parse a deployment's ``config.pbtxt`` back into a ``ModelConfig`` message."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    return text_format.Parse(Path(deployment_dir, "config.pbtxt").read_text(), mc.ModelConfig())


def config_of(deployment_dir: str | Path) -> dict:
    """A deployment's ``config.pbtxt`` as JSON (:func:`config_json`), named after its directory when the file
    leaves the name out (as Triton names it)."""
    found = config_json(read_config(deployment_dir))
    found.setdefault("name", Path(deployment_dir).name)
    return found


def describe_deployment(deployment_dir: str | Path, composing: tuple[str, ...] = ()):
    """The :class:`~tritonsuite.core.description.ModelDescription` of a deployment directory, an ensemble's steps (and
    the ``composing`` models of a BLS one) resolved from the same repository."""
    from tritonsuite.core.description import describe

    repository = Path(deployment_dir).parent

    def lookup(name: str) -> dict:
        if not (repository / name / "config.pbtxt").is_file():
            raise LookupError(f"no {repository / name / 'config.pbtxt'}")
        return config_of(repository / name)

    return describe(config_of(deployment_dir), lookup, composing)

