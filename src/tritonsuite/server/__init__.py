"""Triton server launchers behind one interface (:class:`TritonServer`), chosen by name with ``--server``.

``embedded`` runs the real binary from the nvidia-pytriton wheel; ``container`` runs Triton in a Docker container
(an NGC image, or the wheel's binary in a local empty-root image); ``remote`` uses a stock Triton someone else runs.
Every launcher that starts a server builds its command line with :class:`ServerArguments`. A new launcher is one
module and one entry in :data:`LAUNCHERS`.
"""
from __future__ import annotations

from pathlib import Path

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.server.base import (LOOPBACK, ModelControlUnavailable, ServerArguments, ServerDied, ServerError,
                                     TritonServer)
from tritonsuite.server.container import ContainerServer
from tritonsuite.server.embedded import EmbeddedServer, pytriton_paths
from tritonsuite.server.shm import SHM_PREFIX, sweep_stale_shm
from tritonsuite.server.remote import RemoteServer

LAUNCHERS: dict[str, type[TritonServer]] = {"embedded": EmbeddedServer, "container": ContainerServer,
                                             "remote": RemoteServer}

__all__ = ["LAUNCHERS", "LOOPBACK", "SHM_PREFIX", "ContainerServer", "EmbeddedServer", "ModelControlUnavailable", "RemoteServer",
           "ServerArguments", "ServerDied", "ServerError", "TritonServer", "make_server", "pytriton_paths",
           "sweep_stale_shm"]


def make_server(kind: str, *, model_repository: str | Path, log_dir: str | Path, triton_url: str = "",
                access: Access = PLAIN, **options) -> TritonServer:
    """The launcher ``kind`` built from the common settings and its own ``options`` (container: image, gpus,
    run_id; remote: triton_grpc_url, triton_metrics_url), reached with ``access`` (TLS, headers)."""
    if kind not in LAUNCHERS:
        raise ValueError(f"unknown server {kind!r}; valid choices: {', '.join(LAUNCHERS)}")
    return LAUNCHERS[kind].create(model_repository=model_repository, log_dir=log_dir, triton_url=triton_url,
                                  access=access, **options)
