"""Conformance pages: ``reports/conformance/<deployment>.md``, one per deployment, from its ``conformance`` rows
(:mod:`tritonsuite.judge.conformance`): a table of check, what the configuration declares, what the live server
showed and the verdict with its reason, then the evidence that needs more than a cell (the batch-size histogram,
the latency around a reload, each refused request)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from tritonsuite.core.access import redact
from tritonsuite.core.rows import Row
from tritonsuite.core.store import safe_component

VERDICT_WORDS = {"pass": "pass", "fail": "**FAIL**", "skipped": "skipped"}


def table_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_conformance(deployment: str, rows: Sequence[Row]) -> str:
    out = [f"# Conformance of {deployment}", ""]
    verdicts = [r.extra.get("verdict", "fail") for r in rows]
    out += [f"{len(rows)} checks on the live server: {verdicts.count('pass')} passed, {verdicts.count('fail')} "
            f"failed, {verdicts.count('skipped')} skipped. Declared: what the deployment's config.pbtxt says; "
            "observed: what the server showed.", ""]
    out += ["| check | declared | observed | verdict | reason | seconds |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| " + " | ".join(table_cell(x) for x in (
            r.extra.get("check", "-"), r.extra.get("declared", "-"), r.extra.get("observed", "-"),
            VERDICT_WORDS.get(r.extra.get("verdict", ""), r.status), "; ".join(r.reasons) or "-",
            r.seconds if r.seconds is not None else "-")) + " |")
    out.append("")
    out += _checklist(rows)
    for r in rows:
        evidence = r.extra.get("evidence") or {}
        if not evidence:
            continue
        out += [f"## {r.extra.get('check')}: evidence", ""]
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


def _checklist(rows: Sequence[Row]) -> list[str]:
    """Every field the deployment declares, beside the check that shows it and that check's verdict (or why no
    check can show it); then the checks that judged a default: a field the deployment leaves out."""
    from tritonsuite.judge.conformance.fields import FIELDS

    declared = next((r.extra["declared_fields"] for r in rows if r.extra.get("declared_fields")), [])
    by_check = {r.extra.get("check"): r for r in rows}
    if not declared:
        return []
    out = ["## Checklist of the declared fields", "",
           f"{len(declared)} fields set by the configuration; the verdict is its check's in this run.", "",
           "| field | check | verdict | what shows it, or why nothing outside can |", "|---|---|---|---|"]
    for name in declared:
        check, why = FIELDS[name]
        row = by_check.get(check)
        verdict = (VERDICT_WORDS.get(row.extra.get("verdict", ""), row.status) if row is not None
                   else "not run" if check else "not checkable")
        out.append(f"| `{name}` | {check or '-'} | {verdict} | {table_cell(why)} |")
    covered = {FIELDS[name][0] for name in declared}
    defaults = [r for r in rows if r.extra.get("check") not in covered
                and any(c == r.extra.get("check") for c, _ in FIELDS.values())]
    if defaults:
        out += ["", "Fields left to their defaults, and the checks that judged the default:", "",
                "| check | the default | verdict | reason |", "|---|---|---|---|"]
        out += [f"| {r.extra.get('check')} | {table_cell(r.extra.get('declared', '-'))} | "
                f"{VERDICT_WORDS.get(r.extra.get('verdict', ''), r.status)} | {table_cell('; '.join(r.reasons) or '-')} |"
                for r in defaults]
    return out + [""]


def write_conformance_pages(reports_dir: str | Path, rows: Sequence[Row]) -> list[Path]:
    """``<reports_dir>/conformance/<deployment>.md`` for every deployment with conformance rows."""
    by_deployment: dict[str, list[Row]] = {}
    for r in rows:
        by_deployment.setdefault(r.deployment, []).append(r)
    return [write_conformance_page(reports_dir, deployment, drows) for deployment, drows in by_deployment.items()]


def write_conformance_page(reports_dir: str | Path, deployment: str, rows: Sequence[Row]) -> Path:
    """``<reports_dir>/conformance/<deployment>.md`` from one deployment's conformance rows."""
    page = Path(reports_dir) / "conformance" / f"{safe_component(deployment)}.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(redact(render_conformance(deployment, rows)), encoding="utf-8")
    return page


def summary_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """summary.md's conformance section: per deployment its verdicts, and each failed check's reason."""
    found = [r for r in rows if r.get("scenario") == "conformance"]
    if not found:
        return []
    out = ["## Conformance", ""]
    by_deployment: dict[str, list] = {}
    for r in found:
        by_deployment.setdefault(str(r.get("deployment")), []).append(r)
    for deployment, drows in by_deployment.items():
        verdicts = [r.get("verdict", "fail") for r in drows]
        out.append(f"- {deployment}: {verdicts.count('pass')} passed, {verdicts.count('fail')} failed, "
                   f"{verdicts.count('skipped')} skipped (conformance/{safe_component(deployment)}.md)")
        out += [f"  - {r.get('check')}: {'; '.join(r.get('reasons') or [])}" for r in drows
                if r.get("verdict", "fail") == "fail"]
    return out + [""]
