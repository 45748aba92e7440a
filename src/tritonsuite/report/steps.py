"""An ensemble's breakdown per step (or a BLS model's per callee): for each measured point, each composing model's requests, Server Queue and
Server Compute Input/Infer/Output per request over the point's stable windows (Triton's statistics, read with the
ensemble's in one response per window: ``measurement["composing"]`` of the row, :mod:`tritonsuite.load.windows`).
perf_analyzer prints the same figures per composing model on its console and in ``-f``'s side CSV files."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonsuite.report.common import coord, format_number, pipe_table, as_records, sort_key

STEP_COLUMNS = ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")


def composing(row: Mapping[str, Any]) -> Mapping[str, Mapping[str, float]]:
    found = (row.get("measurement") or {}).get("composing")
    return found if isinstance(found, Mapping) else {}


def steps_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The per-step table of an ensemble's or a BLS model's rows (nothing for other deployments)."""
    measured = [r for r in sorted(rows, key=sort_key) if composing(r)]
    if not measured:
        return []
    loadgens = len({r.get("loadgen") for r in measured}) > 1  # perf_analyzer's rows beside the engine's
    body = []
    for row in measured:
        for step, figures in composing(row).items():
            body.append([str(coord(row, "Batch")), str(coord(row, "Concurrency"))]
                        + [str(row.get("loadgen") or "suite")] * loadgens
                        + [step, str(int(figures.get("requests", 0)))]
                        + [format_number(c, figures.get(c)) for c in STEP_COLUMNS])
    table = pipe_table(["Batch", "Concurrency"] + ["Load generator"] * loadgens + ["Composing model", "Requests"]
                        + list(STEP_COLUMNS), body, align="right")
    return ["Per composing model (an ensemble's steps, nested ones included, or a BLS model's callees as "
            "--bls-composing-models names them; Triton's statistics over the same "
            "windows, per request of that model: a model used twice per ensemble request counts twice; its own "
            "traffic from outside the ensemble would count too):", "", table, ""]


PLOT = "steps.png"
_PART_COLORS = ("#c6dbef", "#9ecae1", "#3182bd", "#08519c")


def plot_steps(rows, out_dir) -> list[Path]:
    """``steps.png`` for an ensemble's page: per measured point of the engine (and of perf_analyzer where it
    measured the same points), a stacked bar per composing model of its Server Queue and Compute Input / Infer /
    Output per request (ms). Nothing for other deployments."""
    from tritonsuite.report.plots import new_figure, save_figure

    measured = [r for r in sorted(as_records(rows), key=sort_key) if composing(r)]
    if not measured:
        return []
    labels, stacks = [], []
    for row in measured:
        gen = "" if (row.get("loadgen") or "suite") == "suite" else " (pa)"
        for step, figures in composing(row).items():
            labels.append(f"b{coord(row, 'Batch')} c{coord(row, 'Concurrency')}{gen}\n{step}")
            stacks.append([float(figures.get(c) or 0.0) for c in STEP_COLUMNS])
    fig = new_figure(max(6.0, 0.55 * len(labels) + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    bottom = [0.0] * len(labels)
    for i, column in enumerate(STEP_COLUMNS):
        heights = [s[i] for s in stacks]
        ax.bar(range(len(labels)), heights, bottom=bottom, color=_PART_COLORS[i], label=column)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    ax.set_ylabel("ms per request of the composing model")
    ax.set_title(f"{measured[0].get('title') or measured[0].get('model')}: time per composing model")
    ax.legend(fontsize=7)
    return [save_figure(fig, Path(out_dir) / PLOT)]
