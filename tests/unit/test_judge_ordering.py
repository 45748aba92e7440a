"""The ordering check's judging (tritonsuite.judge.conformance.ordering) on bursts built to cause each verdict: the
pairs of answers it judges (sent and answered at set times) and the rounds' figures, both sides of its margins."""
from __future__ import annotations

import pytest

from tritonsuite.judge.conformance.ordering import OVERLAP, _pairs, declared_ordering, judge_ordering
from tritonsuite.load.exchange import Answer

PATH = "dynamic_batching.preserve_ordering"


def answer(start_ms: float, end_ms: float) -> Answer:
    return Answer(start_ms / 1e3, end_ms / 1e3, True)


# ------------------------------------------------------------------------------------------------------- pairs
def test_a_later_request_answered_first_is_a_reversed_contested_pair():
    assert _pairs([answer(0, 100), answer(20, 50)]) == (1, [(0, 1, 20.0, 50.0)])


def test_answers_in_the_order_sent_are_contested_but_not_reversed():
    assert _pairs([answer(0, 50), answer(20, 100)]) == (1, [])


@pytest.mark.parametrize("sent_ms, contested", [(7, 0), (9, 1)])
def test_pairs_sent_within_the_margin_are_not_judged(sent_ms, contested):
    assert _pairs([answer(0, 100), answer(sent_ms, 50)])[0] == contested


@pytest.mark.parametrize("earlier_end_ms, contested", [(27, 0), (29, 1)])
def test_an_earlier_request_answered_within_the_margin_of_the_later_s_send_is_not_contested(earlier_end_ms, contested):
    assert _pairs([answer(0, earlier_end_ms), answer(20, 10)])[0] == contested


@pytest.mark.parametrize("later_end_ms, reversed_", [(93, 0), (91, 1)])
def test_a_later_answer_first_by_less_than_the_margin_is_not_reversed(later_end_ms, reversed_):
    assert len(_pairs([answer(0, 100), answer(20, later_end_ms)])[1]) == reversed_


@pytest.mark.parametrize("sent_ms, contested", [(8, 0), (8.5, 1)])
def test_pairs_sent_exactly_the_margin_apart_are_not_judged(sent_ms, contested):
    assert _pairs([answer(0, 100), answer(sent_ms, 50)])[0] == contested


def test_pairs_sent_close_together_late_in_the_burst_are_not_judged():
    assert _pairs([answer(100, 300), answer(105, 200)]) == (0, [])


def test_an_earlier_request_answered_exactly_the_margin_after_the_later_s_send_is_not_contested():
    assert _pairs([answer(0, 28), answer(20, 10)]) == (0, [])


def test_a_later_answer_first_by_exactly_the_margin_is_not_reversed():
    assert _pairs([answer(0, 30), answer(10, 22)]) == (1, [])


def test_answers_are_paired_in_the_order_they_were_sent_not_the_order_listed():
    assert _pairs([answer(20, 50), answer(0, 100)]) == (1, [(1, 0, 20.0, 50.0)])


def test_every_later_pair_is_judged_past_one_sent_too_close():
    assert _pairs([answer(0, 100), answer(5, 100), answer(20, 50)]) == (2, [(0, 2, 20.0, 50.0), (1, 2, 15.0, 50.0)])


def test_every_pair_of_three_is_judged():
    assert _pairs([answer(0, 100), answer(20, 50), answer(40, 200)]) == (3, [(0, 1, 20.0, 50.0)])


def test_a_reversed_pair_gives_the_milliseconds_apart_to_a_tenth():
    assert _pairs([answer(0, 300), answer(112.34, 187.66)]) == (1, [(0, 1, 112.3, 112.3)])
    assert _pairs([answer(1000, 1300), answer(1112.34, 1187.66)]) == (1, [(0, 1, 112.3, 112.3)])


