"""Network namespaces standing in for other hosts (root and iproute2's ``ip``): each with its loopback up and,
where a test network is asked for, a veth on a bridge with an address of the test's own /24. Whatever runs in them
is killed and they are removed on exit, also on failure."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import psutil

USABLE = os.geteuid() == 0 and shutil.which("ip") is not None
WHY_NOT = "network namespaces need root and iproute2's ip"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Namespaces:
    """``hosts`` as namespaces ``<tag>-<host>``; ``linked``: on one bridge, ``address[host]`` 10.213.N.(1..)."""

    def __init__(self, hosts: tuple[str, ...], linked: bool = True):
        self.tag = f"ts{os.getpid() % 100000}"
        subnet = os.getpid() % 200 + 20
        self.hosts, self.linked = hosts, linked
        self.address = {h: f"10.213.{subnet}.{i + 1}" for i, h in enumerate(hosts)} if linked else {}
        self.bridge = f"{self.tag}br"
        self.procs: list[subprocess.Popen] = []

    def ns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def __enter__(self) -> "Namespaces":
        self.children_before = {c.pid for c in psutil.Process().children()}
        _subreaper(True)  # what dies in the namespaces is reaped here, not left a zombie under a PID 1 that never reaps
        try:
            if self.linked:
                _ip("link", "add", self.bridge, "type", "bridge")
                _ip("link", "set", self.bridge, "up")
            for i, host in enumerate(self.hosts):
                ns = self.ns(host)
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                if self.linked:
                    inside, outside = f"{self.tag}v{i}", f"{self.tag}p{i}"
                    _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
                    _ip("link", "set", inside, "netns", ns)
                    _ip("link", "set", outside, "master", self.bridge)
                    _ip("link", "set", outside, "up")
                    _ip("-n", ns, "addr", "add", f"{self.address[host]}/24", "dev", inside)
                    _ip("-n", ns, "link", "set", inside, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def argv(self, host: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def start(self, host: str, argv: list[str], env: dict, log: Path) -> subprocess.Popen:
        with open(log, "wb") as out:
            proc = subprocess.Popen(self.argv(host, argv), env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.PIPE, start_new_session=True)
        self.procs.append(proc)
        return proc

    def pids(self, host: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns(host)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def __exit__(self, *exc) -> None:
        inside = [pid for host in self.hosts for pid in self.pids(host)]
        for proc in self.procs:  # each tree started here, then whatever else still runs in the namespaces
            _kill(lambda: os.killpg(proc.pid, signal.SIGKILL))
        for pid in inside:
            _kill(lambda: os.kill(pid, signal.SIGKILL))
        for proc in self.procs:
            _kill(lambda: proc.wait(10))
        for pid in inside:  # orphans re-parented here (a subreaper): reaped
            _kill(lambda: os.waitpid(pid, 0))
        self._reap_orphans()
        _subreaper(False)
        for host in self.hosts:
            subprocess.run(["ip", "netns", "delete", self.ns(host)], capture_output=True)
        if self.linked:
            subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)

    def _reap_orphans(self) -> None:
        """Orphans that died before the namespaces were listed (a Ray worker, a python backend stub whose server
        ended) came here as zombies, which ``ip netns pids`` no longer lists: reap every zombie child this block
        gained."""
        for child in psutil.Process().children():
            if child.pid not in self.children_before:
                with contextlib.suppress(psutil.Error, OSError):
                    if child.status() == psutil.STATUS_ZOMBIE:
                        os.waitpid(child.pid, os.WNOHANG)

    def gone(self) -> bool:
        """Whether every namespace (and the bridge) is removed."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "link", "show"], capture_output=True, text=True).stdout
        return not any(self.ns(h) in listed for h in self.hosts) and self.bridge not in links


def _kill(step) -> None:
    try:
        step()
    except (OSError, subprocess.TimeoutExpired):  # (ChildProcessError: not ours, or reaped already)
        pass


def _subreaper(on: bool) -> None:
    import ctypes

    ctypes.CDLL(None).prctl(36, int(on))  # PR_SET_CHILD_SUBREAPER
