"""The worker-process load source (``--workers``) against the real embedded Triton: a point split over 2 processes
gives the row one process gives at the same load, and a worker killed mid-point fails that point alone.

The model sleeps 4 ms per execution on two instances, so the server, not the client, sets the pace: the rows of one
and of two client processes are then the same measurement, compared with the suite's own comparison statistics."""
import os
import signal
import threading
import time
from dataclasses import replace

import numpy as np
import psutil
import pytest

from tests.helpers import assert_same_point, pairs_until_alike
from tests.kinds import _write, sequence_model
from tritonsuite.core.rows import Row
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.core.spec import TensorSpec
from tritonsuite.core.stats import percentile_estimate
from tritonsuite.core.store import RawWriter, read_rows
from tritonsuite.judge.compare import compare_points
from tritonsuite.load import sources
from tritonsuite.load.engine import LoadPoint, MeasurementError, Traffic
from tritonsuite.server import EmbeddedServer

SLEEPY = '''
import time
from dataclasses import replace
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.004)
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT", pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy())]) for r in requests]
'''
CONFIG = '''
name: "sleepy"
backend: "python"
max_batch_size: 8
input [{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [1] }]
instance_group [{ kind: KIND_CPU count: 2 }]
'''
# plumbing, not this host's noise: any spread counts as stable, the client's CPU never makes a row client bound
FAST = MeasurementSettings(window_ms=400, min_requests_per_window=5, stability_percentage=100, max_trials=6,
                           warmup_ms=200, client_bound_percent=1000, sample_windows=0)


