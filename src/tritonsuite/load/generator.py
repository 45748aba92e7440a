"""The asyncio load generator of one point: closed loop (``concurrency`` connections, one request in flight each) or
open loop (sends on a seeded arrival schedule whatever the responses do), with accuracy probes in place of a seeded
share of the requests, a warm-up, then contiguous windows until the last ones agree (lengthening on a busy host)."""
from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Callable, Sequence

import numpy as np

from tritonsuite.core.settings import STABLE_WINDOWS, MeasurementSettings
from tritonsuite.load.hostload import HostCpu, other_cpu_percent
from tritonsuite.load.http import Connection, HttpTransport, PreparedRequest, model_path
from tritonsuite.load.interrupt import within
from tritonsuite.load.metered import metered
from tritonsuite.load.point import Hang, LoadPoint, MeasurementError, Silence, arrival_gaps
from tritonsuite.load.point import Progress, ProgressLine
from tritonsuite.load.windows import (COUNT_WAIT_S, Window, delta, progress_line, snapshot, stability,
                                      wants_more_samples)
from tritonsuite.server import TritonServer


#: Called after each window with the windows so far; a reason ends the point there (e.g. clearly over a latency
#: bound).
StopEarly = Callable[[Sequence["Window"]], "str | None"]

class LoadGenerator:
    def __init__(self, server: TritonServer, model: str, request: PreparedRequest, point: LoadPoint,
                 settings: MeasurementSettings, stop_early: StopEarly | None = None,
                 probes: Sequence[PreparedRequest] = (), probe_share: float = 0.0, probe_seed: int = 0,
                 transport=None, on_progress: Progress | None = None, sequences=None,
                 composing: Sequence[str] = ()):
        host, port = server.http_url.rsplit(":", 1)
        self.host, self.port = host, int(port)
        # how requests travel (HTTP, or load.grpc's gRPC); statistics are read over HTTP either way
        self.transport = transport if transport is not None else HttpTransport.of(server)
        self.server, self.model, self.request = server, model, request
        self.point, self.settings, self.stop_early = point, settings, stop_early
        self.on_progress = on_progress
        # a sequence model's request pattern (load.kinds.sequence.Sequences): each slot's requests continue its sequence
        self.sequences = sequences
        # models the deployment calls (an ensemble's steps, a BLS model's callees): their statistics per window too
        self.composing = tuple(composing)
        self.closing_sent = 0  # requests that ended the sequences still open when the point ended
        self.timings: list = []  # a streaming transport's per-request response timings, beside self.samples
        self.concurrency = 1 if point.open_loop else point.concurrency  # requests the warm-up waits for
        # accuracy probes: each request is, with probability probe_share (one seeded draw per request sent), the
        # next probe of a seeded permutation instead of the load request; its decoded outputs are kept
        self.probes, self.probe_share = list(probes), probe_share if probes else 0.0
        self._probe_rng = np.random.default_rng(probe_seed)
        self._probe_order = self._probe_rng.permutation(len(self.probes)) if self.probes else np.zeros(0, np.int64)
        self._probes_sent = 0
        self.probe_responses: list[tuple[int, dict[str, np.ndarray]]] = []
        self.host_cpu = HostCpu(server.process_ids)
        self.samples: list[tuple[float, float, float, float]] = []
        self.max_outstanding = 0  # open loop: the most requests in flight at once
        self.stopped_early: str | None = None
        # (start, stop) of the stable windows the row is made of, once stable; longer than STABLE_WINDOWS when the
        # point measured on for its percentiles' samples or an undecided late-send verdict (settings.sample_windows)
        self.pool: tuple[int, int] | None = None
        self.finished_at: list[float] = []  # perf_counter at each sample's completion
        self.completed = 0
        self.wake_at = 0  # ``progress`` is set once ``completed`` reaches it: the window loop's count, not each response
        self.stop = False
        self.progress = asyncio.Event()
        self.metered = False  # in a mix (run_together with others): each task's CPU counted to its generator
        self.cpu_s = 0.0  # thread CPU seconds of this generator's own task steps, when metered
        self._cpu_mark = 0.0

    async def _worker(self, slot: int = 0) -> None:
        conn = await self.transport.open()
        try:
            while not self.stop:
                await self._send(conn, slot=slot)
            await self._close_sequences(conn, slot)
        finally:
            conn.close()

    def _next_request(self) -> tuple[int | None, PreparedRequest]:
        """The request to send next: (None, the load request), or (probe index, that probe) for a share of them."""
        if self.probe_share <= 0 or self._probe_rng.random() >= self.probe_share:
            return None, self.request
        probe = int(self._probe_order[self._probes_sent % len(self.probes)])
        self._probes_sent += 1
        return probe, self.probes[probe]

    def _completed(self, t_scheduled: float, t_sent: float, t_written: float, t_head: float, timing=None) -> None:
        t_done = time.perf_counter()
        if timing is not None:
            self.timings.append(timing)
        self.samples.append((t_done - t_scheduled, t_written - t_scheduled, t_done - t_head, t_sent - t_scheduled))
        self.finished_at.append(t_done)
        self.completed += 1
        if self.completed >= self.wake_at:
            self.progress.set()

    async def _send(self, conn: Connection, t_scheduled: float | None = None, slot: int | None = None) -> None:
        """One request on an idle connection: the load request, or an accuracy probe in its place (a sequence
        model: the next request of the slot's sequence; open loop, of a sequence with none in flight). Closed loop,
        its latency runs from the send; open loop, from ``t_scheduled``. A pattern's load takes probes where its
        kind lets them ride (a ragged one's: each probe as given, in place of a request cut to another length)."""
        probe, request = self._next_request()
        patterned = self.sequences is not None and probe is None
        if patterned:
            slot = self.sequences.free_slot() if slot is None else slot
            request = self.sequences.request(slot)
        t_sent = time.perf_counter()
        t_written, t_head, decoded, *timing = await self.transport.exchange(conn, request)
        if patterned:
            self.sequences.done(slot)
        if decoded is not None and probe is not None:
            self.probe_responses.append((probe, decoded))
        self._completed(t_sent if t_scheduled is None else t_scheduled, t_sent, t_written, t_head,
                        timing[0] if timing else None)

    async def _scheduler(self) -> None:
        """Open loop: send each request at its scheduled time on an idle connection (a new one when none is idle),
        whatever the responses do; at ``max_outstanding`` in flight, the next send waits (and is late)."""
        point, cap = self.point, self.settings.max_outstanding
        idle: list = []
        opened: list = []
        in_flight: set[asyncio.Task] = set()
        slots = asyncio.Semaphore(cap)
        failures: list[BaseException] = []
        outstanding = 0

        async def one(conn, t_scheduled: float) -> None:
            nonlocal outstanding
            try:
                await self._send(conn, t_scheduled)
                idle.append(conn)
            except BaseException as exc:  # noqa: BLE001 - handed to the scheduler, which raises it
                failures.append(exc)
                conn.close()
            finally:
                outstanding -= 1
                slots.release()

        t_next = time.perf_counter()
        try:
            for gap in arrival_gaps(point.request_rate, point.distribution, point.seed):
                delay = t_next - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if failures:
                    raise failures[0]
                if self.stop:
                    break
                if slots.locked():  # at the cap: wait for a response (bounded: each request has a timeout)
                    await within(slots.acquire(), self.settings.timeout_s)
                else:
                    await slots.acquire()
                if idle:
                    conn = idle.pop()
                else:
                    conn = await self.transport.open()
                    opened.append(conn)
                task = self._task(one(conn, t_next))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                outstanding += 1
                self.max_outstanding = max(self.max_outstanding, outstanding)
                t_next += gap
            if in_flight:  # the requests already sent finish (each bounded by the request timeout)
                await within(asyncio.gather(*in_flight), self.settings.timeout_s)
            if failures:
                raise failures[0]
        except asyncio.TimeoutError:
            raise Hang(f"no response within {self.settings.timeout_s:.0f} s") from None
        finally:
            for task in in_flight:
                task.cancel()
            for conn in opened:
                conn.close()

    def _task(self, coro) -> asyncio.Task:
        """A task of this generator's traffic; in a mix, the CPU time of its steps is counted to it (``cpu_s``)."""
        return asyncio.create_task(metered(coro, self) if self.metered else coro)

    def _window(self, index: int, factor: int, start: float, end: float | None, stats: dict, previous: dict,
                cpu: float, other: float) -> tuple[Window, int]:
        """Cut this generator's next window from sample ``index``: count-based (its own end) or ending at ``end``."""
        if self.settings.window_requests > 0 and end is None:
            stop = index + self.settings.window_requests * factor
            end = self.finished_at[stop - 1]
        else:
            stop = len(self.samples)
        samples = np.asarray(self.samples[index:stop], dtype=np.float64).reshape(-1, 4)
        own, self._cpu_mark = self.cpu_s - self._cpu_mark, self.cpu_s
        timings = self.timings[index:stop] if self.timings else None  # a streaming transport's, per sample
        return Window(start, end, samples, delta(stats, previous), cpu, other, factor, own, timings), stop

    async def _close_sequences(self, conn=None, slot: int | None = None) -> None:
        """A sequence model: end the sequences still open, or ``slot``'s as its worker stops (each one unmeasured
        request with ``sequence_end``): one waiting in the backlog gets a slot only when a slot's sequence ends."""
        closing = self.sequences.closing(slot) if self.sequences is not None else []
        own = conn is None and bool(closing)
        conn = await self.transport.open() if own else conn
        try:
            for request in closing:
                await within(self.transport.exchange(conn, request), self.settings.timeout_s)
                self.closing_sent += 1
                self.completed += 1
        finally:
            if own:
                conn.close()

    async def _wait_window_until(self, until: float) -> None:
        self.progress.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await within(self.progress.wait(), max(0.001, until - time.perf_counter()))

    def _wants_more(self, windows: Sequence[Window]) -> bool:
        start, stop = self.pool
        left = min(self.settings.sample_windows - (stop - start - STABLE_WINDOWS),
                   self.settings.max_trials - len(windows))
        undecided = getattr(self.stop_early, "undecided", None)  # a search's bound that its count test cannot
        if undecided is not None and left > 0 and undecided(windows[start:stop]):  # decide yet: lengthen the point
            return True
        return wants_more_samples(windows[start:stop], self.point, self.settings, left)

    def _tell(self, windows: Sequence[Window], note: str | None = None) -> None:
        if self.on_progress is not None:
            line = progress_line(windows, self.settings, self.point.open_loop, self.stopped_early)
            self.on_progress(ProgressLine(f"{line}; {note}" if note else line, len(windows), self.settings.max_trials))

    def _stable(self, windows: Sequence[Window]) -> bool:
        return stability(windows, self.settings.stability_percentage, self.point.open_loop)[0]


