"""The embedded launcher: the real ``tritonserver`` (2.51) from the nvidia-pytriton wheel, run as a child process.

It binds HTTP, gRPC and metrics to 127.0.0.1 on free ports (retrying on a port clash), uses explicit model
control, waits for readiness with a timeout, writes its log to a file, and on stop leaves no process (the server
and its python-backend stubs are one process group, killed with the parent if the parent dies), no ``/dev/shm``
region behind (each launch gets its own region prefix, removed after the server exits; regions of launches whose
owner died are swept at the next start), and none of the directories Triton makes in ``/tmp`` once no running
server can own them (:mod:`tritonsuite.server.tritontmp`).

The wheel ships only the python backend. Its backend directory gets the python backend and, for every stock
backend in :mod:`tritonsuite.deploy.backends`, ``<name>/model.py``: a python-based stand-in, so stock repositories load
unchanged.
"""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.core.children import dying_with_parent
from tritonsuite.deploy.backends import STANDIN_FILE, STOCKCHECKS_FILE, native_backends, standin_backends
from tritonsuite.deploy.backends.standin import REPOSITORY_ENV
from tritonsuite.deploy.backends.stockchecks import INTEROP_MARK_ENV
import tritonsuite.server.janitor as janitor
from tritonsuite.server.base import LOOPBACK, ServerArguments, ServerError, TritonServer, free_ports
from tritonsuite.server.shm import SHM_DIR, SHM_PREFIX, owned_patterns, pid_alive, sweep_stale_shm
from tritonsuite.server.tritontmp import sweep_triton_tmp

_launch_counter = itertools.count(1)
INTEROP_MARK = ".interop-threads-set-by"  # in the backend directory: the model that set it (stockchecks)
WATCHDOG_INTERVAL_S = 0.2
CACHE_BYTES = 64 * 1024 * 1024  # the local response cache's size


def pytriton_paths() -> dict[str, Path]:
    """Locations inside the nvidia-pytriton wheel: the binary, its libraries, the python backend and stubs."""
    try:
        import pytriton
    except ImportError as exc:  # not installed, or one of its own dependencies missing: say which
        missing = f" ({exc})" if getattr(exc, "name", None) not in (None, "pytriton") else ""
        raise ServerError("the embedded server needs the nvidia-pytriton package (pip install nvidia-pytriton)"
                          + missing) from None
    root = Path(pytriton.__file__).parent / "tritonserver"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    paths = {
        "binary": root / "bin" / "tritonserver",
        "libs": root.parent.parent / "nvidia_pytriton.libs",
        "python_backend": root / "backends" / "python",
        "stub": root / "python_backend_stubs" / version / "triton_python_backend_stub",
    }
    missing = [f"{k}: {v}" for k, v in paths.items() if not v.exists()]
    if missing:
        raise ServerError(f"nvidia-pytriton is missing parts the embedded server needs: {'; '.join(missing)}")
    return paths


CORE_DIR = ".core"  # in the backend directory: libtritonserver.so, linked to the wheel's (library_dirs)
BACKENDS_PREFIX = "tritonsuite-backends-"  # + "<owner pid>-": each launch's backend directory, under the temp dir


