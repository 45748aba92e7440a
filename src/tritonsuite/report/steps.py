"""An ensemble's breakdown per step (or a BLS model's per callee): for each measured point, each composing model's requests, Server Queue and
Server Compute Input/Infer/Output per request over the point's stable windows (Triton's statistics, read with the
ensemble's in one response per window: ``measurement["composing"]`` of the row, :mod:`tritonsuite.load.windows`).
perf_analyzer prints the same figures per composing model on its console and in ``-f``'s side CSV files."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tritonsuite.report.common import format_number, pipe_table
from tritonsuite.report.points import Point

STEP_COLUMNS = ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")


def _measured(points: Sequence[Point]) -> list[Point]:
    return [p for p in sorted(points, key=lambda p: p.order) if p.steps]


def steps_section(points: Sequence[Point]) -> list[str]:
    """The per-step table of an ensemble's or a BLS model's points (nothing for other deployments)."""
    measured = _measured(points)
    if not measured:
        return []
    loadgens = len({p.row.loadgen for p in measured}) > 1  # perf_analyzer's rows beside the engine's
    body = []
    for p in measured:
        for step, figures in p.steps.items():
            body.append([str(p.batch), str(p.concurrency)]
                        + [str(p.row.loadgen or "suite")] * loadgens
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


def plot_steps(points: Sequence[Point], out_dir) -> list[Path]:
    """``steps.png`` for an ensemble's page: per measured point of the engine (and of perf_analyzer where it
    measured the same points), a stacked bar per composing model of its Server Queue and Compute Input / Infer /
    Output per request (ms). Nothing for other deployments."""
    from tritonsuite.report.plots import new_figure, save_figure

    measured = _measured(points)
    if not measured:
        return []
    labels, stacks = [], []
    for p in measured:
        gen = "" if (p.row.loadgen or "suite") == "suite" else " (pa)"
        for step, figures in p.steps.items():
            labels.append(f"b{p.batch} c{p.concurrency}{gen}\n{step}")
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
    ax.set_title(f"{measured[0].title}: time per composing model")
    ax.legend(fontsize=7)
    return [save_figure(fig, Path(out_dir) / PLOT)]
