"""Markdown pages in the seeds' format: per deployment, how it was measured, the "Parameter Name | Parameter
Value" table, the results table (the seeds' columns, Status, Client CPU) and, for GPU profiles, the seeds' published
figures beside the measured ones (:mod:`tritonsuite.core.published`); metric tables for accuracy."""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritonsuite.core.rows import RESULT_COLUMNS, STATUSES, STREAM_COLUMNS
from tritonsuite.load.telemetry import GPU_COLUMNS
from tritonsuite.report.common import (EXTRA_COLUMNS, PERCENTILE_COLUMNS, PLOT_ALT, PLOTS, SCENARIO_DESCRIPTIONS,
                                       column_header, distinct, format_number, format_value, group_by, is_number,
                                       percentile_cell, percentile_note, pipe_table, samples_cell, title_of)
from tritonsuite.report.kinds import kinds_section
from tritonsuite.report.points import Point
from tritonsuite.report.steps import steps_section


def _by_order(points: Sequence[Point]) -> list[Point]:
    return sorted(points, key=lambda p: p.order)


def _measured_line(scenario: str, points: Sequence[Point]) -> str:
    def values(key: str) -> list[Any]:
        return distinct(getattr(p.method, key) for p in points)

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
    stab = values("stability_percent")
    if stab:
        stable = values("stable_windows")
        over = f" over the last {join(stable)} windows" if stable else ""
        details.append(f"a row is stable when throughput varies by at most {join(stab)}%{over}")
    run_ids = distinct(p.run_id for p in points)
    if run_ids:
        details.append(("run " if len(run_ids) == 1 else "runs ") + ", ".join(f"`{r}`" for r in run_ids))
    text = parts[0]
    if details:
        text += ": " + "; ".join(details)
    return text + "."


def _parameters_table(points: Sequence[Point]) -> str:
    names: list[str] = []
    for p in points:
        for name in p.parameters:
            if name not in names:
                names.append(name)
    if not names:
        return ""
    table_rows = []
    for name in names:
        vals = distinct(p.parameters.get(name) for p in points)
        table_rows.append([str(name), ", ".join(format_value(v) for v in vals) if vals else "-"])
    return pipe_table(["Parameter Name", "Parameter Value"], table_rows, align="left")


def _cpu_cells(p: Point) -> list[str]:  # the load generator's; everyone else's
    return [f"{cpu:.1f}" if cpu is not None else "-" for cpu in (p.client_cpu_percent, p.other_cpu_percent)]


def _results_table(points: Sequence[Point]) -> str:
    hosts = any(p.host for p in points)  # merged from several hosts: the Host column comes first
    streamed = [c for c in STREAM_COLUMNS if any(p.stream.get(c) is not None for p in points)]  # decoupled rows
    headers = (["Host"] * hosts + [column_header(c) for c in RESULT_COLUMNS + tuple(streamed)] + list(EXTRA_COLUMNS)
               + ["Samples"] + ["Responses (first / gaps)"] * bool(streamed))
    body = []
    for p in _by_order(points):
        cells = [p.host or "-"] * hosts
        for column in RESULT_COLUMNS:
            cells.append(percentile_cell(p, column) if column in PERCENTILE_COLUMNS
                         else format_number(column, p.figure(column)))
        cells += [format_number(column, p.stream.get(column)) for column in streamed]
        cells.append(p.status)
        cells += _cpu_cells(p)
        for column in GPU_COLUMNS:
            mean, top = p.gpu.get(column, (None, None))
            cells.append(f"{mean:.0f} / {top:.0f}" if mean is not None else "-")
        first, gaps = p.stream_samples  # the samples behind the stream columns
        body.append(cells + [samples_cell(p)] + [f"{first} / {gaps}"] * bool(streamed))
    return pipe_table(headers, body, align="right")


def _ratio(value: float | None) -> str:
    return f"{value:.2f}" if is_number(value) else "-"


