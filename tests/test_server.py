"""The launchers against the real tritonserver: start, stop, clean-up, faults, and remote model control."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import leftover_shm
from tests.unit.test_repository import STOCK_FIELDS
from tritonsuite.server import (SHM_PREFIX, EmbeddedServer, ModelControlUnavailable, RemoteServer, ServerDied,
                                ServerError, make_server)
from tritonsuite.server.embedded import _group_alive


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_embedded_binds_loopback_loads_models_and_leaves_nothing_behind(identity_repo, tmp_path):
    server = EmbeddedServer(identity_repo, tmp_path / "logs")
    with server:
        pid, prefix = server.process.pid, server.shm_prefix
        assert server.http_url.startswith("127.0.0.1:")
        assert server.load(identity_repo / "identity") == "identity"
        assert leftover_shm(prefix), "the python backend's regions exist while the model is loaded"
        log = server.log_path.read_text()
        for service in ("GRPCInferenceService", "HTTPService", "Metrics Service"):
            line = next(l for l in log.splitlines() if f"Started {service} at" in l)
            assert "127.0.0.1:" in line, line
        assert "MODE_EXPLICIT" in log
        ports = dict(server.ports)
    assert not _group_alive(pid)
    assert not leftover_shm(prefix)
    assert not any(_listening(p) for p in ports.values())
    assert not server.is_alive()


PRIVATE_HOST = os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("mount") is not None


@pytest.mark.skipif(not PRIVATE_HOST, reason="a host of its own (PID and mount namespaces) needs root and util-linux")
def test_what_servers_make_in_tmp_goes_when_no_running_server_can_own_it():
    """On a host of the scenario's own (tests/private_tmp.py): a server serving an uploaded python-backend model has
    Triton's two /tmp directories; a stopped server's stay while an older one serves (either could have made them),
    and go with the last; so do a killed server's once it is stopped, and a killed run's, by its janitor."""
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable,
                           str(Path(__file__).parent / "private_tmp.py")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    one, two = ["folder", "python_env_"], ["folder", "folder", "python_env_", "python_env_"]
    assert seen == {"one server serving": one, "two servers serving": two,
                    "the newer stopped, the older serving": two, "both stopped": [],
                    "a server killed": one, "the killed server stopped": [],
                    "a run serving": one, "the run killed": []}


def test_a_crashed_server_is_detected_and_cleaned_up(identity_repo, tmp_path):
    server = EmbeddedServer(identity_repo, tmp_path / "logs")
    server.start()
    try:
        server.load(identity_repo / "identity")
        pid, prefix = server.process.pid, server.shm_prefix
        assert _group_alive(pid) and leftover_shm(prefix)
        os.kill(pid, signal.SIGKILL)  # the server crashes (the OOM killer); its stubs and shared memory remain
        # the watchdog kills the orphaned stubs (they hold the server's listening socket) and removes the regions
        # within seconds, without anyone calling stop()
        deadline = time.monotonic() + 10
        while (_group_alive(pid) or leftover_shm(prefix)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(pid), "python-backend stubs outlived the crashed server"
        assert not leftover_shm(prefix)
        assert not server.is_alive()
        with pytest.raises(ServerDied, match="is not running: it died while checking\n--- tritonserver log tail"):
            server.check_alive("while checking")
        with pytest.raises(ServerDied) as second:  # the tail is shown once; later failures are one line
            server.check_alive()
        assert "died earlier in this run" in str(second.value) and "\n" not in str(second.value)
    finally:
        server.stop()


def test_stale_regions_of_dead_owners_are_swept_at_start(identity_repo, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"/dev/shm/{SHM_PREFIX}{dead.pid}x1_leftover"
    open(stale, "wb").close()
    with EmbeddedServer(identity_repo, tmp_path / "logs"):
        assert not os.path.exists(stale)


def test_a_taken_port_is_replaced(identity_repo, tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    server = EmbeddedServer(identity_repo, tmp_path / "logs")
    real_choose, calls = server.choose_ports, []

    def choose():
        ports = real_choose()
        if not calls:
            ports["http"] = port  # first attempt collides with a port someone else holds
        calls.append(ports)
        return ports

    monkeypatch.setattr(server, "choose_ports", choose)
    try:
        with server:
            assert len(calls) == 2 and server.ports["http"] != port
            assert server.load(identity_repo / "identity") == "identity"
    finally:
        taken.close()


def test_start_failure_reports_the_log_tail(tmp_path):
    server = EmbeddedServer(tmp_path / "repo", tmp_path / "logs", extra_args=("--load-model=missing",),
                            startup_timeout=60)
    with pytest.raises(ServerError, match=r"(?s)tritonserver exited with code \d+ during start-up.*log tail.*missing"):
        server.start()
    assert server.process is None


def test_remote_server_loads_by_upload_when_explicit(identity_repo, tmp_path):
    with EmbeddedServer(tmp_path / "other-repo", tmp_path / "logs") as someone_elses:
        remote = make_server("remote", model_repository="unused", log_dir="unused", triton_url=someone_elses.http_url)
        remote.start()
        assert remote.is_alive() and remote.local
        # the remote server has an empty repository of its own: config and files travel with the load request,
        # and they are a stock deployment (nothing of tritonsuite): Triton's config fields and the model file
        upload = remote._load_arguments(identity_repo / "identity")
        config = json.loads(upload["config"])
        assert set(config) <= STOCK_FIELDS and config["platform"] == "onnxruntime_onnx"
        assert set(upload["files"]) == {"file:1/model.onnx"}
        assert remote.load(identity_repo / "identity") == "identity"
        client = remote.client()
        assert client.is_model_ready("identity")
        remote.unload("identity")
        assert not client.is_model_ready("identity")
        client.close()
        remote.stop()
        assert someone_elses.is_alive(), "stopping a remote server's session leaves the server running"


def test_remote_server_without_model_control_says_so(identity_repo, tmp_path):
    with EmbeddedServer(tmp_path / "empty-repo", tmp_path / "logs", model_control_mode="none") as locked:
        remote = RemoteServer(locked.http_url)
        remote.start()
        with pytest.raises(ModelControlUnavailable, match="does not allow loading models .* not ready there: start "
                                                          "that server with --model-control-mode=explicit"):
            remote.load(identity_repo / "identity")


def test_remote_unreachable_and_bad_urls(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(ServerError, match=f"remote Triton at 127.0.0.1:{closed_port} is not reachable"):
        RemoteServer(f"127.0.0.1:{closed_port}", timeout=2).start()
    with pytest.raises(ServerError, match="is not an HTTP host:port"):
        RemoteServer("grpc://127.0.0.1")
    with pytest.raises(ValueError, match="unknown server 'docker'; valid choices: embedded, container, remote"):
        make_server("docker", model_repository=tmp_path, log_dir=tmp_path)
