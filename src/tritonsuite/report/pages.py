"""The run's other pages: the metrics table of a scenario without load points (accuracy), the short summary for a
CI job, and perf_analyzer side by side with the engine (``reports/crosscheck.md``)."""
from __future__ import annotations

from collections.abc import Sequence

from tritonsuite.core.rows import Row
from tritonsuite.judge.crosscheck import CrossPoint
from tritonsuite.report.common import distinct, format_number, format_value, group_by, pipe_table
from tritonsuite.report.conformance import summary_lines as conformance_summary
from tritonsuite.report.points import Point
from tritonsuite.report.records import Accuracy, BaselineNote, RunRecords


def render_metrics_markdown(model: str, scenario: str, records: Sequence[Accuracy]) -> str:
    """A page for metric records (e.g. accuracy): one ``deployment | metric | value | threshold | status`` table.

    Nested metrics are dotted names; thresholds are looked up by the same (or the top-level) name
    (:class:`tritonsuite.report.records.Accuracy`). Non-OK records' reasons are listed under the table.
    """
    titles = distinct(r.title for r in records)
    out = [f"# {', '.join(titles) if titles else model} {scenario} results", ""]
    for description in distinct(r.description for r in records):
        out += [f"Data: {description}.", ""]
    table = [[r.deployment or "-", m.name, format_value(m.value),
              format_value(m.threshold) if m.threshold is not None else "-", m.status]
             for r in records for m in r.metrics]
    if table:
        out += [pipe_table(["deployment", "metric", "value", "threshold", "status"], table, align="left"), ""]
    else:
        out += ["No records.", ""]
    baselines = []
    for r in records:
        note = r.baseline
        if note is None:
            continue
        lines = [f"regression: {line}" for line in note.regressions] + \
                [f"improvement: {line}" for line in note.improvements]
        if note.missing or note.refused:
            lines.append(note.missing or note.refused)
        elif note.compared is not None and not lines:
            lines.append(f"{note.compared} metrics within their allowances")
        if note.updated:
            lines.append(f"baseline rewritten: {note.updated}")
        baselines += [f"- {r.deployment or '-'}: {line}" for line in lines]
    if baselines:
        out += ["Against the baselines:", ""] + baselines + [""]
    problems = [f"- {r.deployment or '-'}: {r.status}" + (f": {'; '.join(r.reasons)}" if r.reasons else "")
                for r in records if r.status != "OK"]
    if problems:
        out += ["Records that did not pass:", ""] + problems + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def standing(note: BaselineNote | None) -> str:
    """An accuracy record's standing against its baseline, in a few words (summary.md)."""
    if note is None:
        return "-"
    if note.regressions:
        return "regressed: " + "; ".join(note.regressions)
    if note.missing:
        return "no baseline"
    if note.refused:
        return "not judged: measured with other weights or data"
    return f"{note.compared or 0} metrics within allowances" + (
        "; improved: " + "; ".join(note.improvements) if note.improvements else "")


def not_measured_lines(rows: Sequence[Row]) -> list[str]:
    """One line per performance point that could not be measured although every request was answered
    (:func:`tritonsuite.core.rows.not_measured`): its deployment, load, status and first reason."""
    return [f"{p.deployment} {p.label}: {p.status}: {(p.reasons or ('-',))[0]}"
            for p in (Point.of(r) for r in rows if r.not_measured)]


