"""A performance row (offline, online) as every presenter reads it: a :class:`Point`, the fields its pages and plots
use with their units in their names, and the typed parts a row may carry (how it was measured, a latency-bound
search's tag, a repeat's round, drift, accuracy under load, a sequence model's sequences). Built once per row by
:func:`tritonsuite.report.records.group_run`."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonsuite.core.rows import LATENCY_PARTS, RESULT_COLUMNS, STREAM_COLUMNS, Row
from tritonsuite.load.telemetry import GPU_COLUMNS
from tritonsuite.report.common import PERCENTILE_COLUMNS, format_number, is_number

#: the seeds' latency columns, in ms
LATENCY_COLUMNS = tuple(c for c in RESULT_COLUMNS if c not in ("Batch", "Concurrency", "Inferences/Second"))


# How a stored row's JSON form is read (here only: the presenters read the typed fields).

def _result_of(row: Mapping[str, Any]) -> Mapping[str, Any]:
    result = row.get("result")
    return result if isinstance(result, Mapping) else {}


def _coord(row: Mapping[str, Any], column: str) -> Any:
    """Batch or Concurrency of a row: from ``result``, else a top-level lower-case key (e.g. FAILED rows)."""
    value = _result_of(row).get(column)
    if value is None:
        value = row.get(column.lower())
    return value


def _sort_key(row: Mapping[str, Any]) -> tuple:
    def num(v: Any) -> float:
        return float(v) if is_number(v) else math.inf
    return num(_coord(row, "Batch")), num(_coord(row, "Concurrency"))


def _status_of(row: Mapping[str, Any]) -> str:
    return str(row.get("status") or ("OK" if row.get("valid") else "FAILED"))


def _series_of(row: Mapping[str, Any]) -> str:
    """A results table's (and a plot's) series: the deployment, and the load generator where it is not the suite's
    engine (``bert_cpu_onnx_fp32_offline · perf_analyzer 2.51``), so both measure one deployment side by side."""
    deployment = str(row.get("deployment") or "unknown deployment")
    if row.get("host"):  # rows merged from several hosts (tritonsuite.report.merge): one series per host
        deployment = f"{deployment} @ {row['host']}"
    loadgen = row.get("loadgen") or "suite"
    if loadgen == "suite":
        return deployment
    measurement = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
    return f"{deployment} · {measurement.get('loadgen') or loadgen}"


def _row_label(row: Mapping[str, Any]) -> str:
    load = (f"{row['request_rate']:g} req/s offered" if is_number(row.get("request_rate")) else
            f"concurrency {format_number('Concurrency', _coord(row, 'Concurrency'))}")
    search = _search_of(row)
    if search:
        load += f" (search {search.get('kind')} at {search.get('bound')}, step {search.get('step')})"
    measurement = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
    repeat = measurement.get("repeat") if isinstance(measurement.get("repeat"), Mapping) else None
    if repeat:  # --repeat: which interleaved round the row is
        load += f" (round {repeat.get('round')} of {repeat.get('of')})"
    return f"batch {format_number('Batch', _coord(row, 'Batch'))}, {load}"


def _search_of(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A latency-bound search's tag on a row (kind, bound, step, role, within, why); empty for other rows."""
    measurement = row.get("measurement")
    search = measurement.get("search") if isinstance(measurement, Mapping) else None
    return search if isinstance(search, Mapping) else {}


def _load_kind(row: Mapping[str, Any]) -> str:
    """sweep (a concurrency or batch point), rate (an open-loop point), evidence or result (of a search)."""
    search = _search_of(row)
    if search:
        return "result" if search.get("role") == "result" else "evidence"
    return "rate" if is_number(row.get("request_rate")) else "sweep"


def number_of(value: Any) -> float | None:
    """A finite number as stored, else None."""
    return value if is_number(value) else None  # as stored (an int stays one: pages print it as the rows say)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Method:
    """How a point was measured, as its row says (None where it does not): the load generator's own name and
    version, protocol, shared memory, the window (ms) and how many were measured, the stability rule, and how its
    percentiles' intervals were computed."""

    loadgen: Any
    protocol: Any
    shared_memory: Any
    window: Any
    windows: Any
    stability_percent: Any
    stable_windows: Any
    percentile_rule: Any
    command: Any  # perf_analyzer's command line, where it measured

    @classmethod
    def of(cls, measurement: Mapping[str, Any]) -> "Method":
        return cls(*(measurement.get(k) for k in ("loadgen", "protocol", "shared_memory", "window", "windows",
                                                  "stability_percentage", "stable_windows", "percentile_rule",
                                                  "loadgen_command")))


