"""Report writer: raw JSON-lines rows -> markdown tables and plots in the seeds' format.

Measured rows are appended to ``<reports_dir>/raw/<scenario>-<run_id>-<worker>.jsonl`` the moment they are
measured (one ``os.write`` per line on an ``O_APPEND`` descriptor, then ``fsync``), so a crash keeps what was
measured and parallel workers, each with its own file, never interfere.  At the end of a session
:func:`write_reports` aggregates them into ``<reports_dir>/<scenario>/<model>.md`` plus plots in
``<reports_dir>/<scenario>/<model>/``.

This is a leaf module: it imports nothing from the rest of ``tritonsuite``; matplotlib is imported lazily inside
the plotting functions (through :class:`matplotlib.figure.Figure`, rendered by the Agg canvas, so no pyplot
global state and no display are involved).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "RESULT_COLUMNS",
    "LATENCY_PARTS",
    "STATUSES",
    "SCENARIO_DESCRIPTIONS",
    "OFFLINE_PLOTS",
    "ONLINE_PLOTS",
    "RawWriter",
    "raw_path",
    "load_rows",
    "render_markdown",
    "render_metrics_markdown",
    "plot_offline",
    "plot_online",
    "write_reports",
]

RESULT_COLUMNS = ("Batch", "Concurrency", "Inferences/Second", "Client Send", "Network+Server Send/Recv",
    "Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output", "Client Recv",
    "p50 latency", "p90 latency", "p95 latency", "p99 latency", "avg latency")
LATENCY_PARTS = ("Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
    "Server Compute Infer", "Server Compute Output", "Client Recv")

#: Row statuses; only "OK" rows are valid.
STATUSES = ("OK", "UNSTABLE", "INVALID", "FAILED")

#: Columns that are not times (no " (ms)" suffix in markdown headers).
_UNITLESS_COLUMNS = ("Batch", "Concurrency", "Inferences/Second")
_INT_COLUMNS = ("Batch", "Concurrency")
#: Trailing columns of the results table (after RESULT_COLUMNS).
_EXTRA_COLUMNS = ("Status", "Client CPU (%)")

SCENARIO_DESCRIPTIONS = {
    "offline": "static batching, one request in flight, inputs/outputs through system shared memory",
    "online": "dynamic batching on the server, concurrent requests over HTTP",
}

#: Plot file names written per scenario (relative to ``<reports_dir>/<scenario>/<model>/``).
OFFLINE_PLOTS = ("throughput_vs_batch.png", "latency_vs_batch.png")
ONLINE_PLOTS = ("latency_vs_concurrency.png",)
_PLOTS = {"offline": OFFLINE_PLOTS, "online": ONLINE_PLOTS}
_PLOT_ALT = {
    "throughput_vs_batch.png": "throughput vs batch size",
    "latency_vs_batch.png": "latency vs batch size",
    "latency_vs_concurrency.png": "latency breakdown and throughput vs concurrency",
}

_MODEL_TITLES = {
    "bert": "BERT",
    "fastpitch": "FastPitch",
    "nnunet": "nnU-Net",
    "tft": "TFT",
    "wide_deep": "Wide & Deep",
    "widedeep": "Wide & Deep",
    "wide_and_deep": "Wide & Deep",
}


# --------------------------------------------------------------------------------------------------------------
# Raw rows: writing and loading
# --------------------------------------------------------------------------------------------------------------

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

    def append(self, record: Mapping[str, Any]) -> None:
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


def _safe_component(value: Any) -> str:
    text = str(value)
    for sep in {os.sep, "/", os.altsep or "/"}:
        text = text.replace(sep, "_")
    return text


def raw_path(reports_dir: str | os.PathLike[str], scenario: str, run_id: str, worker: str = "main") -> Path:
    """``<reports_dir>/raw/<scenario>-<run_id>-<worker>.jsonl`` (one file per scenario, run and worker)."""
    name = f"{_safe_component(scenario)}-{_safe_component(run_id)}-{_safe_component(worker)}.jsonl"
    return Path(reports_dir) / "raw" / name


def _timestamp_key(row: Mapping[str, Any]) -> float:
    ts = row.get("timestamp")
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


def load_rows(reports_dir: str | os.PathLike[str], run_id: str | None = None) -> list[dict]:
    """Read every ``<reports_dir>/raw/*.jsonl`` row (filtered by ``run_id`` when given), oldest first.

    A line that does not parse is skipped with a warning: a truncated last line (a crash mid-write) or, rarely,
    a fragment left in the middle of a file that a later writer continued.  Rows are ordered by their
    ``timestamp`` (stable; rows without one keep file order at the end).
    """
    raw_dir = Path(reports_dir) / "raw"
    rows: list[dict] = []
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
            rows.append(record)
    rows.sort(key=_timestamp_key)
    return rows


# --------------------------------------------------------------------------------------------------------------
# Formatting helpers
# --------------------------------------------------------------------------------------------------------------

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _format_number(column: str, value: Any) -> str:
    """Batch/Concurrency as ints; throughput and values >= 1 ms with 1 decimal; below 1 ms with 2 decimals."""
    if value is None or value == "":
        return "-"
    if not _is_number(value):
        if isinstance(value, float):  # NaN / inf
            return "-"
        return str(value)
    if column in _INT_COLUMNS:
        return str(int(round(value)))
    if column == "Inferences/Second" or abs(value) >= 1.0:
        return f"{value:.1f}"
    if value != 0 and abs(value) < 0.005:
        return "<0.01"
    return f"{value:.2f}"


def _format_value(value: Any) -> str:
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
        return ", ".join(f"{k} {_format_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_format_value(v) for v in value)
    return str(value)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _pipe_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """A pipe table laid out like tabulate's "pipe" format used in the seeds.

    ``align`` is ``"right"`` (header and cells right-aligned, ``--------:`` separators, two spaces of minimum
    padding in headers: ``|   Batch |``) or ``"left"`` (``|:-----|``, as the seeds' parameter tables).
    """
    headers = [_cell(h) for h in headers]
    rows = [[_cell(c) for c in row] for row in rows]
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


def _column_header(column: str) -> str:
    return column if column in _UNITLESS_COLUMNS else f"{column} (ms)"


def _model_title(model: str) -> str:
    return _MODEL_TITLES.get(str(model).lower(), str(model))


def _result(row: Mapping[str, Any]) -> Mapping[str, Any]:
    result = row.get("result")
    return result if isinstance(result, Mapping) else {}


def _coord(row: Mapping[str, Any], column: str) -> Any:
    """Batch or Concurrency of a row: from ``result``, else a top-level lower-case key (e.g. FAILED rows)."""
    value = _result(row).get(column)
    if value is None:
        value = row.get(column.lower())
    return value


def _sort_key(row: Mapping[str, Any]) -> tuple:
    def num(v: Any) -> float:
        return float(v) if _is_number(v) else math.inf
    return num(_coord(row, "Batch")), num(_coord(row, "Concurrency"))


def _status(row: Mapping[str, Any]) -> str:
    return str(row.get("status") or ("OK" if row.get("valid") else "FAILED"))


def _distinct(values: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if v is None or v == "":
            continue
        if v not in seen:
            seen.append(v)
    return seen


def _group(rows: Iterable[Mapping[str, Any]], key) -> dict[Any, list[Mapping[str, Any]]]:
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


def _row_label(row: Mapping[str, Any]) -> str:
    return f"batch {_format_number('Batch', _coord(row, 'Batch'))}, " \
           f"concurrency {_format_number('Concurrency', _coord(row, 'Concurrency'))}"


# --------------------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------------------

def _measured_line(scenario: str, rows: Sequence[Mapping[str, Any]]) -> str:
    def values(key: str) -> list[Any]:
        return _distinct(
            (r.get("measurement") or {}).get(key) if isinstance(r.get("measurement"), Mapping) else None
            for r in rows)

    def join(vs: list[Any]) -> str:
        return " / ".join(_format_value(v) for v in vs)

    parts = []
    description = SCENARIO_DESCRIPTIONS.get(scenario)
    parts.append(f"Measured in the {scenario} scenario" + (f" ({description})" if description else ""))
    details = []
    if values("protocol"):
        details.append(f"protocol {join(values('protocol'))}")
    if values("shared_memory"):
        details.append(f"shared memory {join(values('shared_memory'))}")
    if values("window"):
        details.append(f"measurement window {join(values('window'))}")
    if values("windows"):
        details.append(f"{join(values('windows'))} windows measured")
    stab = values("stability_percentage")
    if stab:
        stable = values("stable_windows")
        over = f" over the last {join(stable)} windows" if stable else ""
        details.append(f"a row is stable when throughput varies by at most {join(stab)}%{over}")
    run_ids = _distinct(r.get("run_id") for r in rows)
    if run_ids:
        details.append(("run " if len(run_ids) == 1 else "runs ") + ", ".join(f"`{r}`" for r in run_ids))
    text = parts[0]
    if details:
        text += ": " + "; ".join(details)
    return text + "."


def _parameters_table(rows: Sequence[Mapping[str, Any]]) -> str:
    names: list[str] = []
    for row in rows:
        params = row.get("parameters")
        if isinstance(params, Mapping):
            for name in params:
                if name not in names:
                    names.append(name)
    if not names:
        return ""
    table_rows = []
    for name in names:
        vals = _distinct((r.get("parameters") or {}).get(name) for r in rows)
        table_rows.append([str(name), ", ".join(_format_value(v) for v in vals) if vals else "-"])
    return _pipe_table(["Parameter Name", "Parameter Value"], table_rows, align="left")


def _results_table(rows: Sequence[Mapping[str, Any]]) -> str:
    headers = [_column_header(c) for c in RESULT_COLUMNS] + list(_EXTRA_COLUMNS)
    body = []
    for row in sorted(rows, key=_sort_key):
        result = _result(row)
        cells = []
        for column in RESULT_COLUMNS:
            value = _coord(row, column) if column in _INT_COLUMNS else result.get(column)
            cells.append(_format_number(column, value))
        cells.append(_status(row))
        measurement = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
        cpu = measurement.get("client_cpu_percent")
        cells.append(f"{cpu:.1f}" if _is_number(cpu) else "-")
        body.append(cells)
    return _pipe_table(headers, body, align="right")


def _problem_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for row in sorted(rows, key=_sort_key):
        status = _status(row)
        if status == "OK" and row.get("valid", True):
            continue
        reasons = [str(r) for r in (row.get("reasons") or [])]
        text = f"- {_row_label(row)}: {status}"
        if reasons:
            text += ": " + "; ".join(reasons)
        lines.append(text)
    return lines


def _plot_links(model: str, scenario: str, plots: Sequence[str] | None) -> list[str]:
    if plots is None:
        plots = [f"{model}/{name}" for name in _PLOTS.get(scenario, ())]
    links = []
    for rel in plots:
        name = Path(rel).name
        links.append(f"![{_PLOT_ALT.get(name, Path(name).stem.replace('_', ' '))}]({rel})")
    return links


def render_markdown(model: str, scenario: str, rows: Sequence[Mapping[str, Any]], *,
                    plots: Sequence[str] | None = None) -> str:
    """One markdown page for ``model`` in ``scenario``.

    Offline/online: per deployment (first-seen order) a ``## <deployment>`` section with how it was measured,
    the "Parameter Name | Parameter Value" table, the results table (RESULT_COLUMNS + Status + Client CPU (%),
    sorted by Batch then Concurrency) and the reasons of every non-OK row.  ``plots`` are relative image paths to
    embed (default: ``<model>/<plot>.png`` for the scenario's plots; ``[]`` embeds none).  Any other scenario
    (e.g. accuracy) is rendered by :func:`render_metrics_markdown`.
    """
    if scenario not in SCENARIO_DESCRIPTIONS:
        return render_metrics_markdown(model, scenario, rows)
    rows = list(rows)
    out = [f"# {_model_title(model)} {scenario} results", ""]
    counts = _group(rows, _status)
    summary = ", ".join(f"{len(counts[s])} {s}" for s in list(STATUSES) + sorted(set(counts) - set(STATUSES))
                        if s in counts)
    deployments = _group(rows, lambda r: str(r.get("deployment") or "unknown deployment"))
    out.append(f"{len(rows)} measured rows over {len(deployments)} deployment(s): {summary or 'none'}. "
               "Only rows with status OK are valid measurements; times are in ms.")
    out.append("")
    links = _plot_links(model, scenario, plots)
    if links:
        out += links + [""]
    for deployment, drows in deployments.items():
        out += [f"## {deployment}", "", _measured_line(scenario, drows), ""]
        params = _parameters_table(drows)
        if params:
            out += [params, ""]
        out += [_results_table(drows), ""]
        problems = _problem_lines(drows)
        if problems:
            out += ["Rows that are not valid measurements:", ""] + problems + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def _flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = []
        for k, v in value.items():
            items += _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        return items
    return [(prefix, value)]


def _threshold_for(thresholds: Any, metric: str) -> Any:
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


def render_metrics_markdown(model: str, scenario: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """A page for metric records (e.g. accuracy): one ``deployment | metric | value | threshold | status`` table.

    Nested ``metrics`` dicts are flattened to dotted names; thresholds are looked up by the same (or the
    top-level) name.  Non-OK records' reasons are listed under the table.
    """
    rows = list(rows)
    out = [f"# {_model_title(model)} {scenario} results", ""]
    for description in _distinct(row.get("description") for row in rows):
        if description:
            out += [f"Data: {description}.", ""]
    table = []
    for row in rows:
        metrics = row.get("metrics")
        if not isinstance(metrics, Mapping):
            metrics = _result(row)
        flat = _flatten("", metrics) or [("-", None)]
        per_metric = row.get("metric_status") or {}
        for name, value in flat:
            threshold = _threshold_for(row.get("thresholds"), name)
            table.append([str(row.get("deployment") or "-"), name, _format_value(value),
                          _format_value(threshold) if threshold is not None else "-",
                          str(per_metric.get(name, "-" if per_metric else _status(row)))])
    if table:
        out += [_pipe_table(["deployment", "metric", "value", "threshold", "status"], table, align="left"), ""]
    else:
        out += ["No records.", ""]
    problems = []
    for row in rows:
        status = _status(row)
        if status != "OK":
            reasons = "; ".join(str(r) for r in (row.get("reasons") or []))
            problems.append(f"- {row.get('deployment') or '-'}: {status}" + (f": {reasons}" if reasons else ""))
    if problems:
        out += ["Records that did not pass:", ""] + problems + [""]
    return "\n".join(out).rstrip("\n") + "\n"


# --------------------------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------------------------

_OK_NOTE = "hollow markers: row not valid (status other than OK)"


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure  # rendered by the Agg canvas in _save; no pyplot state, no display

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=100)
    return path


def _title_of(rows: Sequence[Mapping[str, Any]], scenario: str, what: str) -> str:
    models = _distinct(r.get("model") for r in rows)
    name = ", ".join(_model_title(m) for m in models) or "model"
    return f"{name} {scenario}: {what}"


def _no_data(ax, text: str = "no measured values") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _latest_per(rows: Sequence[Mapping[str, Any]], key) -> dict[Any, Mapping[str, Any]]:
    """The last row (rows are oldest first) for each key: a re-measured point replaces the earlier one."""
    out: dict[Any, Mapping[str, Any]] = {}
    for row in rows:
        out[key(row)] = row
    return out


def _offline_series(rows: Sequence[Mapping[str, Any]]):
    """{series label: sorted [(batch, row)]}; one series per deployment (per concurrency when it varies)."""
    by_dep = _group(rows, lambda r: str(r.get("deployment") or "unknown deployment"))
    series: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    for dep, drows in by_dep.items():
        concs = _distinct(_coord(r, "Concurrency") for r in drows)
        for conc in (concs or [None]):
            crows = [r for r in drows if _coord(r, "Concurrency") == conc] if len(concs) > 1 else drows
            latest = _latest_per([r for r in crows if _is_number(_coord(r, "Batch"))], lambda r: _coord(r, "Batch"))
            label = dep if len(concs) <= 1 else f"{dep} (concurrency {conc})"
            points = sorted(((float(b), r) for b, r in latest.items()), key=lambda p: p[0])
            if points:
                series[label] = points
    return series


def _batch_axis(ax, batches: Sequence[float]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    batches = sorted(set(batches))
    if not batches:
        return
    if min(batches) > 0:
        ax.set_xscale("log", base=2)
        lo, hi = min(batches), max(batches)
        ax.set_xlim(lo / 1.4, hi * 1.4)
    ax.xaxis.set_major_locator(FixedLocator(batches))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{int(round(v))}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch size")


def _plot_marked(ax, xs, ys, oks, color, linestyle, marker, label):
    """A line with filled markers; points of non-OK rows re-drawn hollow."""
    ax.plot(xs, ys, linestyle=linestyle, color=color, marker=marker, markersize=7, markeredgewidth=1.5,
            label=label)
    bad = [(x, y) for x, y, ok in zip(xs, ys, oks) if not ok]
    if bad:
        ax.plot([b[0] for b in bad], [b[1] for b in bad], linestyle="none", marker=marker, markersize=7,
                color=color, markerfacecolor="white", markeredgewidth=1.5)


def plot_offline(rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``throughput_vs_batch.png`` and ``latency_vs_batch.png`` (p50 solid, p99 dashed) into ``out_dir``.

    One line per deployment; x is the batch size on a log2 axis ticked at the measured sizes.  Points whose row
    is not OK are drawn hollow.  Returns the written paths.
    """
    rows = list(rows)
    out_dir = Path(out_dir)
    series = _offline_series(rows)
    colors = _palette(len(series))
    any_bad = any(_status(r) != "OK" for pts in series.values() for _, r in pts)
    batches = [b for pts in series.values() for b, _ in pts]

    # Throughput vs batch.
    fig = _new_figure(8, 5.5)
    ax = fig.add_subplot()
    ax.set_title(_title_of(rows, "offline", "throughput vs batch size"))
    plotted = False
    for (label, pts), color in zip(series.items(), colors):
        xs, ys, oks = _batch_points(pts, "Inferences/Second")
        if xs:
            _plot_marked(ax, xs, ys, oks, color, "-", "o", label)
            plotted = True
    _finish_batch_axes(fig, ax, plotted, batches, "Inferences/Second", any_bad)
    paths = [_save(fig, out_dir / "throughput_vs_batch.png")]

    # Latency (p50, p99) vs batch.
    fig = _new_figure(8, 5.5)
    ax = fig.add_subplot()
    ax.set_title(_title_of(rows, "offline", "latency vs batch size (p50 solid, p99 dashed)"))
    plotted = False
    for (label, pts), color in zip(series.items(), colors):
        for column, style, marker in (("p50 latency", "-", "o"), ("p99 latency", "--", "s")):
            xs, ys, oks = _batch_points(pts, column)
            if xs:
                _plot_marked(ax, xs, ys, oks, color, style, marker, f"{label} {column.split()[0]}")
                plotted = True
    _finish_batch_axes(fig, ax, plotted, batches, "latency (ms)", any_bad)
    paths.append(_save(fig, out_dir / "latency_vs_batch.png"))
    return paths


def _batch_points(pts, column: str) -> tuple[list, list, list]:
    """(batch sizes, values, row is OK) of one column over a deployment's (batch, row) points."""
    xs, ys, oks = [], [], []
    for b, r in pts:
        y = _result(r).get(column)
        if _is_number(y):
            xs.append(b), ys.append(y), oks.append(_status(r) == "OK")
    return xs, ys, oks


def _finish_batch_axes(fig, ax, plotted: bool, batches, ylabel: str, any_bad: bool) -> None:
    if not plotted:
        _no_data(ax)
        return
    _batch_axis(ax, batches)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax, note=_OK_NOTE if any_bad else None)


def _palette(n: int) -> list:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _legend_below(fig, ax, note: str | None = None, handles=None, labels=None, ncol: int | None = None) -> None:
    """Legend under the axes (outside the data area), with an optional note line."""
    from matplotlib.lines import Line2D

    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    handles, labels = list(handles), list(labels)
    if note:
        handles.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", color="0.3"))
        labels.append(note)
    if not handles:
        return
    longest = max(len(lbl) for lbl in labels)
    if ncol is None:
        ncol = 1 if longest > 40 else 2 if longest > 22 else 3
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=ncol, frameon=False,
              fontsize=9)


def plot_online(rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``latency_vs_concurrency.png`` into ``out_dir``: one subplot per deployment.

    Stacked bars: the average latency breakdown (LATENCY_PARTS, ms) per concurrency; line with markers on a
    second y axis: throughput.  Non-OK rows get hatched bars, a hollow throughput marker and their status under
    the tick label.  Returns the written paths.
    """
    rows = list(rows)
    out_dir = Path(out_dir)
    by_dep = _group(rows, lambda r: str(r.get("deployment") or "unknown deployment"))
    n = max(1, len(by_dep))
    fig = _new_figure(10, 3.6 * n + 1.4)
    fig.suptitle(_title_of(rows, "online", "latency breakdown and throughput vs concurrency"))
    part_colors = _palette(len(LATENCY_PARTS))
    if not by_dep:
        _no_data(fig.add_subplot())
        return [_save(fig, out_dir / "latency_vs_concurrency.png")]

    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    legend_handles: dict[str, Any] = {}
    any_bad = False
    for ax, (dep, drows) in zip(axes, by_dep.items()):
        batches = _distinct(_coord(r, "Batch") for r in drows)
        latest = _latest_per([r for r in drows if _is_number(_coord(r, "Concurrency"))],
                             lambda r: (_coord(r, "Batch"), _coord(r, "Concurrency")))
        points = sorted(latest.values(), key=_sort_key)
        ax.set_title(dep if len(batches) != 1 else f"{dep} (batch {_format_number('Batch', batches[0])})",
                     fontsize=10)
        if not points:
            _no_data(ax)
            continue
        xs = list(range(len(points)))
        oks = [_status(r) == "OK" for r in points]
        any_bad = any_bad or not all(oks)
        bottom = [0.0] * len(points)
        for part, color in zip(LATENCY_PARTS, part_colors):
            heights = [(_result(r).get(part) if _is_number(_result(r).get(part)) else 0.0) for r in points]
            bars = ax.bar(xs, heights, bottom=bottom, width=0.6, color=color, label=part, edgecolor="white",
                          linewidth=0.5)
            for bar, ok in zip(bars, oks):
                if not ok:
                    bar.set_hatch("//")
            legend_handles.setdefault(part, bars)
            bottom = [b + h for b, h in zip(bottom, heights)]
        labels = []
        for r, ok in zip(points, oks):
            lbl = _format_number("Concurrency", _coord(r, "Concurrency"))
            if len(batches) > 1:
                lbl += f"\nbatch {_format_number('Batch', _coord(r, 'Batch'))}"
            if not ok:
                lbl += f"\n{_status(r)}"
            labels.append(lbl)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels)
        ax.set_xlim(-0.6, len(points) - 0.4)
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("average latency (ms)")
        top = max(bottom) if bottom else 0.0
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        ax.grid(True, axis="y", alpha=0.3)

        ax2 = ax.twinx()
        all_ty: list[float] = []
        for batch in _distinct(_coord(r, "Batch") for r in points) or [None]:
            # one line per batch size: a sweep over concurrency is not connected across batch sizes
            tx, ty, tok = [], [], []
            for x, r, ok in zip(xs, points, oks):
                y = _result(r).get("Inferences/Second")
                if _is_number(y) and (batch is None or _coord(r, "Batch") == batch):
                    tx.append(x), ty.append(y), tok.append(ok)
            if tx:
                _plot_marked(ax2, tx, ty, tok, "black", "-", "o", "throughput")
                all_ty += ty
        if all_ty:
            ax2.set_ylim(0, max(all_ty) * 1.15 if max(all_ty) > 0 else 1.0)
            legend_handles.setdefault("throughput (right axis)", ax2.get_lines()[0])
        ax2.set_ylabel("throughput (inferences/s)")

    from matplotlib.patches import Patch

    handles = list(legend_handles.values())
    labels = list(legend_handles)
    if any_bad:
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//"))
        labels.append("hatched bar / hollow marker: row not valid")
    fig.legend(handles, labels, loc="outside lower center", ncol=4, frameon=False, fontsize=9)
    return [_save(fig, out_dir / "latency_vs_concurrency.png")]


# --------------------------------------------------------------------------------------------------------------
# Session end
# --------------------------------------------------------------------------------------------------------------

def write_reports(reports_dir: str | os.PathLike[str], run_id: str | None = None) -> list[Path]:
    """Load the raw rows and write one markdown page (and its plots) per (scenario, model).

    ``<reports_dir>/<scenario>/<model>.md`` links its plots as ``<model>/<plot>.png``, written into
    ``<reports_dir>/<scenario>/<model>/``.  Offline pages get the throughput/latency vs batch plots, online pages
    the latency breakdown vs concurrency; other scenarios (accuracy) get a metrics table and no plots.
    Returns every written path (markdown and PNG).
    """
    reports_dir = Path(reports_dir)
    rows = load_rows(reports_dir, run_id=run_id)
    written: list[Path] = []
    groups = _group(rows, lambda r: (str(r.get("scenario") or "unknown"), str(r.get("model") or "unknown")))
    for (scenario, model), grows in groups.items():
        scenario_dir = reports_dir / _safe_component(scenario)
        model_name = _safe_component(model)
        plots: list[str] = []
        if scenario == "offline":
            pngs = plot_offline(grows, scenario_dir / model_name)
        elif scenario == "online":
            pngs = plot_online(grows, scenario_dir / model_name)
        else:
            pngs = []
        plots = [f"{model_name}/{p.name}" for p in pngs]
        md_path = scenario_dir / f"{model_name}.md"
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(render_markdown(model, scenario, grows, plots=plots), encoding="utf-8")
        written.append(md_path)
        written.extend(pngs)
    return written
