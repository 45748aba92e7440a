"""How a tune walks its space: a coordinate search that uses the shape of the problem, or the full grid.

Throughput rises, then saturates, with instance count and batching, and a longer max queue delay trades latency for
batching: along each setting the score (inferences/s within the latency bound) climbs to a plateau or a peak. So the
search starts at the deployment's own configuration and walks one setting at a time (instance count, preferred batch
sizes, max queue delay, threads per instance, max batch size), from the current best to the next higher value while
the score gains more than ``MIN_GAIN`` (the suite's minimum effect: a gain within the noise of this host is none);
when the first step up does not gain, it walks down instead. After a pass over every setting that moved the best,
one more pass checks the settings again from the new best (they interact).

- **A gain is confirmed before the walk moves**: one measurement of a configuration minutes after another differs by
  up to 13% on a 2-core host (TFT cpu 2026-11-30: the own configuration 1411 then 1540 inf/s, delay 8000 us 1593
  then 1445). A step that gains is measured once more right after the best is measured once more, and the walk moves
  only when the mean of each still differs by more than ``MIN_GAIN``; a score is the mean of its measurements (a step
  from a best with no point within the bound needs no confirming: there is no ratio to be noise). Without
  this, that walk climbed to delay 8000 us on a +12.9% step that the A B rounds measured at -1.5%, spent its budget
  around it and never measured delay 0 us, where the grid and Model Analyzer found +38% to +51%.
- **Settings that pay only together**: when a pass moves nothing, the walk tries two settings changed at once, pairs
  of the single changes it measured from one base, ``DIAGONAL_TRIES`` of them. First the pairs that add instances
  and let the batcher dispatch sooner or smaller (a shorter max queue delay, a smaller max batch size, smaller
  preferred batch sizes): under a closed-loop load, a dynamic batcher that waits for a full batch hands all queued
  requests to one instance, so more instances pay only with such a change (TFT cpu, the grid of 2026-11-30: 2 instances
  alone +9%, delay 0 us alone -3%, both +62%); then by the product of their ratios to the base, a ratio within the noise
  counting as 1 (the noise must not order them). A pair that gains (confirmed as above) moves the best.
- **A step along the plateau**: when no pair gains either, the walk takes one sideways step to the best neighbour
  within the noise of the best and checks the settings from there (at most ``MAX_SIDEWAYS`` such steps).

A configuration is measured once, then again only to confirm a gain (the budget counts configurations; a confirming
measurement counts against the minutes). The budget (configurations, minutes) ends the walk wherever it is. The grid
measures every candidate once, in order (Model Analyzer's brute force), for comparison.

Pure: ``evaluate(candidate, incumbent_score)`` measures (or, in the unit tests, computes) one candidate; the
incumbent lets it give a clearly dominated candidate up early (0: never, as for a confirming measurement).
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
    """One measured candidate: its score (the most inferences/s within the bound, 0 when no point was within it; the
    mean of its measurements when it was measured again to confirm a gain) and the points behind it."""

    candidate: Candidate
    score: float
    load: int = 0  # the concurrency the score was measured at (0: none within the bound)
    early_stopped: str = ""  # why it was given up before its points were all measured ("" when it was not)
    points: list = field(default_factory=list)  # what the measuring side keeps (rows, measurements)
    order: int = 0  # 1 for the first candidate measured
    scores: list = field(default_factory=list)  # each measurement's score, when it was measured more than once

    def again(self, other: "Evaluation") -> None:
        """Add a later measurement of the same candidate: the score becomes the mean, the load the lowest within the
        bound (where each measurement's point was within it, closed loop), the points all of them."""
        self.scores = (self.scores or [self.score]) + [other.score]
        self.score = sum(self.scores) / len(self.scores)
        self.load = min((x for x in (self.load, other.load) if x), default=0)
        self.points.extend(other.points)


class _Spent(Exception):
    pass


def _key(value):
    return (max(value) if value else 0, len(value)) if isinstance(value, tuple) else value


def run_strategy(strategy: str, space: TuneSpace, start: Candidate,
                 evaluate: Callable[[Candidate, float], Evaluation], exhausted: Callable[[int], bool]
                 ) -> list[Evaluation]:
    """Every configuration measured, in order (one evaluation each, its later measurements merged into it).
    ``exhausted(n)`` says whether the budget allows no more after ``n`` configurations."""
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

    def confirmed(best: Candidate, candidate: Candidate) -> tuple[float, float]:
        """Measure the best, then the candidate, once more (no early stop): the mean scores of each."""
        for c in (best, candidate):
            if exhausted(len(order) - 1):  # as the step itself was: only the minutes can end it
                raise _Spent
            measured[c].again(evaluate(c, 0.0))
        return measured[best].score, measured[candidate].score

    try:
        if strategy == "grid":
            for candidate in space.grid():
                score(candidate)
        else:
            _coordinate(space, start, score, confirmed)
    except _Spent:
        pass
    return order


def _gains(value: float, best_value: float) -> bool:
    return value > best_value * (1 + MIN_GAIN)


def _held(best: Candidate, best_value: float, candidate: Candidate, value: float,
          confirmed: Callable[[Candidate, Candidate], tuple[float, float]]) -> tuple[float, float]:
    """(the best's score, the candidate's): both measured once more when the candidate seems to gain on a best with a
    point within the bound (from none there is no ratio to be noise), else as they were."""
    if _gains(value, best_value) and best_value > 0:
        return confirmed(best, candidate)
    return best_value, value


def _coordinate(space: TuneSpace, start: Candidate, score: Callable[[Candidate], float],
                confirmed: Callable[[Candidate, Candidate], tuple[float, float]]) -> None:
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
                    best_value, value = _held(best, best_value, candidate, value, confirmed)
                    singles.append((value / best_value if best_value > 0 else 0.0, best, dimension, ordered[step]))
                    if _gains(value, best_value):
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
            jump = _diagonal(space, best, best_value, singles, measured, score, confirmed)
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


#: settings whose lower value lets a dynamic batcher dispatch sooner or smaller: what lets more instances pay
SOONER = ("max_queue_delay_microseconds", "max_batch_size", "preferred_batch_sizes")


def _frees_instances(base: Candidate, d1: str, x1, d2: str, x2) -> bool:
    """More instances together with a batcher that dispatches sooner or smaller (a pair of single changes)."""
    changes = {d1: x1, d2: x2}
    more = "instance_count" in changes and _key(changes["instance_count"]) > _key(base.instance_count)
    other = next((d for d in changes if d != "instance_count"), None)
    if not more or other not in SOONER:
        return False
    value, was = changes[other], getattr(base, other)
    if other == "preferred_batch_sizes" and (value == () or was == ()):  # none: up to the max batch size
        return value != () and was == ()
    return _key(value) < _key(was)


def _within_noise(ratio: float) -> float:
    return 1.0 if abs(ratio - 1.0) <= MIN_GAIN else ratio


def _diagonal(space: TuneSpace, best: Candidate, best_value: float, singles: list, measured: set,
              score: Callable[[Candidate], float], confirmed: Callable) -> tuple[float, Candidate] | None:
    """Two settings changed at once: each pair of single changes measured from one base (``singles``: ratio to the
    base, base, setting, value) in two different settings, applied to that base; those that add instances and
    dispatch sooner first, then the highest product of their ratios (each within the noise counted as 1), in the
    order measured on a tie; DIAGONAL_TRIES of those not yet measured at most. The first whose gain over the best
    holds when both are measured again (its mean score and itself), or None."""
    pairs: dict[Candidate, tuple[bool, float]] = {}
    for i, (r1, base, d1, x1) in enumerate(singles):
        for r2, other, d2, x2 in singles[i + 1:]:
            if other == base and d1 != d2:
                candidate = space.with_value(space.with_value(base, d1, x1), d2, x2)
                if space.valid(candidate) and candidate not in measured:
                    promise = (_frees_instances(base, d1, x1, d2, x2), _within_noise(r1) * _within_noise(r2))
                    pairs[candidate] = max(pairs.get(candidate, promise), promise)
    for candidate in sorted(pairs, key=lambda c: (not pairs[c][0], -pairs[c][1]))[:DIAGONAL_TRIES]:
        value = score(candidate)
        measured.add(candidate)
        best_value, value = _held(best, best_value, candidate, value, confirmed)
        if _gains(value, best_value):
            return value, candidate
    return None


def winner(evaluations: list[Evaluation]) -> Evaluation | None:
    """The highest-scoring evaluation with a point within the bound (the first measured on a tie)."""
    within = [e for e in evaluations if e.score > 0 and not e.early_stopped]
    return max(within, key=lambda e: (e.score, -e.order), default=None)
