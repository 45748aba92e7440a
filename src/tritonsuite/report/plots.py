"""Plots in the seeds' style: throughput and latency vs batch size (offline), stacked latency breakdown with
throughput vs concurrency (online), and p99 latency against throughput for the concurrency sweep, the request
rates and the latency-bound search with its answer (online). matplotlib is imported lazily, through :class:`matplotlib.figure.Figure`
rendered by the Agg canvas: no pyplot global state and no display."""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritonsuite.core.rows import LATENCY_PARTS
from tritonsuite.report.common import distinct, format_number, group_by, title_of
from tritonsuite.report.points import Point

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


def _title_of(points: Sequence[Point], scenario: str, what: str) -> str:
    name = title_of(points)
    return f"{name} {scenario}: {what}"


def _no_data(ax, text: str = "no measured values") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _latest_per(points: Sequence[Point], key) -> dict[Any, Point]:
    """The last point (rows are oldest first) for each key: a re-measured point replaces the earlier one."""
    out: dict[Any, Point] = {}
    for p in points:
        out[key(p)] = p
    return out


def _offline_series(points: Sequence[Point]):
    """{series label: sorted [(batch, point)]}; one series per deployment (per concurrency when it varies)."""
    by_dep = group_by(points, lambda p: p.series)
    series: dict[str, list[tuple[float, Point]]] = {}
    for dep, drows in by_dep.items():
        concs = distinct(p.concurrency for p in drows)
        for conc in (concs or [None]):
            crows = [p for p in drows if p.concurrency == conc] if len(concs) > 1 else drows
            latest = _latest_per([p for p in crows if p.batch is not None], lambda p: p.batch)
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


