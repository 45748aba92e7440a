"""What the load side adds for the deployment kinds beyond one stateless model: the time of the models a deployment
calls over a point's measured windows (an ensemble's steps, or the models a BLS script calls: perf_analyzer's
``--bls-composing-models``; a BLS configuration does not name them), perf_analyzer's own figures of them, and
perf_analyzer's options per kind.

Triton keeps statistics per model (``/v2/models/<m>/stats``); the load generator reads each composing model's
beside the deployment's at every window boundary, so the figures here cover exactly the stable windows the row is
made of. Per composing model: the requests it served (and per request of the deployment: a BLS script's calls),
its queue and compute input / infer / output per request (ms), as the deployment's own columns. A composing model's
counters also count traffic that did not come through the deployment: the suite's run is alone on its server.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from tritonsuite.settings import STABLE_WINDOWS

PARTS = ("queue", "compute_input", "compute_infer", "compute_output")
#: the report's names of PARTS
COLUMNS = {"queue": "Server Queue", "compute_input": "Server Compute Input", "compute_infer": "Server Compute Infer",
           "compute_output": "Server Compute Output"}


def composing_summary(windows: Sequence, pool: tuple[int, int] | None, result: Mapping[str, float]) -> dict:
    """{model: {"requests", "per request", and the server columns (ms per request of that model)}} over the row's
    stable windows (as :func:`tritonsuite.load.windows.summarise` pools them)."""
    stable = windows[-STABLE_WINDOWS:] if pool is None else windows[pool[0]:pool[1]]
    outer = sum(int(w.server["success_count"]) for w in stable)
    found = {}
    for name in (stable[0].composing or {}) if stable else ():
        total = {k: sum(int((w.composing or {})[name][k]) for w in stable) for k in stable[0].composing[name]}
        count = total["success_count"]
        found[name] = {"requests": count, "per request": round(count / outer, 3) if outer else None,
                       **{COLUMNS[p]: (total[f"{p}_ns"] / count / 1e6 if count else None) for p in PARTS},
                       "failed": total["fail_count"]}
    return found


def kind_arguments(description, sequences=None) -> list[str]:
    """perf_analyzer's options for a deployment's kind, the engine's semantics spelled in its names: a sequence
    model's ``--sequence-length``, ``--sequence-length-variation`` and ``--sequence-id-range``; a decoupled model's
    ``--streaming`` (over gRPC, asynchronous); a BLS model's ``--bls-composing-models``."""
    from tritonsuite.load.sequences import SequenceSettings

    found: list[str] = []
    if description is None:
        return found
    if description.sequence:
        s = sequences or SequenceSettings()
        found += ["--sequence-length", str(s.length), "--sequence-length-variation", f"{s.variation_percent:g}",
                  "--sequence-id-range", f"{s.id_start}:{s.id_end}" if s.id_end else str(s.id_start)]
    if description.decoupled:
        found += ["--streaming"]
    if description.composing and description.python:
        found += [f"--bls-composing-models={','.join(m.name for m in description.composing)}"]
    return found


_PA_MODEL = re.compile(r"^\s+(\S+), version: (\S*)\s*$")
_PA_COUNT = re.compile(r"Successful request count: (\d+)")
_PA_PART = re.compile(r"(queue|compute input|compute infer|compute output) (\d+) usec")


def composing_from_perf_analyzer(output: str) -> dict:
    """perf_analyzer's "Composing models:" figures (its console only: perf_analyzer#296), in this module's form:
    ``{"composing": {model: {...}}}`` from its final summary, or {} when it printed none."""
    head, found_block, block = output.rpartition("Composing models:")
    if not found_block:
        return {}
    outer = _PA_COUNT.findall(head.rpartition("Server:")[2])
    outer_count = int(outer[0]) if outer else 0
    found: dict[str, dict] = {}
    current = None
    for line in block.splitlines():
        model = _PA_MODEL.match(line)
        if model:
            current = found.setdefault(model.group(1), {"version": model.group(2)})
            continue
        if current is None:
            continue
        count = _PA_COUNT.search(line)
        if count:
            current["requests"] = int(count.group(1))
            current["per request"] = round(int(count.group(1)) / outer_count, 3) if outer_count else None
        for part, usec in _PA_PART.findall(line):
            current[COLUMNS[part.replace(" ", "_")]] = int(usec) / 1000.0
        if not line.strip() and current.get("requests") is not None and "Server Queue" in current:
            current = None
    return {"composing": found} if found else {}
