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


@pytest.fixture
def teams(tmp_path):
    """A team's server as a run finds it: explicit model control, ``add_b`` and ``theirs`` served from its own
    repository and ``pushed`` uploaded by someone earlier (served from no repository)."""
    own = tmp_path / "own"
    _add_model(own, "add_b")
    _add_model(own, "theirs")
    someone = _add_model(tmp_path / "someone", "pushed")
    with EmbeddedServer(own, tmp_path / "logs", auto_complete=False) as server:
        client = server.client()
        client.load_model("add_b")
        client.load_model("theirs")
        client.close()
        RemoteServer(server.http_url).load(someone)  # that session never stops
        yield server


def _served(server) -> dict[str, int]:
    """model -> max_batch_size, of the models ready on ``server``."""
    client = server.client()
    try:
        return {n: client.get_model_config(n)["max_batch_size"]
                for n in ("add_a", "add_b", "twice", "outer", "theirs", "pushed") if client.is_model_ready(n)}
    finally:
        client.close()


def test_at_its_stop_a_session_puts_the_server_back_as_it_found_it(teams, repo, tmp_path):
    """Unloaded: what the session added (an ensemble before its steps). Loaded again from the server's own
    repository: what it served before, which the session's upload replaced. One line for what could not be (a
    model served from no repository keeps the upload), one for what was done."""
    edited = _add_model(tmp_path / "own", "edited")  # the team's too, its config.pbtxt broken during the run
    client = teams.client()
    client.load_model("edited")
    client.close()
    local = tmp_path / "local"  # the session's own theirs, edited and pushed: the team's names, max_batch_size 4
    for name in ("theirs", "edited", "pushed"):
        config = _add_model(local, name) / "config.pbtxt"
        config.write_text(config.read_text().replace("max_batch_size: 8", "max_batch_size: 4"))
    session = RemoteServer(teams.http_url)
    assert session.load(repo / "outer") == "outer"  # add_a, add_b (from beside it), twice, outer
    for name in ("theirs", "edited", "pushed"):
        session.load(local / name)
    assert _served(teams) == {"add_a": 8, "add_b": 8, "twice": 8, "outer": 8, "theirs": 4, "pushed": 4}
    assert session.loaded_here() == [("add_a", False), ("add_b", True), ("twice", False), ("outer", False),
                                     ("theirs", True), ("edited", True), ("pushed", True)]
    (edited / "config.pbtxt").write_text("max_batch_size: [not a number\n")
    session.stop()
    assert _served(teams) == {"add_b": 8, "theirs": 8, "pushed": 4}  # theirs as the team's repository holds it
    pushed, broken, done = session.put_back_lines
    assert pushed == (f"{session.describe()}: pushed was served before the run from none of its repositories "
                      f"(uploaded earlier): it serves what the run uploaded")
    assert broken == (f"{session.describe()}: edited was served before the run and could not be loaded from its own "
                      f"repository ([500] failed to load 'edited', failed to poll from model repository): it serves "
                      f"what the run uploaded")
    assert done == (f"{session.describe()}: the run's models put back: 3 unloaded, 2 it served before reloaded "
                    f"from its own repository, 2 not (above)")
    client = teams.client()
    assert client.get_model_config("edited")["max_batch_size"] == 4  # Triton keeps what it served
    client.close()
    session.stop()  # nothing left to put back
    assert _served(teams) == {"add_b": 8, "theirs": 8, "pushed": 4} and session.loaded_here() == []


def test_a_server_gone_at_the_end_of_the_run_is_said_not_put_back():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    gone = RemoteServer(f"127.0.0.1:{closed_port}", timeout=2)
    assert gone.put_back([("a", False), ("b", True)]) == [
        f"remote server at 127.0.0.1:{closed_port}: not live at the end of the run: the 2 models the run loaded there "
        f"were not put back (a, b)"]


def test_what_the_server_refuses_or_a_spent_deadline_leaves_is_said_model_by_model(tmp_path):
    """A server that restricts its model-repository API to a key the session lacks refuses the unload and the reload
    alike (and its index: the reload is tried all the same); with the deadline spent, no request is sent."""
    (tmp_path / "own").mkdir()
    with EmbeddedServer(tmp_path / "own", tmp_path / "logs", auto_complete=False,
                        extra_args=("--http-restricted-api=model-repository:admin-key=k",)) as server:
        keyless = RemoteServer(server.http_url)
        at = keyless.describe()
        refused = keyless.put_back([("theirs", True), ("ours", False)])
        assert len(refused) == 3 and refused[2] == f"{at}: the run's models put back: 0 unloaded, 2 not (above)"
        assert refused[0].startswith(f"{at}: ours could not be unloaded ([403] ") and "admin-key" in refused[0]
        assert refused[1].startswith(f"{at}: theirs was served before the run and could not be loaded from its own "
                                     f"repository ([403] ") and refused[1].endswith(": it serves what the run uploaded")
        assert keyless.put_back([("a", False), ("b", True)], deadline_s=0) == [
            f"{at}: b: not put back within 0 s", f"{at}: a: not put back within 0 s",
            f"{at}: the run's models put back: 0 unloaded, 2 not (above)"]


def test_the_workers_lists_are_one_and_a_model_is_the_runs_where_any_worker_found_it_not_ready():
    from tritonsuite.run.session import loaded_by_workers

    first = [["add_a", False], ["add_b", True], ["twice", False]]
    second = [["add_a", True], ["add_b", True], ["pushed", True], ["x", False]]  # add_a: the first worker's
    assert loaded_by_workers([first, second]) == [("add_a", False), ("add_b", True), ("twice", False),
                                                  ("pushed", True), ("x", False)]
    assert loaded_by_workers([second, first]) == [("add_a", False), ("add_b", True), ("pushed", True),
                                                  ("x", False), ("twice", False)]
    assert loaded_by_workers([]) == []


@pytest.mark.parametrize("workers", [[], ["-n", "2", "-v"]], ids=["one-process", "two-workers"])
def test_a_run_puts_the_server_back_once_at_its_end(teams, repo, tmp_path, workers):
    """One line at the end of the run says what was put back. On two workers, a worker must not unload what the
    other still measures: each reports what it loaded, and the controller puts the server back once both are done."""
    from tests.helpers import run_pytest

    # two deployments that share no model: two workers loading the same one at once is another matter (one CI run
    # saw Triton 2.51 answer such an upload "failed to poll from model repository"; not reproduced since)
    result = run_pytest(["--gpu", "tiny", "--server", "remote", "--triton-url", teams.http_url, "--triton-grpc-url",
                         f"127.0.0.1:{teams.ports['grpc']}", "--model-repository", str(repo), "--models",
                         "outer,stream_n", "-m", "conformance", "--checks", "identity", *workers, "-p", "no:warnings"],
                        tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout, result.stdout[-4000:]
    assert not workers or "[gw0]" in result.stdout and "[gw1]" in result.stdout  # a deployment a worker
    put_back = [line for line in result.stdout.splitlines() if "put back" in line]
    assert put_back == [f"tritonsuite: remote server at {teams.http_url}: the run's models put back: 4 unloaded, "
                        f"1 it served before reloaded from its own repository"], result.stdout[-4000:]
    assert _served(teams) == {"add_b": 8, "theirs": 8, "pushed": 8}


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
