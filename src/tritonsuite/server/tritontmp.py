"""What Triton leaves in ``/tmp`` when it is killed rather than shut down, and its removal.

Two kinds of directory, both named by Triton itself under a fixed ``/tmp`` (not ``$TMPDIR``):

- ``python_env_XXXXXX``: the python backend's, made when a server loads its first python-backend model and removed
  when the backend finalizes, at the server's shutdown;
- ``folderXXXXXX`` (a ``config.pbtxt`` inside): a model loaded with its files in the request (how a deployment is
  uploaded to a server that does not share the suite's disk), removed when the model unloads.

The launchers kill a server's process group rather than wait for Triton's shutdown (1-2.5 s a server, for the
hundreds of short-lived servers of a run), and a crash or a killed run ends a server the same way, so those
directories outlive it: 4,522 and 473 of them (463 MB) on one host after a day and a half of test runs.

Which server made a directory is written nowhere (same owner, no pid in the name, nothing holds it open). What is
known is when: a server makes its directories after it starts. So a directory last changed before every Triton core
running on this host started (less :data:`MARGIN_S` for the start times' rounding) belongs to no running server, and
is removed; one changed after the oldest running core started is left for a later sweep (the last server of a run to
stop sweeps what the others left). A Triton core is a ``tritonserver`` process or any process with
``libtritonserver`` loaded (Triton in-process), a container's too (its ``/tmp`` is its own, so it only makes the
sweep keep more). Only this user's directories.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

TRITON_TMP = Path("/tmp")  # kDefaultMountDirectory in Triton's core, "/tmp/python_env_" in its python backend
NAMES = re.compile(r"(python_env_|folder)[A-Za-z0-9]{6}")
MARGIN_S = 5.0  # start times (psutil's create_time) come from the boot time, which /proc gives in whole seconds
CORE_LIBRARY = b"libtritonserver"


def triton_cores() -> list[tuple[int, float]]:
    """(pid, start time in seconds since the epoch) of every process on this host that runs a Triton core."""
    import psutil

    cores = []
    for process in psutil.process_iter(["name", "create_time", "status"]):
        info = process.info
        if info["status"] in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) or info["create_time"] is None:
            continue  # dead, not yet reaped: runs nothing
        if info["name"] != "tritonserver":
            try:
                with open(f"/proc/{process.pid}/maps", "rb") as f:
                    if CORE_LIBRARY not in f.read():
                        continue
            except OSError:
                continue  # gone meanwhile, or not ours to read
        cores.append((process.pid, info["create_time"]))
    return cores


def triton_leftovers(base: Path = TRITON_TMP) -> list[Path]:
    """This user's directories of Triton's naming under ``base`` (whoever's server made them, live or gone)."""
    found, uid = [], os.geteuid()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for entry in entries:
        if not NAMES.fullmatch(entry.name):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        path = Path(entry.path)
        if entry.name.startswith("folder") and not (path / "config.pbtxt").is_file():
            continue  # another program's folderXXXXXX: Triton's holds the uploaded model's configuration
        found.append(path)
    return found


def sweep_triton_tmp(base: Path = TRITON_TMP, cores: list[tuple[int, float]] | None = None) -> list[str]:
    """Remove the leftovers under ``base`` that no running Triton core can have made (see the module's text);
    ``cores``: the running cores, else those of this host. Returns the names removed."""
    now = time.time()  # before the cores are listed: a core started after this made nothing older
    candidates = triton_leftovers(base)
    if not candidates:
        return []
    if cores is None:
        cores = triton_cores()
    before = min([now] + [start - MARGIN_S for _, start in cores])
    removed = []
    for path in candidates:
        try:
            if path.lstat().st_ctime >= before:
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    return removed
