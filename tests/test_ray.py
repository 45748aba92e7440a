"""The engine's workers as Ray actors (``--workers ray[:ADDRESS][@N]``, tritonsuite.load.sources.raycluster) against
the real embedded Triton and a local Ray cluster started by the test (``ray.init`` with the host's cores, Ray's token
authentication), both inside a network namespace of the test's own that has only its loopback: Ray 2.60 listens on
every interface of a host, so there it reaches nothing else. In one run there (:data:`SCENARIO`): two actors give
the row one process gives at the same load; an actor killed mid-point fails that point alone with its reason; a
client without the cluster's token is refused.

The model sleeps 4 ms per execution on two instances (tests/test_workers.py), so the server sets the pace."""
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import assert_same_point
from tests.netns import USABLE, WHY_NOT, Namespaces
from tritonsuite.core.settings import RayWorkers, parse_workers
from tritonsuite.load import sources

RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not RAY, reason="the distributed extra (pip install 'tritonsuite[distributed]')")
ROOT = Path(__file__).resolve().parents[1]

SCENARIO = textwrap.dedent('''
    import json, os, signal, subprocess, sys, threading, time
    from pathlib import Path
    import psutil, ray
    from tests.helpers import pairs_until_alike
    from tests.kinds import _write
    from tests.test_workers import CONFIG, FAST, SLEEPY, _pair, _traffic
    from tritonsuite.core.settings import MeasurementSettings, RayWorkers
    from tritonsuite.load import sources
    from tritonsuite.load.engine import LoadPoint, MeasurementError
    from tritonsuite.server import EmbeddedServer

    repo, out = Path(sys.argv[1]), Path(sys.argv[2])
    found = {}

    def actors(settle_s=0.0):
        deadline = time.monotonic() + settle_s  # a killed actor's process exits a moment after Ray says it is dead
        while settle_s and time.monotonic() < deadline and _actors():
            time.sleep(0.1)
        return _actors()

    def _actors():
        """This cluster's actors: descendants of this script (its raylet's workers). Another test's cluster in the
        same PID namespace (xdist's other worker, test_ray_hosts) is not ours to count or kill: CI once killed its
        actor here."""
        alive = []
        for p in psutil.Process().children(recursive=True):
            try:
                if any(a.startswith("ray::Worker") for a in p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.Error:
                pass
        return alive

    with EmbeddedServer(repo, repo.parent) as server:
        server.load(_write(repo / "sleepy", CONFIG, "model.py", SLEEPY))
        ray.init(num_cpus=len(os.sched_getaffinity(0)), include_dashboard=False, logging_level="warning")
        try:
            address = ray.get_runtime_context().gcs_address
            ours = {p.pid for p in psutil.Process().children(recursive=True)}
            found["listening"] = sorted({c.laddr.ip for c in psutil.net_connections("inet")
                                         if c.status == psutil.CONN_LISTEN and c.pid in ours})
            traffic = _traffic(server, LoadPoint(1, 4))
            two_actors = sources.get("suite", RayWorkers(address, 2))
            pairs = pairs_until_alike(lambda: _pair(sources.get("suite").measure(server, traffic, FAST),
                                                    two_actors.measure(server, traffic, FAST), "ray"))
            one, two, _ = pairs[0]
            found["one"], found["two"] = [one.status, one.reasons], [two.status, two.reasons, two.meta]
            found["two"][2] = {k: two.meta[k] for k in ("workers", "loadgen", "measured_requests", "requests_sent",
                                                        "server_success_delta")}
            found["samples"] = len(two.latencies_s)
            found["pairs"] = [list(compared) for _, _, compared in pairs]
            found["actors_after_point"] = len(actors(10.0))

            found["nice"] = os.getpriority(os.PRIO_PROCESS, 0)  # what the actors are set to: the parent's

            def served():
                stats = server.client().get_inference_statistics("sleepy")["model_stats"][0]
                return int(stats["inference_stats"]["success"]["count"])

            killed = []
            def kill_one():
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and len(actors()) < 2:
                    time.sleep(0.05)
                # mid-point: once the actors' load flows (they are past their start: a fixed 1.5 s after their
                # processes appeared was before it on a busy host, and the point "did not start" instead)
                begun = served()
                while time.monotonic() < deadline and served() < begun + 100:
                    time.sleep(0.05)
                time.sleep(0.5)
                victims = sorted(actors(), key=lambda p: p.create_time())
                if victims:
                    killed.append(victims[-1].pid)
                    os.kill(victims[-1].pid, signal.SIGKILL)
            never_settles = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=0.001,
                                                max_trials=100, warmup_ms=100, client_bound_percent=1000)
            killer = threading.Thread(target=kill_one)
            killer.start()
            try:
                two_actors.measure(server, traffic, never_settles)
                found["killed"] = [killed, "the point did not fail"]
            except MeasurementError as exc:
                found["killed"] = [killed, str(exc)]
            killer.join()
            found["actors_after_kill"] = len(actors(10.0))
            found["next_point"] = two_actors.measure(server, traffic, FAST).status

            env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
            env["HOME"] = str(repo.parent)  # no default token file either
            stranger = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address={address!r})"], env=env,
                                      capture_output=True, text=True, timeout=180)
            found["without_token"] = [stranger.returncode, stranger.stderr[-1500:]]
        finally:
            ray.shutdown()
    out.write_text(json.dumps(found, default=str))
''')


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """SCENARIO run once in a namespace with only its loopback; its findings, and that nothing is left after."""
    if not RAY:
        pytest.skip("the distributed extra (pip install 'tritonsuite[distributed]')")
    if not USABLE:
        pytest.skip(WHY_NOT)
    tmp = tmp_path_factory.mktemp("ray")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).strip(os.pathsep),
               RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))  # the cluster's own token
    with Namespaces(("alone",), linked=False) as hosts:
        interfaces = subprocess.run(["ip", "-n", hosts.ns("alone"), "-o", "link", "show"], capture_output=True,
                                    text=True).stdout
        run = subprocess.run(hosts.argv("alone", [sys.executable, "-c", SCENARIO, str(tmp / "repo"),
                                                  str(tmp / "found.json")]),
                             env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    found = json.loads((tmp / "found.json").read_text())
    found["interfaces"] = [line.split(":")[1].strip() for line in interfaces.splitlines()]
    found["namespaces_gone"] = hosts.gone()
    return found


def test_ray_workers_parse_from_the_option():
    assert parse_workers("ray") == RayWorkers() and str(parse_workers("ray")) == "ray"
    assert parse_workers("ray:10.1.2.3:6379@2") == RayWorkers("10.1.2.3:6379", 2)
    assert str(RayWorkers("10.1.2.3:6379", 2)) == "ray:10.1.2.3:6379@2"
    for bad in ("ray@0", "ray:", "rays", "ray@x"):
        with pytest.raises(ValueError, match=rf"--workers {bad!r}: valid choices: .*ray\[:ADDRESS\]\[@N\]"):
            parse_workers(bad)


@needs_ray
def test_the_cluster_reaches_nothing_but_its_namespace_s_loopback_and_wants_its_token(scenario):
    assert scenario["interfaces"] == ["lo"]  # its listeners on every interface: that is this loopback alone
    assert scenario["listening"] and set(scenario["listening"]) <= {"127.0.0.1", "::ffff:127.0.0.1", "::1", "0.0.0.0", "::"}
    code, stderr = scenario["without_token"]
    assert code != 0 and "token" in stderr.lower(), stderr  # a client without the cluster's token is refused
    assert scenario["namespaces_gone"]


@needs_ray
def test_two_ray_actors_and_one_process_give_consistent_merged_rows(scenario):
    (one, _), (status, reasons, meta) = scenario["one"], scenario["two"]
    assert one == status == "OK", reasons
    workers = meta["workers"]
    assert meta["loadgen"] == "tritonsuite engine, 2 Ray actors" and workers["start_method"] == "ray actors"
    per = workers["per_worker"]
    assert [w["slots"] for w in per] == [2, 2] and len(set(workers["hosts"])) == 1 == len({w["host"] for w in per})
    assert len({w["pid"] for w in per}) == 2
    for w in per:  # one host: one CLOCK_MONOTONIC, so each offset is within its own uncertainty (+ a hiccup)
        assert abs(w["clock_offset_ms"]) <= w["clock_uncertainty_ms"] + 1.0, w
    assert workers["clock_agreement_ms"] == max(w["clock_uncertainty_ms"] for w in per) < 50
    assert sum(w["requests"] for w in per) == meta["measured_requests"] == scenario["samples"]
    assert all(w["requests"] > 0 for w in per) and meta["requests_sent"] == meta["server_success_delta"]
    assert workers["behind"] == [] and "offset" in workers["windows"]
    # at the parent's priority, not Ray's nice 15 for its workers (there the actors lost 31% on a busy host)
    assert [w["nice"] for w in per] == [scenario["nice"]] * 2
    # one process and two actors measured back to back: the same point, or, after a first pair a busy spell set
    # apart, a second pair that is
    assert 1 <= len(scenario["pairs"]) <= 2
    assert_same_point(*scenario["pairs"][-1])
    assert scenario["actors_after_point"] == 0  # each point's actors are killed with it


@needs_ray
def test_a_ray_actor_killed_mid_point_fails_that_point_with_its_reason(scenario):
    killed, message = scenario["killed"]
    assert len(killed) == 1, message
    assert f", pid {killed[0]}) failed: the Ray actor died: " in message and message.startswith("worker "), message
    assert scenario["actors_after_kill"] == 0 and scenario["next_point"] == "OK"


@needs_ray
def test_no_cluster_is_one_line_before_anything_starts(tmp_path):
    """In a fresh process (never connected): an address where nothing listens, and no address at all."""
    script = ("from tritonsuite.core.settings import RayWorkers\nfrom tritonsuite.load import sources\n"
              "print(sources.get('suite', RayWorkers('127.0.0.1:9')).unavailable())\n"
              "print(sources.get('suite', RayWorkers()).unavailable())")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stderr
    refused, none = out.stdout.strip().splitlines()
    assert refused.startswith("--workers ray:127.0.0.1:9: no Ray cluster at 127.0.0.1:9: ") and "refused" in refused
    assert none.startswith("--workers ray: which Ray cluster? Give ray:ADDRESS (its head's host:port) or "
                           "RAY_ADDRESS; the suite starts none"), none


def test_no_ray_installed_is_one_line(monkeypatch):
    from tritonsuite.load.sources import raycluster

    monkeypatch.setitem(sys.modules, "ray", None)
    assert raycluster.unavailable_reason() == "Ray is not installed (pip install 'tritonsuite[distributed]')"
    assert sources.get("suite", RayWorkers("127.0.0.1:9")).unavailable() == (
        "--workers ray:127.0.0.1:9: Ray is not installed (pip install 'tritonsuite[distributed]')")
