"""Profiles: per device (``--gpu``), which models run at which size, formats, precisions and sweep points.

Profiles ship with the package (``tritonsuite/profiles/<name>.yaml``: ``cpu``, the default, and one GPU profile per
GPU the seeds publish, ``a100``, ``a30``, ``a40``, ``t4``, ``v100``, plus ``h100`` with the A100 settings, each with
the seeds' full-size models and Triton settings); ``--profiles-dir DIR`` adds a team's own, which win on a name
clash. A GPU profile's ``published: <gpu>`` names the seeds' published tables its rows are shown beside
(:mod:`tritonsuite.core.published`). The command line narrows a profile (``--models``, ``--formats``, ``--batch-sizes``,
``--concurrency``) but never widens it past the model's limits.

A profile is checked completely when it is loaded: malformed YAML (file and line), unknown keys (with the valid
ones), wrong types and out-of-range values (with the valid range) are one-line :class:`ProfileError` s.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from tritonsuite.core.device import INSTANCE_KINDS as DEVICES  # profile device -> default Triton instance kind
from tritonsuite.core.settings import DISTRIBUTIONS, LatencyBound, MeasurementSettings, parse_workers
from tritonsuite.core.spec import rule_precision
from tritonsuite.deploy.repository import BACKEND_ACCELERATORS, PRECISION_MODES, model_config
from tritonsuite.profiles.mix import MixError, MixProfile, check_mixes, load_mixes
from tritonsuite.profiles.values import (ProfileError, _bound, _choices, _int, _ints, _mapping, _rates,
                                         _unknown)

PACKAGE_DIR = Path(__file__).resolve().parent
TOP_KEYS = ("device", "gpu", "published", "measurement", "models", "model_repository", "tolerances", "mix",
            "workers")
MODEL_KEYS = ("size", "formats", "precisions", "accuracy_precisions", "max_batch_size", "intra_op_threads",
              "instance_kind", "backend_accelerator", "precision_mode", "max_workspace_size_bytes", "offline", "online",
              "tune")
#: The backend accelerator's own settings, named as Triton's onnxruntime backend names them
ACCELERATOR_KEYS = ("precision_mode", "max_workspace_size_bytes")
OFFLINE_KEYS = ("batch_sizes", "instance_count")
ONLINE_KEYS = ("batch_size", "concurrency", "instance_count", "preferred_batch_sizes", "max_queue_delay_microseconds",
               "request_rates", "distribution", "seed", "latency_bound", "search", "stream")
#: What a latency-bound search looks for: the highest request rate (open loop) or concurrency (closed loop).
SEARCHES = ("request_rate", "concurrency")


@dataclass(frozen=True)
class OfflineProfile:
    batch_sizes: tuple[int, ...]
    instance_count: int = 1


@dataclass(frozen=True)
class OnlineProfile:
    concurrency: tuple[int, ...]
    batch_size: int = 1
    instance_count: int = 1
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    request_rates: tuple[float, ...] = ()  # open-loop points, requests/s
    distribution: str = "poisson"  # arrivals of the open-loop points
    seed: int = 0
    latency_bound: LatencyBound | None = None  # with it, search for the most load within it
    search: tuple[str, ...] = SEARCHES  # which searches run when there is a bound
    stream: tuple[int, ...] = ()  # concurrencies of the streaming example (the spec's stream, deploy.streaming)


@dataclass(frozen=True)
class ModelProfile:
    model: str
    size: str
    formats: tuple[str, ...]
    precisions: tuple[str, ...]
    max_batch_size: int  # 0: batchless, as Triton means it (a user deployment's; requests carry no batch dimension)
    offline: OfflineProfile
    online: OnlineProfile
    intra_op_threads: int = 0
    instance_kind: str = "KIND_CPU"
    backend_accelerator: str = "none"  # "trt": onnx deployments run under onnxruntime's TensorRT accelerator
    precision_mode: str = ""  # the accelerator's precision; "" = each case's precision (fp16 -> FP16)
    max_workspace_size_bytes: int = 0  # the accelerator's workspace; 0 = the backend's default (1 GiB)
    tune: Any = None  # the ``tune:`` block as written (checked at load; tritonsuite.profiles.tunespace.space_for reads it)
    # precisions the accuracy scenario checks besides ``precisions`` (the cpu profile judges fp16 in CI without
    # doubling its performance points); () = ``precisions``
    accuracy_precisions: tuple[str, ...] = ()

    def scenario_precisions(self, scenario: str) -> tuple[str, ...]:
        """The precisions a scenario runs: ``precisions``, and for accuracy also ``accuracy_precisions``."""
        if scenario != "accuracy":
            return self.precisions
        return tuple(dict.fromkeys(self.precisions + self.accuracy_precisions))

    def model_config(self, scenario: str, name: str, spec, fmt: str, precision: str = "fp32") -> dict:
        """The configuration (JSON) of ``spec``'s deployment ``name`` as ``fmt`` for a scenario: static batching offline
        (and for accuracy), dynamic batching online; the backend accelerator's settings for a case of ``precision``."""
        online = scenario == "online"
        return model_config(
            name, spec, fmt, max_batch_size=self.max_batch_size, instance_kind=self.instance_kind,
            intra_op_threads=self.intra_op_threads, backend_accelerator=self.backend_accelerator,
            # mixed -> FP16: onnxruntime's TensorRT accelerator takes no per-layer pins (docs/precision.md)
            precision_mode=self.precision_mode or rule_precision(precision).upper(),
            max_workspace_size_bytes=self.max_workspace_size_bytes,
            instance_count=self.online.instance_count if online else self.offline.instance_count,
            dynamic_batching=online, preferred_batch_sizes=self.online.preferred_batch_sizes if online else (),
            max_queue_delay_microseconds=self.online.max_queue_delay_microseconds if online else 0)

    def batch_sizes(self) -> tuple[int, ...]:
        """Every batch size the model's deployments are asked for: the offline sweep, the online batch and
        preferred batch sizes, and the max batch size (what a plan's optimization profile must cover)."""
        return tuple(sorted({*self.offline.batch_sizes, self.online.batch_size, *self.online.preferred_batch_sizes,
                             self.max_batch_size}))


