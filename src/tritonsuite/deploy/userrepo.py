"""Bring your own deployment: every deployment of a stock Triton model repository, driven with no Python spec.

:func:`read_repository` parses each ``<deployment>/config.pbtxt`` with Triton's own protobuf
(``tritonclient.grpc.model_config_pb2`` + ``text_format``): platform, tensors, dtypes, dims, max batch size,
instance groups and dynamic batching. Deployments the suite cannot drive (ensembles, no batch dimension,
unsupported dtypes or backends) come back as :class:`Undrivable` with their reason; sequence, decoupled and
python/BLS models are drivable (their kind is read from the served configuration, :mod:`tritonsuite.description`). :func:`user_spec` turns a drivable deployment and its input data (perf_analyzer's,
:mod:`tritonsuite.load.inputdata`) into a :class:`~tritonsuite.spec.ModelSpec` whose reference is the same model
file run in-process by the backend's session (onnxruntime, ``torch.jit.load``); :func:`serve` copies the
deployment's ``config.pbtxt`` and version directory, unchanged, into the run's repository (the user's directory is
never written).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from tritonsuite.spec import TRITON_DTYPES, AccuracyData, Metric, ModelSpec, TensorSpec, file_digest

#: the ``size`` a user deployment has in the registry and the profile
SIZE = "repository"
#: platform or backend in config.pbtxt -> (the suite's format name, Triton backend name)
DRIVABLE = {"onnxruntime_onnx": ("onnx", "onnxruntime"), "onnxruntime": ("onnx", "onnxruntime"),
            "pytorch_libtorch": ("ts-script", "pytorch"), "pytorch": ("ts-script", "pytorch"),
            "tensorrt_plan": ("trt", "tensorrt"), "tensorrt": ("trt", "tensorrt"),
            "python": ("python", "python")}  # python backend (BLS included): run for real by the wheel's backend
DEFAULT_FILES = {"onnxruntime": "model.onnx", "pytorch": "model.pt", "tensorrt": "model.plan", "python": "model.py"}
_NUMPY = {v: k for k, v in TRITON_DTYPES.items() if k not in ("bytes", "bfloat16")}  # the load generators' types


class RepositoryError(ValueError):
    """A model repository or deployment that cannot be read; the message names it and what was expected."""


@dataclass(frozen=True)
class Undrivable:
    name: str
    reason: str


@dataclass(frozen=True)
class UserDeployment:
    """One drivable deployment of a user's repository, as its config.pbtxt declares it."""

    name: str
    directory: Path  # the user's <repository>/<name>
    version: str  # the version directory served (the highest, as Triton's default version policy)
    model_file: Path
    format: str
    backend: str
    platform: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int
    instance_count: int
    instance_kind: str
    dynamic_batching: bool
    preferred_batch_sizes: tuple[int, ...]
    max_queue_delay_microseconds: int
    config: Mapping  # the configuration as JSON (what Triton hands a backend)

    @property
    def precision(self) -> str:
        return "fp16" if any(t.dtype == "float16" for t in self.inputs + self.outputs) else "fp32"


def _tensors(entries, where: str) -> tuple[tuple[TensorSpec, ...], str | None]:
    from tritonclient.grpc import model_config_pb2 as mc

    tensors = []
    for t in entries:
        dtype = mc.DataType.Name(t.data_type).removeprefix("TYPE_")
        if dtype not in _NUMPY:
            return (), f"{where} {t.name} is {dtype}; the suite drives {', '.join(sorted(_NUMPY))}"
        tensors.append(TensorSpec(t.name, _NUMPY[dtype], tuple(int(d) for d in t.dims)))
    return tuple(tensors), None


