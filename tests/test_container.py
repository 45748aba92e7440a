"""The container launcher against a real Docker engine and a real tritonserver in a container.

Where no engine answers (or the docker SDK is missing), the engine-backed tests skip with that reason; the
command-line checks run everywhere. The image is $TRITONSUITE_IMAGE when set, else ``tritonsuite-local:latest``
(built here if missing: an empty root that runs the wheel's tritonserver with read-only host mounts; see the
README's "Triton in a container"). CI starts an engine with ``.ci/docker-up``.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tests.helpers import ROOT, TINY_PROFILE, child_env, leftover_shm, raw_rows, run_leftovers, run_pytest
from tritonsuite.models import default_registry
from tritonsuite.server import ContainerServer, ServerDied, ServerError
from tritonsuite.server.container import IMAGE_ENV
from tritonsuite.server.docker import LOCAL_IMAGE, EngineUnavailable, build_local_image, docker_client


def _engine():
    try:
        return docker_client(timeout=10), ""
    except EngineUnavailable as exc:
        return None, str(exc)


@pytest.fixture(scope="module")
def engine():
    client, reason = _engine()
    if client is None:
        pytest.skip(reason)  # no SDK, or no engine answering: the one-line error says which
    yield client
    client.close()


@pytest.fixture(scope="module")
def image(engine):
    name = os.environ.get(IMAGE_ENV) or LOCAL_IMAGE
    try:
        engine.images.get(name)
    except Exception:
        if name != LOCAL_IMAGE:
            pytest.skip(f"{IMAGE_ENV}={name} is not on the engine")
        build_local_image(engine, LOCAL_IMAGE)
    return name


def _containers(engine, **labels) -> list:
    filters = {"label": [f"tritonsuite.{k}={v}" for k, v in labels.items()]}
    return engine.containers.list(all=True, filters=filters, ignore_removed=True)  # one may go meanwhile


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(condition, bound_s: float, what: str) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {bound_s:.0f} s")
        time.sleep(0.2)


def test_container_serves_through_shared_memory_and_leaves_nothing(engine, image, identity_repo, tmp_path):
    from tritonsuite.load.client import SharedMemoryRegions, infer_tensors

    server = ContainerServer(identity_repo, tmp_path / "logs", image=image, run_id="test-serves")
    with server:
        container_id, prefix, ports = server.container.id, server.shm_prefix, dict(server.ports)
        labels = engine.containers.get(container_id).labels
        assert labels["tritonsuite.run"] == "test-serves" and labels["tritonsuite.pid"] == str(os.getpid())
        assert server.http_url.startswith("127.0.0.1:")
        assert server.version() != "unknown"
        assert server.provenance().startswith(f"container {image}@sha256:")
        attrs = engine.containers.get(container_id).attrs
        assert attrs["HostConfig"]["IpcMode"] == "host"
        mounts = {m["Destination"]: m for m in attrs["Mounts"]}
        assert mounts[str(identity_repo)]["RW"] is False, "the model repository is mounted read-only"
        stack = {u["Name"]: u for u in attrs["HostConfig"]["Ulimits"]}["stack"]
        assert stack["Soft"] == 64 * 1024 * 1024
        assert server.load(identity_repo / "identity") == "identity"
        assert server.process_ids(), "the container's processes are visible on this host"
        # the offline scenario's path: inputs and outputs in the host's /dev/shm, read by the server in the container
        spec = default_registry().get("identity", "tiny")
        inputs = {t.name: np.arange(2 * t.shape[0], dtype=t.dtype).reshape(2, *t.shape) for t in spec.inputs}
        with SharedMemoryRegions(server, inputs, spec.outputs, batch_size=2) as shm:
            tensors, requested = infer_tensors(inputs, [t.name for t in spec.outputs], shm)
            client = server.client()
            try:
                result = client.infer("identity", tensors, outputs=requested)
            finally:
                client.close()
            out = spec.outputs[0]
            got = shm.read_output(out.name, tuple(result.get_output(out.name)["shape"]), out.dtype).copy()
        np.testing.assert_array_equal(got, next(iter(inputs.values())))  # (a copy: the region is unmapped now)
        log = server.log_path.read_text()
        for service in ("GRPCInferenceService", "HTTPService", "Metrics Service"):
            line = next(line for line in log.splitlines() if f"Started {service} at" in line)
            assert "127.0.0.1:" in line or server.network == "bridge", line
        assert "MODE_EXPLICIT" in log
    assert not _containers(engine, run="test-serves"), "the container outlived stop()"
    assert not leftover_shm(prefix)
    assert not any(_listening(p) for p in ports.values())
    assert not server.is_alive()


def test_refused_settings_are_noted(engine, image, identity_repo, tmp_path):
    """memlock=-1 is what peers ask for; a kernel that refuses it (rlimit EPERM, as here) gets the container without
    it, and the launcher says so instead of failing."""
    server = ContainerServer(identity_repo, tmp_path / "logs", image=image)
    with server:
        ulimits = {u["Name"] for u in server.container.attrs["HostConfig"]["Ulimits"]}
        if "memlock" in ulimits:
            assert not server.notes
        else:
            assert any("memlock" in note for note in server.notes), server.notes


def test_an_exited_container_is_noticed_with_its_log_tail(engine, image, identity_repo, tmp_path):
    server = ContainerServer(identity_repo, tmp_path / "logs", image=image, run_id="test-exited")
    server.start()
    try:
        server.container.kill()  # the OOM killer takes tritonserver (PID 1 of the container)
        _wait(lambda: not server.is_alive(), 30, "the dead container noticed")
        with pytest.raises(ServerDied, match="is not running: it died while checking\n--- tritonserver log tail"):
            server.check_alive("while checking")
    finally:
        server.stop()
    assert not _containers(engine, run="test-exited")


def test_a_failed_start_up_reports_the_log_tail_and_removes_the_container(engine, image, identity_repo, tmp_path):
    server = ContainerServer(identity_repo, tmp_path / "logs", image=image, run_id="test-badstart",
                             model_control_mode="bogus")
    with pytest.raises(ServerError, match=r"exited with code \d+ during start-up[^\n]*\n--- tritonserver log tail"):
        server.start()
    server.stop()
    assert not _containers(engine, run="test-badstart")


def test_an_image_not_on_the_engine_is_one_line(engine, identity_repo, tmp_path):
    server = ContainerServer(identity_repo, tmp_path / "logs", image="tritonsuite-no-such-image:0")
    with pytest.raises(ServerError) as error:
        server.start()
    assert "not on the Docker engine" in str(error.value) and "\n" not in str(error.value)


OWNER_SCRIPT = textwrap.dedent("""
    import sys, time
    from tritonsuite.server.container import ContainerServer
    server = ContainerServer(sys.argv[1], sys.argv[2], image=sys.argv[3], run_id=sys.argv[4],
                             janitor=sys.argv[5] == "janitor")
    server.start()
    print(server.container.id, server.shm_prefix, flush=True)
    time.sleep(600)