@pytest.fixture(scope="module")
def sleepy(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    directory = _write(repo / "sleepy", CONFIG, "model.py", SLEEPY)
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        server.load(directory)
        server.load(sequence_model(repo, "seq_direct", "direct", work_ms=2))
        yield server


def _traffic(server, point: LoadPoint) -> Traffic:
    return Traffic("sleepy", {"INPUT": np.arange(point.batch_size, dtype=np.int32).reshape(-1, 1)},
                   [TensorSpec("OUTPUT", "int32", (1,))], point, server.model_description("sleepy"))


def _workers_alive() -> list[psutil.Process]:
    """This process's worker processes still running (spawned: ``multiprocessing.spawn ... spawn_main``)."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and any("spawn_main" in part for part in p.cmdline()):
                alive.append(p)
        except psutil.Error:
            continue
    return alive


def _row(m, loadgen_note: str) -> Row:
    return m.to_row(scenario="online", model="sleepy", deployment="sleepy", run_id=loadgen_note)


def _pair(one, two, label: str):
    """(one process's measurement, the other way's, their comparison as tests.helpers.same_point reads it)."""
    verdict = compare_points(_row(one, "one"), _row(two, label))
    return one, two, (verdict.verdict, verdict.describe(),
                      [one.result["Inferences/Second"], two.result["Inferences/Second"]])


def test_two_worker_processes_and_one_give_consistent_merged_rows(sleepy):
    traffic = _traffic(sleepy, LoadPoint(1, 4))
    pairs = pairs_until_alike(lambda: _pair(sources.get("suite").measure(sleepy, traffic, FAST),
                                            sources.get("suite", 2).measure(sleepy, traffic, FAST), "two"))
    one, two, _ = pairs[0]  # the first pair's rows: what they hold
    assert one.status == two.status == "OK", (one.reasons, two.reasons)
    workers = two.meta["workers"]
    assert workers["processes"] == 2 and [w["slots"] for w in workers["per_worker"]] == [2, 2]
    assert len({w["pid"] for w in workers["per_worker"]} | {os.getpid()}) == 3  # two processes of their own
    # every request of every worker is in the row once: the workers' counts add up to the merged samples, and the
    # server counted what the client completed over the whole point
    assert sum(w["requests"] for w in workers["per_worker"]) == two.meta["measured_requests"] == len(two.latencies_s)
    assert all(w["requests"] > 0 for w in workers["per_worker"])
    assert two.meta["requests_sent"] == two.meta["server_success_delta"]
    # the percentiles are the merged samples' own (core.stats), not an average of the workers'
    p90 = percentile_estimate(two.latencies_s * 1e3, 90, FAST.percentile_confidence / 100.0,
                              FAST.percentile_precision_percent / 100.0)
    assert two.result["p90 latency"] == pytest.approx(p90.value)
    # the whole client's CPU is the parent's and every worker's
    assert two.meta["client_cpu_percent"] == pytest.approx(
        workers["parent_cpu_percent"] + sum(w["client_cpu_percent"] for w in workers["per_worker"]), abs=0.2)
    assert workers["behind"] == [] and "CLOCK_MONOTONIC" in workers["windows"]
    # the same measurement by the suite's comparison statistics (throughput effect and latency rank test), in the
    # first pair or, after a busy spell set it apart, in a second
    assert_same_point(*pairs[-1][2])
    assert one.meta.get("workers") is None and not _workers_alive()


def test_open_loop_rate_splits_over_the_workers_and_probes_come_back_under_their_own_index(sleepy):
    probes = tuple({"INPUT": np.full((1, 1), 100 + i, dtype=np.int32)} for i in range(5))
    traffic = replace(_traffic(sleepy, LoadPoint(1, request_rate=120.0)), probes=probes, probe_share=0.3)
    two = sources.get("suite", 2).measure(sleepy, traffic, FAST)
    per = two.meta["workers"]["per_worker"]
    assert [w["request_rate"] for w in per] == [60.0, 60.0] and [w["seed"] for w in per] == [0, 1]
    assert two.meta["load"] == "open loop" and two.meta["requests_sent"] == two.meta["server_success_delta"]
    # probes spread (worker 1: 0, 2, 4; worker 2: 1, 3), each answer the echo of its own probe
    assert [w["probes"] for w in per] == [3, 2] and two.meta["accuracy_probes"]["answered"] > 0
    assert {i for i, _ in two.probe_responses} <= set(range(5))
    assert all(int(out["OUTPUT"][0, 0]) == 100 + i for i, out in two.probe_responses)
    assert not _workers_alive()


def test_sequence_ids_are_partitioned_and_every_sequence_is_closed(sleepy):
    two = sources.get("suite", 2).measure(sleepy, Traffic(
        "seq_direct", {"INPUT": np.ones((1, 1), np.int32)}, [TensorSpec("OUTPUT", "int32", (1,))], LoadPoint(1, 4),
        sleepy.model_description("seq_direct").with_sequences(length=5, id_start=1, id_end=1001)), FAST)
    assert two.status == "OK", two.reasons
    ranges = [w["sequence_ids"] for w in two.meta["workers"]["per_worker"]]
    assert ranges == [[1, 501], [501, 1001]] == two.meta["sequences"]["worker_sequence_id_ranges"]
    seq = two.meta["sequences"]
    assert seq["sequence_id_range"] == [1, 1001] and seq["sequences_started"] == seq["sequences_ended"] > 0
    assert two.meta["requests_sent"] == two.meta["server_success_delta"]  # the closing requests counted too


def test_a_worker_killed_mid_point_fails_that_point_and_loses_no_row_written(sleepy, tmp_path):
    traffic = _traffic(sleepy, LoadPoint(1, 4))
    path = tmp_path / "raw.jsonl"
    writer = RawWriter(path)
    first = sources.get("suite", 2).measure(sleepy, traffic, FAST)
    writer.append(_row(first, "kept"))
    killed: list[int] = []

    def kill_one():  # once both workers run and a moment has passed, kill the second one
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_workers_alive()) < 2:
            time.sleep(0.05)
        time.sleep(1.5)
        victims = sorted(_workers_alive(), key=lambda p: p.create_time())
        if victims:
            killed.append(victims[-1].pid)
            os.kill(victims[-1].pid, signal.SIGKILL)

    never_settles = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=0.001,
                                        max_trials=100, warmup_ms=100, client_bound_percent=1000)
    killer = threading.Thread(target=kill_one)
    killer.start()
    with pytest.raises(MeasurementError) as failure:
        sources.get("suite", 2).measure(sleepy, traffic, never_settles)
    killer.join()
    assert killed and f"(pid {killed[0]}) ended mid-point: killed by signal SIGKILL" in str(failure.value)
    assert str(failure.value).startswith("worker 2 of 2")
    assert not _workers_alive()  # the other worker was stopped with the point
    rows = read_rows(path)
    assert [r.status for r in rows] == ["OK"] and rows[0].result == _row(first, "kept").result
    # the server is still there for the next point
    assert sources.get("suite", 2).measure(sleepy, traffic, FAST).status == "OK"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_end_the_point_and_its_workers(sleepy, signum):
    """SIGTERM as the plugin turns it into KeyboardInterrupt (a CI job cancelled), set here so the test does not hang
    on whether the plugin is active; Ctrl-C is Python's own."""
    previous = signal.getsignal(signal.SIGTERM)

    def interrupt(*_):
        raise KeyboardInterrupt("terminated")

    def send():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_workers_alive()) < 2:
            time.sleep(0.05)
        time.sleep(1.0)
        os.kill(os.getpid(), signum)

    never_settles = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=0.001,
                                        max_trials=100, warmup_ms=100, client_bound_percent=1000)
    signal.signal(signal.SIGTERM, interrupt)
    # Ctrl-C as a terminal delivers it: Python's own handler (a job started in the background of a shell without job
    # control, as CI may be, inherits SIGINT ignored, and no Ctrl-C reaches it at all)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=send)
    try:
        sender.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            sources.get("suite", 2).measure(sleepy, _traffic(sleepy, LoadPoint(1, 4)), never_settles)
        sender.join()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    assert not _workers_alive() and time.monotonic() - started < 30


def test_a_worker_that_could_not_keep_up_is_named_in_the_row(sleepy):
    """A client-bound limit every worker passes (1% of a core): each is named with its own CPU, the row INVALID."""
    m = sources.get("suite", 2).measure(sleepy, _traffic(sleepy, LoadPoint(1, 4)),
                                        replace(FAST, client_bound_percent=1.0))
    assert m.status == "INVALID" and m.meta["client_bound"] is True
    behind = m.meta["workers"]["behind"]
    assert [b.split(" (pid")[0] for b in behind[:2]] == ["worker 1 of 2", "worker 2 of 2"]
    assert any(r.startswith("could not keep up: worker 1 of 2 (pid ") and "of a core (limit 1%)" in r
               for r in m.reasons), m.reasons


def test_worker_processes_measure_a_remote_server_reached_over_http_alone(sleepy):
    """A remote server given by its HTTP address only (no gRPC one known): the workers speak HTTP, as the point does
    (they once asked its gRPC address first and failed the point)."""
    from tritonsuite.server import RemoteServer

    remote = RemoteServer(sleepy.http_url)
    with pytest.raises(ValueError, match="its gRPC address is not known"):
        remote.grpc_url
    m = sources.get("suite", 2).measure(remote, _traffic(remote, LoadPoint(1, 4)), FAST)
    assert m.status == "OK" and m.meta["protocol"] == "http", m.reasons
    assert m.meta["workers"]["processes"] == 2
