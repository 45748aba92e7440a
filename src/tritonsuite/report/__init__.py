"""Report writers: the run's rows (:mod:`tritonsuite.core.rows`) -> pages, through one presenter seam.

At the end of a session :func:`write_reports` reads ``<reports_dir>/raw/*.jsonl`` and the run's manifest once
(:func:`tritonsuite.report.records.read_run`: typed, grouped into pages) and hands them to each presenter
(:mod:`tritonsuite.report.presenters`): markdown (the seeds' pages and plots, ``<reports_dir>/<scenario>/<model>.md``,
``summary.md``, ...) and HTML. Presenters only: storage is :mod:`tritonsuite.core.store`.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tritonsuite.report.common import OFFLINE_PLOTS, ONLINE_PLOTS, SCENARIO_DESCRIPTIONS
from tritonsuite.report.markdown import render_markdown
from tritonsuite.report.pages import render_crosscheck, render_metrics_markdown, render_summary
from tritonsuite.report.plots import plot_offline, plot_online
from tritonsuite.report.presenters import presenter
from tritonsuite.report.records import read_run

__all__ = ["OFFLINE_PLOTS", "ONLINE_PLOTS", "SCENARIO_DESCRIPTIONS", "plot_offline", "plot_online",
           "render_crosscheck", "render_markdown", "render_metrics_markdown", "render_summary", "write_reports"]

#: the presenters a run writes
DEFAULT_PRESENTERS = ("markdown", "html")


def write_reports(reports_dir: str | os.PathLike[str], run_id: str | None = None, *,
                  presenters: Sequence[str] = DEFAULT_PRESENTERS, comparison=None,
                  gate_percent: float | None = None) -> list[Path]:
    """Read the stored rows of ``run_id`` (every run when None) and write each presenter's pages; ``comparison``
    (a :class:`tritonsuite.judge.compare.Comparison`, ``--compare``) adds the comparison page. Returns every written
    path, presenter by presenter."""
    chosen = [presenter(name) for name in presenters]  # a name not known refused before anything is read
    run = read_run(reports_dir, run_id, comparison=comparison, gate_percent=gate_percent)
    run.presenters = tuple(presenters)
    written: list[Path] = []
    for module in chosen:
        written += module.write(run)
    return written
