"""How the sequence checks (:mod:`tritonsuite.judge.conformance.sequence`, its backlog part, ``state``) reach a
sequence model: the driver's transport, one connection per sequence, the ids and flags a part chooses,
Triton's own refusals, and the rule both the backlog and the idle parts judge a release by (:func:`stalls`)."""
from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Iterable

from tritonsuite.judge.conformance.result import Target
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import first_line, flagged, prepare
from tritonsuite.load.interrupt import within

#: Triton's refusals (sequence_batch_scheduler.cc, r24.10), as the server words them
NO_CORRID = "must specify a non-zero or non-empty correlation ID"
NO_START = "must specify the START flag on the first request of the sequence"
BOUND_S = 20.0  # any one wait of a part
#: sequence ids this process has not used (below 2**31: a CORRID of TYPE_INT32 takes them)
SEQUENCE_IDS = itertools.count(1_000_000_000 + (os.getpid() % 1000) * 100_000)


class Wire:
    """The driver's transport, one connection per sequence, the deployment's reference request with the ids and
    flags a part chooses."""

    def __init__(self, target: Target, timeout_s: float = BOUND_S):
        from tritonsuite.load.http import HttpTransport
        from tritonsuite.load.point import LoadPoint

        driver, self.timeout_s = target.driver, timeout_s
        point, _ = driver.point(LoadPoint(batch_size=1, concurrency=1))
        found = driver.transport(target.server, timeout_s, point)
        self.grpc = found is not None
        host, port = target.server.http_url.rsplit(":", 1)
        self.transport = found or HttpTransport.of(target.server)
        self.request = prepare(host, target.name, batch_first(target.request(1), target.description.batching),
                               target.output_names, self.grpc, driver.batched)

    async def open(self):
        return await self.transport.open()

    async def send(self, conn, sid: int, start: bool, end: bool) -> tuple[float, float, str]:
        """(sent, answered, error: "" when answered)."""
        t0 = time.monotonic()
        try:
            await within(self.transport.exchange(conn, flagged(self.request, self.grpc, (sid, start, end))),
                                   self.timeout_s)
            return t0, time.monotonic(), ""
        except asyncio.TimeoutError:
            return t0, time.monotonic(), f"no answer within {self.timeout_s:g} s"
        except Exception as exc:  # noqa: BLE001 - the server's refusal, kept
            return t0, time.monotonic(), first_line(exc)


def stalls(spans: Iterable[float], idle_us: int) -> tuple[int, str]:
    """How many of a sequence's released or cut ``spans`` (s, from one of its requests' send to the next one's answer)
    outlasted ``max_sequence_idle_microseconds``, and the longest, said ("" where none). Within such a span the server
    cannot have seen the sequence idle that long, so a release then is the server's; over it (a host that stalled the
    client or the server) the server may have released it rightly."""
    over = [span for span in spans if span > idle_us / 1e6]
    return len(over), (f"{max(over):g} s from a request's send to the next one's answer, over "
                       f"max_sequence_idle_microseconds {idle_us} (the host stalled)" if over else "")
