"""Child processes that die with this one: tritonserver, perf_analyzer, the load's worker processes.

The kernel kills a child when its parent dies if the child asked for it (``PR_SET_PDEATHSIG``), and only the child
can ask. Asking in a ``preexec_fn`` makes Python fork() rather than vfork(), and a fork runs every fork handler the
process's libraries registered, in the child too: gRPC's (tritonclient's grpcio, fork support on) restarts its event
engine's poller in the child, and the child's closing of its inherited descriptors then closes the poller's epoll
descriptor under it: ``epoll_wait`` fails with EBADF and gRPC aborts the child before it execs. Seen as "tritonserver
exited with code -6 during start-up" on three pytest workers (2026-11-30; the parent's log: "Other threads are
currently calling into gRPC, skipping fork() handlers"); reproduced with 4 threads opening gRPC channels: 6 of 300
``/bin/true`` children started with a ``preexec_fn`` aborted so, 0 of 300 started by :func:`dying_with_parent`.

So a program is started through a small Python (vfork, no handlers run) that asks for the signal, exits if its parent
is already gone (the race the signal cannot cover), and execs the program: the same process, the same pid.
"""
from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1
_LAUNCHER = ("import ctypes, os, signal, sys\n"
             "ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))\n"  # PR_SET_PDEATHSIG
             "if os.getppid() != int(sys.argv[1]):\n"
             "    sys.exit(128 + int(signal.SIGKILL))\n"  # the parent died before the request: as if it had been sent
             "os.execvp(sys.argv[2], sys.argv[2:])\n")


def dying_with_parent(argv: list[str]) -> list[str]:
    """``argv`` as a command line whose process the kernel kills when this process dies; pass it to ``Popen``
    without a ``preexec_fn``."""
    return [sys.executable, "-S", "-c", _LAUNCHER, str(os.getpid()), *argv]


def die_with_parent() -> None:
    """In a child already running Python (a worker process started by multiprocessing's ``spawn``): ask the kernel to
    kill it when its parent dies. Where the call is not there (not Linux), nothing."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass
