"""The processes of the worker-process load source (:mod:`tritonsuite.load.sources.workers`): what one worker is
given (:class:`Job`), what it runs (:func:`_serve`: the engine's load generator on its share, reporting its completed
requests on the host's monotonic clock every ``FLUSH_S``), and the :class:`Pool` that starts them for one point
with the ``spawn`` context and leaves none behind."""
from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass

import numpy as np

from tritonsuite.core.access import PLAIN, Access
from tritonsuite.core.children import die_with_parent
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load.engine import Traffic, request_bound, request_tensors
from tritonsuite.load.exchange import prepare
from tritonsuite.load.generator import LoadGenerator
from tritonsuite.load.interrupt import run, within
from tritonsuite.load.point import MeasurementError

FLUSH_S = 0.02  # how often a worker reports
READY_S = 120.0  # the longest a worker may take to start (spawn, imports, its connections)
STOP_GRACE_S = 2.0  # a worker told to stop, then terminated, then killed: each wait this long at most


@dataclass(frozen=True)
class Job:
    """What one worker process is given: its share of the point and where the server is."""
    index: int
    of: int
    http_url: str
    grpc_url: str
    traffic: Traffic
    settings: MeasurementSettings
    phase_s: float = 0.0  # a constant schedule's offset from the common start
    access: Access = PLAIN  # TLS and headers, as the parent reaches the server (its secrets travel, never printed)


class _Endpoint:
    """What a worker needs of the server: where it listens (the parent watches the server itself)."""
    local = False

    def __init__(self, http_url: str, grpc_url: str, access: Access = PLAIN):
        self.http_url, self.grpc_url, self.access = http_url, grpc_url, access

    def process_ids(self) -> list[int]:
        return []


def watch(loop, conn, callback, *args) -> None:
    """``loop.add_reader`` on a pipe end that stays blocking: uvloop's add_reader makes the descriptor non-blocking,
    and ``Connection.send`` on a full pipe then raises BlockingIOError (8 worker processes on 2 cores: the parent
    read their reports slower than they sent them, and a worker died mid-point with "exit status 1"). A send then
    waits for the other end to read, as Connection promises."""
    loop.add_reader(conn.fileno(), callback, *args)
    os.set_blocking(conn.fileno(), True)


