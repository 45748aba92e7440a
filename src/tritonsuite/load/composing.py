"""perf_analyzer's figures per composing model of an ensemble or a BLS model (``--bls-composing-models``), read from
its console (perf_analyzer 2.51 prints them under "Composing models:" for every measured point and writes none of
them to ``-f``'s CSV, perf_analyzer#296),
in the form of the engine's ``measurement["composing"]`` (:func:`tritonsuite.load.windows.composing_columns`), so
the two load generators' per-step rows sit side by side.

A composing model's block::

    pool, version: 1
        Successful request count: 5107
        Avg request latency: 444 usec (overhead 1 usec + queue 38 usec + compute input 8 usec + compute infer
        343 usec + compute output 54 usec)

A nested ensemble's own block has ``compute N usec`` alone (it has no compute of its own to split); a model printed
twice (a step of two ensembles) is taken once. Only the last point's blocks count (one point per run here).
"""
from __future__ import annotations

import re

_MODEL = re.compile(r"^\s+([^\s,][^,]*), version: (\S+)\s*$")
_COUNT = re.compile(r"Successful request count: (\d+)")
_PART = re.compile(r"(queue|compute input|compute infer|compute output) (\d+) usec")
_COLUMNS = {"queue": "Server Queue", "compute input": "Server Compute Input", "compute infer": "Server Compute Infer",
            "compute output": "Server Compute Output"}


def parse_composing(output: str) -> dict[str, dict[str, float]]:
    """{composing model: {"requests": n, "per request": n / the deployment's, "Server Queue": ms, ...}} of the last
    point perf_analyzer printed."""
    last = output.rsplit("Request concurrency:", 1)[-1]
    head, _, last = last.partition("Composing models:")
    outer = _COUNT.findall(head.rpartition("Server:")[2])
    found: dict[str, dict[str, float]] = {}
    current = None
    for line in last.splitlines():
        model = _MODEL.match(line)
        if model:
            current = None if model.group(1) in found else model.group(1)
            if current:
                found[current] = {}
            continue
        if current is None:
            continue
        count = _COUNT.search(line)
        if count:
            found[current]["requests"] = int(count.group(1))
            found[current]["per request"] = round(int(count.group(1)) / int(outer[0]), 3) if outer else None
        if "Avg request latency" in line:
            for part, usec in _PART.findall(line):
                found[current][_COLUMNS[part]] = int(usec) / 1000.0
    return found
