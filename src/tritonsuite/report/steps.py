"""An ensemble's breakdown per step: for each measured point, each composing model's requests, Server Queue and
Server Compute Input/Infer/Output per request over the point's stable windows (Triton's statistics, read with the
ensemble's in one response per window: ``measurement["composing"]`` of the row, :mod:`tritonsuite.load.windows`).
perf_analyzer prints the same figures per composing model on its console and in ``-f``'s side CSV files."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tritonsuite.report.common import _coord, _format_number, _pipe_table, _sort_key

STEP_COLUMNS = ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")


def composing(row: Mapping[str, Any]) -> Mapping[str, Mapping[str, float]]:
    found = (row.get("measurement") or {}).get("composing")
    return found if isinstance(found, Mapping) else {}


def steps_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The per-step table of an ensemble's rows (nothing for other deployments)."""
    measured = [r for r in sorted(rows, key=_sort_key) if composing(r)]
    if not measured:
        return []
    loadgens = len({r.get("loadgen") for r in measured}) > 1  # perf_analyzer's rows beside the engine's
    body = []
    for row in measured:
        for step, figures in composing(row).items():
            body.append([str(_coord(row, "Batch")), str(_coord(row, "Concurrency"))]
                        + [str(row.get("loadgen") or "suite")] * loadgens
                        + [step, str(int(figures.get("requests", 0)))]
                        + [_format_number(c, figures.get(c)) for c in STEP_COLUMNS])
    table = _pipe_table(["Batch", "Concurrency"] + ["Load generator"] * loadgens + ["Composing model", "Requests"]
                        + list(STEP_COLUMNS), body, align="right")
    return ["Per composing model (the ensemble's steps, nested ones included; Triton's statistics over the same "
            "windows, per request of that model: a model used twice per ensemble request counts twice; its own "
            "traffic from outside the ensemble would count too):", "", table, ""]
