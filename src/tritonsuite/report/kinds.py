"""What a performance page adds for the deployment kinds beyond one stateless model: the time of the composing
models (an ensemble's steps, a BLS model's callees) per measured point, and how a sequence model's sequences ran."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tritonsuite.report.common import _format_number, _pipe_table, _row_label, _sort_key

_PARTS = ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")


def _measurement(row: Mapping[str, Any]) -> Mapping[str, Any]:
    found = row.get("measurement")
    return found if isinstance(found, Mapping) else {}


def kinds_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines (none when the rows are of a plain model)."""
    out: list[str] = []
    composing = [r for r in sorted(rows, key=_sort_key) if _measurement(r).get("composing")]
    if composing:
        body = []
        for row in composing:
            for model, figures in _measurement(row)["composing"].items():
                body.append([_row_label(row), model, str(figures.get("requests", "-")),
                             _format_number("", figures.get("per request"))]
                            + [_format_number(p, figures.get(p)) for p in _PARTS])
        out += ["Composing models over the same measured windows (Triton's statistics per model; a BLS model's "
                "callees as --bls-composing-models names them; times in ms per request of that model):", "",
                _pipe_table(["Point", "Composing model", "Requests", "Per request"] + [f"{p} (ms)" for p in _PARTS],
                            body, align="right"), ""]
    sequences = [r for r in sorted(rows, key=_sort_key) if _measurement(r).get("sequences")]
    for row in sequences:
        s = _measurement(row)["sequences"]
        low, high = s.get("sequence_id_range") or [1, None]
        out.append(f"- {_row_label(row)}: sequences of {s.get('sequence_length')} requests ± "
                   f"{s.get('sequence_length_variation'):g}%, ids {low}:{high or ''}, one live sequence per slot; "
                   f"{s.get('sequences_started')} started, {s.get('ended_when_the_point_ended')} still open ended "
                   f"when the point ended")
    return out + [""] if sequences else out
