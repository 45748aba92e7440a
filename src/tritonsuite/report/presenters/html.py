"""The HTML presenter: ``reports/index.html``, the whole run on one self-contained page that opens offline (Plotly's
bundle from the installed ``plotly`` package and the page's own small script inlined; nothing is fetched).

What a reader sees first: the run's header (host, CPU/GPU, versions, profile, the backend that served each
deployment, the command), the filters (model, format, precision, scenario, status) and the count of rows per status;
then per scenario and model, per deployment, its table (sortable; the seeds' main columns first, the latency
breakdown, CPU, GPU and stream columns a click away; each row's status and reasons) and its plots (throughput
against latency with each row on hover, the latency breakdown as stacked bars, percentile intervals as error bars,
the batch sweep, request rates, a search's points and answer, an ensemble's steps, a stream's first and
inter-response latency); then accuracy against its thresholds, the conformance checklists, the comparison with a
stored run (regressions first), tune, mix and perf_analyzer side by side (:mod:`tritonsuite.report.htmlviews`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tritonsuite.core.rows import LATENCY_PARTS, STATUSES, STREAM_COLUMNS, Row
from tritonsuite.core.store import safe_component
from tritonsuite.report.common import PERCENTILE_COLUMNS, column_header, distinct, percentile_cell
from tritonsuite.report.htmlkit import (FILTERS, Cell, Figures, Table, asset, attrs, block, cell_number,
                                        definition_list, esc, number, plot_text, plotly_js, plotly_version)
from tritonsuite.report.htmlviews import other_sections
from tritonsuite.report.points import Point
from tritonsuite.report.records import RunRecords
from tritonsuite.report.steps import STEP_COLUMNS

NAME = "html"
PAGE = "index.html"
PERCENTILE_COLORS = {"p50 latency": "#1f77b4", "p99 latency": "#d62728"}
PART_COLORS = ("#c6dbef", "#9ecae1", "#fdd0a2", "#fdae6b", "#e6550d", "#a1d99b", "#74c476")


def write(run: RunRecords) -> list[Path]:
    if not (run.rows or run.faults):
        return []
    page = run.reports_dir / PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(run), encoding="utf-8")
    return [page]


def render(run: RunRecords) -> str:
    figures = Figures()
    body = [header(run), filter_bar(run), performance_sections(run, figures), other_sections(run, figures)]
    title = f"tritonsuite run {run.run_id or ', '.join(distinct(r.run_id for r in run.rows))}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
            "style-src 'unsafe-inline'; img-src data:; font-src data:\">"
            f"<title>{esc(title)}</title><style>{asset('page.css')}</style></head><body>"
            + "".join(body)
            + f'<script type="application/json" id="figures">{figures.json()}</script>'
            + f"<script>{plotly_js()}</script><script>{asset('page.js')}</script></body></html>\n")


def _format(row: Row) -> str:
    return row.format or str(row.parameters.get("Export format") or "")


def _precision(row: Row) -> str:
    return (row.precision or str(row.parameters.get("Precision") or "")).lower()


def header(run: RunRecords) -> str:
    m = run.manifest or {}
    host, suite, versions = m.get("host") or {}, m.get("suite") or {}, m.get("versions") or {}
    title = f"tritonsuite run {run.run_id or ', '.join(distinct(r.run_id for r in run.rows)) or '-'}"
    items = [("written", m.get("written")), ("host", host.get("name")),
             ("CPU", f"{host.get('cpu')}, {host.get('cores')} cores, {host.get('memory_gib')} GiB" if host else None),
             ("GPU", host.get("gpus") if host else None), ("platform", host.get("platform")),
             ("suite", f"tritonsuite {suite.get('version')}, git {str(suite.get('git_revision') or '-')[:12]}"
                       f"{' (dirty)' if suite.get('dirty') else ''}" if suite else None),
             ("server", m.get("server")),
             ("profile", f"{(m.get('profile') or {}).get('name')} (sha256 "
                         f"{str((m.get('profile') or {}).get('sha256') or '')[:12]})" if m.get("profile") else None),
             ("versions", ", ".join(f"{k} {v}" for k, v in versions.items()) + f", plotly {plotly_version()}"),
             ("reached with", m.get("access")), ("command", m.get("command"))]
    if not m:
        hosts = distinct(r.parameters.get("Host") for r in run.rows)
        items = [("host", ", ".join(map(str, hosts)) or None),
                 ("server", ", ".join(map(str, distinct(r.parameters.get("Server") for r in run.rows))) or None),
                 ("profile", ", ".join(map(str, distinct(r.parameters.get("Profile") for r in run.rows))) or None),
                 ("manifest", "none for these rows: tritonsuite report --run RUN_ID reads the run's")]
    served = Table([("deployment", True), ("backend", True), ("platform", True), ("format", True),
                    ("precision", True), ("instances", True), ("max batch size", True)], cls="served")
    for deployment in distinct(r.deployment for r in run.rows if r.parameters):
        p = next(r.parameters for r in run.rows if r.deployment == deployment and r.parameters)
        served.add([deployment, p.get("Backend", "-"), p.get("Platform", "-"), p.get("Model format", "-"),
                    p.get("Precision", "-"), p.get("Number of model instances", "-"), p.get("Max batch size", "-")])
    counts = {s: sum(1 for r in run.rows if r.status == s) for s in STATUSES}
    status_line = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no rows"
    unverified = f'<p class="warn">{esc(m["unverified"])}</p>' if m.get("unverified") else ""
    faults = ("<h3>Deployments given up, server restarts</h3><ul>" + "".join(f"<li>{esc(f)}</li>" for f in run.faults)
              + "</ul>") if run.faults else ""
    return (f'<header id="run"><h1>{esc(title)}</h1>{unverified}{definition_list(items)}'
            f'<p id="counts">{len(run.rows)} rows: {esc(status_line)}. Only rows with status OK are valid '
            f'measurements; times in ms. The markdown pages: <a href="summary.md">summary.md</a>.</p>'
            f"<details><summary>The backend that served each deployment</summary>{served.html()}</details>"
            f"{faults}</header>")


def filter_bar(run: RunRecords) -> str:
    values = {"scenario": distinct(r.scenario for r in run.rows), "model": distinct(r.model for r in run.rows),
              "format": distinct(_format(r) for r in run.rows), "precision": distinct(_precision(r) for r in run.rows),
              "status": distinct(r.status for r in run.rows)}
    selects = "".join(f'<label>{esc(key)} <select{attrs(data_key=key, id=f"filter-{key}")}>'
                      '<option value="">all</option>'
                      + "".join(f'<option{attrs(value=v)}>{esc(v)}</option>' for v in values[key])
                      + "</select></label>" for key in FILTERS)
    return f'<nav id="filters">{selects}<span id="shown"></span></nav>'


def performance_sections(run: RunRecords, figures: Figures) -> str:
    out = []
    for (scenario, model), points in run.performance.items():
        link = f"{safe_component(scenario)}/{safe_component(model)}.md"
        blocks = []
        for series in distinct(p.series for p in points):
            mine = [p for p in points if p.series == series]
            row = mine[0].row
            blocks.append(block(deployment_view(scenario, mine, figures), series, 3, scenario=scenario, model=model,
                                format=_format(row), precision=_precision(row)))
        out.append(f'<section class="page"{attrs(id=f"{scenario}-{safe_component(model)}")}>'
                   f"<h2>{esc(scenario)}: {esc(points[0].title if points else model)} "
                   f'<a class="md"{attrs(href=link)}>markdown</a></h2>{"".join(blocks)}</section>')
    return "".join(out)


def _point_order(p: Point) -> tuple:
    return (p.batch if p.batch is not None else 1e9, p.request_rate_per_s or 0.0, p.concurrency or 0.0,
            (p.search.step or 0) if p.search else 0)


def deployment_view(scenario: str, points: list[Point], figures: Figures) -> str:
    points = sorted(points, key=_point_order)
    streamed = [c for c in STREAM_COLUMNS if any(p.stream.get(c) is not None for p in points)]
    columns = ([("Load", True), ("Batch", True), ("Concurrency", True), ("Inferences/Second", True)]
               + [(column_header(c), True) for c in (*PERCENTILE_COLUMNS, "avg latency")]
               + [("Samples", True), ("Status", True), ("Reasons", True)]
               + [(column_header(c), False) for c in (*LATENCY_PARTS, *streamed)]
               + [("Client CPU (%)", False), ("Other CPU (%)", False), ("Load generator", False)])
    table = Table(columns)
    for p in points:
        load = p.load_kind if p.request_rate_per_s is None else f"rate {p.request_rate_per_s:g} req/s"
        if p.search:
            load = f"search step {p.search.step}" if p.load_kind == "evidence" else "search answer"
        table.add([load, cell_number(p.batch, 0), cell_number(p.concurrency, 0 if p.request_rate_per_s is None else 1),
                   cell_number(p.throughput_per_s)]
                  + [Cell(percentile_cell(p, c), p.latency_ms.get(c)) for c in PERCENTILE_COLUMNS]
                  + [cell_number(p.latency_ms.get("avg latency"), 2), cell_number(p.samples, 0),
                     Cell(p.status, cls=f"status-{p.status}"), "; ".join(p.reasons) or "-"]
                  + [cell_number(p.latency_ms.get(c), 2) for c in LATENCY_PARTS]
                  + [cell_number(p.stream.get(c), 2) for c in streamed]
                  + [cell_number(p.client_cpu_percent), cell_number(p.other_cpu_percent), p.loadgen],
                  status=p.status)
    plots = [throughput_latency(scenario, points, figures), breakdown(scenario, points, figures),
             stream_plot(points, streamed, figures), steps_plot(points, figures)]
    if scenario == "offline":
        plots.insert(0, batch_sweep(points, figures))
    params = points[0].parameters
    details = (f"<details><summary>Parameters</summary>{definition_list([(k, v) for k, v in params.items()])}"
               "</details>") if params else ""
    return details + table.html() + '<div class="plots">' + "".join(plots) + "</div>"


def _hover(p: Point) -> str:
    tput, p99 = p.throughput_per_s, p.latency_ms.get("p99 latency")
    figures = ", ".join(filter(None, [f"{tput:.1f} inf/s" if tput is not None else "",
                                      f"p99 {p99:.2f} ms" if p99 is not None else ""]))
    return "<br>".join(plot_text(x) for x in (p.series, p.label, f"status {p.status}", figures,
                                              "; ".join(p.reasons)[:200]) if x)


def _error_bars(points: list[Point], column: str) -> dict[str, Any]:
    upper, lower = [], []
    for p in points:
        value, (low, high) = p.latency_ms.get(column), p.intervals_ms.get(column, (None, None))
        upper.append(high - value if value is not None and high is not None else 0.0)
        lower.append(value - low if value is not None and low is not None else 0.0)
    return {"type": "data", "symmetric": False, "array": upper, "arrayminus": lower, "thickness": 1}


def _ok_symbol(points: list[Point], symbol: str = "circle") -> list[str]:
    return [symbol if p.status == "OK" else f"{symbol}-open" for p in points]


def throughput_latency(scenario: str, points: list[Point], figures: Figures) -> str:
    """Throughput against p99 latency, each row on hover; p99's interval as error bars; a search's points and
    answer; hollow markers: rows that are not valid."""
    traces = []
    for kind, name, mode, symbol in (("sweep", "batch or concurrency sweep", "lines+markers", "circle"),
                                     ("rate", "request rates", "lines+markers", "square"),
                                     ("evidence", "search points", "markers", "x"),
                                     ("result", "search answer", "markers", "star")):
        mine = [p for p in points if p.load_kind == kind and p.throughput_per_s is not None
                and p.latency_ms.get("p99 latency") is not None]
        if mine:
            traces.append({"type": "scatter", "mode": mode, "name": name, "x": [p.throughput_per_s for p in mine],
                           "y": [p.latency_ms["p99 latency"] for p in mine], "text": [_hover(p) for p in mine],
                           "hoverinfo": "text", "error_y": _error_bars(mine, "p99 latency"),
                           "marker": {"symbol": _ok_symbol(mine, symbol), "size": 14 if kind == "result" else 8}})
    return figures.add("throughput-latency", f"{points[0].series}: p99 latency against throughput", traces,
                       {"xaxis": {"title": {"text": "throughput (inferences/s)"}, "rangemode": "normal"},  # the data's
                        "yaxis": {"title": {"text": "p99 latency (ms)"}, "rangemode": "tozero"}})


def _x_labels(points: list[Point]) -> list[str]:
    return [plot_text(p.label.replace("batch ", "b").replace("concurrency ", "c") + ("" if p.status == "OK"
                                                                                      else f" {p.status}"))
            for p in points]


def breakdown(scenario: str, points: list[Point], figures: Figures) -> str:
    """The latency's parts as stacked bars per point (Client Send ... Client Recv; their sum is avg latency)."""
    mine = [p for p in points if p.load_kind in ("sweep", "rate") and any(v for v in p.breakdown_ms.values())]
    labels = _x_labels(mine)
    traces = [{"type": "bar", "name": plot_text(part), "x": labels, "marker": {"color": color},
               "y": [p.breakdown_ms.get(part) or 0.0 for p in mine], "hovertemplate": "%{y:.3f} ms"}
              for part, color in zip(LATENCY_PARTS, PART_COLORS)] if mine else []
    return figures.add("breakdown", f"{points[0].series}: latency breakdown (ms)", traces,
                       {"barmode": "stack", "yaxis": {"title": {"text": "average latency (ms)"}}})


