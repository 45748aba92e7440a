"""Checkpoints the suite trains itself, for models whose real weights cannot be fetched on this host.

A spec with a ``train`` function gets a checkpoint from :func:`trained_checkpoint` when the user supplies none:
trained once, then reused from ``<cache_dir>/<model>-<size>-trained-<key>/`` where the key hashes the spec, its
training hyper-parameters, the dataset file (if the user gave one) and the torch version. Concurrent processes
(xdist workers) wait on a file lock instead of training twice. ``training.json`` next to the checkpoint keeps the
statistics the spec's ``train`` returned (loss, epochs, seconds), for the report's parameter table.

Trained weights are not the same bytes on every CPU (TFT trained on an AMD EPYC gave q_risk_P90 0.01146 against
0.01126 on an Intel host, same data and seed), so a baseline is only as portable as its weights: the checkpoints of
the shipped profiles' default sizes ship inside the package (``models/weights/``, each recorded in
``manifest.json`` with its sha256, size, the training parameters and statistics that made it, the torch version
and the date). :func:`trained_checkpoint` returns the shipped one when it fits the spec (same name, size, config
and training parameters) and no dataset or ``retrain`` asks otherwise, checking its sha256 first; else it trains
here as above. ``tritonsuite`` ships new ones with ``python -m tritonsuite.models.training`` (see its ``main``).
"""
from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

from tritonsuite.core.integrity import file_record, mismatch, notice
from tritonsuite.core.spec import ModelSpec, file_digest, path_digest, stable_hash

TRAINING_VERSION = 1  # bump when the caching procedure changes
CHECKPOINT_FILE = "checkpoint.pt"
SHIPPED_DIR = Path(__file__).parent / "weights"
MANIFEST = "manifest.json"


class ShippedWeightsError(ValueError):
    """A shipped checkpoint whose bytes are not the ones its manifest records; the message says which and why."""


def _recipe(spec: ModelSpec) -> dict[str, Any]:
    """What makes a spec's trained weights (compared as JSON, so tuples and lists match): not the source file's
    digest, so a model file's comment edit keeps its shipped checkpoint."""
    return json.loads(json.dumps({"config": dict(spec.config), "training": dict(spec.training)}, sort_keys=True,
                                 default=str))


