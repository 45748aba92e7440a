"""The pages of a tune (rows of scenario ``tune``): per deployment, ``reports/tune/<deployment>/`` holds
``summary.md`` (the answer, the A B A B re-measure, accuracy under load, every configuration measured, early-stopped
ones marked) and ``throughput_vs_latency.png`` (every measured point: throughput against the bound's statistic,
the frontier of the points within the bound, the bound and the winner). ``config.pbtxt`` is written beside them by
the tune itself (:func:`tritonsuite.run.tunecase.run_tune_case`); the page and plot are the markdown presenter's,
from the run's stored rows (:mod:`tritonsuite.report.presenters.markdown`)."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonsuite.core.access import redact
from tritonsuite.core.settings import LatencyBound
from tritonsuite.core.store import safe_component
from tritonsuite.report.common import format_number, group_by, pipe_table, as_records, result_of, status_of

PLOT = "throughput_vs_latency.png"


def _tune(row: Mapping[str, Any]) -> Mapping[str, Any]:
    return (row.get("measurement") or {}).get("tune") or {}


def statistic_ms(row: Mapping[str, Any]) -> float | None:
    """The bound's statistic of a row: its result column when the seeds have one, else from its latency samples."""
    bound = LatencyBound.parse(_tune(row)["bound"])
    column = result_of(row).get(f"{bound.statistic} latency")
    if column is not None:
        return float(column)
    samples = (row.get("measurement") or {}).get("latency_samples_ms") or []
    return bound.value(samples) if samples else None


def _evidence_table(rows: Sequence[Mapping[str, Any]]) -> str:
    table = []
    for step, row in enumerate(rows, 1):
        t, stat = _tune(row), statistic_ms(row)
        note = "early-stopped: " + t["early_stopped"] if t.get("early_stopped") else t.get("why", "")
        table.append([str(step), t.get("label", ""), str(row.get("concurrency")),
                      format_number("Inferences/Second", result_of(row).get("Inferences/Second")),
                      f"{stat:.2f}" if stat is not None else "-", "yes" if t.get("within") else "no", status_of(row),
                      note])
    bound = _tune(rows[0]).get("bound", "") if rows else ""
    return pipe_table(["#", "configuration", "concurrency", "Inferences/Second", f"{bound.split()[0]} (ms)",
                        "within the bound", "status", "why"], table, align="left")


def render_tune_summary(deployment: str, rows: Sequence[Mapping[str, Any]], plot: str | None = None) -> str:
    evidence = [r for r in rows if _tune(r).get("role") == "evidence"]
    answers = [r for r in rows if _tune(r).get("role") == "answer"]
    out = [f"# Tune: {deployment}", ""]
    if answers:
        a = _tune(answers[-1])
        out += [f"**{'Recommended' if a.get('recommended') else 'Not recommended'}**: {a.get('answer')}", "",
                f"`config.pbtxt` beside this page: the configuration to ship "
                f"({'the winner' if a.get('recommended') else 'the deployment' + chr(39) + 's own'}); "
                f"{a.get('configurations')} of {a.get('space')} configurations measured in {a.get('seconds')} s; "
                f"settings varied: {', '.join(a.get('varied') or []) or 'none'}.", ""]
        if a.get("accuracy") and not any(_tune(r).get("role") == "accuracy" for r in rows):  # judged by its kind
            out += [f"The winner's {a['accuracy']}", ""]
    else:
        out += ["The tune did not finish: the evidence below is what was measured.", ""]
    abab = [r for r in rows if str(_tune(r).get("role", "")).startswith("abab")]
    if abab:
        table = [[_tune(r)["role"].split("-")[1], _tune(r).get("label", ""), str(r.get("concurrency")),
                  format_number("Inferences/Second", result_of(r).get("Inferences/Second")),
                  format_number("p99 latency", result_of(r).get("p99 latency")), status_of(r)] for r in abab]
        out += ["## Winner against the deployment's own configuration, measured interleaved (A B A B A B)", "",
                pipe_table(["side", "configuration", "concurrency", "Inferences/Second", "p99 latency (ms)", "status"],
                            table, align="left"), ""]
    for r in rows:
        if _tune(r).get("role") == "accuracy":
            out += [f"Accuracy under load at the winner's load (concurrency {r.get('concurrency')}): "
                    f"{_tune(r).get('accuracy_line', '')}", ""]
    if evidence:
        out += ["## Every configuration measured (evidence)", "", _evidence_table(evidence), ""]
    if plot:
        out += [f"![throughput against latency]({plot})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def plot_tune(rows: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    from tritonsuite.report.plots import new_figure, save_figure

    evidence = [r for r in rows if _tune(r).get("role") == "evidence" and result_of(r).get("Inferences/Second")]
    points = [(statistic_ms(r), float(result_of(r)["Inferences/Second"]), r) for r in evidence]
    points = [p for p in points if p[0] is not None]
    if not points:
        return None
    bound = LatencyBound.parse(_tune(points[0][2])["bound"])
    fig = new_figure(8, 5)
    ax = fig.add_subplot(1, 1, 1)
    for x, y, r in points:
        within, stopped = _tune(r).get("within"), _tune(r).get("early_stopped")
        ax.plot(x, y, "x" if stopped else "o", color="tab:blue" if within else "0.6",
                fillstyle="full" if within else "none")
    inside = sorted((x, y) for x, y, r in points if _tune(r).get("within"))
    frontier, top = [], -1.0
    for x, y in inside:  # the most throughput for at most this latency
        if y > top:
            frontier.append((x, y))
            top = y
    if frontier:
        ax.plot(*zip(*frontier), "-", color="tab:blue", label="frontier (within the bound)")
    answers = [r for r in rows if _tune(r).get("role") == "answer" and statistic_ms(r) is not None]
    if answers:
        a = answers[-1]
        ax.plot(statistic_ms(a), float(result_of(a)["Inferences/Second"]), "*", markersize=16, color="tab:red",
                label=("winner (recommended): " if _tune(a).get("recommended")
                       else "best measured (not recommended): ") + _tune(a).get("label", ""))
    ax.axvline(bound.ms, color="tab:red", linestyle="--", label=f"bound {bound}")
    ax.set_xlabel(f"{bound.statistic} latency (ms)")
    ax.set_ylabel("Inferences/Second")
    ax.set_title(f"{rows[0].get('deployment')}: every configuration measured (hollow: not within the bound; x: early-stopped)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return save_figure(fig, path)


def write_tune_page(reports_dir: str | os.PathLike[str], deployment: str, rows: Sequence[Any]) -> list[Path]:
    """``reports/tune/<deployment>/summary.md`` and its plot, from one deployment's tune rows."""
    drows = as_records(rows)
    out = Path(reports_dir) / "tune" / safe_component(deployment)
    png = plot_tune(drows, out / PLOT)
    page = out / "summary.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(redact(render_tune_summary(deployment, drows, PLOT if png else None)), encoding="utf-8")
    return [page] + ([png] if png else [])
