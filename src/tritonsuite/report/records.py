"""A stored run as every presenter reads it: read once from ``<reports>/raw`` (rows, manifest, faults), grouped once
into the pages the run has, each row a typed record (the fields the pages use, units in their names): a performance
row a :class:`tritonsuite.report.points.Point`, an accuracy row an :class:`Accuracy`, a conformance check a
:class:`Check`, a tune's row a :class:`TunePoint`, a mix's row a :class:`MixPoint`. Presenters
(:mod:`tritonsuite.report.presenters`) take a :class:`RunRecords` and write; none of them reads the store or regroups
the rows itself."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonsuite.core.rows import Row
from tritonsuite.core.settings import LatencyBound
from tritonsuite.core.store import fault_lines, load_rows, read_faults, read_manifest
from tritonsuite.judge.compare import Comparison
from tritonsuite.judge.crosscheck import CrossPoint, cross_points
from tritonsuite.report.manifest import header_line
from tritonsuite.report.points import Point, number_of

#: scenarios whose rows have pages of their own shape (per deployment or per mix), not a page per model
OWN_PAGES = ("tune", "conformance", "mix")
#: scenarios of load points: their pages are made of Points; every other scenario's of Accuracy records
PERFORMANCE = ("offline", "online")


@dataclass(frozen=True)
class Check:
    """One conformance check of a deployment (:mod:`tritonsuite.judge.conformance`) as its page shows it: what the
    configuration declares, what the live server showed, the verdict (``pass``, ``fail``, ``skipped``; None where the
    row has none) and the evidence that needs more than a cell."""

    deployment: str
    model: str
    format: str
    precision: str
    check: str | None
    declared: Any
    observed: Any
    verdict: str | None
    status: str
    reasons: tuple[str, ...]
    seconds: float | None
    evidence: Mapping[str, Any]  # batch_stats (batch size -> executions), probes, and the check's own figures
    declared_fields: tuple[str, ...]  # every field the deployment's configuration sets (on any of its checks)
    row: Row = field(repr=False, compare=False)

    @classmethod
    def of(cls, row: Row) -> "Check":
        extra = row.extra
        return cls(deployment=row.deployment, model=row.model, format=row.format, precision=row.precision,
                   check=extra.get("check"), declared=extra.get("declared", "-"), observed=extra.get("observed", "-"),
                   verdict=extra.get("verdict"), status=row.status, reasons=tuple(str(r) for r in row.reasons),
                   seconds=row.seconds, evidence=dict(extra.get("evidence") or {}),
                   declared_fields=tuple(extra.get("declared_fields") or ()), row=row)

    @property
    def judged(self) -> str:
        """The verdict counted: a check without one counts as failed."""
        return self.verdict if self.verdict is not None else "fail"


@dataclass(frozen=True)
class TunePoint:
    """One row of a tune (:mod:`tritonsuite.tune`) as its page shows it: a configuration measured (``evidence``), a
    side of the interleaved re-measure (``abab-winner``, ``abab-default``), accuracy under load (``accuracy``) or the
    answer (``answer``, which also carries the summary of the search). Latencies in ms, throughput in inferences/s."""

    deployment: str
    model: str
    format: str
    precision: str
    role: str
    label: str  # the configuration, "2 inst, delay 100us"
    bound: str  # "p99 <= 40 ms"
    within: bool
    why: str
    early_stopped: str  # why the configuration was given up early, "" when it was not
    concurrency: int | None
    status: str
    throughput_per_s: float | None
    p99_ms: float | None
    statistic_ms: float | None  # the bound's statistic: its result column, else from the latency samples
    answer: str | None  # the answer row's: the sentence, whether recommended, the search's size and time
    recommended: bool
    configurations: Any
    space: Any
    seconds: Any
    varied: tuple[str, ...]
    accuracy_note: str  # the answer's accuracy, when judged by the deployment's kind and not under load
    accuracy_line: str  # an accuracy row's verdict under load
    row: Row = field(repr=False, compare=False)

    @classmethod
    def of(cls, row: Row) -> "TunePoint":
        t = row.measurement.get("tune") or {}
        return cls(deployment=row.deployment, model=row.model, format=row.format, precision=row.precision,
                   role=str(t.get("role", "")), label=str(t.get("label", "")), bound=str(t.get("bound", "")),
                   within=bool(t.get("within")), why=str(t.get("why", "")),
                   early_stopped=str(t.get("early_stopped") or ""), concurrency=row.concurrency, status=row.status,
                   throughput_per_s=number_of(row.result.get("Inferences/Second")),
                   p99_ms=number_of(row.result.get("p99 latency")),
                   statistic_ms=_bound_statistic(row, t["bound"]) if t.get("bound") else None,
                   answer=t.get("answer"), recommended=bool(t.get("recommended")),
                   configurations=t.get("configurations"), space=t.get("space"), seconds=t.get("seconds"),
                   varied=tuple(t.get("varied") or ()), accuracy_note=str(t.get("accuracy") or ""),
                   accuracy_line=str(t.get("accuracy_line", "")), row=row)


def _bound_statistic(row: Row, bound_text: str) -> float | None:
    bound = LatencyBound.parse(bound_text)
    column = row.result.get(f"{bound.statistic} latency")
    if column is not None:
        return float(column)
    samples = row.measurement.get("latency_samples_ms") or []
    return bound.value(samples) if samples else None


@dataclass(frozen=True)
class MixPoint:
    """One row of a mix (:mod:`tritonsuite.load.mix`) as its page shows it: its role (``alone``, ``together``,
    ``failed``, ``search``, ``search-answer``, ``tune-<step>``, ``tune-answer``), round and span, what the searches
    recorded, and its figures as a :class:`Point`."""

    name: str  # the mix's
    host: str  # "" unless merged from several hosts
    role: str
    round: int
    traffic: str
    start_s: float
    end_s: float
    step: Any  # the most-load search's point, its factor, bound and verdict
    factor: Any
    bound: str
    within: bool
    why: str
    answer: Any  # a search's or the configuration search's answer
    recommended: bool
    configs: tuple[str, ...]  # the configurations to ship (the configuration search's answer)
    label: str  # the configuration search's joint configuration, " | " between the deployments'
    weighted_score: Any
    set_concurrency: int | None  # the traffic's concurrency (None for a request rate)
    deployment_client_cpu_percent: float | None  # the part of the load generator's CPU this deployment's traffic took
    accuracy_passed: bool | None  # accuracy under the mix; None without probes
    point: Point

    @classmethod
    def of(cls, row: Row) -> "MixPoint":
        mx = row.extra.get("mix") or {}
        under_load = row.extra.get("accuracy_under_load")
        return cls(name=str(mx.get("name") or row.model), host=str(row.extra.get("host") or ""),
                   role=str(mx.get("role", "")), round=mx.get("round", 0), traffic=mx.get("traffic", ""),
                   start_s=mx.get("start_s", 0.0), end_s=mx.get("end_s", 0.0), step=mx.get("step"),
                   factor=mx.get("factor"), bound=str(mx.get("bound") or "-"), within=bool(mx.get("within")),
                   why=str(mx.get("why", "")), answer=mx.get("answer"), recommended=bool(mx.get("recommended")),
                   configs=tuple(mx.get("configs", ())), label=str(mx.get("label", "")),
                   weighted_score=mx.get("weighted_score", 0), set_concurrency=row.concurrency,
                   deployment_client_cpu_percent=number_of(row.measurement.get("deployment_client_cpu_percent")),
                   accuracy_passed=bool(under_load.get("passed")) if under_load else None, point=Point.of(row))

    @property
    def deployment(self) -> str:
        return self.point.deployment

    @property
    def row(self) -> Row:
        return self.point.row


def mixes_of(rows: list[Row]) -> dict[str, list[MixPoint]]:
    """The mix rows among ``rows``, typed, by mix name (first-seen order)."""
    found: dict[str, list[MixPoint]] = {}
    for row in rows:
        if row.scenario == "mix":
            point = MixPoint.of(row)
            found.setdefault(point.name, []).append(point)
    return found


def flatten_metrics(prefix: str, value: Any) -> list[tuple[str, Any]]:
    """Nested metrics as dotted names: ``{"q_risk": {"P50": x}}`` -> ``[("q_risk.P50", x)]``."""
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = []
        for k, v in value.items():
            items += flatten_metrics(f"{prefix}.{k}" if prefix else str(k), v)
        return items
    return [(prefix, value)]


def threshold_for(thresholds: Any, metric: str) -> Any:
    """A metric's threshold: by its dotted name, by the same path in nested thresholds, else by its top-level name."""
    if not isinstance(thresholds, Mapping):
        return thresholds
    if metric in thresholds:
        return thresholds[metric]
    node: Any = thresholds
    for part in metric.split("."):  # nested thresholds mirroring nested metrics
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            node = None
            break
    if node is not None:
        return node
    top = metric.split(".")[0]
    return thresholds.get(top)


