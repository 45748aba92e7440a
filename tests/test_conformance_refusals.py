"""The refusals check when a malformed request kills the server itself (tritonsuite.judge.conformance.refusals): the
check notices the death after the probe that caused it, says so, and stops probing a dead server. Its own server
(the model ends it), started here: a python-backend model written in tmp_path that sends SIGKILL to the server's
process, whose pid it is given, when a request of another length than 16 reaches it."""
from __future__ import annotations

import numpy as np

from tritonsuite.judge.conformance import Target, run_check
from tritonsuite.server import EmbeddedServer

MODEL_PY = '''
import json, os, signal
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.server = int(json.loads(args["model_config"])["parameters"]["server_pid"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if x.shape[-1] != 16:
                os.kill(self.server, signal.SIGKILL)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", x)]))
        return responses
'''


def sixteen(batch: int, seed: int = 0) -> dict:
    return {"INPUT0": np.random.default_rng(seed).standard_normal((batch, 16)).astype(np.float32)}


def test_refusals_say_the_server_died_after_the_probe_that_killed_it(tmp_path):
    repo = tmp_path / "repo"
    directory = repo / "kills_server"
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(MODEL_PY)
    with EmbeddedServer(repo, tmp_path / "logs", auto_complete=False) as server:
        (directory / "config.pbtxt").write_text(f'''
name: "kills_server"
backend: "python"
max_batch_size: 8
input {{ name: "INPUT0" data_type: TYPE_FP32 dims: [-1] }}
output {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1] }}
instance_group {{ count: 1 kind: KIND_CPU }}
parameters {{ key: "server_pid" value {{ string_value: "{server.process.pid}" }} }}
''')
        server.load(directory)
        result = run_check(Target(server, directory, sixteen), "refusals")
        assert not server.is_alive()
    assert result.verdict == "fail", result.line()
    assert "http other size of a variable dim: afterwards " in result.reason, result.reason
    assert ": afterwards the server died" in result.reason, result.reason
    probes = result.evidence["probes"]
    assert probes[-1]["after"] == "the server died"  # the last probe sent: none after the death was noticed
    assert {p["protocol"] for p in probes} == {"http"}  # gRPC never tried on a dead server
