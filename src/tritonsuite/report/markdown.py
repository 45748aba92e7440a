"""Markdown pages in the seeds' format: per deployment, how it was measured, the "Parameter Name | Parameter
Value" table, the results table (the seeds' columns, Status, Client CPU) and, for GPU profiles, the seeds' published
figures beside the measured ones (:mod:`tritonsuite.core.published`); metric tables for accuracy."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonsuite.core.rows import RESULT_COLUMNS, STATUSES, STREAM_COLUMNS, Row
from tritonsuite.load.telemetry import GPU_COLUMNS
from tritonsuite.report.common import (PERCENTILE_COLUMNS, percentile_cell, percentile_note, samples_cell,
                                       EXTRA_COLUMNS, INT_COLUMNS, PLOT_ALT, PLOTS, SCENARIO_DESCRIPTIONS,
                                       column_header, coord, distinct, format_number, format_value, group_by,
                                       is_number, load_kind, pipe_table, as_records, result_of, row_label, search_of,
                                       series_of, sort_key, status_of, title_of)
from tritonsuite.report.kinds import kinds_section
from tritonsuite.report.pages import under_load_of
from tritonsuite.report.records import Point
from tritonsuite.report.steps import steps_section


def _point(row: Mapping[str, Any]) -> Point:
    """The typed point of a row in its JSON form (this page still reads rows as records)."""
    return Point.of(Row.from_dict(row))


def _measured_line(scenario: str, rows: Sequence[Mapping[str, Any]]) -> str:
    def values(key: str) -> list[Any]:
        return distinct(
            (r.get("measurement") or {}).get(key) if isinstance(r.get("measurement"), Mapping) else None
            for r in rows)

    def join(vs: list[Any]) -> str:
        return " / ".join(format_value(v) for v in vs)

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
    run_ids = distinct(r.get("run_id") for r in rows)
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
        vals = distinct((r.get("parameters") or {}).get(name) for r in rows)
        table_rows.append([str(name), ", ".join(format_value(v) for v in vals) if vals else "-"])
    return pipe_table(["Parameter Name", "Parameter Value"], table_rows, align="left")


def _results_table(rows: Sequence[Mapping[str, Any]]) -> str:
    hosts = any(r.get("host") for r in rows)  # merged from several hosts: the Host column comes first
    streamed = [c for c in STREAM_COLUMNS if any(result_of(r).get(c) is not None for r in rows)]  # decoupled rows
    headers = (["Host"] * hosts + [column_header(c) for c in RESULT_COLUMNS + tuple(streamed)] + list(EXTRA_COLUMNS)
               + ["Samples"] + ["Responses (first / gaps)"] * bool(streamed))
    body = []
    for row in sorted(rows, key=sort_key):
        result = result_of(row)
        cells = [str(row.get("host") or "-")] * hosts
        for column in RESULT_COLUMNS:
            value = coord(row, column) if column in INT_COLUMNS else result.get(column)
            cells.append(percentile_cell(_point(row), column) if column in PERCENTILE_COLUMNS
                         else format_number(column, value))
        cells += [format_number(column, result.get(column)) for column in streamed]
        cells.append(status_of(row))
        measurement = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
        for key in ("client_cpu_percent", "host_other_cpu_percent"):  # the load generator; everyone else
            cpu = measurement.get(key)
            cells.append(f"{cpu:.1f}" if is_number(cpu) else "-")
        gpu = measurement.get("gpu") if isinstance(measurement.get("gpu"), Mapping) else {}
        for column in GPU_COLUMNS:
            stat = gpu.get(column) or {}
            cells.append(f"{stat['mean']:.0f} / {stat['max']:.0f}" if is_number(stat.get("mean")) else "-")
        stream = (row.get("measurement") or {}).get("stream") or {}  # the samples behind the stream columns
        body.append(cells + [samples_cell(row)] + [f"{stream.get('time_to_first_response_samples', '-')} / "
                                                    f"{stream.get('inter_response_samples', '-')}"] * bool(streamed))
    return pipe_table(headers, body, align="right")


def _ratio(value: float | None) -> str:
    return f"{value:.2f}" if is_number(value) else "-"


def _published_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The seeds' published figures beside the measured ones, for the rows whose profile names published tables
    (GPU profiles only) and whose deployment and point match a published row; its heading says when the GPU the
    rows were measured on is not the published one."""
    from tritonsuite.core.published import PUBLISHED_PARAMETER, join, published_configurations
    from tritonsuite.core.rows import Row

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
    measured_on = ", ".join(distinct(m.measured_gpu for m in matches))
    if False in same:
        heading += f" — MEASURED ON A DIFFERENT GPU ({measured_on})"
    elif None in same:
        heading += " — measured GPU not known here (remote server)"
    profile = distinct((r.parameters.get("Profile") for r in measured))
    out = [heading, ""]
    note = (f"From {first.published.labels['Source']} (transcribed in tritonsuite/core/published/{gpu}/"
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
        body.append([format_number("Batch", m.published.batch), format_number("Concurrency", m.published.concurrency),
                     format_number("Inferences/Second", m.throughput),
                     format_number("Inferences/Second", m.published_throughput), _ratio(m.throughput_ratio),
                     format_number("p99 latency", m.p99), format_number("p99 latency", m.published_p99),
                     _ratio(m.p99_ratio), status_of(record)])
    out += [pipe_table(["Batch", "Concurrency", "Inferences/Second", "Published Inferences/Second",
                         "Throughput ratio", "p99 latency (ms)", "Published p99 latency (ms)", "p99 ratio", "Status"],
                        body, align="right"), ""]
    unmatched = len(named) - len(matches)
    if unmatched:
        out += [f"{unmatched} measured row(s) of this deployment have no published point.", ""]
    return out


def _cpu_cells(row: Mapping[str, Any]) -> list[str]:
    measurement = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
    return [f"{measurement[k]:.1f}" if is_number(measurement.get(k)) else "-"
            for k in ("client_cpu_percent", "host_other_cpu_percent")]


def _rate_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Open-loop rows: offered and achieved rate, the share sent late, requests in flight, latencies."""
    headers = ["Offered (req/s)", "Achieved (req/s)", "Late (%)", "In flight", "Inferences/Second", "p50 latency",
               "p90 latency", "p95 latency", "p99 latency", "avg latency", "Status", "Client CPU (%)",
               "Other CPU (%)", "Samples"]
    body = []
    for row in sorted(rows, key=lambda r: (r.get("request_rate") or 0)):
        m = row.get("measurement") if isinstance(row.get("measurement"), Mapping) else {}
        result = result_of(row)
        body.append([format_number("Inferences/Second", row.get("request_rate")),
                     format_number("Inferences/Second", m.get("achieved_rate")),
                     f"{m['late_percent']:.2f}" if is_number(m.get("late_percent")) else "-",
                     f"{result['Concurrency']:.1f}" if is_number(result.get("Concurrency")) else "-"]
                    + [percentile_cell(_point(row), c) if c in PERCENTILE_COLUMNS else format_number(c, result.get(c))
                       for c in headers[4:10]] + [status_of(row)] + _cpu_cells(row) + [samples_cell(row)])
    return pipe_table([column_header(h) if h in RESULT_COLUMNS else h for h in headers], body, align="right")


def _search_sections(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per search (kind and bound): the answer, then its evidence, one row per measured point in order."""
    out: list[str] = []
    groups = group_by([r for r in rows if search_of(r)], lambda r: (search_of(r).get("kind"), search_of(r).get("bound")))
    for (kind, bound), grows in groups.items():
        answers = [r for r in grows if load_kind(r) == "result"]
        headline = search_of(answers[-1]).get("answer") if answers else f"search for the most {kind} at {bound}: " \
                                                                       f"unfinished (no answer recorded)"
        out += [f"**{headline}**", ""]
        body = []
        for row in sorted((r for r in grows if load_kind(r) == "evidence"), key=lambda r: search_of(r).get("step", 0)):
            search, result = search_of(row), result_of(row)
            load = (format_number("Inferences/Second", row["request_rate"]) + " req/s" if is_number(
                row.get("request_rate")) else f"concurrency {format_number('Concurrency', coord(row, 'Concurrency'))}")
            body.append([str(search.get("step", "-")), load,
                         format_number("Inferences/Second", result.get("Inferences/Second")),
                         percentile_cell(_point(row), "p99 latency"), status_of(row),
                         "yes" if search.get("within") else "no", str(search.get("why", "-")) + _moved(row)])
        if body:
            out += [pipe_table(["Step", "Load", "Inferences/Second", "p99 latency (ms)", "Status", "Within",
                                 "Why"], body, align="left"), ""]
    return out


def _repeats_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """--repeat N: per point, each round's throughput and p99 in the order measured, the median of the valid rounds
    (the figure reported for the point) with its spread, and the change from the first round to the last (drift
    that one pass hides)."""
    import statistics

    repeated = [r for r in rows if isinstance((r.get("measurement") or {}).get("repeat"), Mapping)]
    if not repeated:
        return []
    body = []
    for _, prows in sorted(group_by(repeated, lambda r: (coord(r, "Batch"), r.get("request_rate"),
                                                      coord(r, "Concurrency") if r.get("request_rate") is None
                                                      else None)).items(), key=lambda kv: sort_key(kv[1][0])):
        prows = sorted(prows, key=lambda r: r["measurement"]["repeat"]["round"])
        valid = [r for r in prows if status_of(r) == "OK"]
        cells = []
        for column in ("Inferences/Second", "p99 latency"):
            values = [result_of(r).get(column) for r in prows]
            good = [result_of(r).get(column) for r in valid if is_number(result_of(r).get(column))]
            median = statistics.median(good) if good else None
            spread = (max(good) - min(good)) / median * 100.0 if good and median else None
            first, last = values[0], values[-1]
            change = (last / first - 1.0) * 100.0 if is_number(first) and is_number(last) and first else None
            cells += [" / ".join(format_number(column, v) for v in values), format_number(column, median),
                      f"{spread:.1f}" if spread is not None else "-", f"{change:+.1f}" if change is not None else "-"]
        body.append([row_label(prows[0]).split(" (round ")[0], f"{len(valid)} of {len(prows)}"] + cells)
    order = distinct(r["measurement"]["repeat"].get("order") for r in repeated)
    return [f"Repeated points ({', '.join(map(str, order))} order within each round, rounds interleaved): each "
            "round's figure in the order measured, the median of the valid rounds (the figure this point reports), "
            "its spread (max - min, % of the median) and the change from the first round to the last.", "",
            pipe_table(["Point", "Valid rounds", "Inferences/Second by round", "Median Inferences/Second",
                         "Spread (%)", "First to last (%)", "p99 latency (ms) by round", "Median p99 latency (ms)",
                         "p99 spread (%)", "p99 first to last (%)"], body, align="left"), ""]


def _moved(row: Mapping[str, Any]) -> str:
    """A re-measured point: how far it moved since it was first measured (drift over the search)."""
    moved = (row.get("measurement") or {}).get("remeasure")
    if not isinstance(moved, Mapping):
        return ""
    parts = [f"{label} {moved[key]:+.1f}%" for key, label in (("throughput_change_percent", "inf/s"),
                                                                ("p99_change_percent", "p99")) if is_number(moved.get(key))]
    return (f"; since first measured: {', '.join(parts)}" + (" (drift beyond the stability limit)"
                                                               if moved.get("drifting") else "")) if parts else ""


def _problem_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for row in sorted(rows, key=sort_key):
        status = status_of(row)
        if status == "OK" and row.get("valid", True):
            continue
        reasons = [str(r) for r in (row.get("reasons") or [])]
        text = f"- {row_label(row)}: {status}"
        if reasons:
            text += ": " + "; ".join(reasons)
        lines.append(text)
    return lines


def _plot_links(model: str, scenario: str, plots: Sequence[str] | None) -> list[str]:
    if plots is None:
        plots = [f"{model}/{name}" for name in PLOTS.get(scenario, ())]
    links = []
    for rel in plots:
        name = Path(rel).name
        links.append(f"![{PLOT_ALT.get(name, Path(name).stem.replace('_', ' '))}]({rel})")
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
    embed (default: ``<model>/<plot>.png`` for the scenario's plots; ``[]`` embeds none). A scenario without load
    points (accuracy) has its page from :func:`tritonsuite.report.pages.render_metrics_markdown`.
    """
    rows = as_records(rows)
    out = [f"# {title_of(rows, model)} {scenario} results", ""]
    counts = group_by(rows, status_of)
    summary = ", ".join(f"{len(counts[s])} {s}" for s in list(STATUSES) + sorted(set(counts) - set(STATUSES))
                        if s in counts)
    deployments = group_by(rows, series_of)
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
        sweep = [r for r in drows if load_kind(r) == "sweep"]
        rates = [r for r in drows if load_kind(r) == "rate"]
        if sweep or not (rates or any(search_of(r) for r in drows)):
            out += [percentile_note(sweep), "", _results_table(sweep), ""]
        if rates:
            out += ["Request rates (open loop: arrivals on a seeded schedule, latency from each request's scheduled "
                    "send time; a point whose late sends are significantly above the limit, by a one-sided binomial test "
                    "on their count, is INVALID). " + percentile_note(rates), "", _rate_table(rates), ""]
        out += steps_section(sweep + rates)
        out += _repeats_section(sweep + rates)
        out += kinds_section(sweep + rates)  # a sequence model's sequences
        out += _published_section(sweep)
        out += _search_sections(drows)
        drifting = [f"- {row_label(r)}: throughput {d['throughput_change_percent']:+.1f}%, mean latency "
                    f"{d['latency_change_percent']:+.1f}% from the first stable window to the last (limit "
                    f"{d['limit_percent']:g}%)" for r in sorted(drows, key=sort_key)
                    for d in [(r.get("measurement") or {}).get("drift")] if isinstance(d, Mapping) and d.get("drifting")]
        if drifting:
            out += ["Points that drifted while measured (their figures are an average over a trend):", ""] + \
                drifting + [""]
        problems = _problem_lines([r for r in drows if load_kind(r) in ("sweep", "rate")])
        if problems:
            out += ["Rows that are not valid measurements:", ""] + problems + [""]
        for row in sorted(drows, key=sort_key):
            verdict = under_load_of(row)
            if verdict:
                out += [f"Accuracy under load ({row_label(row)}): {verdict.get('verdict', '-')}", ""]
    return "\n".join(out).rstrip("\n") + "\n"
