"""The Docker engine as the container launcher uses it, through the docker SDK: the client (checked with a ping),
``--gpus`` parsing, the local empty-root image, the reaper of containers whose owning run is dead, the host folders
an empty root needs, and removal bounded in time."""
from __future__ import annotations

import io
import os
import socket
import sys
import tarfile
from pathlib import Path

from tritonsuite.server.base import ServerError

#: The image :func:`build_local_image` makes: an empty root that runs the host's tritonserver.
LOCAL_IMAGE = "tritonsuite-local:latest"
RUNTIME_LABEL = "tritonsuite.runtime"  # "host": run the host's wheel tritonserver with read-only host mounts
GPU_CHOICES = "all, none, or comma-separated device ids (0,1)"
ENGINE_TIMEOUT_S = 30


class EngineUnavailable(ServerError):
    """No docker SDK, or no Docker engine answering."""


def docker_client(timeout: float = ENGINE_TIMEOUT_S):
    """A client of the Docker engine ``docker.from_env()`` finds (DOCKER_HOST, else the default socket), checked
    with a ping; a one-line :class:`EngineUnavailable` otherwise."""
    try:
        import docker
    except ImportError:
        raise EngineUnavailable("--server container needs the docker SDK: pip install -e '.[container]' (or "
                                "pip install docker)") from None
    where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise EngineUnavailable(f"--server container: no Docker engine answers at {where} ({reason}); start one, "
                                f"or set DOCKER_HOST") from None
    return client


def parse_gpus(value: str) -> str | list[str]:
    """``all`` / ``none`` / ``0,1`` -> "all", "none" or a list of device ids; ValueError naming the choices."""
    value = (value or "").strip()
    if value in ("all", "none"):
        return value
    ids = [v.strip() for v in value.split(",")]
    if value and all(v.isdigit() for v in ids):
        return ids
    raise ValueError(f"--gpus {value!r}: valid choices: {GPU_CHOICES}")


def device_requests(gpus: str | list[str]) -> list:
    if gpus == "none":
        return []
    from docker.types import DeviceRequest

    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])]


def build_local_image(client=None, tag: str = LOCAL_IMAGE) -> str:
    """Import an empty root (``proc sys dev tmp etc usr lib lib64 bin``) as ``tag``, labelled to run the host's
    tritonserver with read-only host mounts; returns the image id. No registry needed."""
    client = client or docker_client()
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name in ("proc", "sys", "dev", "dev/shm", "tmp", "etc", "usr", "lib", "lib64", "bin", "sbin"):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755, 0
            tar.addfile(info)
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    client.api.import_image_from_data(data.getvalue(), repository=repository, tag=version,
                                      changes=[f"LABEL {RUNTIME_LABEL}=host"])
    return client.images.get(tag).id


def owner_alive(pid: int, started: str = "") -> bool:
    """Whether process ``pid`` lives and (when ``started`` is given) is the one that started at that time."""
    import psutil

    try:
        process = psutil.Process(pid)
        return not started or f"{process.create_time():.2f}" == started
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def process_started() -> str:
    import psutil

    return f"{psutil.Process().create_time():.2f}"


def reap_stale_containers(client) -> list[str]:
    """Remove containers this host's earlier runs left behind (their pytest is dead: killed, crashed)."""
    removed = []
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": "tritonsuite.pid"},
                                               ignore_removed=True):
        labels = container.labels
        if labels.get("tritonsuite.host") != host:
            continue
        try:
            pid = int(labels.get("tritonsuite.pid", ""))
        except ValueError:
            continue
        if not owner_alive(pid, labels.get("tritonsuite.started", "")):
            try:
                container.remove(force=True)
                removed.append(container.name)
            except Exception:
                pass  # removed meanwhile (its janitor)
    return removed


def host_mounts(*paths: str | Path) -> list[str]:
    """The host folders the wheel's tritonserver needs in an empty root, nested ones left out: the system's
    libraries and binaries, this interpreter's prefix (the python-backend stub links its libpython) and the
    environment holding nvidia-pytriton, torch and onnxruntime, plus ``paths``."""
    candidates = ["/usr", "/lib", "/lib64", "/bin", "/sbin", sys.base_prefix, sys.prefix,
                  str(Path(sys.executable).resolve().parent.parent), *map(str, paths)]
    # Each at its own path (on a merged-/usr system /lib64 is a link to /usr/lib64: the ELF interpreter's path
    # /lib64/ld-linux-x86-64.so.2 must exist in the container) and where it resolves to.
    found = sorted({q for p in candidates if p and os.path.isdir(p)
                    for q in (os.path.abspath(p), os.path.realpath(p))})
    kept: list[str] = []
    for path in found:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def remove_container(container, stop_timeout: int = 0) -> None:
    """Stop (SIGTERM, then SIGKILL after ``stop_timeout`` s) and remove; bounded by the client's timeout."""
    try:
        if stop_timeout:
            container.stop(timeout=stop_timeout)
    except Exception:
        pass
    try:
        container.remove(force=True)
    except Exception:
        pass


def add_arguments(parser) -> None:
    parser.add_argument("tag", nargs="?", default=LOCAL_IMAGE, help=f"the image's tag (default {LOCAL_IMAGE})")


def run(args, parser) -> int:
    """Import the local image on the engine ``docker.from_env()`` finds (DOCKER_HOST); prints ``TAG IMAGE_ID``."""
    try:
        image_id = build_local_image(tag=args.tag)
    except ServerError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    print(f"{args.tag} {image_id}")
    return 0
