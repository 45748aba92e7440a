"""Plots in the seeds' style: throughput and latency vs batch size (offline), stacked latency breakdown with
throughput vs concurrency (online), and p99 latency against throughput for the concurrency sweep, the request
rates and the latency-bound search with its answer (online). matplotlib is imported lazily, through :class:`matplotlib.figure.Figure`
rendered by the Agg canvas: no pyplot global state and no display."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonsuite.core.rows import LATENCY_PARTS
from tritonsuite.report.common import (coord, distinct, format_number, group_by, is_number, load_kind,
                                       as_records, result_of, search_of, series_of, sort_key, status_of, title_of)

_OK_NOTE = "hollow markers: row not valid (status other than OK)"


def new_figure(width: float, height: float):
    from matplotlib.figure import Figure  # rendered by the Agg canvas in save_figure; no pyplot state, no display

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def save_figure(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=100)
    return path


def _title_of(rows: Sequence[Mapping[str, Any]], scenario: str, what: str) -> str:
    name = title_of(rows)
    return f"{name} {scenario}: {what}"


def _no_data(ax, text: str = "no measured values") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _latest_per(rows: Sequence[Mapping[str, Any]], key) -> dict[Any, Mapping[str, Any]]:
    """The last row (rows are oldest first) for each key: a re-measured point replaces the earlier one."""
    out: dict[Any, Mapping[str, Any]] = {}
    for row in rows:
        out[key(row)] = row
    return out


def _offline_series(rows: Sequence[Mapping[str, Any]]):
    """{series label: sorted [(batch, row)]}; one series per deployment (per concurrency when it varies)."""
    by_dep = group_by(rows, series_of)
    series: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    for dep, drows in by_dep.items():
        concs = distinct(coord(r, "Concurrency") for r in drows)
        for conc in (concs or [None]):
            crows = [r for r in drows if coord(r, "Concurrency") == conc] if len(concs) > 1 else drows
            latest = _latest_per([r for r in crows if is_number(coord(r, "Batch"))], lambda r: coord(r, "Batch"))
            label = dep if len(concs) <= 1 else f"{dep} (concurrency {conc})"
            points = sorted(((float(b), r) for b, r in latest.items()), key=lambda p: p[0])
            if points:
                series[label] = points
    return series


def _batch_axis(ax, batches: Sequence[float]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    batches = sorted(set(batches))
    if not batches:
        return
    if min(batches) > 0:
        ax.set_xscale("log", base=2)
        lo, hi = min(batches), max(batches)
        ax.set_xlim(lo / 1.4, hi * 1.4)
    ax.xaxis.set_major_locator(FixedLocator(batches))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{int(round(v))}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch size")


def _plot_marked(ax, xs, ys, oks, color, linestyle, marker, label):
    """A line with filled markers; points of non-OK rows re-drawn hollow."""
    ax.plot(xs, ys, linestyle=linestyle, color=color, marker=marker, markersize=7, markeredgewidth=1.5,
            label=label)
    bad = [(x, y) for x, y, ok in zip(xs, ys, oks) if not ok]
    if bad:
        ax.plot([b[0] for b in bad], [b[1] for b in bad], linestyle="none", marker=marker, markersize=7,
                color=color, markerfacecolor="white", markeredgewidth=1.5)


def plot_offline(rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``throughput_vs_batch.png`` and ``latency_vs_batch.png`` (p50 solid, p99 dashed) into ``out_dir``.

    One line per deployment; x is the batch size on a log2 axis ticked at the measured sizes.  Points whose row
    is not OK are drawn hollow.  Returns the written paths.
    """
    rows = as_records(rows)
    out_dir = Path(out_dir)
    series = _offline_series(rows)
    colors = palette(len(series))
    any_bad = any(status_of(r) != "OK" for pts in series.values() for _, r in pts)
    batches = [b for pts in series.values() for b, _ in pts]

    # Throughput vs batch.
    fig = new_figure(8, 5.5)
    ax = fig.add_subplot()
    ax.set_title(_title_of(rows, "offline", "throughput vs batch size"))
    plotted = False
    for (label, pts), color in zip(series.items(), colors):
        xs, ys, oks = _batch_points(pts, "Inferences/Second")
        if xs:
            _plot_marked(ax, xs, ys, oks, color, "-", "o", label)
            plotted = True
    _finish_batch_axes(fig, ax, plotted, batches, "Inferences/Second", any_bad)
    paths = [save_figure(fig, out_dir / "throughput_vs_batch.png")]

    # Latency (p50, p99) vs batch.
    fig = new_figure(8, 5.5)
    ax = fig.add_subplot()
    ax.set_title(_title_of(rows, "offline", "latency vs batch size (p50 solid, p99 dashed)"))
    plotted = False
    for (label, pts), color in zip(series.items(), colors):
        for column, style, marker in (("p50 latency", "-", "o"), ("p99 latency", "--", "s")):
            xs, ys, oks = _batch_points(pts, column)
            if xs:
                _plot_marked(ax, xs, ys, oks, color, style, marker, f"{label} {column.split()[0]}")
                plotted = True
    _finish_batch_axes(fig, ax, plotted, batches, "latency (ms)", any_bad)
    paths.append(save_figure(fig, out_dir / "latency_vs_batch.png"))
    return paths