# ------------------------------------------------------------------------------------------------------ rounds
def burst(**changes) -> dict:
    """One burst's figures as _round reports them: sound, executions overlapping, nothing reversed."""
    contested, reversed_ = _pairs([answer(0, 100), answer(20, 50)]) if changes.pop("reversed", False) else (5, [])
    return {"requests": 24, "failed": 0, "errors": [], "contested_pairs": contested,
            "reversed_pairs": len(reversed_), "reversed_samples": reversed_, "compute_infer_s": 0.5, "wall_s": 0.25,
            "overlap": 2.0, **changes}


def test_a_burst_in_order_with_executions_overlapping_passes():
    assert judge_ordering(PATH, [burst()]) == ("pass", "")


def test_failed_requests_of_the_first_burst_fail():
    verdict, why = judge_ordering(PATH, [burst(failed=2, errors=["HTTP 500: gone"])])
    assert (verdict, why) == ("fail", "2 of 24 requests failed (HTTP 500: gone)")


def test_pairs_out_of_order_in_both_bursts_fail():
    verdict, why = judge_ordering(PATH, [burst(reversed=True), burst(reversed=True)])
    assert verdict == "fail"
    assert why == (f"{PATH} true, but 1 of 1 and 1 of 1 "
                   "contested request pairs came back in the other order (request"
                   " 1, sent 20.0 ms after request 0, answered 50.0 ms before it)")


def test_pairs_out_of_order_in_the_first_burst_only_are_a_stalled_sender():
    assert judge_ordering(PATH, [burst(reversed=True), burst()]) == ("pass", "")


@pytest.mark.parametrize("overlap, verdict", [(OVERLAP - 0.01, "skipped"), (OVERLAP, "pass")])
def test_executions_that_never_overlapped_are_inconclusive(overlap, verdict):
    got, why = judge_ordering(PATH, [burst(overlap=overlap)])
    assert got == verdict
    if verdict == "skipped":
        assert why == (f"inconclusive: executions never overlapped (compute 0.500 s over 0.250 s, overlap 1.19 < 1.2), "
                       f"so responses could not come out of order with or without {PATH}")


def test_no_contested_pair_is_inconclusive():
    assert judge_ordering(PATH, [burst(contested_pairs=0)]) == (
        "skipped", f"inconclusive: no request was still unanswered when a later one was sent, so responses could not "
                   f"come out of order with or without {PATH}")


def test_failed_requests_of_the_second_burst_are_not_judged():
    assert judge_ordering(PATH, [burst(reversed=True), burst(failed=1, errors=["HTTP 500: gone"])]) == ("pass", "")


def test_failed_requests_and_pairs_out_of_order_are_both_named():
    verdict, why = judge_ordering(PATH, [burst(reversed=True, failed=2, errors=["HTTP 500: gone"]),
                                         burst(reversed=True)])
    assert (verdict, why) == ("fail", f"2 of 24 requests failed (HTTP 500: gone); {PATH} true, but 1 of 1 and 1 of 1 "
                                      "contested request pairs came back in the other order (request 1, sent 20.0 ms "
                                      "after request 0, answered 50.0 ms before it)")


def test_preserve_ordering_is_read_from_the_dynamic_batcher_or_the_oldest_sequence_batcher():
    assert declared_ordering({"dynamic_batching": {"preserve_ordering": True}}) == (PATH, True)
    assert declared_ordering({"dynamic_batching": {}}) == (PATH, False)
    assert declared_ordering({"dynamic_batching": {}, "sequence_batching": {"oldest": {"preserve_ordering": True}}}) \
        == (PATH, False)  # the dynamic batcher's, where there is one
    assert declared_ordering({"sequence_batching": {"oldest": {"preserve_ordering": True}}}) == (
        "sequence_batching.oldest.preserve_ordering", True)
    assert declared_ordering({"sequence_batching": {"oldest": {}}}) == ("sequence_batching.oldest.preserve_ordering",
                                                                        False)
    assert declared_ordering({"sequence_batching": {"direct": {}}}) is None
    assert declared_ordering({"sequence_batching": None}) is None
    assert declared_ordering({}) is None
