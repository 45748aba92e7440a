"""The HTML page's sections beyond the performance tables (:mod:`tritonsuite.report.presenters.html`): accuracy against
its thresholds and baselines (reduced precision beside fp32), the conformance checklists, the comparison with a
stored run (regressions first), tune's configurations and frontier, mix's interference, perf_analyzer beside the
engine. Each reads the run as :mod:`tritonsuite.report.records` grouped it."""
from __future__ import annotations

import re
from typing import Any

from tritonsuite.core.settings import LatencyBound
from tritonsuite.core.store import safe_component
from tritonsuite.report.common import format_value
from tritonsuite.report.htmlkit import Cell, Figures, Table, block, cell_number, esc, number, plot_text
from tritonsuite.report.mix import mix_ratios
from tritonsuite.report.records import Accuracy, BaselineNote, RunRecords
from tritonsuite.report.tune import frontier

VERDICT_ORDER = {"regression": 0, "improvement": 1, "no significant change": 2, "not comparable": 3}


def other_sections(run: RunRecords, figures: Figures) -> str:
    parts = [accuracy(run, figures), conformance(run), compare(run, figures), tune(run, figures), mix(run, figures),
             crosscheck(run, figures)]
    return "".join(parts)


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section class="page" id="{esc(anchor)}"><h2>{esc(title)}</h2>{content}</section>' if content else ""


def accuracy(run: RunRecords, figures: Figures) -> str:
    blocks = []
    for (scenario, model), records in run.accuracy.items():
        table = Table([("deployment", True), ("format", True), ("precision", True), ("metric", True), ("value", True),
                       ("threshold", True), ("status", True), ("against the baseline", True), ("reasons", True)])
        traces = []
        for r in records:
            for m in r.metrics:
                table.add([r.deployment, r.format or "-", r.precision or "-", m.name,
                           Cell(format_value(m.value), number(m.value)),
                           Cell(format_value(m.threshold) if m.threshold is not None else "-", limit_of(m.threshold)),
                           Cell(m.status, cls=f"status-{m.status}"), _standing(r.baseline),
                           "; ".join(r.reasons) or "-"], status=r.status)
            shown = [m for m in r.metrics if number(m.value) is not None]
            traces.append({"type": "scatter", "mode": "markers", "name": plot_text(r.deployment),
                           "x": [plot_text(m.name) for m in shown], "y": [number(m.value) for m in shown],
                           "marker": {"size": 10}})
            if any(limit_of(m.threshold) is not None for m in shown):
                traces.append({"type": "scatter", "mode": "markers", "name": plot_text(f"{r.deployment}: threshold"),
                               "x": [plot_text(m.name) for m in shown], "y": [limit_of(m.threshold) for m in shown],
                               "marker": {"symbol": "line-ew-open", "size": 22}})
        plot = figures.add("accuracy", f"{model}: {scenario} metrics against their thresholds",
                           [t for t in traces if t["x"]], {"yaxis": {"title": {"text": "metric value"}}})
        blocks.append(block(table.html() + f'<div class="plots">{plot}</div>', f"{scenario}: {model}", 3,
                            scenario=scenario, model=model, format=sorted({r.format for r in records if r.format}),
                            precision=sorted({r.precision for r in records if r.precision})))
        blocks.append(reduced_precision(scenario, model, records, figures))
    return _section("accuracy", "Accuracy", "".join(blocks))


def _standing(note: BaselineNote | None) -> str:
    if note is None:
        return "-"
    return "; ".join(note.regressions + note.improvements) or note.missing or note.refused or (
        f"{note.compared} metrics within their allowances" if note.compared is not None else "-")


