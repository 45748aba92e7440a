"""The engine over worker processes (``--workers N|auto``, or a profile's ``workers:``): one point's concurrency
slots, or its request rate, split over N processes on this host, each with its own event loop and connections,
measured as one point.

- **Processes.** Started per point with multiprocessing's ``spawn`` context (no fork of a process with threads),
  each building its requests and connections, then told to go at one instant. Each runs the engine's own
  :class:`~tritonsuite.load.generator.LoadGenerator` on its share: ``concurrency // N`` slots (the first
  ``concurrency % N`` one more; never more processes than slots), or ``rate / N`` requests/s on its own seeded
  schedule (seed + worker index; a constant schedule phased by ``index / rate``, so the sum is the schedule asked).
  A sequence model's ids are partitioned (the id range cut into N disjoint ranges, one each: no two workers ever
  share a live sequence); accuracy probes are spread (worker i sends probes i, i+N, ..., seed + i), their answers
  merged under their own indexes.
- **One clock.** Every worker reports, every 20 ms, the requests it completed with their completion instants on
  ``time.perf_counter`` (CLOCK_MONOTONIC on Linux: one clock for every process of a host) and the instant up to which
  it has reported all of them (its watermark). The parent merges the reports in completion order up to the least
  watermark, and runs the engine's one window loop (:func:`~tritonsuite.load.generator.run_together`) on the merged
  stream: a window ends at the least watermark when the parent cuts it, so it holds exactly the requests every
  worker completed between its two boundaries. Stability, lengthening, the pool for percentiles, early stops,
  progress and Triton's statistics are judged on the merged windows, as for one process.
- **One row.** :func:`~tritonsuite.load.windows.summarise` makes the row from the merged raw latencies (percentiles
  and their intervals over every worker's samples, never averaged percentiles). The row adds ``workers``: how many
  and why (``auto`` says what it chose from), each worker's slots or rate, requests, client CPU and sequence ids, the
  parent's CPU; ``client_cpu_percent`` is the whole client's (parent and workers, % of one core). A worker whose own
  CPU reached the client-bound limit, or (open loop) that sent significantly late, could not keep up: it is named
  and the row is INVALID.
- **Ends with the point.** A worker that fails or dies fails the point with its reason (``worker 2 of 2 (pid N)
  ended mid-point: killed by signal SIGKILL``); every process is stopped when the point ends, on an error, on Ctrl-C
  (the workers ignore SIGINT; the parent stops them) and SIGTERM
  (:func:`~tritonsuite.load.interrupt.run_interruptible`),
  bounded: told to stop, then terminated, then killed. A worker dies with its parent (``PR_SET_PDEATHSIG``).
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from dataclasses import replace

import numpy as np

from tritonsuite.core.reasons import reason
from tritonsuite.core.settings import STABLE_WINDOWS, WORKERS_AUTO, MeasurementSettings, parse_workers
from tritonsuite.load.engine import Measurement, Progress, StopEarly, Traffic, check_traffic, request_bound
from tritonsuite.load.generator import LoadGenerator, run_together
from tritonsuite.load.hostload import HostCpu
from tritonsuite.load.interrupt import run_interruptible, within
from tritonsuite.load.point import Hang, MeasurementError
from tritonsuite.load.sources.inprocess import SOURCE as IN_PROCESS
from tritonsuite.load.sources.base import OPEN_LOOP, PROBES, PROGRESS, STOP_EARLY, LoadSource
from tritonsuite.load.sources.processes import STOP_GRACE_S, Job, Pool, ended, watch
from tritonsuite.load.telemetry import GpuSampler
from tritonsuite.load.windows import Window, delta, late_verdict, summarise

#: names this module writes failure reasons to (tritonsuite.core.reasons), and the reasons with the tests causing them
REASON_NAMES = ("reasons",)
REASONS = (
    reason("could not keep up: {}", "test_workers.py::test_a_worker_that_could_not_keep_up_is_named_in_the_row"),
)
SLOTS_PER_WORKER = 8  # auto: a worker per this many concurrency slots...
RATE_PER_WORKER = 4000.0  # ...or per this many requests/s (one process sustains ~8k req/s on a 2-core host)
ID_SPAN = 2 ** 32  # sequence ids partitioned when the range has no end


def choose(asked: int | str, point, server_local: bool, cores: int | None = None) -> tuple[int, str]:
    """(processes, why): ``auto`` from the load and the cores (half of them left to a server on this host), else the
    number asked, never more than a closed loop's slots."""
    cores = cores or len(os.sched_getaffinity(0))
    closed = not point.open_loop
    load = f"concurrency {point.concurrency}" if closed else f"{point.request_rate:g} requests/s"
    if asked == WORKERS_AUTO:
        client = max(1, cores // 2) if server_local else cores
        need = math.ceil(point.concurrency / SLOTS_PER_WORKER) if closed else \
            math.ceil(point.request_rate / RATE_PER_WORKER)
        n = max(1, min(client, need, point.concurrency if closed else need))
        return n, (f"auto: {n} (the host's {cores} cores, {client} for the client"
                   f"{': half left to the server on this host' if server_local else ''}; {load} needs {need} at "
                   + (f"{SLOTS_PER_WORKER} slots" if closed else f"{RATE_PER_WORKER:g} requests/s") + " per worker)")
    n = min(int(asked), point.concurrency) if closed else int(asked)
    return n, f"{asked} asked" + (f"; {n}: no more processes than {load} has slots" if n < int(asked) else "")


def split(traffic: Traffic, n: int) -> list[Traffic]:
    """Each worker's share of the point: its slots or rate, its schedule's seed, its probes and sequence ids."""
    t, point = traffic, traffic.point
    seq = t.description.sequence_settings(point.seed)
    span = (seq.id_end - seq.id_start) if seq.id_end else ID_SPAN
    part = span // n
    slots = [point.concurrency // n + (i < point.concurrency % n) for i in range(n)]
    if t.driver.sequenced and part <= (1 if point.open_loop else max(slots)):
        raise ValueError(f"--sequence-id-range {seq.id_start}:{seq.id_end}: {span} ids over {n} worker processes "
                         f"leave {part} each, not more than the live sequences of one; give a wider range")
    shares = []
    for i in range(n):
        p = replace(point, request_rate=point.request_rate / n, seed=point.seed + i) if point.open_loop \
            else replace(point, concurrency=slots[i])
        ids = replace(seq, id_start=seq.id_start + i * part, id_end=seq.id_start + (i + 1) * part, seed=seq.seed + i)
        shares.append(replace(t, point=p, probes=tuple(t.probes[i::n]), probe_seed=t.probe_seed + i,
                              description=t.description.with_sequences(ids)))
    return shares


class _Sequences:
    """The workers' sequence summaries as one (the row's ``sequences``: counts summed, each worker's id range)."""

    def __init__(self, summaries: list[dict], whole):  # whole: the point's sequence settings
        self.summaries, self.whole = summaries, whole

    def summary(self, closing: int) -> dict:
        merged = {**self.summaries[0], "sequence_id_range": [self.whole.id_start, self.whole.id_end or None],
                  "worker_sequence_id_ranges": [s["sequence_id_range"] for s in self.summaries]}
        for key in ("sequences_started", "sequences_ended", "ended_when_the_point_ended"):
            merged[key] = sum(s[key] for s in self.summaries)
        return merged


class _Feed(LoadGenerator):
    """The workers as one generator of :func:`run_together`: their reports merged in completion order up to the least
    watermark (``samples``, ``finished_at``, ``origin``: which worker), windows cut at that watermark."""

    def __init__(self, server, traffic: Traffic, settings: MeasurementSettings, stop_early, progress, pool: Pool):
        driver = traffic.driver
        super().__init__(server, traffic.model, None, traffic.point, settings, stop_early,
                         transport=driver.transport(server, request_bound(settings, traffic.point), traffic.point),
                         on_progress=progress, composing=driver.composing())
        self.procs, n = pool, len(pool.jobs)
        pids = [p.pid for p in pool.procs if getattr(p, "local", True)]  # (a Ray actor may be on another host)
        self.host_cpu = HostCpu(lambda: list(server.process_ids()) + pids)  # the workers are the client, not "other"
        self.pending: list[list] = [[] for _ in range(n)]
        self.watermarks, self.cpu, self.cpu_at_cut = [-math.inf] * n, [0.0] * n, [0.0] * n
        self.finals: list[dict | None] = [None] * n
        self.origin: list[int] = []
        self.window_cpu: list[tuple[float, list[float]]] = []  # per window: (parent's CPU s, each worker's CPU s)
        self.ranges: list[tuple[int, int]] = []  # per window: its samples' (start, stop) indexes
        self.at_length: dict[int, float] = {}
        self.last_end: float | None = None
        self.failure: str | None = None
        self.wake: asyncio.Event | None = None

    @property
    def _cpu_mark(self) -> float:
        return 0.0

    @_cpu_mark.setter
    def _cpu_mark(self, value: float) -> None:
        """run_together marks each generator's CPU where the windows begin: the workers' CPU is counted from there
        (not from their start, whose imports and connections are no part of any window)."""
        self.cpu_at_cut = list(getattr(self, "cpu", ()))

    async def _worker(self, slot: int = 0) -> None:  # run_together starts one per slot: slot 0 feeds them all
        if slot == 0:
            await self._feed()

    async def _scheduler(self) -> None:
        await self._feed()

    async def _close_sequences(self, conn=None, slot=None) -> None:  # each worker closed its own
        return None

    async def _feed(self) -> None:
        loop, conns = asyncio.get_running_loop(), self.procs.conns
        self.wake, go, stopping = asyncio.Event(), time.perf_counter() + 0.05, None
        self.watermarks = [go] * len(conns)
        self.at_length[len(self.samples)] = go
        for i, conn in enumerate(conns):
            conn.send(("go", go))
            watch(loop, conn, self._readable, i)
        try:
            while not all(self.finals):
                with contextlib.suppress(asyncio.TimeoutError):
                    await within(self.wake.wait(), 0.05)
                self.wake.clear()
                if self.failure:
                    raise MeasurementError(self.failure)
                if self.stop and stopping is None:
                    stopping = time.perf_counter() + self.settings.timeout_s + 2 * STOP_GRACE_S
                    for conn in conns:
                        conn.send(("stop",))
                if stopping is not None and time.perf_counter() > stopping:
                    raise Hang(f"{self.procs.name(self.finals.index(None))} did not finish its requests within "
                               f"{self.settings.timeout_s:.0f} s of the point's end")
        finally:
            for conn in conns:
                with contextlib.suppress(Exception):
                    loop.remove_reader(conn.fileno())
        self.completed = sum(f["completed"] for f in self.finals)
        self.closing_sent = sum(f["closing_sent"] for f in self.finals)
        self.max_outstanding = sum(f["max_outstanding"] for f in self.finals)
        self.cpu = [f["cpu_s"] for f in self.finals]

    def _readable(self, i: int) -> None:
        conn = self.procs.conns[i]
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] == "samples":
                    self._take(i, *message[1:])
                elif message[0] == "done":
                    self.finals[i], self.watermarks[i] = message[1], math.inf
                    self._merge()
                elif message[0] == "error":
                    self._fail(i, f"failed: {message[1]}")
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(conn.fileno())
            if self.finals[i] is None:
                proc = self.procs.procs[i]
                proc.join(0.5)
                self._fail(i, f"ended mid-point: {ended(proc.exitcode)}")
        self.wake.set()

    def _fail(self, i: int, what: str) -> None:
        self.failure = self.failure or f"{self.procs.name(i)} {what}"

    def _take(self, i, finished, samples, timings, watermark, cpu, responses) -> None:
        if len(finished):
            self.pending[i].append((finished, samples, timings))
        self.watermarks[i], self.cpu[i] = watermark, cpu
        self.probe_responses += responses
        self._merge()

    def _merge(self) -> None:
        """Move every reported request completed up to the least watermark into the merged stream, in order."""
        mark, parts = min(self.watermarks), []
        for i, chunks in enumerate(self.pending):
            keep = []
            for finished, samples, timings in chunks:
                k = int(np.searchsorted(finished, mark, side="right"))
                if k:
                    parts.append((finished[:k], samples[:k], timings[:k] if timings else None, i))
                if k < len(finished):
                    keep.append((finished[k:], samples[k:], timings[k:] if timings else None))
            self.pending[i] = keep
        if parts:
            finished = np.concatenate([p[0] for p in parts])
            order = np.argsort(finished, kind="stable")
            self.samples.extend(map(tuple, np.concatenate([p[1] for p in parts])[order].tolist()))
            self.finished_at.extend(finished[order].tolist())
            self.origin.extend(np.concatenate([np.full(len(p[0]), p[3]) for p in parts])[order].tolist())
            if any(p[2] is not None for p in parts):
                timings = [x for p in parts for x in (p[2] or [None] * len(p[0]))]
                self.timings.extend(timings[j] for j in order)
            self.completed += len(finished)
            self.progress.set()
        if math.isfinite(mark):
            self.at_length[len(self.samples)] = mark

    def _window(self, index, factor, start, end, stats, previous, cpu, other):
        """A time-based window ends at the least watermark (every worker's requests up to it are in), and starts
        where the last one ended; a count-based one at its last request, as in one process."""
        if self.settings.window_requests > 0 and end is None:
            stop = index + self.settings.window_requests * factor
            end = self.finished_at[stop - 1]
        else:
            start = self.last_end if self.last_end is not None else self.at_length.get(index, start)
            stop, end = len(self.samples), max(min(self.watermarks), start + 1e-6)
        self.last_end = end
        workers = [c - c0 for c, c0 in zip(self.cpu, self.cpu_at_cut)]
        self.cpu_at_cut = list(self.cpu)
        self.window_cpu.append((cpu, workers))
        self.ranges.append((index, stop))
        samples = np.asarray(self.samples[index:stop], dtype=np.float64).reshape(-1, 4)
        timings = self.timings[index:stop] if self.timings else None
        # the busiest process's CPU: the client-bound rule is per process (each has one core at most)
        return Window(start, end, samples, delta(stats, previous), max([cpu] + workers), other, factor, 0.0,
                      timings), stop


class WorkerSource(LoadSource):
    """The engine's points over worker processes (module docstring); a point that gets one process (``auto`` on a
    small host, a concurrency of 1) is measured by the engine in this process, its row saying why."""

    name = "suite"
    capabilities = frozenset({PROBES, OPEN_LOOP, STOP_EARLY, PROGRESS})

    def __init__(self, workers: int | str = WORKERS_AUTO):
        self.workers = parse_workers(workers)

    kind = Pool.kind  # who runs the workers: processes on this host (Ray actors: raycluster.RaySource)

    def __repr__(self) -> str:
        return f"<load source suite over {self.kind} ({self.workers})>"

    def pool(self, jobs: list[Job]):
        """The workers of one point, started on entry and gone on exit (:class:`processes.Pool`'s face)."""
        return Pool(jobs)

    def choose(self, point, server) -> tuple[int, str]:
        """(workers, why) for ``point``."""
        return choose(self.workers, point, server.local)

    def measure(self, server, traffic: Traffic, settings: MeasurementSettings = MeasurementSettings(),
                stop_early: StopEarly | None = None, progress: Progress | None = None) -> Measurement:
        self.check(traffic, stop_early)
        n, why = self.choose(traffic.point, server)
        if n <= 1:
            m = IN_PROCESS.measure(server, traffic, settings, stop_early, progress)
            m.meta["workers"] = {"processes": 1, "asked": str(self.workers), "chosen": why, "in_process": True}
            return m
        point, driver = traffic.point, traffic.driver
        if point.shared_memory:
            raise ValueError(f"--workers {self.workers}: shared memory is one process's (offline, concurrency 1)")
        check_traffic(traffic, driver)
        server.check_alive()
        shares = split(traffic, n)
        jobs = [Job(i, n, server.http_url, _grpc_url(server), share, replace(
            settings, max_outstanding=max(1, math.ceil(settings.max_outstanding / n))),
            i / point.request_rate if point.open_loop and point.distribution == "constant" else 0.0, server.access)
            for i, share in enumerate(shares)]
        try:
            with self.pool(jobs) as pool, GpuSampler() if server.local else contextlib.nullcontext() as gpu:
                feed = _Feed(server, traffic, settings, stop_early, progress, pool)
                windows, total, completed = run_interruptible(run_together([feed]))[0]
                if driver.sequenced:
                    feed.sequences = _Sequences([f["sequences"] for f in feed.finals],
                                                traffic.description.sequence_settings(point.seed))
                m = summarise(point, windows, total, completed, settings, driver.protocol(point, feed.transport),
                              gpu, feed.max_outstanding, feed.stopped_early, feed.pool)
        except Exception as exc:
            if server.gone():
                raise server.died(f"while measuring {traffic.model} at {point.describe()} over {n} "
                                  f"{self.kind} ({type(exc).__name__}: {exc})") from None
            if isinstance(exc, (OSError, asyncio.IncompleteReadError)):
                raise MeasurementError(f"measuring {traffic.model} at {point}: {type(exc).__name__}: {exc}") from None
            raise
        driver.summarise(m, windows, feed)
        _merged_row(m, feed, windows, settings, shares, self.workers, why)
        if all(f.get("http_reconnects") is not None for f in feed.finals):
            m.meta["http_reconnects"] = sum(f["http_reconnects"] for f in feed.finals)
        if traffic.probes:
            m.probe_responses = feed.probe_responses
            m.meta["accuracy_probes"] = {
                "share": traffic.probe_share, "seed": traffic.probe_seed, "probes": len(traffic.probes),
                "answered": len(feed.probe_responses), "spread": f"worker i sends probes i, i+{n}, ... (seed + i)",
                "latencies": "counted: probe requests are in the row's throughput and latency columns"}
        return m


def _grpc_url(server) -> str:
    """The server's gRPC endpoint where it is known (a remote server reached over HTTP alone: none; the workers then
    speak HTTP, as the point does)."""
    try:
        return server.grpc_url
    except (AttributeError, ValueError):
        return ""


def _merged_row(m: Measurement, feed: _Feed, windows, settings, shares, asked, why) -> None:
    """The row's ``workers``: each process's part, the whole client's CPU, and who could not keep up."""
    start, stop = feed.pool if feed.pool is not None else (max(0, len(windows) - STABLE_WINDOWS), len(windows))
    duration = sum(w.end - w.start for w in windows[start:stop])
    first, last = feed.ranges[start][0], feed.ranges[stop - 1][1]
    origin = np.asarray(feed.origin[first:last])
    samples = np.asarray(feed.samples[first:last], dtype=np.float64).reshape(-1, 4)
    parent = sum(feed.window_cpu[k][0] for k in range(start, stop)) / duration * 100.0
    per, behind = [], []
    for i, share in enumerate(shares):
        cpu = sum(feed.window_cpu[k][1][i] for k in range(start, stop)) / duration * 100.0
        entry = {"worker": i + 1, **feed.procs.worker_meta(i), "requests": int((origin == i).sum()),
                 "client_cpu_percent": round(cpu, 1), "probes": len(share.probes)}
        entry.update({"request_rate": share.point.request_rate, "seed": share.point.seed} if share.point.open_loop
                     else {"slots": share.point.concurrency})
        if share.driver.sequenced:
            ids = share.description.sequences
            entry["sequence_ids"] = [ids.id_start, ids.id_end]
        if cpu >= settings.client_bound_percent:
            behind.append(f"{feed.procs.name(i)}: its own CPU {cpu:.0f}% of a core "
                          f"(limit {settings.client_bound_percent:g}%)")
        if share.point.open_loop and (mine := samples[origin == i]).size:
            late = late_verdict(mine, m.point, settings)
            entry["late_percent"] = round(late.share * 100.0, 2)
            if late.verdict == "over":
                behind.append(f"{feed.procs.name(i)}: sent late ({late.describe('requests sent late')})")
        per.append(entry)
    if parent >= settings.client_bound_percent:
        behind.append(f"the parent process (pid {os.getpid()}): its own CPU {parent:.0f}% of a core")
    m.meta.update({
        "loadgen": f"tritonsuite engine, {len(shares)} {feed.procs.kind}",
        "client_cpu_percent": round(parent + sum(e["client_cpu_percent"] for e in per), 1),
        "workers": {"processes": len(shares), "asked": str(asked), "chosen": why,
                    "start_method": feed.procs.start_method,
                    "windows": f"{feed.procs.clock}; percentiles over the merged raw latencies",
                    "parent_cpu_percent": round(parent, 1), "per_worker": per, "behind": behind,
                    **getattr(feed.procs, "cluster_meta", {})}})
    if behind:
        m.status = "INVALID" if m.status in ("OK", "UNSTABLE") else m.status
        m.reasons.append(f"could not keep up: {'; '.join(behind)}")
