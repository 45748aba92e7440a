"""The container launcher: ``tritonserver`` in a Docker container, started through the docker SDK (an optional
dependency: ``pip install -e '.[container]'``, also in the ``gpu`` extra).

The command line comes from the same :class:`ServerArguments` as the embedded launcher's (explicit model control,
every endpoint on 127.0.0.1). What Model Analyzer's docker mode and DeepLearningExamples' Triton runner do, and what
their users report going wrong (the 64 MB default /dev/shm, ports already taken, a stale server from an earlier
run, a container left behind), shaped the rest:

- the model repository is bind-mounted read-only at the same path (the suite loads deployments by name);
- the container shares the host's IPC namespace, so its /dev/shm *is* the host's: the client's system shared
  memory regions (the offline scenario) are visible to the server, and no 64 MB default applies (``shm_size`` is
  only given where IPC is private);
- ulimits: stack 64 MiB and memlock unlimited; an engine whose kernel refuses memlock (rlimit EPERM, as on the
  project's VMs) gets the container again without it, and :attr:`ContainerServer.notes` says so;
- ports: with a bridge network the engine publishes 8000/8001/8002 on ephemeral ports of the host's 127.0.0.1;
  without one (``dockerd --bridge=none``) the container uses the host network and binds 127.0.0.1 on free ports,
  retried on a clash;
- GPUs: ``--gpus all|none|0,1`` as ``DeviceRequest(capabilities=[["gpu"]], ...)``;
- labels ``tritonsuite.run``, ``tritonsuite.pid``, ``tritonsuite.host``, ``tritonsuite.started``: every start first
  removes containers whose owning pytest is dead; a clean stop, Ctrl-C/SIGTERM (through pytest's fixtures),
  interpreter exit (``atexit``) and a killed pytest (the janitor process) each remove the container;
- readiness: live, ready, and every model in the repository index that is loading or loaded is ready, bounded in
  time, the container's state checked each poll (a container that exited is reported within a poll, with its log
  tail); the log is streamed to ``reports/logs/``.

Two kinds of image:

- a Triton image (default: NGC's ``tritonserver:<YY.MM>-py3``, see :data:`DEFAULT_IMAGE`): its own
  ``tritonserver`` and stock backends serve the suite's stock repositories;
- an image labelled ``tritonsuite.runtime=host`` (:func:`build_local_image`, ``tritonsuite-local:latest``): an
  empty root into which the launcher bind-mounts, read-only, the host's ``/usr``, ``/lib``, ``/lib64``, ``/bin``,
  the interpreter's prefix and the environment holding nvidia-pytriton, and runs the wheel's ``tritonserver`` with
  the embedded launcher's backend directory (python backend and stand-ins). That is how the container path is
  tested on hosts with an engine but no registry (the project's CPU machines and CI).
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import tritonsuite.server.janitor as janitor
from tritonsuite.core.access import PLAIN, Access
from tritonsuite.server.base import LOOPBACK, ServerArguments, ServerError, TritonServer, free_ports
from tritonsuite.server.docker import (RUNTIME_LABEL, remove_container, process_started, device_requests,
                                       docker_client, host_mounts, parse_gpus, reap_stale_containers)
from tritonsuite.server.shm import SHM_DIR, SHM_PREFIX, owned_patterns

#: NGC's Triton image matching the wheel's Triton (2.51 is release 24.10). Pull it yourself first (the launcher
#: never pulls: it is ~15 GB, and a test run should not wait on it).
DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
IMAGE_ENV = "TRITONSUITE_IMAGE"  # the default of --image, when set
STACK_BYTES = 64 * 1024 * 1024
SHM_SIZE = "1g"  # only where the container's IPC is private
CONTAINER_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
POLL_S = 0.2
_launch_counter = itertools.count(1)


class ContainerServer(TritonServer):
    """Triton in a Docker container (see the module's docstring)."""

    name = "container"

    def __init__(self, model_repository: str | Path, log_dir: str | Path, image: str = "", gpus: str = "none",
                 run_id: str = "", startup_timeout: float = 180.0, extra_args: tuple[str, ...] = (),
                 model_control_mode: str = "explicit", port_attempts: int = 3, janitor: bool = True,
                 backend_directory: str | Path | None = None, access: Access = PLAIN):
        self.access = access
        self.model_repository = Path(model_repository).resolve()
        # --backend-directory: mounted read-only and served from (the local image: beside the stand-ins)
        self.backends_from = Path(backend_directory).resolve() if backend_directory else None
        self.log_dir = Path(log_dir)
        self.image = image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE
        try:
            self.gpus = parse_gpus(gpus)
        except ValueError as exc:
            raise ServerError(str(exc)) from None
        self.run_id = run_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self.model_control_mode = model_control_mode
        self.port_attempts = port_attempts
        self.use_janitor = janitor
        self.notes: list[str] = []  # settings the engine refused and what was done instead
        self.http_url = ""
        self.ports: dict[str, int] = {}
        self.container = None
        self.log_path: Path | None = None
        self.image_digest = ""
        self.network = ""
        self.shm_prefix = ""
        self._client = None
        self._image_runtime = ""
        self._backend_dir: Path | None = None
        self._log_thread: threading.Thread | None = None
        self._janitor: int | None = None
        self._atexit = None

    @property
    def local(self) -> bool:
        return True  # the engine runs on this host: the repository is bind-mounted, /dev/shm is shared

    # --- start ---------------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.container is not None:
            return
        from tritonsuite.server.shm import sweep_stale_shm

        client = self._client = self._client or docker_client()
        reap_stale_containers(client)
        sweep_stale_shm()
        image = self._image(client)
        self._image_runtime = image.labels.get(RUNTIME_LABEL, "")
        self.image_digest = (image.attrs.get("RepoDigests") or [image.id])[0].rpartition("@")[2] or image.id
        self.network = "bridge" if client.networks.list(names=["bridge"]) else "host"
        self.model_repository.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self._image_runtime == "host":
            from tritonsuite.server.embedded import backend_directory, pytriton_paths

            self._backend_dir = backend_directory(pytriton_paths(), self.backends_from)
            self._backend_dir.chmod(0o755)  # the container runs as this user; others may read it too
        # on a bridge the engine publishes the ports it chooses: nothing to retry
        self._launch("tritonserver in a container", lambda: self._start_once(client),
                     self.port_attempts if self.network == "host" else 1)

    def _image(self, client):
        import docker.errors

        try:
            return client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise ServerError(f"--image {self.image}: not on the Docker engine; pull it first (docker pull "
                              f"{self.image}), or build the local image (tritonsuite "
                              f"build-local-image)") from None

    def arguments(self) -> ServerArguments:
        host_runtime = self._image_runtime == "host"
        return ServerArguments(
            model_repository=str(self.model_repository), http_port=self.ports["http"],
            grpc_port=self.ports["grpc"], metrics_port=self.ports["metrics"],
            backend_directory=str(self._backend_dir) if host_runtime else str(self.backends_from or ""),
            model_control_mode=self.model_control_mode,
            backend_config=(f"python,shm-region-prefix-name={self.shm_prefix}",),
            extra=self.extra_args, address=LOOPBACK if self.network == "host" else "0.0.0.0")

    def _run_spec(self, launch: int) -> dict:
        from docker.types import Ulimit

        from tritonsuite.server.embedded import library_dirs, pytriton_paths

        binary, environment, volumes, user = "tritonserver", {}, {}, None
        if self._image_runtime == "host":
            paths = pytriton_paths()
            binary = str(paths["binary"])
            environment = {
                "LD_LIBRARY_PATH": os.pathsep.join(library_dirs(paths, self._backend_dir)),
                # the python-backend stub finds its prefix through the python3 first on PATH (see embedded.py)
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
                "HOME": "/tmp",
            }
            for path in host_mounts(self._backend_dir):
                volumes[path] = {"bind": path, "mode": "ro"}
            user = f"{os.getuid()}:{os.getgid()}"
        environment.setdefault("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
        environment.setdefault("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
        volumes[str(self.model_repository)] = {"bind": str(self.model_repository), "mode": "ro"}
        if self.backends_from:
            volumes[str(self.backends_from)] = {"bind": str(self.backends_from), "mode": "ro"}
        spec = dict(
            image=self.image, command=self.arguments().command(binary), detach=True,
            name=f"tritonsuite-{os.getpid()}-{launch}", environment=environment, volumes=volumes,
            labels={"tritonsuite.run": self.run_id, "tritonsuite.pid": str(os.getpid()),
                    "tritonsuite.host": socket.gethostname(), "tritonsuite.started": process_started()},
            ipc_mode="host",
            ulimits=[Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES),
                     Ulimit(name="memlock", soft=-1, hard=-1)],
            device_requests=device_requests(self.gpus), stdin_open=False, tty=False)
        if user:
            spec["user"] = user
        if self.network == "host":
            spec["network_mode"] = "host"
        else:
            spec["ports"] = {f"{p}/tcp": (LOOPBACK, None) for p in CONTAINER_PORTS.values()}
        return spec

    def _create_and_start(self, client, spec: dict):
        """Create and start the container; an engine that refuses memlock gets it again without (noted)."""
        import docker.errors

        for attempt in range(2):
            container = client.containers.create(**spec)
            try:
                container.start()
                return container
            except docker.errors.APIError as exc:
                remove_container(container)
                message = str(exc)
                refused = "memlock" in message.lower() or ("rlimit" in message.lower()
                                                           and "operation not permitted" in message.lower())
                if attempt == 0 and refused:
                    spec["ulimits"] = [u for u in spec["ulimits"] if u.name != "memlock"]
                    self.notes.append("the engine refused ulimit memlock=-1 (rlimit: operation not permitted); "
                                      "the container runs with the engine's default memlock limit")
                    continue
                raise ServerError(f"the Docker engine could not start {self.image}: {message.strip()}") from None
        raise AssertionError("unreachable")

    def _start_once(self, client) -> None:
        launch = next(_launch_counter)
        self.shm_prefix = f"{SHM_PREFIX}{os.getpid()}x{launch}c_"
        if self.network == "host":
            self.ports = free_ports(tuple(CONTAINER_PORTS))
        else:
            self.ports = dict(CONTAINER_PORTS)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        self.log_path = self.log_dir / f"tritonserver-{stamp}-{os.getpid()}-{launch}-container.log"
        self.container = self._create_and_start(client, self._run_spec(launch))
        self._guard()
        self._stream_log()
        if self.network == "host":
            self.http_url = f"{LOOPBACK}:{self.ports['http']}"
        else:
            self.container.reload()
            published = self.container.ports
            self.ports = {name: int(published[f"{port}/tcp"][0]["HostPort"]) for name, port in CONTAINER_PORTS.items()}
            self.http_url = f"{LOOPBACK}:{self.ports['http']}"
        self._await_start(f"tritonserver in container {self.image}", self._ended, POLL_S)

    def _ended(self) -> tuple[int | None, str] | None:
        state = self._state()
        if state.get("Status") not in ("exited", "dead", "removing", None):
            return None
        tail = self._final_tail()
        self._remove_container()
        return state.get("ExitCode"), tail

    def _guard(self) -> None:
        """From here on the container must not outlive this process: a janitor for SIGKILL, atexit otherwise."""
        if self.use_janitor:
            owned = owned_patterns(self.shm_prefix) + ([str(self._backend_dir)] if self._backend_dir else [])
            self._janitor = janitor.start(0, owned, container=self.container.id)
        if self._atexit is None:
            self._atexit = self.stop
            atexit.register(self._atexit)

    def _stream_log(self) -> None:
        container, path = self.container, self.log_path

        def stream() -> None:
            with open(path, "ab") as log:
                try:
                    for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                        log.write(chunk)
                        log.flush()
                except Exception:
                    pass  # the container was removed: the stream ends
        self._log_thread = threading.Thread(target=stream, daemon=True, name="tritonserver-container-log")
        self._log_thread.start()

    def _final_tail(self) -> str:
        if self._log_thread is not None:
            self._log_thread.join(timeout=5)  # the container exited: its stream ends once drained
        return self.log_tail()

    def _state(self) -> dict:
        import docker.errors

        if self.container is None:
            return {}
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return {}
        except Exception:
            return {"Status": "running"}  # the engine did not answer this once: not evidence of a death
        return self.container.attrs.get("State", {})

    def _ready(self) -> bool:
        """Live, ready, and every model the repository index shows loading or loaded is ready."""
        base, headers = f"http://{self.http_url}", self.access.header_dict()  # restricted APIs: their key
        try:
            for path in ("/v2/health/live", "/v2/health/ready"):
                with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers),
                                            timeout=1.0) as response:
                    if response.status != 200:
                        return False
            request = urllib.request.Request(base + "/v2/repository/index", data=b"{}", method="POST",
                                             headers=headers)
            with urllib.request.urlopen(request, timeout=2.0) as response:
                index = json.loads(response.read() or b"[]")
            for model in index:
                if model.get("state") in ("READY", "LOADING"):
                    version = f"/versions/{model['version']}" if model.get("version") else ""
                    ready = urllib.request.Request(f"{base}/v2/models/{model['name']}{version}/ready",
                                                   headers=headers)
                    with urllib.request.urlopen(ready, timeout=1.0) as response:
                        if response.status != 200:
                            return False
            return True
        except (urllib.error.URLError, OSError, ValueError):
            return False

    # --- running ---------------------------------------------------------------------------------------------------

    def is_alive(self) -> bool:
        return self._state().get("Status") == "running"

    def process_ids(self) -> list[int]:
        import psutil

        pid = self._state().get("Pid") or 0
        if not pid:
            return []
        try:
            root = psutil.Process(pid)
            return [root.pid] + [p.pid for p in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def describe(self) -> str:
        short = self.container.short_id if self.container is not None else "-"
        return f"tritonserver in container {short} ({self.image}) at {self.http_url}"

    def provenance(self) -> str:
        return f"container {self.image}@{self.image_digest}" if self.image_digest else f"container {self.image}"

    # --- stop ----------------------------------------------------------------------------------------------------

    def _remove_container(self) -> None:
        if self.container is not None:
            remove_container(self.container, stop_timeout=15)
            if self._log_thread is not None:
                self._log_thread.join(timeout=5)
            self.container = None
        if self.shm_prefix:
            for path in SHM_DIR.glob(f"{self.shm_prefix}*"):
                path.unlink(missing_ok=True)

    def stop(self) -> None:
        self._remove_container()
        if self._janitor is not None:
            janitor.dismiss(self._janitor)
            self._janitor = None
        if self._atexit is not None:
            atexit.unregister(self._atexit)
            self._atexit = None
        if self._backend_dir is not None:
            shutil.rmtree(self._backend_dir, ignore_errors=True)
            self._backend_dir = None
