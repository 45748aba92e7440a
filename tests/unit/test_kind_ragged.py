"""The ragged kind's decisions (load/kinds/ragged.py): which deployments it applies to, the note its row carries,
what it refuses, and the requests of differing element counts it cuts from one prepared request (HTTP and gRPC)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tritonsuite.core.description import describe
from tritonsuite.deploy.export import ExportUnsupported
from tritonsuite.load.exchange import prepare
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.kinds.ragged import BATCH_INPUT_KINDS, VARIANTS, Ragged, Varied, variants
from tritonsuite.load.point import LoadPoint


def config(ragged=True, dims=(-1,), batch_input_kind="BATCH_ELEMENT_COUNT", **extra):
    found = {"name": "rag", "backend": "python", "max_batch_size": 8,
             "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": list(dims), "allow_ragged_batch": ragged},
                       {"name": "MASK", "data_type": "TYPE_INT32", "dims": [4]}],
             "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
             "dynamic_batching": {"max_queue_delay_microseconds": 1000}}
    if batch_input_kind:
        found["batch_input"] = [{"kind": batch_input_kind, "target_name": ["COUNT"], "data_type": "TYPE_FP32",
                                 "source_input": ["INPUT0"]}]
    return describe({**found, **extra})


def tensors(batch=2, length=16, count=False):
    found = {"INPUT0": np.arange(batch * length, dtype=np.float32).reshape(batch, length),
             "MASK": np.ones((batch, 4), np.int32)}
    if count:
        found["COUNT"] = np.ones((batch, 1), np.float32)
    return found


def test_it_applies_to_a_batching_deployment_declaring_allow_ragged_batch_only():
    assert Ragged.applies(config())
    assert Ragged.applies(config(dims=(16,)))  # declared, though nothing can vary
    assert not Ragged.applies(config(ragged=False))
    assert not Ragged.applies(config(max_batch_size=0))
    sequence = describe({k: v for k, v in config().config.items() if k != "dynamic_batching"}
                        | {"sequence_batching": {"oldest": {}}})
    assert not Ragged.applies(sequence)  # its requests follow their sequences
    assert [type(k).__name__ for k in driver_for(config()).kinds] == ["Ragged"]
    assert driver_for(config(ragged=False)).kinds == ()


def test_its_row_note_names_the_varied_inputs_and_the_batch_input_never_sent():
    point, notes = driver_for(config()).point(LoadPoint(2, 4))
    assert point == LoadPoint(2, 4)
    assert notes == [f"ragged: each request cuts INPUT0 to one of up to {VARIANTS} element counts (a seeded share of "
                     f"the request's own, 1/{VARIANTS} to all), so the dynamic batcher meets requests of differing "
                     f"shapes; batch_input COUNT (BATCH_ELEMENT_COUNT of INPUT0) is the server's to fill, never sent"]
    point, notes = driver_for(config(dims=(16,), batch_input_kind="")).point(LoadPoint(1, 1))
    assert notes == ["ragged: allow_ragged_batch on INPUT0, but no variable dim: every request carries the same "
                     "element count (no ragged batch is made)"]


def test_shared_memory_is_dropped_with_a_note_and_refused_when_asked_for_directly():
    driver = driver_for(config())
    point, notes = driver.point(LoadPoint(1, 1, shared_memory=True))
    assert not point.shared_memory
    assert notes[0].endswith("; inputs and outputs travel over the network, not shared memory (its regions fit one "
                             "shape)")
    with pytest.raises(ValueError, match=r"^rag is ragged: its requests differ in element count, and a shared-memory "
                                         r"region fits one shape \(send it over the network\)$"):
        driver.check("rag", LoadPoint(1, 1, shared_memory=True), ())
    fixed = driver_for(config(dims=(16,)))  # nothing varies: its one shape fits the regions
    assert fixed.point(LoadPoint(1, 1, shared_memory=True))[0].shared_memory
    fixed.check("rag", LoadPoint(1, 1, shared_memory=True), ())


def test_probes_ride_in_its_load():
    driver = driver_for(config())
    assert driver.probes and not driver.sequenced
    driver.check("rag", LoadPoint(1, 1), [tensors(1)])  # each probe as given, in place of a varied load request


def test_a_batch_input_of_an_unknown_kind_is_refused_naming_it_and_the_valid_kinds():
    driver = driver_for(config(batch_input_kind="BATCH_SOMETHING"))
    with pytest.raises(ValueError) as caught:
        driver.check("rag", LoadPoint(1, 1), ())
    assert str(caught.value) == (f"rag batch_input COUNT has kind 'BATCH_SOMETHING': expected one of "
                                 f"{', '.join(BATCH_INPUT_KINDS)}")
    with pytest.raises(ExportUnsupported, match="rag batch_input COUNT has kind 'BATCH_SOMETHING'"):
        driver.point(LoadPoint(1, 1))


def test_perf_analyzer_gets_no_option_for_it():
    assert driver_for(config()).arguments() == []


def _http_inputs(request):
    head, _, body = request.data.partition(b"\r\n\r\n")
    size = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                    if line.lower().startswith(b"inference-header-content-length")))
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    assert length == len(body)
    header, offset, found = json.loads(body[:size]), size, {}
    for i in header["inputs"]:
        n = i["parameters"]["binary_data_size"]
        dtype = np.float32 if i["datatype"] == "FP32" else np.int32
        found[i["name"]] = np.frombuffer(body[offset:offset + n], dtype).reshape(i["shape"])
        offset += n
    return found


def _grpc_inputs(request):
    from tritonclient.grpc import service_pb2

    message = service_pb2.ModelInferRequest()
    message.ParseFromString(request.data)
    return {i.name: np.frombuffer(raw, np.float32 if i.datatype == "FP32" else np.int32).reshape(list(i.shape))
            for i, raw in zip(message.inputs, message.raw_input_contents)}


@pytest.mark.parametrize("grpc", [False, True], ids=["http", "grpc"])
def test_one_request_is_cut_into_requests_of_differing_element_counts(grpc):
    sent = tensors(2, 16)
    request = prepare("127.0.0.1", "rag", sent, ["OUTPUT0"], grpc, decode=False)
    found = variants(request, grpc, {"INPUT0": 0}, ["COUNT"])
    assert [dict(v.lengths) for v in found] == [{"INPUT0": n} for n in (2, 4, 6, 8, 10, 12, 14, 16)]
    for variant in found:
        read = (_grpc_inputs if grpc else _http_inputs)(variant.request)
        n = dict(variant.lengths)["INPUT0"]
        np.testing.assert_array_equal(read["INPUT0"], sent["INPUT0"][:, :n])  # each sample's first n elements
        np.testing.assert_array_equal(read["MASK"], sent["MASK"])  # not ragged: as given
        assert variant.request.decode_outputs == [] and variant.request.batched


def test_a_short_input_gives_as_many_counts_as_it_has_elements():
    request = prepare("127.0.0.1", "rag", tensors(1, 3), ["OUTPUT0"], False, decode=False)
    assert [dict(v.lengths) for v in variants(request, False, {"INPUT0": 0}, [])] == [{"INPUT0": n} for n in (1, 2, 3)]


@pytest.mark.parametrize("grpc", [False, True], ids=["http", "grpc"])
def test_a_request_carrying_the_batch_input_is_refused_naming_it(grpc):
    request = prepare("127.0.0.1", "rag", tensors(1, 4, count=True), ["OUTPUT0"], grpc, decode=False)
    with pytest.raises(ValueError) as caught:
        driver_for(config()).pattern(request, grpc, LoadPoint(1, 1))
    assert str(caught.value) == ("ragged: the request carries COUNT, a batch_input the server fills; send only the "
                                 "model's inputs (INPUT0, MASK)")


def test_requests_are_a_seeded_choice_of_the_variants():
    request = prepare("127.0.0.1", "rag", tensors(1, 16), ["OUTPUT0"], False, decode=False)
    pattern = driver_for(config()).pattern(request, False, LoadPoint(1, 1, seed=7))
    again = driver_for(config()).pattern(request, False, LoadPoint(1, 1, seed=7))
    assert isinstance(pattern, Varied)
    first = [pattern.request(pattern.free_slot()).data for _ in range(200)]
    assert first == [again.request(0).data for _ in range(200)]
    assert len(set(first)) == VARIANTS and sum(pattern.sent) == 200 and min(pattern.sent) > 0
    assert pattern.closing() == [] and pattern.done(0) is None


def test_nothing_is_cut_where_no_ragged_input_has_a_variable_dim():
    request = prepare("127.0.0.1", "rag", {"INPUT0": np.ones((1, 16), np.float32), "MASK": np.ones((1, 4), np.int32)},
                      ["OUTPUT0"], False, decode=False)
    assert driver_for(config(dims=(16,))).pattern(request, False, LoadPoint(1, 1)) is None