async def run_together(generators: Sequence[LoadGenerator]) -> list[tuple[list[Window], dict[str, int], int]]:
    """The one window loop, for one generator or several started together on one server (a mix,
    :mod:`tritonsuite.load.mix`): warm-up until every generator has answers on all its connections, then windows
    cut at the same instants for all, until the last STABLE_WINDOWS of *every* generator agree (the stability rules
    apply to the whole mix), lengthening on a busy host. The first generator's ``stop_early`` and progress speak for
    the point. Returns each generator's (windows, statistics delta over the whole point, requests completed).

    Several generators need time-based windows (a count ends each generator's window at a different instant)."""
    lead, s = generators[0], generators[0].settings
    mixed = len(generators) > 1
    if mixed and s.window_requests > 0:
        raise ValueError("measuring several deployments together needs time-based windows (window_ms), not "
                         f"window_requests={s.window_requests}")
    event = lead.progress
    for gen in generators:
        gen.progress, gen.metered = event, mixed  # one wake-up for all: any completion re-checks every target
    control = await Connection(lead.host, lead.port, lead.server.access).open()
    # an ensemble's: every model's statistics in one read, so the steps' windows are the ensemble's
    paths = ["/v2/models/stats" if gen.composing else f"{model_path(gen.model)}/stats" for gen in generators]
    workers, watcher = [], None  # the load's tasks, and the future gathering them (read at the end, whatever happened)

    async def snapshots() -> list[dict[str, int]]:
        return [snapshot(await control.get_json(p), gen.model, gen.composing) for p, gen in zip(paths, generators)]

    async def settled(done=lambda now: True, wait_s: float = COUNT_WAIT_S) -> list[dict[str, int]]:
        """:func:`snapshots` once ``done`` holds and the next read agrees, or the last read after ``wait_s``:
        Triton counts a request a moment after its response is sent (on a busy host, more than a moment)."""
        deadline, last = time.perf_counter() + wait_s, await snapshots()
        while time.perf_counter() < deadline:
            await asyncio.sleep(0.03)
            now = await snapshots()
            if now == last and done(now):
                break
            last = now
        return last

    try:
        begin = await settled(wait_s=1.0)  # what ran before this point counted (still moving: another client)
        for gen in generators:
            workers += ([gen._task(gen._scheduler())] if gen.point.open_loop else
                        [gen._task(gen._worker(slot)) for slot in range(gen.point.concurrency)])
        watcher = asyncio.gather(*workers)
        windows: list[list[Window]] = [[] for _ in generators]

        async def guarded(coro):
            done, _ = await asyncio.wait([asyncio.ensure_future(coro), watcher], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is watcher:
                    watcher.result()  # a worker failed: raise its error
                    raise MeasurementError("all load-generator workers stopped")
            return next(iter(done)).result()

        def waiting_for(gens) -> int:
            return sum(g.concurrency for g in gens)

        # warm-up: a time span and at least one completed request per connection
        if lead.on_progress is not None:
            n = waiting_for(generators)
            lead.on_progress(ProgressLine(f"warming up: {s.warmup_ms:g} ms and a response on each of {n} connection"
                                          f"{'s' if n > 1 else ''}" +
                                          (f" of {len(generators)} deployments" if mixed else ""), 0, s.max_trials))
        warmup_end = time.perf_counter() + s.warmup_ms / 1000.0
        # no completion at all for longer than any request's own bound (a request waits behind the others in
        # flight): a hang, where the transport has no bound of its own to say so first (HTTP)
        silence = Silence(generators, s.timeout_s * max(g.concurrency for g in generators) + 1.0, " (warming up)")
        while time.perf_counter() < warmup_end or any(g.completed < g.concurrency for g in generators):
            for gen in generators:  # woken by a generator's first response on each connection, not by each one
                gen.wake_at = gen.concurrency if gen.completed < gen.concurrency else math.inf
            await guarded(lead._wait_window_until(min(warmup_end, time.perf_counter() + 0.5)))
            silence.check()
        previous = await guarded(snapshots())
        # windows are contiguous; a count-based one holds exactly its count and ends at its last completion
        # (more may complete before this coroutine wakes: they open the next window)
        indexes, start, factor = [len(g.samples) for g in generators], time.perf_counter(), 1
        starts = [start] * len(generators)
        host = lead.host_cpu.read()
        for gen in generators:
            gen._cpu_mark = gen.cpu_s

        def stable(member: int, lo: int) -> bool:
            return generators[member]._stable(windows[member][lo:])

        for _ in range(s.max_trials):
            cpu0 = time.process_time()
            await guarded(_wait_windows(generators, indexes, factor))
            cpu1 = time.process_time()
            end = None if mixed is False and s.window_requests > 0 else time.perf_counter()
            current = await guarded(snapshots())
            host_now = lead.host_cpu.read()
            for i, gen in enumerate(generators):
                window, indexes[i] = gen._window(indexes[i], factor, starts[i], end, current[i], previous[i],
                                                 cpu1 - cpu0, 0.0)
                window.other_cpu = other_cpu_percent(host, host_now, window.end - starts[i])
                windows[i].append(window)
                starts[i] = window.end
            previous, host, n = current, host_now, len(windows[0])
            if lead.pool is not None:  # stable already: a window measured for the samples the point needs
                if not all(stable(i, lead.pool[0]) for i in range(len(generators))):
                    lead._tell(windows[0], "that window broke the stable pool: the row keeps the pool as it was")
                    break
                pool = (lead.pool[0], n)
                for gen in generators:
                    gen.pool = pool
                more = any(g._wants_more(w) for g, w in zip(generators, windows))
                lead._tell(windows[0], f"{n - pool[0]} stable windows pooled"
                           + ("; measuring on for the samples its percentiles need" if more else ""))
                if not more:
                    break
                continue
            if n >= STABLE_WINDOWS and all(stable(i, n - STABLE_WINDOWS) for i in range(len(generators))):
                for gen in generators:
                    gen.pool = (n - STABLE_WINDOWS, n)
                more = any(g._wants_more(w) for g, w in zip(generators, windows))
                lead._tell(windows[0], "measuring on for the samples its percentiles need" if more else None)
                if not more:
                    break
                continue
            lead.stopped_early = lead.stop_early(windows[0]) if lead.stop_early is not None else None
            unsettled = [g.model for i, g in enumerate(generators) if n >= STABLE_WINDOWS
                         and not stable(i, n - STABLE_WINDOWS)] if mixed else []
            lead._tell(windows[0], f"not yet stable: {', '.join(unsettled)}" if unsettled else None)
            if lead.stopped_early:
                break
            # a busy host: lengthen the windows before giving up, after each STABLE_WINDOWS that disagreed
            if n % STABLE_WINDOWS == 0 and factor * 2 <= s.max_window_factor:
                factor *= 2
        for gen in generators:
            gen.stop = True
        await watcher  # each connection finishes its in-flight request
        for gen in generators:  # a sequence model's sequences still open are ended (unmeasured, counted)
            await gen._close_sequences()
        ends = await settled(lambda now: all(t["success_count"] + t["fail_count"] >= g.completed for t, g in
                                             zip((delta(e, b) for e, b in zip(now, begin)), generators)))
        totals = [delta(e, b) for e, b in zip(ends, begin)]
        return [(w, t, g.completed) for w, t, g in zip(windows, totals, generators)]
    finally:
        for gen in generators:
            gen.stop = True
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if watcher is not None and watcher.done() and not watcher.cancelled():
            watcher.exception()  # read: a worker's error was raised above, or the run was interrupted (SIGTERM)
        control.close()


async def _wait_windows(generators: Sequence[LoadGenerator], indexes: Sequence[int], factor: int) -> None:
    """Until every generator's window is done: the window's time (``window_ms`` x factor) and each generator's least
    count of requests (or, count-based, its count). No completion at all for ``timeout_s`` is an error."""
    s, event = generators[0].settings, generators[0].progress
    deadline = time.perf_counter() + s.window_ms * factor / 1000.0 if s.window_requests <= 0 else None
    per = s.window_requests if s.window_requests > 0 else s.min_requests_per_window
    targets = [index + factor * per for index in indexes]
    silence = Silence(generators, s.timeout_s)
    while True:
        now = time.perf_counter()
        if all(g.completed >= t for g, t in zip(generators, targets)) and (deadline is None or now >= deadline):
            return
        silence.check()
        for gen, target in zip(generators, targets):  # woken when a count is reached, not by every request
            gen.wake_at = target if gen.completed < target else math.inf
        event.clear()
        timeout = max(0.001, deadline - now) if deadline is not None and now < deadline else 0.5
        with contextlib.suppress(asyncio.TimeoutError):
            await within(event.wait(), timeout)
