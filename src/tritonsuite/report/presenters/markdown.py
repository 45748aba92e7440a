"""The markdown presenter: the seeds' pages. Per scenario and model ``<scenario>/<model>.md`` with its plots in
``<scenario>/<model>/``; per deployment its conformance page and its tune's page; per mix its page;
and the run's own pages (:func:`run_pages`): ``crosscheck.md`` where both load generators measured a point,
``summary.md``, the short page for a CI job, and ``compare.md`` with ``--compare`` (:func:`render_page`, which the
``crosscheck`` and ``compare`` commands print). Each page is headed by the run's provenance line and redacted."""
from __future__ import annotations

from pathlib import Path

from tritonsuite.core.access import redact
from tritonsuite.core.store import safe_component
from tritonsuite.report.comparison import render_comparison
from tritonsuite.report.conformance import write_conformance_page
from tritonsuite.report.markdown import render_markdown
from tritonsuite.report.mix import write_mix_page
from tritonsuite.report.pages import render_crosscheck, render_metrics_markdown, render_summary
from tritonsuite.report.plots import plot_offline, plot_online
from tritonsuite.report.records import RunRecords
from tritonsuite.report.steps import plot_steps
from tritonsuite.report.tune import write_tune_page

NAME = "markdown"
HTML_LINK = ("The whole run on one page, its tables to sort and filter and its plots to hover (self-contained, opens "
             "offline): [index.html](index.html).")


def write(run: RunRecords) -> list[Path]:
    reports_dir, header = run.reports_dir, run.header
    written: list[Path] = []
    for scenario, model in run.pages:
        scenario_dir = reports_dir / safe_component(scenario)
        model_name = safe_component(model)
        pngs: list[Path] = []
        if (scenario, model) in run.accuracy:
            text = render_metrics_markdown(model, scenario, run.accuracy[scenario, model])
        else:
            points = run.performance[scenario, model]
            plot = plot_offline if scenario == "offline" else plot_online
            pngs = plot(points, scenario_dir / model_name)
            pngs += plot_steps(points, scenario_dir / model_name)  # an ensemble's time per composing model
            text = render_markdown(model, scenario, points, plots=[f"{model_name}/{p.name}" for p in pngs])
        page = scenario_dir / f"{model_name}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(redact(with_header(text, header)), encoding="utf-8")
        written += [page] + pngs
    for deployment, points in run.tune.items():
        written += write_tune_page(reports_dir, deployment, points)
    for deployment, checks in run.conformance.items():
        written.append(write_conformance_page(reports_dir, deployment, checks))
    for name, points in run.mixes.items():
        written += write_mix_page(reports_dir, name, points, header)
    for name in run_pages(run):
        page = reports_dir / name
        page.write_text(render_page(run, name), encoding="utf-8")
        written.append(page)
    return written


def run_pages(run: RunRecords) -> list[str]:
    """The run's own pages it has: ``crosscheck.md`` where both load generators measured a point, ``summary.md``
    where it has rows or faults, ``compare.md`` with a comparison."""
    return [name for name, has in (("crosscheck.md", bool(run.cross)), ("summary.md", bool(run.rows or run.faults)),
                                   ("compare.md", run.comparison is not None)) if has]


def render_page(run: RunRecords, name: str) -> str:
    """The text of one of the run's own pages (a name of :func:`run_pages`), redacted: what :func:`write` writes,
    and what ``tritonsuite crosscheck`` and ``tritonsuite compare`` print."""
    if name == "crosscheck.md":  # perf_analyzer side by side with the engine
        text = with_header(render_crosscheck(run.cross), run.header)
    elif name == "summary.md":  # a short page for a CI job summary; what was given up and restarted, at its end
        broken = ("\n\n## Deployments given up, server restarts\n\n" + "\n".join(f"- {line}" for line in run.faults)
                  + "\n")
        text = with_header(render_summary(run), run.header) + (broken if run.faults else "")
        if "html" in run.presenters:  # the HTML presenter's page, linked first
            title, _, rest = text.partition("\n\n")
            text = f"{title}\n\n{HTML_LINK}\n\n{rest}"
    elif name == "compare.md" and run.comparison is not None:
        text = render_comparison(run.comparison, run.gate_percent)
    else:
        raise ValueError(f"no page {name!r} of this run; it has: {', '.join(run_pages(run))}")
    return redact(text)


def with_header(page: str, header: str) -> str:
    """The run's provenance line (from its manifest) under the page's title."""
    if not header:
        return page
    title, _, rest = page.partition("\n\n")
    return f"{title}\n\n{header}\n\n{rest}"