def reduced_precision(scenario: str, model: str, records: list[Accuracy], figures: Figures) -> str:
    """Per format with an fp32 record and a reduced-precision one (fp16, mixed): each metric of each precision
    beside fp32's and the reduced precision's threshold, in a table and a plot (the metrics with a numeric
    threshold, else every numeric one; nothing when no format has both)."""
    first: dict[tuple[str, str], Accuracy] = {}
    for r in records:
        first.setdefault((r.format, r.precision.lower()), r)
    pairs = [(first[fmt, "fp32"], r) for (fmt, precision), r in first.items()
             if precision not in ("", "fp32") and (fmt, "fp32") in first]
    if not pairs:
        return ""
    table = Table([("format", True), ("precision", True), ("metric", True), ("fp32", True), ("value", True),
                   ("change from fp32", True), ("threshold", True), ("status", True), ("deployment", False),
                   ("fp32 deployment", False)], cls="reduced")
    bars: dict[str, dict[str, float | None]] = {}  # precision -> "format: metric" -> value
    limits: dict[str, dict[str, float | None]] = {}
    for reference, reduced in pairs:
        base = {m.name: m for m in reference.metrics}
        for m in reduced.metrics:
            ref = base.get(m.name)
            value, was = number(m.value), number(ref.value) if ref else None
            table.add([reduced.format or "-", reduced.precision, m.name,
                       Cell(format_value(ref.value) if ref else "-", was), Cell(format_value(m.value), value),
                       cell_number(value - was if value is not None and was is not None else None, 4,
                                   f"{value - was:+.4g}" if value is not None and was is not None else None),
                       Cell(format_value(m.threshold) if m.threshold is not None else "-", limit_of(m.threshold)),
                       Cell(m.status, cls=f"status-{m.status}"), reduced.deployment, reference.deployment],
                      status=reduced.status)
            if value is None or was is None:
                continue
            label = plot_text(f"{reduced.format}: {m.name}")
            bars.setdefault("fp32", {})[label] = was
            bars.setdefault(reduced.precision, {})[label] = value
            limits.setdefault(reduced.precision, {})[label] = limit_of(m.threshold)
    judged = [x for x in bars.get("fp32", {}) if any(limits[p].get(x) is not None for p in limits)]
    shown = judged or list(bars.get("fp32", {}))
    traces = [{"type": "bar", "name": precision, "x": shown, "y": [values.get(x) for x in shown]}
              for precision, values in bars.items()]
    traces += [{"type": "scatter", "mode": "markers", "name": f"{precision} threshold", "x": shown,
                "y": [values.get(x) for x in shown], "marker": {"symbol": "line-ew-open", "size": 26}}
               for precision, values in limits.items() if any(values.get(x) is not None for x in shown)]
    plot = figures.add("precision", f"{model}: reduced precision against fp32 ({scenario})",
                       traces if shown else [], {"barmode": "group", "yaxis": {"title": {"text": "metric value"}}})
    precisions = sorted({r.precision for pair in pairs for r in pair})
    return block(table.html() + f'<div class="plots">{plot}</div>', f"{scenario}: {model}, reduced precision "
                 "against fp32", 3, scenario=scenario, model=model, format=sorted({r.format for r, _ in pairs}),
                 precision=precisions)


def limit_of(threshold: Any) -> float | None:
    """A threshold's number: itself, the bound of ``{"min": x}`` / ``{"max": x}``, or of ``">= x"`` / ``"<= x"``."""
    if isinstance(threshold, dict):
        return number(threshold.get("min", threshold.get("max")))
    if isinstance(threshold, str):
        found = re.fullmatch(r"\s*(?:>=|<=|>|<|==)?\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*%?\s*", threshold)
        return float(found.group(1)) if found else None
    return number(threshold)


def conformance(run: RunRecords) -> str:
    blocks = []
    for deployment, checks in run.conformance.items():
        verdicts = [c.judged for c in checks]
        table = Table([("check", True), ("declared", True), ("observed", True), ("verdict", True), ("reason", True),
                       ("seconds", True)], cls="checklist")
        for c in checks:
            table.add(["-" if c.check is None else c.check, c.declared, c.observed,
                       Cell(c.judged, cls=f"verdict-{c.judged}"), "; ".join(c.reasons) or "-",
                       cell_number(c.seconds, 2)], status=c.status)
        line = (f"<p>{len(checks)} checks: {verdicts.count('pass')} passed, {verdicts.count('fail')} failed, "
                f"{verdicts.count('skipped')} skipped. <a href=\"conformance/{esc(safe_component(deployment))}.md\">"
                "evidence (markdown)</a></p>")
        blocks.append(block(line + table.html(), deployment, 3, scenario="conformance", model=checks[0].model,
                            format=checks[0].format, precision=checks[0].precision))
    return _section("conformance", "Conformance: declared, observed, verdict", "".join(blocks))


