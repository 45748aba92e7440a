"""Conformance pages: ``reports/conformance/<deployment>.md``, one per deployment, from its checks
(:class:`tritonsuite.report.records.Check`, the ``conformance`` rows of :mod:`tritonsuite.judge.conformance`): a
table of check, what the configuration declares, what the live server showed and the verdict with its reason, then
the evidence that needs more than a cell (the batch-size histogram, the latency around a reload, each refused
request)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from tritonsuite.core.access import redact
from tritonsuite.core.store import safe_component
from tritonsuite.report.common import table_cell
from tritonsuite.report.records import Check

VERDICT_WORDS = {"pass": "pass", "fail": "**FAIL**", "skipped": "skipped"}


def render_conformance(deployment: str, checks: Sequence[Check]) -> str:
    out = [f"# Conformance of {deployment}", ""]
    verdicts = [c.judged for c in checks]
    out += [f"{len(checks)} checks on the live server: {verdicts.count('pass')} passed, {verdicts.count('fail')} "
            f"failed, {verdicts.count('skipped')} skipped. Declared: what the deployment's config.pbtxt says; "
            "observed: what the server showed.", ""]
    out += ["| check | declared | observed | verdict | reason | seconds |", "|---|---|---|---|---|---|"]
    for c in checks:
        out.append("| " + " | ".join(table_cell(x) for x in (
            "-" if c.check is None else c.check, c.declared, c.observed, verdict_word(c), "; ".join(c.reasons) or "-",
            c.seconds if c.seconds is not None else "-")) + " |")
    out.append("")
    out += _checklist(checks)
    for c in checks:
        evidence = c.evidence
        if not evidence:
            continue
        out += [f"## {c.check}: evidence", ""]
        hist = evidence.get("batch_stats")
        if hist:
            out += ["| batch size | executions |", "|---|---|"] + [f"| {k} | {v} |" for k, v in hist.items()] + [""]
        for probe in evidence.get("probes", []):
            out.append(f"- {probe['protocol']} {probe['problem']}: {probe['code']} in {probe['seconds']} s, "
                       f"\"{table_cell(probe['message'])}\"; then {probe['after']}")
        if evidence.get("probes"):
            out.append("")
        rest = {k: v for k, v in evidence.items() if k not in ("batch_stats", "probes")}
        if rest:
            out += ["```json", json.dumps(rest, indent=1, default=str), "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def verdict_word(check: Check) -> str:
    return VERDICT_WORDS.get(check.verdict or "", check.status)


def _checklist(checks: Sequence[Check]) -> list[str]:
    """Every field the deployment declares, beside the check that shows it and that check's verdict (or why no
    check can show it); then the checks that judged a default: a field the deployment leaves out."""
    from tritonsuite.judge.conformance.fields import FIELDS

    declared = next((c.declared_fields for c in checks if c.declared_fields), ())
    by_check = {c.check: c for c in checks}
    if not declared:
        return []
    out = ["## Checklist of the declared fields", "",
           f"{len(declared)} fields set by the configuration; the verdict is its check's in this run.", "",
           "| field | check | verdict | what shows it, or why nothing outside can |", "|---|---|---|---|"]
    for name in declared:
        check, why = FIELDS[name]
        found = by_check.get(check)
        verdict = verdict_word(found) if found is not None else "not run" if check else "not checkable"
        out.append(f"| `{name}` | {check or '-'} | {verdict} | {table_cell(why)} |")
    covered = {FIELDS[name][0] for name in declared}
    defaults = [c for c in checks if c.check not in covered and any(f == c.check for f, _ in FIELDS.values())]
    if defaults:
        out += ["", "Fields left to their defaults, and the checks that judged the default:", "",
                "| check | the default | verdict | reason |", "|---|---|---|---|"]
        out += [f"| {c.check} | {table_cell(c.declared)} | {verdict_word(c)} | "
                f"{table_cell('; '.join(c.reasons) or '-')} |" for c in defaults]
    return out + [""]


def write_conformance_page(reports_dir: str | Path, deployment: str, checks: Sequence[Check]) -> Path:
    """``<reports_dir>/conformance/<deployment>.md`` from one deployment's checks."""
    page = Path(reports_dir) / "conformance" / f"{safe_component(deployment)}.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(redact(render_conformance(deployment, checks)), encoding="utf-8")
    return page


def summary_lines(conformance: Mapping[str, Sequence[Check]]) -> list[str]:
    """summary.md's conformance section: per deployment its verdicts, and each failed check's reason."""
    if not conformance:
        return []
    out = ["## Conformance", ""]
    for deployment, checks in conformance.items():
        verdicts = [c.judged for c in checks]
        out.append(f"- {deployment}: {verdicts.count('pass')} passed, {verdicts.count('fail')} failed, "
                   f"{verdicts.count('skipped')} skipped (conformance/{safe_component(deployment)}.md)")
        out += [f"  - {c.check}: {'; '.join(c.reasons)}" for c in checks if c.judged == "fail"]
    return out + [""]