@dataclass(frozen=True)
class Search:
    """A latency-bound search's tag on its points (:mod:`tritonsuite.load.search`): what it searched (``kind``:
    concurrency or request_rate) under which bound, the step, the role (evidence or result), whether the point was
    within the bound and why, and on the result its answer and the most load found (``max``)."""

    kind: Any
    bound: Any
    step: Any
    role: Any
    within: bool
    why: Any
    answer: Any
    max: Any
    moved: "Remeasured | None"  # a re-measured point: how far it moved since first measured

    @classmethod
    def of(cls, search: Mapping[str, Any], remeasure: Any) -> "Search":
        return cls(search.get("kind"), search.get("bound"), search.get("step"), search.get("role"),
                   bool(search.get("within")), search.get("why", "-"), search.get("answer"), search.get("max"),
                   Remeasured.of(remeasure) if isinstance(remeasure, Mapping) else None)


@dataclass(frozen=True)
class Remeasured:
    """A search's point measured again: its change in throughput and p99 (percent) and whether it drifted."""

    throughput_change_percent: float | None
    p99_change_percent: float | None
    drifting: bool

    @classmethod
    def of(cls, moved: Mapping[str, Any]) -> "Remeasured":
        return cls(number_of(moved.get("throughput_change_percent")), number_of(moved.get("p99_change_percent")),
                   bool(moved.get("drifting")))


@dataclass(frozen=True)
class Repeat:
    """--repeat N: which interleaved round a point is (``round`` of ``of``), in which order the round ran."""

    round: Any
    of: Any
    order: Any


@dataclass(frozen=True)
class Drift:
    """A point whose throughput or mean latency moved from its first stable window to its last (percent)."""

    drifting: bool
    throughput_change_percent: Any
    latency_change_percent: Any
    limit_percent: Any


@dataclass(frozen=True)
class UnderLoad:
    """Accuracy under load (:mod:`tritonsuite.judge.underload`): the verdict of the probes a point carried."""

    verdict: Any
    passed: bool
    concurrency: Any


@dataclass(frozen=True)
class Sequences:
    """A sequence model's point: how its sequences ran (lengths, ids, how many started, how many the point's end
    cut)."""

    length: Any
    length_variation_percent: Any
    id_range: tuple[Any, Any]
    started: Any
    ended_at_the_end: Any