@dataclass(frozen=True)
class Metric:
    """One metric of an accuracy record: its dotted name, value, threshold (None: none) and status (the metric's
    own; "-" where the record judges some metrics but not this one; the record's status where it judges none)."""

    name: str
    value: Any
    threshold: Any
    status: str


@dataclass(frozen=True)
class BaselineNote:
    """An accuracy record against its stored baseline (:mod:`tritonsuite.judge.baselines`)."""

    regressions: tuple[str, ...]
    improvements: tuple[str, ...]
    missing: str  # why there is none
    refused: str  # why it was not judged (other weights or data)
    compared: int | None  # how many metrics were compared; None when the record was not compared
    updated: str  # the baseline rewritten in this run


@dataclass(frozen=True)
class Accuracy:
    """One record of a scenario without load points (accuracy) as its page shows it: its metrics with their
    thresholds and statuses, and its standing against the baseline."""

    scenario: str
    model: str
    title: str
    deployment: str
    format: str
    precision: str
    status: str
    reasons: tuple[str, ...]
    description: str  # what the data is
    metrics: tuple[Metric, ...]  # a record without metrics has one: "-", no value
    baseline: BaselineNote | None
    row: Row = field(repr=False, compare=False)

    @classmethod
    def of(cls, row: Row) -> "Accuracy":
        flat = flatten_metrics("", row.metrics) or [("-", None)]
        judged = row.metric_status or {}
        metrics = tuple(Metric(name, value, threshold_for(row.thresholds, name),
                               str(judged.get(name, "-" if judged else row.status))) for name, value in flat)
        note = row.extra.get("baseline") or {}
        baseline = BaselineNote(tuple(note.get("regressions", [])), tuple(note.get("improvements", [])),
                                str(note.get("missing") or ""), str(note.get("refused") or ""), note.get("compared"),
                                str(note.get("updated") or "")) if note else None
        return cls(scenario=row.scenario, model=row.model, title=row.title, deployment=row.deployment,
                   format=row.format, precision=row.precision, status=row.status,
                   reasons=tuple(str(r) for r in row.reasons), description=row.description, metrics=metrics,
                   baseline=baseline, row=row)