def render_summary(run: RunRecords) -> str:
    """A short page for a CI job summary: per accuracy deployment its verdict and its standing against the
    baseline; per deployment its conformance verdicts; per tuned deployment the configuration to ship; per measured
    deployment its best valid throughput with that point's p99."""
    out = [f"# tritonsuite run {run.run_id or ', '.join(distinct(r.run_id for r in run.rows))}", ""]
    accuracy = [r for (scenario, _), records in run.accuracy.items() if scenario == "accuracy" for r in records]
    if accuracy:
        table = [[r.title or r.model, r.deployment, r.status, standing(r.baseline)] for r in accuracy]
        out += ["## Accuracy", "", pipe_table(["model", "deployment", "status", "against the baseline"], table,
                                               align="left"), ""]
    out += conformance_summary(run.conformance)
    tuned = [t for points in run.tune.values() for t in points if t.role == "answer"]
    if tuned:  # tritonsuite.tune: the configuration to ship, per deployment
        out += ["## Which configuration to ship (tune)", ""] + [
            f"- {t.deployment}: {t.answer} (tune/{t.deployment}/)" for t in tuned] + [""]
        for model, answers in group_by(tuned, lambda t: t.model).items():  # the outer choice: format, precision
            scored = [t for t in answers if t.throughput_per_s is not None]
            if len(scored) > 1:
                top = max(scored, key=lambda t: t.throughput_per_s)
                out += [f"- {model}, best configuration measured across its formats and precisions: {top.deployment} "
                        f"({top.throughput_per_s:.1f} inf/s within the bound; each deployment tuned in "
                        f"its own test, one after another)", ""]
    answers = [p for p in run.points if p.load_kind == "result"]
    if answers:
        out += ["## Most load within the latency bound", ""] + [
            f"- {p.deployment}: {p.search.answer}" for p in answers] + [""]
    for scenario in ("offline", "online"):
        measured = [p for p in run.points if p.scenario == scenario and p.load_kind in ("sweep", "rate")]
        if not measured:
            continue
        table = []
        probed = any(p.under_load for p in measured)
        for deployment, mine in group_by(measured, lambda p: p.series).items():
            ok = [p for p in mine if p.status == "OK" and p.throughput_per_s is not None]
            best = max(ok, key=lambda p: p.throughput_per_s, default=None)
            table.append([deployment, format_number("Inferences/Second", best.throughput_per_s) if best else "-",
                          best.label if best else "-",
                          format_number("p99 latency", best.latency_ms["p99 latency"]) if best else "-",
                          f"{len(ok)}/{len(mine)}"])
            if probed:
                verdicts = [f"{'passed' if p.under_load.passed else 'FAILED'} at concurrency "
                            f"{p.under_load.concurrency}" for p in mine if p.under_load]
                table[-1].append("; ".join(verdicts) or "-")
        headers = ["deployment", "Inferences/Second", "at", "p99 latency (ms)", "rows OK"]
        out += [f"## {scenario.capitalize()}: best throughput per deployment", "",
                pipe_table(headers + (["accuracy under load"] if probed else []), table, align="left"), ""]
    missed = not_measured_lines(run.rows)
    if missed:  # no valid figures, nothing answered wrong: skipped by the scenario tests unless --strict-stability
        out += ["## Not measured", "", "Every request of these points was answered, but they have no valid figures "
                "(their rows say why); the run fails on them only with --strict-stability or --perf-gate.", ""]
        out += [f"- {line}" for line in missed] + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def render_crosscheck(points: Sequence[CrossPoint]) -> str:
    """perf_analyzer side by side with the suite's engine (the run's :func:`tritonsuite.judge.crosscheck.cross_points`):
    per point both generators' throughput, p50 and p99, the ratios perf_analyzer / suite, the server-side parts that
    explain a gap (Server Queue, Server Compute Infer per request), and both rows' statuses."""
    out = ["# perf_analyzer side by side with the suite's engine", ""]
    if not points:
        return "\n".join(out + [("No point was measured by both load generators (run with "
                                 "`--loadgen suite,perf_analyzer`)."), ""])
    out += [(f"{len(points)} points measured by both load generators on the same server; ratio = perf_analyzer / "
             "suite. Server Queue and Server Compute Infer (ms per request, from Triton's statistics) say whether the "
             "server did the same work for both: on the same deployment, another arrival pattern makes the dynamic "
             "batcher form other batches."), ""]

    def num(column: str, value: float | None) -> str:
        return format_number(column, value) if value is not None else "-"

    def ratio(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "-"

    table = []
    for p in points:
        s, a = p.suite, p.perf_analyzer
        table.append([p.scenario, p.deployment, num("Batch", p.batch), num("Concurrency", p.concurrency),
                      num("Inferences/Second", p.figure(s, "Inferences/Second")),
                      num("Inferences/Second", p.figure(a, "Inferences/Second")), ratio(p.ratio("Inferences/Second")),
                      num("p50 latency", p.figure(s, "p50 latency")), num("p50 latency", p.figure(a, "p50 latency")),
                      ratio(p.ratio("p50 latency")),
                      num("p99 latency", p.figure(s, "p99 latency")), num("p99 latency", p.figure(a, "p99 latency")),
                      ratio(p.ratio("p99 latency")),
                      (f"{num('Server Queue', p.figure(s, 'Server Queue'))} / "
                       f"{num('Server Queue', p.figure(a, 'Server Queue'))}"),
                      (f"{num('Server Compute Infer', p.figure(s, 'Server Compute Infer'))} / "
                       f"{num('Server Compute Infer', p.figure(a, 'Server Compute Infer'))}"),
                      f"{s.status} / {a.status}"])
    out += [pipe_table(["Scenario", "Deployment", "Batch", "Concurrency", "inf/s suite", "inf/s perf_analyzer",
                         "ratio", "p50 suite (ms)", "p50 perf_analyzer (ms)", "ratio", "p99 suite (ms)",
                         "p99 perf_analyzer (ms)", "ratio", "Server Queue (ms) suite / pa",
                         "Server Compute Infer (ms) suite / pa", "Status suite / pa"], table, align="right"), ""]
    problems = []
    for p in points:
        for who, row in (("suite", p.suite), ("perf_analyzer", p.perf_analyzer)):
            if row.status != "OK":
                problems.append(f"- {p.deployment} {Point.of(row).label}, {who}: {row.status}: "
                                + "; ".join(row.reasons))
    if problems:
        out += ["Rows that are not valid measurements (their ratios are not a comparison):", ""] + problems + [""]
    probed = [p for p in points if Point.of(p.suite).under_load]
    if probed:
        out += [("Not like for like: the suite's row carried accuracy probes (a share of its requests were the "
                 "model's accuracy samples instead of the load request; perf_analyzer sends the load request only) at "
                 + ", ".join(f"{p.deployment} {Point.of(p.suite).label}" for p in probed)
                 + ". `--load-probe-share 0` measures those points without probes."), ""]
    commands = distinct(Point.of(p.perf_analyzer).method.command for p in points)
    if commands:
        out += [("perf_analyzer's command for the first point (the others differ in -m, -b, --concurrency-range, "
                 "--shared-memory and the temporary files):"), "", f"    {commands[0]}", ""]
    return "\n".join(out).rstrip("\n") + "\n"
