"""Servers started, killed and stopped on a host of their own: run as a script by tests/test_server.py inside new PID
and mount namespaces (``unshare --pid --fork --mount-proc``), where it mounts tmpfs on /tmp and /dev/shm
(:func:`private_tmp`). So the only Triton cores are this script's, and the directories Triton makes in /tmp are
theirs alone: what the sweep removes (server/tritontmp.py) is decided by this scenario, not by what other tests run
beside it. Prints one JSON object: the Triton directories in /tmp after each step."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENT = Path("/tmp/identity/repo/identity")  # in the scenario's own /tmp


def names() -> list[str]:
    from tritonsuite.server.tritontmp import triton_leftovers

    return sorted("python_env_" if p.name.startswith("python_env_") else "folder" for p in triton_leftovers())


def identity_deployment() -> None:
    """The tiny identity model as an ONNX deployment (tests/conftest.py's ``identity_repo``): the stand-in serves it
    through the python backend."""
    from tritonsuite.deploy.export import export
    from tritonsuite.deploy.repository import build_deployment, model_config
    from tritonsuite.models import default_registry

    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", DEPLOYMENT.parent.parent / "cache")
    build_deployment(DEPLOYMENT.parent, model_config("identity", spec, artifact.format, max_batch_size=8), artifact)


def serving(tag: str):
    from tritonsuite.server import EmbeddedServer, RemoteServer

    repo = Path("/tmp", tag, "repo")
    repo.mkdir(parents=True)
    server = EmbeddedServer(repo, Path("/tmp", tag, "logs"))
    server.start()
    RemoteServer(server.http_url).load(DEPLOYMENT)  # uploaded with its files: a folderXXXXXX
    return server


def owner() -> int:
    """A run that is killed while its server serves (SIGKILL: nothing of it cleans up but the janitor)."""
    serving("owner")
    print("serving", flush=True)
    time.sleep(300)
    return 1


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, timeout=30)


def private_tmp() -> None:
    """tmpfs on /dev/shm and /tmp, in this mount namespace only; what this run needs from the host's /tmp (a
    checkout or a virtual environment there, as a CI's may be) is bound back where it was."""
    needed = {p for p in (ROOT, Path(sys.prefix).resolve()) if p.is_relative_to("/tmp")}
    _mount("-t", "tmpfs", "-o", "size=256m", "tritonsuite-scenario", "/dev/shm")
    host_tmp = Path("/dev/shm/host-tmp")
    host_tmp.mkdir()
    _mount("--bind", "/tmp", str(host_tmp))
    _mount("-t", "tmpfs", "-o", "size=256m", "tritonsuite-scenario", "/tmp")
    for path in sorted(needed):
        path.mkdir(parents=True, exist_ok=True)
        _mount("--bind", str(host_tmp / path.relative_to("/tmp")), str(path))


def main() -> int:
    if os.getpid() != 1:  # never on the host: its /tmp and /dev/shm are everyone's
        print("run me in a PID namespace of my own (unshare --pid --fork --mount-proc)", file=sys.stderr)
        return 2
    private_tmp()
    identity_deployment()
    seen = {}
    older = serving("older")
    seen["one server serving"] = names()
    newer = serving("newer")
    seen["two servers serving"] = names()
    newer.stop()
    seen["the newer stopped, the older serving"] = names()
    older.stop()
    seen["both stopped"] = names()

    crashed = serving("crashed")
    os.killpg(crashed.process.pid, signal.SIGKILL)  # as the OOM killer leaves a server
    crashed.process.wait(timeout=30)
    seen["a server killed"] = names()
    crashed.stop()
    seen["the killed server stopped"] = names()

    run = subprocess.Popen([sys.executable, __file__, "--owner"], stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline().strip() == "serving"
        seen["a run serving"] = names()
        run.kill()
        run.wait(timeout=30)
        deadline = time.monotonic() + 30  # the janitor's: kill the group, await its end, sweep
        while names() and time.monotonic() < deadline:
            time.sleep(0.1)
        seen["the run killed"] = names()
    finally:
        run.kill()
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    raise SystemExit(owner() if sys.argv[1:] == ["--owner"] else main())
