"""A profile's ``mix:`` section: named sets of deployments run together on one server, each with its own traffic
(``pytest -m mix``, :mod:`tritonsuite.load.mix`)::

    mix:
      bert_tft:
        rounds: 3              # interleaved rounds (each: every deployment alone, then all together); default 3
        measurement: {stability_percentage: 20}   # the profile's measurement settings, changed for this mix only
        total_rate: 40         # requests/s shared out by the deployments' ``share`` (needed only with shares)
        deployments:
          bert: {format: onnx, concurrency: 2}      # closed loop
          tft: {format: onnx, request_rate: 20}     # open loop (or: share: 0.5 of total_rate)

A deployment is named by its model in the profile (a shipped model, or a ``--model-repository`` deployment, which
joins the profile as a model); ``format`` defaults to the model's first, ``precision`` to fp32. Each gets exactly one
of ``concurrency``, ``request_rate`` or ``share``. The deployment served is the model's online one (dynamic batching
as the profile configures it), at the model's online batch size.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

MIX_KEYS = ("rounds", "total_rate", "measurement", "tune", "deployments")
TUNE_KEYS = ("weights", "budget", "minutes")
MEMBER_KEYS = ("format", "precision", "concurrency", "request_rate", "share")
TRAFFIC_KEYS = ("concurrency", "request_rate", "share")


class MixError(ValueError):
    """A ``mix:`` entry that cannot run, named with the valid choices (profiles turn it into a ProfileError)."""


@dataclass(frozen=True)
class MixMember:
    model: str
    format: str = ""  # "" until the profile's models are known: the model's first format
    precision: str = "fp32"
    concurrency: int | None = None
    request_rate: float | None = None
    share: float | None = None

    def rate(self, total_rate: float | None) -> float | None:
        """Requests/s of an open-loop member (its own rate, or its share of the mix's total); None: closed loop."""
        if self.share is not None:
            return self.share * (total_rate or 0.0)
        return self.request_rate

    def describe(self, total_rate: float | None = None) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency}"
        if self.share is not None:
            return f"{self.rate(total_rate):g} requests/s ({self.share:g} of {total_rate:g})"
        return f"{self.request_rate:g} requests/s"


@dataclass(frozen=True)
class MixProfile:
    name: str
    members: tuple[MixMember, ...]
    rounds: int = 3
    total_rate: float | None = None
    measurement: Mapping[str, Any] = field(default_factory=dict)  # the profile's settings changed for this mix
    tune: Mapping[str, Any] = field(default_factory=dict)  # the set's configuration search: weights, budget, minutes

    def weights(self) -> list[float]:
        """Each member's weight in the set search's objective (weighted inferences/s; default 1)."""
        given = self.tune.get("weights") or {}
        return [float(given.get(m.model, 1.0)) for m in self.members]

    def settings(self, base):
        """The profile's MeasurementSettings ``base`` with this mix's changes."""
        return replace(base, **self.measurement) if self.measurement else base

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(m.model for m in self.members)


def _number(value: Any, where: str, integer: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float)) and value > 0
    if not ok:
        raise MixError(f"{where} {value!r}: expected {'an integer >= 1' if integer else 'a number > 0'}")
    return value


def parse_mixes(data: Any, where: str) -> dict[str, MixProfile]:
    """The ``mix:`` section, checked for shape (the models it names are checked by :func:`check_mixes`)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise MixError(f"{where}: expected a mapping of mix names to mixes, got {data!r}")
    return {str(name): _mix(str(name), body, f"{where}.{name}") for name, body in data.items()}


def _mix(name: str, body: Any, where: str) -> MixProfile:
    if not isinstance(body, Mapping):
        raise MixError(f"{where}: expected a mapping with keys {', '.join(MIX_KEYS)}")
    unknown = [str(k) for k in body if k not in MIX_KEYS]
    if unknown:
        raise MixError(f"{where}: unknown key {', '.join(unknown)}; valid keys: {', '.join(MIX_KEYS)}")
    rounds = int(_number(body.get("rounds", 3), f"{where}.rounds", integer=True))
    total = body.get("total_rate")
    total = float(_number(total, f"{where}.total_rate")) if total is not None else None
    deployments = body.get("deployments")
    if not isinstance(deployments, Mapping) or len(deployments) < 2:
        raise MixError(f"{where}.deployments: expected a mapping of at least two models to their traffic, e.g. "
                       f"{{bert: {{concurrency: 2}}, tft: {{request_rate: 20}}}}")
    members = tuple(_member(str(model), spec, f"{where}.deployments.{model}") for model, spec in deployments.items())
    shares = [m.share for m in members if m.share is not None]
    if shares and total is None:
        raise MixError(f"{where}: deployments with a share need the mix's total_rate (requests/s)")
    if sum(shares) > 1.0 + 1e-9:
        raise MixError(f"{where}: shares add up to {sum(shares):g}; expected at most 1 (of total_rate)")
    return MixProfile(name, members, rounds, total, _measurement(body.get("measurement"), f"{where}.measurement"),
                      _tune(body.get("tune"), f"{where}.tune", [m.model for m in members]))


def _tune(value: Any, where: str, models: list[str]) -> dict:
    """``tune: {weights: {model: w}, budget: N, minutes: M}``: the set search's objective and budget."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or any(k not in TUNE_KEYS for k in value):
        raise MixError(f"{where}: expected a mapping with keys {', '.join(TUNE_KEYS)}, got {value!r}")
    weights = value.get("weights") or {}
    if not isinstance(weights, Mapping) or any(k not in models for k in weights):
        raise MixError(f"{where}.weights {weights!r}: expected weights of the mix's deployments ({', '.join(models)})")
    for k, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
            raise MixError(f"{where}.weights.{k} {w!r}: expected a number >= 0")
    if "budget" in value:
        _number(value["budget"], f"{where}.budget", integer=True)
    if "minutes" in value:
        _number(value["minutes"], f"{where}.minutes")
    return dict(value)


