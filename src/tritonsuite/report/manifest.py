"""The provenance manifest of a run: what it takes to reproduce it and to tell two runs apart.

Written at the end of a session as ``<reports>/manifest.json`` (the latest run) and
``<reports>/raw/manifest-<run_id>.json`` (kept beside the run's rows, where :mod:`tritonsuite.judge.compare` finds it).
It holds the suite's version and git revision (with a dirty flag), the exact command line, the effective profile
and its hash, each deployment's config.pbtxt hash and artifact key, the Triton server version and the backends
that ran, the versions of the libraries that shape a result, the host (CPU, cores, memory, GPUs, driver, CUDA) and
the measurement settings. Each report's header names the run's essentials from it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from tritonsuite.core.rows import Row
from tritonsuite.core.store import read_faults

#: Distributions whose versions shape a result (absent ones are left out).
DISTRIBUTIONS = ("tritonsuite", "nvidia-pytriton", "tritonclient", "torch", "onnx", "onnxruntime", "onnxruntime-gpu",
                 "tensorrt", "tensorrt-cu12", "tensorrt-cu13", "numpy", "nvidia-ml-py", "pytest", "pytest-benchmark",
                 "pytest-xdist")



def _versions() -> dict[str, str]:
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def git_revision(directory: Path) -> tuple[str | None, bool | None]:
    """(HEAD's revision, whether tracked files have changes) of the checkout holding ``directory``; None for what
    git cannot tell (no checkout, no git, or no answer within 20 s on a busy host)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if head is None:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return head.strip(), (bool(status.strip()) if status is not None else None)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _host() -> dict[str, Any]:
    from tritonsuite.core.device import cpu_name
    from tritonsuite.core.device import describe_gpus

    host = {"name": platform.node(), "cpu": cpu_name(), "cores": os.cpu_count(), "memory_gib": _memory_gib(), "platform": platform.platform(),
            "python": platform.python_version(), "gpus": describe_gpus() or "none"}
    torch = sys.modules.get("torch")
    host["cuda"] = getattr(getattr(torch, "version", None), "cuda", None) if torch is not None else None
    return host


def build_manifest(*, run_id: str, profile, rows: Iterable[Row], repository_dir: Path, source_dir: Path,
                   command: list[str] | None = None, reports_dir: Path | None = None,
                   access=None) -> dict[str, Any]:
    """The manifest of run ``run_id`` from its rows, its effective profile and the model repository it deployed."""
    rows = list(rows)
    revision, dirty = git_revision(source_dir)
    profile_data = json.dumps(dataclasses.asdict(profile), sort_keys=True, default=str)
    deployments: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.deployment in deployments or not row.parameters:
            continue
        config = repository_dir / row.deployment / "config.pbtxt"
        deployments[row.deployment] = {
            "config_sha256": _sha256(config.read_bytes()) if config.is_file() else None,
            "artifact_key": row.parameters.get("Artifact key"),
            "platform": row.parameters.get("Platform"),
            "backend": row.parameters.get("Backend"),
        }
    servers = sorted({str(r.parameters["Server"]) for r in rows if r.parameters.get("Server")})
    return {
        "run_id": run_id,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "suite": {"version": _versions().get("tritonsuite"), "git_revision": revision, "dirty": dirty},
        "command": shlex.join(command if command is not None else getattr(sys, "orig_argv", sys.argv)),
        "profile": {"name": profile.name, "sha256": _sha256(profile_data.encode())},
        "measurement": dataclasses.asdict(profile.measurement),
        "server": ", ".join(servers) or None,
        # how it was reached (TLS, header names; never their values), and verification turned off where it was
        "access": access.describe() if access is not None else None,
        "unverified": access.unverified if access is not None else "",
        "backends": sorted({d["backend"] for d in deployments.values() if d["backend"]}),
        "deployments": deployments,
        "faults": read_faults(reports_dir, run_id) if reports_dir else [],  # given up, restarted (isolation)
        "versions": _versions(),
        "host": _host(),
    }


def header_line(manifest: dict[str, Any] | None) -> str:
    """One line for a report's header: run, suite revision, server, host and command."""
    if not manifest:
        return ""
    suite = manifest.get("suite") or {}
    revision = suite.get("git_revision")
    where = f"git {revision[:10]}{' (dirty)' if suite.get('dirty') else ''}" if revision else "no git revision"
    host = manifest.get("host") or {}
    return (f"Run `{manifest.get('run_id')}`: tritonsuite {suite.get('version')} ({where}); "
            f"{manifest.get('server') or 'no server answered'}; profile {manifest['profile']['name']} "
            f"(sha256 {manifest['profile']['sha256'][:12]}); host {host.get('cpu')}, {host.get('cores')} cores, GPUs "
            f"{host.get('gpus')}; command `{manifest.get('command')}`. Provenance: manifest.json."
            + (f" Reached with {manifest['access']}." if manifest.get("access") and
               not manifest["access"].startswith("plain") else "")
            + (f"\n\n**{manifest['unverified']}.**" if manifest.get("unverified") else ""))
