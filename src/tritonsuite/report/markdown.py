"""Markdown pages in the seeds' format: per deployment, how it was measured, the "Parameter Name | Parameter
Value" table, the results table (the seeds' columns, Status, Client CPU) and, for GPU profiles, the seeds' published
figures beside the measured ones (:mod:`tritonsuite.published`); metric tables for accuracy."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonsuite.report.common import (_EXTRA_COLUMNS, _INT_COLUMNS, _PLOT_ALT, _PLOTS, SCENARIO_DESCRIPTIONS,
                                       _column_header, _coord, _distinct, _format_number, _format_value, _group,
                                       _is_number, _load_kind, _pipe_table, _records, _result, _row_label, _search,
                                       _series, _sort_key, _status, _title)
from tritonsuite.rows import RESULT_COLUMNS, STATUSES
from tritonsuite.telemetry import GPU_COLUMNS


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
    if values("loadgen"):
        details.append(f"load generator {join(values('loadgen'))}")
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
        for key in ("client_cpu_percent", "host_other_cpu_percent"):  # the load generator; everyone else
            cpu = measurement.get(key)
            cells.append(f"{cpu:.1f}" if _is_number(cpu) else "-")
        gpu = measurement.get("gpu") if isinstance(measurement.get("gpu"), Mapping) else {}
        for column in GPU_COLUMNS:
            stat = gpu.get(column) or {}
            cells.append(f"{stat['mean']:.0f} / {stat['max']:.0f}" if _is_number(stat.get("mean")) else "-")
        body.append(cells)
    return _pipe_table(headers, body, align="right")


def _ratio(value: float | None) -> str:
    return f"{value:.2f}" if _is_number(value) else "-"


def _published_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The seeds' published figures beside the measured ones, for the rows whose profile names published tables
    (GPU profiles only) and whose deployment and point match a published row; its heading says when the GPU the
    rows were measured on is not the published one."""
    from tritonsuite.published import PUBLISHED_PARAMETER, join, published_configurations
    from tritonsuite.rows import Row

    named = [r for r in rows if (r.get("parameters") or {}).get(PUBLISHED_PARAMETER)]
    if not named:
        return []
    measured = [Row.from_dict(r) for r in named]
    matches = [m for m in (join(r) for r in measured) if m is not None]
    gpu = str(measured[0].parameters[PUBLISHED_PARAMETER])
    if not matches:
        published = published_configurations(gpu, measured[0].model)
        return [f"No published row matches this deployment in the seeds' {gpu} tables (published for "
                f"{measured[0].model}: {'; '.join(published) if published else 'nothing'}).", ""]
    first = matches[0]
    heading = f"### Published figures: {first.published_gpu}"
    same = {m.same_gpu for m in matches}
    measured_on = ", ".join(_distinct(m.measured_gpu for m in matches))
    if False in same:
        heading += f" — MEASURED ON A DIFFERENT GPU ({measured_on})"
    elif None in same:
        heading += " — measured GPU not known here (remote server)"
    profile = _distinct((r.parameters.get("Profile") for r in measured))
    out = [heading, ""]
    note = (f"From {first.published.labels['Source']} (transcribed in tritonsuite/published/{gpu}/"
            f"{first.published.model}.csv), the rows of this deployment's configuration and points; "
            f"ratios are measured / published (throughput above 1: faster than published; p99 above 1: slower).")
    if False in same:
        note += (f" These rows were measured on {measured_on}"
                 + (f" with profile {', '.join(profile)}" if profile else "")
                 + f", not on the published {first.published_gpu}: the ratios compare two GPUs, not this deployment "
                   f"with its published figures.")
    elif None in same:
        note += f" The server is not on this host, so which GPU ran these rows is not known here ({measured_on})."
    out += [note, ""]
    body = []
    for m in sorted(matches, key=lambda m: (m.published.batch, m.published.concurrency)):
        record = m.measured.to_dict()
        body.append([_format_number("Batch", m.published.batch), _format_number("Concurrency", m.published.concurrency),
                     _format_number("Inferences/Second", m.throughput),
                     _format_number("Inferences/Second", m.published_throughput), _ratio(m.throughput_ratio),
                     _format_number("p99 latency", m.p99), _format_number("p99 latency", m.published_p99),
                     _ratio(m.p99_ratio), _status(record)])
    out += [_pipe_table(["Batch", "Concurrency", "Inferences/Second", "Published Inferences/Second",
                         "Throughput ratio", "p99 latency (ms)", "Published p99 latency (ms)", "p99 ratio", "Status"],
                        body, align="right"), ""]
    unmatched = len(named) - len(matches)
    if unmatched:
        out += [f"{unmatched} measured row(s) of this deployment have no published point.", ""]
    return out


