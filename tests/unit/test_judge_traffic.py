"""What the checks read and compare (tritonsuite.judge.conformance.traffic), on the server's own answers as data: the
statistics extension's answer summed over versions, its deltas, the Prometheus text, outputs compared bit for bit,
a decoupled answer's responses. The requests themselves are sent in the server-based tests."""
from __future__ import annotations

import time

import numpy as np
import pytest

from tritonsuite.judge.conformance.traffic import (METRICS, _counters, _summed, ms_per_execution, poll, responses,
                                                   same, stats_delta)
from tritonsuite.load.exchange import Answer


def version(inference: int, execution: int, success: int, batches: dict[int, tuple[int, int]], **parts) -> dict:
    """One version's entry of the statistics extension, as tritonserver 2.51 answers it."""
    stats = {"success": {"count": success, "ns": success * 1000}, **parts}
    return {"name": "m", "version": "1", "last_inference": 0, "inference_count": inference,
            "execution_count": execution, "inference_stats": stats,
            "batch_stats": [{"batch_size": size, "compute_input": {"count": n, "ns": 7},
                             "compute_infer": {"count": n, "ns": ns}, "compute_output": {"count": n, "ns": 9}}
                            for size, (n, ns) in batches.items()]}


def test_the_statistics_are_summed_over_the_versions():
    answer = {"model_stats": [version(6, 4, 6, {1: (2, 200), 2: (2, 600)}, fail={"count": 1, "ns": "50"}),
                              version(3, 1, 3, {2: (1, 1000)}, queue={"count": "3", "ns": 30})]}
    assert _summed(answer) == {"execution_count": 5, "inference_count": 9, "execution_ns": 1800,
                               "batch_stats": {1: 2, 2: 3}, "success_count": 9, "success_ns": 9000,
                               "fail_count": 1, "fail_ns": 50, "queue_count": 3, "queue_ns": 30}


def test_a_model_never_asked_has_nothing_counted():
    empty = {"execution_count": 0, "inference_count": 0, "execution_ns": 0, "batch_stats": {}}
    assert _summed({}) == empty and _summed({"model_stats": [{"inference_stats": {}}]}) == empty
    assert _summed({"model_stats": [{}, {"inference_count": 2}]}) == {**empty, "inference_count": 2}
    assert _summed({"model_stats": [{"inference_stats": {"success": {}}}]}) == {**empty, "success_count": 0,
                                                                                 "success_ns": 0}


def test_a_delta_counts_what_happened_between_two_reads():
    before = {"execution_count": 2, "inference_count": 3, "execution_ns": 100, "success_count": 3,
              "batch_stats": {1: 2, 4: 1}}
    after = {"execution_count": 5, "inference_count": 9, "execution_ns": 400, "success_count": 9, "fail_count": 2,
             "label": "not a count", "batch_stats": {4: 3, 1: 2, 2: 1}}
    assert stats_delta(after, before) == {"execution_count": 3, "inference_count": 6, "execution_ns": 300,
                                          "success_count": 6, "fail_count": 2, "batch_stats": {2: 1, 4: 2}}
    assert list(stats_delta(after, before)["batch_stats"]) == [2, 4]  # by batch size, the sizes not used left out
    assert ms_per_execution(stats_delta(after, before)) == pytest.approx(1e-4)
    assert ms_per_execution({"execution_ns": 3_000_000, "execution_count": 2}) == 1.5
    assert ms_per_execution({"execution_ns": 5_000_000, "execution_count": 1}) == 5.0
    assert ms_per_execution({}) == 0.0 and ms_per_execution({"execution_ns": 0, "execution_count": 0}) == 0.0


def test_the_counters_are_the_models_own_summed_over_versions_and_reasons():
    text = "\n".join([
        "# HELP nv_inference_request_success Number of successful inference requests",
        "# TYPE nv_inference_request_success counter",
        'nv_inference_request_success{model="m",version="1"} 10',
        'nv_inference_request_success{model="m",version="2"} 5',
        'nv_inference_request_success{model="m2",version="1"} 100',
        'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 2',
        'nv_inference_request_failure{model="m",reason="REJECTED",version="1"} 1.5e1',
        'nv_inference_count{model="m",version="1"} 40',
        'nv_inference_exec_count{model="m",version="1"} 20',
        'nv_inference_queue_duration_us{model="m",version="1"} 999',
        'nv_cache_num_hits_per_model{model="m",version="1"} 3',
        'nv_inference_request_success{model="other_m",version="1"} 7',
        'nv_inference_exec_count{model="m",version="1"} junk',
        'nv_inference_count {model="m",version="1"} 1'])
    assert METRICS == ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                       "nv_inference_exec_count", "nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model")
    assert _counters(text, "m") == {"nv_inference_request_success": 15.0, "nv_inference_request_failure": 17.0,
                                    "nv_inference_count": 40.0, "nv_inference_exec_count": 20.0,
                                    "nv_cache_num_hits_per_model": 3.0, "nv_cache_num_misses_per_model": 0.0}


def test_outputs_are_the_same_bit_for_bit_with_nan_equal_to_nan():
    a = {"F": np.array([1.0, np.nan], np.float32), "S": np.array([b"x"], dtype=object), "I": np.array([1, 2])}
    assert same(a, {k: v.copy() for k, v in a.items()})
    assert not same(a, {**a, "F": np.array([1.0, 2.0], np.float32)})
    assert not same(a, {**a, "F": np.array([1.0, np.nan], np.float64)})  # another dtype
    assert not same(a, {**a, "I": np.array([[1, 2]])})  # another shape
    assert not same(a, {**a, "S": np.array([b"y"], dtype=object)})
    assert not same(a, {k: v for k, v in a.items() if k != "I"}) and not same({"F": a["F"]}, a)
    assert not same({**a, "F": None}, a) and not same(a, {**a, "F": None})
    assert same({}, {})


def test_an_answers_responses_are_a_decoupled_models_list_or_the_one_response():
    one = {"OUT": np.zeros(2)}
    assert responses(Answer(0.0, 0.1, True, outputs=one)) == [one]
    assert responses(Answer(0.0, 0.1, True, outputs=[one, {}])) == [one, {}]


def test_poll_takes_the_first_read_that_agrees_with_the_next_and_does_not_wait_out_its_deadline():
    start = time.monotonic()
    assert poll(lambda: 7, timeout_s=5) == 7
    assert time.monotonic() - start < 0.9  # one pause of 30 ms between the two reads
    reads = iter([1, 2, 2, 3, 3])  # settled at 2, though not yet done: polled on until done
    assert poll(lambda: next(reads), lambda now: now >= 3, timeout_s=5) == 3
    assert poll(lambda: 7, timeout_s=0) == 7  # no time for a second read: the first one
