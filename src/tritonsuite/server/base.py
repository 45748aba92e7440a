"""What the suite needs from a Triton server, whoever runs it, and the one builder of ``tritonserver`` command
lines that every launcher which starts a server uses."""
from __future__ import annotations

import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tritonsuite.core.access import PLAIN, Access

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServerArguments:
    """A ``tritonserver`` command line (Model Analyzer keeps one such object for its local and docker launchers).

    Every endpoint binds to 127.0.0.1 (Triton's default is all interfaces); explicit model control by default, so
    the suite loads exactly the deployments it tests.
    """

    model_repository: str
    http_port: int
    grpc_port: int
    metrics_port: int
    backend_directory: str = ""
    model_control_mode: str = "explicit"
    backend_config: tuple[str, ...] = ()  # "<backend>,<key>=<value>"
    exit_timeout_secs: int = 10
    extra: tuple[str, ...] = ()
    # The address every endpoint binds. 127.0.0.1 on this host; a container on a bridge network binds all of its
    # own interfaces (its namespace's, not the host's) and the engine publishes the ports on the host's 127.0.0.1.
    address: str = LOOPBACK

    def command(self, binary: str = "tritonserver") -> list[str]:
        args = [binary, f"--model-repository={self.model_repository}"]
        if self.backend_directory:
            args.append(f"--backend-directory={self.backend_directory}")
        args += [
            f"--model-control-mode={self.model_control_mode}",
            f"--http-address={self.address}", f"--http-port={self.http_port}",
            f"--grpc-address={self.address}", f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.address}", f"--metrics-port={self.metrics_port}",
            "--allow-metrics=true", "--allow-gpu-metrics=false",
            *(f"--backend-config={c}" for c in self.backend_config),
            f"--exit-timeout-secs={self.exit_timeout_secs}", "--strict-readiness=true",
            *self.extra,
        ]
        return args


class ServerError(RuntimeError):
    """A server could not be started, died, or refused an operation; the message carries its log tail."""


class ServerDied(ServerError):
    pass


class PortClash(ServerError):
    """A launch could not bind a port it was given (someone took it since it was chosen): try other ports."""


def free_ports(names: tuple[str, ...] = ("http", "grpc", "metrics")) -> dict[str, int]:
    """Distinct free ports on 127.0.0.1, one per name (free when chosen: a launch that loses one to another process
    raises PortClash and is retried)."""
    ports: dict[str, int] = {}
    while len(set(ports.values())) < len(names):
        ports = {}
        for name in names:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((LOOPBACK, 0))
                ports[name] = s.getsockname()[1]
    return ports


class ModelControlUnavailable(ServerError):
    """The (remote) server does not allow loading/unloading models (it is not in explicit model control mode)."""