def _cpu_cells(row: Mapping[str, Any]) -> list[str]:
    measurement = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
    return [f"{measurement[k]:.1f}" if _is_number(measurement.get(k)) else "-"
            for k in ("client_cpu_percent", "host_other_cpu_percent")]


def _rate_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Open-loop rows: offered and achieved rate, the share sent late, requests in flight, latencies."""
    headers = ["Offered (req/s)", "Achieved (req/s)", "Late (%)", "In flight", "Inferences/Second", "p50 latency",
               "p90 latency", "p95 latency", "p99 latency", "avg latency", "Status", "Client CPU (%)",
               "Other CPU (%)"]
    body = []
    for row in sorted(rows, key=lambda r: (r.get("request_rate") or 0)):
        m = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
        result = _result(row)
        body.append([_format_number("Inferences/Second", row.get("request_rate")),
                     _format_number("Inferences/Second", m.get("achieved_rate")),
                     f"{m['late_percent']:.2f}" if _is_number(m.get("late_percent")) else "-",
                     f"{result['Concurrency']:.1f}" if _is_number(result.get("Concurrency")) else "-"]
                    + [_format_number(c, result.get(c)) for c in headers[4:10]] + [_status(row)] + _cpu_cells(row))
    return _pipe_table([_column_header(h) if h in RESULT_COLUMNS else h for h in headers], body, align="right")


def _search_sections(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per search (kind and bound): the answer, then its evidence, one row per measured point in order."""
    out: list[str] = []
    groups = _group([r for r in rows if _search(r)], lambda r: (_search(r).get("kind"), _search(r).get("bound")))
    for (kind, bound), grows in groups.items():
        answers = [r for r in grows if _load_kind(r) == "result"]
        headline = _search(answers[-1]).get("answer") if answers else f"search for the most {kind} at {bound}: " \
                                                                       f"unfinished (no answer recorded)"
        out += [f"**{headline}**", ""]
        body = []
        for row in sorted((r for r in grows if _load_kind(r) == "evidence"), key=lambda r: _search(r).get("step", 0)):
            search, result = _search(row), _result(row)
            load = (_format_number("Inferences/Second", row["request_rate"]) + " req/s" if _is_number(
                row.get("request_rate")) else f"concurrency {_format_number('Concurrency', _coord(row, 'Concurrency'))}")
            body.append([str(search.get("step", "-")), load,
                         _format_number("Inferences/Second", result.get("Inferences/Second")),
                         _format_number("p99 latency", result.get("p99 latency")), _status(row),
                         "yes" if search.get("within") else "no", str(search.get("why", "-"))])
        if body:
            out += [_pipe_table(["Step", "Load", "Inferences/Second", "p99 latency (ms)", "Status", "Within",
                                 "Why"], body, align="left"), ""]
    return out


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
    the "Parameter Name | Parameter Value" table, the results table (RESULT_COLUMNS + Status + Client CPU (%) +
    Other CPU (%) (other processes than the server's and the load generator: how busy the host was) +
    the GPU telemetry columns as "mean / max", "-" where not sampled; sorted by Batch then Concurrency), for a GPU
    profile's rows the seeds' published throughput and p99 beside the measured ones with their ratios (headed with
    the published GPU, and loudly when the rows ran on another), and the reasons of every non-OK row.  ``plots`` are relative image paths to
    embed (default: ``<model>/<plot>.png`` for the scenario's plots; ``[]`` embeds none).  Any other scenario
    (e.g. accuracy) is rendered by :func:`render_metrics_markdown`.
    """
    if scenario not in SCENARIO_DESCRIPTIONS:
        return render_metrics_markdown(model, scenario, rows)
    rows = _records(rows)
    out = [f"# {_title(rows, model)} {scenario} results", ""]
    counts = _group(rows, _status)
    summary = ", ".join(f"{len(counts[s])} {s}" for s in list(STATUSES) + sorted(set(counts) - set(STATUSES))
                        if s in counts)
    deployments = _group(rows, _series)
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
        sweep = [r for r in drows if _load_kind(r) == "sweep"]
        rates = [r for r in drows if _load_kind(r) == "rate"]
        if sweep or not (rates or any(_search(r) for r in drows)):
            out += [_results_table(sweep), ""]
        if rates:
            out += ["Request rates (open loop: arrivals on a seeded schedule, latency from each request's scheduled "
                    "send time; a point with more late sends than the limit is INVALID):", "", _rate_table(rates), ""]
        out += _published_section(sweep)
        out += _search_sections(drows)
        problems = _problem_lines([r for r in drows if _load_kind(r) in ("sweep", "rate")])
        if problems:
            out += ["Rows that are not valid measurements:", ""] + problems + [""]
        for row in sorted(drows, key=_sort_key):
            verdict = _under_load(row)
            if verdict:
                out += [f"Accuracy under load ({_row_label(row)}): {verdict.get('verdict', '-')}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _under_load(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A row's accuracy-under-load verdict (``tritonsuite.underload``), or {} when the point carried no probes."""
    found = row.get("accuracy_under_load")
    return found if isinstance(found, Mapping) else {}


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
    rows = _records(rows)
    out = [f"# {_title(rows, model)} {scenario} results", ""]
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
    baselines = []
    for row in rows:
        note = row.get("baseline") or {}
        lines = [f"regression: {line}" for line in note.get("regressions", [])] + \
                [f"improvement: {line}" for line in note.get("improvements", [])]
        if note.get("missing"):
            lines.append(f"{note['missing']}")
        elif note.get("compared") is not None and not lines:
            lines.append(f"{note['compared']} metrics within their allowances")
        if note.get("updated"):
            lines.append(f"baseline rewritten: {note['updated']}")
        baselines += [f"- {row.get('deployment') or '-'}: {line}" for line in lines]
    if baselines:
        out += ["Against the baselines:", ""] + baselines + [""]
    problems = []
    for row in rows:
        status = _status(row)
        if status != "OK":
            reasons = "; ".join(str(r) for r in (row.get("reasons") or []))
            problems.append(f"- {row.get('deployment') or '-'}: {status}" + (f": {reasons}" if reasons else ""))
    if problems:
        out += ["Records that did not pass:", ""] + problems + [""]
    return "\n".join(out).rstrip("\n") + "\n"




def render_summary(rows: Sequence[Any], run_id: str | None = None) -> str:
    """A short page for a CI job summary: per accuracy deployment its verdict and its standing against the
    baseline; per measured deployment its best valid throughput with that point's p99."""
    rows = _records(rows)
    out = [f"# tritonsuite run {run_id or ', '.join(_distinct(r.get('run_id') for r in rows))}", ""]
    accuracy = [r for r in rows if r.get("scenario") == "accuracy"]
    if accuracy:
        table = []
        for r in accuracy:
            note = r.get("baseline") or {}
            if note.get("regressions"):
                standing = "regressed: " + "; ".join(note["regressions"])
            elif note.get("missing"):
                standing = "no baseline"
            elif note:
                standing = f"{note.get('compared', 0)} metrics within allowances" + (
                    "; improved: " + "; ".join(note["improvements"]) if note.get("improvements") else "")
            else:
                standing = "-"
            table.append([str(r.get("title") or r.get("model")), str(r.get("deployment")), _status(r), standing])
        out += ["## Accuracy", "", _pipe_table(["model", "deployment", "status", "against the baseline"], table,
                                               align="left"), ""]
    answers = [r for r in rows if _load_kind(r) == "result"]
    if answers:
        out += ["## Most load within the latency bound", ""] + [
            f"- {r.get('deployment')}: {_search(r).get('answer')}" for r in answers] + [""]
    for scenario in ("offline", "online"):
        measured = [r for r in rows if r.get("scenario") == scenario and _load_kind(r) in ("sweep", "rate")]
        if not measured:
            continue
        table = []
        probed = any(_under_load(r) for r in measured)
        for deployment, drows in _group(measured, _series).items():
            ok = [r for r in drows if _status(r) == "OK" and _is_number(_result(r).get("Inferences/Second"))]
            best = max(ok, key=lambda r: _result(r)["Inferences/Second"], default=None)
            where = _row_label(best) if best else "-"
            table.append([deployment, _format_number("Inferences/Second", _result(best).get("Inferences/Second"))
                          if best else "-", where, _format_number("p99 latency", _result(best).get("p99 latency"))
                          if best else "-", f"{len(ok)}/{len(drows)}"])
            if probed:
                verdicts = [f"{'passed' if v.get('passed') else 'FAILED'} at concurrency {v.get('concurrency')}"
                            for v in map(_under_load, drows) if v]
                table[-1].append("; ".join(verdicts) or "-")
        headers = ["deployment", "Inferences/Second", "at", "p99 latency (ms)", "rows OK"]
        out += [f"## {scenario.capitalize()}: best throughput per deployment", "",
                _pipe_table(headers + (["accuracy under load"] if probed else []), table, align="left"), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def render_crosscheck(rows: Sequence[Any]) -> str:
    """perf_analyzer side by side with the suite's engine (:func:`tritonsuite.crosscheck.cross_points`): per point
    both generators' throughput, p50 and p99, the ratios perf_analyzer / suite, the server-side parts that explain
    a gap (Server Queue, Server Compute Infer per request), and both rows' statuses."""
    from tritonsuite.crosscheck import cross_points
    from tritonsuite.rows import Row

    points = cross_points([r if isinstance(r, Row) else Row.from_dict(r) for r in rows])
    out = ["# perf_analyzer side by side with the suite's engine", ""]
    if not points:
        return "\n".join(out + [("No point was measured by both load generators (run with "
                                 "`--loadgen suite,perf_analyzer`)."), ""])
    out += [(f"{len(points)} points measured by both load generators on the same server; ratio = perf_analyzer / "
             "suite. Server Queue and Server Compute Infer (ms per request, from Triton's statistics) say whether the "
             "server did the same work for both: on the same deployment, another arrival pattern makes the dynamic "
             "batcher form other batches."), ""]

    def num(column: str, value: float | None) -> str:
        return _format_number(column, value) if value is not None else "-"

    def ratio(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "-"

    table = []
    for p in points:
        s, a = p.suite, p.perf_analyzer
        table.append([p.scenario, p.deployment, num("Batch", p.batch), num("Concurrency", p.concurrency),
                      num("Inferences/Second", p.figure(s, "Inferences/Second")),
                      num("Inferences/Second", p.figure(a, "Inferences/Second")), ratio(p.ratio("Inferences/Second")),
                      num("p50 latency", p.figure(s, "p50 latency")), num("p50 latency", p.figure(a, "p50 latency")),
                      ratio(p.ratio("p50 latency")),
                      num("p99 latency", p.figure(s, "p99 latency")), num("p99 latency", p.figure(a, "p99 latency")),
                      ratio(p.ratio("p99 latency")),
                      (f"{num('Server Queue', p.figure(s, 'Server Queue'))} / "
                       f"{num('Server Queue', p.figure(a, 'Server Queue'))}"),
                      (f"{num('Server Compute Infer', p.figure(s, 'Server Compute Infer'))} / "
                       f"{num('Server Compute Infer', p.figure(a, 'Server Compute Infer'))}"),
                      f"{_status(s.to_dict())} / {_status(a.to_dict())}"])
    out += [_pipe_table(["Scenario", "Deployment", "Batch", "Concurrency", "inf/s suite", "inf/s perf_analyzer",
                         "ratio", "p50 suite (ms)", "p50 perf_analyzer (ms)", "ratio", "p99 suite (ms)",
                         "p99 perf_analyzer (ms)", "ratio", "Server Queue (ms) suite / pa",
                         "Server Compute Infer (ms) suite / pa", "Status suite / pa"], table, align="right"), ""]
    problems = []
    for p in points:
        for who, row in (("suite", p.suite), ("perf_analyzer", p.perf_analyzer)):
            if row.status != "OK":
                problems.append(f"- {p.deployment} {_row_label(row.to_dict())}, {who}: {row.status}: "
                                + "; ".join(row.reasons))
    if problems:
        out += ["Rows that are not valid measurements (their ratios are not a comparison):", ""] + problems + [""]
    probed = [p for p in points if p.suite.extra.get("accuracy_under_load")]
    if probed:
        out += [("Not like for like: the suite's row carried accuracy probes (a share of its requests were the "
                 "model's accuracy samples instead of the load request; perf_analyzer sends the load request only) at "
                 + ", ".join(f"{p.deployment} {_row_label(p.suite.to_dict())}" for p in probed)
                 + ". `--load-probe-share 0` measures those points without probes."), ""]
    commands = _distinct(p.perf_analyzer.measurement.get("loadgen_command") for p in points)
    if commands:
        out += [("perf_analyzer's command for the first point (the others differ in -m, -b, --concurrency-range, "
                 "--shared-memory and the temporary files):"), "", f"    {commands[0]}", ""]
    return "\n".join(out).rstrip("\n") + "\n"
