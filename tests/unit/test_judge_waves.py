"""The waves the queue_policy and priority checks share (judge/conformance/waves.py): what a batcher declares, which
deployments have a queue to judge, what one round of instances takes, how a backlog is sized, and how the parts of a
check make its verdict. The waves themselves are sent on the server in tests/test_conformance_queue.py."""
from __future__ import annotations

import pytest

from tritonsuite.judge.conformance.result import Target
from tritonsuite.judge.conformance.waves import (ALONE, MAX_BURST, PROBES, QUEUE_FULL, TIMED_OUT, Part, backlog,
                                                 batcher, capacity, combine, failures, latencies, not_queued, unpaced)
from tritonsuite.load.exchange import Answer

TENSORS = {"input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}]}


def config(name="m", max_batch_size=8, instances=1, **fields) -> dict:
    return {"name": name, "backend": "python", "max_batch_size": max_batch_size, **TENSORS,
            "instance_group": [{"count": instances, "kind": "KIND_CPU"}], **fields}


def target(tmp_path, main: dict, *others: dict, batch_size: int = 1) -> Target:
    """A deployment as the checks see it, read from its config.pbtxt (``others``: the repository's other models)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    for c in (main, *others):
        (tmp_path / c["name"]).mkdir()
        (tmp_path / c["name"] / "config.pbtxt").write_text(
            text_format.MessageToString(json_format.ParseDict(c, model_config_pb2.ModelConfig())))
    return Target(server=None, directory=tmp_path / main["name"], batch_size=batch_size)


def test_the_limits_of_a_wave():
    assert (MAX_BURST, PROBES, ALONE) == (96, 4, 6)
    assert (QUEUE_FULL, TIMED_OUT) == ("Exceeds maximum queue size", "Request timeout expired")


def test_a_batcher_s_fields_as_declared(tmp_path):
    queued = target(tmp_path, config(dynamic_batching={"priority_levels": 2, "default_priority_level": 1}))
    found = batcher(queued.description)  # uint64 fields as protobuf's JSON writes them
    assert found == {"priority_levels": "2", "default_priority_level": "1"}
    found["priority_levels"] = "3"  # a copy: the description's configuration stays as declared
    assert batcher(queued.description)["priority_levels"] == "2"
    assert batcher(target(tmp_path, config("plain")).description) == {}


def test_only_a_dynamic_batcher_has_a_queue_to_judge(tmp_path):
    step = config("step", dynamic_batching={})
    ensemble = {"name": "ens", "platform": "ensemble", "max_batch_size": 8, **TENSORS,
                "ensemble_scheduling": {"step": [{"model_name": "step", "model_version": -1,
                                                  "input_map": {"INPUT0": "INPUT0"},
                                                  "output_map": {"OUTPUT0": "OUTPUT0"}}]}}
    found = not_queued(target(tmp_path, ensemble, step), "priority")
    assert (found.deployment, found.check, found.declared, found.observed, found.verdict, found.reason) == (
        "ens", "priority", "ensemble", "-", "skipped",
        "ensemble: its scheduler has no queue; each step's own dynamic batcher queues (check the steps)")
    sequence = target(tmp_path, config("seq", sequence_batching={"direct": {}}))
    found = not_queued(sequence, "queue_policy")
    assert (found.deployment, found.check, found.observed, found.verdict, found.reason) == (
        "seq", "queue_policy", "-", "skipped",
        "sequence_batching: Triton's sequence batcher has no queue policy or priority levels")
    assert found.declared == sequence.description.scheduler
    found = not_queued(target(tmp_path, config("plain")), "queue_policy")
    assert (found.deployment, found.verdict, found.reason) == (
        "plain", "skipped", "no dynamic_batching: no batcher queue, each request goes to an instance as it comes")
    assert not_queued(target(tmp_path, config("queued", dynamic_batching={})), "queue_policy") is None


@pytest.mark.parametrize("instances, max_batch_size, batch_size, cap", [
    (2, 8, 3, 4),   # two requests of batch 3 fit an execution of 8, on each of two instances
    (2, 8, 16, 2),  # a request larger than max_batch_size still takes an instance
    (3, 8, 0, 24),  # a request of no batch counts as one
    (2, 0, 1, 2),   # batchless: one request per instance
    (1, 8, 1, 8)])
def test_what_one_round_of_instances_takes_at_once(tmp_path, instances, max_batch_size, batch_size, cap):
    found = target(tmp_path, config(max_batch_size=max_batch_size, instances=instances), batch_size=batch_size)
    assert capacity(found) == cap


def test_a_check_with_no_request_served_alone_is_skipped(tmp_path):
    found = unpaced(target(tmp_path, config(dynamic_batching={})), "queue_policy", "d: REJECT after 5000")
    assert (found.deployment, found.check, found.declared, found.observed, found.verdict, found.reason) == (
        "m", "queue_policy", "d: REJECT after 5000", "every request sent alone was refused", "skipped",
        "6 of 6 requests sent one at a time refused 'Request timeout expired': no execution time to size waves from")


def test_latencies_in_tenths_of_a_millisecond():
    assert latencies([Answer(1.0, 1.01234, True), Answer(2.0, 2.00006, False)]) == [12.3, 0.1]
    assert latencies([]) == []


def test_failures_are_the_refusals_not_known():
    answers = [Answer(0.0, 0.1, True), Answer(0.0, 0.1, False, error=f"HTTP 503: {QUEUE_FULL}"),
               Answer(0.0, 0.1, False, error=f"HTTP 503: {TIMED_OUT}"), Answer(0.0, 0.1, False, error="HTTP 500: x")]
    assert failures(answers) == answers[1:]
    assert failures(answers, QUEUE_FULL) == answers[2:]
    assert failures(answers, QUEUE_FULL, TIMED_OUT) == answers[3:]


def test_a_backlog_is_whole_rounds_of_instances_up_to_its_limit():
    assert backlog(2, 10.0, 95.0, 96) == (20, 100.0)  # ten rounds of two: 100 ms
    assert backlog(2, 10.0, 100.0, 96) == (20, 100.0)
    assert backlog(3, 10.0, 1000.0, 96) == (96, 320.0)  # capped: 96 requests last 32 rounds
    assert backlog(4, 2.5, 11.0, 96) == (20, 12.5)


def test_a_part_is_unjudged_and_empty_until_judged():
    part = Part("d")
    assert (part.declared, part.observed, part.problems, part.skipped, part.evidence) == ("d", "", (), "", None)


def test_a_check_fails_on_any_part_s_problem_naming_the_part():
    parts = [Part("default_queue_policy: max_queue_size 3", "a wave", ("refused early", "accepted whole"),
                  evidence={"wave": 14}),
             Part("default_queue_policy: REJECT after 5000", skipped="too fast"),
             Part("priority_queue_policy[1]: max_queue_size 2", "another wave", evidence={"wave": 12})]
    result = combine("m", "queue_policy", parts)
    assert (result.deployment, result.check, result.verdict) == ("m", "queue_policy", "fail")
    assert result.reason == ("default_queue_policy: max_queue_size 3: refused early; default_queue_policy: max_queue_"
                             "size 3: accepted whole")
    assert result.declared == ("default_queue_policy: max_queue_size 3; default_queue_policy: REJECT after 5000; "
                               "priority_queue_policy[1]: max_queue_size 2")
    assert result.observed == ("default_queue_policy: a wave; default_queue_policy: too fast; priority_queue_policy[1]: "
                               "another wave")
    assert result.evidence == {"default_queue_policy": {"wave": 14}, "default_queue_policy #1": {},
                               "priority_queue_policy[1] #2": {"wave": 12}}


def test_a_check_is_skipped_only_where_every_part_was():
    parts = [Part("d: one", skipped="too fast"), Part("e: two", skipped="too slow")]
    result = combine("m", "priority", parts)
    assert (result.deployment, result.check, result.declared, result.observed, result.verdict, result.reason) == (
        "m", "priority", "d: one; e: two", "d: too fast; e: too slow", "skipped", "d: too fast; e: too slow")
    assert result.evidence == {"d": {}, "e #1": {}}
    partly = combine("m", "priority", [Part("d: one", "judged", evidence={"n": 1}), Part("e: two", skipped="too slow"),
                                       Part("f: three", skipped="too few")])
    assert (partly.deployment, partly.check, partly.declared, partly.observed, partly.verdict, partly.reason) == (
        "m", "priority", "d: one; e: two; f: three", "d: judged; e: too slow; f: too few", "pass",
        "e: two: not judged: too slow; f: three: not judged: too few")
    assert partly.evidence == {"d": {"n": 1}, "e #1": {}, "f #2": {}}
    assert (combine("m", "priority", [Part("d: one", "judged")]).verdict,
            combine("m", "priority", [Part("d: one", "judged")]).reason) == ("pass", "")
