"""How a tune walks its space: a coordinate search that uses the shape of the problem, or the full grid.

Throughput rises, then saturates, with instance count and batching, and a longer max queue delay trades latency for
batching: along each setting the score (inferences/s within the latency bound) climbs to a plateau or a peak. So the
search starts at the deployment's own configuration and walks one setting at a time (instance count, preferred batch
sizes, max queue delay, threads per instance, max batch size), from the current best to the next higher value while
the score gains more than ``MIN_GAIN`` (the suite's minimum effect: a gain within the noise of this host is none);
when the first step up does not gain, it walks down instead. The best moves as soon as a step gains. After a pass
over every setting that moved the best, one more pass checks the settings again from the new best (they interact).
Settings interact the other way too: on TFT cpu a shorter queue delay alone measured the same as the profile's (1479
against 1496 inf/s) but was what let more instances pay (1726 inf/s with 3); so when a pass moves nothing, the walk
takes one sideways step to the best neighbour within the noise of the best (``MIN_GAIN`` below it) and checks the
settings from there (at most ``MAX_SIDEWAYS`` such steps). Before that step, the walk tries two settings changed at
once rather than stop with budget left: the pairs of single changes it measured from one base (in two settings), the
most promising first (the product of their ratios to the base), ``DIAGONAL_TRIES`` of them; one that gains moves the
best and the walk goes on from there. On TFT cpu (2026-11-29) every single change from the profile's configuration
measured 4-26% lower (2 instances 2565, delay 0 us 3005 against 3133 inf/s) and the walk stopped after 6 of its 9;
both together measured 4559 inf/s, the grid's best; a second walk "gained" 5.7% with delay 8000 us (noise: the grid
measured it at 2987), climbed there and spent its budget around it. Nothing is measured twice, and the budget
(configurations, minutes) ends the walk wherever it is. The grid measures every candidate in order (Model Analyzer's
brute force), for comparison.

Pure: ``evaluate(candidate, incumbent_score)`` measures (or, in the unit tests, computes) one candidate; the
incumbent lets it give a clearly dominated candidate up early.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tritonsuite.profiles.tunespace import DIMENSIONS, Candidate, TuneSpace

#: a step must gain more than this to move the best: the suite's minimum effect (judge.compare), as the noise between
#: two measurements of one configuration minutes apart reaches it (TFT cpu 2026-11-29: 2961, 2986 and 3223 inf/s)
MIN_GAIN = 0.10
MAX_PASSES = 2
MAX_SIDEWAYS = 1  # steps along a plateau when no setting gains on its own
DIAGONAL_TRIES = 2  # pairs of single changes tried when a pass moves nothing and no neighbour is within the noise
STRATEGIES = ("search", "grid")


@dataclass
class Evaluation:
    """One measured candidate: its score (the most inferences/s within the bound, 0 when no point was within it)
    and the points behind it."""

    candidate: Candidate
    score: float
    load: int = 0  # the concurrency the score was measured at (0: none within the bound)
    early_stopped: str = ""  # why it was given up before its points were all measured ("" when it was not)
    points: list = field(default_factory=list)  # what the measuring side keeps (rows, measurements)
    order: int = 0  # 1 for the first candidate measured


class _Spent(Exception):
    pass


def _key(value):
    return (max(value) if value else 0, len(value)) if isinstance(value, tuple) else value


def run_strategy(strategy: str, space: TuneSpace, start: Candidate,
                 evaluate: Callable[[Candidate, float], Evaluation], exhausted: Callable[[int], bool]
                 ) -> list[Evaluation]:
    """Every evaluation made, in order. ``exhausted(n)`` says whether the budget allows no more after ``n``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"tune strategy {strategy!r}; valid choices: {', '.join(STRATEGIES)}")
    measured: dict[Candidate, Evaluation] = {}
    order: list[Evaluation] = []

    def best_score() -> float:
        return max((e.score for e in order), default=0.0)

    def score(candidate: Candidate) -> float:
        if candidate not in measured:
            if exhausted(len(order)):
                raise _Spent
            found = evaluate(candidate, best_score())
            found.order = len(order) + 1
            measured[candidate] = found
            order.append(found)
        return measured[candidate].score

    try:
        if strategy == "grid":
            for candidate in space.grid():
                score(candidate)
        else:
            _coordinate(space, start, score)
    except _Spent:
        pass
    return order


