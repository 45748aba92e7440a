"""The measurement engine against the real embedded Triton serving the identity model."""
import os
import threading
import time

import numpy as np
import pytest

from tests.helpers import leftover_shm, measure_loaded
from tritonsuite.core.rows import LATENCY_PARTS, RESULT_COLUMNS
from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import build_deployment, model_config
from tritonsuite.load.client import CLIENT_SHM_PREFIX
from tritonsuite.load.engine import LoadPoint, MeasurementError, MeasurementSettings
from tritonsuite.models import default_registry
from tritonsuite.server import EmbeddedServer, ServerDied

# plumbing, not this host's speed or noise: any spread of the last windows counts as stable and the load generator's
# CPU never makes a row client bound (the tests below that are about stability set their own)
FAST = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=100, max_trials=10,
                           warmup_ms=100, client_bound_percent=1000)


@pytest.fixture(scope="module")
def identity():
    return default_registry().get("identity", "tiny")


@pytest.fixture(scope="module")
def served(identity, tmp_path_factory):
    artifact = export(identity, "onnx", "fp32", tmp_path_factory.mktemp("cache"))
    repo = tmp_path_factory.mktemp("repo")
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        for name, settings in (("static", dict(max_batch_size=8, intra_op_threads=1)),
                               ("dynamic", dict(max_batch_size=8, intra_op_threads=1, dynamic_batching=True,
                                                preferred_batch_sizes=(4, 8), max_queue_delay_microseconds=100))):
            server.load(build_deployment(repo, model_config(name, identity, artifact.format, **settings), artifact))
        yield server


def test_offline_point_through_shared_memory(served, identity):
    m = measure_loaded(served, "static", identity.example_inputs(8, 0), identity.outputs, LoadPoint(4, 1, True), FAST)
    assert m.status == "OK" and m.valid and not m.reasons
    assert list(m.result) == list(RESULT_COLUMNS)
    r = m.result
    assert (r["Batch"], r["Concurrency"]) == (4, 1)
    assert r["Server Compute Infer"] > 0 and r["p50 latency"] <= r["p90 latency"] <= r["p95 latency"] <= r["p99 latency"]
    meta = m.meta
    # throughput is consistent with one request in flight: the requests' latencies, one after another, fit in the
    # windows' time (but for at most one request per window that ran across its edge)
    start, stop = meta["pooled_windows"]
    across_edges = np.sort(m.latencies_s)[len(m.latencies_s) - (stop - start):].sum()
    assert m.latencies_s.sum() - across_edges <= len(m.latencies_s) * 4 / r["Inferences/Second"]
    assert len(m.latencies_s) == meta["measured_requests"] and r["avg latency"] == pytest.approx(
        m.latencies_s.mean() * 1e3)
    assert sum(r[p] for p in LATENCY_PARTS) >= r["avg latency"] * 0.95  # the residual closes the breakdown
    assert meta["shared_memory"] == "system" and meta["protocol"] == "http"
    assert meta["requests_sent"] == meta["server_success_delta"] and meta["windows"] >= 3
    assert meta["client_cpu_percent"] > 0 and meta["client_bound"] is False
    assert not leftover_shm(f"{CLIENT_SHM_PREFIX}{os.getpid()}x")  # this process's own (another xdist worker may hold its)
    client = served.client()
    assert client.get_system_shared_memory_status() == []  # regions were unregistered from the server
    client.close()


def test_online_point_with_concurrency(served, identity):
    m = measure_loaded(served, "dynamic", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 4), FAST)
    assert m.valid, m.reasons
    assert m.meta["shared_memory"] == "none" and m.result["Concurrency"] == 4
    assert m.result["Inferences/Second"] > 0


