"""Report writer: the run's rows (:mod:`tritonsuite.core.rows`) -> markdown tables and plots in the seeds' format.

At the end of a session :func:`write_reports` reads ``<reports_dir>/raw/*.jsonl`` and writes
``<reports_dir>/<scenario>/<model>.md`` plus plots in ``<reports_dir>/<scenario>/<model>/``, each page headed by the
run's provenance line when its manifest (:mod:`tritonsuite.report.manifest`) was written first. Presenters only:
storage is :mod:`tritonsuite.core.rows`.
"""
from __future__ import annotations

import os
from pathlib import Path

from tritonsuite.core.access import redact
from tritonsuite.core.store import read_manifest
from tritonsuite.core.store import fault_lines, load_rows, read_faults, safe_component
from tritonsuite.judge.crosscheck import cross_points
from tritonsuite.report.common import OFFLINE_PLOTS, ONLINE_PLOTS, SCENARIO_DESCRIPTIONS, group_by
from tritonsuite.report.manifest import header_line
from tritonsuite.report.markdown import render_markdown
from tritonsuite.report.pages import render_crosscheck, render_metrics_markdown, render_summary
from tritonsuite.report.plots import plot_offline, plot_online
from tritonsuite.report.steps import plot_steps

__all__ = ["OFFLINE_PLOTS", "ONLINE_PLOTS", "SCENARIO_DESCRIPTIONS", "plot_offline", "plot_online",
           "render_crosscheck", "render_markdown", "render_metrics_markdown", "render_summary", "write_reports"]


def write_reports(reports_dir: str | os.PathLike[str], run_id: str | None = None) -> list[Path]:
    """Load the raw rows and write one markdown page (and its plots) per (scenario, model).

    ``<reports_dir>/<scenario>/<model>.md`` links its plots as ``<model>/<plot>.png``, written into
    ``<reports_dir>/<scenario>/<model>/``.  Offline pages get the throughput/latency vs batch plots, online pages
    the latency breakdown vs concurrency; other scenarios (accuracy) get a metrics table and no plots.
    Returns every written path (markdown and PNG).
    """
    reports_dir = Path(reports_dir)
    rows = load_rows(reports_dir, run_id=run_id)
    header = header_line(read_manifest(reports_dir, run_id)) if run_id else ""
    written: list[Path] = []
    groups = group_by(rows, lambda r: (r.scenario, r.model))
    for (scenario, model), grows in groups.items():
        if scenario in ("tune", "conformance", "mix"):  # pages per deployment (report.tune, report.conformance), per mix (report.mix), below
            continue
        scenario_dir = reports_dir / safe_component(scenario)
        model_name = safe_component(model)
        if scenario == "offline":
            pngs = plot_offline(grows, scenario_dir / model_name)
        elif scenario == "online":
            pngs = plot_online(grows, scenario_dir / model_name)
        else:
            pngs = []
        if scenario in ("offline", "online"):
            pngs += plot_steps(grows, scenario_dir / model_name)  # an ensemble's time per composing model
        plots = [f"{model_name}/{p.name}" for p in pngs]
        md_path = scenario_dir / f"{model_name}.md"
        md_path.parent.mkdir(parents=True, exist_ok=True)
        page = _with_header(render_markdown(model, scenario, grows, plots=plots), header)
        md_path.write_text(redact(page), encoding="utf-8")
        written.append(md_path)
        written.extend(pngs)
    if "tune" in {scenario for scenario, _ in groups}:
        from tritonsuite.report.tune import write_tune_pages

        written += write_tune_pages(reports_dir, [r for r in rows if r.scenario == "tune"])
    if "conformance" in {scenario for scenario, _ in groups}:
        from tritonsuite.report.conformance import write_conformance_pages

        written += write_conformance_pages(reports_dir, [r for r in rows if r.scenario == "conformance"])
    if "mix" in {scenario for scenario, _ in groups}:
        from tritonsuite.report.mix import write_mix_pages

        written += write_mix_pages(reports_dir, [r for r in rows if r.scenario == "mix"], header)
    if cross_points(rows):  # points both load generators measured: perf_analyzer side by side with the engine
        page = reports_dir / "crosscheck.md"
        page.write_text(redact(_with_header(render_crosscheck(rows), header)), encoding="utf-8")
        written.append(page)
    faults = fault_lines(read_faults(reports_dir, run_id)) if run_id else []
    if rows or faults:  # a short page for a CI job summary; what was given up and restarted, at its end
        summary = reports_dir / "summary.md"
        broken = "\n\n## Deployments given up, server restarts\n\n" + "\n".join(f"- {line}" for line in faults) + "\n"
        page = _with_header(render_summary(rows, run_id), header) + (broken if faults else "")
        summary.write_text(redact(page), encoding="utf-8")
        written.append(summary)
    return written


def _with_header(page: str, header: str) -> str:
    """The run's provenance line (from its manifest) under the page's title."""
    if not header:
        return page
    title, _, rest = page.partition("\n\n")
    return f"{title}\n\n{header}\n\n{rest}"