def read_deployment(directory: str | Path) -> UserDeployment | Undrivable:
    """One deployment directory: drivable, or why not."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2 as mc

    directory = Path(directory)
    name = directory.name
    config_file = directory / "config.pbtxt"
    if not config_file.is_file():
        return Undrivable(name, "no config.pbtxt (the suite does not auto-complete configurations)")
    try:
        cfg = text_format.Parse(config_file.read_text(), mc.ModelConfig())
    except text_format.ParseError as exc:
        raise RepositoryError(f"{config_file}: not a ModelConfig: {exc}") from None
    if cfg.name and cfg.name != name:
        return Undrivable(name, f"config.pbtxt names it {cfg.name!r}, Triton refuses a name unlike its directory")
    kind = cfg.platform or cfg.backend
    if kind == "ensemble" or cfg.HasField("ensemble_scheduling"):
        return Undrivable(name, "ensemble: its steps are other deployments; drive those")
    # decoupled models (load.streams), sequence batching (load.sequences) and python/BLS models are driven: the
    # description (tritonsuite.description) tells the engine and the judges which they are
    if kind not in DRIVABLE:
        return Undrivable(name, f"platform/backend {kind or '(none)'!r}: the suite drives "
                                f"{', '.join(sorted(k for k in DRIVABLE if '_' in k))}")
    if cfg.max_batch_size < 1:
        return Undrivable(name, "max_batch_size 0 (no batch dimension): the suite's load points are batched")
    fmt, backend = DRIVABLE[kind]
    inputs, why = _tensors(cfg.input, "input")
    outputs, why_out = _tensors(cfg.output, "output")
    if why or why_out:
        return Undrivable(name, why or why_out)
    versions = sorted((p for p in directory.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        return Undrivable(name, "no numeric version directory")
    model_file = versions[-1] / (cfg.default_model_filename or DEFAULT_FILES[backend])
    if not model_file.exists():
        return Undrivable(name, f"no model file {model_file.relative_to(directory)}")
    groups = list(cfg.instance_group)
    kinds = {mc.ModelInstanceGroup.Kind.Name(g.kind) for g in groups}
    db = cfg.dynamic_batching
    return UserDeployment(
        name=name, directory=directory, version=versions[-1].name, model_file=model_file, format=fmt,
        backend=backend, platform=cfg.platform or f"{backend} backend", inputs=inputs, outputs=outputs,
        max_batch_size=cfg.max_batch_size, instance_count=sum(g.count or 1 for g in groups) or 1,
        instance_kind="KIND_GPU" if "KIND_GPU" in kinds else "KIND_CPU", dynamic_batching=cfg.HasField(
            "dynamic_batching"), preferred_batch_sizes=tuple(db.preferred_batch_size),
        max_queue_delay_microseconds=int(db.max_queue_delay_microseconds),
        config=json_format.MessageToDict(cfg, preserving_proto_field_name=True))


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
        if str(file or "").endswith(".py") or (file is None and dep.backend == "python"):
            from tritonsuite.deploy.pyreference import python_reference

            self._session = python_reference(dep, file)
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
        return {k: np.asarray(v) for k, v in self._session(inputs).items()}


def _validation_score(spec_outputs, expected: Mapping[str, np.ndarray], tolerances):
    """Metrics judging the served outputs against perf_analyzer's ``validation_data``: per output, the elements
    outside atol + rtol x |expected| (must be 0), with the comparison statistics of judge.accuracy."""
    def score(served, reference, precision) -> list[Metric]:
        from tritonsuite.judge.accuracy import compare_outputs

        metrics = []
        for out in spec_outputs:
            if out.name not in expected:
                continue
            name = f"validation_data {out.name} elements out of tolerance"
            probe = _ToleranceView((out,), tolerances)
            if served[out.name].shape != expected[out.name].shape:
                metrics.append(Metric(name, float("inf"), 0.0, higher_is_better=False,
                                      worst=f"served shape {served[out.name].shape}, expected "
                                            f"{expected[out.name].shape}"))
                continue
            c = compare_outputs({out.name: served[out.name]}, {out.name: expected[out.name]}, probe, precision)[0]
            metrics.append(Metric(name, float(c.mismatched), 0.0, higher_is_better=False,
                                  worst=c.describe() if c.mismatched else ""))
        return metrics

    return score


@dataclass(frozen=True)
class _ToleranceView:
    """What judge.accuracy.compare_outputs reads of a spec: outputs and tolerances."""

    outputs: tuple[TensorSpec, ...]
    tolerances: Mapping[str, tuple[float, float]]

    def tolerance(self, precision: str, output: str) -> tuple[float, float]:
        return tuple(self.tolerances.get(output, (1e-4, 1e-4))[:2])

    def mismatch_share(self, precision: str, output: str) -> float:
        return 0.0


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
        return AccuracyData(inputs=data.all_steps(), score=_validation_score(dep.outputs, expected, tolerances),
                            description=f"input data {data.describe()}; reference: "
                                        f"{reference or dep.model_file.name} run in-process")

    digest = file_digest(dep.model_file) if dep.model_file.is_file() else None
    return ModelSpec(
        name=dep.name, size=SIZE, build=lambda checkpoint: Reference(dep, reference), inputs=dep.inputs,
        outputs=_bounded_outputs(dep, data) if dep.backend != "tensorrt" else dep.outputs,
        example_inputs=lambda batch_size, seed: data.batch(batch_size, seed % len(data.steps)),
        formats=(dep.format,), precisions=(dep.precision,),
        tolerances={dep.precision: {k: v for k, v in tolerances.items()}}, accuracy_data=accuracy,
        config={"user_repository": str(dep.directory), "version": dep.version, "model_file_digest": digest,
                "reference": str(reference) if reference else None},
        parameters={"Model repository": str(dep.directory.parent), "Model file": f"{dep.version}/{dep.model_file.name} "
                    f"(served as given, sha256 {str(digest)[:12]})", "Export format": "none (the user's file)",
                    "Input data": data.describe()},
        description=f"{dep.platform} deployment from {dep.directory}", title=dep.name)


def is_user_spec(spec: ModelSpec) -> bool:
    return "user_repository" in spec.config


def deployment_config(dep: UserDeployment):
    """The deployment's settings as the suite's :class:`~tritonsuite.deploy.repository.DeploymentConfig` (for the
    report's parameter table; the served config.pbtxt is the user's, unchanged)."""
    from tritonsuite.deploy.repository import DeploymentConfig

    return DeploymentConfig(max_batch_size=dep.max_batch_size, instance_count=dep.instance_count,
                            instance_kind=dep.instance_kind, dynamic_batching=dep.dynamic_batching,
                            preferred_batch_sizes=tuple(b for b in dep.preferred_batch_sizes
                                                        if b <= dep.max_batch_size),
                            max_queue_delay_microseconds=dep.max_queue_delay_microseconds)


def serve(spec: ModelSpec, repository_dir: str | Path) -> Path:
    """Copy the user's config.pbtxt and served version directory, byte for byte, to ``<repository_dir>/<name>``
    (hard links where the file system allows: the suite never writes to them). Returns the copy."""
    source = Path(spec.config["user_repository"])
    final = Path(repository_dir) / source.name
    tmp = final.with_name(f".{source.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy2(source / "config.pbtxt", tmp / "config.pbtxt")
    shutil.copytree(source / spec.config["version"], tmp / spec.config["version"], copy_function=shutil.copy2)
    if spec.config["model_file_digest"]:
        served = [p for p in (tmp / spec.config["version"]).rglob("*") if p.is_file()]
        if spec.config["model_file_digest"] not in {file_digest(p) for p in served}:
            raise RepositoryError(f"{source}: the model file changed while the run copied it")
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    return final


def parse_tolerances(values) -> dict[str, tuple[float, float]]:
    """``--tolerance NAME=atol,rtol`` values (repeatable) into {output: (atol, rtol)}."""
    found = {}
    for value in values:
        name, sep, numbers = str(value).partition("=")
        try:
            atol, rtol = (float(x) for x in numbers.split(","))
        except ValueError:
            atol = rtol = -1.0
        if not sep or not name or atol < 0 or rtol < 0:
            raise RepositoryError(f"--tolerance {value!r}: expected OUTPUT=atol,rtol with non-negative numbers")
        found[name] = (atol, rtol)
    return found


def parse_input_data(values) -> dict[str, str]:
    """``--input-data [DEPLOYMENT=]VALUE`` values: {deployment or "": value}; "" is every other deployment's."""
    found = {"": "random"}
    for value in values:
        name, sep, rest = str(value).partition("=")
        if sep and name and "/" not in name and not Path(value).exists():
            found[name] = rest
        else:
            found[""] = value
    return found


