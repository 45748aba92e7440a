"""Bring your own deployment: every deployment of a stock Triton model repository, driven with no Python spec.

:func:`read_repository` reads each ``<deployment>/config.pbtxt`` with Triton's own protobuf into the one
description of a deployment (:func:`tritonsuite.core.description.describe`): platform, tensors of every Triton dtype
(BYTES, BOOL, FP16, BF16, the integer widths), max batch size (0: batchless), instance groups, dynamic batching,
version policy. Sequence, decoupled and python/BLS models are drivable (their kind is read from the served
configuration); deployments the suite cannot drive yet come back as :class:`Undrivable` with their reason.
:func:`user_spec` turns a drivable deployment and its input data (perf_analyzer's,
:mod:`tritonsuite.core.inputdata`) into a :class:`~tritonsuite.core.spec.ModelSpec` whose reference is the same model
file run in-process by the backend's session (onnxruntime, ``torch.jit.load``); a policy serving several versions
gives one spec per version, named ``name:version``. :func:`serve` copies the whole deployment directory (label
and resource files, every version directory the policy selects) into the run's repository
(:mod:`tritonsuite.deploy.userserve`; the user's directory is never written).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from tritonsuite.core.description import DescriptionError, ModelDescription, describe
from tritonsuite.core.spec import AccuracyData, ModelSpec, RepositoryEntry, TensorSpec, file_digest
from tritonsuite.deploy.repository import NotUtf8
from tritonsuite.deploy.userserve import (RepositoryError, config_json, parse_input_data, parse_tolerances,
                                          repository_lookup, version_directories)
from tritonsuite.deploy.validation import validation_score

#: the ``size`` a user deployment has in the registry and the profile
SIZE = "repository"
#: platform or backend in config.pbtxt -> (the suite's format name, Triton backend name)
DRIVABLE = {"onnxruntime_onnx": ("onnx", "onnxruntime"), "onnxruntime": ("onnx", "onnxruntime"),
            "pytorch_libtorch": ("ts-script", "pytorch"), "pytorch": ("ts-script", "pytorch"),
            "tensorrt_plan": ("trt", "tensorrt"), "tensorrt": ("trt", "tensorrt"),
            "python": ("python", "python")}  # python backend (BLS included): run for real by the wheel's backend
DEFAULT_FILES = {"onnxruntime": "model.onnx", "pytorch": "model.pt", "tensorrt": "model.plan", "python": "model.py"}


@dataclass(frozen=True)
class Undrivable:
    name: str
    reason: str
    # a defect of the configuration Triton itself refuses (it does not parse, names another model): its run fails.
    # A missing version directory or model file is listed, not failed: git keeps no empty directory, so an
    # ensemble's empty 1/ and files fetched at deploy time are often absent from a checkout
    refused: bool = False


@dataclass(frozen=True)
class UserDeployment:
    """One drivable deployment of a user's repository: where its files are, and its description (what its
    config.pbtxt declares, :mod:`tritonsuite.core.description`), which every other fact is read from."""

    name: str
    directory: Path  # the user's <repository>/<name>
    version: str  # the version this entry drives (of ``versions``)
    model_file: Path
    format: str
    backend: str
    platform: str
    description: ModelDescription
    versions: tuple[str, ...] = ()  # every version directory the version policy selects, ascending
    auto_completed: bool = False  # shipped without config.pbtxt: the server completes it (read back when loaded)

    @property
    def config(self) -> Mapping:  # the configuration as JSON (what Triton hands a backend)
        return self.description.config

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.description.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.description.outputs

    @property
    def max_batch_size(self) -> int:
        return self.description.max_batch_size

    @property
    def instance_count(self) -> int:
        return self.description.instance_count

    @property
    def instance_kind(self) -> str:
        from tritonsuite.deploy.backends import instance_kind

        return instance_kind(self.config)

    @property
    def precision(self) -> str:
        return "fp16" if any(t.dtype == "float16" for t in self.inputs + self.outputs) else "fp32"

    @property
    def ref(self) -> str:
        """How rows and requests name it: ``name``, or ``name:version`` when the policy serves several versions."""
        return f"{self.name}:{self.version}" if len(self.versions) > 1 else self.name

    def at_version(self, version: str) -> "UserDeployment":
        return dataclasses.replace(self, version=version, model_file=self.directory / version / self.model_file.name)


def read_deployment(directory: str | Path) -> UserDeployment | Undrivable:
    """One deployment directory: drivable, or why not."""
    directory = Path(directory)
    name = directory.name
    auto_completed = not (directory / "config.pbtxt").is_file()
    try:
        config = config_json(directory) if not auto_completed else auto_complete(directory)
    except NotUtf8 as exc:  # Triton loads it, serving other strings than the file shows: not driven, not refused
        return Undrivable(name, str(exc))
    except ValueError as exc:
        return Undrivable(name, str(exc), refused=True)
    if isinstance(config, Undrivable):
        return config
    if config["name"] != name:
        return Undrivable(name, f"config.pbtxt names it {config['name']!r}, Triton refuses a name unlike its directory",
                          refused=True)
    try:
        desc = describe(config, repository_lookup(directory.parent))
    except DescriptionError as exc:
        return Undrivable(name, str(exc))
    kind = desc.platform or desc.backend
    if desc.ensemble:  # driven as one deployment; its reference is its steps composed in-process
        leaves = [m for m in desc.all_composing() if not m.ensemble]
        bad = [m for m in leaves if (m.platform or m.backend) not in DRIVABLE or m.python]
        if bad:
            return Undrivable(name, f"ensemble with step {bad[0].name} ({bad[0].platform or bad[0].backend}), which "
                                    f"the suite cannot drive yet")
        kind = leaves[0].platform or leaves[0].backend
    # decoupled models (load.streams), sequence batching (load.kinds.sequence) and python/BLS models are driven: the
    # description tells the engine and the judges which they are
    if kind not in DRIVABLE:
        return Undrivable(name, f"platform/backend {kind or '(none)'!r}: the suite drives "
                                f"{', '.join(sorted(k for k in DRIVABLE if '_' in k or k == 'python'))}")
    fmt, backend = DRIVABLE[kind]
    found = version_directories(directory)
    versions = tuple(str(v) for v in desc.version_policy.served(found))
    if not versions:
        return Undrivable(name, f"{'ensemble: ' if desc.ensemble else ''}no version directory the version policy "
                                f"{desc.version_policy.describe()} selects (found {found or 'none'}; an ensemble's "
                                f"may be empty)")
    filename = "" if desc.ensemble else desc.default_model_filename or DEFAULT_FILES[backend]
    missing = [v for v in versions if filename and not (directory / v / filename).exists()]
    if missing:
        return Undrivable(name, f"no model file {missing[0]}/{filename}")
    return UserDeployment(
        name=name, directory=directory, version=versions[-1], model_file=directory / versions[-1] / filename,
        format=fmt, backend=backend, platform=desc.platform or f"{backend} backend", description=desc,
        versions=versions, auto_completed=auto_completed)


def auto_complete(directory: Path) -> dict | Undrivable:
    """A deployment shipped without config.pbtxt, as Triton completes it: the backend from the model file's name,
    and for ONNX the tensors, max batch size and dynamic batching the onnxruntime backend fills in (the embedded
    server's stand-in runs the same :func:`~tritonsuite.deploy.backends.standin.onnx_auto_complete`; what the
    server completed is read back and checked when loaded). The pytorch backend does not complete tensors."""
    from tritonsuite.deploy.backends.standin import onnx_auto_complete

    versions = version_directories(directory)
    latest = directory / str(versions[-1]) if versions else directory
    if (latest / "model.onnx").is_file():
        return {"name": directory.name, "platform": "onnxruntime_onnx", "backend": "onnxruntime",
                **onnx_auto_complete(str(latest / "model.onnx"))}
    if (latest / "model.pt").is_file():
        return Undrivable(directory.name, "no config.pbtxt: Triton's pytorch backend does not auto-complete a "
                                          "TorchScript model's inputs and outputs; declare them in config.pbtxt")
    return Undrivable(directory.name, "no config.pbtxt and no model.onnx to auto-complete it from")


def completion_needed(repository: str | Path) -> str | None:
    """Why a server of ``repository`` must auto-complete a configuration (the first deployment that needs it: shipped
    without config.pbtxt, a config.pbtxt that declares no tensors, or a python model that completes its own with
    ``auto_complete_config``), or None when each is complete as written: a server with the stand-ins may then start
    with auto-completion off (:meth:`tritonsuite.server.embedded.EmbeddedServer._completion_arguments`)."""
    repository = Path(repository)
    for directory in sorted(d for d in repository.iterdir() if d.is_dir() and not d.name.startswith(".")):
        if not (directory / "config.pbtxt").is_file():
            return f"{directory.name} ships no config.pbtxt"
        try:
            config = config_json(directory)
        except ValueError:  # not parsable, not UTF-8: refused or not driven, completed or not
            continue
        if config.get("platform") != "ensemble" and not config.get("input") and not config.get("output"):
            return f"{directory.name}'s config.pbtxt declares no inputs or outputs"
        for source in sorted(directory.rglob("*.py")):
            if "auto_complete_config" in source.read_text(errors="replace"):
                return f"{directory.name}/{source.relative_to(directory)} completes its own configuration"
    return None


def read_repository(repository: str | Path) -> tuple[list[UserDeployment], list[Undrivable]]:
    """Every deployment of a stock model repository, drivable or not (with the reason)."""
    repository = Path(repository)
    if not repository.is_dir():
        raise RepositoryError(f"--model-repository {repository}: no such directory")
    found = [read_deployment(d) for d in sorted(repository.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    if not found:
        raise RepositoryError(f"--model-repository {repository}: no deployment directories (<name>/config.pbtxt)")
    return [f for f in found if isinstance(f, UserDeployment)], [f for f in found if isinstance(f, Undrivable)]


REFERENCE_BACKENDS = {".onnx": "onnxruntime", ".pt": "pytorch", ".pth": "pytorch", ".ts": "pytorch"}


class Reference:
    """The deployment's model file run in-process, as its stock backend runs it (the accuracy reference); or a
    reference file given apart (``--reference DEPLOYMENT=FILE``: the ONNX a plan was built from, the file a
    deployment should hold), run by the backend its suffix names, under the deployment's tensors."""

    def __init__(self, dep: UserDeployment, file: str | Path | None = None):
        self.batchless = dep.max_batch_size == 0
        if str(file or "").endswith(".py") or (file is None and dep.backend == "python"):
            from tritonsuite.deploy.pyreference import python_reference

            self._session = python_reference(dep, file)
        elif dep.description.ensemble and file is None:
            from tritonsuite.deploy.ensemble import ComposedReference

            self._session = ComposedReference(dep.description, lambda model, version: _step_session(
                dep.directory.parent / model.name, version))
        elif file is not None:
            from tritonsuite.deploy.backends.standin import open_session

            backend = REFERENCE_BACKENDS.get(Path(file).suffix)
            if backend is None:
                raise RepositoryError(f"--reference {dep.name}={file}: unknown model file suffix; valid choices: "
                                      f"{', '.join(REFERENCE_BACKENDS)}, .py")
            self._session = open_session(backend, str(file), dict(dep.config), "cpu")
        elif dep.backend == "tensorrt":
            from tritonsuite.deploy.backends import backend_for

            self._session = backend_for("trt").session(dep.model_file, dict(dep.config), "cuda")
        else:
            from tritonsuite.deploy.backends.standin import open_session

            self._session = open_session(dep.backend, str(dep.model_file), dict(dep.config), "cpu")

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.batchless:  # batch first in and out, as every runner; the model sees one sample at a time
            runs = [self._session({k: v[i] for k, v in inputs.items()}) for i in range(len(next(iter(inputs.values()))))]
            return {k: np.stack([np.asarray(r[k]) for r in runs]) for k in runs[0]}
        return {k: np.asarray(v) for k, v in self._session(inputs).items()}