def batch_sweep(points: list[Point], figures: Figures) -> str:
    """Offline: throughput and p50/p99 (with their intervals) against the batch size."""
    mine = [p for p in points if p.load_kind == "sweep" and p.batch is not None and p.throughput_per_s is not None]
    traces = []
    if mine:
        traces.append({"type": "scatter", "mode": "lines+markers", "name": "throughput", "yaxis": "y2",
                       "x": [p.batch for p in mine], "y": [p.throughput_per_s for p in mine],
                       "text": [_hover(p) for p in mine], "hoverinfo": "text",
                       "marker": {"symbol": _ok_symbol(mine), "color": "#2ca02c"}})
        for column, color in PERCENTILE_COLORS.items():
            traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{column.split()[0]} latency",
                           "x": [p.batch for p in mine], "y": [p.latency_ms.get(column) for p in mine],
                           "error_y": _error_bars(mine, column), "marker": {"color": color}})
    return figures.add("batch-sweep", f"{points[0].series}: throughput and latency against batch size", traces,
                       {"xaxis": {"title": {"text": "batch size"}, "tickvals": sorted({p.batch for p in mine})},
                        "margin": {"l": 60, "r": 70, "t": 40, "b": 50},
                        "yaxis": {"title": {"text": "latency (ms)"}, "rangemode": "tozero"},
                        "yaxis2": {"title": {"text": "inferences/s"}, "overlaying": "y", "side": "right",
                                   "rangemode": "tozero", "tickmode": "auto", "nticks": 6, "showgrid": False}})
    # tickmode auto: an overlaying axis otherwise takes its ticks from the left axis's grid (0, 253, 506 inf/s)


