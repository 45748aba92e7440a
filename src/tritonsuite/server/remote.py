"""The remote launcher: a stock Triton someone else runs, reached at ``--triton-url host:port`` (HTTP), its gRPC
endpoint at ``--triton-grpc-url`` and its metrics at ``--triton-metrics-url`` where they are given."""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.server.base import ServerError, TritonServer

#: What Triton 2.51 answers when an ensemble is loaded whose composing models are in none of its repositories
FAILED_POLL = "failed to poll from model repository"
#: The file an empty version directory (an ensemble's) travels as: the load request carries files, not directories
EMPTY_VERSION_FILE = ".keep"


def host_port(option: str, value: str, what: str, schemes: tuple[str, ...], example: str,
              paths: tuple[str, ...] = ("", "/")) -> str:
    """``host:port`` from an option's value (a URL of one of ``schemes`` too); one line naming the option, the
    value and an example when it is not one."""
    parts = urlsplit(value if "//" in value else f"//{value}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in schemes or not parts.hostname or not port or parts.path not in paths:
        raise ServerError(f"{option} {value!r} is not {what} host:port (e.g. {example})")
    return f"{parts.hostname}:{port}"


def remote_problem(url: str, grpc_url: str = "", metrics_url: str = "", timeout_s: float = 5.0,
                   access: Access = PLAIN) -> str:
    """Why a remote server cannot be used, in one line naming the value ("" when it can): ``url`` must answer as a
    live Triton (each request bounded by ``timeout_s``, with ``access``'s TLS and headers: a certificate refused,
    a proxy's 401/403/502/504 or a restricted API each said as such), the gRPC and metrics addresses, where given,
    be host:port."""
    import urllib.error

    from tritonsuite.server.reach import get, grpc_problem, status_problem, tls_problem

    if not url:
        return "--server remote needs --triton-url host:port"
    try:
        server = RemoteServer(url, grpc_url=grpc_url, metrics_url=metrics_url, access=access)
    except ServerError as exc:
        return str(exc)
    replies = {}
    for path in ("/v2", "/v2/health/live"):
        try:
            replies[path] = get(server.http_url, "GET", path, server.access, timeout_s)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            tls = tls_problem(exc, server.access, f"--triton-url {url}")
            return tls or f"--triton-url {url}: not reachable within {timeout_s:g} s ({getattr(exc, 'reason', exc)})"
        status, body = replies[path]
        if status != 200 and (problem := status_problem(status, body, server.access, path)):
            return f"--triton-url {url}: {problem}"
    (status, body), (live, _) = replies["/v2"], replies["/v2/health/live"]
    try:
        metadata = json.loads(body or b"{}") if status == 200 else None
    except ValueError:
        metadata = None
    if not isinstance(metadata, dict) or metadata.get("name") != "triton" and "version" not in metadata:
        return f"--triton-url {url}: answers HTTP but is not a Triton server (no server metadata at /v2)"
    if live != 200:
        return f"--triton-url {url}: Triton answers but is not live"
    return grpc_problem(server.grpc_url, server.access, timeout_s) if grpc_url else ""


class RemoteServer(TritonServer):
    """A Triton server run by someone else, reached at ``--triton-url host:port`` (HTTP).

    Deployments are uploaded with the load request (config and files travel in the request), so the remote
    server does not need to see this host's model repository. They are stock deployments (platform, tensors,
    instance group, batching, the backend's own parameters and the model file): the server needs nothing of
    tritonsuite, only the stock backends (onnxruntime, pytorch) every NGC Triton image ships.

    An ensemble's composing models (nested ensembles' included) are uploaded before it, each with its own config
    and files from beside it in the same repository, leaves first: Triton would poll them from its own repository,
    which need not hold them. The gRPC endpoint (``--protocol grpc``, decoupled models' streams) and the metrics
    endpoint are the operator's ports: known only where they are given.
    """

    name = "remote"
    restartable = False  # not ours: a death ends the run's use of it

    @classmethod
    def create(cls, *, triton_url: str = "", triton_grpc_url: str = "", triton_metrics_url: str = "",
               access: Access = PLAIN, **_options) -> "RemoteServer":
        return cls(triton_url, grpc_url=triton_grpc_url, metrics_url=triton_metrics_url, access=access)

    def __init__(self, url: str, timeout: float = 10.0, grpc_url: str = "", metrics_url: str = "",
                 access: Access = PLAIN):
        if not url:
            raise ServerError("--server remote needs --triton-url host:port")
        self.http_url = host_port("--triton-url", url, "an HTTP", ("http", "https", ""), "127.0.0.1:8000")
        # https://: a TLS-terminating proxy in front of the HTTP endpoint (Triton's own has no TLS)
        self.access = replace(access, https=True) if url.startswith("https://") else access
        self._grpc_url = host_port("--triton-grpc-url", grpc_url, "a gRPC", ("grpc", ""),
                                   "127.0.0.1:8001") if grpc_url else ""
        self._metrics_url = host_port("--triton-metrics-url", metrics_url, "a metrics", ("http", ""),
                                      "127.0.0.1:8002", ("", "/", "/metrics")) if metrics_url else ""
        self.timeout = timeout
        self._uploaded: dict[str, str] = {}  # model name -> sha256 of what this session uploaded for it
        self._found: dict[str, bool] = {}  # model name -> ready there before this session first loaded it
        #: at stop, put back what this session loaded (:meth:`put_back`); off where another session may still
        #: use the same models (an xdist worker: the controller puts back what all of them loaded)
        self.put_back_on_stop = True
        self.put_back_lines: list[str] = []

    @property
    def grpc_url(self) -> str:
        if not self._grpc_url:
            raise ValueError(f"{self.describe()}: its gRPC address is not known; give it with --triton-grpc-url "
                             f"host:port (else valid choices here: --protocol http, and no decoupled model)")
        return self._grpc_url

    @property
    def metrics_url(self) -> str:
        return f"http://{self._metrics_url}/metrics" if self._metrics_url else ""

    @property
    def local(self) -> bool:
        return self.http_url.split(":")[0] in ("127.0.0.1", "localhost", "::1")

    def start(self) -> None:
        client = self.client(timeout=self.timeout)
        try:
            live = client.is_server_live()
        except Exception as exc:
            raise ServerError(f"remote Triton at {self.http_url} is not reachable: {exc}") from None
        finally:
            client.close()
        if not live:
            raise ServerError(f"remote Triton at {self.http_url} answers but is not live")

    def stop(self) -> None:
        """Not ours to stop: the models this session loaded are put back (:meth:`put_back`)."""
        if self.put_back_on_stop and self._found:
            self.put_back_lines = self.put_back(self.loaded_here())
            self._found.clear()

    def loaded_here(self) -> list[tuple[str, bool]]:
        """(model, whether it was ready there before) for each model this session loaded, first loaded first."""
        return list(self._found.items())

    def put_back(self, loaded: list[tuple[str, bool]], deadline_s: float = 60.0) -> list[str]:
        """Leave the server serving what it served before the run: each model of ``loaded`` (:meth:`loaded_here`)
        that was not ready before is unloaded, the last loaded first (an ensemble before its steps); each that was
        ready is loaded again from the server's own repository (a plain load request: its files, not the upload).
        One line per model that could not be, then one saying what was done; no request is sent after ``deadline_s``
        and each is bounded by it (a team's model may take seconds to load)."""
        import time

        deadline = time.monotonic() + deadline_s
        if not self.is_alive():
            return [f"{self.describe()}: not live at the end of the run: the {len(loaded)} models the run loaded there "
                    f"were not put back ({', '.join(n for n, _ in loaded)})"]
        lines, unloaded, reloaded = [], [], []
        client = self.client(timeout=deadline_s)
        try:
            try:  # what the server's own repositories hold (an uploaded model is in none)
                indexed = {m.get("name") for m in client.get_model_repository_index()}
            except Exception:
                indexed = None  # not known (an API restricted): a load from the repository is tried
            for name, ready_before in reversed(loaded):
                if time.monotonic() > deadline:
                    lines.append(f"{self.describe()}: {name}: not put back within {deadline_s:g} s")
                    continue
                if ready_before and indexed is not None and name not in indexed:
                    lines.append(f"{self.describe()}: {name} was served before the run from none of its "
                                 f"repositories (uploaded earlier): it serves what the run uploaded")
                    continue
                try:
                    if ready_before:
                        client.load_model(name)
                        reloaded.append(name)
                    else:
                        client.unload_model(name)
                        unloaded.append(name)
                except Exception as exc:
                    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    lines.append(f"{self.describe()}: {name} was served before the run and could not be loaded from "
                                 f"its own repository ({message}): it serves what the run uploaded" if ready_before
                                 else f"{self.describe()}: {name} could not be unloaded ({message})")
        finally:
            client.close()
        return lines + [f"{self.describe()}: the run's models put back: {len(unloaded)} unloaded"
                        + (f", {len(reloaded)} it served before reloaded from its own repository" if reloaded else "")
                        + (f", {len(lines)} not (above)" if lines else "")]

    def is_alive(self) -> bool:
        client = self.client(timeout=self.timeout)
        try:
            return bool(client.is_server_live())
        except Exception:
            return False
        finally:
            client.close()

    def load(self, deployment_dir: str | Path) -> str:
        """Upload and load a deployment; an ensemble's composing models first (:meth:`_load_composing`)."""
        deployment_dir = Path(deployment_dir)
        self._load_composing(deployment_dir, {deployment_dir.name})
        return self._upload(deployment_dir)

    def _upload(self, deployment_dir: Path) -> str:
        """Load one deployment, noting first whether the server served a model of that name already."""
        name = deployment_dir.name
        ready_before = self._found[name] if name in self._found else self._ready(name)
        loaded = super().load(deployment_dir)
        if name in self._uploaded:  # loaded by this session (not a ready model of a server without explicit control)
            self._found.setdefault(name, ready_before)
        return loaded

    def _load_composing(self, ensemble_dir: Path, visiting: set[str]) -> None:
        """Upload every composing model of an ensemble that lies beside it (its own composing models first), unless
        this session already uploaded the same config and files and the model is still ready. One that is not
        beside it is left to the server's own repository (Triton polls it there when the ensemble loads)."""
        for step in _step_models(ensemble_dir):
            source = ensemble_dir.parent / step
            if step in visiting or not source.is_dir():
                continue  # a cycle (Triton refuses it when the ensemble loads), or the server's own model
            self._load_composing(source, visiting | {step})
            if self._uploaded.get(step) == _digest(self._load_arguments(source)) and self._ready(step):
                continue
            self._upload(source)

    def _ready(self, name: str) -> bool:
        client = self.client(timeout=self.timeout)
        try:
            return bool(client.is_model_ready(name))
        except Exception:
            return False
        finally:
            client.close()

    def _loaded(self, name: str, arguments: dict) -> None:
        self._uploaded[name] = _digest(arguments)

    def _loaded_anyway(self, client, name: str, arguments: dict, message: str) -> bool:
        """Triton 2.51 answers an uploaded ensemble's load with "failed to poll from model repository": loading an
        ensemble polls its composing models by name in the server's own repositories (ModelRepositoryManager::
        PollModels), and an uploaded one is in none. The ensemble loads all the same, on the composing models
        already served. Accepted only for an ensemble that is ready afterwards with the steps just uploaded."""
        uploaded = json.loads(arguments.get("config") or "{}").get("ensemble_scheduling", {}).get("step", [])
        if FAILED_POLL not in message or not uploaded:
            return False
        try:
            served = client.get_model_config(name).get("ensemble_scheduling", {}).get("step", [])
            ready = client.is_model_ready(name)
        except Exception:
            return False
        return ready and len(served) == len(uploaded) and all(
            _plain({k: s.get(k) for k in u}) == _plain(u) for u, s in zip(uploaded, served))

    def _load_arguments(self, deployment_dir: Path) -> dict:
        from tritonsuite.deploy.repository import config_json, read_config

        files = {f"file:{p.relative_to(deployment_dir)}": p.read_bytes()
                 for p in sorted(deployment_dir.rglob("*")) if p.is_file() and p.name != "config.pbtxt"}
        files.update({f"file:{p.name}/{EMPTY_VERSION_FILE}": b"" for p in sorted(deployment_dir.iterdir())
                      if p.is_dir() and p.name.isdigit() and not any(q.is_file() for q in p.rglob("*"))})
        if not (deployment_dir / "config.pbtxt").is_file():  # shipped without one: the server auto-completes it
            # (Triton takes uploaded files only with a config: the platform alone, as it would infer from the name)
            return {"config": json.dumps({"name": deployment_dir.name, "platform": "onnxruntime_onnx"}),
                    "files": files}
        return {"config": json.dumps(config_json(read_config(deployment_dir))), "files": files}


def _step_models(deployment_dir: Path) -> list[str]:
    """The models an ensemble's steps name, each once, in step order (none for any other deployment)."""
    from tritonsuite.deploy.repository import config_of

    if not (deployment_dir / "config.pbtxt").is_file():
        return []
    steps = config_of(deployment_dir).get("ensemble_scheduling", {}).get("step", [])
    return list(dict.fromkeys(s["model_name"] for s in steps if s.get("model_name")))


def _digest(arguments: dict) -> str:
    h = hashlib.sha256(arguments.get("config", "").encode())
    for key, content in sorted(arguments.get("files", {}).items()):
        h.update(key.encode() + b"\0" + hashlib.sha256(content).digest())
    return h.hexdigest()


def _plain(value):
    """JSON of a configuration with every scalar as text (protobuf's JSON writes int64 as a string, Triton's as a
    number) and empty values left out (each side leaves different defaults out)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value).lower() if isinstance(value, bool) else str(value)
