"""Checkpoints the suite trains itself, for models whose real weights cannot be fetched on this host.

A spec with a ``train`` function gets a checkpoint from :func:`trained_checkpoint` when the user supplies none:
trained once, then reused from ``<cache_dir>/<model>-<size>-trained-<key>/`` where the key hashes the spec, its
training hyper-parameters, the dataset file (if the user gave one) and the torch version. Concurrent processes
(xdist workers) wait on a file lock instead of training twice. ``training.json`` next to the checkpoint keeps the
statistics the spec's ``train`` returned (loss, epochs, seconds), for the report's parameter table.
"""
from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tritonsuite.deploy.integrity import file_record, mismatch, notice
from tritonsuite.spec import ModelSpec, path_digest, stable_hash

TRAINING_VERSION = 1  # bump when the caching procedure changes
CHECKPOINT_FILE = "checkpoint.pt"


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
    """What the spec's ``train`` reported for a checkpoint this module produced ({} for user checkpoints)."""
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


def trained_checkpoint(spec: ModelSpec, cache_dir: str | Path, dataset: Path | None = None) -> Path:
    """The cached checkpoint of ``spec`` trained on ``dataset`` (or its own data), training it if needed."""
    if spec.train is None:
        raise ValueError(f"{spec.key} has no train function; pass a checkpoint instead")
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
