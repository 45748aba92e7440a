"""The pages of a tune (rows of scenario ``tune``): per deployment, ``reports/tune/<deployment>/`` holds
``summary.md`` (the answer, the A B A B re-measure, accuracy under load, every configuration measured, early-stopped
ones marked) and ``throughput_vs_latency.png`` (every measured point: throughput against the bound's statistic,
the frontier of the points within the bound, the bound and the winner). ``config.pbtxt`` is written beside them by
the tune itself (:func:`tritonsuite.run.tunecase.run_tune_case`); the page and plot are the markdown presenter's,
from the run's stored rows (:mod:`tritonsuite.report.presenters.markdown`)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tritonsuite.core.access import redact
from tritonsuite.core.settings import LatencyBound
from tritonsuite.core.store import safe_component
from tritonsuite.report.common import format_number, pipe_table
from tritonsuite.report.records import TunePoint

PLOT = "throughput_vs_latency.png"


def _evidence_table(points: Sequence[TunePoint]) -> str:
    table = []
    for step, t in enumerate(points, 1):
        note = "early-stopped: " + t.early_stopped if t.early_stopped else t.why
        table.append([str(step), t.label, str(t.concurrency), format_number("Inferences/Second", t.throughput_per_s),
                      f"{t.statistic_ms:.2f}" if t.statistic_ms is not None else "-", "yes" if t.within else "no",
                      t.status, note])
    bound = points[0].bound if points else ""
    return pipe_table(["#", "configuration", "concurrency", "Inferences/Second", f"{bound.split()[0]} (ms)",
                        "within the bound", "status", "why"], table, align="left")


def frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Of (latency, throughput) points within the bound: the most throughput for at most each latency."""
    found, top = [], -1.0
    for x, y in sorted(points):
        if y > top:
            found.append((x, y))
            top = y
    return found


def render_tune_summary(deployment: str, points: Sequence[TunePoint], plot: str | None = None) -> str:
    evidence = [t for t in points if t.role == "evidence"]
    answers = [t for t in points if t.role == "answer"]
    out = [f"# Tune: {deployment}", ""]
    if answers:
        a = answers[-1]
        out += [f"**{'Recommended' if a.recommended else 'Not recommended'}**: {a.answer}", "",
                f"`config.pbtxt` beside this page: the configuration to ship "
                f"({'the winner' if a.recommended else 'the deployment' + chr(39) + 's own'}); "
                f"{a.configurations} of {a.space} configurations measured in {a.seconds} s; "
                f"settings varied: {', '.join(a.varied) or 'none'}.", ""]
        if a.accuracy_note and not any(t.role == "accuracy" for t in points):  # judged by its kind
            out += [f"The winner's {a.accuracy_note}", ""]
    else:
        out += ["The tune did not finish: the evidence below is what was measured.", ""]
    abab = [t for t in points if t.role.startswith("abab")]
    if abab:
        table = [[t.role.split("-")[1], t.label, str(t.concurrency),
                  format_number("Inferences/Second", t.throughput_per_s), format_number("p99 latency", t.p99_ms),
                  t.status] for t in abab]
        out += ["## Winner against the deployment's own configuration, measured interleaved (A B A B A B)", "",
                pipe_table(["side", "configuration", "concurrency", "Inferences/Second", "p99 latency (ms)", "status"],
                            table, align="left"), ""]
    for t in points:
        if t.role == "accuracy":
            out += [f"Accuracy under load at the winner's load (concurrency {t.concurrency}): {t.accuracy_line}", ""]
    if evidence:
        out += ["## Every configuration measured (evidence)", "", _evidence_table(evidence), ""]
    if plot:
        out += [f"![throughput against latency]({plot})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def plot_tune(points: Sequence[TunePoint], path: Path) -> Path | None:
    from tritonsuite.report.plots import new_figure, save_figure

    measured = [t for t in points if t.role == "evidence" and t.throughput_per_s and t.statistic_ms is not None]
    if not measured:
        return None
    bound = LatencyBound.parse(measured[0].bound)
    fig = new_figure(8, 5)
    ax = fig.add_subplot(1, 1, 1)
    for t in measured:
        ax.plot(t.statistic_ms, t.throughput_per_s, "x" if t.early_stopped else "o",
                color="tab:blue" if t.within else "0.6", fillstyle="full" if t.within else "none")
    best = frontier([(t.statistic_ms, t.throughput_per_s) for t in measured if t.within])
    if best:
        ax.plot(*zip(*best), "-", color="tab:blue", label="frontier (within the bound)")
    answers = [t for t in points if t.role == "answer" and t.statistic_ms is not None]
    if answers:
        a = answers[-1]
        ax.plot(a.statistic_ms, a.throughput_per_s, "*", markersize=16, color="tab:red",
                label=("winner (recommended): " if a.recommended else "best measured (not recommended): ") + a.label)
    ax.axvline(bound.ms, color="tab:red", linestyle="--", label=f"bound {bound}")
    ax.set_xlabel(f"{bound.statistic} latency (ms)")
    ax.set_ylabel("Inferences/Second")
    ax.set_title(f"{points[0].deployment}: every configuration measured (hollow: not within the bound; "
                 "x: early-stopped)", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return save_figure(fig, path)


def write_tune_page(reports_dir: str | os.PathLike[str], deployment: str, points: Sequence[TunePoint]) -> list[Path]:
    """``reports/tune/<deployment>/summary.md`` and its plot, from one deployment's tune points."""
    out = Path(reports_dir) / "tune" / safe_component(deployment)
    png = plot_tune(points, out / PLOT)
    page = out / "summary.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(redact(render_tune_summary(deployment, points, PLOT if png else None)), encoding="utf-8")
    return [page] + ([png] if png else [])
