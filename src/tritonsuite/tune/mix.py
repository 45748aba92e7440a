"""A configuration search for a set of deployments sharing one server (a mix's ``tune:`` block): instance counts and
batching of every deployment at once, each within its own latency bound, for the most weighted throughput.

- **The space** is the product of the members' own tune spaces (each model's ``tune:`` block, or its defaults,
  :func:`tritonsuite.profiles.tunespace.space_for`); a joint candidate is one :class:`~tritonsuite.profiles.tunespace.Candidate`
  per deployment, and its dimensions are ``<i>:<setting>`` (``0:instance_count``, ``1:max_queue_delay_microseconds``).
- **The walk** is the single-deployment tune's coordinate search (:func:`tritonsuite.tune.strategy.run_strategy`)
  over those dimensions, from the profile's configurations, within the budget.
- **A candidate** is loaded in place (``<deployment>_mixtune`` for each) and measured with every deployment's traffic
  together (the first target's load source, ``measure_together``: the mix's own load); its score is the sum over the
  deployments of ``weight x inferences/s`` when every deployment with a bound is within it (the search's judge), 0
  otherwise.
- **The winner** is measured again against the profile's configurations, interleaved A B three times, each side
  together; it is recommended when at least two pairs are both valid and in every such pair its weighted throughput
  beats the profile's by more than the minimum effect (10%) with every bound held. The configuration to ship (the
  winner, or the profile's own) is written per deployment as a stock ``config.pbtxt``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.load.engine import Measurement, Traffic
from tritonsuite.load.sources import TOGETHER
from tritonsuite.load.search import judge
from tritonsuite.profiles.tunespace import DIMENSIONS, Budget, Candidate, TuneSpace
from tritonsuite.tune.runner import TuneTarget
from tritonsuite.tune.strategy import Evaluation, run_strategy, winner
from tritonsuite.core.reasons import reason

ABAB_ROUNDS = 3
MIN_COMPARABLE = 2
MIN_EFFECT = 0.10
#: every "keep the profile's configurations" answer, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("no joint configuration measured kept every deployment within its bound",
           "test_mix_tune.py::test_the_profiles_configuration_stays_unless_the_winner_holds_up_interleaved"),
    reason("it is the best joint configuration measured (weighted {} inf/s)",
           "test_mix_tune.py::test_the_profiles_configuration_stays_unless_the_winner_holds_up_interleaved"),
    reason("in every comparable pair (at least {} needed) when measured again interleaved:",
           "test_mix_tune.py::test_the_profiles_configuration_stays_unless_the_winner_holds_up_interleaved"),
)
#: record(measurements, role, joint candidate, index of the deployment, meta) -> the row recorded
Record = Callable[[Measurement, str, "JointCandidate", int, dict], object]


@dataclass(frozen=True)
class JointCandidate:
    """One configuration per deployment of the set."""

    members: tuple[Candidate, ...]

    def __getattr__(self, dimension: str):  # "<i>:<setting>", as the coordinate walk reads a dimension
        index, _, setting = dimension.partition(":")
        if not index.isdigit():
            raise AttributeError(dimension)
        return getattr(self.members[int(index)], setting)

    def label(self) -> str:
        return " | ".join(c.label() for c in self.members)

    def to_dict(self) -> list:
        return [c.to_dict() for c in self.members]


@dataclass(frozen=True)
class JointSpace:
    spaces: tuple[TuneSpace, ...]

    @property
    def dimensions(self) -> tuple[str, ...]:
        return tuple(f"{i}:{d}" for i in range(len(self.spaces)) for d in DIMENSIONS)

    def values(self, dimension: str) -> tuple:
        index, _, setting = dimension.partition(":")
        return self.spaces[int(index)].values(setting)

    def valid(self, candidate: JointCandidate) -> bool:
        return all(s.valid(c) for s, c in zip(self.spaces, candidate.members))

    def with_value(self, candidate: JointCandidate, dimension: str, value) -> JointCandidate:
        index, _, setting = dimension.partition(":")
        members = list(candidate.members)
        members[int(index)] = self.spaces[int(index)].with_value(members[int(index)], setting, value)
        return JointCandidate(tuple(members))

    def size(self) -> int:
        n = 1
        for s in self.spaces:
            n *= s.size()
        return n


@dataclass
class MixTuneResult:
    deployments: list[str]
    default: JointCandidate
    evaluations: list[Evaluation]
    space_size: int
    best: Evaluation | None = None
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (profile's, winner's) weighted score per round
    recommended: bool = False
    reason: str = ""
    seconds: float = 0.0

    @property
    def shipped(self) -> JointCandidate:
        return self.best.candidate if self.recommended and self.best else self.default

    def describe(self) -> str:
        measured = f"{len(self.evaluations)} of {self.space_size} joint configurations measured"
        if self.recommended:
            gains = ", ".join(f"{(w / d - 1) * 100:+.1f}%" for d, w in self.pairs)
            return (f"ship {self.best.candidate.label()}: weighted {self.best.score:.1f} inf/s; against the profile's "
                    f"configurations, interleaved A B x{len(self.pairs)}: {gains}; {measured}")
        return f"keep the profile's configurations ({self.default.label()}): {self.reason}; {measured}"


def tune_set(targets: Sequence[TuneTarget], spaces: Sequence[TuneSpace], traffic: Sequence[Traffic],
             bounds: Sequence[LatencyBound | None], weights: Sequence[float], settings: MeasurementSettings,
             record: Record, budget: Budget) -> MixTuneResult:
    """Search the set's joint configuration, then check the winner (module docstring). ``traffic[i]`` is deployment
    i's load (its model name is replaced by the candidate's deployment, of the same kind); every point goes through
    ``record``."""
    for t in targets:
        t.check()
    source = targets[0].source
    source.require(TOGETHER, "tune a set of deployments (they are measured together)")
    space = JointSpace(tuple(spaces))
    default = JointCandidate(tuple(Candidate.of(t.config) for t in targets))
    started = time.monotonic()

    def score(found: list[Measurement]) -> tuple[float, bool, list[str]]:
        verdicts = [judge(m, b) if b is not None else (m.valid, m.status) for m, b in zip(found, bounds)]
        within = all(v[0] for v in verdicts)
        total = sum(w * float(m.result.get("Inferences/Second") or 0.0) for w, m in zip(weights, found))
        return (total if within else 0.0), within, [v[1] for v in verdicts]

    def measure_joint(names: Sequence[str], role: str, candidate: JointCandidate) -> tuple[float, bool]:
        found = source.measure_together(targets[0].server, [replace(t, model=n) for n, t in zip(names, traffic)],
                                        settings)
        value, within, whys = score(found)
        for i, m in enumerate(found):
            record(m, role, candidate, i, {"label": candidate.label(), "within": within, "why": whys[i],
                                           "weighted_score": round(value, 3)})
        return value, within

    def load(candidate: JointCandidate) -> list[str]:
        from tritonsuite.deploy.repository import copy_deployment

        names = []
        for t, c in zip(targets, candidate.members):
            name = f"{t.name}_mixtune"
            t.server.load(copy_deployment(t.directory, t.repository_dir, {**c.config(t.config), "name": name}))
            names.append(name)
        return names

    def evaluate(candidate: JointCandidate, incumbent: float) -> Evaluation:
        value, _ = measure_joint(load(candidate), "tune-evidence", candidate)
        return Evaluation(candidate, value, load=1)

    try:
        evaluations = run_strategy("search", space, default, evaluate,
                                   lambda n: n >= budget.configurations or time.monotonic() - started > budget.minutes * 60)
        result = MixTuneResult([t.name for t in targets], default, evaluations, space.size(), best=winner(evaluations))
        _verify(result, targets, load, measure_joint)
    finally:
        for t in targets:
            t.server.unload(f"{t.name}_mixtune")
    result.seconds = time.monotonic() - started
    return result


def _verify(result: MixTuneResult, targets, load, measure_joint) -> None:
    best = result.best
    if best is None:
        result.reason = "no joint configuration measured kept every deployment within its bound"
        return
    if best.candidate == result.default:
        result.reason = f"it is the best joint configuration measured (weighted {best.score:.1f} inf/s)"
        return
    names = load(best.candidate)
    for _ in range(ABAB_ROUNDS):  # A B A B: a busy spell hits both alike
        default, _ = measure_joint([t.name for t in targets], "tune-abab-default", result.default)
        won, _ = measure_joint(names, "tune-abab-winner", best.candidate)
        result.pairs.append((default, won))
    judged = [(d, w) for d, w in result.pairs if d > 0 and w > 0]
    if len(judged) >= MIN_COMPARABLE and all(w > d * (1 + MIN_EFFECT) for d, w in judged):
        result.recommended = True
        return
    result.reason = (f"the best joint configuration measured ({best.candidate.label()}, weighted {best.score:.1f} "
                     f"inf/s) did not beat it by more than {MIN_EFFECT:.0%} in every comparable pair (at least "
                     f"{MIN_COMPARABLE} needed) when measured again interleaved: " +
                     ", ".join(f"{d:.1f} vs {w:.1f}" for d, w in result.pairs))


def write_configs(out: Path, targets: Sequence[TuneTarget], shipped: JointCandidate) -> list[Path]:
    """The configurations to ship, one stock ``config.pbtxt`` per deployment under ``out/<deployment>/``."""
    from tritonsuite.tune import write_config

    return [write_config(out / t.name / "config.pbtxt", c.config(t.config)) for t, c in zip(targets, shipped.members)]
