"""The suite's engine against perf_analyzer, point by point: throughput, p50 and p99 of both and their ratios.

Rows of one point measured by both load generators (``Row.loadgen`` ``suite`` and ``perf_analyzer``: a run with
``--loadgen suite,perf_analyzer``, or rows of several runs) are joined by scenario, deployment, batch, concurrency
and host; where a point was measured more than once by one generator, its latest row counts. The report writer puts
the table in ``reports/crosscheck.md``; a script gets the same table with :func:`cross_points` and
:func:`tritonsuite.report.pages.render_crosscheck`, or from the command line::

    tritonsuite crosscheck [REPORTS_DIR] [--run RUN_ID ...] [--out page.md]

A ratio is perf_analyzer's figure over the suite's. The server-side columns of both rows travel with the table:
where the ratio departs from 1, they say whether the server did the same work per request (on the same server, a
dynamic batcher fed with another arrival pattern forms other batches, and Server Queue and Server Compute Infer
show it).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tritonsuite.core.rows import Row

PERFORMANCE_SCENARIOS = ("offline", "online")


def _host(row: Row) -> str:
    return str(row.parameters.get("Host") or "unknown host")


@dataclass(frozen=True)
class CrossPoint:
    scenario: str
    deployment: str
    batch: int | None
    concurrency: int | None
    suite: Row
    perf_analyzer: Row

    def figure(self, row: Row, column: str) -> float | None:
        value = row.result.get(column)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def ratio(self, column: str) -> float | None:
        """perf_analyzer's figure over the suite's (None where either is missing)."""
        ours, theirs = self.figure(self.suite, column), self.figure(self.perf_analyzer, column)
        if ours is None or theirs is None or ours <= 0:
            return None
        return theirs / ours


def cross_points(rows: Iterable[Row]) -> list[CrossPoint]:
    """Every point both load generators measured (latest row of each), in scenario, deployment, batch, concurrency
    order."""
    latest: dict[tuple, dict[str, Row]] = {}
    for row in rows:
        if row.scenario not in PERFORMANCE_SCENARIOS or row.request_rate is not None or row.measurement.get("search"):
            continue  # perf_analyzer measures closed-loop points only: open-loop rates and searches are the engine's
        key = (row.scenario, row.deployment, row.batch, row.concurrency, _host(row))
        latest.setdefault(key, {})[row.loadgen] = row  # rows come oldest first
    points = [CrossPoint(k[0], k[1], k[2], k[3], by["suite"], by["perf_analyzer"])
              for k, by in latest.items() if "suite" in by and "perf_analyzer" in by]
    return sorted(points, key=lambda p: (p.scenario, p.deployment, p.batch or 0, p.concurrency or 0))