def _step_session(directory: Path, version: int):
    """A composing model of an ensemble run in-process at ``version`` (-1: the latest its policy serves)."""
    dep = read_deployment(directory)
    if isinstance(dep, Undrivable):
        raise RepositoryError(f"ensemble step {dep.name}: no in-process reference ({dep.reason})")
    if version > 0 and str(version) not in dep.versions:
        raise RepositoryError(f"ensemble step {dep.name} asks for version {version}; served: {', '.join(dep.versions)}")
    return Reference(dep.at_version(str(version)) if version > 0 else dep)


def _bounded_outputs(dep: UserDeployment, data) -> tuple[TensorSpec, ...]:
    """Outputs with dynamic dims get ``max_shape`` from the reference run on the input data's largest batch (what
    system shared memory is sized by)."""
    if all(d >= 0 for t in dep.outputs for d in t.shape) or dep.backend == "python":
        return dep.outputs
    reference = Reference(dep)
    largest: dict[str, np.ndarray] = {}
    for start in range(min(len(data.steps), 64)):
        for name, value in reference(data.batch(1, start)).items():
            shape = np.asarray(value.shape[1:])
            largest[name] = np.maximum(largest.get(name, shape), shape)
    return tuple(dataclasses.replace(t, max_shape=tuple(int(d) for d in largest[t.name]))
                 if any(d < 0 for d in t.shape) else t for t in dep.outputs)


