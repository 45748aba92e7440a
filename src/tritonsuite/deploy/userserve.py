"""A user's deployment directory as the team ships it: its configuration read into the one description
(:mod:`tritonsuite.core.description`), and the whole directory served.

Triton loads a deployment from its directory: ``config.pbtxt``, every version directory the version policy selects,
and whatever else the configuration names beside them (an output's ``label_filename``, a tokenizer's files, a
python model's resources). :func:`serve_directory` copies all of it, byte for byte, into the run's repository
(version directories the policy does not select are left out: Triton would not load them), so the copy loads as
the original would; the user's directory is never written. :func:`config_json` reads a directory's
``config.pbtxt`` with Triton's own protobuf into the JSON form :func:`tritonsuite.core.description.describe` takes, and
:func:`repository_lookup` gives an ensemble's steps from the same repository.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

from tritonsuite.core.description import describe
from tritonsuite.core.spec import ModelSpec, file_digest
from tritonsuite.deploy.repository import pbtxt_text


class RepositoryError(ValueError):
    """A model repository or deployment that cannot be read; the message names it and what was expected."""




def config_json(directory: str | Path) -> dict[str, Any]:
    """``<directory>/config.pbtxt`` as JSON (protobuf field names; the name filled in from the directory, as
    Triton does)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2 as mc

    directory = Path(directory)
    config_file = directory / "config.pbtxt"
    if not config_file.is_file():
        raise FileNotFoundError(f"{config_file}: no such file")
    try:
        cfg = text_format.Parse(pbtxt_text(config_file), mc.ModelConfig())
    except text_format.ParseError as exc:
        raise RepositoryError(f"{config_file}: not a ModelConfig: {exc}") from None
    found = json_format.MessageToDict(cfg, preserving_proto_field_name=True)
    found.setdefault("name", directory.name)
    return found


def repository_lookup(repository: str | Path) -> Callable[[str], dict[str, Any]]:
    """``lookup(name)``: the configuration of deployment ``name`` of ``repository`` (an ensemble's steps)."""
    root = Path(repository)

    def lookup(name: str) -> dict[str, Any]:
        return config_json(root / name)

    return lookup


def version_directories(directory: str | Path) -> list[int]:
    """The numeric version directories of a deployment, ascending."""
    return sorted(int(p.name) for p in Path(directory).iterdir() if p.is_dir() and p.name.isdigit())


def serve_directory(source: str | Path, repository_dir: str | Path, versions: Iterable[str | int],
                    digests: Iterable[str] = ()) -> Path:
    """Copy the deployment directory ``source`` to ``<repository_dir>/<name>``: every file and folder, but of the
    numeric version directories only ``versions`` (those its policy selects). ``digests``: sha256 of model files
    that must be among the copied files (a file changed while the run copied it fails here). Returns the copy."""
    source = Path(source)
    served = {str(int(v)) for v in versions}
    final = Path(repository_dir) / source.name
    tmp = final.with_name(f".{source.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)

    def skipped(folder: str, names: list[str]) -> list[str]:
        if Path(folder) != source:
            return []
        return [n for n in names if n.isdigit() and (source / n).is_dir() and n not in served]

    shutil.copytree(source, tmp, ignore=skipped, copy_function=shutil.copy2, symlinks=False)
    wanted = [d for d in digests if d]
    if wanted:
        copied = {file_digest(p) for v in served for p in (tmp / v).rglob("*") if p.is_file()}
        missing = [d for d in wanted if d not in copied]
        if missing:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RepositoryError(f"{source}: a model file changed while the run copied it (sha256 {missing[0][:12]})")
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


def serve(spec: ModelSpec, repository_dir: str | Path, skip=()) -> dict[str, Path]:
    """Copy the user's whole deployment directory, byte for byte, to ``<repository_dir>/<name>``: config, label and
    resource files, every version directory its policy selects (:func:`~tritonsuite.deploy.userserve.
    serve_directory`); for an ensemble, its composing models' directories too (nested ones included). Directories
    in ``skip`` (already copied) are not copied again. Returns {user directory: its copy} of those copied."""
    entry = spec.served_from
    source = Path(entry.directory)
    copied = {}
    try:
        if str(source) not in skip:
            copied[str(source)] = serve_directory(source, repository_dir, entry.versions or (entry.version,),
                                                  [entry.model_file_digest or ""])
        for name in entry.composing:
            step = source.parent / name
            if str(step) not in skip:
                policy = describe(config_json(step), repository_lookup(source.parent)).version_policy
                copied[str(step)] = serve_directory(step, repository_dir, policy.served(version_directories(step)))
    except ValueError as exc:
        raise RepositoryError(str(exc)) from None
    return copied


def load(spec: ModelSpec, server, repository_dir: str | Path, served: dict) -> Path:
    """Serve (:func:`serve`) and load a user's deployment on ``server`` once per directory (every version at once;
    an ensemble loads its steps with it: a server that reads the run's repository polls them from there, a remote
    one is sent each before it, leaves first, by :meth:`~tritonsuite.server.RemoteServer.load`); ``served`` ({user
    directory: copy}) is the run's record of what is.
    A deployment shipped without config.pbtxt is checked against the configuration the server auto-completed, read
    back from it (as Model Analyzer does): the tensors the run drives must be the ones the server serves."""
    served.update(copied := serve(spec, repository_dir, skip=served))
    entry = spec.served_from
    name = Path(entry.directory).name
    if str(entry.directory) in copied:
        server.load(Path(repository_dir) / name)
    if entry.auto_completed:
        completed = describe(server.model_config(name))
        expected = (entry.max_batch_size, spec.inputs, spec.outputs)
        if (completed.max_batch_size, completed.inputs, tuple(dataclasses.replace(t, max_shape=None)
                                                              for t in completed.outputs)) != (
                expected[0], expected[1], tuple(dataclasses.replace(t, max_shape=None) for t in expected[2])):
            raise RepositoryError(f"{name}: the server auto-completed max_batch_size {completed.max_batch_size}, "
                                  f"inputs {completed.inputs}, outputs {completed.outputs}; the run expected "
                                  f"{expected}")
    return Path(repository_dir) / name