def test_open_loop_point_follows_its_schedule(served, identity):
    """Requests go out at the offered rate whatever the responses do; the row says what was offered, achieved and
    sent late, and has no set concurrency (its Concurrency column is the mean number in flight)."""
    point = LoadPoint(1, request_rate=100.0, distribution="constant", seed=1)
    m = measure_loaded(served, "dynamic", identity.example_inputs(1, 0), identity.outputs, point, FAST)
    meta = m.meta
    assert meta["load"] == "open loop" and meta["offered_rate"] == 100.0 and meta["distribution"] == "constant"
    assert meta["achieved_rate"] == round(m.result["Inferences/Second"], 3)  # batch 1: what the server answered
    assert 0 <= meta["late_percent"] <= 100 and meta["schedule_delay_p99_ms"] >= 0 and meta["max_outstanding"] >= 1
    assert meta["requests_sent"] == meta["server_success_delta"]
    assert 0 < m.result["Concurrency"] <= meta["max_outstanding"]  # the mean in flight, at most the most in flight
    row = m.to_row(scenario="online", model="identity", deployment="dynamic")
    assert row.concurrency is None and row.request_rate == 100.0
    late = meta["late_verdict"]  # judged on counts: INVALID only when significantly above the limit
    assert late["of"] == meta["measured_requests"] and late["verdict"] in ("within", "undecided", "over")
    assert m.status in ("OK", "INVALID") and (m.status == "OK") == (late["verdict"] != "over")
    # every percentile column carries its sample count and interval (or says it is indicative)
    for q in ("p50", "p90", "p95", "p99"):
        est = meta["percentiles"][q]
        assert est["n"] == meta["measured_requests"] and est["value"] == pytest.approx(m.result[f"{q} latency"], rel=1e-3)
        assert est["indicative"] or est["low"] <= est["value"] <= est["high"]


def test_a_slow_server_cannot_hide_its_queue(served, identity):
    """With one request allowed in flight and fifty times the rate one stream achieves (no busy spell makes up
    that much), sends wait for responses: latency counted from the scheduled send grows with the queue (no
    coordinated omission), and the point is INVALID, naming the late share and the cap."""
    inputs = identity.example_inputs(1, 0)
    closed = measure_loaded(served, "dynamic", inputs, identity.outputs, LoadPoint(1, 1), FAST)
    rate = 50 * closed.result["Inferences/Second"]
    settings = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=30, max_trials=4,
                                   warmup_ms=100, max_outstanding=1)
    m = measure_loaded(served, "dynamic", inputs, identity.outputs, LoadPoint(1, request_rate=rate), settings)
    assert m.status == "INVALID" and m.meta["max_outstanding"] == 1
    late = next(r for r in m.reasons if r.startswith("the load generator could not keep the schedule"))
    assert "the cap of 1 requests in flight (max_outstanding) was reached" in late and m.meta["late_percent"] > 50
    assert m.meta["late_verdict"]["verdict"] == "over" and m.meta["late_verdict"]["p_value"] < 0.05
    assert m.result["avg latency"] > 3 * closed.result["avg latency"]
    assert m.meta["achieved_rate"] < 0.6 * rate  # what the server did, not what was offered


def test_a_point_can_be_given_up_early(served, identity):
    calls = []

    def stop(windows):
        calls.append(len(windows))
        return "clearly over the bound" if len(windows) == 2 else None

    settings = MeasurementSettings(window_ms=100, min_requests_per_window=1, stability_percentage=1e-6, max_trials=10,
                                   warmup_ms=50)
    m = measure_loaded(served, "static", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 1), settings,
                stop_early=stop)
    assert calls == [1, 2] and m.meta["windows"] == 2 and m.status == "STOPPED" and not m.valid
    assert m.reasons[0] == "stopped early: clearly over the bound" and m.meta["stopped_early"] == "clearly over the bound"


def test_count_based_windows(served, identity):
    settings = MeasurementSettings(window_requests=40, stability_percentage=30, max_trials=10, warmup_ms=100)
    m = measure_loaded(served, "static", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 1), settings)
    start, stop = m.meta["pooled_windows"]  # the stable windows, and any measured on for the samples p99 needs
    factors = m.meta["window_factors"][start:stop]  # a busy host may have lengthened them
    assert stop - start == m.meta["stable_windows"] >= 3
    assert m.meta["window"] == "40 requests" if factors[-1] == 1 else m.meta["window"].startswith(f"{40 * factors[-1]}")
    assert m.meta["measured_requests"] == 40 * sum(factors)


def test_a_point_that_never_stabilises_is_unstable(served, identity):
    settings = MeasurementSettings(window_ms=100, min_requests_per_window=1, stability_percentage=1e-6, max_trials=3,
                                   warmup_ms=50)
    m = measure_loaded(served, "static", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 1), settings)
    assert m.status == "UNSTABLE" and not m.valid
    assert "over the last 3 windows (limit 1e-06%) after 3 windows" in m.reasons[0]
    assert m.reasons[0].startswith("throughput varied ") and m.reasons[0].endswith("% of a core meanwhile")


