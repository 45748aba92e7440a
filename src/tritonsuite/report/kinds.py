"""What a performance page adds for a sequence model: how its sequences ran. (The time of the composing models, an
ensemble's steps or a BLS model's callees, is :mod:`tritonsuite.report.steps`'s table.)"""
from __future__ import annotations

from collections.abc import Sequence

from tritonsuite.report.points import Point


def kinds_section(points: Sequence[Point]) -> list[str]:
    """Markdown lines (none when the points are not of a sequence model)."""
    out: list[str] = []
    sequences = [p for p in sorted(points, key=lambda p: p.order) if p.sequences]
    for p in sequences:
        s = p.sequences
        low, high = s.id_range
        out.append(f"- {p.label}: sequences of {s.length} requests ± {s.length_variation_percent:g}%, ids "
                   f"{low}:{high or ''}, one live sequence per slot; {s.started} started, {s.ended_at_the_end} still "
                   f"open ended when the point ended")
    return out + [""] if sequences else out
