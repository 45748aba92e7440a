"""The remote launcher: a stock Triton someone else runs, reached at ``--triton-url host:port`` (HTTP)."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

from tritonsuite.server.base import ServerError, TritonServer


class RemoteServer(TritonServer):
    """A Triton server run by someone else, reached at ``--triton-url host:port`` (HTTP).

    Deployments are uploaded with the load request (config and files travel in the request), so the remote
    server does not need to see this host's model repository. They are stock deployments (platform, tensors,
    instance group, batching, the backend's own parameters and the model file): the server needs nothing of
    tritonsuite, only the stock backends (onnxruntime, pytorch) every NGC Triton image ships.
    """

    name = "remote"

    @classmethod
    def create(cls, *, triton_url: str = "", **_options) -> "RemoteServer":
        return cls(triton_url)

    def __init__(self, url: str, timeout: float = 10.0):
        if not url:
            raise ServerError("--server remote needs --triton-url host:port")
        parts = urlsplit(url if "//" in url else f"http://{url}")
        if parts.scheme not in ("http", "") or not parts.hostname or not parts.port:
            raise ServerError(f"--triton-url {url!r} is not an HTTP host:port (e.g. 127.0.0.1:8000)")
        self.http_url = f"{parts.hostname}:{parts.port}"
        self.timeout = timeout

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
        pass  # not ours to stop

    def is_alive(self) -> bool:
        client = self.client(timeout=self.timeout)
        try:
            return bool(client.is_server_live())
        except Exception:
            return False
        finally:
            client.close()

    def _load_arguments(self, deployment_dir: Path) -> dict:
        from tritonsuite.deploy.repository import config_json, read_config

        files = {f"file:{p.relative_to(deployment_dir)}": p.read_bytes()
                 for p in sorted(deployment_dir.rglob("*")) if p.is_file() and p.name != "config.pbtxt"}
        if not (deployment_dir / "config.pbtxt").is_file():  # shipped without one: the server auto-completes it
            # (Triton takes uploaded files only with a config: the platform alone, as it would infer from the name)
            return {"config": json.dumps({"name": deployment_dir.name, "platform": "onnxruntime_onnx"}),
                    "files": files}
        return {"config": json.dumps(config_json(read_config(deployment_dir))), "files": files}