def _measurement(value: Any, where: str) -> dict:
    from tritonsuite.core.settings import MeasurementSettings

    if value is None:
        return {}
    known = [f.name for f in fields(MeasurementSettings)]
    if not isinstance(value, Mapping) or any(k not in known for k in value):
        bad = [str(k) for k in value if k not in known] if isinstance(value, Mapping) else [repr(value)]
        raise MixError(f"{where}: unknown {', '.join(bad)}; valid keys: {', '.join(known)}")
    try:
        replace(MeasurementSettings(), **value)
    except (TypeError, ValueError) as exc:
        raise MixError(f"{where}.{exc}") from None
    return dict(value)


def _member(model: str, spec: Any, where: str) -> MixMember:
    if not isinstance(spec, Mapping):
        raise MixError(f"{where}: expected a mapping with one of {', '.join(TRAFFIC_KEYS)}")
    unknown = [str(k) for k in spec if k not in MEMBER_KEYS]
    if unknown:
        raise MixError(f"{where}: unknown key {', '.join(unknown)}; valid keys: {', '.join(MEMBER_KEYS)}")
    given = [k for k in TRAFFIC_KEYS if k in spec]
    if len(given) != 1:
        raise MixError(f"{where}: give exactly one of {', '.join(TRAFFIC_KEYS)} (got {', '.join(given) or 'none'})")
    key = given[0]
    value = _number(spec[key], f"{where}.{key}", integer=key == "concurrency")
    if key == "share" and value > 1:
        raise MixError(f"{where}.share {value!r}: expected a share of total_rate from 0 to 1")
    return MixMember(model, str(spec.get("format", "")), str(spec.get("precision", "fp32")),
                     **{key: int(value) if key == "concurrency" else float(value)})


def load_mixes(data: Any, where: str, models: Mapping[str, Any]) -> dict[str, MixProfile]:
    """The ``mix:`` section; mixes naming only the profile's ``models`` are checked now, the others (naming
    ``--model-repository`` deployments, which join later) when the run's models are known
    (:func:`tritonsuite.profiles.narrow`)."""
    mixes = parse_mixes(data, where)
    known = check_mixes({n: m for n, m in mixes.items() if all(x in models for x in m.models)}, models)
    return {n: known.get(n, m) for n, m in mixes.items()}


def check_mixes(mixes: Mapping[str, MixProfile], models: Mapping[str, Any]) -> dict[str, MixProfile]:
    """Each mix's members against the profile's ``models`` (ModelProfiles): known models, formats they list,
    precisions they run; members' formats filled in. Raises MixError naming the valid choices."""
    checked = {}
    for name, mix in mixes.items():
        members = []
        for m in mix.members:
            if m.model not in models:
                raise MixError(f"mix {name}: deployment {m.model!r} is not a model of the profile; valid choices: "
                               f"{', '.join(models)}")
            formats = models[m.model].formats
            fmt = m.format or (formats[0] if formats else "")
            if fmt not in formats:
                raise MixError(f"mix {name}: {m.model} format {fmt!r}; valid choices: {', '.join(formats)}")
            if m.precision not in models[m.model].precisions:
                raise MixError(f"mix {name}: {m.model} precision {m.precision!r}; valid choices: "
                               f"{', '.join(models[m.model].precisions)}")
            members.append(replace(m, format=fmt))
        checked[name] = replace(mix, members=tuple(members))
    return checked