def _batch_points(pts, column: str) -> tuple[list, list, list]:
    """(batch sizes, values, row is OK) of one column over a deployment's (batch, row) points."""
    xs, ys, oks = [], [], []
    for b, r in pts:
        y = result_of(r).get(column)
        if is_number(y):
            xs.append(b), ys.append(y), oks.append(status_of(r) == "OK")
    return xs, ys, oks


def _finish_batch_axes(fig, ax, plotted: bool, batches, ylabel: str, any_bad: bool) -> None:
    if not plotted:
        _no_data(ax)
        return
    _batch_axis(ax, batches)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax, note=_OK_NOTE if any_bad else None)


def palette(n: int) -> list:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _legend_below(fig, ax, note: str | None = None, handles=None, labels=None, ncol: int | None = None) -> None:
    """Legend under the axes (outside the data area), with an optional note line."""
    from matplotlib.lines import Line2D

    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    handles, labels = list(handles), list(labels)
    if note:
        handles.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", color="0.3"))
        labels.append(note)
    if not handles:
        return
    longest = max(len(lbl) for lbl in labels)
    if ncol is None:
        ncol = 1 if longest > 40 else 2 if longest > 22 else 3
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=ncol, frameon=False,
              fontsize=9)


def plot_online(rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``latency_vs_concurrency.png`` into ``out_dir``: one subplot per deployment.

    Stacked bars: the average latency breakdown (LATENCY_PARTS, ms) per concurrency; line with markers on a
    second y axis: throughput.  Non-OK rows get hatched bars, a hollow throughput marker and their status under
    the tick label.  Returns the written paths.
    """
    rows = as_records(rows)
    out_dir = Path(out_dir)
    throughput_plot = _plot_latency_vs_throughput(rows, out_dir)
    rows = [r for r in rows if load_kind(r) == "sweep"]  # the concurrency sweep (closed loop)
    by_dep = group_by(rows, series_of)
    n = max(1, len(by_dep))
    fig = new_figure(10, 3.6 * n + 1.4)
    fig.suptitle(_title_of(rows, "online", "latency breakdown and throughput vs concurrency"))
    part_colors = palette(len(LATENCY_PARTS))
    if not by_dep:
        _no_data(fig.add_subplot())
        return [save_figure(fig, out_dir / "latency_vs_concurrency.png"), throughput_plot]

    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    legend_handles: dict[str, Any] = {}
    any_bad = False
    for ax, (dep, drows) in zip(axes, by_dep.items()):
        batches = distinct(coord(r, "Batch") for r in drows)
        latest = _latest_per([r for r in drows if is_number(coord(r, "Concurrency"))],
                             lambda r: (coord(r, "Batch"), coord(r, "Concurrency")))
        points = sorted(latest.values(), key=sort_key)
        ax.set_title(dep if len(batches) != 1 else f"{dep} (batch {format_number('Batch', batches[0])})",
                     fontsize=10)
        if not points:
            _no_data(ax)
            continue
        xs = list(range(len(points)))
        oks = [status_of(r) == "OK" for r in points]
        any_bad = any_bad or not all(oks)
        bottom = [0.0] * len(points)
        for part, color in zip(LATENCY_PARTS, part_colors):
            heights = [(result_of(r).get(part) if is_number(result_of(r).get(part)) else 0.0) for r in points]
            bars = ax.bar(xs, heights, bottom=bottom, width=0.6, color=color, label=part, edgecolor="white",
                          linewidth=0.5)
            for bar, ok in zip(bars, oks):
                if not ok:
                    bar.set_hatch("//")
            legend_handles.setdefault(part, bars)
            bottom = [b + h for b, h in zip(bottom, heights)]
        labels = []
        for r, ok in zip(points, oks):
            lbl = format_number("Concurrency", coord(r, "Concurrency"))
            if len(batches) > 1:
                lbl += f"\nbatch {format_number('Batch', coord(r, 'Batch'))}"
            if not ok:
                lbl += f"\n{status_of(r)}"
            labels.append(lbl)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels)
        ax.set_xlim(-0.6, len(points) - 0.4)
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("average latency (ms)")
        top = max(bottom) if bottom else 0.0
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        ax.grid(True, axis="y", alpha=0.3)

        ax2 = ax.twinx()
        all_ty: list[float] = []
        for batch in distinct(coord(r, "Batch") for r in points) or [None]:
            # one line per batch size: a sweep over concurrency is not connected across batch sizes
            tx, ty, tok = [], [], []
            for x, r, ok in zip(xs, points, oks):
                y = result_of(r).get("Inferences/Second")
                if is_number(y) and (batch is None or coord(r, "Batch") == batch):
                    tx.append(x), ty.append(y), tok.append(ok)
            if tx:
                _plot_marked(ax2, tx, ty, tok, "black", "-", "o", "throughput")
                all_ty += ty
        if all_ty:
            ax2.set_ylim(0, max(all_ty) * 1.15 if max(all_ty) > 0 else 1.0)
            legend_handles.setdefault("throughput (right axis)", ax2.get_lines()[0])
        ax2.set_ylabel("throughput (inferences/s)")

    from matplotlib.patches import Patch

    handles = list(legend_handles.values())
    labels = list(legend_handles)
    if any_bad:
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//"))
        labels.append("hatched bar / hollow marker: row not valid")
    fig.legend(handles, labels, loc="outside lower center", ncol=4, frameon=False, fontsize=9)
    return [save_figure(fig, out_dir / "latency_vs_concurrency.png"), throughput_plot]


def _plot_latency_vs_throughput(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> Path:
    """``latency_vs_throughput.png``: per deployment, p99 latency against throughput for the concurrency sweep
    (closed loop, labelled with the concurrency) and the request rates (open loop), the search's points (grey),
    its answer (a star) and the bound (a dotted line, when the bound is on p99)."""
    by_dep = group_by(rows, series_of)
    n = max(1, len(by_dep))
    fig = new_figure(8, 3.4 * n + 1.0)
    fig.suptitle(_title_of(rows, "online", "p99 latency vs throughput"))
    if not by_dep:
        _no_data(fig.add_subplot())
        return save_figure(fig, out_dir / "latency_vs_throughput.png")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]

    def xy(selected):
        pts = [(result_of(r).get("Inferences/Second"), result_of(r).get("p99 latency"), r) for r in selected]
        return [(x, y, r) for x, y, r in pts if is_number(x) and is_number(y)]

    for ax, (dep, drows) in zip(axes, by_dep.items()):
        ax.set_title(dep, fontsize=10)
        plotted = False
        sweep = sorted(xy(r for r in drows if load_kind(r) == "sweep"), key=lambda p: sort_key(p[2]))
        if sweep:
            _plot_marked(ax, [p[0] for p in sweep], [p[1] for p in sweep], [status_of(p[2]) == "OK" for p in sweep],
                         "C0", "-", "o", "concurrency sweep")
            for x, y, r in sweep:
                ax.annotate(format_number("Concurrency", coord(r, "Concurrency")), (x, y), fontsize=7,
                            textcoords="offset points", xytext=(4, 4))
            plotted = True
        rates = sorted(xy(r for r in drows if load_kind(r) == "rate"), key=lambda p: p[2].get("request_rate"))
        if rates:
            _plot_marked(ax, [p[0] for p in rates], [p[1] for p in rates], [status_of(p[2]) == "OK" for p in rates],
                         "C1", "--", "s", "request rates")
            plotted = True
        evidence = xy(r for r in drows if load_kind(r) == "evidence")
        if evidence:
            ax.plot([p[0] for p in evidence], [p[1] for p in evidence], linestyle="none", marker="x", color="0.55",
                    label="search points")
            plotted = True
        for x, y, r in xy(r for r in drows if load_kind(r) == "result" and search_of(r).get("max") is not None):
            # the answer in the colour of the series it searched, labelled as the report's answer line says it
            search = search_of(r)
            headline = str(search.get("answer") or "").partition(" (")[0]
            ax.plot([x], [y], linestyle="none", marker="*", markersize=16, markeredgecolor="black",
                    color="C1" if search.get("kind") == "request_rate" else "C0",
                    label=headline or f"max {search.get('kind')} at {search.get('bound')}")
        bounds = distinct(search_of(r).get("bound") for r in drows)
        for bound in bounds:
            statistic, _, value = str(bound).partition("<=")
            if statistic.strip() == "p99":
                ax.axhline(float(value.replace("ms", "")), color="C3", linestyle=":", label=f"bound {bound}")
        if not plotted:
            _no_data(ax)
            continue
        ax.set_xlabel("throughput (inferences/s)")
        ax.set_ylabel("p99 latency (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        _legend_below(fig, ax, ncol=2)
    return save_figure(fig, out_dir / "latency_vs_throughput.png")