""")


def _owner(identity_repo, tmp_path, image, run_id, janitor):
    return subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(identity_repo), str(tmp_path / "logs"), image,
                             run_id, "janitor" if janitor else "none"], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def test_a_container_whose_owner_was_killed_is_reaped_at_the_next_start(engine, image, identity_repo, tmp_path):
    owner = _owner(identity_repo, tmp_path, image, "test-orphan", janitor=False)  # no janitor: only reaping is left
    try:
        line = owner.stdout.readline()
        assert line, "the owner did not start its server"
        owner.kill()
        owner.wait(timeout=30)
    finally:
        if owner.poll() is None:
            owner.kill()
    assert _containers(engine, run="test-orphan"), "without a janitor the container is left behind"
    alive = engine.containers.create(image, command=["/bin/true"], labels={
        "tritonsuite.pid": str(os.getpid()), "tritonsuite.host": socket.gethostname(),
        "tritonsuite.run": "test-live-owner"})
    try:
        with ContainerServer(identity_repo, tmp_path / "logs", image=image):
            assert not _containers(engine, run="test-orphan"), "the dead run's container was not reaped"
            assert _containers(engine, run="test-live-owner"), "a live run's container was removed"
    finally:
        alive.remove(force=True)


def test_pytest_killed_mid_run_leaves_no_container(engine, image, tmp_path):
    """kill -9 of pytest during an offline sweep on --server container: the janitor removes the container and the
    run's regions."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "tiny.yaml").write_text(TINY_PROFILE.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 2, 4]"))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
               f"--profiles-dir={profiles}", f"--reports-dir={tmp_path / 'reports'}",
               f"--repository-dir={tmp_path / 'repos'}", "--gpu", "tiny", "-m", "offline", "--formats", "onnx",
               "--server", "container", "--image", image, "-q"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, env=child_env())
    try:
        def loaded() -> bool:
            logs = list((tmp_path / "reports" / "logs").glob("tritonserver-*-container.log"))
            return bool(logs) and "successfully loaded" in logs[0].read_text(errors="replace")
        _wait(lambda: loaded() or process.poll() is not None, 300, "a model loaded in the container")
        assert process.poll() is None, "the run ended before it could be killed"
        assert _containers(engine, pid=process.pid)
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    _wait(lambda: not _containers(engine, pid=process.pid), 60, "the killed run's container removed")
    _wait(lambda: not run_leftovers(tmp_path / "reports"), 30, "the killed run's regions removed")


