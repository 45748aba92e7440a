"""The tune's answer from what it measured: ship the winner only when it beat the deployment's own configuration
significantly in every comparable A B pair (at least two); else keep the own configuration, saying why. The pairs
are judged by compare_points on rows built with the latencies each side would give."""
from __future__ import annotations

from tritonsuite.core.settings import LatencyBound
from tritonsuite.judge.compare import compare_points
from tritonsuite.profiles.tunespace import Candidate
from tritonsuite.tune.runner import TuneResult, answer, settled
from tritonsuite.tune.strategy import Evaluation, winner
from tests.unit.test_compare import latencies, perf_row

OWN = Candidate(1, 8, (), 0, 0)
MORE = Candidate(2, 8, (), 0, 0)


def _result(*evaluations: Evaluation) -> TuneResult:
    return TuneResult("m", LatencyBound.parse("p99 <= 50 ms"), "search", 4, OWN, list(evaluations),
                      best=winner(list(evaluations)))


def _pair(own: float, won: float, seed: int) -> object:
    """One A B pair: the own configuration at ``own`` inf/s, the winner at ``won`` (latencies inverse to it)."""
    return compare_points(perf_row(own, latencies(1000 / own, seed=seed)),
                          perf_row(won, latencies(1000 / won, seed=seed + 100)))


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


def test_a_winner_that_beats_the_own_configuration_in_every_pair_is_shipped():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    answer(result, [_pair(800, 1000, seed) for seed in range(3)])
    assert result.recommended and result.reason == "" and result.shipped == MORE
    assert result.describe().startswith("ship ")


def test_a_winner_that_does_not_beat_it_in_one_pair_is_not_shipped():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    pairs = [_pair(800, 1000, 0), _pair(800, 1000, 1), _pair(900, 905, 2)]  # the last: no significant change
    assert [p.verdict for p in pairs] == ["improvement", "improvement", "no significant change"]
    answer(result, pairs)
    assert not result.recommended and result.shipped == OWN
    assert result.reason.startswith(
        f"the best configuration measured ({MORE.label()}, 1000.0 inf/s) did not beat it significantly in every "
        "comparable pair (at least 2 needed) when measured again interleaved, 3 x A B: ")
    assert result.describe().startswith("keep the deployment's own configuration")


def test_one_comparable_pair_is_too_few_to_ship():
    result = _result(Evaluation(OWN, 800.0, load=4), Evaluation(MORE, 1000.0, load=4))
    unstable = perf_row(800, latencies(1.25), status="UNSTABLE")
    unsampled = perf_row(1000, latencies(1.0))
    unsampled.measurement["latency_samples_ms"] = []  # a row written before tritonsuite kept them
    pairs = [_pair(800, 1000, 0), compare_points(unstable, perf_row(1000, latencies(1.0))),
             compare_points(perf_row(800, latencies(1.25)), unsampled)]
    assert [p.verdict for p in pairs] == ["improvement", "not comparable", "not comparable"]
    answer(result, pairs)
    assert not result.recommended and "did not beat it significantly in every comparable pair" in result.reason