def manifest(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """The shipped checkpoints' records, keyed by ``model:size``."""
    path = Path(directory or SHIPPED_DIR) / MANIFEST
    return json.loads(path.read_text()).get("checkpoints", {}) if path.is_file() else {}


def shipped_checkpoint(spec: ModelSpec, directory: Path | None = None) -> Path | None:
    """The checkpoint shipped for ``spec`` (None when none fits it), its size and sha256 checked against the
    manifest: a mismatch raises :class:`ShippedWeightsError` in one line."""
    directory = Path(directory or SHIPPED_DIR)
    entry = manifest(directory).get(spec.key)
    if entry is None or entry.get("recipe") != _recipe(spec):
        return None
    path = Path(directory) / entry["file"]
    reason = mismatch(path, entry.get("size_bytes"), entry.get("sha256"))
    if reason is not None:
        raise ShippedWeightsError(f"shipped checkpoint of {spec.key}: {reason} (manifest {Path(directory) / MANIFEST}"
                                  f"); reinstall tritonsuite, or train here with --retrain")
    return path


def shipped_record(checkpoint: Path | None) -> dict[str, Any] | None:
    """The manifest record of a shipped checkpoint file (None for any other file)."""
    if checkpoint is None or Path(checkpoint).parent != Path(SHIPPED_DIR):
        return None
    return next((e for e in manifest().values() if e["file"] == Path(checkpoint).name), None)


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def checkpoint_dir(spec: ModelSpec, cache_dir: str | Path, dataset: Path | None = None) -> Path:
    key = stable_hash({"spec": spec.fingerprint(), "training": dict(spec.training), "dataset": path_digest(dataset),
                       "torch": _torch_version(), "version": TRAINING_VERSION})
    return Path(cache_dir) / f"{spec.name}-{spec.size}-trained-{key[:16]}"


def training_stats(checkpoint: Path) -> dict[str, Any]:
    """What the spec's ``train`` reported for a checkpoint this module produced or shipped ({} for user
    checkpoints)."""
    shipped = shipped_record(checkpoint)
    if shipped is not None:
        return {"training": shipped["training"], **shipped["statistics"]}
    meta = Path(checkpoint).parent / "training.json"
    stats = json.loads(meta.read_text()) if meta.is_file() else {}
    stats.pop("checkpoint_file", None)  # the cache's own check (size, sha256), not a training statistic
    return stats


def load_weights(module, checkpoint: str | Path, key: str) -> dict[str, Any]:
    """Load a checkpoint file (or ``<dir>/checkpoint.pt``) into ``module``: a state_dict, or a dict holding one
    under ``"state_dict"`` as this module's trainers write. Returns what the file held. A file that does not fit
    raises ValueError naming the checkpoint and the model (``key``, e.g. ``fastpitch:tiny``)."""
    import torch

    path = Path(checkpoint)
    if path.is_dir():
        path = path / CHECKPOINT_FILE
    name = key.split(":")[0]
    try:
        saved = torch.load(str(path), map_location="cpu", weights_only=True)
        state = saved["state_dict"] if isinstance(saved, dict) and "state_dict" in saved else saved
        module.load_state_dict(state)
    except (RuntimeError, KeyError, OSError, TypeError, AttributeError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]  # torch's reason is on line 2
        raise ValueError(f"--checkpoint {name}={checkpoint} does not fit {key}: "
                         f"{' '.join(lines[:2]) or type(exc).__name__}") from None
    return saved


def _sound(final: Path, heal: bool = False) -> bool:
    """Whether the cached checkpoint in ``final`` still has the size and sha256 its training.json recorded. With
    ``heal`` (under the lock), a mismatch is one line of notice and the entry is removed for retraining."""
    checkpoint = final / CHECKPOINT_FILE
    if not checkpoint.is_file():
        return False
    try:
        record = json.loads((final / "training.json").read_text()).get("checkpoint_file") or {}
    except (OSError, ValueError):
        record = {}
    reason = mismatch(checkpoint, record.get("size_bytes"), record.get("sha256"))
    if reason is not None and heal:
        notice(f"trained checkpoint {final.name}", reason)
        shutil.rmtree(final, ignore_errors=True)
    return reason is None


def trained_checkpoint(spec: ModelSpec, cache_dir: str | Path, dataset: Path | None = None,
                       retrain: bool = False) -> Path:
    """The checkpoint shipped for ``spec`` when one fits and neither ``dataset`` nor ``retrain`` asks otherwise;
    else the cached checkpoint of ``spec`` trained here on ``dataset`` (or its own data), training it if needed."""
    if spec.train is None:
        raise ValueError(f"{spec.key} has no train function; pass a checkpoint instead")
    shipped = None if dataset is not None or retrain else shipped_checkpoint(spec)
    if shipped is not None:
        return shipped
    final = checkpoint_dir(spec, cache_dir, dataset)
    checkpoint = final / CHECKPOINT_FILE
    if _sound(final):
        return checkpoint
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.with_name(final.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be training the same checkpoint: wait for it
        if checkpoint.is_file() and _sound(final, heal=True):
            return checkpoint
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            start = time.perf_counter()
            stats = dict(spec.train(dataset, tmp / CHECKPOINT_FILE) or {})
            stats.setdefault("seconds", round(time.perf_counter() - start, 2))
            (tmp / "training.json").write_text(json.dumps({"training": dict(spec.training), **stats,
                                                           "checkpoint_file": file_record(tmp / CHECKPOINT_FILE)},
                                                          indent=2, default=str))
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return checkpoint


def weights_origin(checkpoint: Path | None, user: bool = False) -> str:
    """Which weights ran, in a few words: the user's checkpoint, the one shipped with tritonsuite (short sha256),
    one trained here, or seeded random (no checkpoint)."""
    if checkpoint is None:
        return "seeded random"
    if user:
        return f"user checkpoint ({Path(checkpoint).name})"
    shipped = shipped_record(checkpoint)
    if shipped is not None:
        return f"shipped with tritonsuite ({shipped['file']}, sha256 {shipped['sha256'][:12]})"
    return "trained here"


def weights_sha256(checkpoint: Path | None, module=None) -> str:
    """sha256 of the weights a run used: the checkpoint file's (a directory: its tree's digest), else of the built
    module's state_dict (seeded random or package-shipped weights), names and bytes in order; "" if neither."""
    if checkpoint is not None:
        path = Path(checkpoint)
        return file_digest(path) if path.is_file() else path_digest(path) or ""
    if not hasattr(module, "state_dict"):
        return ""  # no torch module (a user's repository: its model file is its weights)
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                platform.machine())


def ship(specs, cache_dir: Path, directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """Train (or reuse from ``cache_dir``) each spec's checkpoint here and ship it: copied to ``directory`` as
    ``<model>-<size>.pt`` and recorded in its manifest. Used by the maintainers; the result is committed."""
    directory = Path(directory or SHIPPED_DIR)
    records = manifest(directory)
    for spec in specs:
        trained = trained_checkpoint(spec, cache_dir, retrain=True)
        name = f"{spec.name}-{spec.size}.pt"
        shutil.copyfile(trained, Path(directory) / name)
        stats = training_stats(trained)
        records[spec.key] = {"file": name, **file_record(Path(directory) / name), "recipe": _recipe(spec),
                             "training": stats.pop("training", {}), "statistics": stats, "torch": _torch_version(),
                             "trained": time.strftime("%Y-%m-%d", time.gmtime(trained.stat().st_mtime)),
                             "host": _cpu_model()}
    (Path(directory) / MANIFEST).write_text(json.dumps({"checkpoints": records}, indent=2, sort_keys=True) + "\n")
    return records


if __name__ == "__main__":  # python -m tritonsuite.models.training MODEL:SIZE... (the maintainers' way to ship)
    import sys

    from tritonsuite.models import default_registry

    registry = default_registry()
    shipped = ship([registry.get(*key.split(":")) for key in sys.argv[1:]], Path("model_repos/.cache"))
    print("\n".join(f"{k}: {v['file']} sha256 {v['sha256'][:12]} ({v['size_bytes']} bytes)" for k, v in shipped.items()))