def user_spec(dep: UserDeployment, data, tolerances: Mapping[str, tuple[float, float]] | None = None,
              reference: Path | None = None) -> ModelSpec:
    """A registry entry for a user deployment: its signature from config.pbtxt, example inputs from the input data
    (perf_analyzer's), the same model file in-process as the reference, and the validation data as its metric."""
    tolerances = {k: tuple(v) for k, v in (tolerances or {}).items()}
    expected = data.expected()

    def accuracy(dataset, checkpoint) -> AccuracyData:
        return AccuracyData(inputs=data.all_steps(), score=validation_score(dep.outputs, expected, tolerances),
                            description=f"input data {data.describe()}; reference: "
                                        f"{reference or dep.model_file.name} run in-process")

    digest = file_digest(dep.model_file) if dep.model_file.is_file() else None
    return ModelSpec(
        name=dep.ref, size=SIZE, build=lambda checkpoint: Reference(dep, reference), inputs=dep.inputs,
        outputs=_bounded_outputs(dep, data) if dep.backend != "tensorrt" else dep.outputs,
        example_inputs=lambda batch_size, seed: data.batch(batch_size, seed % len(data.steps)),
        formats=(dep.format,), precisions=(dep.precision,),
        tolerances={dep.precision: {k: v for k, v in tolerances.items()}}, accuracy_data=accuracy,
        served_from=RepositoryEntry(dep.directory, dep.version, tuple(dep.versions), digest,
                                    str(reference) if reference else None, dep.auto_completed, dep.max_batch_size,
                                    tuple(m.name for m in dep.description.all_composing())),
        parameters={"Model repository": str(dep.directory.parent), "Model file": f"{dep.version}/{dep.model_file.name} "
                    f"(served as given, sha256 {str(digest)[:12]})" if digest else "ensemble of " + ", ".join(
                        m.name for m in dep.description.all_composing()), "Export format": "none (the user's file)",
                    "Input data": data.describe(), **({"Configuration": "none shipped: auto-completed by the server, "
                                                       "read back from it"} if dep.auto_completed else {}),
                    **_kind_parameters(dep)},
        description=f"{dep.platform} deployment from {dep.directory}", title=dep.ref)


def _kind_parameters(dep: UserDeployment) -> dict[str, str]:
    """The report's rows naming what kind of deployment it is and which version of its policy a row drives."""
    desc = dep.description
    found = {"Deployment kind": ", ".join(desc.kinds), "Platform": desc.platform or dep.platform,
             "Version": f"{dep.version} (version policy {desc.version_policy.describe()}; served: "
                        f"{', '.join(dep.versions)})"}
    if desc.ensemble:
        found["Ensemble steps"] = " -> ".join(s.model for s in desc.steps)
    return found

