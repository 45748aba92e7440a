"""Triton model repositories in Triton's own form: ``<deployment>/config.pbtxt`` and ``<deployment>/1/<model file>``.

``config.pbtxt`` is written from Triton's model-configuration protobuf (``tritonclient.grpc.model_config_pb2``)
with ``google.protobuf.text_format`` and holds only what a stock backend understands: the platform, max batch
size, inputs and outputs, the instance group, dynamic batching, the backend's own parameters (threads, tensor
fuser, inference mode; :mod:`tritonsuite.deploy.backends`) and its execution accelerators (onnxruntime's TensorRT).
The version directory holds the artifact alone, under the platform's default file name, so the directory loads
unchanged on any Triton that has the backend.

A deployment's configuration is Triton's own ``ModelConfig`` in its JSON form (:func:`config_json`, what Triton
hands a backend): :func:`model_config` makes one from a profile's settings, a tune candidate is another with its
tuned fields set (:mod:`tritonsuite.profiles.tunespace`), :func:`build_deployment` and :func:`copy_deployment` write
it, and the deployment's :class:`~tritonsuite.core.description.ModelDescription` is read from it.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Mapping

from tritonsuite.core.device import INSTANCE_KINDS
from tritonsuite.core.spec import ModelSpec
from tritonsuite.deploy.backends import backend_for

#: ``backend_accelerator`` choices: none, or the onnxruntime backend's TensorRT execution accelerator (GPU instances)
BACKEND_ACCELERATORS = ("none", "trt")
#: The TensorRT accelerator's ``precision_mode`` values the suite writes (INT8 needs a calibration table)
PRECISION_MODES = ("FP32", "FP16")


def deployment_name(spec: ModelSpec, fmt: str, precision: str, scenario: str) -> str:
    name = f"{spec.name}_{spec.size}_{fmt}_{precision}_{scenario}"
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def model_config(name: str, spec: ModelSpec, fmt: str, *, max_batch_size: int, instance_count: int = 1,
                 instance_kind: str = "KIND_CPU", intra_op_threads: int = 0, dynamic_batching: bool = False,
                 preferred_batch_sizes: tuple[int, ...] = (), max_queue_delay_microseconds: int = 0,
                 backend_accelerator: str = "none", precision_mode: str = "FP32",
                 max_workspace_size_bytes: int = 0) -> dict:
    """The configuration (JSON, :func:`config_json`) of a deployment of ``spec`` exported as ``fmt``, from the
    settings a profile gives in Triton's vocabulary: the platform, tensors, max batch size (0: batchless), one
    instance group, dynamic batching when asked, the backend's own parameters for ``intra_op_threads`` (0: its
    default) and its execution accelerator (``backend_accelerator``: none, or onnxruntime's TensorRT). A bad value
    is one ValueError line naming it and the valid choices."""
    from tritonclient.grpc import model_config_pb2 as mc

    if max_batch_size < 0:  # 0: batchless
        raise ValueError(f"max_batch_size must be >= 0, got {max_batch_size}")
    if instance_kind not in INSTANCE_KINDS.values():
        raise ValueError(f"instance_kind {instance_kind!r}; valid choices: {', '.join(INSTANCE_KINDS.values())}")
    too_big = [b for b in preferred_batch_sizes if b > max_batch_size]
    if too_big:
        raise ValueError(f"preferred batch sizes {too_big} exceed max_batch_size {max_batch_size}")
    if backend_accelerator not in BACKEND_ACCELERATORS:
        raise ValueError(f"backend_accelerator {backend_accelerator!r}; valid choices: "
                         f"{', '.join(BACKEND_ACCELERATORS)}")
    if precision_mode not in PRECISION_MODES:
        raise ValueError(f"precision_mode {precision_mode!r}; valid choices: {', '.join(PRECISION_MODES)}")
    if max_workspace_size_bytes < 0:
        raise ValueError(f"max_workspace_size_bytes must be >= 0, got {max_workspace_size_bytes}")
    backend = backend_for(fmt)
    cfg = mc.ModelConfig(name=name, platform=backend.platform, max_batch_size=max_batch_size)
    for tensors, target in ((spec.inputs, cfg.input), (spec.outputs, cfg.output)):
        for t in tensors:
            target.add(name=t.name, data_type=mc.DataType.Value(f"TYPE_{t.triton_dtype}"), dims=list(t.shape))
    cfg.instance_group.add(count=instance_count, kind=mc.ModelInstanceGroup.Kind.Value(instance_kind))
    if dynamic_batching:
        cfg.dynamic_batching.preferred_batch_size.extend(preferred_batch_sizes)
        cfg.dynamic_batching.max_queue_delay_microseconds = max_queue_delay_microseconds
    for key, value in backend.parameters(intra_op_threads, instance_kind).items():
        cfg.parameters[key].string_value = value
    for accelerator, parameters in backend.accelerators(backend_accelerator, precision_mode, max_workspace_size_bytes):
        found = cfg.optimization.execution_accelerators.gpu_execution_accelerator.add(name=accelerator)
        found.parameters.update(parameters)
    return config_json(cfg)


def config_json(cfg) -> dict:
    """A ``ModelConfig`` message as the JSON Triton hands a backend (and serves at ``/v2/models/<m>/config``)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(cfg, preserving_proto_field_name=True)


def config_text(config: Mapping) -> str:
    """A configuration (JSON) as ``config.pbtxt`` text, through Triton's protobuf (a field it lacks is an error)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2 as mc

    return text_format.MessageToString(json_format.ParseDict(config, mc.ModelConfig()))


def write_config(path: str | Path, config: Mapping) -> Path:
    """Write ``config`` (JSON) as a stock ``config.pbtxt`` at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(config))
    return path