def test_windows_lengthen_before_a_point_is_given_up(served, identity):
    """After each three windows that disagree the windows double, up to max_window_factor; the row keeps every
    window's length and the host's other load, and the reason names the last window."""
    settings = MeasurementSettings(window_ms=100, min_requests_per_window=1, stability_percentage=1e-6, max_trials=10,
                                   warmup_ms=50, max_window_factor=4)
    m = measure_loaded(served, "static", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 1), settings)
    assert m.status == "UNSTABLE"
    assert m.meta["window_factors"] == [1, 1, 1, 2, 2, 2, 4, 4, 4, 4]
    assert m.meta["window"] == "400 ms (min 4 requests), lengthened x4 from 100 ms"
    assert "the last 400 ms (min 4 requests), lengthened x4 from 100 ms; other processes used" in m.reasons[0]
    assert len(m.meta["window_host_other_cpu_percent"]) == 10 and m.meta["host_other_cpu_percent"] >= 0
    assert len(m.meta["window_throughputs"]) == 10  # every window's evidence, the lengthened ones too


def test_another_client_on_the_model_invalidates_the_row(served, identity):
    import tritonclient.http as httpclient

    stop = threading.Event()

    def intruder():
        client = httpclient.InferenceServerClient(served.http_url)
        x = httpclient.InferInput("INPUT__0", [1, 16], "FP32")
        x.set_data_from_numpy(np.zeros((1, 16), np.float32))
        while not stop.is_set():
            client.infer("static", [x])
            time.sleep(0.005)
        client.close()

    thread = threading.Thread(target=intruder)
    thread.start()
    try:
        m = measure_loaded(served, "static", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 1), FAST)
    finally:
        stop.set()
        thread.join()
    assert m.status == "INVALID"
    assert any(r.endswith(": another client used the model during measurement") for r in m.reasons), m.reasons
    assert m.meta["server_success_delta"] > m.meta["requests_sent"]


def test_a_failing_request_is_an_error_naming_the_server_message(served, identity):
    with pytest.raises(MeasurementError, match="inference request failed with HTTP 400: .*batch-size must be <= 8"):
        measure_loaded(served, "static", identity.example_inputs(16, 0), identity.outputs, LoadPoint(16, 1), FAST)
    with pytest.raises(ValueError, match="inputs hold fewer than 4 samples"):
        measure_loaded(served, "static", identity.example_inputs(2, 0), identity.outputs, LoadPoint(4, 1), FAST)


def test_server_death_mid_measurement_fails_fast_with_the_log_tail(identity, tmp_path):
    artifact = export(identity, "onnx", "fp32", tmp_path / "cache")
    server = EmbeddedServer(tmp_path / "repo", tmp_path / "logs")
    with server:
        server.load(build_deployment(tmp_path / "repo", model_config("static", identity, artifact.format,
                                                                     max_batch_size=8), artifact))
        killer = threading.Timer(1.0, server.process.kill)
        killer.start()
        slow = MeasurementSettings(window_ms=2000, stability_percentage=1e-6, max_trials=20)
        with pytest.raises(ServerDied, match=r"(?s)died while measuring static at batch 1.*tritonserver log tail"):
            measure_loaded(server, "static", identity.example_inputs(1, 0), identity.outputs, LoadPoint(1, 2, True), slow)
        killer.join()
    assert not leftover_shm(f"{CLIENT_SHM_PREFIX}{os.getpid()}x") and not leftover_shm(server.shm_prefix or "none")


HANGS = "import time\n\n\nclass TritonPythonModel:\n    def execute(self, requests):\n        time.sleep(3600)\n"
HANGS_CONFIG = ('backend: "python"\nmax_batch_size: 8\ninput [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]\n'
                'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]\n')


def test_a_model_that_never_answers_is_a_hang_already_in_the_warm_up(tmp_path):
    """The warm-up waits for a response on every connection: bounded by the hang bound like every window (it waited
    forever for a model that never answers, when that model's first case was an offline point)."""
    from tritonsuite.core.spec import TensorSpec
    from tritonsuite.load.point import Hang

    (tmp_path / "repo" / "hangs" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "hangs" / "1" / "model.py").write_text(HANGS)
    (tmp_path / "repo" / "hangs" / "config.pbtxt").write_text(HANGS_CONFIG)
    settings = MeasurementSettings(window_ms=100, warmup_ms=50, request_timeout_s=2)
    with EmbeddedServer(tmp_path / "repo", tmp_path / "logs") as server:
        server.load(tmp_path / "repo" / "hangs")
        with pytest.raises(Hang, match=r"no response within 3 s \(warming up\)"):  # 2 s x 1 in flight, + 1 s
            measure_loaded(server, "hangs", {"INPUT0": np.ones((1, 4), np.float32)},
                           [TensorSpec("OUTPUT0", "float32", (4,))], LoadPoint(1, 1), settings)