def _coordinate(space: TuneSpace, start: Candidate, score: Callable[[Candidate], float]) -> None:
    best, best_value = start, score(start)
    bases, passes, sideways = {start}, 0, 0
    singles: list[tuple[float, Candidate, str, object]] = []  # (ratio to its base, base, setting, value) of each
    measured: set[Candidate] = {start}  # single change measured; what the walk measured
    while passes < MAX_PASSES:
        passes += 1
        moved_in_pass = False
        level: list[tuple[float, Candidate]] = []  # neighbours within the noise of the best: a plateau
        for dimension in getattr(space, "dimensions", DIMENSIONS):  # a set's joint space names its own
            current = getattr(best, dimension)
            ordered = sorted(set(space.values(dimension)) | {current}, key=_key)
            if len(ordered) < 2:
                continue
            here = ordered.index(current)
            for direction in (1, -1):
                moved, step = False, here
                while 0 <= step + direction < len(ordered):
                    step += direction
                    candidate = space.with_value(best, dimension, ordered[step])
                    if not space.valid(candidate):
                        continue
                    value = score(candidate)
                    measured.add(candidate)
                    singles.append((value / best_value if best_value > 0 else 0.0, best, dimension, ordered[step]))
                    if value > best_value * (1 + MIN_GAIN):
                        best, best_value, moved = candidate, value, True
                        bases.add(best)
                    else:
                        if value >= best_value * (1 - MIN_GAIN) and candidate not in bases:
                            level.append((value, candidate))
                        break  # saturated (or past the peak) this way
                if moved:
                    moved_in_pass = True
                    break  # it climbed up: no need to look down
        if not moved_in_pass:
            jump = _diagonal(space, best_value, singles, measured, score)
            if jump is not None:  # two settings that pay only together
                passes -= 1  # it moved: the settings are checked again from there
                best_value, best = jump
                bases.add(best)
                continue
            if sideways >= MAX_SIDEWAYS or not level:
                return
            sideways, passes = sideways + 1, passes - 1  # a sideways step: its pass does not count as a move's
            best_value, best = max(level, key=lambda vc: vc[0])
            bases.add(best)


def _diagonal(space: TuneSpace, best_value: float, singles: list, measured: set,
              score: Callable[[Candidate], float]) -> tuple[float, Candidate] | None:
    """Two settings changed at once: each pair of single changes measured from one base (``singles``: ratio to the
    base, base, setting, value) in two different settings, applied to that base, the highest product of their
    ratios first, DIAGONAL_TRIES of those not yet measured at most. The first that gains more than MIN_GAIN over
    the best (its score and itself), or None."""
    pairs = {}
    for i, (r1, base, d1, x1) in enumerate(singles):
        for r2, other, d2, x2 in singles[i + 1:]:
            if other == base and d1 != d2:
                candidate = space.with_value(space.with_value(base, d1, x1), d2, x2)
                if space.valid(candidate) and candidate not in measured:
                    pairs[candidate] = max(pairs.get(candidate, 0.0), r1 * r2)
    for candidate in sorted(pairs, key=lambda c: -pairs[c])[:DIAGONAL_TRIES]:
        value = score(candidate)
        measured.add(candidate)
        if value > best_value * (1 + MIN_GAIN):
            return value, candidate
    return None


def winner(evaluations: list[Evaluation]) -> Evaluation | None:
    """The highest-scoring evaluation with a point within the bound (the first measured on a tie)."""
    within = [e for e in evaluations if e.score > 0 and not e.early_stopped]
    return max(within, key=lambda e: (e.score, -e.order), default=None)
