"""A tune on the running server: each candidate is a stock deployment (``<deployment>_tune``) loaded in place
under explicit model control (no restart), measured by the target's load source (:mod:`tritonsuite.load.sources`:
the suite's engine unless told otherwise; it needs the ``stop_early`` capability) at the space's concurrencies,
highest first, until a point is within the latency bound; then the winner is checked before it is recommended.

- **Measuring a candidate**: a point is given up (STOPPED) after two windows clearly over the bound (the search's
  own rule) or, from the second candidate on, when its first two windows each gave less than ``DOMINATED_SHARE``
  of the best score so far: at a lower concurrency it would give less still (closed loop), so the candidate ends
  there, marked early-stopped. Its score is the inferences/s of the first (highest-concurrency) point within the
  bound, 0 when none was. A candidate measured again (only to confirm a gain, :mod:`tritonsuite.tune.strategy`) is
  never given up early, and its rows say so.
- **Every kind as it is**: a candidate is the deployment's own configuration with the tuned fields set
  (:class:`~tritonsuite.profiles.tunespace.Candidate`: a sequence model's sequence batcher, never dynamic batching
  beside it) in a copy of its directory, and it is measured by its description as the server runs it (sequences for a
  sequence model, streams for a decoupled one). An ensemble or a batchless deployment is refused in one line.
- **A winner that holds**: its accuracy first. Where the kind lets probes ride in the load, accuracy under load at
  the winner's load (a share of its requests carry the model's accuracy samples, judged against the same requests
  sent alone); a sequence or a decoupled model is judged whole instead
  (:func:`tritonsuite.judge.responses.kind_accuracy` on the winner: sequences sent interleaved against each sent
  alone, a stream's responses multiplexed against each request alone). Then the winner and the deployment's own
  configuration measured interleaved, A B three times, each at the load it scored at (the own configuration at the
  winner's when it had no point within the bound; a step lower in a round where that load is over the bound now:
  :func:`tritonsuite.judge.compare.at_the_bound`), and judged as the objective says: by throughput within the
  bound (:func:`tritonsuite.judge.compare.compare_within_bound`: every stable window of the rounds, 0 for a point
  still over the bound, beyond the minimum effect and by Mann-Whitney U on those windows; a pair's request latencies
  cannot say it: a batcher that ends a tail gains throughput while most requests get a little slower, and two loads'
  latencies are not comparable). The winner is recommended only when accuracy held (or the model has no accuracy
  task, which is said), at least two rounds had both points valid, and the winner's throughput within the bound is a
  significant improvement.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from tritonsuite.core.description import ModelDescription
from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.core.spec import ModelSpec
from tritonsuite.deploy.deployment import Deployment
from tritonsuite.deploy.repository import copy_deployment
from tritonsuite.load import sources as load_sources
from tritonsuite.load.engine import LoadPoint, Measurement, Traffic
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.search import judge, stop_when_clearly_over
from tritonsuite.profiles.tunespace import Budget, Candidate, TuneError, TuneSpace
from tritonsuite.tune.strategy import Evaluation, run_strategy, winner
from tritonsuite.core.reasons import reason

DOMINATED_SHARE = 0.5
ABAB_ROUNDS = 3  # winner and default measured interleaved this many times each
#: record(measurement, deployment name, its description as served, tune metadata) -> the row it recorded
Record = Callable[[Measurement, str, ModelDescription, dict], object]


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("no configuration measured had a point within the bound",
           "unit/test_tune_answers.py::test_no_point_within_the_bound_keeps_the_own_configuration"),
    reason("it is the best configuration measured ({} inf/s at concurrency {})",
           "unit/test_tune_answers.py::test_the_own_configuration_measured_best_is_kept_without_measuring_again"),
    reason("the best configuration ({}) broke {}",
           "test_tune_accuracy.py::test_a_winner_that_breaks_accuracy_under_load_is_not_recommended"),
    reason("did not beat it significantly in throughput within the bound",
           "unit/test_tune_answers.py::test_a_winner_within_the_noise_of_the_own_configuration_is_not_shipped",
           "unit/test_tune_answers.py::test_one_comparable_round_is_too_few_to_ship"),
)


@dataclass(frozen=True)
class TuneTarget:
    """What is tuned: a deployment already loaded with its own configuration, and what a candidate deployment is
    made from: the files of its directory under the candidate's configuration, in ``repository_dir``."""

    server: object  # a TritonServer with explicit model control
    deployment: Deployment  # as the run serves it (a sequence model's description: its sequences as sent)
    repository_dir: Path
    batch_size: int
    source: load_sources.LoadSource = field(default_factory=load_sources.get)  # who measures (the default source)

    @property
    def name(self) -> str:
        return self.deployment.name

    @property
    def spec(self) -> ModelSpec:
        return self.deployment.spec

    @property
    def directory(self) -> Path:  # the deployment's directory as loaded (its model file, a python model's model.py)
        return self.deployment.directory

    @property
    def config(self) -> Mapping:  # its own configuration (JSON): the profile's online one, or a user's config.pbtxt
        return self.deployment.config

    @property
    def precision(self) -> str:
        return self.deployment.precision

    @property
    def description(self) -> ModelDescription:
        return self.deployment.description

    @property
    def tune_name(self) -> str:
        return f"{self.name}_tune"

    def refuses(self) -> str | None:
        """Why this deployment's configuration cannot be tuned, or None."""
        why = driver_for(self.description).untunable()
        return f"{self.name} {why}" if why else None

    def check(self) -> "TuneTarget":
        """Itself, or a TuneError saying in one line why it cannot be tuned."""
        if reason := self.refuses():
            raise TuneError(reason)
        return self