@dataclass(frozen=True)
class Profile:
    name: str
    device: str  # "cpu" or "gpu"
    gpu: str  # what the report's "GPU" row says
    models: Mapping[str, ModelProfile]
    measurement: MeasurementSettings = field(default_factory=MeasurementSettings)
    published: str = ""  # the seeds' published tables this profile's runs are shown beside (tritonsuite.core.published)
    model_repository: str = ""  # a stock model repository whose every deployment joins the run (deploy.userrepo)
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # its outputs' (atol, rtol)
    mixes: Mapping[str, MixProfile] = field(default_factory=dict)  # mix: deployments run together (profiles/mix.py)
    workers: int | str = 1  # worker processes the engine's points are split over (1: this process; "auto")


def profile_dirs(directory: str | Path | None = None) -> list[Path]:
    """Where profiles are looked up: a user's directory first (when given), then the package's own."""
    return ([Path(directory)] if directory else []) + [PACKAGE_DIR]


def available_profiles(directory: str | Path | None = None) -> list[str]:
    return sorted({p.stem for d in profile_dirs(directory) for p in Path(d).glob("*.yaml")})


def _model_profile(name: str, data: Any, where: str, instance_kind: str) -> ModelProfile:
    from tritonsuite.deploy.formats import FORMATS
    from tritonsuite.deploy.userrepo import DRIVABLE, SIZE as REPOSITORY_SIZE
    from tritonsuite.core.spec import PRECISIONS

    REPOSITORY_FORMATS = sorted({fmt for fmt, _ in DRIVABLE.values()} - set(FORMATS))

    data = _mapping(data, where)
    _unknown(data, MODEL_KEYS, where)
    missing = [k for k in ("size", "formats", "precisions", "max_batch_size") if k not in data]
    if missing:
        raise ProfileError(f"{where}: missing key {missing[0]!r}")
    offline = _mapping(data.get("offline"), f"{where}.offline")
    online = _mapping(data.get("online"), f"{where}.online")
    _unknown(offline, OFFLINE_KEYS, f"{where}.offline")
    _unknown(online, ONLINE_KEYS, f"{where}.online")
    max_batch = _int(data["max_batch_size"], f"{where}.max_batch_size")
    kind = data.get("instance_kind", instance_kind)
    _choices(kind, f"{where}.instance_kind", list(DEVICES.values()))
    batch_sizes = _ints(offline.get("batch_sizes", [1]) or [], f"{where}.offline.batch_sizes")
    preferred = _ints(online.get("preferred_batch_sizes") or [max_batch], f"{where}.online.preferred_batch_sizes")
    batch_size = _int(online.get("batch_size", 1), f"{where}.online.batch_size")
    for key, values in (("offline.batch_sizes", batch_sizes), ("online.preferred_batch_sizes", preferred),
                        ("online.batch_size", (batch_size,))):
        too_big = [v for v in values if v > max_batch]
        if too_big:
            raise ProfileError(f"{where}.{key} {too_big}: valid range 1..{max_batch} (max_batch_size)")
    # a deployment of a team's repository is served as given: its format is its backend's (a python model's too)
    formats = _choices(data["formats"], f"{where}.formats",
                       list(FORMATS) + (REPOSITORY_FORMATS if data["size"] == REPOSITORY_SIZE else []))
    accelerator = _choices(data.get("backend_accelerator", "none"), f"{where}.backend_accelerator",
                           BACKEND_ACCELERATORS)[0]
    if accelerator == "none":
        given = [k for k in ACCELERATOR_KEYS if k in data]
        if given:
            raise ProfileError(f"{where}.{given[0]}: a setting of the backend accelerator, and backend_accelerator "
                               f"is none; valid choices: backend_accelerator: trt, or leave {given[0]} out")
    elif kind != "KIND_GPU":
        raise ProfileError(f"{where}.backend_accelerator {accelerator!r}: onnxruntime's TensorRT accelerator runs on "
                           f"GPU instances and instance_kind is {kind}; valid choices here: none")
    elif "onnx" not in formats:
        raise ProfileError(f"{where}.backend_accelerator {accelerator!r}: it accelerates onnx deployments and formats "
                           f"are {', '.join(formats)}; add onnx or set none")
    precision_mode = data.get("precision_mode", "")
    if precision_mode:
        precision_mode = _choices(str(precision_mode).upper(), f"{where}.precision_mode", PRECISION_MODES)[0]
    found = ModelProfile(
        model=name, size=str(data["size"]),
        formats=formats,
        precisions=_choices(data["precisions"], f"{where}.precisions", list(PRECISIONS)),
        accuracy_precisions=_choices(data["accuracy_precisions"], f"{where}.accuracy_precisions", list(PRECISIONS))
        if data.get("accuracy_precisions") else (),
        max_batch_size=max_batch,
        offline=OfflineProfile(batch_sizes=batch_sizes, instance_count=_int(
            offline.get("instance_count", 1), f"{where}.offline.instance_count")),
        online=OnlineProfile(concurrency=_ints(online.get("concurrency", [1]) or [], f"{where}.online.concurrency"),
                             batch_size=batch_size,
                             instance_count=_int(online.get("instance_count", 1), f"{where}.online.instance_count"),
                             preferred_batch_sizes=preferred,
                             max_queue_delay_microseconds=_int(online.get("max_queue_delay_microseconds", 0),
                                                               f"{where}.online.max_queue_delay_microseconds", 0),
                             request_rates=_rates(online.get("request_rates") or [], f"{where}.online.request_rates"),
                             distribution=_choices(online.get("distribution", "poisson"),
                                                   f"{where}.online.distribution", DISTRIBUTIONS)[0],
                             seed=_int(online.get("seed", 0), f"{where}.online.seed", 0),
                             latency_bound=_bound(online.get("latency_bound"), f"{where}.online.latency_bound"),
                             search=_choices(online.get("search", list(SEARCHES)), f"{where}.online.search",
                                             SEARCHES),
                             stream=_ints(online.get("stream") or [], f"{where}.online.stream")),
        intra_op_threads=_int(data.get("intra_op_threads", 0), f"{where}.intra_op_threads", 0),
        instance_kind=str(kind),
        backend_accelerator=accelerator, precision_mode=precision_mode,
        max_workspace_size_bytes=_int(data.get("max_workspace_size_bytes", 0), f"{where}.max_workspace_size_bytes",
                                      0),
        tune=data.get("tune"),
    )
    if found.tune is not None:  # checked now, so a bad tune block is a one-line error before anything runs
        from tritonsuite.profiles.tunespace import TuneError, space_for

        try:
            space_for(found)
        except TuneError as exc:
            raise ProfileError(str(exc)) from None
    return found


