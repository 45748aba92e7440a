"""The cache check's judging (tritonsuite.judge.conformance.cache ``_judge_cache``) on statistics deltas and answers
built to cause each reason: a sound cache passes, each fault gives its one reason, and each count the check
compares is judged on both sides of what it must be."""
from __future__ import annotations

import pytest

import numpy as np

from tritonsuite.judge.conformance.cache import _judge_cache, _other

HIT = {"cache_hit_count": 1, "cache_miss_count": 0}
MISS = {"cache_hit_count": 0, "cache_miss_count": 1}


def judge(repeat=HIT, other=MISS, same_answer=True, steps_ran=None, fresh_differs=()):
    return _judge_cache(repeat, other, same_answer, steps_ran or {}, fresh_differs)


def test_cache_passes_a_hit_for_the_repeat_a_miss_for_another_input_and_a_fresh_computation_that_agrees():
    assert judge() == []
    assert judge(fresh_differs=None) == []  # a deployment that cannot batch two: no fresh computation to compare
    assert judge(steps_ran={"step_a": 0, "step_b": 0}) == []


@pytest.mark.parametrize("repeat", [{"cache_miss_count": 1}, {"cache_hit_count": 2}, {}])
def test_cache_fails_a_repeated_input_that_was_not_one_hit(repeat):
    problems = judge(repeat=repeat)
    assert problems == ["the repeated input was not a cache hit"]
    assert ("fail" if problems else "pass") == "fail"


def test_cache_fails_a_repeated_input_answered_differently():
    assert judge(same_answer=False) == ["the repeated input was answered differently"]


def test_cache_fails_an_ensemble_hit_that_still_ran_its_steps():
    assert judge(steps_ran={"step_a": 1, "step_b": 0}) == ["the ensemble's cache hit still ran its steps (step_a 1x)"]
    # no hit: the steps had to run; the missing hit is the fault, not them
    assert judge(repeat=MISS, steps_ran={"step_a": 1}) == ["the repeated input was not a cache hit"]


@pytest.mark.parametrize("other", [HIT, {"cache_hit_count": 0, "cache_miss_count": 0},
                                   {"cache_hit_count": 0, "cache_miss_count": 2}])
def test_cache_fails_a_different_input_that_was_not_one_miss(other):
    assert judge(other=other) == ["a different input was answered from the cache"]


def test_cache_fails_a_cached_answer_a_fresh_computation_disagrees_with():
    assert judge(fresh_differs=["OUTPUT0", "OUTPUT1"]) == [
        "the cached answer differs from what the model computes for the same input now (output OUTPUT0, OUTPUT1; a "
        "non-deterministic model: caching freezes one draw)"]


def test_cache_names_every_fault_it_saw():
    assert judge(repeat=MISS, other=HIT, same_answer=False, fresh_differs=["OUTPUT0"]) == [
        "the repeated input was not a cache hit", "the repeated input was answered differently",
        "a different input was answered from the cache",
        "the cached answer differs from what the model computes for the same input now (output OUTPUT0; a "
        "non-deterministic model: caching freezes one draw)"]


def test_cache_judges_a_repeat_with_no_hit_count_as_no_hit_even_where_steps_ran():
    assert judge(repeat={}, steps_ran={"step_a": 1}) == ["the repeated input was not a cache hit"]


def test_cache_names_every_step_a_hit_still_ran():
    assert judge(steps_ran={"step_a": 1, "step_b": 0, "step_c": 2}) == [
        "the ensemble's cache hit still ran its steps (step_a 1x, step_c 2x)"]


@pytest.mark.parametrize("other, problems", [
    ({"cache_miss_count": 1}, []),  # no hit counted: none
    ({"cache_hit_count": 1, "cache_miss_count": 1}, ["a different input was answered from the cache"]),
    ({"cache_hit_count": 0}, ["a different input was answered from the cache"]),  # no miss counted: none
])
def test_cache_reads_a_count_the_other_input_left_out_as_zero(other, problems):
    assert judge(other=other) == problems


def test_another_input_changes_the_first_element_of_the_first_input_only():
    request = {"x": np.array([[1, 5], [3, 4]], dtype=np.int64), "y": np.array([0.5], dtype=np.float32)}
    other = _other(request)
    assert list(other) == ["x", "y"] and other["y"] is request["y"]
    assert other["x"].tolist() == [[2, 5], [3, 4]] and request["x"].tolist() == [[1, 5], [3, 4]]
    assert _other({"b": np.array([[True, False], [True, True]])})["b"].tolist() == [[False, False], [True, True]]
    assert _other({"b": np.array([False, False])})["b"].tolist() == [True, False]
    assert _other({"s": np.array([[b"ab", b"cd"]], dtype=object)})["s"].tolist() == [[b"ab!", b"cd"]]