@dataclass
class TuneResult:
    deployment: str
    bound: LatencyBound
    strategy: str
    space_size: int
    default: Candidate
    evaluations: list[Evaluation]
    best: Evaluation | None = None
    comparison: object = None  # BoundComparison of the A B rounds: throughput within the bound
    accuracy: object = None  # UnderLoadResult at the winner's load
    accuracy_note: str = ""
    recommended: bool = False
    reason: str = ""
    seconds: float = 0.0

    @property
    def shipped(self) -> Candidate:
        """What to ship: the winner when recommended, else the profile's own configuration."""
        return self.best.candidate if self.recommended and self.best else self.default

    def describe(self) -> str:
        measured = (f"{len(self.evaluations)} of {self.space_size} configurations measured ({self.strategy}, "
                    f"{sum(1 for e in self.evaluations if e.early_stopped)} early-stopped), {self.bound}")
        if self.recommended:
            return f"ship {self.best.candidate.label()}: {self.best.score:.1f} inf/s at concurrency " \
                   f"{self.best.load}; against the deployment's own configuration, interleaved A B " \
                   f"x{len(self.comparison.now)}: {self.comparison.describe()}; {self.accuracy_note}; " \
                   f"{measured}"
        checked = f"; {self.accuracy_note}" if self.accuracy_note and self.accuracy_note not in self.reason else ""
        return f"keep the deployment's own configuration ({self.default.label()}): {self.reason}{checked}; {measured}"


def dominated(incumbent: float, batch: int) -> Callable:
    """A ``measure(stop_early=...)`` check: the first two windows each under DOMINATED_SHARE of ``incumbent``."""
    def check(windows) -> str | None:
        if incumbent <= 0 or len(windows) != 2:
            return None
        rates = [len(w.samples) * batch / max(w.end - w.start, 1e-9) for w in windows]
        if max(rates) < DOMINATED_SHARE * incumbent:
            return (f"dominated: {rates[0]:.1f} and {rates[1]:.1f} inf/s in its first two windows, under "
                    f"{DOMINATED_SHARE:.0%} of the best so far ({incumbent:.1f} inf/s)")
        return None
    return check