def _read_yaml(path: Path) -> Mapping:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProfileError(f"{where}: malformed YAML: {problem}") from None
    return _mapping(data, str(path))


def load_profile(name: str, directory: str | Path | None = None) -> Profile:
    """The profile ``name`` from ``directory`` (when given) or the package's profiles, checked completely."""
    found = [d / f"{name}.yaml" for d in profile_dirs(directory) if (d / f"{name}.yaml").is_file()]
    if not found:
        raise ProfileError(f"unknown profile {name!r}; valid choices: {', '.join(available_profiles(directory))}")
    path = found[0]
    data = _read_yaml(path)
    _unknown(data, TOP_KEYS, path.name)
    measurement = _mapping(data.get("measurement"), f"{path.name}:measurement")
    known = [f.name for f in fields(MeasurementSettings)]
    _unknown(measurement, known, f"{path.name}:measurement")
    device = data.get("device", "cpu")
    if device not in DEVICES:
        raise ProfileError(f"{path}: unknown device {device!r}; valid choices: {', '.join(DEVICES)}")
    models = {m: _model_profile(str(m), d, f"{path.name}:{m}", DEVICES[device])
              for m, d in _mapping(data.get("models"), f"{path.name}:models").items()}
    try:
        settings = MeasurementSettings(**measurement)
    except ValueError as exc:
        raise ProfileError(f"{path.name}:measurement.{exc}") from None
    try:
        workers = parse_workers(data.get("workers", 1), f"{path.name}:workers")
    except ValueError as exc:
        raise ProfileError(str(exc)) from None
    return Profile(name=name, device=device, gpu=str(data.get("gpu", "none")), models=models, measurement=settings,
                   published=_published(data.get("published"), device, path.name),
                   model_repository=_repository(data.get("model_repository"), path),
                   tolerances=_tolerances(data.get("tolerances"), path.name),
                   mixes=_mixes(data.get("mix"), path.name, models), workers=workers)