def _link_or_copy(src: Path, dst: Path) -> None:
    """The deployment's own copy of the cached artifact (a reflink where the filesystem has them, never a hard
    link): nothing written through ``<repository>/<deployment>/`` reaches the cache."""
    from tritonsuite.core.integrity import private_copy

    private_copy(src, dst)


def build_deployment(repository: str | Path, config: Mapping, artifact) -> Path:
    """Write ``<repository>/<config name>/`` (config.pbtxt from ``config``, 1/<model file>) for an exported
    :class:`~tritonsuite.deploy.export.Artifact` and return the directory."""
    def files(tmp: Path) -> None:
        (tmp / "1").mkdir()
        _link_or_copy(artifact.path, tmp / "1" / backend_for(artifact.format).file_name)

    return _swap_in(Path(repository), config, files)


def copy_deployment(source: str | Path, repository: str | Path, config: Mapping) -> Path:
    """``<repository>/<config name>/``: every file of the deployment directory ``source`` (its version directories,
    labels, model.py) under the configuration ``config``; e.g. a tune candidate beside the deployment it varies."""
    source = Path(source)

    def files(tmp: Path) -> None:
        for path in sorted(source.rglob("*")):
            target = tmp / path.relative_to(source)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif path.relative_to(source) != Path("config.pbtxt"):
                target.parent.mkdir(parents=True, exist_ok=True)
                _link_or_copy(path, target)

    return _swap_in(Path(repository), config, files)


def _swap_in(repository: Path, config: Mapping, fill) -> Path:
    """The directory is built in a temporary place (``fill(tmp)`` adds the files) and swapped in, so a concurrent
    reader never sees half of it."""
    name = str(config["name"])
    final = repository / name
    tmp = repository / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    write_config(tmp / "config.pbtxt", config)
    fill(tmp)
    old = final.with_name(f".{name}.old-{os.getpid()}")
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


class NotUtf8(ValueError):
    """A config.pbtxt with a byte that is not UTF-8 in a value (the message names the file, line and byte)."""


def pbtxt_text(config_file: str | Path) -> str:
    """A ``config.pbtxt``'s text as Triton reads it. UTF-8; a line whose bytes that are not UTF-8 all lie in its
    comment reads with them replaced, since Triton skips comments and loads such a file (seen with 2.51). One in a
    value raises :class:`NotUtf8`: Triton drops such bytes and would serve another string than the file shows."""
    raw = Path(config_file).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    lines = []
    for number, line in enumerate(raw.split(b"\n"), 1):
        try:
            lines.append(line.decode("utf-8"))
            continue
        except UnicodeDecodeError as exc:
            bad = exc.start
        comment = _comment_start(line)
        if comment is None or comment > bad:
            raise NotUtf8(f"{config_file}: line {number}: byte 0x{line[bad]:02X} is not UTF-8, in a value (Triton "
                          f"drops such bytes and would serve another string): save config.pbtxt as UTF-8")
        lines.append(line.decode("utf-8", errors="replace"))
    return "\n".join(lines)


def _comment_start(line: bytes) -> int | None:
    """Where a text-format line's ``#`` comment starts (outside a quoted string), or None."""
    quote, escaped = None, False
    for i, byte in enumerate(line):
        if escaped:
            escaped = False
        elif quote and byte == 0x5C:  # a backslash escapes the next byte inside a string
            escaped = True
        elif quote and byte == quote:
            quote = None
        elif not quote and byte in (0x22, 0x27):  # " or '
            quote = byte
        elif not quote and byte == 0x23:  # #
            return i
    return None


def read_config(deployment_dir: str | Path):
    """Parse a deployment's ``config.pbtxt`` back into a ``ModelConfig`` message."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    return text_format.Parse(pbtxt_text(Path(deployment_dir, "config.pbtxt")), mc.ModelConfig())


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