def compare(run: RunRecords, figures: Figures) -> str:
    c = run.comparison
    if c is None:
        return ""
    points = sorted(c.points, key=lambda p: (VERDICT_ORDER.get(p.verdict, 9), p.throughput_delta_percent or 0.0))
    table = Table([("deployment", True), ("batch", True), ("load", True), ("inf/s then", True), ("inf/s now", True),
                   ("change (%)", True), ("minimum effect (%)", True), ("p", True), ("verdict", True),
                   ("p99 then (ms)", False), ("p99 now (ms)", False)], cls="compare")
    for p in points:
        _, deployment, batch, load, _ = p.key
        table.add([deployment, cell_number(batch, 0), load, cell_number(p.then.result.get("Inferences/Second")),
                   cell_number(p.now.result.get("Inferences/Second")), cell_number(p.throughput_delta_percent),
                   cell_number(p.min_effect_percent), cell_number(p.p_value, 3, None),
                   Cell(p.verdict if p.throughput_delta_percent is not None else f"{p.verdict}: {p.reason}",
                        cls=f"verdict-{p.verdict.replace(' ', '-')}"),
                   cell_number(p.then.result.get("p99 latency"), 2), cell_number(p.now.result.get("p99 latency"), 2)],
                  status=p.now.status)
    judged = [p for p in points if p.throughput_delta_percent is not None]
    colors = {"regression": "#d62728", "improvement": "#2ca02c"}
    traces = [{"type": "bar", "orientation": "h", "name": "throughput change (%)",
               "y": [plot_text(f"{p.key[1]} b{p.key[2]} {p.key[3]}") for p in judged],
               "x": [p.throughput_delta_percent for p in judged],
               "text": [plot_text(f"{p.verdict}, p={p.p_value:.2g}") for p in judged],
               "marker": {"color": [colors.get(p.verdict, "#999999") for p in judged]}}] if judged else []
    plot = figures.add("compare", f"{c.now_label} against {c.then_label}: throughput change", traces,
                       {"height": 120 + 22 * len(judged), "margin": {"l": 320}, "xaxis": {"title": {"text": "%"}}})
    differs = "".join(f"<li>{esc(d)}</li>" for d in c.differences)
    gate = (f"a significant regression beyond {run.gate_percent:g}% fails" if run.gate_percent is not None
            else "informational (no --perf-gate)")
    head = (f"<p>{esc(c.now_label)} against {esc(c.then_label)}: {len(c.points)} joined points, "
            f"{len(c.regressions())} significant regressions; {esc(gate)}.</p>"
            + (f"<ul>{differs}</ul>" if differs else ""))
    models = sorted({p.now.model for p in points})
    return _section("compare", "Compared with a stored run", block(head + table.html() + plot, "Every joined point", 3,
                                                                  scenario=["offline", "online"], model=models))


def tune(run: RunRecords, figures: Figures) -> str:
    blocks = []
    for deployment, points in run.tune.items():
        evidence = [t for t in points if t.role == "evidence"]
        answers = [t for t in points if t.role == "answer"]
        bound = points[0].bound
        table = Table([("#", True), ("configuration", True), ("concurrency", True), ("Inferences/Second", True),
                       (f"{bound.split()[0] if bound else 'latency'} (ms)", True), ("within the bound", True),
                       ("status", True), ("why", True)], cls="tune")
        for step, t in enumerate(evidence, 1):
            table.add([cell_number(step, 0), t.label, cell_number(t.concurrency, 0), cell_number(t.throughput_per_s),
                       cell_number(t.statistic_ms, 2), "yes" if t.within else "no",
                       Cell(t.status, cls=f"status-{t.status}"),
                       "early-stopped: " + t.early_stopped if t.early_stopped else t.why], status=t.status)
        measured = [t for t in evidence if t.statistic_ms is not None and t.throughput_per_s is not None]
        traces = [{"type": "scatter", "mode": "markers", "name": name, "x": [t.statistic_ms for t in mine],
                   "y": [t.throughput_per_s for t in mine], "text": [plot_text(t.label) for t in mine],
                   "marker": {"symbol": symbol, "size": 9}}
                  for name, symbol, mine in (("within the bound", "circle", [t for t in measured if t.within]),
                                             ("over the bound", "circle-open", [t for t in measured if not t.within]))
                  if mine]
        best = frontier([(t.statistic_ms, t.throughput_per_s) for t in measured if t.within])
        if best:
            traces.append({"type": "scatter", "mode": "lines", "name": "frontier", "x": [f[0] for f in best],
                           "y": [f[1] for f in best]})
        layout: dict[str, Any] = {"xaxis": {"title": {"text": f"{bound.split()[0] if bound else ''} latency (ms)"}},
                                  "yaxis": {"title": {"text": "inferences/s"}}}
        if bound:
            ms = LatencyBound.parse(bound).ms
            layout["shapes"] = [{"type": "line", "x0": ms, "x1": ms, "yref": "paper", "y0": 0, "y1": 1,
                                 "line": {"dash": "dash", "color": "#d62728"}}]
        answer = answers[-1] if answers else None
        head = (f"<p><strong>{'Recommended' if answer.recommended else 'Not recommended'}</strong>: "
                f"{esc(answer.answer)}</p>" if answer else "<p>The tune did not finish.</p>")
        plot = figures.add("tune", f"{deployment}: every configuration measured (bound {bound})", traces, layout)
        blocks.append(block(head + table.html() + plot, deployment, 3, scenario="tune", model=points[0].model,
                            format=points[0].format, precision=points[0].precision))
    return _section("tune", "Tune: configurations and their frontier", "".join(blocks))


