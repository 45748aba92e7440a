"""Typed result rows and their storage: the one record every scenario writes and every presenter reads.

A :class:`Row` is one attempted point: an offline or online measurement (the seeds' columns in ``result``, how it
was measured in ``measurement``), an accuracy record (``metrics``, ``thresholds``), or a point that raised
(status FAILED, its reason, no figures). Rows are appended to
``<reports_dir>/raw/<scenario>-<run_id>-<worker>.jsonl`` the moment they exist (one ``os.write`` per line on an
``O_APPEND`` descriptor, then ``fsync``), so a crash keeps what was measured and parallel workers, each with its
own file, never interfere. Presenters (``tritonsuite.report``) read them back with :func:`load_rows`.

A leaf module: it imports nothing from the rest of tritonsuite.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: Load generators a performance row may come from: the suite's own engine (tritonsuite.load.engine) or NVIDIA's
#: perf_analyzer (tritonsuite.load.perfanalyzer); part of a row's identity, so both can measure one point in one run.
LOADGENS = ("suite", "perf_analyzer")
RESULT_COLUMNS = ("Batch", "Concurrency", "Inferences/Second", "Client Send", "Network+Server Send/Recv",
                  "Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output",
                  "Client Recv", "p50 latency", "p90 latency", "p95 latency", "p99 latency", "avg latency")
#: The columns a decoupled deployment's rows add (tritonsuite.load.streams): responses per request and per second, time
#: to first response and inter-response latency (ms); the samples behind them are in the row's measurement["stream"]
STREAM_COLUMNS = ("Responses/Request", "Responses/Second", "avg time to first response", "p50 time to first response",
                  "p99 time to first response", "avg inter-response latency", "p50 inter-response latency",
                  "p99 inter-response latency")
LATENCY_PARTS = ("Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
                 "Server Compute Infer", "Server Compute Output", "Client Recv")
#: Row statuses; only "OK" rows are valid.
#: STOPPED: given up early on purpose (a search's point clearly over its latency bound). SKIPPED: a check that does
#: not apply or cannot be shown here (a conformance row; its reason says why).
STATUSES = ("OK", "UNSTABLE", "INVALID", "STOPPED", "FAILED", "SKIPPED")


def not_measured(status: str, measurement: Mapping[str, Any]) -> bool:
    """Whether a performance point has no valid figures although its deployment answered every request: its windows
    never agreed (UNSTABLE), or it is INVALID because the load generator measured itself (client bound, behind its
    schedule) or another client shared the model. Such a point is reported as not measured and fails a run only on
    request (``--strict-stability``, ``--perf-gate``); a failed request is a wrong answer and never counts as this."""
    return status in ("UNSTABLE", "INVALID") and not measurement.get("server_fail_delta")


@dataclass
class Row:
    """One attempted point of a run (see the module docstring). JSON keys are the field names."""

    scenario: str
    model: str
    deployment: str
    status: str = "OK"
    reasons: list[str] = field(default_factory=list)
    run_id: str = ""
    timestamp: str = ""
    title: str = ""  # the model's display name ("BERT", "Wide & Deep"); the model name when empty
    format: str = ""
    precision: str = ""
    batch: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None  # open-loop points: the offered requests/s (concurrency is then None)
    loadgen: str = "suite"  # which load generator measured the row (LOADGENS); rows before it existed: "suite"
    parameters: dict[str, Any] = field(default_factory=dict)  # the "Parameter Name | Parameter Value" table
    result: dict[str, Any] = field(default_factory=dict)  # the seeds' columns (performance rows)
    measurement: dict[str, Any] = field(default_factory=dict)  # how it was measured (window, spreads, client CPU)
    samples: int | None = None  # accuracy: how many samples were judged
    description: str = ""  # accuracy: what the data is
    metrics: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    metric_status: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer writer, kept as they were

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"row status {self.status!r}; valid choices: {', '.join(STATUSES)}")

    @property
    def valid(self) -> bool:
        return self.status == "OK"

    @property
    def not_measured(self) -> bool:
        return self.scenario in ("offline", "online") and not_measured(self.status, self.measurement)

    @classmethod
    def failed(cls, *, reason: str, **fields: Any) -> "Row":
        """A point that raised: status FAILED with its reason and no figures, so a report shows every attempt."""
        return cls(status="FAILED", reasons=[reason], **fields)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        data["valid"] = self.valid
        return {**self.extra, **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Row":
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names and v is not None}
        for key in ("scenario", "model", "deployment"):
            known.setdefault(key, "unknown")
        if "status" not in known:  # rows written before statuses existed
            known["status"] = "OK" if data.get("valid") else "FAILED"
        result = known.get("result") or {}
        known.setdefault("batch", result.get("Batch"))  # rows written before the coordinates had fields
        if known.get("request_rate") is None:  # open-loop rows have no set concurrency
            known.setdefault("concurrency", result.get("Concurrency"))
        extra = {k: v for k, v in data.items() if k not in names and k != "valid"}
        return cls(**known, extra=extra)


def _json_default(obj: Any) -> Any:
    """Make numpy scalars/arrays, paths, datetimes and sets JSON serialisable (without importing numpy)."""
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays and scalars
        return obj.tolist()
    if hasattr(obj, "item") and callable(obj.item):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable")


def _finite(obj: Any) -> Any:
    """Replace non-finite floats (NaN, inf: "not measured") by None so every line is standard JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class RawWriter:
    """Append-only JSON-lines writer; each :meth:`append` is durable when it returns.

    Every record is serialised to one line and written with a single ``os.write`` on a descriptor opened with
    ``O_APPEND`` (then fsync'd), so a crash loses at most the line being written and appends never overwrite
    each other.  If the file ends with a partial line (a previous process died mid-write), a newline is written
    first so the fragment stays on its own (skipped) line instead of corrupting the next record.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"RawWriter({str(self.path)!r})"

    def append(self, row: Row | Mapping[str, Any]) -> None:
        """Append a row (stamped with the time it is written, if it has none)."""
        record = row.to_dict() if isinstance(row, Row) else dict(row)
        record["timestamp"] = record.get("timestamp") or time.strftime("%Y-%m-%dT%H:%M:%S%z")
        line = json.dumps(_finite(record), default=_json_default, allow_nan=False, ensure_ascii=False)
        data = (line + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if _ends_with_partial_line(fd):
                data = b"\n" + data
            written = os.write(fd, data)
            while written < len(data):  # regular files do not short-write in practice; be safe anyway
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)


def _ends_with_partial_line(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"


def safe_component(value: Any) -> str:
    text = str(value)
    for sep in {os.sep, "/", os.altsep or "/"}:
        text = text.replace(sep, "_")
    return text


def raw_path(reports_dir: str | os.PathLike[str], scenario: str, run_id: str, worker: str = "main") -> Path:
    """``<reports_dir>/raw/<scenario>-<run_id>-<worker>.jsonl`` (one file per scenario, run and worker)."""
    name = f"{safe_component(scenario)}-{safe_component(run_id)}-{safe_component(worker)}.jsonl"
    return Path(reports_dir) / "raw" / name


def _timestamp_key(row: Row) -> float:
    ts = row.timestamp
    if isinstance(ts, str):
        try:
            dt = datetime.fromisoformat(ts)
        except ValueError:
            return math.inf
        if dt.tzinfo is None:  # naive timestamps: treat as UTC rather than local time
            from datetime import timezone
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    return math.inf


def load_rows(reports_dir: str | os.PathLike[str], run_id: str | None = None) -> list[Row]:
    """Read every ``<reports_dir>/raw/*.jsonl`` row (filtered by ``run_id`` when given), oldest first.

    A line that does not parse is skipped with a warning: a truncated last line (a crash mid-write) or, rarely,
    a fragment left in the middle of a file that a later writer continued.  Rows are ordered by their
    ``timestamp`` (stable; rows without one keep file order at the end).
    """
    raw_dir = Path(reports_dir) / "raw"
    rows: list[Row] = []
    if not raw_dir.is_dir():
        return rows
    for path in sorted(raw_dir.glob("*.jsonl")):
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        last_index = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                where = "truncated last line" if lineno - 1 == last_index else "unparsable line"
                warnings.warn(f"{path}:{lineno}: skipping {where} ({exc.msg})", RuntimeWarning, stacklevel=2)
                continue
            if not isinstance(record, dict):
                warnings.warn(f"{path}:{lineno}: skipping a line that is not a JSON object", RuntimeWarning,
                              stacklevel=2)
                continue
            if run_id is not None and record.get("run_id") != run_id:
                continue
            try:
                rows.append(Row.from_dict(record))
            except (TypeError, ValueError) as exc:
                warnings.warn(f"{path}:{lineno}: skipping a row that does not read: {exc}", RuntimeWarning,
                              stacklevel=2)
    rows.sort(key=_timestamp_key)
    return rows


def faults_path(reports_dir: str | Path, run_id: str, worker: str) -> Path:
    """``<reports_dir>/raw/faults/<run_id>-<worker>.jsonl``: what :mod:`tritonsuite.isolation` records (the
    deployments given up, the server's restarts), one JSON object a line; beside the rows, not among them."""
    return Path(reports_dir) / "raw" / "faults" / f"{safe_component(run_id)}-{safe_component(worker)}.jsonl"


def read_faults(reports_dir: str | Path, run_id: str) -> list[dict]:
    """Every fault record of run ``run_id`` (every worker's), in the order written."""
    found = []
    for path in sorted(Path(reports_dir, "raw", "faults").glob(f"{safe_component(run_id)}-*.jsonl")):
        found += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return found


def fault_lines(records: list[dict]) -> list[str]:
    """One line per deployment given up and per restart ("given up: ...", "restarted: ..."), as the terminal
    summary and summary.md say it."""
    return [f"{'given up' if r['kind'] == 'given_up' else 'restarted'}: {r['line']}" for r in records]