def _load(target: TuneTarget, candidate: Candidate) -> ModelDescription:
    """Load the candidate (the deployment's files under its configuration); its description as the server runs it
    (its kind drives its load; its sequences sent as the deployment's)."""
    config = {**candidate.config(target.config), "name": target.tune_name}
    target.server.load(copy_deployment(target.directory, target.repository_dir, config))
    return target.server.model_description(target.tune_name).with_sequences(target.description.sequences)


def _evaluate(target: TuneTarget, space: TuneSpace, bound: LatencyBound, settings: MeasurementSettings,
              record: Record) -> Callable[[Candidate, float], Evaluation]:
    over = stop_when_clearly_over(bound)
    inputs = target.spec.example_inputs(target.batch_size, 0)
    seen: set[Candidate] = set()

    def evaluate(candidate: Candidate, incumbent: float) -> Evaluation:
        again = "measured again to confirm a gain; " if candidate in seen else ""
        seen.add(candidate)
        description = _load(target, candidate)
        mine = dominated(incumbent, target.batch_size)
        found = Evaluation(candidate, 0.0)
        for concurrency in space.concurrency:
            m = target.source.measure(target.server, Traffic(
                target.tune_name, inputs, target.spec.outputs, LoadPoint(target.batch_size, concurrency),
                description), settings, lambda windows: over(windows) or mine(windows))
            within, why = judge(m, bound)
            reason = m.meta.get("stopped_early") or ""  # the engine keeps the stop check's reason as it was given
            stopped = reason if m.status == "STOPPED" and reason.startswith("dominated") else ""
            found.points.append(record(m, target.tune_name, description, {
                "role": "evidence", "candidate": candidate.to_dict(), "label": candidate.label(),
                "varied": space.varied(), "bound": str(bound), "within": within, "why": again + why,
                "early_stopped": stopped}))
            if within:
                found.score, found.load = float(m.result["Inferences/Second"]), concurrency
                break
            if stopped:
                found.early_stopped = stopped
                break
        return found
    return evaluate


def tune(target: TuneTarget, space: TuneSpace, bound: LatencyBound, settings: MeasurementSettings, record: Record,
         *, strategy: str = "search", budget: Budget | None = None, accuracy_data=None, probe_share: float = 0.1,
         probe_seed: int = 0) -> TuneResult:
    """Search ``target``'s configuration space for the most throughput within ``bound``, check the winner, and say
    whether to ship it. Every measured point goes through ``record`` the moment it exists."""
    target.check()
    target.source.require(load_sources.STOP_EARLY, "tune (a candidate's point is given up early)")
    budget = budget or space.budget
    started = time.monotonic()
    default = Candidate.of(target.config)

    def exhausted(n: int) -> bool:
        return n >= budget.configurations or time.monotonic() - started > budget.minutes * 60

    try:
        evaluations = run_strategy(strategy, space, default, _evaluate(target, space, bound, settings, record),
                                   exhausted)
        result = TuneResult(target.name, bound, strategy, space.size(), default, evaluations,
                            best=winner(evaluations))
        _verify(target, result, settings, record, accuracy_data, probe_share, probe_seed)
    finally:
        target.server.unload(target.tune_name)
    result.seconds = time.monotonic() - started
    return result


