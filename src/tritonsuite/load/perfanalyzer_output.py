"""What perf_analyzer 2.51 writes, read into the suite's terms: its ``-f`` CSV (the seeds' columns, usec), the
windows ``-v`` prints, its summary's request count, its ``--profile-export-file`` (request latencies, salvaged from
a file its writer cut short) and its own line when no three windows agreed. Plain functions of text, no process:
:mod:`tritonsuite.load.perfanalyzer` runs perf_analyzer and builds the row from these."""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass

import numpy as np

from tritonsuite.core.rows import RESULT_COLUMNS
from tritonsuite.core.settings import STABLE_WINDOWS
from tritonsuite.load.point import MeasurementError

UNSTABLE_MARK = "Failed to obtain stable measurement"
#: perf_analyzer's CSV header -> the seeds' column (its values are usec; the suite's are ms)
CSV_COLUMNS = {
    "Inferences/Second": "Inferences/Second",
    "Client Send": "Client Send",
    "Network+Server Send/Recv": "Network+Server Send/Recv",
    "Server Queue": "Server Queue",
    "Server Compute Input": "Server Compute Input",
    "Server Compute Infer": "Server Compute Infer",
    "Server Compute Output": "Server Compute Output",
    "Client Recv": "Client Recv",
    "p50 latency": "p50 latency",
    "p90 latency": "p90 latency",
    "p95 latency": "p95 latency",
    "p99 latency": "p99 latency",
    "Avg latency": "avg latency",
}
_PASS = re.compile(r"Pass \[(\d+)\] throughput: ([0-9.eE+-]+) infer/sec\. Avg latency: (\d+) usec")


def parse_csv(text: str, batch_size: int) -> dict[str, float]:
    """perf_analyzer's ``-f`` CSV (one concurrency row) -> the seeds' columns in ms (its values are usec)."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise MeasurementError(f"perf_analyzer's CSV holds {len(rows)} result rows, expected 1")
    row = rows[0]
    missing = [c for c in ("Concurrency", *CSV_COLUMNS) if c not in row]
    if missing:
        raise MeasurementError(f"perf_analyzer's CSV lacks {', '.join(missing)}; it has {', '.join(row)}")
    try:
        result: dict[str, float] = {"Batch": batch_size, "Concurrency": int(row["Concurrency"])}
        for theirs, ours in CSV_COLUMNS.items():
            value = float(row[theirs])
            result[ours] = value if ours == "Inferences/Second" else value / 1000.0
    except ValueError as exc:
        raise MeasurementError(f"perf_analyzer's CSV has a value that is not a number: {exc}") from None
    return {c: result[c] for c in RESULT_COLUMNS}


def parse_passes(output: str) -> list[tuple[float, float]]:
    """Every measurement window ``-v`` printed: (throughput inf/s, average latency ms)."""
    return [(float(m.group(2)), int(m.group(3)) / 1000.0) for m in _PASS.finditer(output)]


_REQUEST_COUNT = re.compile(r"^\s*Request count: (\d+)\s*$", re.M)
#: a request record's send time and its response times, in the export's own order (a JSON string holds no
#: unescaped quote, so a tensor's BYTES value cannot imitate them)
_EXPORT_TIMES = re.compile(r'"(timestamp|response_timestamps)"\s*:\s*(\d+|\[[0-9,\s]*\])')


def parse_request_count(output: str) -> int | None:
    """The requests perf_analyzer measured, as its summary counts them (``Client: Request count: N``), or None."""
    counts = _REQUEST_COUNT.findall(output)
    return int(counts[-1]) if counts else None


@dataclass(frozen=True)
class ExportedLatencies:
    """Request latencies (s, send to last response) of the measured windows from ``--profile-export-file``.

    perf_analyzer 2.51 exports the records of *every* window it ran, the ones before the stable windows too, while
    its ``Request count`` (and its CSV) are of the last three. The file's ``window_boundaries`` (contiguous windows:
    n + 1 instants for n windows) say which is which; a record counts, as perf_analyzer counts it, in the window its
    last response falls in. ``whole`` is False when perf_analyzer 2.51 left the file cut short. Its export holds each
    request's input and output values, and its JSON writer stops at the first value that is not finite, losing what
    it had not yet flushed (64 KiB at a time). With shared memory those values are not the tensors but whatever the
    client read in their place (a heap address's bytes: 1.08e31 on this host), so now and then one reads as NaN; a
    model whose inputs or outputs hold a NaN or an infinity cuts it every time. The latencies are then those of the
    complete records before the cut, the first ones in time, and none when perf_analyzer ran more windows than it
    measured (the boundaries come after the records, so the first records cannot be told from an earlier window's)."""
    latencies: np.ndarray
    whole: bool
    cut: str = ""  # what became of the file, when not whole
    earlier: int = 0  # records left out: their last response fell in a window before the measured ones


def parse_export(text: str, windows_run: int | None = None) -> ExportedLatencies:
    """``--profile-export-file`` -> the latencies of the requests perf_analyzer measured (its last STABLE_WINDOWS
    windows). ``windows_run`` (the passes ``-v`` printed) is needed only for a cut file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        cut = f"its export stops at byte {len(text.encode())}, mid-record"
        if windows_run is not None and windows_run > STABLE_WINDOWS:
            return ExportedLatencies(np.empty(0), whole=False,
                                     cut=f"{cut}, and perf_analyzer ran {windows_run} windows, so its first records "
                                         f"are not of the last {STABLE_WINDOWS} it measured")
        return ExportedLatencies(_salvaged_latencies(text), whole=False, cut=cut)
    latencies, earlier = [], 0
    for experiment in data.get("experiments", []):
        bounds = experiment.get("window_boundaries") or []
        after = bounds[-STABLE_WINDOWS - 1] if len(bounds) > STABLE_WINDOWS + 1 else None
        for request in experiment.get("requests", []):
            responses = request.get("response_timestamps") or []
            if not responses:
                continue
            if after is not None and responses[-1] <= after:  # counted in an earlier window (end within it)
                earlier += 1
                continue
            latencies.append((responses[-1] - request["timestamp"]) / 1e9)
    return ExportedLatencies(np.asarray(latencies, dtype=np.float64), whole=True, earlier=earlier)


def _salvaged_latencies(text: str) -> np.ndarray:
    latencies, sent = [], None
    for key, value in (m.groups() for m in _EXPORT_TIMES.finditer(text)):
        if key == "timestamp":
            sent = int(value)
        elif sent is not None and value[1:-1].strip():
            latencies.append((int(value[1:-1].split(",")[-1]) - sent) / 1e9)
            sent = None
    return np.asarray(latencies, dtype=np.float64)


def unstable_message(output: str) -> str | None:
    """perf_analyzer's own line saying it found no stable measurement, or None."""
    for line in output.splitlines():
        if UNSTABLE_MARK in line and "within" in line:
            return line.strip()
    return next((ln.strip() for ln in output.splitlines() if UNSTABLE_MARK in ln), None)


def last_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith(("error", "failed", "unable")) or "error" in ln.lower()]
    return (errors or lines or ["no output"])[-1][:300]
