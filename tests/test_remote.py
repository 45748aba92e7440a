"""The remote path as a team runs it: a stock tritonserver started by someone else with an EMPTY model repository
in explicit model-control mode (here the wheel's, started with EmbeddedServer), reached only through RemoteServer at
its HTTP, gRPC and metrics addresses.
Every deployment travels in the load request (config and files), so the server's repository index lists none; an
ensemble's composing models (nested too) are uploaded before it."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.kinds import ADD_CONFIG, add_onnx_bytes, decoupled_model
from tritonsuite.judge.conformance import Target, run_check
from tritonsuite.load.streams import exchange_alone
from tritonsuite.server import EmbeddedServer, RemoteServer, ServerError

ENSEMBLE = '''
name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [{{ name: "X" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "Y" data_type: TYPE_FP32 dims: [4] }}]
ensemble_scheduling {{ step [{steps}] }}
'''
ADD_STEP = ('{{ model_name: "{model}" model_version: -1 input_map {{ key: "A" value: "{a}" }} '
            'input_map {{ key: "B" value: "{b}" }} output_map {{ key: "SUM" value: "{out}" }} }}')
WHOLE_STEP = ('{{ model_name: "{model}" model_version: -1 input_map {{ key: "X" value: "X" }} '
              'output_map {{ key: "Y" value: "Y" }} }}')


def _add_model(repo: Path, name: str, versions=(1,), policy: str = "") -> Path:
    directory = repo / name
    for v in versions:
        (directory / str(v)).mkdir(parents=True)
        (directory / str(v) / "model.onnx").write_bytes(add_onnx_bytes())
    (directory / "config.pbtxt").write_text(ADD_CONFIG.replace('"add_onnx"', f'"{name}"') + policy)
    return directory


def _ensemble(repo: Path, name: str, steps: list[str]) -> Path:
    (repo / name / "1").mkdir(parents=True)  # an ensemble's version directory is empty
    (repo / name / "config.pbtxt").write_text(textwrap.dedent(ENSEMBLE.format(name=name, steps=", ".join(steps))))
    return repo / name


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """This host's repository: the remote server never sees it. ``twice`` = add_a(X, X) then add_b(that, X) = 3X;
    ``outer`` runs ``twice`` as its one step (a nested ensemble); add_a has two versions, its policy serves the
    latest."""
    repo = tmp_path_factory.mktemp("local-repo")
    _add_model(repo, "add_a", versions=(1, 2), policy="version_policy { latest { num_versions: 1 } }\n")
    _add_model(repo, "add_b")
    _ensemble(repo, "twice", [ADD_STEP.format(model="add_a", a="X", b="X", out="S"),
                              ADD_STEP.format(model="add_b", a="S", b="X", out="Y")])
    _ensemble(repo, "outer", [WHOLE_STEP.format(model="twice")])
    decoupled_model(repo, "stream_n")
    return repo


@pytest.fixture(scope="module")
def someone_elses(tmp_path_factory):
    """A stock server with an empty repository of its own, explicit model control."""
    empty = tmp_path_factory.mktemp("empty-repo")
    with EmbeddedServer(empty, tmp_path_factory.mktemp("logs")) as server:
        yield server
    assert not any(empty.iterdir()), "nothing was written into the remote server's repository"


@pytest.fixture(scope="module")
def remote(someone_elses):
    ports = someone_elses.ports  # the operator's ports, as a team is told them
    server = RemoteServer(someone_elses.http_url, grpc_url=f"127.0.0.1:{ports['grpc']}",
                          metrics_url=f"127.0.0.1:{ports['metrics']}")
    server.operator_log = someone_elses.log_path  # what the operator would read: which loads the server ran
    return server


def remote_log(remote) -> str:
    return remote.operator_log.read_text()


def test_an_uploaded_nested_ensemble_loads_its_composing_models_first(remote, repo):
    assert remote.load(repo / "outer") == "outer"
    client = remote.client()
    try:
        assert all(client.is_model_ready(m) for m in ("add_a", "add_b", "twice", "outer"))
        assert client.get_model_repository_index() == []  # uploaded: in no repository of the server's
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        import tritonclient.http as httpclient

        tensor = httpclient.InferInput("X", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        np.testing.assert_allclose(client.infer("outer", [tensor]).as_numpy("Y"), 3 * x)
    finally:
        client.close()
    assert remote.load(repo / "twice") == "twice"  # again: its unchanged composing models are not uploaded again
    assert remote_log(remote).count('"loading: add_b:1"') == 1


def test_an_ensemble_whose_composing_model_is_nowhere_says_which(remote, repo):
    _ensemble(repo, "orphan", [ADD_STEP.format(model="nowhere", a="X", b="X", out="Y")])
    with pytest.raises(ServerError, match="not available or ambiguous: nowhere"):  # Triton's own words
        remote.load(repo / "orphan")


def test_identity_passes_for_uploaded_models(remote, repo):
    remote.load(repo / "add_a")
    result = run_check(Target(remote, repo / "add_a"), "identity")
    assert result.verdict == "pass", result.line()
    assert result.evidence["ready"] == [2] == result.evidence["selected"]  # read from the server, not the index
    ensemble = run_check(Target(remote, repo / "twice"), "identity")
    assert ensemble.verdict == "pass", ensemble.line()
    counters = run_check(Target(remote, repo / "add_a"), "counters")  # Prometheus read at the given metrics address
    assert counters.verdict == "pass" and isinstance(counters.evidence["metrics"], dict), counters.line()


def test_a_decoupled_model_streams_through_the_given_grpc_address(remote, repo):
    remote.load(repo / "stream_n")
    requests = [{"COUNT": np.array([[n]], np.int32), "DATA": np.ones((1, 4), np.float32)} for n in (3, 1)]
    responses = exchange_alone(remote.grpc_url, "stream_n", requests, ["OUT", "INDEX"])
    assert [len(r) for r in responses] == [3, 1]
    assert run_check(Target(remote, repo / "stream_n"), "identity").verdict == "pass"  # identity streams it too


def test_without_a_grpc_address_the_message_names_the_option(someone_elses):
    with pytest.raises(ValueError, match="its gRPC address is not known; give it with --triton-grpc-url host:port"):
        RemoteServer(someone_elses.http_url).grpc_url
    assert RemoteServer(someone_elses.http_url).metrics_url == ""  # not known: the counters check reads statistics
    with pytest.raises(ServerError, match="--triton-grpc-url '127.0.0.1' is not a gRPC host:port"):
        RemoteServer(someone_elses.http_url, grpc_url="127.0.0.1")


def test_known_by_its_http_address_alone_it_is_measured_over_http(someone_elses, repo):
    """No --triton-grpc-url: an HTTP point is measured, and a decoupled model (gRPC streams only) fails naming the
    option to give. Before, the engine read the gRPC address for every point and no HTTP point could run."""
    from tritonsuite.core.settings import MeasurementSettings
    from tritonsuite.load.engine import LoadPoint, measure

    http_only = RemoteServer(someone_elses.http_url)
    http_only.load(repo / "add_b")
    description = http_only.model_description("add_b")
    inputs = {"A": np.ones((1, 4), np.float32), "B": np.ones((1, 4), np.float32)}
    settings = MeasurementSettings(window_ms=200, warmup_ms=50, max_trials=3, stability_percentage=100,
                                   client_bound_percent=1000)
    m = measure(http_only, "add_b", inputs, description.outputs, LoadPoint(1, 1), settings, description=description)
    assert m.meta["protocol"] == "http" and m.meta["server_success_delta"] == m.meta["requests_sent"] > 0
    http_only.load(repo / "stream_n")
    with pytest.raises(ValueError, match="its gRPC address is not known; give it with --triton-grpc-url host:port"):
        measure(http_only, "stream_n", {"COUNT": np.ones((1, 1), np.int32), "DATA": np.ones((1, 4), np.float32)},
                http_only.model_description("stream_n").outputs, LoadPoint(1, 1), settings,
                description=http_only.model_description("stream_n"))


def test_the_suite_runs_on_it_given_its_addresses(someone_elses, repo, tmp_path):
    """The pytest options as a team passes them: --triton-grpc-url threaded through to the launcher (the decoupled
    model streams over it), the ensemble's composing models uploaded by the suite's own session."""
    from tests.helpers import raw_rows, run_pytest

    ports = someone_elses.ports
    profile = ("device: cpu\ngpu: none (CPU only)\nmeasurement: {window_ms: 300, min_requests_per_window: 5, "
               "stability_percentage: 100, max_trials: 6, warmup_ms: 200, client_bound_percent: 1000}\n")
    result = run_pytest(["--gpu", "tiny", "--server", "remote", "--triton-url", someone_elses.http_url,
                         "--triton-grpc-url", f"127.0.0.1:{ports['grpc']}", "--model-repository", str(repo),
                         "--models", "outer,stream_n", "-m", "conformance or online", "--checks", "identity",
                         "--concurrency", "1", "--load-probe-share", "0", "-p", "no:warnings"], tmp_path,
                        profile=profile, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "4 passed" in result.stdout, result.stdout[-4000:]
    online = {r["deployment"]: r for r in raw_rows(tmp_path / "reports", "online")}
    assert online["stream_n"]["measurement"]["protocol"] == "grpc (bidirectional stream)"
    assert online["outer"]["status"] == "OK" == online["stream_n"]["status"]