def _published_section(points: Sequence[Point]) -> list[str]:
    """The seeds' published figures beside the measured ones, for the rows whose profile names published tables
    (GPU profiles only) and whose deployment and point match a published row; its heading says when the GPU the
    rows were measured on is not the published one."""
    from tritonsuite.core.published import PUBLISHED_PARAMETER, join, published_configurations

    named = [p for p in points if p.parameters.get(PUBLISHED_PARAMETER)]
    if not named:
        return []
    measured = [p.row for p in named]  # the published tables join on the stored row
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
        body.append([format_number("Batch", m.published.batch), format_number("Concurrency", m.published.concurrency),
                     format_number("Inferences/Second", m.throughput),
                     format_number("Inferences/Second", m.published_throughput), _ratio(m.throughput_ratio),
                     format_number("p99 latency", m.p99), format_number("p99 latency", m.published_p99),
                     _ratio(m.p99_ratio), m.measured.status])
    out += [pipe_table(["Batch", "Concurrency", "Inferences/Second", "Published Inferences/Second",
                         "Throughput ratio", "p99 latency (ms)", "Published p99 latency (ms)", "p99 ratio", "Status"],
                        body, align="right"), ""]
    unmatched = len(named) - len(matches)
    if unmatched:
        out += [f"{unmatched} measured row(s) of this deployment have no published point.", ""]
    return out


def _rate_table(points: Sequence[Point]) -> str:
    """Open-loop rows: offered and achieved rate, the share sent late, requests in flight, latencies."""
    headers = ["Offered (req/s)", "Achieved (req/s)", "Late (%)", "In flight", "Inferences/Second", "p50 latency",
               "p90 latency", "p95 latency", "p99 latency", "avg latency", "Status", "Client CPU (%)",
               "Other CPU (%)", "Samples"]
    body = []
    for p in sorted(points, key=lambda p: p.request_rate_per_s or 0):
        body.append([format_number("Inferences/Second", p.request_rate_per_s),
                     format_number("Inferences/Second", p.achieved_rate_per_s),
                     f"{p.late_percent:.2f}" if p.late_percent is not None else "-",
                     f"{p.concurrency:.1f}" if p.concurrency is not None else "-"]
                    + [percentile_cell(p, c) if c in PERCENTILE_COLUMNS else format_number(c, p.figure(c))
                       for c in headers[4:10]] + [p.status] + _cpu_cells(p) + [samples_cell(p)])
    return pipe_table([column_header(h) if h in RESULT_COLUMNS else h for h in headers], body, align="right")


def _step(p: Point) -> Any:
    return p.search.step if p.search.step is not None else 0


def _search_sections(points: Sequence[Point]) -> list[str]:
    """Per search (kind and bound): the answer, then its evidence, one row per measured point in order."""
    out: list[str] = []
    groups = group_by([p for p in points if p.search], lambda p: (p.search.kind, p.search.bound))
    for (kind, bound), found in groups.items():
        answers = [p for p in found if p.load_kind == "result"]
        headline = answers[-1].search.answer if answers else f"search for the most {kind} at {bound}: " \
                                                             f"unfinished (no answer recorded)"
        out += [f"**{headline}**", ""]
        body = []
        for p in sorted((p for p in found if p.load_kind == "evidence"), key=_step):
            load = (format_number("Inferences/Second", p.request_rate_per_s) + " req/s"
                    if p.request_rate_per_s is not None
                    else f"concurrency {format_number('Concurrency', p.concurrency)}")
            body.append(["-" if p.search.step is None else str(p.search.step), load,
                         format_number("Inferences/Second", p.throughput_per_s), percentile_cell(p, "p99 latency"),
                         p.status, "yes" if p.search.within else "no", str(p.search.why) + _moved(p)])
        if body:
            out += [pipe_table(["Step", "Load", "Inferences/Second", "p99 latency (ms)", "Status", "Within",
                                 "Why"], body, align="left"), ""]
    return out


