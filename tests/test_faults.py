"""Server death in the middle of a sweep: that test fails with the log tail, the broken deployment's later cases fail
at once, the server is restarted for the next deployment, rows stay, nothing is left behind."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, TINY_PROFILE, child_env, leftover_shm, raw_rows, run_leftovers, run_pytest

KILLER_PLUGIN = '''
import threading
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.name.endswith("onnx-fp32-batch2]"):  # kill the server while the ONNX deployment's second point runs
        server = item.funcargs["triton"]
        threading.Timer(1.0, server.process.kill).start()
    return (yield)
'''


def test_server_killed_mid_point_the_run_goes_on_with_the_next_deployment(tmp_path):
    (tmp_path / "killer.py").write_text(KILLER_PLUGIN)
    profile = TINY_PROFILE.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 2, 4, 3]") \
                          .replace("max_trials: 8", "max_trials: 50").replace("window_ms: 300", "window_ms: 500")
    # the remaining tests must not hang: a run that does is stopped by the timeout (TimeoutExpired fails the test)
    result = run_pytest(["--gpu", "tiny", "-m", "offline", "--formats", "onnx,ts-trace", "-p", "killer",
                         "-p", "no:warnings", "-rA"], tmp_path, profile=profile, timeout=400, pythonpath=str(tmp_path))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "PASSED tests/test_offline.py::test_offline[bert-onnx-fp32-batch1]" in out
    assert "died while measuring bert_tiny_onnx_fp32_offline at batch 2" in out
    assert "tritonserver log tail" in out  # attached to the failing test's report
    for batch in (4, 3):  # the broken deployment's later cases fail at once, naming why
        assert f"FAILED tests/test_offline.py::test_offline[bert-onnx-fp32-batch{batch}]" in out
    assert out.count("bert_tiny_onnx_fp32_offline was given up earlier in this run: the server died while it was "
                     "driven") >= 2, out
    for batch in (1, 2, 4, 3):  # the next deployment runs on a restarted server as if nothing had happened
        assert f"PASSED tests/test_offline.py::test_offline[bert-ts-trace-fp32-batch{batch}]" in out, out
    assert "tritonsuite: restarted: embedded server restarted in" in out and \
        "tritonsuite: given up: bert_tiny_onnx_fp32_offline: the server died" in out, out
    rows = raw_rows(tmp_path / "reports", "offline")
    # every attempted point has a row: the one measured before the crash, and FAILED rows with their reasons
    assert [(r["deployment"].split("_")[2], r["batch"], r["status"]) for r in rows] == [
        ("onnx", 1, "OK"), ("onnx", 2, "FAILED"), ("onnx", 4, "FAILED"), ("onnx", 3, "FAILED"),
        ("ts", 1, "OK"), ("ts", 2, "OK"), ("ts", 4, "OK"), ("ts", 3, "OK")]
    assert "died while measuring" in rows[1]["reasons"][0] and "GivenUp" in rows[2]["reasons"][0]
    report = (tmp_path / "reports" / "offline" / "bert.md").read_text()  # written from what was attempted
    assert "- batch 2, concurrency 1: FAILED: ServerDied:" in report
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "## Deployments given up, server restarts" in summary and "restarted in" in summary, summary
    manifest = json.loads((tmp_path / "reports" / "manifest.json").read_text())
    assert [f["kind"] for f in manifest["faults"]] == ["given_up", "restart"], manifest["faults"]
    logs = sorted((tmp_path / "reports" / "logs").glob("tritonserver-*.log"))
    assert len(logs) == 2, logs  # the dead server's log and the restarted one's
    assert not run_leftovers(tmp_path / "reports")


FAULT_PLUGIN = '''
import json
import os
import signal
import threading
import time

import pytest

KILL_AT = os.environ["TRITONSUITE_TEST_KILL_AT"]


def _kill(server, note):
    with open(os.environ["TRITONSUITE_TEST_RECORD"], "w") as f:
        json.dump({"pid": server.process.pid, "prefix": server.shm_prefix, "pytest": os.getpid(),
                   "killed_at": time.time()}, f)
    os.kill(server.process.pid, signal.SIGKILL)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    server = item.funcargs.get("triton")
    if server is not None and KILL_AT in ("pytest", "stub") and item.name.endswith("concurrency2]"):
        with open(os.environ["TRITONSUITE_TEST_RECORD"], "w") as f:
            json.dump({"pid": server.process.pid, "prefix": server.shm_prefix, "pytest": os.getpid(),
                       "killed_at": time.time()}, f)
        if KILL_AT == "stub":  # a python-backend stub dies alone, 1 s into the point
            import psutil
            stubs = [p for p in psutil.Process(server.process.pid).children(recursive=True)
                     if "triton_python_backend_stub" in " ".join(p.cmdline())]
            threading.Timer(1.0, lambda: [p.kill() for p in stubs]).start()
    if server is not None and KILL_AT == "load" and item.name.endswith("concurrency1]"):
        real = server._load_arguments

        def load_arguments(directory):  # SIGKILL while the load request is in flight (stubs take ~1 s to start)
            threading.Timer(0.3, _kill, (server, "load")).start()
            return real(directory)
        server._load_arguments = load_arguments
    if server is not None and KILL_AT == "online" and item.name.endswith("concurrency2]"):
        threading.Timer(1.0, _kill, (server, "online")).start()
    if server is not None and KILL_AT == "accuracy" and "test_accuracy" in item.name:
        import tritonsuite.run.accuracycase as suite_module
        real_infer = suite_module.served_infer

        def served_infer(client, name, spec, **kwargs):  # SIGKILL after the first batch of the accuracy data
            infer, calls = real_infer(client, name, spec, **kwargs), []

            def once(inputs):
                calls.append(1)
                if len(calls) == 2:
                    _kill(server, "accuracy")
                return infer(inputs)
            return once
        suite_module.served_infer = served_infer
    return (yield)
'''


@pytest.mark.parametrize("kill_at,markers", [("load", "online"), ("online", "online"), ("accuracy", "accuracy")])
def test_sigkill_of_the_server_ends_the_run_within_seconds_and_leaves_nothing(tmp_path, kill_at, markers):
    """The OOM killer takes the server during a model load, an online point or an accuracy run: the run must end on
    its own soon after, fail, show the log tail once, keep what was measured, and leave no process or region."""
    from tritonsuite.load.client import CLIENT_SHM_PREFIX
    from tritonsuite.server.embedded import _group_alive

    (tmp_path / "faultplugin.py").write_text(FAULT_PLUGIN)
    record = tmp_path / "killed.json"
    os.environ["TRITONSUITE_TEST_KILL_AT"], os.environ["TRITONSUITE_TEST_RECORD"] = kill_at, str(record)
    try:
        profile = TINY_PROFILE.replace("concurrency: [1, 2]", "concurrency: [1, 2, 4]") \
                              .replace("max_trials: 8", "max_trials: 50")
        result = run_pytest(["--gpu", "tiny", "-m", markers, "--formats", "onnx", "-p", "faultplugin",
                             "-p", "no:warnings", "-rA"], tmp_path, profile=profile, timeout=240,
                            pythonpath=str(tmp_path))
    finally:
        del os.environ["TRITONSUITE_TEST_KILL_AT"], os.environ["TRITONSUITE_TEST_RECORD"]
    ended = time.time()
    out = result.stdout + result.stderr
    assert record.is_file(), out
    killed = json.loads(record.read_text())
    print(f"kill during {kill_at}: the run ended {ended - killed['killed_at']:.1f} s after the kill")
    assert ended - killed["killed_at"] < 60, f"the run took {ended - killed['killed_at']:.0f} s after the kill"
    assert result.returncode == 1, out
    failures = out.split("short test summary info")[0]  # (with CI set, pytest repeats messages there in full)
    assert failures.count("--- tritonserver log tail") == 1, out  # shown once, by the test that met the death
    if kill_at != "accuracy":  # the deployment's later cases fail at once, in one line (no restart for them alone)
        assert "was given up earlier in this run: the server died while it was driven" in out, out
        assert "tritonsuite: restarted" not in out, out
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert not _group_alive(killed["pid"]), "a stub of the killed server is still alive"
    assert not leftover_shm(killed["prefix"]) and not leftover_shm(f"{CLIENT_SHM_PREFIX}{killed['pytest']}x")
    if kill_at == "online":  # rows measured before the fault are kept and the report is written
        rows = raw_rows(tmp_path / "reports", "online")
        assert [(r["concurrency"], r["status"] == "FAILED") for r in rows] == [(1, False), (2, True), (4, True)]
        assert "| FAILED |" in (tmp_path / "reports" / "online" / "bert.md").read_text().replace("  ", "")


def _pytest_process(tmp_path, kill_at, args, profile):
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "tiny.yaml").write_text(profile)
    (tmp_path / "faultplugin.py").write_text(FAULT_PLUGIN)
    env = child_env(TRITONSUITE_TEST_KILL_AT=kill_at,
                    TRITONSUITE_TEST_RECORD=str(tmp_path / "killed.json"),
                    PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
               f"--profiles-dir={profiles}", f"--reports-dir={tmp_path / 'reports'}",
               f"--repository-dir={tmp_path / 'repos'}", "-p", "faultplugin", *args]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, stdin=subprocess.DEVNULL)


def _wait_gone(pid: int, prefix: str, pytest_pid: int, bound_s: float) -> float:
    """Seconds until the server's process group and the run's regions are gone (fails past ``bound_s``)."""
    from tritonsuite.load.client import CLIENT_SHM_PREFIX
    from tritonsuite.server.embedded import _group_alive

    start = time.monotonic()
    while time.monotonic() - start < bound_s:
        if not _group_alive(pid) and not leftover_shm(prefix) and \
                not leftover_shm(f"{CLIENT_SHM_PREFIX}{pytest_pid}x"):
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{bound_s:.0f} s after the fault: server group alive {_group_alive(pid)}, regions "
                         f"{leftover_shm(prefix) + leftover_shm(f'{CLIENT_SHM_PREFIX}{pytest_pid}x')}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_pytest_itself_killed_leaves_nothing_behind(tmp_path, sig):
    """SIGTERM (a CI runner cancelling the job) or SIGKILL (the OOM killer) of pytest mid-sweep: the server and its
    stubs go, the run's regions go, the rows measured so far stay; after SIGTERM the report is written too."""
    profile = TINY_PROFILE.replace("concurrency: [1, 2]", "concurrency: [1, 2, 4]")
    process = _pytest_process(tmp_path, "pytest", ["--gpu", "tiny", "-m", "online", "--formats", "onnx", "-q"],
                              profile)
    record = tmp_path / "killed.json"
    try:
        deadline = time.monotonic() + 180
        while not record.is_file() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert record.is_file(), process.communicate(timeout=30)[0]
        time.sleep(0.5)  # inside the second point (its deployment loaded, its load generator running)
        process.send_signal(sig)
        out = process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
    killed = json.loads(record.read_text())
    # SIGTERM ends the run as Ctrl-C does (pytest's "interrupted", 2); SIGKILL leaves no say
    assert process.returncode == {signal.SIGTERM: 2, signal.SIGKILL: -signal.SIGKILL}[sig], (process.returncode, out)
    gone = _wait_gone(killed["pid"], killed["prefix"], killed["pytest"], bound_s=30)
    print(f"{signal.Signals(sig).name} of pytest: server group and regions gone {gone:.1f} s after pytest exited")
    rows = raw_rows(tmp_path / "reports", "online")
    assert [r["concurrency"] for r in rows if r["status"] != "FAILED"][:1] == [1]
    if sig == signal.SIGTERM:
        assert (tmp_path / "reports" / "online" / "bert.md").is_file(), out
        assert "exception was never retrieved" not in out, out  # the interrupted load generator ends quietly