def test_offline_and_accuracy_through_the_pytest_plugin(engine, image, tmp_path):
    """What a user runs: the offline and accuracy scenarios on --server container; the report names the image."""
    result = run_pytest(["--gpu", "tiny", "-m", "offline or accuracy", "--formats", "onnx", "--server",
                         "container", "--image", image, "-q", "-p", "no:warnings"], tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    rows = raw_rows(tmp_path / "reports", "offline")
    assert rows and all(r["status"] == "OK" for r in rows), rows
    manifest = json.loads((tmp_path / "reports" / "manifest.json").read_text())
    assert "(container " in manifest["server"] and "@sha256:" in manifest["server"], manifest["server"]
    assert "container" in (tmp_path / "reports" / "offline" / "bert.md").read_text()
    assert not run_leftovers(tmp_path / "reports")
    assert not _containers(engine, run=manifest["run_id"]), "the run's container outlived it"


def test_conformance_through_the_container_sees_a_version_added_on_the_host(engine, image, tmp_path):
    """The conformance checks on --server container, as a team's server runs them: the reload check's new version is
    added on the host's repository, which the container sees through its read-only mount. Every check passes or
    says why it does not apply; nothing outlives the run."""
    result = run_pytest(["--gpu", "tiny", "-m", "conformance", "--models", "bert", "--formats", "onnx", "--server",
                         "container", "--image", image, "-q", "-p", "no:warnings"], tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    rows = raw_rows(tmp_path / "reports", "conformance")
    verdicts = {r["check"]: r["verdict"] for r in rows}
    assert verdicts.get("reload") == "pass" and verdicts.get("identity") == "pass", verdicts
    assert not [r for r in rows if r["verdict"] == "fail"], [(r["check"], r["reasons"]) for r in rows]
    manifest = json.loads((tmp_path / "reports" / "manifest.json").read_text())
    assert not run_leftovers(tmp_path / "reports")
    assert not _containers(engine, run=manifest["run_id"]), "the run's container outlived it"


# --- everywhere, engine or not ------------------------------------------------------------------------------------

def test_no_engine_is_one_usage_line(tmp_path):
    result = _run_without_engine(tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--server container" in errors[0], result.stderr
    assert "no Docker engine answers" in errors[0] or "docker SDK" in errors[0], errors[0]


def _run_without_engine(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "tiny.yaml").write_text(TINY_PROFILE)
    env = child_env(DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
                           f"--profiles-dir={profiles}", f"--reports-dir={tmp_path / 'reports'}", "--gpu", "tiny",
                           "-m", "offline", "--server", "container"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args,expected", [
    (["--server", "container", "--gpus", "two"], "--gpus 'two': valid choices: all, none, or comma-separated"),
    (["--server", "embedded", "--image", "x"], "--image/--gpus apply to --server container"),
])
def test_bad_container_options_are_one_usage_line(tmp_path, args, expected):
    result = run_pytest(["--gpu", "tiny", "-m", "offline", *args], tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert expected in result.stderr, result.stderr


def test_without_the_docker_sdk_the_error_says_how_to_install_it():
    code = ("import sys; sys.modules['docker'] = None\n"
            "from tritonsuite.server.docker import docker_client, EngineUnavailable\n"
            "try:\n    docker_client()\nexcept EngineUnavailable as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "needs the docker SDK: pip install -e '.[container]'" in out, out


TERM_SCRIPT = OWNER_SCRIPT.replace("import sys, time", """import signal, sys, time
def _terminated(*_):  # as the pytest plugin does: SIGTERM ends the run like Ctrl-C
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, _terminated)""").replace("time.sleep(600)", """try:
    time.sleep(600)
finally:
    server.stop()""")


def test_sigterm_ends_like_ctrl_c_and_removes_the_container(engine, image, identity_repo, tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", TERM_SCRIPT, str(identity_repo), str(tmp_path / "logs"), image,
                              "test-sigterm", "none"], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert owner.stdout.readline(), "the owner did not start its server"
        assert _containers(engine, run="test-sigterm")
        owner.send_signal(signal.SIGTERM)
        owner.wait(timeout=60)
    finally:
        if owner.poll() is None:
            owner.kill()
    assert not _containers(engine, run="test-sigterm")