def stream_plot(points: list[Point], streamed: list[str], figures: Figures) -> str:
    """A decoupled deployment's time to first response and inter-response latency per point."""
    columns = [c for c in streamed if "time to first" in c or "inter-response" in c]
    mine = [p for p in points if any(number(p.stream.get(c)) is not None for c in columns)]
    traces = [{"type": "bar", "name": plot_text(c), "x": _x_labels(mine),
               "y": [number(p.stream.get(c)) for p in mine]} for c in columns] if mine else []
    return figures.add("stream", f"{points[0].series}: first response and inter-response latency (ms)", traces,
                       {"barmode": "group", "yaxis": {"title": {"text": "ms"}}})


def steps_plot(points: list[Point], figures: Figures) -> str:
    """An ensemble's steps (or a BLS model's callees): each composing model's time per request, stacked."""
    mine = [p for p in points if p.steps]
    labels, stacks = [], []
    for p in mine:
        for step, figures_of in p.steps.items():
            labels.append(plot_text(f"{p.label}: {step}"))
            stacks.append([number(figures_of.get(c)) or 0.0 for c in STEP_COLUMNS])
    traces = [{"type": "bar", "name": plot_text(c), "x": labels, "y": [s[i] for s in stacks]}
              for i, c in enumerate(STEP_COLUMNS)] if labels else []
    return figures.add("steps", f"{points[0].series}: time per composing model (ms per request)", traces,
                       {"barmode": "stack", "yaxis": {"title": {"text": "ms per request"}}})
