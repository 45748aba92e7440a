"""A user's model repositories into a run, and the command-line values that name their deployments and tensors
(``--models``, ``--input-data``, ``--shape``, ``--tolerance``, ``--reference``) checked before anything starts.

A bad value is one :class:`~tritonsuite.deploy.userrepo.RepositoryError` line naming it and the valid choices: a
name that is no deployment (or tensor) of the run, a deployment that is in a repository but cannot be driven (with
its reason from :func:`~tritonsuite.deploy.userrepo.read_deployment`), dims or numbers out of range. These options
apply to the repositories' deployments only; in a run without one, any of them is such a line.

Which models run: with a repository, its deployments. The profile's models join only when named: by ``--models``,
or by a profile of the user's own (``--profiles-dir``) that lists them; the shipped profile's models (``--gpu cpu``)
stay out, so a team's repository runs its own deployments.
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from typing import Mapping

from tritonsuite.core import inputdata
from tritonsuite.deploy.userrepo import (REFERENCE_BACKENDS, SIZE, RepositoryError,
                                         parse_input_data, parse_tolerances, read_repository, user_spec)
from tritonsuite.profiles import ModelProfile, OfflineProfile, OnlineProfile


def _choices(names) -> str:
    return ", ".join(sorted(names)) or "none (the run has no --model-repository)"


class RepositoryRun:
    """The deployments of the run's repositories: drivable or not (with the reason). A value may name any drivable
    one, also one that ``--models`` leaves out (a script passes every deployment's data and narrows the run)."""

    def __init__(self, repositories):
        self.drivable, self.reasons = {}, {}
        self.undrivable: list[tuple[str, str, str, bool]] = []  # (repository, name, reason, Triton refuses it)
        for repository in repositories:
            found, skipped = read_repository(repository)
            self.drivable.update({d.name: d for d in found})
            self.undrivable += [(str(repository), u.name, u.reason, u.refused) for u in skipped]
            self.reasons.update({u.name: f"deployment {u.name} in {repository} cannot be driven: {u.reason}"
                                 for u in skipped})

    def deployment(self, option: str, value: str, name: str):
        """``name`` as a deployment of the repositories, or the one line saying why it is not."""
        if name in self.drivable:
            return self.drivable[name]
        if name in self.reasons:
            raise RepositoryError(f"{option} {value}: {self.reasons[name]}")
        raise RepositoryError(f"{option} {value}: no such deployment; valid choices: {_choices(self.drivable)}")

    def tensors(self, kind: str) -> dict[str, list]:
        """Input or output names of the deployments -> their configured dims."""
        found: dict[str, list] = {}
        for dep in self.drivable.values():
            for t in getattr(dep, kind):
                found.setdefault(t.name, list(t.shape))
        return found


def check_models(only, known, run: RepositoryRun) -> None:
    """``--models``: a deployment that cannot be driven says why; an unknown name lists the valid choices."""
    for name in only:
        if name in run.reasons:
            raise RepositoryError(f"--models {name}: {run.reasons[name]}")
    refs = {d.at_version(v).ref for d in run.drivable.values() for v in d.versions}  # name:version too
    unknown = [m for m in only if m not in known and m not in run.drivable and m not in refs]
    if unknown:
        raise RepositoryError(f"--models {','.join(unknown)}: unknown model; valid choices: "
                              f"{', '.join(sorted(set(known) | set(run.drivable) | refs))}")


def served_versions(names, known) -> list[str]:
    """``--models`` as users write them: a bare deployment name whose policy serves several versions stands for
    each of them (``name:1``, ``name:3``); ``name:version`` and every other name stay as written."""
    expanded = []
    for name in names:
        versions = [k for k in known if k.rpartition(":")[0] == name and k.rpartition(":")[2].isdigit()]
        expanded += [name] if name in known or not versions else versions
    return list(dict.fromkeys(expanded))


def check_shapes(values, run: RepositoryRun) -> dict[str, tuple[int, ...]]:
    """``--shape NAME:d1,d2``: positive dims, NAME an input of a deployment of the repositories."""
    from tritonsuite.core.inputdata import parse_shapes

    shapes = parse_shapes(values)
    inputs = run.tensors("inputs")
    for name, dims in shapes.items():
        if name not in inputs:
            raise RepositoryError(f"--shape {name}:{','.join(map(str, dims))}: {name} is not an input of a deployment "
                                  f"of the run's repositories; valid choices: "
                                  f"{_choices(f'{n} (dims {d})' for n, d in inputs.items())}")
    return shapes


def check_tolerances(values, run: RepositoryRun) -> dict[str, tuple[float, float]]:
    """``--tolerance OUTPUT=atol,rtol``: two finite non-negative numbers, OUTPUT an output of the repositories."""
    tolerances = parse_tolerances(values)
    outputs = run.tensors("outputs")
    for name, pair in tolerances.items():
        if not all(math.isfinite(x) for x in pair):
            raise RepositoryError(f"--tolerance {name}={pair[0]:g},{pair[1]:g}: expected finite non-negative numbers")
        if name not in outputs:
            raise RepositoryError(f"--tolerance {name}={pair[0]:g},{pair[1]:g}: {name} is not an output of a "
                                  f"deployment of the run's repositories; valid choices: {_choices(outputs)}")
    return tolerances


def check_input_data(values, run: RepositoryRun) -> dict[str, str]:
    """``--input-data [DEPLOYMENT=]VALUE``: DEPLOYMENT of the repositories; VALUE random, zero, a file or a
    directory."""
    from tritonsuite.core.inputdata import MODES

    data = parse_input_data(values)
    for name, value in data.items():
        if name:
            run.deployment("--input-data", f"{name}={value}", name)
        if value not in MODES and not Path(value).exists():
            raise RepositoryError(f"--input-data {(name + '=') if name else ''}{value}: no such file or directory; "
                                  f"valid choices: {', '.join(MODES)}, a JSON file or a directory")
    if not run.drivable and len(values):
        raise RepositoryError(f"--input-data {values[0]}: valid for --model-repository deployments; valid choices: "
                              f"{_choices(())}")
    return data


def check_references(values, run: RepositoryRun) -> dict[str, Path]:
    """``--reference DEPLOYMENT=FILE``: DEPLOYMENT of the repositories; FILE a model file of a known suffix, or a
    ``.py`` defining ``reference(inputs)`` (:mod:`tritonsuite.deploy.pyreference`)."""
    found = {}
    for value in values:
        name, sep, file = str(value).partition("=")
        if not sep or not name or not file:
            raise RepositoryError(f"--reference {value!r}: expected DEPLOYMENT=FILE")
        run.deployment("--reference", value, name)
        if not Path(file).is_file():
            raise RepositoryError(f"--reference {value}: {file} is not a file")
        if Path(file).suffix not in REFERENCE_BACKENDS and Path(file).suffix != ".py":
            raise RepositoryError(f"--reference {value}: unknown model file suffix; valid choices: "
                                  f"{', '.join(REFERENCE_BACKENDS)}, .py")
        found[name] = Path(file).resolve()
    return found


def run_repositories(profile, repositories) -> list[str]:
    """The repositories a run drives: the profile's ``model_repository`` and those given (``--model-repository``),
    each once."""
    return list(dict.fromkeys(([profile.model_repository] if profile.model_repository else [])
                              + [str(r) for r in repositories]))


def add_repositories(registry, profile, repositories, input_data=(), shapes=(), tolerances=(), references=(),
                     only=(), user_profile=False):
    """Every deployment of ``repositories`` (and the profile's ``model_repository``) into ``registry`` and the
    profile, with the command-line values of ``--input-data``, ``--shape``, ``--tolerance``, ``--reference`` and
    ``--models`` (``only``) checked first. ``user_profile``: the profile is the user's (its models are named).
    Returns (profile, the deployments that cannot be driven as (repository, name, reason))."""
    repositories = run_repositories(profile, repositories)
    run = RepositoryRun(repositories)
    if repositories:
        check_models(only, [n for n in registry.names() if n in profile.models], run)
    shapes, data = check_shapes(shapes, run), check_input_data(input_data, run)
    tolerances = {**profile.tolerances, **check_tolerances(tolerances, run)}
    references = check_references(references, run)
    if not repositories:
        return profile, ()
    named = {m: mp for m, mp in profile.models.items() if mp.size == SIZE}
    models = dict(profile.models) if only or user_profile else dict(named)  # shipped models join when named
    for repository in repositories:
        specs, found, _ = user_models(repository, data, shapes, tolerances, named=named, references=references,
                                      only=only)
        for spec in specs:
            if spec.name in registry.names():
                raise RepositoryError(f"--model-repository {repository}: deployment {spec.name} has the name of a "
                                      f"model already in the run; rename its directory")
            registry.add(spec)
        models.update(found)
    return replace(profile, models=models), tuple(run.undrivable)


def user_models(repository: str | Path, input_data: Mapping[str, str] | None = None, shapes: Mapping | None = None,
                tolerances: Mapping[str, tuple[float, float]] | None = None, batch_sizes=(), concurrency=(),
                named=None, references: Mapping[str, Path] | None = None, only=()):
    """Everything a run needs for a user repository: (specs, model profiles, undrivable deployments).

    A deployment the profile names (``models: <deployment>: {size: repository, ...}``, passed as ``named``) keeps
    that entry; any other runs offline at ``batch_sizes`` (default 1 and its max batch size) and online at
    ``concurrency`` (default 1, 2, 4) with batch 1, its own config.pbtxt deciding batching and instances.
    """
    deployments, undrivable = read_repository(repository)
    input_data = {"": "random", **(input_data or {})}
    tolerances = dict(tolerances or {})  # checked against the run's outputs by deploy.repooptions
    specs, profiles = [], {}
    versioned = [found.at_version(v) for found in deployments for v in found.versions]  # one entry per version
    for dep in versioned:
        if only and dep.name not in only and dep.ref not in only:  # --models names others: no input data asked for
            continue
        data = inputdata.load(input_data.get(dep.name, input_data[""]), dep.inputs, dep.outputs, shapes)
        specs.append(user_spec(dep, data, tolerances, (references or {}).get(dep.name)))
        if named and dep.ref in named:
            profiles[dep.ref] = named[dep.ref]
            continue
        # batchless (max_batch_size 0): requests carry no batch dimension, so offline is batch 1 alone; --batch-sizes
        # beyond a deployment's max_batch_size are left out for it (profiles.restrict refuses one no deployment takes)
        fits = tuple(b for b in batch_sizes if b <= dep.max_batch_size)
        offline = (1,) if not dep.max_batch_size else fits if batch_sizes else tuple(sorted({1, dep.max_batch_size}))
        declared = dep.description.dynamic_batching
        profiles[dep.ref] = ModelProfile(
            model=dep.ref, size=SIZE, formats=(dep.format,), precisions=(dep.precision,),
            max_batch_size=dep.max_batch_size, offline=OfflineProfile(offline, dep.instance_count),
            online=OnlineProfile(concurrency=tuple(concurrency) or (1, 2, 4), batch_size=1,
                                 instance_count=dep.instance_count,
                                 preferred_batch_sizes=tuple(b for b in declared.preferred_batch_sizes
                                                             if b <= dep.max_batch_size) if declared else (),
                                 max_queue_delay_microseconds=declared.max_queue_delay_microseconds if declared else 0),
            instance_kind=dep.instance_kind)
    return specs, profiles, undrivable