def user_models(repository: str | Path, input_data: Mapping[str, str] | None = None, shapes: Mapping | None = None,
                tolerances: Mapping[str, tuple[float, float]] | None = None, batch_sizes=(), concurrency=(),
                named=None, references: Mapping[str, Path] | None = None, only=()):
    """Everything a run needs for a user repository: (specs, model profiles, undrivable deployments).

    A deployment the profile names (``models: <deployment>: {size: repository, ...}``, passed as ``named``) keeps
    that entry; any other runs offline at ``batch_sizes`` (default 1 and its max batch size) and online at
    ``concurrency`` (default 1, 2, 4) with batch 1, its own config.pbtxt deciding batching and instances.
    """
    from tritonsuite.load import inputdata
    from tritonsuite.profiles import ModelProfile, OfflineProfile, OnlineProfile

    deployments, undrivable = read_repository(repository)
    input_data = {"": "random", **(input_data or {})}
    tolerances = dict(tolerances or {})
    outputs = {t.name for d in deployments for t in d.outputs}
    unknown = [k for k in tolerances if k not in outputs]
    if unknown:
        raise RepositoryError(f"--tolerance {unknown[0]}: not an output of {repository}; valid choices: "
                              f"{', '.join(sorted(outputs))}")
    specs, profiles = [], {}
    for dep in deployments:
        if only and dep.name not in only:  # --models names others: this one's input data is not asked for
            continue
        data = inputdata.load(input_data.get(dep.name, input_data[""]), dep.inputs, dep.outputs, shapes)
        specs.append(user_spec(dep, data, tolerances, (references or {}).get(dep.name)))
        if named and dep.name in named:
            profiles[dep.name] = named[dep.name]
            continue
        too_big = [b for b in batch_sizes if b > dep.max_batch_size]
        if too_big:
            raise RepositoryError(f"--batch-sizes {too_big} exceed {dep.name}'s max_batch_size {dep.max_batch_size}")
        offline = tuple(batch_sizes) or tuple(sorted({1, dep.max_batch_size}))
        profiles[dep.name] = ModelProfile(
            model=dep.name, size=SIZE, formats=(dep.format,), precisions=(dep.precision,),
            max_batch_size=dep.max_batch_size, offline=OfflineProfile(offline, dep.instance_count),
            online=OnlineProfile(concurrency=tuple(concurrency) or (1, 2, 4), batch_size=1,
                                 instance_count=dep.instance_count,
                                 preferred_batch_sizes=deployment_config(dep).preferred_batch_sizes,
                                 max_queue_delay_microseconds=dep.max_queue_delay_microseconds),
            instance_kind=dep.instance_kind)
    return specs, profiles, undrivable