def _mixes(value: Any, where: str, models: Mapping[str, ModelProfile]) -> dict[str, MixProfile]:
    try:
        return load_mixes(value, f"{where}:mix", models)
    except MixError as exc:
        raise ProfileError(str(exc)) from None

def _repository(value: Any, path: Path) -> str:
    """The profile's ``model_repository``: a directory, relative to the profile file when not absolute."""
    if not value:
        return ""
    found = (path.parent / str(value)).resolve()
    if not found.is_dir():
        raise ProfileError(f"{path.name}:model_repository {value!r}: no such directory ({found})")
    return str(found)


def _tolerances(value: Any, where: str) -> dict[str, tuple[float, float]]:
    """``tolerances: {OUTPUT: [atol, rtol]}`` for the outputs of ``model_repository``'s deployments."""
    found = {}
    for name, pair in _mapping(value, f"{where}:tolerances").items():
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and x >= 0 for x in pair)):
            raise ProfileError(f"{where}:tolerances.{name} {pair!r}: expected [atol, rtol], non-negative numbers")
        found[str(name)] = (float(pair[0]), float(pair[1]))
    return found


def _published(value: Any, device: str, where: str) -> str:
    """``published:`` names the seeds' GPU tables a GPU profile's runs are shown beside; GPU figures only."""
    if value is None:
        return ""
    from tritonsuite.core.published import available_gpus

    gpus = available_gpus()
    if value not in gpus:
        raise ProfileError(f"{where}:published {value!r}: valid choices: {', '.join(gpus)}")
    if device != "gpu":
        raise ProfileError(f"{where}:published {value!r}: the published tables are GPU figures; only a device: gpu "
                           f"profile may name them")
    return str(value)


