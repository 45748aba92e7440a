"""Typed result rows: the one record every scenario writes and every presenter reads.

A :class:`Row` is one attempted point: an offline or online measurement (the seeds' columns in ``result``, how it
was measured in ``measurement``), an accuracy record (``metrics``, ``thresholds``), or a point that raised
(status FAILED, its reason, no figures). :mod:`tritonsuite.core.store` keeps them and reads them back.

A leaf module: it imports nothing from the rest of tritonsuite.
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    # which load source measured the row (its name in tritonsuite.load.sources: "suite", the suite's own engine, or
    # "perf_analyzer"); part of a row's identity, so both can measure one point in one run; older rows: "suite"
    loadgen: str = "suite"
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
