"""The tune's answer from what it measured: ship the winner only when its throughput within the bound beat the
deployment's own configuration significantly over the interleaved A B rounds (at least two rounds with both points
valid); else keep the own configuration, saying why. The rounds are judged by compare_within_bound on rows built as
each side would measure."""
from __future__ import annotations

from tritonsuite.core.settings import LatencyBound
from tritonsuite.judge.compare import compare_within_bound
from tritonsuite.profiles.tunespace import Candidate
from tritonsuite.tune.runner import TuneResult, answer, settled
from tritonsuite.tune.strategy import Evaluation, winner
from tests.unit.test_compare import bound_row

OWN = Candidate(1, 8, (), 0, 0)
MORE = Candidate(2, 8, (), 0, 0)
BOUND = LatencyBound.parse("p99 <= 50 ms")


def _result(*evaluations: Evaluation) -> TuneResult:
    return TuneResult("m", BOUND, "search", 4, OWN, list(evaluations), best=winner(list(evaluations)))


def _rounds(own: float, won: float, *, statuses=("OK",) * 3, latency_ms=(10.0, 10.0)):
    """Three interleaved rounds: the own configuration at ``own`` inf/s, the winner at ``won``."""
    a = [bound_row(own, latency_ms[0], seed=i) for i in range(3)]
    b = [bound_row(won, latency_ms[1], status=status, seed=10 + i) for i, status in enumerate(statuses)]
    return compare_within_bound(a, b, BOUND)


def test_no_point_within_the_bound_keeps_the_own_configuration():
    result = _result(Evaluation(OWN, 0.0), Evaluation(MORE, 0.0))
    assert settled(result) and not result.recommended
    assert result.reason == "no configuration measured had a point within the bound"
    assert result.describe().startswith("keep the deployment's own configuration")


def test_the_own_configuration_measured_best_is_kept_without_measuring_again():
    result = _result(Evaluation(OWN, 900.0, load=4), Evaluation(MORE, 850.0, load=4))
    assert settled(result) and not result.recommended
    assert result.reason == "it is the best configuration measured (900.0 inf/s at concurrency 4)"


def test_another_winner_is_not_settled_before_it_is_measured_again():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    assert not settled(result) and result.reason == ""


def test_a_winner_that_beats_the_own_configuration_within_the_bound_is_shipped():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    answer(result, _rounds(800, 1000))
    assert result.recommended and result.reason == "" and result.shipped == MORE
    assert result.describe().startswith(f"ship {MORE.label()}: 1000.0 inf/s at concurrency 4; against the "
                                        f"deployment's own configuration, interleaved A B x3: improvement: 800.0 -> "
                                        f"1000.0 inf/s within p99 <= 50 ms (+25.0%")


def test_a_winner_within_the_noise_of_the_own_configuration_is_not_shipped():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    answer(result, _rounds(900, 905))  # measured again, the winner's lead is gone
    assert not result.recommended and result.shipped == OWN
    assert result.reason.startswith(
        f"the best configuration measured ({MORE.label()}, 1000.0 inf/s) did not beat it significantly in throughput "
        "within the bound when measured again interleaved, 3 x A B: no significant change: 900.0 -> 905.0 inf/s")
    assert result.describe().startswith("keep the deployment's own configuration")


def test_a_winner_whose_gain_breaks_the_bound_is_not_shipped():
    """More inferences/s, but every round's p99 over the bound: none of it counts."""
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=16))
    answer(result, _rounds(800, 1200, latency_ms=(10.0, 60.0)))
    assert not result.recommended and result.comparison.verdict == "regression"
    assert result.comparison.over == (0, 3) and "B broke the bound in 3 of 3 rounds" in result.reason


def test_one_comparable_round_is_too_few_to_ship():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    answer(result, _rounds(800, 1000, statuses=("UNSTABLE", "OK", "UNSTABLE")))
    assert not result.recommended and result.comparison.verdict == "not comparable"
    assert result.reason.endswith("did not beat it significantly in throughput within the bound when measured again "
                                  "interleaved, 3 x A B: not comparable (1 of 3 rounds had both points valid (2 "
                                  "needed))")