def sweep_stale_backend_directories() -> list[str]:
    """Remove the backend directories of launches whose owning process is gone (killed before it cleaned up)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{BACKENDS_PREFIX}*"):
        owner = path.name[len(BACKENDS_PREFIX):].split("-")[0]
        if path.is_dir() and (not owner.isdigit() or not pid_alive(int(owner))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


def backend_directory(paths: dict[str, Path], backends_from: str | Path | None = None) -> Path:
    """A fresh backend directory for the wheel's tritonserver: the python backend with this Python's stub; every
    backend ``backends_from`` holds as a library (linked, so its own libraries load beside it); and for every other
    stock backend a python-based stand-in (``<name>/model.py`` and ``stockchecks.py``, no ``libtriton_<name>.so``).
    The caller removes it."""
    sweep_stale_backend_directories()
    sweep_triton_tmp()
    backend_dir = Path(tempfile.mkdtemp(prefix=f"{BACKENDS_PREFIX}{os.getpid()}-"))
    python_dir = backend_dir / "python"
    shutil.copytree(paths["python_backend"], python_dir, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(paths["stub"], python_dir / "triton_python_backend_stub")
    native = native_backends(backends_from)
    for name in native:
        (backend_dir / name).symlink_to(Path(backends_from).resolve() / name, target_is_directory=True)
    core = sorted(Path(paths["libs"]).glob("libtritonserver-*.so"))
    if native and core:  # a backend built for a stock server needs libtritonserver.so: the wheel's, renamed
        (backend_dir / CORE_DIR).mkdir()
        (backend_dir / CORE_DIR / "libtritonserver.so").symlink_to(core[0].resolve())
    for name in standin_backends():
        if name in native:
            continue
        (backend_dir / name).mkdir()
        shutil.copy2(STANDIN_FILE, backend_dir / name / "model.py")
        shutil.copy2(STOCKCHECKS_FILE, backend_dir / name / STOCKCHECKS_FILE.name)
    return backend_dir


def library_dirs(paths: dict[str, Path], backend_dir: Path | None) -> list[str]:
    """The server's LD_LIBRARY_PATH: the wheel's libraries, this Python's, and where a backend built for a stock
    server (an NGC image's, or one's own build) finds ``libtritonserver.so``: the wheel links its core under another
    name (``libtritonserver-<hash>.so``), so such a backend fails to load ("unable to load shared library:
    libtritonserver.so") without this link to it; the dynamic loader sees the same file already loaded and reuses it."""
    core = Path(backend_dir) / CORE_DIR if backend_dir is not None else None
    return [d for d in (str(core) if core is not None and core.is_dir() else "", str(paths["libs"]),
                        sysconfig.get_config_var("LIBDIR") or "") if d]


class EmbeddedServer(TritonServer):
    """The real ``tritonserver`` from the nvidia-pytriton wheel, run as a child process on this host."""

    name = "embedded"

    def __init__(self, model_repository: str | Path, log_dir: str | Path, startup_timeout: float = 120.0,
                 extra_args: tuple[str, ...] = (), model_control_mode: str = "explicit", port_attempts: int = 3,
                 backend_directory: str | Path | None = None, response_cache: bool = True,
                 address: str = LOOPBACK, access: Access = PLAIN, auto_complete: bool = True):
        self.access = access  # a server started with TLS or restricted APIs (--triton-server-flag) is reached so
        self.model_repository = Path(model_repository).resolve()
        self.backends_from = Path(backend_directory).resolve() if backend_directory else None
        self.log_dir = Path(log_dir)
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self.response_cache = response_cache
        self.auto_complete = auto_complete  # False: started with --disable-auto-complete-config (_completion_arguments)
        self.address = address  # what every endpoint binds: loopback (a network namespace's own address in tests)
        self.model_control_mode = model_control_mode
        self.port_attempts = port_attempts
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.shm_prefix = ""
        self.ports: dict[str, int] = {}
        self.http_url = ""
        self._backend_dir: Path | None = None
        self._stopping = threading.Event()
        self._janitor: int | None = None  # write end of the janitor's pipe

    @property
    def local(self) -> bool:
        return True

    def _environment(self, paths: dict[str, Path]) -> dict[str, str]:
        env = dict(os.environ)
        libdirs = library_dirs(paths, self._backend_dir)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libdirs + [env.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)
        # The python-backend stub embeds Python in isolated mode (PYTHONPATH is ignored) and finds its prefix
        # through the "python3" first on PATH: this interpreter's bin directory first makes the stub use this
        # environment (a venv included), so the stand-ins import onnxruntime, torch and numpy from here.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.setdefault("OMP_NUM_THREADS", "1")
        # OpenMP threads that spin while idle take the cores from Triton, the other model stubs and the client
        # when they share a host. FastPitch offline on 2 cores: onnx batch 1 32.6 -> 76.8 inf/s, ts-trace batch 1
        # 1.0 (980 ms) -> 52.6 inf/s with PASSIVE; a user's own setting wins.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env[REPOSITORY_ENV] = str(Path(self.model_repository).resolve())  # the stand-ins' auto-complete reads it
        # pytorch's inter-op thread count is process-wide on a stock server: the stand-ins mark who set it first
        env[INTEROP_MARK_ENV] = str(self._backend_dir / INTEROP_MARK)
        return env

    def arguments(self) -> ServerArguments:
        p = self.ports
        return ServerArguments(
            model_repository=str(self.model_repository), http_port=p["http"], grpc_port=p["grpc"],
            metrics_port=p["metrics"], backend_directory=str(self._backend_dir),
            model_control_mode=self.model_control_mode, address=self.address,
            backend_config=(f"python,shm-region-prefix-name={self.shm_prefix}",),
            extra=self._cache_arguments() + self._completion_arguments() + self.extra_args)

    def _completion_arguments(self) -> tuple[str, ...]:
        """``--disable-auto-complete-config`` for a server started with ``auto_complete`` False, unless the caller's
        own arguments decide it. The python backend (r24.10, ``python_be.cc``) auto-completes each model it loads by
        starting a stub of its own for it and then sleeping 1 s (``StubLauncher::UpdateHealth``) before ending that
        stub: the stand-ins are python-based backends, so every load on them took 1.42 s, 1.24 s of it this (a tiny
        ONNX model, measured). A configuration that declares its tensors loses nothing by it: the stand-ins complete
        only one that declares none, as the onnxruntime backend does (``standin.auto_complete_config``). Who starts
        the server knows whether each configuration it will serve is complete
        (:func:`tritonsuite.deploy.userrepo.completion_needed`); Triton's default, on, stays the default here."""
        if self.auto_complete or any("auto-complete-config" in a or "strict-model-config" in a
                                     for a in self.extra_args):
            return ()
        return ("--disable-auto-complete-config",)

    def _cache_arguments(self) -> tuple[str, ...]:
        """The wheel ships Triton's local response cache (``caches/local/libtritoncache_local.so``): the server starts
        with it (64 MiB), so a deployment whose config enables ``response_cache`` is cached as on a stock server
        started with ``--cache-config``. A user's own ``--cache-config`` in ``extra_args`` wins; ``response_cache``
        False starts it with none, as a stock server started without ``--cache-config``."""
        caches = pytriton_paths()["binary"].parent.parent / "caches"
        if not self.response_cache or any(a.startswith("--cache-config") for a in self.extra_args) or not (caches / "local").is_dir():
            return ()
        return (f"--cache-directory={caches}", f"--cache-config=local,size={CACHE_BYTES}")

    def choose_ports(self) -> dict[str, int]:
        return free_ports()

    def start(self) -> None:
        if self.process is not None:
            return
        sweep_stale_shm()
        paths = pytriton_paths()
        self.model_repository.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._backend_dir = backend_directory(paths, self.backends_from)
        self._launch("tritonserver", lambda: self._start_once(paths), self.port_attempts)

    def _start_once(self, paths: dict[str, Path]) -> None:
        launch = next(_launch_counter)
        (self._backend_dir / INTEROP_MARK).unlink(missing_ok=True)  # a new server: nobody set it yet
        self.shm_prefix = f"{SHM_PREFIX}{os.getpid()}x{launch}_"
        self.ports = self.choose_ports()
        self.http_url = f"{self.address}:{self.ports['http']}"
        stamp = time.strftime("%Y%m%dT%H%M%S")
        self.log_path = self.log_dir / f"tritonserver-{stamp}-{os.getpid()}-{launch}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(dying_with_parent(self.arguments().command(str(paths["binary"]))),
                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self._environment(paths), start_new_session=True)
        self._await_start("tritonserver", self._ended)
        self._stopping.clear()
        # if this process dies without stopping the server (SIGKILL, OOM), the janitor cleans up
        self._janitor = janitor.start(self.process.pid, owned_patterns(self.shm_prefix) + [str(self._backend_dir)])
        threading.Thread(target=self._watch, args=(self.process, self.shm_prefix), daemon=True,
                         name="tritonserver-watchdog").start()

    def _ended(self) -> tuple[int, str] | None:
        code = self.process.poll()
        if code is None:
            return None
        tail = self.log_tail()
        self._reap()
        return code, tail

    def _ready(self) -> bool:
        try:
            request = urllib.request.Request(f"http://{self.http_url}/v2/health/ready",
                                             headers=self.access.header_dict())
            with urllib.request.urlopen(request, timeout=1.0) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def process_ids(self) -> list[int]:
        import psutil

        if not self.is_alive():
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root.pid] + [p.pid for p in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def describe(self) -> str:
        return f"embedded tritonserver (pid {self.process.pid if self.process else '-'}) at {self.http_url}"

    def refuses(self, backend, config) -> str | None:
        """The wheel's tritonserver has the python backend alone: a backend is served here by its python-based
        stand-in, or by the wheel's own ``libtriton_<name>.so`` (none today), or not at all."""
        if backend.name in native_backends(self.backends_from):
            return None
        if backend.name not in standin_backends():
            native = pytriton_paths()["python_backend"].parent / backend.name / f"libtriton_{backend.name}.so"
            if not native.is_file():
                return (f"the embedded server (the nvidia-pytriton wheel's tritonserver) has no {backend.name} "
                        f"backend for {backend.platform}: serve it with --server remote --triton-url of a Triton "
                        f"that has it (every NGC tritonserver image does)")
            return None
        return backend.standin_refuses(config)

    def _watch(self, process: subprocess.Popen, shm_prefix: str) -> None:
        """Notice a server that dies on its own (the OOM killer, a crash) within a poll interval, and clean up at
        once: its python-backend stubs inherited its listening HTTP socket, so while they live a client's next
        request is accepted by a stub that never answers (a model load then waited its full timeout). Killing the
        group closes those sockets, so every waiting request fails at once and the suite reports the death."""
        while not self._stopping.wait(WATCHDOG_INTERVAL_S):
            if process.poll() is not None:
                _kill_group(process.pid)
                for path in SHM_DIR.glob(f"{shm_prefix}*"):
                    path.unlink(missing_ok=True)
                return

    def _reap(self) -> None:
        """Kill whatever is left of the process group and remove this launch's shared-memory regions."""
        if self.process is None:
            return
        _kill_group(self.process.pid)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        # stubs that outlived the group kill (they poll their parent) get a moment to exit
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _group_alive(self.process.pid):
            time.sleep(0.05)
        for path in SHM_DIR.glob(f"{self.shm_prefix}*"):
            path.unlink(missing_ok=True)
        self.process = None

    def stop(self) -> None:
        """Kill the server's process group at once and remove what the launch made. Nothing is in flight by then
        (every load generator and check awaits its requests), and nothing of a server outlives it but its log: a
        graceful SIGTERM only spent 3-4 s in Triton's once-a-second wait for its models to unload, for every one of
        the many short-lived servers a run of the suite's own tests starts."""
        self._stopping.set()
        if self.process is not None:
            self._reap()
        self._cleanup()
        sweep_triton_tmp()  # what Triton would have removed at its own shutdown (server/tritontmp.py)

    def twin(self, log_dir: str | Path) -> "EmbeddedServer":
        """Another server like this one (the same repository, backends and options; not started), for a check that
        must stop a server without stopping the run's."""
        return EmbeddedServer(self.model_repository, log_dir, self.startup_timeout, self.extra_args,
                              self.model_control_mode, self.port_attempts, self.backends_from,
                              auto_complete=self.auto_complete)

    def terminate(self, timeout_s: float = 40.0) -> bool:
        """Ask the server to shut down as an operator does (SIGTERM: Triton stops taking requests, lets those in
        flight finish within its ``--exit-timeout-secs``, 30 s by default, and unloads its models); True if it exited
        within ``timeout_s``. What is left is then killed and cleaned up as :meth:`stop` does."""
        exited = True
        if self.process is not None:
            self._stopping.set()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                exited = False
        self.stop()
        return exited

    def _cleanup(self) -> None:
        if self._janitor is not None:  # cleaned up ourselves: the janitor is not needed
            janitor.dismiss(self._janitor)
            self._janitor = None
        if self._backend_dir is not None:
            shutil.rmtree(self._backend_dir, ignore_errors=True)
            self._backend_dir = None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. A killed python-backend stub whose server died first is
    reparented to init and stays a zombie until init reaps it (a second or two in a container whose init seldom
    does): it holds nothing, so it does not count."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False