def add_repositories(registry, profile, repositories, input_data=(), shapes=(), tolerances=(), references=None,
                     only=()):
    """Every deployment of ``repositories`` (and the profile's ``model_repository``) into ``registry`` and the
    profile: ``input_data``, ``shapes``, ``tolerances`` as their command-line values. Returns (profile, the
    deployments that cannot be driven as (repository, name, reason))."""
    from dataclasses import replace

    from tritonsuite.load.inputdata import parse_shapes

    repositories = list(dict.fromkeys(([profile.model_repository] if profile.model_repository else [])
                                      + [str(r) for r in repositories]))
    if not repositories:
        return profile, ()
    models, undrivable = dict(profile.models), []
    tolerances = {**profile.tolerances, **parse_tolerances(tolerances)}
    shapes, data = parse_shapes(shapes), parse_input_data(input_data)
    names = {d.name for r in repositories if Path(r).is_dir() for d in Path(r).iterdir() if d.is_dir()}
    unknown = [n for n in data if n and n not in names]
    if unknown:
        raise RepositoryError(f"--input-data {unknown[0]}=...: no such deployment; valid choices: "
                              f"{', '.join(sorted(names))}")
    for repository in repositories:
        named = {m: mp for m, mp in profile.models.items() if mp.size == SIZE}
        specs, found, skipped = user_models(repository, data, shapes, tolerances, named=named,
                                            references=references, only=only)
        for spec in specs:
            if spec.name in registry.names():
                raise RepositoryError(f"--model-repository {repository}: deployment {spec.name} has the name of a "
                                      f"model already in the run; rename its directory")
            registry.add(spec)
        models.update(found)
        undrivable += [(repository, u.name, u.reason) for u in skipped]
    return replace(profile, models=models), tuple(undrivable)