def test_a_stub_killed_alone_fails_its_point_and_the_run_ends(tmp_path):
    profile = TINY_PROFILE.replace("concurrency: [1, 2]", "concurrency: [1, 2, 4]") \
                          .replace("max_trials: 8", "max_trials: 50")
    process = _pytest_process(tmp_path, "stub", ["--gpu", "tiny", "-m", "online", "--formats", "onnx", "-rA",
                                                 "-p", "no:warnings"], profile)
    try:
        out = process.communicate(timeout=180)[0]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, out
    assert "PASSED tests/test_online.py::test_online[bert-onnx-fp32-concurrency1]" in out
    assert "FAILED tests/test_online.py::test_online[bert-onnx-fp32-concurrency2]" in out, out
    killed = json.loads((tmp_path / "killed.json").read_text())
    _wait_gone(killed["pid"], killed["prefix"], killed["pytest"], bound_s=30)
    print(f"stub killed: the run ended {time.time() - killed['killed_at']:.1f} s after the point began")


RESTART_TERM_PLUGIN = '''
import json
import os
import signal
import threading

import pytest

from tritonsuite.server.embedded import EmbeddedServer

real_await_start = EmbeddedServer._await_start
launches = []


def await_start(self, what, ended, poll_s=0.1):
    launches.append(self.process.pid)
    if len(launches) == 2:  # the restart after the death: SIGTERM (a CI job cancelled) while the new server starts
        with open(os.environ["TRITONSUITE_TEST_RECORD"], "w") as f:
            json.dump({"pid": self.process.pid, "prefix": self.shm_prefix, "pytest": os.getpid(),
                       "backends": str(self._backend_dir)}, f)
        os.kill(os.getpid(), signal.SIGTERM)
    return real_await_start(self, what, ended, poll_s)


EmbeddedServer._await_start = await_start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.name.endswith("onnx-fp32-batch2]"):
        threading.Timer(1.0, item.funcargs["triton"].process.kill).start()
    return (yield)
'''


