"""perf_analyzer 2.51 on a sequence model and a decoupled one, with the kinds' options spelled in its names
(``--sequence-length``, ``--sequence-length-variation``, ``--sequence-id-range``; ``--streaming`` over gRPC,
asynchronous): it runs them, and the server counted exactly the requests it sent. Throughputs against the engine's
are measured and reported (docs/measurements.md), not asserted."""
import numpy as np
import pytest

from tests.kinds import bls_models, decoupled_model, sequence_model
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load.engine import LoadPoint
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.perfanalyzer import measure_with_perf_analyzer
from tritonsuite.server.embedded import EmbeddedServer

SETTINGS = MeasurementSettings(window_ms=400, warmup_ms=100, stability_percentage=90.0, max_trials=5)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    sequence_model(repo, "seq_direct", work_ms=1)
    decoupled_model(repo)
    bls_models(repo)
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        for name in ("seq_direct", "stream_n", "add_onnx", "bls_add"):
            server.load(repo / name)
        yield server


@pytest.mark.parametrize("model, inputs, flags", [
    ("seq_direct", {"INPUT": np.ones((1, 1), np.int32)},
     ["--sequence-length", "5", "--sequence-length-variation", "20", "--sequence-id-range", "100:200"]),
    ("stream_n", {"COUNT": np.full((1, 1), 3, np.int32), "DATA": np.ones((1, 4), np.float32)}, ["--streaming"]),
])
def test_perf_analyzer_drives_the_kind(server, pa, model, inputs, flags):
    description = server.model_description(model)
    extra = driver_for(description.with_sequences(length=5, id_start=100, id_end=200)).arguments()
    assert extra == flags
    found = measure_with_perf_analyzer(server, model, inputs, description.outputs, LoadPoint(1, 2, protocol="grpc"),
                                       SETTINGS, pa, extra=extra)
    command = found.meta["loadgen_command"]
    assert all(flag in command for flag in flags) and ("--async" in command) == ("--streaming" in flags)
    assert found.status in ("OK", "UNSTABLE"), found.reasons
    assert found.meta["server_fail_delta"] == 0 and found.result["Inferences/Second"] > 0


def test_bls_composing_models_side_by_side(server, pa):
    """--bls-composing-models: the engine and perf_analyzer (its console's "Composing models", which reaches no CSV)
    both attribute the ONNX model's time to the BLS model that calls it once per request."""
    from tritonsuite.load.engine import measure

    description = server.model_description("bls_add", ["add_onnx"])
    inputs = {"X": np.ones((1, 4), np.float32)}
    point = LoadPoint(1, 2)
    ours = measure(server, "bls_add", inputs, description.outputs, point, SETTINGS, description=description)
    theirs = measure_with_perf_analyzer(server, "bls_add", inputs, description.outputs, point, SETTINGS, pa,
                                        extra=driver_for(description).arguments())
    assert "--bls-composing-models=add_onnx" in theirs.meta["loadgen_command"]
    for found in (ours.meta["composing"], theirs.meta["composing"]):
        assert set(found) == {"add_onnx"} and abs(found["add_onnx"]["per request"] - 1.0) < 0.05
        assert found["add_onnx"]["Server Compute Infer"] > 0 and found["add_onnx"]["requests"] > 0