@dataclass
class RunRecords:
    """The rows of a run (or of every run in a directory), what the pages need of its manifest, and the groups each
    page is made of."""

    reports_dir: Path
    run_id: str | None
    rows: list[Row]
    manifest: dict[str, Any] | None = None
    comparison: Comparison | None = None  # --compare: this run against a stored one
    gate_percent: float | None = None  # --perf-gate
    header: str = ""  # the provenance line under each page's title
    faults: list[str] = field(default_factory=list)  # deployments given up, server restarts
    pages: dict[tuple[str, str], list[Row]] = field(default_factory=dict)  # (scenario, model) -> its page's rows
    performance: dict[tuple[str, str], list[Point]] = field(default_factory=dict)  # the offline and online pages
    accuracy: dict[tuple[str, str], list[Accuracy]] = field(default_factory=dict)  # the pages without load points
    conformance: dict[str, list[Check]] = field(default_factory=dict)  # deployment -> its checks
    tune: dict[str, list[TunePoint]] = field(default_factory=dict)  # deployment -> its tune's rows
    mixes: dict[str, list[MixPoint]] = field(default_factory=dict)  # mix name -> its rows
    cross: list[CrossPoint] = field(default_factory=list)  # points both load generators measured
    points: list[Point] = field(default_factory=list)  # every offline and online row, typed
    presenters: tuple[str, ...] = ()  # the presenters writing this run (a page links another's)


def group_run(reports_dir: str | os.PathLike[str], rows: list[Row], run_id: str | None = None, *,
              manifest: dict[str, Any] | None = None, faults: list[str] | None = None,
              comparison: Comparison | None = None, gate_percent: float | None = None) -> RunRecords:
    """Rows already read, grouped into the run's pages."""
    run = RunRecords(Path(reports_dir), run_id, list(rows), manifest, comparison, gate_percent,
                     header_line(manifest) if run_id else "", list(faults or []))
    for row in run.rows:
        if row.scenario not in OWN_PAGES:
            run.pages.setdefault((row.scenario, row.model), []).append(row)
        if row.scenario not in OWN_PAGES + PERFORMANCE:
            run.accuracy.setdefault((row.scenario, row.model), []).append(Accuracy.of(row))
        if row.scenario == "conformance":
            run.conformance.setdefault(row.deployment, []).append(Check.of(row))
        if row.scenario == "tune" and (row.measurement.get("tune") or {}):
            run.tune.setdefault(row.deployment, []).append(TunePoint.of(row))
        if row.scenario in PERFORMANCE:
            run.points.append(Point.of(row))
            run.performance.setdefault((row.scenario, row.model), []).append(run.points[-1])
    run.mixes = mixes_of(run.rows)
    run.cross = cross_points(run.rows)
    return run


def read_run(reports_dir: str | os.PathLike[str], run_id: str | None = None, *,
             comparison: Comparison | None = None, gate_percent: float | None = None) -> RunRecords:
    """The stored rows of ``run_id`` (every run in the directory when None), its manifest and faults, grouped."""
    manifest = read_manifest(reports_dir, run_id) if run_id else None
    faults = fault_lines(read_faults(reports_dir, run_id)) if run_id else []
    return group_run(reports_dir, load_rows(reports_dir, run_id=run_id), run_id, manifest=manifest, faults=faults,
                     comparison=comparison, gate_percent=gate_percent)