def check_host(profile: Profile, server: str) -> None:
    """A GPU profile on the embedded server needs a CUDA device here; a remote server may have one elsewhere."""
    if profile.device != "gpu" or server != "embedded":
        return
    from tritonsuite.core.device import cuda_available

    if not cuda_available():
        raise ProfileError(f"--gpu {profile.name}: this profile runs models on a GPU ({profile.gpu}) and this host "
                           f"has no CUDA device; valid choices here: cpu, or --server remote --triton-url of a GPU "
                           f"host")


def narrow(profile: Profile, models: Sequence[str] | None = None, formats: Sequence[str] | None = None,
           batch_sizes: Sequence[int] | None = None, concurrency: Sequence[int] | None = None,
           request_rates: Sequence[float] | None = None, latency_bound: LatencyBound | None = None,
           search: Sequence[str] | None = None, precisions: Sequence[str] | None = None) -> Profile:
    """Restrict a profile to what the command line asked for (and set the online load it asked for: request
    rates, a latency bound and which searches run). Names not in the profile are an error."""
    if models:
        unknown = [m for m in models if m not in profile.models]
        if unknown:
            raise ProfileError(f"--models {','.join(unknown)}: not in profile {profile.name!r}; valid choices: "
                               f"{', '.join(profile.models)}")
    kept = {}
    chosen = {n: mp for n, mp in profile.models.items() if not models or n in models}
    if batch_sizes:  # a size no chosen model takes is a mistake; one that some take runs where it fits
        name = max((n for n, mp in chosen.items() if mp.max_batch_size), key=lambda n: chosen[n].max_batch_size,
                   default=None)
        largest = chosen[name].max_batch_size if name is not None else None
        too_big = [b for b in batch_sizes if largest is not None and b > largest]
        if too_big:
            raise ProfileError(f"--batch-sizes {too_big} exceed {name}'s max batch size {largest} in profile "
                               f"{profile.name!r}" + (" (the largest of the models chosen)" if len(chosen) > 1 else ""))
    for name, mp in chosen.items():
        offline, online = mp.offline, mp.online
        if batch_sizes and offline.batch_sizes and mp.max_batch_size:  # accuracy-only models stay so; batchless: 1
            offline = replace(offline, batch_sizes=tuple(b for b in batch_sizes if b <= mp.max_batch_size))
        if online.concurrency or online.request_rates:  # (a model without online points stays without them)
            if concurrency:
                online = replace(online, concurrency=tuple(concurrency))
            if request_rates:
                online = replace(online, request_rates=tuple(request_rates))
            if latency_bound is not None:
                online = replace(online, latency_bound=latency_bound)
            if search:
                online = replace(online, search=tuple(search))
        kept[name] = replace(mp, formats=tuple(f for f in mp.formats if not formats or f in formats),
                             precisions=tuple(p for p in mp.precisions if not precisions or p in precisions),
                             accuracy_precisions=tuple(p for p in mp.accuracy_precisions
                                                       if not precisions or p in precisions),
                             offline=offline, online=online)
    # a mix runs when every deployment it names is still in the run (narrowed out: left out, as its models are)
    mixes = {n: m for n, m in profile.mixes.items() if all(x.model in kept and x.format in (
        "", *kept[x.model].formats) and x.precision in kept[x.model].precisions for x in m.members)}
    try:
        mixes = check_mixes(mixes, kept)
    except MixError as exc:
        raise ProfileError(str(exc)) from None
    return replace(profile, models=kept, mixes=mixes)
