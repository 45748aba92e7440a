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
from tritonsuite.report.common import format_number, percentile_cell, pipe_table
from tritonsuite.report.records import MixPoint, mixes_of

PLOT = "timeline.png"
MEASURED = ("alone", "together")


def _figure(m: MixPoint, column: str) -> float | None:
    return m.point.throughput_per_s if column == "Inferences/Second" else m.point.latency_ms.get(column)


def _median(points: Sequence[MixPoint], column: str) -> str:
    values = [_figure(m, column) for m in points if m.point.status == "OK" and _figure(m, column) is not None]
    return format_number(column, statistics.median(values)) + f" ({len(values)})" if values else "-"


def _cpu(values: list[float | None]) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.1f}" if values else "-"


def _shown(value) -> str:
    return "-" if value is None else str(value)


def mix_ratios(points: Sequence[MixPoint]):
    """Each deployment's Interference from a mix's points (of one host), in the order first measured."""
    deployments = list(dict.fromkeys(m.deployment for m in points if m.role in MEASURED))
    return [interference(d, [m.row for m in points if m.deployment == d and m.role == "alone"],
                         [m.row for m in points if m.deployment == d and m.role == "together"])
            for d in deployments]


def render_mix(name: str, points: Sequence[MixPoint], plot: str | None = None) -> str:
    out = [f"# Mix: {name}", ""]
    deployments = list(dict.fromkeys(m.deployment for m in points if m.role != "failed"))
    rounds = max((m.round for m in points), default=0)
    out += [f"{len(deployments)} deployments served together on one server ({', '.join(deployments)}), each with its "
            f"own traffic; {rounds} interleaved rounds, each: every deployment alone, then all together over the same "
            f"windows. The ratio is together ÷ alone of the metric the traffic leaves free (closed loop: throughput, "
            f"below 1 is interference; open loop: mean latency, above 1 is), the Hodges-Lehmann estimate over the "
            f"stable windows of every round with its distribution-free interval and a Mann-Whitney test; "
            f"'interference' needs significance, more than the minimum effect, and every round on the same side of 1 "
            f"(docs/mix.md).", "",
            "Client CPU: the load generator runs on the same host as the server (on 2 cores it competes with it); "
            "'% of a core' is the whole generator's, 'deployment' the part its traffic took.", ""]
    for m in points:
        if m.role == "failed":
            out += [f"**The mix failed**: {'; '.join(m.point.reasons)}", ""]
    for host, hpoints in _by_host(points).items():
        if host:
            out += [f"## Host: {host}", ""]
        table = []
        for ratio in mix_ratios(hpoints):
            mine = [m for m in hpoints if m.deployment == ratio.deployment]
            alone = [m for m in mine if m.role == "alone"]
            together = [m for m in mine if m.role == "together"]
            accuracy = [m.accuracy_passed for m in together if m.accuracy_passed is not None]
            table.append([ratio.deployment, mine[0].traffic, _median(alone, "Inferences/Second"),
                          _median(together, "Inferences/Second"), _median(alone, "p99 latency"),
                          _median(together, "p99 latency"),
                          f"{'throughput' if ratio.higher_is_better else 'mean latency'} "
                          f"{'~' if ratio.indicative else ''}{ratio.ratio:.3f} "
                          f"[{ratio.low:.3f}, {ratio.high:.3f}]", f"{ratio.p_value:.2g}",
                          f"{ratio.together_windows}/{ratio.alone_windows}", ratio.verdict,
                          f"{_cpu([m.point.client_cpu_percent for m in together if m.point.status == 'OK'])} / "
                          f"{_cpu([m.deployment_client_cpu_percent for m in together if m.point.status == 'OK'])}",
                          ("passed" if all(accuracy) else "FAILED") + f" ({len(accuracy)})" if accuracy else "-"])
        out += ["### Alone and together", "",
                "Inferences/Second and p99 are the median over the rounds' valid measurements (how many in "
                "brackets); the interval is at 99%, the windows are together/alone; '~': too few valid measurements to "
                "decide, the figures come from every measured one (not a verdict).", "",
                pipe_table(["deployment", "traffic", "alone inf/s", "together inf/s", "alone p99 (ms)",
                             "together p99 (ms)", "ratio together ÷ alone", "p", "windows", "verdict",
                             "client CPU % together (all / deployment)", "accuracy under the mix"], table,
                            align="left"), ""]
        measured = []
        for m in hpoints:
            if m.role not in MEASURED:
                continue
            p = m.point
            measured.append([str(m.round), m.role, p.deployment, p.status,
                             format_number("Inferences/Second", p.throughput_per_s),
                             percentile_cell(p, "p50 latency"), percentile_cell(p, "p99 latency"), _shown(p.samples),
                             format_number("Server Queue", p.latency_ms.get("Server Queue")),
                             format_number("Server Compute Infer", p.latency_ms.get("Server Compute Infer")),
                             f"{_shown(p.client_cpu_percent)} / {_shown(m.deployment_client_cpu_percent)}",
                             _shown(p.other_cpu_percent), "; ".join(p.reasons)])
        out += ["### Every measurement, in the order measured", "",
                pipe_table(["round", "role", "deployment", "status", "Inferences/Second", "p50 (ms)", "p99 (ms)",
                             "Samples", "Server Queue (ms)", "Server Compute Infer (ms)", "client CPU % (all / dep.)",
                             "other processes CPU %", "reasons"], measured, align="left"), ""]
        out += _search_section(hpoints) + _tune_section(hpoints)
    if plot:
        out += [f"![throughput and p99 over the run]({plot})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _tune_section(points: Sequence[MixPoint]) -> list[str]:
    """The configuration search for the set: the answer and the configurations to ship, then every joint
    configuration measured (each deployment's row) and the interleaved re-measure."""
    steps = [m for m in points if m.role.startswith("tune-") and m.role != "tune-answer"]
    answers = [m for m in points if m.role == "tune-answer"]
    if not steps:
        return []
    out = ["### Configuration search for the set", ""]
    if answers:
        a = answers[-1]
        out += [f"**{'Recommended' if a.recommended else 'Not recommended'}**: {a.answer}", "",
                "Stock configurations to ship: " + ", ".join(f"`{c}`" for c in a.configs), ""]
    else:
        out += ["The search did not finish: what it measured below.", ""]
    order = list(dict.fromkeys(m.deployment for m in steps))
    table = [[m.role.replace("tune-", ""), m.deployment,
              m.label.split(" | ")[order.index(m.deployment)] if " | " in m.label else m.label, m.point.status,
              format_number("Inferences/Second", m.point.throughput_per_s),
              format_number("p99 latency", m.point.latency_ms.get("p99 latency")), "yes" if m.within else "no",
              f"{m.weighted_score:g}"] for m in steps]
    return out + [pipe_table(["step", "deployment", "its configuration", "status", "Inferences/Second",
                               "p99 (ms)", "every bound held", "weighted inf/s"], table, align="left"), ""]


def _search_section(points: Sequence[MixPoint]) -> list[str]:
    """The most mixed load within every bound: the answer, then every point (each deployment's row)."""
    steps = [m for m in points if m.role == "search"]
    answers = [m for m in points if m.role == "search-answer"]
    if not steps:
        return []
    out = ["### The most mixed load within every bound", ""]
    out += [f"**{answers[-1].answer}**" if answers else "The search did not finish: its points below.", ""]
    table = []
    for m in steps:
        p = m.point
        load = f"{p.request_rate_per_s:g} req/s" if p.request_rate_per_s else f"concurrency {m.set_concurrency}"
        table.append([str(m.step), f"x{m.factor:g}", p.deployment, load, p.status,
                      format_number("Inferences/Second", p.throughput_per_s), percentile_cell(p, "p99 latency"),
                      m.bound, "yes" if m.within else "no", m.why])
    return out + [pipe_table(["point", "factor", "deployment", "load", "status", "Inferences/Second", "p99 (ms)",
                               "bound", "within", "why"], table, align="left"), ""]


def _by_host(points: Sequence[MixPoint]) -> dict[str, list[MixPoint]]:
    found: dict[str, list[MixPoint]] = {}
    for m in points:
        found.setdefault(m.host, []).append(m)
    return found


def plot_mix(name: str, points: Sequence[MixPoint], path: Path) -> Path | None:
    """Each deployment's throughput and p99 over the run: one segment per measurement across its span."""
    from tritonsuite.report.plots import new_figure, palette, save_figure

    points = [m for m in points if m.role in MEASURED and m.point.throughput_per_s]
    if not points:
        return None
    fig = new_figure(10, 6)
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
    deployments = list(dict.fromkeys(m.deployment for m in points))
    colors = dict(zip(deployments, palette(len(deployments))))
    hosts = list(_by_host(points))
    shaded = set()
    for m in points:
        span = (m.start_s, m.end_s)
        style = "-" if m.role == "together" else "--"
        label = f"{m.deployment}{' @ ' + m.host if len(hosts) > 1 else ''} {m.role}"
        for ax, column in ((top, "Inferences/Second"), (bottom, "p99 latency")):
            value = _figure(m, column)
            if value is None:
                continue
            ax.plot(span, (value, value), style, color=colors[m.deployment], linewidth=2,
                    alpha=1.0 if m.point.status == "OK" else 0.35, label=label if ax is top else None)
            if m.role == "together" and (ax, span) not in shaded:
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


def write_mix_page(reports_dir: Path, name: str, points: Sequence[MixPoint], header: str = "") -> list[Path]:
    """``reports/mix/<name>.md`` and its timeline, from one mix's points."""
    directory = Path(reports_dir) / "mix"
    png = plot_mix(name, points, directory / safe_component(name) / PLOT)
    page = render_mix(name, points, f"{safe_component(name)}/{PLOT}" if png else None)
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
    for name, points in mixes_of(list(rows)).items():
        for host, hpoints in _by_host(points).items():
            where = f"mix {name}{' on ' + host if host else ''}"
            lines += [f"{where}: {ratio.describe()}" for ratio in mix_ratios(hpoints)]
            answers = [m for m in hpoints if m.role == "search-answer"]
            lines += [f"{where}: {answers[-1].answer}"] if answers else []
            tuned = [m for m in hpoints if m.role == "tune-answer"]
            lines += [f"{where}: configuration search: {tuned[-1].answer}"] if tuned else []
    return lines
