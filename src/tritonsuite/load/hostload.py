"""How busy the host was while a point ran: CPU used by processes other than the server (and its python-backend
stubs) and the load generator (this process), so a reader can tell a slow deployment from a busy machine.

Read from the kernel's counters with psutil at each window boundary: the host's busy CPU time (all CPUs, without
idle, iowait and steal) minus the server's processes' and this process's CPU time; reported as percent of one core.
A server process counts with the time of its children that ended and that it reaped (the kernel adds theirs to its
own ``children`` times): a python-backend stub that ends between two readings (a model unloaded, a candidate of a
tune replaced in place) keeps its time in the server's, where without it the server's time fell by the stub's whole
life and "other processes" rose by as much (a tune's points read 95-118% of a core of other load on a quiet host,
2026-11-30). What another process that ended used is in the host's busy time, so it counts as other load.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import psutil


@dataclass(frozen=True)
class CpuReading:
    busy: float  # host-wide busy CPU seconds
    server: float  # CPU seconds of the server's processes
    own: float  # CPU seconds of this process (the load generator)


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    total = sum(t)
    return total - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "steal", 0.0) - getattr(t, "guest", 0.0) \
        - getattr(t, "guest_nice", 0.0)  # guest time is counted in user time already


def _process_seconds(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system + times.children_user + times.children_system  # with what it reaped
    return total


class HostCpu:
    """Readings of the host's CPU use; ``server_pids`` names the server's processes at the time of a reading."""

    def __init__(self, server_pids: Callable[[], Sequence[int]] = lambda: ()):
        self._server_pids = server_pids
        self._own = psutil.Process()

    def read(self) -> CpuReading:
        own = self._own.cpu_times()
        return CpuReading(_busy_seconds(), _process_seconds(self._server_pids()), own.user + own.system)


def other_cpu_percent(before: CpuReading, after: CpuReading, seconds: float) -> float:
    """CPU used by everything but the server and the load generator between two readings, % of one core."""
    if seconds <= 0:
        return 0.0
    other = (after.busy - before.busy) - (after.server - before.server) - (after.own - before.own)
    return max(0.0, other) / seconds * 100.0