def _verify(target: TuneTarget, result: TuneResult, settings: MeasurementSettings, record: Record, accuracy_data,
            probe_share: float, probe_seed: int) -> None:
    from tritonsuite.judge.compare import at_the_bound, compare_within_bound

    if settled(result):
        return
    best = result.best
    description = _load(target, best.candidate)
    point = LoadPoint(target.batch_size, best.load)
    meta = {"candidate": best.candidate.to_dict(), "label": best.candidate.label(), "bound": str(result.bound)}
    if accuracy_data is None or probe_share <= 0:
        result.accuracy_note = ("accuracy under load not checked: " +
                                ("the model has no accuracy task" if accuracy_data is None else "probe share is 0"))
    else:
        m, under, result.accuracy_note = _winner_accuracy(target, description, accuracy_data, point, settings,
                                                          probe_share, probe_seed)
        if m is not None:  # the point the probes rode in
            record(m, target.tune_name, description, {**meta, "role": "accuracy",
                                                      "accuracy_under_load": under.to_dict(),
                                                      "accuracy_line": under.describe()})
        result.accuracy = under
        if not under.passed:
            result.reason = f"the best configuration ({best.candidate.label()}) broke {result.accuracy_note}"
            return
    own = next((e for e in result.evaluations if e.candidate == result.default and e.load), None)
    own_load = own.load if own else best.load  # each at the load it scored at
    inputs = target.spec.example_inputs(target.batch_size, 0)

    def measure(side: str, name: str, candidate: Candidate, kind: ModelDescription, concurrency: int):
        m = target.source.measure(target.server, Traffic(name, inputs, target.spec.outputs,
                                                         LoadPoint(target.batch_size, concurrency), kind), settings)
        return record(m, name, kind, {"role": f"abab-{side}", "candidate": candidate.to_dict(),
                                      "label": candidate.label(), "bound": str(result.bound)})

    rows = {"winner": [], "default": []}
    for _ in range(ABAB_ROUNDS):  # A B A B ...: a busy spell hits both alike
        for side, name, candidate, kind, load in (("winner", target.tune_name, best.candidate, description, best.load),
                                                  ("default", target.name, result.default, target.description,
                                                   own_load)):
            rows[side].append(at_the_bound(lambda c: measure(side, name, candidate, kind, c), load, result.bound)[-1])
    answer(result, compare_within_bound(rows["default"], rows["winner"], result.bound))


def settled(result: TuneResult) -> bool:
    """Keep the deployment's own configuration without measuring again where there is no other winner to check:
    no configuration had a point within the bound, or the deployment's own was the best. True when so settled."""
    best = result.best
    if best is None:
        result.reason = "no configuration measured had a point within the bound"
    elif best.candidate == result.default:
        result.reason = f"it is the best configuration measured ({best.score:.1f} inf/s at concurrency {best.load})"
    return best is None or best.candidate == result.default


def answer(result: TuneResult, comparison) -> None:
    """Ship the winner only when its throughput within the bound was a significant improvement over the deployment's
    own configuration in the interleaved rounds (``comparison``: their
    :class:`~tritonsuite.judge.compare.BoundComparison`, the own configuration as A); else keep the own
    configuration, saying why."""
    result.comparison = comparison
    if comparison.verdict == "improvement":
        result.recommended = True
        return
    result.reason = ("the best configuration measured (" + result.best.candidate.label() +
                     f", {result.best.score:.1f} inf/s) did not beat it significantly in throughput within the bound "
                     f"when measured again interleaved, {len(comparison.now)} x A B: " + comparison.describe())


def _winner_accuracy(target: TuneTarget, description: ModelDescription, accuracy_data, point: LoadPoint,
                     settings: MeasurementSettings, probe_share: float, probe_seed: int):
    """The winner's accuracy: (the measurement its probes rode in, UnderLoadResult, the line) where its kind lets
    probes ride in the load; else (None, AccuracyResult, the line) of its kind's whole exchanges judged
    (:func:`~tritonsuite.judge.responses.kind_accuracy`: sequences sent interleaved against each sent alone, a
    stream's responses multiplexed against each request sent alone)."""
    driver = driver_for(description)
    if driver.probes and target.source.can(load_sources.PROBES):
        from tritonsuite.judge.underload import accuracy_under_load

        m, under = accuracy_under_load(target.server, target.tune_name, target.spec, target.precision, accuracy_data,
                                       point, settings, probe_share, probe_seed, description=description,
                                       source=target.source)
        return m, under, f"accuracy under load {under.describe()}"
    from tritonsuite.judge.responses import kind_accuracy

    found = kind_accuracy(target.server, description, target.spec, target.precision, accuracy_data)
    verdict = "passed" if found.passed else "FAILED (" + "; ".join(found.failures) + ")"
    return None, found, (f"accuracy {verdict}, judged by whole exchanges, not by probes under load (a "
                         f"{', '.join(description.kinds)} deployment takes none): {found.description}")
