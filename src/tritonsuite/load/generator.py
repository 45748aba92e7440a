"""The asyncio load generator of one point: closed loop (``concurrency`` connections, one request in flight each) or
open loop (sends on a seeded arrival schedule whatever the responses do), with accuracy probes in place of a seeded
share of the requests, a warm-up, then contiguous windows until the last ones agree (lengthening on a busy host)."""
from __future__ import annotations

import asyncio
import time
from typing import Callable, Iterator, Sequence

import numpy as np

from tritonsuite.load.hostload import HostCpu, other_cpu_percent
from tritonsuite.load.http import Connection, HttpTransport, PreparedRequest, model_path
from tritonsuite.load.point import LoadPoint, MeasurementError
from tritonsuite.load.windows import Window, delta, progress_line, snapshot, stability, wants_more_samples
from tritonsuite.server import TritonServer
from tritonsuite.settings import DISTRIBUTIONS, STABLE_WINDOWS, MeasurementSettings


def arrival_gaps(rate: float, distribution: str = "poisson", seed: int = 0, chunk: int = 1024) -> Iterator[float]:
    """Seconds between scheduled sends at ``rate`` requests/s, without end: exponential (Poisson arrivals) from a
    generator seeded with ``seed``, or constant. The same arguments give the same schedule."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r}; valid choices: {', '.join(DISTRIBUTIONS)}")
    rng = np.random.default_rng(seed)
    while True:
        gaps = rng.exponential(1.0 / rate, chunk) if distribution == "poisson" else np.full(chunk, 1.0 / rate)
        yield from gaps.tolist()


#: Called after each window with the windows so far; a reason ends the point there (e.g. clearly over a latency
#: bound).
StopEarly = Callable[[Sequence["Window"]], "str | None"]

#: Told one line at a time how a point (or a search) is going and what it waits for (a terminal shows them).
Progress = Callable[[str], None]


class LoadGenerator:
    def __init__(self, server: TritonServer, model: str, request: PreparedRequest, point: LoadPoint,
                 settings: MeasurementSettings, stop_early: StopEarly | None = None,
                 probes: Sequence[PreparedRequest] = (), probe_share: float = 0.0, probe_seed: int = 0,
                 transport=None, on_progress: Progress | None = None, sequences=None,
                 composing: Sequence[str] = ()):
        host, port = server.http_url.rsplit(":", 1)
        self.host, self.port = host, int(port)
        # how requests travel (HTTP, or load.grpc's gRPC); statistics are read over HTTP either way
        self.transport = transport if transport is not None else HttpTransport(self.host, self.port)
        self.server, self.model, self.request = server, model, request
        self.point, self.settings, self.stop_early = point, settings, stop_early
        self.on_progress = on_progress
        # a sequence model's request pattern (load.sequences.Sequences): each slot's requests continue its sequence
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
        self.stop = False
        self.progress = asyncio.Event()

    async def _worker(self, slot: int = 0) -> None:
        conn = await self.transport.open()
        try:
            while not self.stop:
                await self._send(conn, slot=slot)
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
        self.progress.set()

    async def _send(self, conn: Connection, t_scheduled: float | None = None, slot: int | None = None) -> None:
        """One request on an idle connection: the load request, or an accuracy probe in its place (a sequence
        model: the next request of the slot's sequence; open loop, of a sequence with none in flight). Closed loop,
        its latency runs from the send; open loop, from ``t_scheduled``."""
        if self.sequences is not None:
            slot = self.sequences.free_slot() if slot is None else slot
            probe, request = None, self.sequences.request(slot)
        else:
            probe, request = self._next_request()
        t_sent = time.perf_counter()
        t_written, t_head, decoded, *timing = await self.transport.exchange(conn, request)
        if self.sequences is not None:
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
                    await asyncio.wait_for(slots.acquire(), self.settings.request_timeout_s)
                else:
                    await slots.acquire()
                if idle:
                    conn = idle.pop()
                else:
                    conn = await self.transport.open()
                    opened.append(conn)
                task = asyncio.create_task(one(conn, t_next))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                outstanding += 1
                self.max_outstanding = max(self.max_outstanding, outstanding)
                t_next += gap
            if in_flight:  # the requests already sent finish (each bounded by the request timeout)
                await asyncio.wait_for(asyncio.gather(*in_flight), self.settings.request_timeout_s)
            if failures:
                raise failures[0]
        except asyncio.TimeoutError:
            raise MeasurementError(f"no response within {self.settings.request_timeout_s:.0f} s") from None
        finally:
            for task in in_flight:
                task.cancel()
            for conn in opened:
                conn.close()

    async def _wait_window(self, start_count: int, factor: int = 1) -> None:
        s = self.settings
        deadline = time.perf_counter() + s.window_ms * factor / 1000.0 if s.window_requests <= 0 else None
        target = start_count + factor * (s.window_requests if s.window_requests > 0 else s.min_requests_per_window)
        last_progress = time.perf_counter()
        seen = self.completed
        while True:
            now = time.perf_counter()
            if self.completed >= target and (deadline is None or now >= deadline):
                return
            if self.completed != seen:
                seen, last_progress = self.completed, now
            elif now - last_progress > s.request_timeout_s:
                raise MeasurementError(f"no response within {s.request_timeout_s:.0f} s")
            self.progress.clear()
            timeout = max(0.001, deadline - now) if deadline is not None and now < deadline else 0.5
            try:
                await asyncio.wait_for(self.progress.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    async def run(self) -> tuple[list[Window], dict[str, int], int]:
        """Run warm-up and windows; return (windows, statistics delta over the whole point, requests completed)."""
        control = await Connection(self.host, self.port).open()
        # with composing models (an ensemble's steps, a BLS model's callees): every model's statistics in one read,
        # so their windows are the deployment's
        stats_path = "/v2/models/stats" if self.composing else f"{model_path(self.model)}/stats"

        def stats_snapshot(stats):
            return snapshot(stats, self.model, self.composing)
        workers: list[asyncio.Task] = []
        try:
            begin = stats_snapshot(await control.get_json(stats_path))
            workers = ([asyncio.create_task(self._scheduler())] if self.point.open_loop else
                       [asyncio.create_task(self._worker(slot)) for slot in range(self.point.concurrency)])
            watcher = asyncio.gather(*workers)
            windows: list[Window] = []

            async def guarded(coro):
                done, _ = await asyncio.wait([asyncio.ensure_future(coro), watcher],
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is watcher:
                        watcher.result()  # a worker failed: raise its error
                        raise MeasurementError("all load-generator workers stopped")
                return next(iter(done)).result()

            # warm-up: a time span and at least one completed request per connection
            if self.on_progress is not None:
                self.on_progress(f"warming up: {self.settings.warmup_ms:g} ms and a response on each of "
                                 f"{self.concurrency} connection{'s' if self.concurrency > 1 else ''}")
            warmup_end = time.perf_counter() + self.settings.warmup_ms / 1000.0
            while time.perf_counter() < warmup_end or self.completed < self.concurrency:
                await guarded(self._wait_window_until(min(warmup_end, time.perf_counter() + 0.5)))
            previous = stats_snapshot(await guarded(control.get_json(stats_path)))
            # windows are contiguous; a count-based one holds exactly its count and ends at its last completion
            # (more may complete before this coroutine wakes: they open the next window)
            index, start, factor = len(self.samples), time.perf_counter(), 1
            host = self.host_cpu.read()
            for _ in range(self.settings.max_trials):
                cpu0 = time.process_time()
                await guarded(self._wait_window(index, factor))
                cpu1 = time.process_time()
                if self.settings.window_requests > 0:
                    stop = index + self.settings.window_requests * factor
                    end = self.finished_at[stop - 1]
                else:
                    stop, end = len(self.samples), time.perf_counter()
                samples = np.asarray(self.samples[index:stop], dtype=np.float64)
                current = stats_snapshot(await guarded(control.get_json(stats_path)))
                host_now = self.host_cpu.read()
                windows.append(Window(start, end, samples, delta(current, previous), cpu1 - cpu0,
                                       other_cpu_percent(host, host_now, end - start), factor,
                                       self.timings[index:stop] if self.timings else None))
                previous, index, start, host = current, stop, end, host_now
                if self.pool is not None:  # stable already: a window measured for the samples the point needs
                    if not self._stable(windows[self.pool[0]:]):
                        self._tell(windows, "that window broke the stable pool: the row keeps the pool as it was")
                        break  # it broke the pool's stability: the row keeps the pool as it was
                    self.pool = (self.pool[0], len(windows))
                    more = self._wants_more(windows)
                    self._tell(windows, f"{len(windows) - self.pool[0]} stable windows pooled"
                               + ("; measuring on for the samples its percentiles need" if more else ""))
                    if not more:
                        break
                    continue
                if len(windows) >= STABLE_WINDOWS and self._stable(windows[-STABLE_WINDOWS:]):
                    self.pool = (len(windows) - STABLE_WINDOWS, len(windows))
                    more = self._wants_more(windows)
                    self._tell(windows, "measuring on for the samples its percentiles need" if more else None)
                    if not more:
                        break
                    continue
                self.stopped_early = self.stop_early(windows) if self.stop_early is not None else None
                self._tell(windows)
                if self.stopped_early:
                    break
                # a busy host: lengthen the windows before giving up, after each STABLE_WINDOWS that disagreed
                if len(windows) % STABLE_WINDOWS == 0 and factor * 2 <= self.settings.max_window_factor:
                    factor *= 2
            self.stop = True
            await watcher  # each connection finishes its in-flight request
            await self._close_sequences()
            # Triton updates its counters just after sending a response: give the last ones a moment to land
            for _ in range(20):
                end_stats = stats_snapshot(await control.get_json(stats_path))
                total = delta(end_stats, begin)
                if total["success_count"] + total["fail_count"] >= self.completed:
                    break
                await asyncio.sleep(0.01)
            return windows, total, self.completed
        finally:
            self.stop = True
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            control.close()

    async def _close_sequences(self) -> None:
        """A sequence model: end every sequence still open (one request with ``sequence_end`` each, unmeasured)."""
        if self.sequences is None:
            return
        closing = self.sequences.closing()
        if not closing:
            return
        conn = await self.transport.open()
        try:
            for request in closing:
                await asyncio.wait_for(self.transport.exchange(conn, request), self.settings.request_timeout_s)
                self.closing_sent += 1
                self.completed += 1
        finally:
            conn.close()

    async def _wait_window_until(self, until: float) -> None:
        self.progress.clear()
        try:
            await asyncio.wait_for(self.progress.wait(), max(0.001, until - time.perf_counter()))
        except asyncio.TimeoutError:
            pass

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
            self.on_progress(f"{line}; {note}" if note else line)

    def _stable(self, windows: Sequence[Window]) -> bool:
        return stability(windows, self.settings.stability_percentage, self.point.open_loop)[0]