class TritonServer(ABC):
    """What the suite needs from a Triton server, whoever runs it."""

    name = "abstract"
    http_url: str  # "127.0.0.1:8000" (host:port, as tritonclient takes it)
    log_path: Path | None = None  # the server's log, where this launcher writes one
    # how long one request sent alone may go unanswered before it counts as hung (the suite sets it from the
    # profile's measurement settings: MeasurementSettings.timeout_s); the default of client()
    request_timeout_s: float = 120.0
    restartable = True  # a server this launcher started can be started again after it died (a remote one cannot)
    # how it is reached beyond host and port: TLS, headers (tritonsuite.core.access); every connection takes it
    access: Access = PLAIN

    @classmethod
    def create(cls, *, model_repository: str | Path, log_dir: str | Path, triton_url: str = "",
               **options) -> "TritonServer":
        """Build the launcher from the suite's common settings (it takes what it needs)."""
        return cls(model_repository, log_dir, **options)

    @property
    def grpc_url(self) -> str:
        """host:port of the server's gRPC endpoint (the launchers that start a server know its port)."""
        ports = getattr(self, "ports", None) or {}
        if "grpc" not in ports or not self.http_url:
            raise ValueError(f"{self.describe()}: its gRPC address is not known; valid choices here: --protocol http")
        return f"{self.http_url.rsplit(':', 1)[0]}:{ports['grpc']}"

    @property
    def metrics_url(self) -> str:
        """``http://host:port/metrics`` of the server's Prometheus endpoint, or "" where its port is not known (a
        remote server: its metrics port is the operator's)."""
        ports = getattr(self, "ports", None) or {}
        if "metrics" not in ports or not self.http_url:
            return ""
        return f"http://{self.http_url.rsplit(':', 1)[0]}:{ports['metrics']}/metrics"

    def started_with(self, option: str) -> list[str] | None:
        """The values of a tritonserver option this launcher passed it (``--rate-limit`` -> ["execution_count"];
        [] where not given, so Triton's default holds), or None where the suite cannot know: a server it did not
        start."""
        args = getattr(self, "extra_args", None)
        if args is None:
            return None
        found = []
        for i, arg in enumerate(args):
            if arg.startswith(option + "="):
                found.append(arg.split("=", 1)[1])
            elif arg == option and i + 1 < len(args):
                found.append(args[i + 1])
        return found

    def grpc_client(self):
        """A tritonclient gRPC client of this server."""
        import tritonclient.grpc as grpcclient

        return self._with_headers(grpcclient.InferenceServerClient(self.grpc_url, **self.access.tritonclient_grpc()),
                                  grpc=True)

    def _with_headers(self, client, grpc: bool = False):
        plugin = self.access.plugin(grpc)
        if plugin is not None:
            client.register_plugin(plugin)
        return client

    @property
    @abstractmethod
    def local(self) -> bool:
        """Whether the server shares this host's /dev/shm (system shared memory possible)."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def is_alive(self) -> bool: ...

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "--- tritonserver log tail ({}) ---\n{}".format(self.log_path, "\n".join(text[-lines:]))

    def _launch(self, what: str, start_once, attempts: int) -> None:
        """``start_once()`` until a launch binds its ports (PortClash: someone took one since it was chosen), at most
        ``attempts`` times; then stop and say so."""
        last_error = None
        for _ in range(attempts):
            try:
                start_once()
                return
            except PortClash as exc:
                last_error = exc
        self.stop()
        raise ServerError(f"{what} could not bind its ports after {attempts} attempts: {last_error}")

    def _await_start(self, what: str, ended, poll_s: float = 0.1) -> None:
        """Poll a launch until ``self._ready()``, within ``self.startup_timeout``. ``ended()`` is None while the
        launch runs, else its exit code and log tail (the launch cleaned up): a bind failure raises PortClash, any
        other exit ServerError with the tail; a launch not ready in time is stopped."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            exit_tail = ended()
            if exit_tail is not None:
                code, tail = exit_tail
                if "already in use" in tail or "failed to bind" in tail.lower():
                    raise PortClash(tail.strip().splitlines()[-1] if tail.strip() else "port in use")
                raise ServerError(f"{what} exited with code {code} during start-up (log: {self.log_path})\n{tail}")
            if self._ready():
                return
            time.sleep(poll_s)
        tail = self.log_tail()
        self.stop()
        raise ServerError(f"{what} was not ready within {self.startup_timeout:.0f} s (log: {self.log_path})\n{tail}")

    def process_ids(self) -> list[int]:
        """The server's processes on this host (the server and its backends' stubs); none for a remote one."""
        return []

    def model_config(self, name: str) -> dict:
        """The configuration the server actually runs for a loaded model (``/v2/models/<m>/config``)."""
        client = self.client(timeout=30)
        try:
            return client.get_model_config(name)
        finally:
            client.close()

    def model_description(self, name: str, composing: Sequence[str] = ()):
        """The :class:`~tritonsuite.core.description.ModelDescription` of a loaded model, from the configuration the
        server runs (auto-completed where it was), composing models resolved through the server as well
        (``composing``: a BLS model's callees, ``name`` or ``name:version``)."""
        from tritonsuite.core.description import describe

        def lookup(other: str):
            try:
                return self.model_config(other)
            except Exception as exc:  # the server's own error: not loaded, unknown
                raise LookupError(str(exc)) from None

        return describe(self.model_config(name), lookup, tuple(c.split(":")[0] for c in composing))

    def backend_description(self, name: str) -> str:
        """What serves a loaded model, read back from the server: e.g. "onnxruntime (python-based stand-in,
        embedded)" or "onnxruntime (libtriton_onnxruntime.so)"."""
        config = self.model_config(name)
        backend, runtime = config.get("backend") or config.get("platform", "?"), config.get("runtime", "")
        if runtime.endswith(".py"):
            return f"{backend} (python-based stand-in, {self.name})"
        source = self.backend_source(backend)
        return f"{backend} ({runtime or f'libtriton_{backend}.so'}{f' from {source}' if source else ''})"

    def backend_source(self, backend: str) -> str:
        """The directory a backend library was served from, where the suite chose it (--backend-directory)."""
        from tritonsuite.deploy.backends import native_backends

        directory = getattr(self, "backends_from", None)
        return str(directory) if backend in native_backends(directory) else ""

    def describe(self) -> str:
        return f"{self.name} server at {self.http_url}"

    def refuses(self, backend, config) -> str | None:
        """Why this server cannot serve a deployment of ``backend`` (:class:`~tritonsuite.deploy.backends.Backend`) with
        ``config``, known before loading it, or None. A stock server decides at load time."""
        return None

    def tensorrt_version(self) -> str | None:
        """The TensorRT version the server's tensorrt backend runs, where it can be known (the NGC release of its
        Triton version, or TRITONSUITE_SERVER_TENSORRT); None when it cannot."""
        from tritonsuite.deploy.backends.tensorrt import server_tensorrt_version

        return server_tensorrt_version(self.version())

    def provenance(self) -> str:
        """Where the server came from, for the report's Server row: the launcher's name, and for a container the
        image and its digest."""
        return self.name

    def version(self) -> str:
        """The server's own version string (server metadata), or "unknown" when it cannot be read."""
        if not getattr(self, "_version", None):
            client = self.client(timeout=10)
            try:
                self._version = str(client.get_server_metadata().get("version", "unknown"))
            except Exception:
                return "unknown"
            finally:
                client.close()
        return self._version

    def died(self, context: str = "") -> ServerDied:
        """The error for a server found dead: with its log tail the first time, one line after that (the tail was
        already shown by the test that met the death)."""
        where = f" {context}" if context else ""
        if not getattr(self, "_death_reported", False):
            self._death_reported = True
            return ServerDied(f"{self.describe()} is not running: it died{where}\n{self.log_tail()}")
        return ServerDied(f"{self.describe()} is not running: it died earlier in this run{where} (its log tail is "
                          f"in the first failure)")

    def gone(self, grace_s: float = 0.5) -> bool:
        """Whether the server is gone, asked after a request failed. A dying process closes its sockets before it
        can be reaped, so the error may arrive a moment before the process is seen dead: wait a little before
        answering no."""
        deadline = time.monotonic() + grace_s
        while self.is_alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def death_reported(self) -> bool:
        return bool(getattr(self, "_death_reported", False))

    def check_alive(self, context: str = "") -> None:
        if not self.is_alive():
            raise self.died(context)

    def client(self, timeout: float | None = None):
        import tritonclient.http as httpclient

        timeout = timeout or self.request_timeout_s
        return self._with_headers(httpclient.InferenceServerClient(
            self.http_url, connection_timeout=timeout, network_timeout=timeout, **self.access.tritonclient_http()))

    def restart(self) -> float:
        """Start a server that died again, over the same repository (a fresh process, ports and log; nothing of the
        dead one left: :meth:`stop` reaps it first). Returns the seconds it took. The models it served are not
        loaded: the caller loads those it still needs."""
        if not self.restartable:
            raise self.died("and it cannot be restarted from here")
        started = time.monotonic()
        self.stop()
        self._death_reported = False
        self.start()
        return time.monotonic() - started

    def load(self, deployment_dir: str | Path) -> str:
        """Load (or reload) a deployment by its directory; returns the model name once it is ready."""
        from tritonclient.utils import InferenceServerException

        name = Path(deployment_dir).name
        arguments = self._load_arguments(Path(deployment_dir))
        client = self.client(timeout=600.0)
        try:
            client.load_model(name, **arguments)
        except InferenceServerException as exc:
            if self.gone():
                raise self.died(f"while loading {name!r}") from None
            message = str(exc)
            if self._loaded_anyway(client, name, arguments, message):
                self._loaded(name, arguments)
                return name
            if "explicit" in message.lower() or "not allowed" in message.lower():
                if client.is_model_ready(name):
                    return name
                raise ModelControlUnavailable(
                    f"{self.describe()} does not allow loading models ({message.strip()}), and model {name!r} is "
                    f"not ready there: start that server with --model-control-mode=explicit, or load {name!r} on it "
                    f"yourself") from None
            message = message.split("\n\nAt:")[0].rstrip()  # a python backend's stack of its own frames: the log has it
            raise ServerError(f"loading {name!r} on {self.describe()} failed: {message}\n{self.log_tail()}") from None
        except Exception as exc:
            if self.gone():
                raise self.died(f"while loading {name!r}") from None
            raise ServerError(f"loading {name!r} on {self.describe()} failed: {exc}\n{self.log_tail()}") from None
        finally:
            client.close()
        self._loaded(name, arguments)
        return name

    def _load_arguments(self, deployment_dir: Path) -> dict:
        """What the load request carries beside the model's name (a launcher that uploads: its config and files)."""
        return {}

    def _loaded(self, name: str, arguments: dict) -> None:
        """Told after each load that succeeded, with what the request carried."""

    def _loaded_anyway(self, client, name: str, arguments: dict, message: str) -> bool:
        """Whether a load the server answered with ``message`` (an error) left the model served as asked all the
        same (a server's known false alarm); no by default."""
        return False

    def loaded_here(self) -> list[tuple[str, bool]]:
        """What a run must put back at its end (:class:`~tritonsuite.server.RemoteServer`): nothing on a server the
        run started, whose models go with it."""
        return []

    def unload(self, name: str) -> None:
        from tritonclient.utils import InferenceServerException

        client = self.client()
        try:
            client.unload_model(name)
        except InferenceServerException:
            pass  # a server without explicit model control keeps its models: nothing to undo
        finally:
            client.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