@dataclass(frozen=True)
class Point:
    """One row of a run as the pages show it. Latencies are in ms (``*_ms``), throughput in inferences per second,
    request rates in requests per second, CPU in percent of one core; ``None`` where the row has no such figure."""

    scenario: str
    model: str
    title: str
    deployment: str
    series: str  # the deployment, and the load generator or host where they are not the suite's or this one
    format: str
    precision: str
    status: str
    reasons: tuple[str, ...]
    load_kind: str  # sweep, rate, evidence (of a latency-bound search) or result (its answer)
    label: str  # "batch 4, concurrency 2"
    order: tuple[float, float]  # (batch, concurrency): how a page sorts its points
    loadgen: str
    host: str
    batch: int | None
    concurrency: float | None  # set concurrency, or an open-loop point's requests in flight
    request_rate_per_s: float | None
    achieved_rate_per_s: float | None  # open loop: the rate the schedule was sent at
    late_percent: float | None  # open loop: the share of requests sent late
    throughput_per_s: float | None
    latency_ms: Mapping[str, float | None]  # LATENCY_COLUMNS (the breakdown's parts and the percentiles)
    intervals_ms: Mapping[str, tuple[float | None, float | None]]  # p50..p99 latency -> (low, high)
    indicative: frozenset[str]  # percentile columns printed as "~": too few samples, or no interval
    samples: int | None
    client_cpu_percent: float | None
    other_cpu_percent: float | None
    gpu: Mapping[str, tuple[float, Any]]  # GPU_COLUMNS -> (mean, max) over the point, where sampled
    stream: Mapping[str, float | None]  # a decoupled deployment's STREAM_COLUMNS (ms, but the two rates)
    stream_samples: tuple[Any, Any]  # the samples behind them: (time to first response, inter-response)
    steps: Mapping[str, Mapping[str, float]]  # composing model -> its requests and STEP_COLUMNS (ms per request)
    method: Method
    parameters: Mapping[str, Any]  # the "Parameter Name | Parameter Value" table
    run_id: str
    search: Search | None  # a latency-bound search's tag, None for other points
    repeat: Repeat | None
    drift: Drift | None
    under_load: UnderLoad | None
    sequences: Sequences | None
    row: Row = field(repr=False, compare=False)

    @classmethod
    def of(cls, row: Row) -> "Point":
        record = row.to_dict()
        result, measurement = _result_of(record), row.measurement
        estimates = _mapping(measurement.get("percentiles"))
        intervals, indicative = {}, set()
        for column in PERCENTILE_COLUMNS:
            estimate = estimates.get(column.split()[0])
            if isinstance(estimate, Mapping):
                intervals[column] = (number_of(estimate.get("low")), number_of(estimate.get("high")))
                if estimate.get("indicative"):
                    indicative.add(column)
            elif is_number(result.get(column)):
                indicative.add(column)
        batch, concurrency = _coord(record, "Batch"), _coord(record, "Concurrency")
        samples = measurement.get("measured_requests")
        sampled = _mapping(measurement.get("gpu"))
        gpu = {c: (stat["mean"], stat.get("max")) for c, stat in ((c, _mapping(sampled.get(c))) for c in GPU_COLUMNS)
               if is_number(stat.get("mean"))}
        stream = _mapping(measurement.get("stream"))
        repeat, drift = _mapping(measurement.get("repeat")), _mapping(measurement.get("drift"))
        under_load, sequences = _mapping(record.get("accuracy_under_load")), _mapping(measurement.get("sequences"))
        low, high = sequences.get("sequence_id_range") or [1, None]
        return cls(
            scenario=row.scenario, model=row.model, title=row.title or row.model, deployment=row.deployment,
            series=_series_of(record), format=row.format, precision=row.precision, status=_status_of(record),
            reasons=tuple(str(r) for r in row.reasons), load_kind=_load_kind(record), label=_row_label(record),
            order=_sort_key(record),
            loadgen=str(measurement.get("loadgen") or row.loadgen or "suite"), host=str(row.extra.get("host") or ""),
            batch=int(batch) if is_number(batch) else None, concurrency=number_of(concurrency),
            request_rate_per_s=number_of(row.request_rate),
            achieved_rate_per_s=number_of(measurement.get("achieved_rate")),
            late_percent=number_of(measurement.get("late_percent")),
            throughput_per_s=number_of(result.get("Inferences/Second")),
            latency_ms={c: number_of(result.get(c)) for c in LATENCY_COLUMNS}, intervals_ms=intervals,
            indicative=frozenset(indicative), samples=int(samples) if is_number(samples) else None,
            client_cpu_percent=number_of(measurement.get("client_cpu_percent")),
            other_cpu_percent=number_of(measurement.get("host_other_cpu_percent")), gpu=gpu,
            stream={c: result.get(c) for c in STREAM_COLUMNS},
            stream_samples=(stream.get("time_to_first_response_samples", "-"),
                            stream.get("inter_response_samples", "-")),
            steps=_mapping(measurement.get("composing")), method=Method.of(measurement),
            parameters=_mapping(record.get("parameters")), run_id=row.run_id,
            search=(Search.of(measurement["search"], measurement.get("remeasure"))
                    if _mapping(measurement.get("search")) else None),
            repeat=Repeat(repeat.get("round"), repeat.get("of"), repeat.get("order")) if repeat else None,
            drift=Drift(bool(drift.get("drifting")), drift.get("throughput_change_percent"),
                        drift.get("latency_change_percent"), drift.get("limit_percent")) if drift else None,
            under_load=UnderLoad(under_load.get("verdict", "-"), bool(under_load.get("passed")),
                                 under_load.get("concurrency")) if under_load else None,
            sequences=Sequences(sequences.get("sequence_length"), sequences.get("sequence_length_variation"),
                                (low, high), sequences.get("sequences_started"),
                                sequences.get("ended_when_the_point_ended")) if sequences else None,
            row=row)

    @property
    def breakdown_ms(self) -> dict[str, float | None]:
        """The latency's parts (Client Send ... Client Recv), whose sum is the average latency."""
        return {part: self.latency_ms.get(part) for part in LATENCY_PARTS}

    def figure(self, column: str) -> float | None:
        """A result column by the seeds' name: Inferences/Second, a latency (ms) or a stream column."""
        if column == "Inferences/Second":
            return self.throughput_per_s
        if column in ("Batch", "Concurrency"):
            return self.batch if column == "Batch" else self.concurrency
        return self.latency_ms[column] if column in self.latency_ms else self.stream.get(column)
