"""Profiles: per device (``--gpu``), which models run at which size, formats, precisions and sweep points.

A profile is ``fixtures/profiles/<name>.yaml``; ``cpu`` is the default, GPU profiles (``a100``) carry the seeds'
full-size models and Triton settings. The command line narrows a profile
(``--models``, ``--formats``, ``--batch-sizes``, ``--concurrency``) but never widens it past the model's limits.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from tritonsuite.measure import MeasurementSettings
from tritonsuite.repository import DeploymentConfig


DEVICES = {"cpu": "KIND_CPU", "gpu": "KIND_GPU"}  # profile device -> default Triton instance kind


class ProfileError(ValueError):
    """A profile name or content that cannot be used; the message names the valid choices."""


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


@dataclass(frozen=True)
class ModelProfile:
    model: str
    size: str
    formats: tuple[str, ...]
    precisions: tuple[str, ...]
    max_batch_size: int
    offline: OfflineProfile
    online: OnlineProfile
    intra_op_threads: int = 0
    instance_kind: str = "KIND_CPU"

    def deployment_config(self, scenario: str) -> DeploymentConfig:
        """Triton settings for a scenario: static batching offline (and for accuracy), dynamic batching online."""
        if scenario == "online":
            return DeploymentConfig(max_batch_size=self.max_batch_size, instance_count=self.online.instance_count,
                                    instance_kind=self.instance_kind, intra_op_threads=self.intra_op_threads,
                                    dynamic_batching=True, preferred_batch_sizes=self.online.preferred_batch_sizes,
                                    max_queue_delay_microseconds=self.online.max_queue_delay_microseconds)
        return DeploymentConfig(max_batch_size=self.max_batch_size, instance_count=self.offline.instance_count,
                                instance_kind=self.instance_kind, intra_op_threads=self.intra_op_threads)


@dataclass(frozen=True)
class Profile:
    name: str
    device: str  # "cpu" or "gpu"
    gpu: str  # what the report's "GPU" row says
    models: Mapping[str, ModelProfile]
    measurement: MeasurementSettings = field(default_factory=MeasurementSettings)


def available_profiles(directory: str | Path) -> list[str]:
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


def _ints(value: Any, where: str) -> tuple[int, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    try:
        result = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise ProfileError(f"{where}: expected integers, got {value!r}") from None
    if any(v < 1 for v in result):
        raise ProfileError(f"{where}: values must be >= 1, got {list(result)}")
    return result


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in (value if isinstance(value, (list, tuple)) else [value]))


def _model_profile(name: str, data: Mapping[str, Any], where: str, instance_kind: str) -> ModelProfile:
    try:
        offline, online = data.get("offline", {}), data.get("online", {})
        max_batch = int(data["max_batch_size"])
        return ModelProfile(
            model=name, size=str(data["size"]), formats=_strs(data["formats"]), precisions=_strs(data["precisions"]),
            max_batch_size=max_batch,
            offline=OfflineProfile(batch_sizes=_ints(offline.get("batch_sizes", [1]), f"{where}.offline.batch_sizes"),
                                   instance_count=int(offline.get("instance_count", 1))),
            online=OnlineProfile(concurrency=_ints(online.get("concurrency", [1]), f"{where}.online.concurrency"),
                                 batch_size=int(online.get("batch_size", 1)),
                                 instance_count=int(online.get("instance_count", 1)),
                                 preferred_batch_sizes=_ints(online.get("preferred_batch_sizes", []) or [max_batch],
                                                             f"{where}.online.preferred_batch_sizes"),
                                 max_queue_delay_microseconds=int(online.get("max_queue_delay_microseconds", 0))),
            intra_op_threads=int(data.get("intra_op_threads", 0)),
            instance_kind=str(data.get("instance_kind", instance_kind)),
        )
    except KeyError as exc:
        raise ProfileError(f"{where}: missing key {exc.args[0]!r}") from None


def load_profile(name: str, directory: str | Path) -> Profile:
    import yaml

    path = Path(directory) / f"{name}.yaml"
    if not path.is_file():
        raise ProfileError(f"unknown profile {name!r}; valid choices: {', '.join(available_profiles(directory))}")
    data = yaml.safe_load(path.read_text()) or {}
    measurement = data.get("measurement", {})
    known = {f.name for f in fields(MeasurementSettings)}
    unknown = sorted(set(measurement) - known)
    if unknown:
        raise ProfileError(f"{path}: unknown measurement settings {unknown}; valid choices: {', '.join(sorted(known))}")
    device = str(data.get("device", "cpu"))
    if device not in DEVICES:
        raise ProfileError(f"{path}: unknown device {device!r}; valid choices: {', '.join(DEVICES)}")
    models = {m: _model_profile(m, d, f"{path.name}:{m}", DEVICES[device])
              for m, d in (data.get("models") or {}).items()}
    return Profile(name=name, device=device, gpu=str(data.get("gpu", "none")), models=models,
                   measurement=MeasurementSettings(**measurement))


def check_host(profile: Profile, server: str) -> None:
    """A GPU profile on the embedded server needs a CUDA device here; a remote server may have one elsewhere."""
    if profile.device != "gpu" or server != "embedded":
        return
    import torch

    if not torch.cuda.is_available():
        raise ProfileError(f"--gpu {profile.name}: this profile runs models on a GPU ({profile.gpu}) and this host "
                           f"has no CUDA device; valid choices here: cpu, or --server remote --triton-url of a GPU "
                           f"host")


def narrow(profile: Profile, models: Sequence[str] | None = None, formats: Sequence[str] | None = None,
           batch_sizes: Sequence[int] | None = None, concurrency: Sequence[int] | None = None) -> Profile:
    """Restrict a profile to what the command line asked for. Names not in the profile are an error."""
    if models:
        unknown = [m for m in models if m not in profile.models]
        if unknown:
            raise ProfileError(f"--models {','.join(unknown)}: not in profile {profile.name!r}; valid choices: "
                               f"{', '.join(profile.models)}")
    kept = {}
    for name, mp in profile.models.items():
        if models and name not in models:
            continue
        offline, online = mp.offline, mp.online
        if batch_sizes:
            too_big = [b for b in batch_sizes if b > mp.max_batch_size]
            if too_big:
                raise ProfileError(f"--batch-sizes {too_big} exceed {name}'s max batch size {mp.max_batch_size} in "
                                   f"profile {profile.name!r}")
            offline = replace(offline, batch_sizes=tuple(batch_sizes))
        if concurrency:
            online = replace(online, concurrency=tuple(concurrency))
        kept[name] = replace(mp, formats=tuple(f for f in mp.formats if not formats or f in formats),
                             offline=offline, online=online)
    return replace(profile, models=kept)
