"""Clean up after a run that cannot clean up after itself (pytest killed with SIGKILL, or the machine's OOM killer
taking the test process).

The embedded and container launchers start this as a small separate process (its own session, so a signal to the
run's process group does not reach it) reading one end of a pipe whose other end only the run holds. When the run
ends in any way, the pipe reaches end-of-file. After a clean stop the run first writes ``done`` into the pipe, and
the janitor just exits; otherwise it kills the server's process group (tritonserver and its python-backend stubs),
or removes the server's container, and removes the run's shared-memory regions, the launch's backend directory and
the directories the server made in /tmp (:mod:`tritonsuite.server.tritontmp`).

Usage (internal): ``python -m tritonsuite.server.janitor [--container ID] PGID GLOB [GLOB ...]`` with the pipe on
standard input (PGID 0: no process group; the container's engine is found as ``docker.from_env()`` finds it).
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

from tritonsuite.server.tritontmp import sweep_triton_tmp

DONE = b"done"

def start(pgid: int, shm_globs: list[str], container: str = "") -> int:
    """Start a janitor for process group ``pgid`` (0: none) or ``container``, and the regions matching
    ``shm_globs``; returns the write end of its pipe: :func:`dismiss` it after a clean stop; dying closes it and sets
    the janitor off."""
    read_end, write_end = os.pipe()  # both ends close-on-exec: the server and its stubs inherit neither
    owner = ["--container", container] if container else []
    subprocess.Popen([sys.executable, "-m", "tritonsuite.server.janitor", *owner, str(pgid), *shm_globs],
                     stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     close_fds=True)
    os.close(read_end)
    return write_end


def dismiss(write_end: int) -> None:
    try:
        os.write(write_end, DONE)
    finally:
        os.close(write_end)


def remove_container(container: str) -> None:
    try:
        import docker

        client = docker.from_env(timeout=60)
        try:
            client.containers.get(container).remove(force=True)
        finally:
            client.close()
    except Exception:
        pass  # gone already, or no engine: the next start's reaping removes it (its owner's pid is dead)


def clean(pgid: int, shm_globs: list[str], container: str = "") -> None:
    if container:
        remove_container(container)
    if pgid > 0:  # never 0: os.killpg(0) is this janitor's own group
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pattern in shm_globs:
        for path in glob.glob(pattern):
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)  # the launch's backend directory
                else:
                    os.unlink(path)
            except OSError:
                pass
    if pgid > 0:
        _await_end(pgid)
        sweep_triton_tmp()  # the server's /tmp directories, once it no longer runs (server/tritontmp.py)


def _await_end(pid: int, timeout_s: float = 5.0) -> None:
    """Until the killed server has ended (gone, or a zombie its new parent has yet to reap), at most ``timeout_s``."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    container = ""
    if argv[:1] == ["--container"]:
        container, argv = argv[1], argv[2:]
    pgid, shm_globs = int(argv[0]), argv[1:]
    said = sys.stdin.buffer.read()  # returns at end-of-file: when the run has dismissed us, or is gone
    if DONE not in said:
        clean(pgid, shm_globs, container)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
