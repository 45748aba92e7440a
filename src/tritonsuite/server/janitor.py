"""Clean up after a run that cannot clean up after itself (pytest killed with SIGKILL, or the machine's OOM killer
taking the test process).

The embedded launcher starts this as a small separate process (its own session, so a signal to the run's process
group does not reach it) reading one end of a pipe whose other end only the run holds. When the run ends in any
way, the pipe reaches end-of-file. After a clean stop the run first writes ``done`` into the pipe, and the janitor
just exits; otherwise it kills the server's process group (tritonserver and its python-backend stubs) and removes
the run's shared-memory regions.

Usage (internal): ``python -m tritonsuite.server.janitor PGID GLOB [GLOB ...]`` with the pipe on standard input.
"""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys

DONE = b"done"

def start(pgid: int, shm_globs: list[str]) -> int:
    """Start a janitor for process group ``pgid`` and the regions matching ``shm_globs``; returns the write end of
    its pipe: :func:`dismiss` it after a clean stop; dying closes it and sets the janitor off."""
    read_end, write_end = os.pipe()  # both ends close-on-exec: the server and its stubs inherit neither
    subprocess.Popen([sys.executable, "-m", "tritonsuite.server.janitor", str(pgid), *shm_globs],
                     stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     close_fds=True)
    os.close(read_end)
    return write_end


def dismiss(write_end: int) -> None:
    try:
        os.write(write_end, DONE)
    finally:
        os.close(write_end)


def clean(pgid: int, shm_globs: list[str]) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pattern in shm_globs:
        for path in glob.glob(pattern):
            try:
                os.unlink(path)
            except OSError:
                pass


def main(argv: list[str]) -> int:
    pgid, shm_globs = int(argv[0]), argv[1:]
    said = sys.stdin.buffer.read()  # returns at end-of-file: when the run has dismissed us, or is gone
    if DONE not in said:
        clean(pgid, shm_globs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