def test_sigterm_in_the_middle_of_a_restart_leaves_nothing(tmp_path):
    """The server dies under one deployment; while it is being restarted for the next, the run is sent SIGTERM: the
    run ends, and the new server's process group, its regions and its backend directory are gone."""
    from pathlib import Path

    from tritonsuite.server.embedded import _group_alive

    (tmp_path / "restartterm.py").write_text(RESTART_TERM_PLUGIN)
    record = tmp_path / "restart.json"
    os.environ["TRITONSUITE_TEST_RECORD"] = str(record)
    try:
        profile = TINY_PROFILE.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 2]").replace("max_trials: 8",
                                                                                          "max_trials: 50")
        result = run_pytest(["--gpu", "tiny", "-m", "offline", "--formats", "onnx,ts-trace", "-p", "restartterm",
                             "-p", "no:warnings", "-rA"], tmp_path, profile=profile, timeout=300,
                            pythonpath=str(tmp_path))
    finally:
        del os.environ["TRITONSUITE_TEST_RECORD"]
    out = result.stdout + result.stderr
    assert record.is_file(), out
    restarted = json.loads(record.read_text())
    assert result.returncode == 2, out  # interrupted
    assert "PASSED tests/test_offline.py::test_offline[bert-ts-trace-fp32-batch1]" not in out
    gone = _wait_gone(restarted["pid"], restarted["prefix"], restarted["pytest"], bound_s=30)
    print(f"SIGTERM during the restart: the new server's group and regions gone {gone:.1f} s after pytest exited")
    assert not Path(restarted["backends"]).exists()
    assert not _group_alive(restarted["pid"])