def _child(conn, job: Job) -> None:
    """A worker process's main: Ctrl-C is the parent's to handle (it stops the workers)."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not serve(conn, job):
        raise SystemExit(1)


def serve(conn, job: Job) -> bool:
    """Run one worker's share of the point, told through ``conn`` (a worker process's main, a Ray actor's thread);
    a failure is told to the other end (False)."""
    try:
        run(_serve(conn, job))
        return True
    except BaseException as exc:  # noqa: BLE001 - told to the parent, which fails the point with it
        with contextlib.suppress(Exception):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return False


async def _serve(conn, job: Job) -> None:
    t, s = job.traffic, job.settings
    server, driver = _Endpoint(job.http_url, job.grpc_url, job.access), t.driver
    transport = driver.transport(server, request_bound(s, t.point), t.point)
    grpc, names, host = transport is not None, [o.name for o in t.outputs], job.http_url.rsplit(":", 1)[0]
    request = prepare(host, t.model, request_tensors(t), names, grpc, driver.batched, decode=False)
    probes = [prepare(host, t.model, {k: np.ascontiguousarray(v) for k, v in p.items()}, names, grpc, driver.batched)
              for p in t.probes]
    gen = LoadGenerator(server, t.model, request, t.point, s, None, probes, t.probe_share, t.probe_seed, transport,
                        sequences=driver.pattern(request, grpc, t.point))
    loop, inbox = asyncio.get_running_loop(), asyncio.Queue()

    def readable():
        try:
            while conn.poll():
                inbox.put_nowait(conn.recv())
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            inbox.put_nowait(("gone",))

    watch(loop, conn, readable)
    conn.send(("ready", os.getpid()))
    message = await inbox.get()
    if message[0] != "go":
        return
    await asyncio.sleep(max(0.0, message[1] + job.phase_s - time.perf_counter()))
    tasks = ([gen._task(gen._scheduler())] if t.point.open_loop else
             [gen._task(gen._worker(slot)) for slot in range(t.point.concurrency)])
    sent = answered = 0

    def report(final: bool = False) -> None:
        nonlocal sent, answered
        now, n = time.perf_counter(), len(gen.samples)  # every request completed before `now` is in [sent:n]
        responses = [(i * job.of + job.index, out) for i, out in gen.probe_responses[answered:]]
        conn.send(("samples", np.asarray(gen.finished_at[sent:n], dtype=np.float64),
                   np.asarray(gen.samples[sent:n], dtype=np.float64).reshape(-1, 4),
                   gen.timings[sent:n] if gen.timings else None, math.inf if final else now, time.process_time(),
                   responses))
        sent, answered = n, len(gen.probe_responses)

    try:
        while True:
            try:
                message = await within(inbox.get(), FLUSH_S)
            except asyncio.TimeoutError:
                message = None
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()
            if message is None:
                report()
            elif message[0] in ("stop", "gone"):
                break
        if message[0] == "gone":
            return
        gen.stop = True
        await within(asyncio.gather(*tasks), s.timeout_s)  # in-flight requests finish, sequences close
        await gen._close_sequences()
        report(final=True)
        conn.send(("done", {"completed": gen.completed, "closing_sent": gen.closing_sent,
                            "max_outstanding": gen.max_outstanding, "cpu_s": time.process_time(),
                            "http_reconnects": getattr(gen.transport, "reconnects", None),
                            "sequences": gen.sequences.summary(gen.closing_sent) if gen.sequences else None}))
    finally:
        gen.stop = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def ended(code: int | None) -> str:
    if code is None:
        return "its pipe closed"
    return f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


_SPAWNING = threading.Lock()


@contextlib.contextmanager
def _without_main():
    """Spawn a worker without re-running the parent's ``__main__``: spawn runs the main module again in the child
    (as ``__mp_main__``) unless it is guarded by ``if __name__ == "__main__"``, and a user's script that measures at
    its top level would start itself again. A worker needs only its importable target, so the main module is left
    out of what the child is told to prepare."""
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def without_main(name):
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    with _SPAWNING:
        spawn.get_preparation_data = without_main
        try:
            yield
        finally:
            spawn.get_preparation_data = original


def wait_ready(pool) -> None:
    """Until every worker of ``pool`` (a :class:`Pool`, or a pool with its face) said it is ready, bounded by
    READY_S; one that ended or failed first is one line naming it."""
    deadline = time.monotonic() + READY_S
    for i, (proc, conn) in enumerate(zip(pool.procs, pool.conns)):
        while not conn.poll(0.1):
            if not proc.is_alive():
                proc.join(1.0)
                raise MeasurementError(f"{pool.name(i)} ended before it was ready: {ended(proc.exitcode)}")
            if time.monotonic() > deadline:
                raise MeasurementError(f"{pool.name(i)} was not ready within {READY_S:g} s")
        message = conn.recv()
        if message[0] != "ready":
            raise MeasurementError(f"{pool.name(i)} failed to start: {message[1]}")


class Pool:
    """The worker processes of one point: started and ready on entry; on exit (whatever happened) told to stop,
    then terminated, then killed, each wait bounded, so none outlives the point. The parent talks to worker i
    through ``conns[i]`` (a pipe: what :func:`_serve` sends, and "go" and "stop"); ``procs[i]`` has its ``pid``
    (and ``join``, ``exitcode``, ``is_alive`` once it ended). :mod:`tritonsuite.load.sources.raycluster`'s pool
    has the same face."""

    kind = "worker processes"
    start_method = "spawn"
    clock = "cut on this host's CLOCK_MONOTONIC (time.perf_counter) at the least of the workers' watermarks"

    def __init__(self, jobs: list[Job]):
        self.jobs, self.procs, self.conns = jobs, [], []

    def worker_meta(self, i: int) -> dict:
        """What the row says of worker i beside its figures."""
        return {"pid": self.procs[i].pid}

    def name(self, i: int) -> str:
        pid = self.procs[i].pid if i < len(self.procs) else "-"
        return f"worker {i + 1} of {len(self.jobs)} (pid {pid})"

    def __enter__(self) -> "Pool":
        ctx = multiprocessing.get_context("spawn")
        try:
            for job in self.jobs:
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_child, args=(theirs, job), name=f"tritonsuite-worker-{job.index + 1}",
                                   daemon=True)
                with _without_main():
                    proc.start()
                theirs.close()  # the parent keeps one end only: the worker's death closes the pipe (EOF)
                self.procs.append(proc)
                self.conns.append(mine)
            wait_ready(self)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for conn in self.conns:
            with contextlib.suppress(Exception):
                conn.send(("stop",))
        for step in ("join", "terminate", "kill"):
            deadline = time.monotonic() + STOP_GRACE_S
            for proc in self.procs:
                if proc.is_alive() and step != "join":
                    getattr(proc, step)()
                proc.join(max(0.0, deadline - time.monotonic()))
            if not any(p.is_alive() for p in self.procs):
                break
        for conn in self.conns:
            conn.close()
