"""The comparison page (``reports/compare.md``, and what ``tritonsuite compare`` prints) of a
:class:`tritonsuite.judge.compare.Comparison`: what differs between the runs, then one row per joined point. The judge
decides; this module only writes the page."""
from __future__ import annotations

from tritonsuite.judge.compare import Comparison, p99_of, throughput_of


def render_comparison(comparison: Comparison, gate_percent: float | None = None) -> str:
    """A markdown page: what differs between the runs, then one row per joined point."""
    out = [f"# Performance comparison: {comparison.now_label} against {comparison.then_label}", ""]
    if comparison.differences:
        out += ["The runs differ:", ""] + [f"- {d}" for d in comparison.differences] + [""]
    counts: dict[str, int] = {}
    for p in comparison.points:
        counts[p.verdict] = counts.get(p.verdict, 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no joined points"
    gate = (f"; gate: a significant regression of more than {gate_percent:g}% fails" if gate_percent is not None
            else "; informational (no --perf-gate)")
    out += [f"{len(comparison.points)} joined points: {summary}{gate}. A verdict needs the change to exceed the "
            "minimum effect (the larger of the set minimum and both points' own window spread) and the request "
            "latencies to differ significantly (one-sided Mann-Whitney U).", ""]
    if comparison.points:
        header = ["deployment", "batch", "concurrency or rate", "inf/s then", "inf/s now", "delta", "p99 then (ms)",
                  "p99 now (ms)", "min effect", "p", "verdict"]
        out += ["| " + " | ".join(header) + " |", "|" + "|".join([":--"] * 1 + ["--:"] * 9 + [":--"]) + "|"]
        for p in sorted(comparison.points, key=lambda q: str(q.key)):
            _, deployment, batch, concurrency, _ = p.key
            if p.throughput_delta_percent is None:
                cells = [deployment, batch, concurrency, "-", "-", "-", "-", "-", "-", "-", f"{p.verdict}: {p.reason}"]
            else:
                cells = [deployment, batch, concurrency, f"{throughput_of(p.then):.1f}", f"{throughput_of(p.now):.1f}",
                         f"{p.throughput_delta_percent:+.1f}%", f"{p99_of(p.then):.2f}", f"{p99_of(p.now):.2f}",
                         f"{p.min_effect_percent:.1f}%", f"{p.p_value:.2g}", p.verdict]
            out.append("| " + " | ".join(str(c) for c in cells) + " |")
        out.append("")
    for label, keys in ((f"Only in {comparison.then_label}", comparison.only_then),
                        (f"Only in {comparison.now_label}", comparison.only_now)):
        if keys:
            out += [f"{label}:", ""] + [f"- {k[1]} batch {k[2]}, concurrency {k[3]} ({k[4]})" for k in keys] + [""]
    return "\n".join(out).rstrip("\n") + "\n"
