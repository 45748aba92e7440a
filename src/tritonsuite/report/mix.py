"""The pages of a mix (rows of scenario ``mix``): ``reports/mix/<mix name>.md`` holds, per host, each deployment
alone against together with its interference ratio and interval (:mod:`tritonsuite.judge.interference`), accuracy
under the mix, and every measurement of the interleaved rounds; ``reports/mix/<mix name>/timeline.png`` plots each
deployment's throughput and p99 over the run (alone dashed, together solid, together spans shaded). Rows merged
from several hosts (:mod:`tritonsuite.report.merge`) give one section per host, never one averaged figure."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Sequence

from tritonsuite.core.access import redact
from tritonsuite.core.rows import Row
from tritonsuite.core.store import safe_component
from tritonsuite.judge.interference import interference
from tritonsuite.report.common import format_number, percentile_cell, pipe_table, as_records

PLOT = "timeline.png"


def _mix(row: Row) -> dict:
    return row.extra.get("mix") or {}


def _host(row: Row) -> str:
    return str(row.extra.get("host") or "")


def _median(rows: Sequence[Row], column: str) -> str:
    values = [r.result[column] for r in rows if r.valid and r.result.get(column) is not None]
    return format_number(column, statistics.median(values)) + f" ({len(values)})" if values else "-"


def _cpu(rows: Sequence[Row], key: str) -> str:
    values = [r.measurement[key] for r in rows if r.valid and r.measurement.get(key) is not None]
    return f"{statistics.median(values):.1f}" if values else "-"


def mix_ratios(rows: Sequence[Row]):
    """Each deployment's Interference from a mix's rows (of one host), in the order first measured."""
    deployments = list(dict.fromkeys(r.deployment for r in rows if _mix(r).get("role") in ("alone", "together")))
    return [interference(d, [r for r in rows if r.deployment == d and _mix(r).get("role") == "alone"],
                         [r for r in rows if r.deployment == d and _mix(r).get("role") == "together"])
            for d in deployments]


def render_mix(name: str, rows: Sequence[Row], plot: str | None = None) -> str:
    out = [f"# Mix: {name}", ""]
    deployments = list(dict.fromkeys(r.deployment for r in rows if _mix(r).get("role") != "failed"))
    rounds = max((_mix(r).get("round", 0) for r in rows), default=0)
    out += [f"{len(deployments)} deployments served together on one server ({', '.join(deployments)}), each with its "
            f"own traffic; {rounds} interleaved rounds, each: every deployment alone, then all together over the same "
            f"windows. The ratio is together ÷ alone of the metric the traffic leaves free (closed loop: throughput, "
            f"below 1 is interference; open loop: mean latency, above 1 is), the Hodges-Lehmann estimate over the "
            f"stable windows of every round with its distribution-free interval and a Mann-Whitney test; "
            f"'interference' needs significance and more than the minimum effect (docs/mix.md).", "",
            "Client CPU: the load generator runs on the same host as the server (on 2 cores it competes with it); "
            "'% of a core' is the whole generator's, 'deployment' the part its traffic took.", ""]
    failed = [r for r in rows if _mix(r).get("role") == "failed"]
    for r in failed:
        out += [f"**The mix failed**: {'; '.join(r.reasons)}", ""]
    for host, hrows in _by_host(rows).items():
        if host:
            out += [f"## Host: {host}", ""]
        table = []
        for ratio in mix_ratios(hrows):
            mine = [r for r in hrows if r.deployment == ratio.deployment]
            alone = [r for r in mine if _mix(r).get("role") == "alone"]
            together = [r for r in mine if _mix(r).get("role") == "together"]
            accuracy = [r.extra["accuracy_under_load"] for r in together if r.extra.get("accuracy_under_load")]
            table.append([ratio.deployment, _mix(mine[0]).get("traffic", ""), _median(alone, "Inferences/Second"),
                          _median(together, "Inferences/Second"), _median(alone, "p99 latency"),
                          _median(together, "p99 latency"),
                          f"{'throughput' if ratio.higher_is_better else 'mean latency'} "
                          f"{'~' if ratio.indicative else ''}{ratio.ratio:.3f} "
                          f"[{ratio.low:.3f}, {ratio.high:.3f}]", f"{ratio.p_value:.2g}",
                          f"{ratio.together_windows}/{ratio.alone_windows}", ratio.verdict,
                          f"{_cpu(together, 'client_cpu_percent')} / {_cpu(together, 'deployment_client_cpu_percent')}",
                          ("passed" if all(a.get("passed") for a in accuracy) else "FAILED") + f" ({len(accuracy)})"
                          if accuracy else "-"])
        out += ["### Alone and together", "",
                "Inferences/Second and p99 are the median over the rounds' valid measurements (how many in "
                "brackets); the interval is at 99%, the windows are together/alone; '~': too few valid measurements to "
                "decide, the figures come from every measured one (not a verdict).", "",
                pipe_table(["deployment", "traffic", "alone inf/s", "together inf/s", "alone p99 (ms)",
                             "together p99 (ms)", "ratio together ÷ alone", "p", "windows", "verdict",
                             "client CPU % together (all / deployment)", "accuracy under the mix"], table,
                            align="left"), ""]
        measured = []
        for r in hrows:
            mx = _mix(r)
            if mx.get("role") not in ("alone", "together"):
                continue
            rec = as_records([r])[0]
            measured.append([str(mx.get("round")), mx.get("role"), r.deployment, r.status,
                             format_number("Inferences/Second", r.result.get("Inferences/Second")),
                             percentile_cell(rec, "p50 latency"), percentile_cell(rec, "p99 latency"),
                             str(r.measurement.get("measured_requests", "-")),
                             format_number("Server Queue", r.result.get("Server Queue")),
                             format_number("Server Compute Infer", r.result.get("Server Compute Infer")),
                             f"{r.measurement.get('client_cpu_percent', '-')} / "
                             f"{r.measurement.get('deployment_client_cpu_percent', '-')}",
                             f"{r.measurement.get('host_other_cpu_percent', '-')}", "; ".join(r.reasons)])
        out += ["### Every measurement, in the order measured", "",
                pipe_table(["round", "role", "deployment", "status", "Inferences/Second", "p50 (ms)", "p99 (ms)",
                             "Samples", "Server Queue (ms)", "Server Compute Infer (ms)", "client CPU % (all / dep.)",
                             "other processes CPU %", "reasons"], measured, align="left"), ""]
        out += _search_section(hrows) + _tune_section(hrows)
    if plot:
        out += [f"![throughput and p99 over the run]({plot})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _tune_section(rows: Sequence[Row]) -> list[str]:
    """The configuration search for the set: the answer and the configurations to ship, then every joint
    configuration measured (each deployment's row) and the interleaved re-measure."""
    points = [r for r in rows if str(_mix(r).get("role", "")).startswith("tune-") and _mix(r)["role"] != "tune-answer"]
    answers = [r for r in rows if _mix(r).get("role") == "tune-answer"]
    if not points:
        return []
    out = ["### Configuration search for the set", ""]
    if answers:
        mx = _mix(answers[-1])
        out += [f"**{'Recommended' if mx.get('recommended') else 'Not recommended'}**: {mx.get('answer')}", "",
                "Stock configurations to ship: " + ", ".join(f"`{p}`" for p in mx.get("configs", [])), ""]
    else:
        out += ["The search did not finish: what it measured below.", ""]
    table = [[_mix(r)["role"].replace("tune-", ""), r.deployment, str(_mix(r).get("label", "")).split(" | ")[
        list(dict.fromkeys(x.deployment for x in points)).index(r.deployment)] if " | " in str(_mix(r).get("label"))
        else str(_mix(r).get("label", "")), r.status,
        format_number("Inferences/Second", r.result.get("Inferences/Second")),
        format_number("p99 latency", r.result.get("p99 latency")), "yes" if _mix(r).get("within") else "no",
        f"{_mix(r).get('weighted_score', 0):g}"] for r in points]
    return out + [pipe_table(["step", "deployment", "its configuration", "status", "Inferences/Second",
                               "p99 (ms)", "every bound held", "weighted inf/s"], table, align="left"), ""]


def _search_section(rows: Sequence[Row]) -> list[str]:
    """The most mixed load within every bound: the answer, then every point (each deployment's row)."""
    points = [r for r in rows if _mix(r).get("role") == "search"]
    answers = [r for r in rows if _mix(r).get("role") == "search-answer"]
    if not points:
        return []
    out = ["### The most mixed load within every bound", ""]
    out += [f"**{_mix(answers[-1]).get('answer')}**" if answers else "The search did not finish: its points below.", ""]
    table = []
    for r in points:
        mx = _mix(r)
        load = f"{r.request_rate:g} req/s" if r.request_rate else f"concurrency {r.concurrency}"
        table.append([str(mx.get("step")), f"x{mx.get('factor'):g}", r.deployment, load, r.status,
                      format_number("Inferences/Second", r.result.get("Inferences/Second")),
                      percentile_cell(as_records([r])[0], "p99 latency"), str(mx.get("bound") or "-"),
                      "yes" if mx.get("within") else "no", str(mx.get("why", ""))])
    return out + [pipe_table(["point", "factor", "deployment", "load", "status", "Inferences/Second", "p99 (ms)",
                               "bound", "within", "why"], table, align="left"), ""]


def _by_host(rows: Sequence[Row]) -> dict[str, list[Row]]:
    found: dict[str, list[Row]] = {}
    for r in rows:
        found.setdefault(_host(r), []).append(r)
    return found


def plot_mix(name: str, rows: Sequence[Row], path: Path) -> Path | None:
    """Each deployment's throughput and p99 over the run: one segment per measurement across its span."""
    from tritonsuite.report.plots import new_figure, palette, save_figure

    rows = [r for r in rows if _mix(r).get("role") in ("alone", "together") and r.result.get("Inferences/Second")]
    if not rows:
        return None
    fig = new_figure(10, 6)
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
    deployments = list(dict.fromkeys(r.deployment for r in rows))
    colors = dict(zip(deployments, palette(len(deployments))))
    hosts = list(_by_host(rows))
    shaded = set()
    for r in rows:
        mx = _mix(r)
        span = (mx.get("start_s", 0.0), mx.get("end_s", 0.0))
        style = "-" if mx["role"] == "together" else "--"
        label = f"{r.deployment}{' @ ' + _host(r) if len(hosts) > 1 else ''} {mx['role']}"
        for ax, column in ((top, "Inferences/Second"), (bottom, "p99 latency")):
            value = r.result.get(column)
            if value is None:
                continue
            ax.plot(span, (value, value), style, color=colors[r.deployment], linewidth=2,
                    alpha=1.0 if r.valid else 0.35, label=label if ax is top else None)
            if mx["role"] == "together" and (ax, span) not in shaded:
                ax.axvspan(*span, color="0.92", zorder=0)
                shaded.add((ax, span))
    handles, labels = top.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    top.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.set_ylabel("Inferences/Second")
    bottom.set_ylabel("p99 latency (ms)")
    bottom.set_xlabel("seconds since the mix began (shaded: together; dashed: alone; faint: not valid)")
    top.set_title(f"mix {name}: each deployment's throughput and p99, measurement by measurement", fontsize=9)
    return save_figure(fig, path)


def write_mix_pages(reports_dir: Path, rows: Sequence[Row], header: str = "") -> list[Path]:
    written: list[Path] = []
    by_mix: dict[str, list[Row]] = {}
    for r in rows:
        by_mix.setdefault(str(_mix(r).get("name") or r.model), []).append(r)
    for name, mrows in by_mix.items():
        written += write_mix_page(reports_dir, name, mrows, header)
    return written


def write_mix_page(reports_dir: Path, name: str, rows: Sequence[Row], header: str = "") -> list[Path]:
    """``reports/mix/<name>.md`` and its timeline, from one mix's rows."""
    directory = Path(reports_dir) / "mix"
    png = plot_mix(name, rows, directory / safe_component(name) / PLOT)
    page = render_mix(name, rows, f"{safe_component(name)}/{PLOT}" if png else None)
    if header:
        title, _, rest = page.partition("\n\n")
        page = f"{title}\n\n{header}\n\n{rest}"
    md = directory / f"{safe_component(name)}.md"
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(redact(page), encoding="utf-8")
    return [md] + ([png] if png else [])


def mix_summary_lines(rows: Sequence[Row]) -> list[str]:
    """One line per deployment of each mix in ``rows``: its ratio with the interval and the verdict."""
    lines = []
    by_mix: dict[str, list[Row]] = {}
    for r in rows:
        if r.scenario == "mix":
            by_mix.setdefault(str(_mix(r).get("name") or r.model), []).append(r)
    for name, mrows in by_mix.items():
        for host, hrows in _by_host(mrows).items():
            where = f"mix {name}{' on ' + host if host else ''}"
            lines += [f"{where}: {ratio.describe()}" for ratio in mix_ratios(hrows)]
            answers = [r for r in hrows if _mix(r).get("role") == "search-answer"]
            lines += [f"{where}: {_mix(answers[-1]).get('answer')}"] if answers else []
            tuned = [r for r in hrows if _mix(r).get("role") == "tune-answer"]
            lines += [f"{where}: configuration search: {_mix(tuned[-1]).get('answer')}"] if tuned else []
    return lines
