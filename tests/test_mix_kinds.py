"""A mix of kinds on the real embedded server: a sequence model (its sequence pattern, every open sequence ended)
and a decoupled model (over gRPC streams, its stream columns) measured together by the one window loop
(measure_together), each as it is measured alone."""
import numpy as np
import pytest

from tests.kinds import FAST, decoupled_model, sequence_model, served
from tritonsuite.core.description import describe
from tritonsuite.load.engine import LoadPoint, Traffic, measure_together
from tritonsuite.load.streams import STREAM_COLUMNS

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from served(tmp_path_factory, lambda repo: [sequence_model(repo, "seq_direct", "direct"),
                                                      decoupled_model(repo)])


def test_sequence_and_stream_together(server):
    seq, stream = describe(server.model_config("seq_direct")), describe(server.model_config("stream_n"))
    assert seq.sequence and stream.decoupled
    traffic = [Traffic("seq_direct", {"INPUT": np.ones((1, 1), np.int32)}, seq.outputs, LoadPoint(1, 2),
                       description=seq.with_sequences(length=4, id_start=100, id_end=200)),
               Traffic("stream_n", {"COUNT": np.full((1, 1), 3, np.int32), "DATA": np.ones((1, 4), np.float32)},
                       stream.outputs, LoadPoint(1, 2), description=stream)]
    first, second = measure_together(server, traffic, FAST)
    for m in (first, second):  # every request the server answered, the client sent (sequence ends included)
        assert m.meta["server_fail_delta"] == 0 and "server counted" not in " ".join(m.reasons)
        assert 0.0 <= m.meta["deployment_client_cpu_percent"] and m.meta["window_bounds_s"]
    s = first.meta["sequences"]
    assert s["sequences_started"] == s["sequences_ended"] > 2 and s["sequence_id_range"] == [100, 200]
    assert 0 <= s["ended_when_the_point_ended"] <= 2
    assert second.meta["protocol"] == "grpc (bidirectional stream)" and set(STREAM_COLUMNS) <= set(second.result)
    assert second.result["Responses/Request"] == 3.0
    # the two generators' windows are cut at the same instants
    assert first.meta["window_bounds_s"] == second.meta["window_bounds_s"]
