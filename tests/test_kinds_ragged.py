"""A ragged deployment on the real embedded server, driven by the one engine: a python-backend model whose INPUT0
declares ``allow_ragged_batch`` behind a dynamic batcher, with a ``batch_input`` (BATCH_ELEMENT_COUNT of INPUT0).

The wheel's python backend hands a model only the tensors its requests carried (it makes no batch_input: its
requests show INPUT0 alone), so the model works out each request's element count itself, as the batch input
would give it, and writes one line per execution (the element counts of the requests Triton put in it) to a file the
test reads: the engine's load must make executions that mix element counts. The server itself refuses a request
that carries the batch_input's target, and the kind refuses it before anything is sent."""
import json

import numpy as np
import pytest

from tests.kinds import FAST, _write, served
from tritonsuite.core.description import describe
from tritonsuite.load.engine import LoadPoint, measure
from tritonsuite.load.kinds import driver_for

MODEL = '''
import json, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.log = config["parameters"]["executions"]["string_value"]

    def execute(self, requests):
        time.sleep(0.005)
        xs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        carried = sorted({t.name() for r in requests for t in r.inputs()})
        with open(self.log, "a") as log:
            log.write(json.dumps({"counts": [int(x[0].size) for x in xs], "inputs": carried}) + "\\n")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.full((x.shape[0], 1), x[0].size,
                                                                                np.float32))]) for x in xs]
'''

CONFIG = '''
name: "ragged"
backend: "python"
max_batch_size: 8
input {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }}
batch_input {{ kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_FP32 source_input: "INPUT0" }}
output {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }}
dynamic_batching {{ max_queue_delay_microseconds: 20000 }}
instance_group {{ count: 1 kind: KIND_CPU }}
parameters {{ key: "executions" value {{ string_value: "{log}" }} }}
'''


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return tmp_path_factory.mktemp("executions") / "executions.jsonl"


@pytest.fixture(scope="module")
def server(tmp_path_factory, log):
    yield from served(tmp_path_factory, lambda repo: [_write(repo / "ragged", CONFIG.format(log=log), "model.py",
                                                             MODEL)])


def executions(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_engine_sends_differing_element_counts_that_triton_batches_together(server, log, protocol):
    description = describe(server.model_config("ragged"))
    driver = driver_for(description)
    assert [type(k).__name__ for k in driver.kinds] == ["Ragged"]
    point, notes = driver.point(LoadPoint(1, 4, protocol=protocol, seed=3))
    assert "batch_input COUNT (BATCH_ELEMENT_COUNT of INPUT0) is the server's to fill, never sent" in notes[0]
    log.unlink(missing_ok=True)
    inputs = {"INPUT0": np.arange(16, dtype=np.float32).reshape(1, 16)}
    found = measure(server, "ragged", inputs, description.outputs, point, FAST, description=description)
    assert found.status == "OK", found.reasons
    ragged = found.meta["ragged"]
    assert ragged["lengths"] == [{"INPUT0": n} for n in (2, 4, 6, 8, 10, 12, 14, 16)]
    assert min(ragged["requests_sent_by_variant"]) > 0
    assert found.meta["kind"][-1] == "ragged"
    seen = executions(log)
    assert {n for e in seen for n in e["counts"]} == {2, 4, 6, 8, 10, 12, 14, 16}
    mixed = [e for e in seen if len(set(e["counts"])) > 1]
    assert mixed, f"no execution mixed element counts in {len(seen)}"  # a ragged batch was made
    assert {i for e in seen for i in e["inputs"]} == {"INPUT0"}  # COUNT was never sent (nor made, by this backend)


def test_a_request_carrying_the_batch_input_is_refused_by_the_kind_and_by_triton(server):
    description = describe(server.model_config("ragged"))
    inputs = {"INPUT0": np.ones((1, 4), np.float32), "COUNT": np.ones((1, 1), np.float32)}
    with pytest.raises(ValueError, match="^ragged: the request carries COUNT, a batch_input the server fills; send "
                                         r"only the model's inputs \(INPUT0\)$"):
        measure(server, "ragged", inputs, description.outputs, LoadPoint(1, 1), FAST, description=description)
    import tritonclient.http as httpclient

    client = server.client()
    try:
        sent = []
        for name, array in inputs.items():
            tensor = httpclient.InferInput(name, list(array.shape), "FP32")
            tensor.set_data_from_numpy(array)
            sent.append(tensor)
        with pytest.raises(Exception, match="expected 1 inputs but got 2 inputs"):
            client.infer("ragged", sent)
    finally:
        client.close()


def test_shared_memory_is_refused_naming_why(server):
    description = describe(server.model_config("ragged"))
    with pytest.raises(ValueError, match="^ragged is ragged: its requests differ in element count, and a "
                                         "shared-memory region fits one shape"):
        measure(server, "ragged", {"INPUT0": np.ones((1, 4), np.float32)}, description.outputs,
                LoadPoint(1, 1, shared_memory=True), FAST, description=description)


def test_accuracy_probes_ride_in_the_varied_load_as_given(server):
    description = describe(server.model_config("ragged"))
    inputs = {"INPUT0": np.arange(16, dtype=np.float32).reshape(1, 16)}
    probes = [{"INPUT0": np.ones((1, n), np.float32)} for n in (5, 16)]  # lengths the load's variants never take
    found = measure(server, "ragged", inputs, description.outputs, LoadPoint(1, 2, seed=1), FAST,
                    description=description, probes=probes, probe_share=0.3, probe_seed=2)
    assert found.status == "OK", found.reasons
    answered = found.probe_responses
    assert answered and {index for index, _ in answered} == {0, 1}
    for index, outputs in answered:  # each probe answered with its own element count, as sent
        assert outputs["OUTPUT0"].tolist() == [[float(probes[index]["INPUT0"].size)]]
    assert found.meta["accuracy_probes"]["answered"] == len(answered)


def test_worker_processes_vary_their_own_requests(server, log):
    from tritonsuite.load import sources
    from tritonsuite.load.engine import Traffic

    description = describe(server.model_config("ragged"))
    log.unlink(missing_ok=True)
    found = sources.get("suite", 2).measure(server, Traffic(
        "ragged", {"INPUT0": np.arange(16, dtype=np.float32).reshape(1, 16)}, description.outputs, LoadPoint(1, 4),
        description), FAST)
    assert found.status == "OK", found.reasons
    assert found.meta["workers"]["processes"] == 2 and found.meta["kind"][-1] == "ragged"
    assert found.meta["ragged"]["batch_inputs"] == [{"target": "COUNT", "kind": "BATCH_ELEMENT_COUNT",
                                                     "source_input": ["INPUT0"]}]
    assert {n for e in executions(log) for n in e["counts"]} == {2, 4, 6, 8, 10, 12, 14, 16}