def mix(run: RunRecords, figures: Figures) -> str:
    blocks = []
    for name, rows in run.mixes.items():
        ratios = mix_ratios(rows)
        table = Table([("deployment", True), ("metric", True), ("together ÷ alone", True), ("interval", True),
                       ("p", True), ("windows together / alone", True), ("verdict", True)], cls="mix")
        for r in ratios:
            shown = ("~" if r.indicative else "") + f"{r.ratio:.3f}"
            table.add([r.deployment, r.metric, cell_number(r.ratio, 3, shown),
                       f"[{r.low:.3f}, {r.high:.3f}]", cell_number(r.p_value, 3, f"{r.p_value:.2g}"),
                       f"{r.together_windows} / {r.alone_windows}", Cell(r.verdict, cls=f"verdict-{r.verdict}")])
        traces = [{"type": "bar", "name": "together ÷ alone", "x": [plot_text(r.deployment) for r in ratios],
                   "y": [r.ratio for r in ratios],
                   "error_y": {"type": "data", "symmetric": False, "array": [r.high - r.ratio for r in ratios],
                               "arrayminus": [r.ratio - r.low for r in ratios]},
                   "text": [plot_text(f"{r.metric}: {r.verdict}") for r in ratios]}] if ratios else []
        plot = figures.add("mix", f"mix {name}: together ÷ alone, with its interval", traces,
                           {"shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                                        "line": {"dash": "dot"}}]})
        blocks.append(block(table.html() + plot, f"mix {name}", 3, scenario="mix",
                            model=sorted({m.point.model for m in rows})))
    return _section("mix", "Mix: interference", "".join(blocks))


def crosscheck(run: RunRecords, figures: Figures) -> str:
    if not run.cross:
        return ""
    table = Table([("scenario", True), ("deployment", True), ("batch", True), ("concurrency", True),
                   ("inf/s suite", True), ("inf/s perf_analyzer", True), ("ratio", True), ("p99 suite (ms)", True),
                   ("p99 perf_analyzer (ms)", True), ("status suite / pa", True),
                   ("p50 suite (ms)", False), ("p50 perf_analyzer (ms)", False),
                   ("Server Queue suite / pa (ms)", False), ("Server Compute Infer suite / pa (ms)", False)],
                  cls="crosscheck")
    for p in run.cross:
        s, a = p.suite, p.perf_analyzer
        table.add([p.scenario, p.deployment, cell_number(p.batch, 0), cell_number(p.concurrency, 0),
                   cell_number(p.figure(s, "Inferences/Second")), cell_number(p.figure(a, "Inferences/Second")),
                   cell_number(p.ratio("Inferences/Second"), 2), cell_number(p.figure(s, "p99 latency"), 2),
                   cell_number(p.figure(a, "p99 latency"), 2), f"{s.status} / {a.status}",
                   cell_number(p.figure(s, "p50 latency"), 2), cell_number(p.figure(a, "p50 latency"), 2),
                   f"{p.figure(s, 'Server Queue')} / {p.figure(a, 'Server Queue')}",
                   f"{p.figure(s, 'Server Compute Infer')} / {p.figure(a, 'Server Compute Infer')}"],
                  status=a.status if s.status == "OK" else s.status)
    labels = [plot_text(f"{p.deployment} b{p.batch} c{p.concurrency}") for p in run.cross]
    traces = [{"type": "bar", "name": who, "x": labels,
               "y": [p.figure(getattr(p, attr), "Inferences/Second") for p in run.cross]}
              for who, attr in (("suite", "suite"), ("perf_analyzer", "perf_analyzer"))]
    plot = figures.add("crosscheck", "throughput: the suite's engine and perf_analyzer", traces,
                       {"barmode": "group", "yaxis": {"title": {"text": "inferences/s"}}})
    return _section("crosscheck", "perf_analyzer side by side with the suite's engine",
                    block(table.html() + plot, "Points both load generators measured", 3,
                          scenario=sorted({p.scenario for p in run.cross}),
                          model=sorted({p.suite.model for p in run.cross})))