def plot_offline(points: Sequence[Point], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``throughput_vs_batch.png`` and ``latency_vs_batch.png`` (p50 solid, p99 dashed) into ``out_dir``.

    One line per deployment; x is the batch size on a log2 axis ticked at the measured sizes.  Points whose row
    is not OK are drawn hollow.  Returns the written paths.
    """
    out_dir = Path(out_dir)
    series = _offline_series(points)
    colors = palette(len(series))
    any_bad = any(p.status != "OK" for pts in series.values() for _, p in pts)
    batches = [b for pts in series.values() for b, _ in pts]

    # Throughput vs batch.
    fig = new_figure(8, 5.5)
    ax = fig.add_subplot()
    ax.set_title(_title_of(points, "offline", "throughput vs batch size"))
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
    ax.set_title(_title_of(points, "offline", "latency vs batch size (p50 solid, p99 dashed)"))
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
    """(batch sizes, values, row is OK) of one column over a deployment's (batch, point) points."""
    xs, ys, oks = [], [], []
    for b, p in pts:
        y = p.figure(column)
        if y is not None:
            xs.append(b), ys.append(y), oks.append(p.status == "OK")
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


def plot_online(points: Sequence[Point], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``latency_vs_concurrency.png`` into ``out_dir``: one subplot per deployment.

    Stacked bars: the average latency breakdown (LATENCY_PARTS, ms) per concurrency; line with markers on a
    second y axis: throughput.  Non-OK rows get hatched bars, a hollow throughput marker and their status under
    the tick label.  Returns the written paths.
    """
    out_dir = Path(out_dir)
    throughput_plot = _plot_latency_vs_throughput(points, out_dir)
    points = [p for p in points if p.load_kind == "sweep"]  # the concurrency sweep (closed loop)
    by_dep = group_by(points, lambda p: p.series)
    n = max(1, len(by_dep))
    fig = new_figure(10, 3.6 * n + 1.4)
    fig.suptitle(_title_of(points, "online", "latency breakdown and throughput vs concurrency"))
    part_colors = palette(len(LATENCY_PARTS))
    if not by_dep:
        _no_data(fig.add_subplot())
        return [save_figure(fig, out_dir / "latency_vs_concurrency.png"), throughput_plot]

    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    legend_handles: dict[str, Any] = {}
    any_bad = False
    for ax, (dep, drows) in zip(axes, by_dep.items()):
        batches = distinct(p.batch for p in drows)
        latest = _latest_per([p for p in drows if p.concurrency is not None], lambda p: (p.batch, p.concurrency))
        shown = sorted(latest.values(), key=lambda p: p.order)
        ax.set_title(dep if len(batches) != 1 else f"{dep} (batch {format_number('Batch', batches[0])})",
                     fontsize=10)
        if not shown:
            _no_data(ax)
            continue
        xs = list(range(len(shown)))
        oks = [p.status == "OK" for p in shown]
        any_bad = any_bad or not all(oks)
        bottom = [0.0] * len(shown)
        for part, color in zip(LATENCY_PARTS, part_colors):
            heights = [p.latency_ms[part] if p.latency_ms[part] is not None else 0.0 for p in shown]
            bars = ax.bar(xs, heights, bottom=bottom, width=0.6, color=color, label=part, edgecolor="white",
                          linewidth=0.5)
            for bar, ok in zip(bars, oks):
                if not ok:
                    bar.set_hatch("//")
            legend_handles.setdefault(part, bars)
            bottom = [b + h for b, h in zip(bottom, heights)]
        labels = []
        for p, ok in zip(shown, oks):
            lbl = format_number("Concurrency", p.concurrency)
            if len(batches) > 1:
                lbl += f"\nbatch {format_number('Batch', p.batch)}"
            if not ok:
                lbl += f"\n{p.status}"
            labels.append(lbl)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels)
        ax.set_xlim(-0.6, len(shown) - 0.4)
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("average latency (ms)")
        top = max(bottom) if bottom else 0.0
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        ax.grid(True, axis="y", alpha=0.3)

        ax2 = ax.twinx()
        all_ty: list[float] = []
        for batch in distinct(p.batch for p in shown) or [None]:
            # one line per batch size: a sweep over concurrency is not connected across batch sizes
            tx, ty, tok = [], [], []
            for x, p, ok in zip(xs, shown, oks):
                y = p.throughput_per_s
                if y is not None and (batch is None or p.batch == batch):
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


def _plot_latency_vs_throughput(points: Sequence[Point], out_dir: Path) -> Path:
    """``latency_vs_throughput.png``: per deployment, p99 latency against throughput for the concurrency sweep
    (closed loop, labelled with the concurrency) and the request rates (open loop), the search's points (grey),
    its answer (a star) and the bound (a dotted line, when the bound is on p99)."""
    by_dep = group_by(points, lambda p: p.series)
    n = max(1, len(by_dep))
    fig = new_figure(8, 3.4 * n + 1.0)
    fig.suptitle(_title_of(points, "online", "p99 latency vs throughput"))
    if not by_dep:
        _no_data(fig.add_subplot())
        return save_figure(fig, out_dir / "latency_vs_throughput.png")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]

    def xy(selected):
        pts = [(p.throughput_per_s, p.latency_ms["p99 latency"], p) for p in selected]
        return [(x, y, p) for x, y, p in pts if x is not None and y is not None]

    for ax, (dep, drows) in zip(axes, by_dep.items()):
        ax.set_title(dep, fontsize=10)
        plotted = False
        sweep = sorted(xy(p for p in drows if p.load_kind == "sweep"), key=lambda t: t[2].order)
        if sweep:
            _plot_marked(ax, [t[0] for t in sweep], [t[1] for t in sweep], [t[2].status == "OK" for t in sweep],
                         "C0", "-", "o", "concurrency sweep")
            for x, y, p in sweep:
                ax.annotate(format_number("Concurrency", p.concurrency), (x, y), fontsize=7,
                            textcoords="offset points", xytext=(4, 4))
            plotted = True
        rates = sorted(xy(p for p in drows if p.load_kind == "rate"), key=lambda t: t[2].request_rate_per_s)
        if rates:
            _plot_marked(ax, [t[0] for t in rates], [t[1] for t in rates], [t[2].status == "OK" for t in rates],
                         "C1", "--", "s", "request rates")
            plotted = True
        evidence = xy(p for p in drows if p.load_kind == "evidence")
        if evidence:
            ax.plot([p[0] for p in evidence], [p[1] for p in evidence], linestyle="none", marker="x", color="0.55",
                    label="search points")
            plotted = True
        for x, y, p in xy(p for p in drows if p.load_kind == "result" and p.search.max is not None):
            # the answer in the colour of the series it searched, labelled as the report's answer line says it
            search = p.search
            headline = str(search.answer or "").partition(" (")[0]
            ax.plot([x], [y], linestyle="none", marker="*", markersize=16, markeredgecolor="black",
                    color="C1" if search.kind == "request_rate" else "C0",
                    label=headline or f"max {search.kind} at {search.bound}")
        bounds = distinct(p.search.bound for p in drows if p.search)
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