def _repeats_section(points: Sequence[Point]) -> list[str]:
    """--repeat N: per point, each round's throughput and p99 in the order measured, the median of the valid rounds
    (the figure reported for the point) with its spread, and the change from the first round to the last (drift
    that one pass hides)."""
    repeated = [p for p in points if p.repeat]
    if not repeated:
        return []
    body = []
    groups = group_by(repeated, lambda p: (p.batch, p.request_rate_per_s,
                                           p.concurrency if p.request_rate_per_s is None else None))
    for _, rounds in sorted(groups.items(), key=lambda kv: kv[1][0].order):
        rounds = sorted(rounds, key=lambda p: p.repeat.round)
        valid = [p for p in rounds if p.status == "OK"]
        cells = []
        for column in ("Inferences/Second", "p99 latency"):
            values = [p.figure(column) for p in rounds]
            good = [p.figure(column) for p in valid if p.figure(column) is not None]
            median = statistics.median(good) if good else None
            spread = (max(good) - min(good)) / median * 100.0 if good and median else None
            first, last = values[0], values[-1]
            change = (last / first - 1.0) * 100.0 if first is not None and last is not None and first else None
            cells += [" / ".join(format_number(column, v) for v in values), format_number(column, median),
                      f"{spread:.1f}" if spread is not None else "-", f"{change:+.1f}" if change is not None else "-"]
        body.append([rounds[0].label.split(" (round ")[0], f"{len(valid)} of {len(rounds)}"] + cells)
    order = distinct(p.repeat.order for p in repeated)
    return [f"Repeated points ({', '.join(map(str, order))} order within each round, rounds interleaved): each "
            "round's figure in the order measured, the median of the valid rounds (the figure this point reports), "
            "its spread (max - min, % of the median) and the change from the first round to the last.", "",
            pipe_table(["Point", "Valid rounds", "Inferences/Second by round", "Median Inferences/Second",
                         "Spread (%)", "First to last (%)", "p99 latency (ms) by round", "Median p99 latency (ms)",
                         "p99 spread (%)", "p99 first to last (%)"], body, align="left"), ""]


def _moved(p: Point) -> str:
    """A re-measured point: how far it moved since it was first measured (drift over the search)."""
    moved = p.search.moved
    if moved is None:
        return ""
    parts = [f"{label} {value:+.1f}%" for value, label in ((moved.throughput_change_percent, "inf/s"),
                                                           (moved.p99_change_percent, "p99")) if value is not None]
    return (f"; since first measured: {', '.join(parts)}" + (" (drift beyond the stability limit)"
                                                               if moved.drifting else "")) if parts else ""


def _problem_lines(points: Sequence[Point]) -> list[str]:
    lines = []
    for p in _by_order(points):
        if p.status == "OK":
            continue
        text = f"- {p.label}: {p.status}"
        if p.reasons:
            text += ": " + "; ".join(p.reasons)
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


def render_markdown(model: str, scenario: str, points: Sequence[Point], *,
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
    out = [f"# {title_of(points, model)} {scenario} results", ""]
    counts = group_by(points, lambda p: p.status)
    summary = ", ".join(f"{len(counts[s])} {s}" for s in list(STATUSES) + sorted(set(counts) - set(STATUSES))
                        if s in counts)
    deployments = group_by(points, lambda p: p.series)
    out.append(f"{len(points)} measured rows over {len(deployments)} deployment(s): {summary or 'none'}. "
               "Only rows with status OK are valid measurements; times are in ms.")
    out.append("")
    links = _plot_links(model, scenario, plots)
    if links:
        out += links + [""]
    for deployment, mine in deployments.items():
        out += [f"## {deployment}", "", _measured_line(scenario, mine), ""]
        params = _parameters_table(mine)
        if params:
            out += [params, ""]
        sweep = [p for p in mine if p.load_kind == "sweep"]
        rates = [p for p in mine if p.load_kind == "rate"]
        if sweep or not (rates or any(p.search for p in mine)):
            out += [percentile_note(sweep), "", _results_table(sweep), ""]
        if rates:
            out += ["Request rates (open loop: arrivals on a seeded schedule, latency from each request's scheduled "
                    "send time; a point whose late sends are significantly above the limit, by a one-sided binomial test "
                    "on their count, is INVALID). " + percentile_note(rates), "", _rate_table(rates), ""]
        out += steps_section(sweep + rates)
        out += _repeats_section(sweep + rates)
        out += kinds_section(sweep + rates)  # a sequence model's sequences
        out += _published_section(sweep)
        out += _search_sections(mine)
        drifting = [f"- {p.label}: throughput {d.throughput_change_percent:+.1f}%, mean latency "
                    f"{d.latency_change_percent:+.1f}% from the first stable window to the last (limit "
                    f"{d.limit_percent:g}%)" for p in _by_order(mine) for d in [p.drift] if d and d.drifting]
        if drifting:
            out += ["Points that drifted while measured (their figures are an average over a trend):", ""] + \
                drifting + [""]
        problems = _problem_lines([p for p in mine if p.load_kind in ("sweep", "rate")])
        if problems:
            out += ["Rows that are not valid measurements:", ""] + problems + [""]
        for p in _by_order(mine):
            if p.under_load:
                out += [f"Accuracy under load ({p.label}): {p.under_load.verdict}", ""]
    return "\n".join(out).rstrip("\n") + "\n"
