"""What a performance page adds for a sequence model: how its sequences ran. (The time of the composing models, an
ensemble's steps or a BLS model's callees, is :mod:`tritonsuite.report.steps`'s table.)"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tritonsuite.report.common import row_label, sort_key


def _measurement(row: Mapping[str, Any]) -> Mapping[str, Any]:
    found = row.get("measurement")
    return found if isinstance(found, Mapping) else {}


def kinds_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines (none when the rows are not of a sequence model)."""
    out: list[str] = []
    sequences = [r for r in sorted(rows, key=sort_key) if _measurement(r).get("sequences")]
    for row in sequences:
        s = _measurement(row)["sequences"]
        low, high = s.get("sequence_id_range") or [1, None]
        out.append(f"- {row_label(row)}: sequences of {s.get('sequence_length')} requests ± "
                   f"{s.get('sequence_length_variation'):g}%, ids {low}:{high or ''}, one live sequence per slot; "
                   f"{s.get('sequences_started')} started, {s.get('ended_when_the_point_ended')} still open ended "
                   f"when the point ended")
    return out + [""] if sequences else out
