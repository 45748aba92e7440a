"""What the markdown and plot presenters share: column layout and the formatting of cells and titles."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tritonsuite.load.telemetry import GPU_COLUMNS

UNITLESS_COLUMNS = ("Batch", "Concurrency", "Inferences/Second", "Responses/Request", "Responses/Second")
INT_COLUMNS = ("Batch", "Concurrency")
#: Trailing columns of the results table (after RESULT_COLUMNS).
EXTRA_COLUMNS = ("Status", "Client CPU (%)", "Other CPU (%)") + GPU_COLUMNS

SCENARIO_DESCRIPTIONS = {
    "offline": "static batching, one request in flight, inputs/outputs through system shared memory",
    "online": "dynamic batching on the server, concurrent requests over HTTP",
}

#: Plot file names written per scenario (relative to ``<reports_dir>/<scenario>/<model>/``).
OFFLINE_PLOTS = ("throughput_vs_batch.png", "latency_vs_batch.png")
ONLINE_PLOTS = ("latency_vs_concurrency.png", "latency_vs_throughput.png")
PLOTS = {"offline": OFFLINE_PLOTS, "online": ONLINE_PLOTS}
PLOT_ALT = {
    "throughput_vs_batch.png": "throughput vs batch size",
    "latency_vs_batch.png": "latency vs batch size",
    "latency_vs_concurrency.png": "latency breakdown and throughput vs concurrency",
    "latency_vs_throughput.png": "p99 latency vs throughput: concurrency sweep, request rates, latency-bound search",
    "steps.png": "an ensemble's (or a BLS model's) time per composing model: Server Queue and Compute Input / Infer / "
                 "Output",
}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def format_number(column: str, value: Any) -> str:
    """Batch/Concurrency as ints; throughput and values >= 1 ms with 1 decimal; below 1 ms with 2 decimals."""
    if value is None or value == "":
        return "-"
    if not is_number(value):
        if isinstance(value, float):  # NaN / inf
            return "-"
        return str(value)
    if column in INT_COLUMNS:
        return str(int(round(value)))
    if column == "Inferences/Second" or abs(value) >= 1.0:
        return f"{value:.1f}"
    if value != 0 and abs(value) < 0.005:
        return "<0.01"
    return f"{value:.2f}"


def format_value(value: Any) -> str:
    """Generic cell value (parameter tables, metrics)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value == int(value) and abs(value) < 1e15:
            return f"{value:.1f}"
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {format_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def table_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def pipe_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """A pipe table laid out like tabulate's "pipe" format used in the seeds.

    ``align`` is ``"right"`` (header and cells right-aligned, ``--------:`` separators, two spaces of minimum
    padding in headers: ``|   Batch |``) or ``"left"`` (``|:-----|``, as the seeds' parameter tables).
    """
    headers = [table_cell(h) for h in headers]
    rows = [[table_cell(c) for c in row] for row in rows]
    if align == "right":
        widths = [max([len(h) + 2] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
        just = str.rjust
        seps = ["-" * (w + 1) + ":" for w in widths]
    else:
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
        just = str.ljust
        seps = [":" + "-" * (w + 1) for w in widths]

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(" " + just(c, w) + " " for c, w in zip(cells, widths)) + "|"

    out = [line(headers), "|" + "|".join(seps) + "|"]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def column_header(column: str) -> str:
    return column if column in UNITLESS_COLUMNS else f"{column} (ms)"


def title_of(points: Sequence[Any], model: str = "") -> str:
    """The model's display name the points' rows carry (``ModelSpec.title``), else the model name."""
    titles = distinct(p.row.title for p in points)
    return ", ".join(titles) if titles else (model or ", ".join(distinct(p.model for p in points)) or "model")


def distinct(values: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if v is None or v == "":
            continue
        if v not in seen:
            seen.append(v)
    return seen


def group_by(rows: Iterable[Mapping[str, Any]], key) -> dict[Any, list[Mapping[str, Any]]]:
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


PERCENTILE_COLUMNS = ("p50 latency", "p90 latency", "p95 latency", "p99 latency")


def percentile_cell(point, column: str) -> str:
    """A percentile of a :class:`tritonsuite.report.records.Point` with its interval, "12.3 [11.9, 12.8]", or marked
    indicative, "~45.1 [40.2, -]" (the interval has no upper end in the sample, or is wider than the stated
    precision). A row without intervals (perf_analyzer's own percentiles, a row written before they existed) is
    indicative too: "~12.3"."""
    value = point.latency_ms.get(column)
    text = format_number(column, value)
    if value is None:
        return text
    if column not in point.intervals_ms:
        return "~" + text
    low, high = (format_number(column, v) if v is not None else "-" for v in point.intervals_ms[column])
    return ("~" if column in point.indicative else "") + f"{text} [{low}, {high}]"


def samples_cell(point) -> str:
    """How many latencies the point's percentiles came from."""
    return str(point.samples) if point.samples is not None else "-"


def percentile_note(points: Iterable[Any]) -> str:
    """The line above a table with percentile columns: what the brackets, the Samples column and "~" mean."""
    rules = distinct(p.method.percentile_rule for p in points)
    rule = rules[0] if rules else "rows without intervals were measured by a load generator that records none"
    return (f"Percentiles read 'value [low, high]', the interval from the row's Samples latencies; '~' marks an "
            f"indicative percentile (a number, not a measurement): {rule}.")
