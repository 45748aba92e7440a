"""perf_analyzer 2.51 on a sequence model and a decoupled one, with the kinds' options spelled in its names
(``--sequence-length``, ``--sequence-length-variation``, ``--sequence-id-range``; ``--streaming`` over gRPC,
asynchronous): it runs them, and the server counted exactly the requests it sent. Throughputs against the engine's
are measured and reported (docs/measurements.md), not asserted."""
import numpy as np
import pytest

from tests.kinds import decoupled_model, sequence_model
from tritonsuite.judge.responses import described
from tritonsuite.load.composing import kind_arguments
from tritonsuite.load.engine import LoadPoint
from tritonsuite.load.perfanalyzer import measure_with_perf_analyzer
from tritonsuite.load.sequences import SequenceSettings
from tritonsuite.server.embedded import EmbeddedServer
from tritonsuite.settings import MeasurementSettings

SETTINGS = MeasurementSettings(window_ms=400, warmup_ms=100, stability_percentage=90.0, max_trials=5)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    sequence_model(repo, "seq_direct", work_ms=1)
    decoupled_model(repo)
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs")) as server:
        server.load(repo / "seq_direct")
        server.load(repo / "stream_n")
        yield server


@pytest.mark.parametrize("model, inputs, flags", [
    ("seq_direct", {"INPUT": np.ones((1, 1), np.int32)},
     ["--sequence-length", "5", "--sequence-length-variation", "20", "--sequence-id-range", "100:200"]),
    ("stream_n", {"COUNT": np.full((1, 1), 3, np.int32), "DATA": np.ones((1, 4), np.float32)}, ["--streaming"]),
])
def test_perf_analyzer_drives_the_kind(server, pa, model, inputs, flags):
    description = described(server, model)
    extra = kind_arguments(description, SequenceSettings(length=5, id_start=100, id_end=200))
    assert extra == flags
    found = measure_with_perf_analyzer(server, model, inputs, description.outputs, LoadPoint(1, 2, protocol="grpc"),
                                       SETTINGS, pa, extra=extra)
    command = found.meta["loadgen_command"]
    assert all(flag in command for flag in flags) and ("--async" in command) == ("--streaming" in flags)
    assert found.status in ("OK", "UNSTABLE"), found.reasons
    assert found.meta["server_fail_delta"] == 0 and found.result["Inferences/Second"] > 0
