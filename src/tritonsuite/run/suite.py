"""A run of the suite: profile × model specs × server, turned into cases, deployments and recorded rows.

What the pytest glue drives, and a plain script the same way (``examples/script_offline.py``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

from tritonsuite.core.rows import Row
from tritonsuite.core.settings import LatencyBound
from tritonsuite.core.spec import ModelSpec
from tritonsuite.core.store import RawWriter, raw_path
from tritonsuite.deploy import export as export_mod
from tritonsuite.deploy.deployment import Deployment
from tritonsuite.deploy.repository import deployment_name
from tritonsuite.judge import responses as kinds  # sequences, decoupled, python/BLS
from tritonsuite.judge.accuracy import AccuracyResult
from tritonsuite.judge.baselines import BaselineStore
from tritonsuite.judge.compare import comparable, compare_points, point_key
from tritonsuite.judge.conformance import DEFAULT_CHECKS, CheckResult, Target, run_check
from tritonsuite.judge.underload import DEFAULT_PROBE_SEED, DEFAULT_PROBE_SHARE, accuracy_under_load
from tritonsuite.load import sources as load_sources
from tritonsuite.load.engine import LoadPoint, Measurement, Progress, Traffic
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.search import SearchResult, judge, remeasure_drift, search, stop_when_clearly_over
from tritonsuite.models import Registry
from tritonsuite.models.training import trained_checkpoint
from tritonsuite.profiles import ModelProfile, Profile
from tritonsuite.report.parameters import deployment_parameters
from tritonsuite.run.accuracycase import run_accuracy_case
from tritonsuite.run.cases import Case, profile_cases
from tritonsuite.run.deploysources import source_of
from tritonsuite.run.isolation import Isolation, faults_path
from tritonsuite.run.mixcase import run_mix_case, run_mix_search, run_mix_tune
from tritonsuite.run.streaming import STREAM_SUFFIX, streamed
from tritonsuite.run.tunecase import run_tune_case
from tritonsuite.server import TritonServer


@dataclass
class Suite:
    profile: Profile
    registry: Registry
    server: TritonServer
    repository_dir: Path
    cache_dir: Path
    reports_dir: Path
    run_id: str
    worker: str = "main"
    checkpoints: Mapping[str, Path] = field(default_factory=dict)
    datasets: Mapping[str, Path] = field(default_factory=dict)
    baselines: BaselineStore | None = None  # accuracy baselines to compare with (or to rewrite)
    update_baselines: bool = False  # rewrite the baselines of deployments that passed their absolute checks
    require_baselines: bool = False  # a deployment with no baseline fails instead of passing with a note
    retrain: bool = False  # train the suite's models here instead of using the checkpoints shipped with tritonsuite
    compare_with: Sequence[Row] = ()  # a stored run's performance rows: each measured point is judged against them
    compare_label: str = ""
    # accuracy under load: this share of the requests of each online deployment's highest-concurrency point carries
    # the model's accuracy samples (seeded); 0 turns it off
    load_probe_share: float = DEFAULT_PROBE_SHARE
    load_probe_seed: int = DEFAULT_PROBE_SEED
    protocol: str = "http"  # how every load generator and the accuracy run reach the server: http or grpc
    sequences: object = None  # how sequence models' sequences are sent (--sequence-*: each description's)
    bls_composing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # BLS model ("": any) -> it calls
    workers: int | str = 1  # the engine's points over this many processes, or "auto" (load.sources.workers)
    _modules: dict = field(default_factory=dict, repr=False)
    _deployments: dict = field(default_factory=dict, repr=False)
    _served: dict = field(default_factory=dict, repr=False)  # a user's deployment directory -> its copy
    _writers: dict = field(default_factory=dict, repr=False)
    isolation: Isolation | None = None  # broken deployments and restarts (tritonsuite.run.isolation); made when absent
    _last: Deployment | None = field(default=None, repr=False)  # the deployment handed out last

    def __post_init__(self):
        self.server.request_timeout_s = self.profile.measurement.timeout_s
        if self.isolation is None:
            self.isolation = Isolation(self.server, faults_path(self.reports_dir, self.run_id, self.worker))

    # ------------------------------------------------------------------------------------------------- cases
    def model_profile(self, model: str) -> ModelProfile:
        return self.profile.models[model]

    def spec(self, model: str) -> ModelSpec:
        return self.registry.get(model, self.model_profile(model).size)

    def cases(self, scenario: str, loadgens: Sequence[str] = ("suite",)) -> list[Case]:
        return profile_cases(self.profile, scenario, loadgens, DEFAULT_CHECKS)

    # ------------------------------------------------------------------------------------------- deployments
    def checkpoint(self, model: str) -> Path | None:
        """The user's checkpoint for ``model``; else, if the spec trains, the one shipped with tritonsuite (unless
        ``retrain`` or a dataset asks for training here) or the one trained here; else None."""
        if model in self.checkpoints:
            return self.checkpoints[model]
        spec = self.spec(model)
        if spec.train is None:
            return None
        return trained_checkpoint(spec, self.cache_dir, self.datasets.get(model), self.retrain)

    def weights(self, model: str) -> str:
        """Which weights a model's rows come from: the user's checkpoint, the one shipped with tritonsuite (short
        sha256), one trained here, weights shipped in another package, or seeded random (a verdict on those says
        how a deployment treats these numbers, not a trained model's quality)."""
        spec = self.spec(model)
        return source_of(spec).weights(self, model, spec)

    def eager_module(self, model: str):
        if model not in self._modules:
            self._modules[model] = self.spec(model).build(self.checkpoint(model))
        return self._modules[model]

    def _deployment_key(self, model: str, fmt: str, precision: str, scenario: str,
                        streaming: bool = False) -> tuple[str, str, str, str, bool]:
        """(model, format, precision, serving, streaming): a user's deployment "served" once, as given; the suite's
        written "online" or "offline" (accuracy too); ``streaming``: the spec's streaming example (run.streaming)."""
        serving = source_of(self.spec(model)).serving(scenario, streaming)
        return model, fmt, precision, serving, streaming and serving != "served"

    def deployed(self, model: str, fmt: str, precision: str, scenario: str, streaming: bool = False) -> bool:
        """Whether this session already deployed (or failed to deploy) a case's deployment."""
        return self._deployment_key(model, fmt, precision, scenario, streaming) in self._deployments

    def deployment(self, model: str, fmt: str, precision: str, scenario: str, streaming: bool = False) -> Deployment:
        """Export (cached), write the model repository entry and load it on the server, once per session.

        A failure (export unsupported, mismatch, load error) is remembered and raised again for later cases of
        the same deployment, so they fail or skip at once."""
        key = self._deployment_key(model, fmt, precision, scenario, streaming)
        label = self._label(key)
        if self.isolation.before(label):  # the server died and was started again: nothing is loaded on it now
            self._deployments = {k: v for k, v in self._deployments.items() if isinstance(v, Exception)}
            self._served.clear()
        if key not in self._deployments:
            try:
                made = self._deploy(*key)  # its description says how a sequence model's sequences are sent
                self._deployments[key] = replace(made, description=made.description.with_sequences(self.sequences))
            except Exception as exc:
                self._deployments[key] = exc
        self.isolation.driving = label  # again: a streamed deployment deploys its inner one first
        found = self._deployments[key]
        if isinstance(found, Exception):
            raise found
        self._last = found
        return found

    def _label(self, key: tuple[str, str, str, str, bool]) -> str:  # a deployment key's deployment, as rows name it
        spec, (_, fmt, prec, serving, streaming) = self.spec(key[0]), key
        return spec.name if serving == "served" else deployment_name(spec, fmt, prec, serving) + STREAM_SUFFIX*streaming

    def broke(self, exc: Exception | str) -> None:
        """A case of the deployment driven last failed with ``exc``: given up and unloaded if it cannot answer."""
        if self._last is not None and self.isolation.driving:
            self.isolation.broken(self.isolation.driving, self._last.directory.name, exc)

    def _deploy(self, model: str, fmt: str, precision: str, scenario: str, streaming: bool) -> Deployment:
        spec = self.spec(model)
        if streaming:  # written beside the online deployment it calls; then served like any decoupled deployment
            return replace(inner := self.deployment(model, fmt, precision, "online"), **streamed(
                self.server, inner, precision))
        return source_of(spec).deploy(self, model, spec, fmt, precision, scenario)

    def parameters(self, deployment: Deployment) -> dict:
        """The report's "Parameter Name | Parameter Value" table for a deployment."""
        return deployment_parameters(deployment, self.server, self.profile, self.weights(deployment.spec.name),
                                     self.checkpoint(deployment.spec.name))

    # --------------------------------------------------------------------------------------------- recording
    def record(self, row: Row) -> None:
        """Append a row to ``reports/raw`` the moment it exists (durable when this returns)."""
        if row.scenario not in self._writers:
            self._writers[row.scenario] = RawWriter(raw_path(self.reports_dir, row.scenario, self.run_id, self.worker))
        row.run_id = row.run_id or self.run_id
        self._writers[row.scenario].append(row)

    def _identity(self, case: Case) -> dict:
        """What names a case's row, known before anything is deployed (so a failure still has a row)."""
        spec, serving = self.spec(case.model), case.serving or case.scenario
        return {"scenario": case.scenario, "model": case.model, "title": spec.title or case.model,
                "format": case.format, "precision": case.precision, "loadgen": case.loadgen,
                "deployment": self._label(self._deployment_key(case.model, case.format, case.precision, serving,
                                                               case.stream))}

    def _record_failure(self, case: Case, exc: Exception, deployment: Deployment | None, **coordinates) -> None:
        """A FAILED row for a case that raised; its parameter table only while the server can still answer."""
        first_line = (str(exc).strip().splitlines() or [""])[0]
        known = deployment is not None and self.server.is_alive()
        self.record(Row.failed(reason=f"{type(exc).__name__}: {first_line}", **self._identity(case), **coordinates,
                               parameters=self.parameters(deployment) if known else {}))

    # ------------------------------------------------------------------------------------------------- runs
    def _point(self, case: Case, concurrency: int = 0, request_rate: float = 0.0) -> LoadPoint:
        online, spec = self.model_profile(case.model).online, self.spec(case.model)
        strings = any(t.dtype == "bytes" for t in spec.inputs + spec.outputs)  # in the body: their sizes vary
        return LoadPoint(case.batch_size, concurrency or 1,
                         shared_memory=case.scenario == "offline" and self.server.local and not strings,
                         request_rate=request_rate or None, distribution=online.distribution, seed=online.seed,
                         protocol=self.protocol)

    def _measure(self, case: Case, point: LoadPoint, stop_early=None, search: dict | None = None,
                 progress: Progress | None = None) -> tuple[Measurement, Row]:
        """One point of a case's deployment measured, and its row; a point that raises is recorded as FAILED at once."""
        deployment = None
        try:
            where = case.model, case.format, case.precision, case.scenario, case.stream
            if progress is not None and not self.deployed(*where):
                progress(f"deploying {case.model} as {case.format} {case.precision}: export (cached across runs), "
                         f"verification against eager, model repository, load on the server")
            deployment = self.deployment(*where)
            driver = driver_for(deployment.description)
            spec, (point, notes) = deployment.spec, driver.point(point)
            probing = self.probes_accuracy(case) and driver.probes  # a sequence or a stream is judged whole instead
            inputs = None if probing else spec.example_inputs(case.batch_size, 0)
            if probing:
                data = spec.accuracy_data(self.datasets.get(case.model), self.checkpoint(case.model))
                result, under_load = accuracy_under_load(
                    self.server, deployment.name, spec, case.precision, data, point, self.profile.measurement,
                    self.load_probe_share, self.load_probe_seed, progress, description=deployment.description,
                    source=load_sources.get(case.loadgen, self.workers))
                result.accuracy_under_load = under_load
            else:  # the case's load source (--loadgen): the same point, tensors and settings, whoever sends them
                result = load_sources.get(case.loadgen, self.workers).measure(self.server, Traffic(
                    deployment.name, inputs, spec.outputs, point, deployment.description),
                    self.profile.measurement, stop_early, progress)
        except export_mod.ExportUnsupported:
            raise  # not attempted: a skip with its reason
        except Exception as exc:
            if deployment is not None:
                self.broke(exc)
            self._record_failure(case, exc, deployment, batch=case.batch_size,
                                 concurrency=None if point.open_loop else point.concurrency,
                                 request_rate=point.request_rate)
            raise
        result.reasons += notes
        if case.scenario == "offline" and not point.shared_memory and not notes:
            result.reasons.append(f"inputs and outputs sent over {self.protocol}, not shared memory: " + (
                "the server is not on this host" if not self.server.local else "BYTES tensors"))
        if search is not None:
            result.meta["search"] = search
        if case.round:  # --repeat: which interleaved round this row is (the report gives the median of the rounds)
            result.meta["repeat"] = {"round": case.round, "of": case.rounds, "order": case.order}
        row = result.to_row(**self._identity(case), parameters=self.parameters(deployment))
        if result.accuracy_under_load is not None:
            row.extra["accuracy_under_load"] = result.accuracy_under_load.to_dict()
        return result, row

    def run_performance(self, case: Case, progress: Progress | None = None) -> Measurement:
        """Measure one offline or online point and append its row to reports/raw before returning it; a point that
        raises is recorded as a FAILED row with its reason, then the error goes on to the caller. ``progress`` is
        told after each window how the point is going."""
        result, row = self._measure(case, self._point(case, case.concurrency, case.request_rate), progress=progress)
        then = ({point_key(r): r for r in self.compare_with if comparable(r)}.get(point_key(row))
                if self.compare_with else None)
        if then is not None:
            result.comparison = compare_points(then, row)
            row.extra["comparison"] = {"against": self.compare_label, "verdict": result.comparison.verdict,
                                       "line": result.comparison.describe()}
        self.record(row)
        return result

    def run_search(self, case: Case, progress: Progress | None = None) -> SearchResult:
        """The most load (request rate or concurrency) the case's deployment takes within its latency bound. Every
        point measured is recorded the moment it exists, as evidence (``measurement.search``: step, within, why);
        then the answer, a copy of the re-measured point's row with role "result" (or of the last point when none
        was within the bound), carrying the answer line. A request-rate search starts at the rate one request in
        flight achieves (measured first, also evidence). ``progress`` is told each point's windows and verdict."""
        bound = LatencyBound.parse(case.bound)
        stop = stop_when_clearly_over(bound)
        rows: list[Row] = []

        def at(load: float, closed_loop: bool = False) -> Measurement:
            point = (self._point(case, concurrency=int(load)) if closed_loop or case.search == "concurrency"
                     else self._point(case, request_rate=load))
            told = None if progress is None else (
                lambda line, at_=f"point {len(rows) + 1} at {point.describe()}": progress(f"{at_}: {line}"))
            measured, row = self._measure(case, point, stop, {"kind": case.search, "bound": str(bound),
                                                              "step": len(rows) + 1, "role": "evidence"}, told)
            within, why = judge(measured, bound)
            row.measurement["search"].update(within=within, why=why)
            earlier = [r for r in rows if (r.request_rate, r.concurrency) == (row.request_rate, row.concurrency)]
            if earlier:  # the same point measured again (a search's confirmation): how far it moved meanwhile
                row.measurement["remeasure"] = remeasure_drift(earlier[-1].result, row.result,
                                                               self.profile.measurement.stability_percentage)
            self.record(row)
            rows.append(row)
            return measured

        start = 1.0
        if case.search == "request_rate":
            one = at(1, closed_loop=True)
            start = max(one.result["Inferences/Second"] / case.batch_size, 0.1)
        found = search(at, case.search, bound, start, self.profile.measurement, measured_before=len(rows),
                       progress=progress)
        best = rows[found.measured_before + found.steps.index(found.best)] if found.best else rows[-1]
        answer = copy.deepcopy(best)
        answer.measurement["search"].update(role="result", max=found.best.load if found.best else None,
                                            answer=found.describe(), points=found.points)
        self.record(answer)
        return found

    def probes_accuracy(self, case: Case) -> bool:
        """Whether a case carries accuracy probes: the top concurrency of an online deployment with an accuracy task."""
        online = self.model_profile(case.model).online
        return (case.scenario == "online" and not case.search and not case.request_rate and self.load_probe_share > 0
                and load_sources.get(case.loadgen, self.workers).can(load_sources.PROBES)
                and bool(online.concurrency) and case.concurrency == max(online.concurrency)
                and self.spec(case.model).accuracy_data is not None)

    def run_accuracy(self, case: Case) -> AccuracyResult:
        """The model's accuracy data through Triton, judged against eager and its baseline (run.accuracycase)."""
        return run_accuracy_case(self, case)

    def run_conformance(self, case: Case, allow_reload: bool = False) -> CheckResult:
        """One conformance check (:mod:`tritonsuite.judge.conformance`) of a case's deployment; its row recorded."""
        deployment = self.deployment(case.model, case.format, case.precision, case.serving or "served")
        result = run_check(Target.of(self.server, deployment, case.batch_size or 1, allow_reload), case.check)
        if result.verdict == "fail":
            self.broke(result.reason)
        self.record(result.to_row(**self._identity(case), parameters=self.parameters(deployment)))
        return result

    def run_mix(self, name: str, progress: Progress | None = None, search: str = ""):
        """A mix of the profile (:mod:`tritonsuite.run.mixcase`): rows of scenario ``mix`` and the ratios; ``search``
        "scale": the most mixed load within every bound, "tune": the configuration search for the set."""
        return {"": run_mix_case, "scale": run_mix_search, "tune": run_mix_tune}[search](self, name, progress)

    def run_tune(self, case: Case, strategy: str = "search", budget: str = "", progress: Progress | None = None):
        """The configuration search of a case's online deployment (:func:`tritonsuite.run.tunecase.run_tune_case`)."""
        return run_tune_case(self, case, strategy, budget, progress)
