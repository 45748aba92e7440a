"""The engine's workers as Ray actors on the hosts of a Ray cluster (``--workers ray[:ADDRESS][@N]``; ``pip install
'tritonsuite[distributed]'``): the worker-process source (:mod:`tritonsuite.load.sources.workers`) with actors in
place of processes, so a point's load can come from more hosts than one.

- **Placement.** ``N`` actors (default 1) on each alive node of the cluster, each pinned to its node (Ray's node
  affinity), each running one worker's share exactly as a worker process does (:func:`processes.serve` in a thread
  of the actor, with its own event loop and connections). The server is reached from every node at the URL the run
  was given (``--server remote --triton-url``: an address every node can reach, or a load balancer).
- **One clock.** A host's ``time.perf_counter`` is its own. Before a point, each actor's clock is read ten times
  from the parent; the read with the shortest round trip gives its offset (its clock minus the parent's at the
  midpoint) and the uncertainty (half that round trip). Every instant an actor reports is moved onto the parent's
  clock by its offset before the parent merges it, and the "go" instant onto the actor's; the row says each
  host's offset and uncertainty (``workers.per_worker``) and the worst (``workers.clock_agreement_ms``): the
  windows' boundaries are good to that much.
- **Bridged, not rewritten.** A thread of the parent (the pump) carries the workers' messages between each
  actor and a local pipe per worker, which the worker-process parent reads as it reads its processes' pipes.
- **The team's cluster, never one of the suite's.** The cluster is the one at ADDRESS (else ``RAY_ADDRESS``),
  reached with its token (``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH`` in the environment). The suite starts
  none: Ray 2.60's processes listen on every interface of a host and announce its address even when asked for
  127.0.0.1, so a cluster is a door to run code that its owner must put behind token authentication and a network
  of its own (docs/measurement.md, "Many hosts", says how).
- **At the parent's priority.** Ray starts its workers at nice 15 (its ``worker_niceness``, so that they leave the
  CPU to its own daemons): on a busy host, two such actors measured 250.6 inf/s where one process at nice 0 measured
  363.3 at the same point, twice (CI on three pytest workers, 2026-11-30). A load generator that yields the CPU to
  everything else measures the host, not the server. So each actor sets every thread it has to the parent's nice
  value where the host lets it (lowering a nice value takes ``CAP_SYS_NICE``); ``workers.per_worker`` says the nice
  value each ran at.
- **Ends with the point.** Each actor is killed when its point ends, whatever happened; an actor that dies fails
  the point with its host and Ray's reason.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import signal
import socket
import threading
import time

from tritonsuite.core.settings import RayWorkers
from tritonsuite.load.point import MeasurementError
from tritonsuite.load.sources.processes import READY_S, STOP_GRACE_S, Job, serve, wait_ready
from tritonsuite.load.sources.workers import WorkerSource

CLOCK_READS = 10  # reads of each actor's clock before a point; the shortest round trip decides its offset
PUMP_S = 0.01  # how often the pump carries messages each way
CONNECT_S = 5.0  # the longest a cluster's address may take to accept a connection
INSTALL = "pip install 'tritonsuite[distributed]'"


def unavailable_reason() -> str | None:
    """Why Ray cannot be used here (one line), or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return f"Ray is not installed ({INSTALL})"
    return None


def connect(workers: RayWorkers):
    """The ``ray`` module, connected to the cluster ``workers`` names: ADDRESS, else ``RAY_ADDRESS``, else the one
    this process already runs (a script that started its own). The suite starts none: Ray 2.60's processes listen on
    every interface of the host and announce its address even when asked for 127.0.0.1. One line when it cannot."""
    if reason := unavailable_reason():
        raise MeasurementError(f"--workers {workers}: {reason}")
    import ray

    address = workers.address or os.environ.get("RAY_ADDRESS", "")
    if ray.is_initialized():
        connected = ray.get_runtime_context().gcs_address
        if address and address != connected:
            raise MeasurementError(f"--workers {workers}: this process is connected to the Ray cluster at "
                                   f"{connected} already")
        return ray
    if not address:
        raise MeasurementError(f"--workers {workers}: which Ray cluster? Give ray:ADDRESS (its head's host:port) or "
                               f"RAY_ADDRESS; the suite starts none (Ray's processes would listen on every interface "
                               f"of this host: docs/measurement.md, many hosts)")
    host, _, port = address.rpartition(":")
    try:  # a quick answer where nothing listens (Ray itself retries for a minute)
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except (OSError, ValueError) as exc:
        raise MeasurementError(f"--workers {workers}: no Ray cluster at {address}: {exc}") from None
    handlers = _signal_handlers()  # ray.init installs its own: the run's (SIGTERM ends it cleanly) are kept
    try:
        ray.init(address=address, logging_level="warning", log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 - Ray's own errors (a wrong token among them): one line naming where
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise MeasurementError(f"--workers {workers}: the Ray cluster at {address} refused this client: "
                               f"{type(exc).__name__}: {first}") from None
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return ray


def _signal_handlers() -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not None}


def _nodes(ray) -> list[dict]:
    return sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeManagerAddress"])


class _Actor:
    """One worker in the cluster, as the worker-process parent sees a process: its pid (on its host), where it runs,
    its clock's offset from the parent's."""

    def __init__(self, handle, node: dict):
        self.handle, self.node, self.host = handle, node["NodeID"], node["NodeManagerAddress"]
        self.pid: int | None = None
        self.local = False
        self.offset_s = self.uncertainty_s = 0.0
        self.nice: int | None = None  # as it runs the worker's thread
        self.exitcode = None

    def join(self, timeout: float | None = None) -> None:  # the worker-process parent's face
        return None

    def is_alive(self) -> bool:
        return True


_WORKER: list = []  # the actor class, defined once per process


def renice(nice: int) -> int:
    """Every thread of this process to ``nice`` where it is higher (Linux's nice value is a thread's; a thread takes
    its creator's) and the host allows the change; the nice value of the calling thread after."""
    for task in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ["0"]:
        try:
            if os.getpriority(os.PRIO_PROCESS, int(task)) > nice:
                os.setpriority(os.PRIO_PROCESS, int(task), nice)
        except OSError:  # not permitted (no CAP_SYS_NICE), or the thread ended: it stays as it is
            pass
    return os.getpriority(os.PRIO_PROCESS, 0)


def _worker_class(ray):
    if _WORKER:
        return _WORKER[0]

    @ray.remote(num_cpus=0, max_concurrency=4)
    class Worker:
        """Runs one worker's share (:func:`processes.serve`) in a thread, through a local pipe the methods read and
        write: ``tell`` hands it the parent's messages, ``drain`` returns what it reported."""

        def __init__(self, job: Job, nice: int):
            self.nice = renice(nice)  # before the worker's thread, which takes its creator's
            self.mine, theirs = multiprocessing.Pipe()
            self.thread = threading.Thread(target=serve, args=(theirs, job), daemon=True)
            self.thread.start()

        def clock(self) -> tuple[float, str, int, int]:
            return time.perf_counter(), socket.gethostname(), os.getpid(), self.nice

        def tell(self, message) -> None:
            self.mine.send(message)

        def drain(self) -> tuple[list, bool]:
            messages = []
            try:
                while self.mine.poll():
                    messages.append(self.mine.recv())
            except (EOFError, OSError):  # the worker ended and its end of the pipe went with it
                return messages, False
            return messages, self.thread.is_alive()

    _WORKER.append(Worker)
    return Worker


class RayPool:
    """The actors of one point, with the face of :class:`processes.Pool`: ``conns[i]`` a local pipe to worker i
    (the pump carries it to the actor), ``procs[i]`` its :class:`_Actor`. On exit every actor is killed."""

    kind = "Ray actors"
    start_method = "ray actors"

    def __init__(self, jobs: list[Job], workers: RayWorkers):
        self.jobs, self.workers = jobs, workers
        self.procs: list[_Actor] = []
        self.conns: list = []
        self._ends: list = []
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None
        self.clock = ""

    def name(self, i: int) -> str:
        actor = self.procs[i] if i < len(self.procs) else None
        where = f"on {actor.host}, pid {actor.pid}" if actor is not None else "not started"
        return f"worker {i + 1} of {len(self.jobs)} (Ray actor {where})"

    def worker_meta(self, i: int) -> dict:
        actor = self.procs[i]
        return {"pid": actor.pid, "host": actor.host, "clock_offset_ms": round(actor.offset_s * 1e3, 3),
                "clock_uncertainty_ms": round(actor.uncertainty_s * 1e3, 3), "nice": actor.nice}

    @property
    def cluster_meta(self) -> dict:
        hosts = sorted({a.host for a in self.procs})
        return {"hosts": hosts, "per_node": self.workers.per_node,
                "clock_agreement_ms": round(max((a.uncertainty_s for a in self.procs), default=0.0) * 1e3, 3)}

    def __enter__(self) -> "RayPool":
        ray = connect(self.workers)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        worker = _worker_class(ray)
        nodes = [n for n in _nodes(ray) for _ in range(self.workers.per_node)]
        nice = os.getpriority(os.PRIO_PROCESS, 0)  # this thread's: the one process's would run at it
        try:
            for job, node in zip(self.jobs, nodes):
                strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                self.procs.append(_Actor(worker.options(scheduling_strategy=strategy).remote(job, nice), node))
                mine, end = multiprocessing.Pipe()
                self.conns.append(mine)
                self._ends.append(end)
            here = ray.get_runtime_context().get_node_id()
            for i, actor in enumerate(self.procs):
                try:
                    self._read_clock(ray, actor)
                except Exception as exc:  # noqa: BLE001 - Ray's (an actor that could not start): one line
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    raise MeasurementError(f"{self.name(i)} did not start: {type(exc).__name__}: {first}") from None
                actor.local = actor.node == here
            self.clock = ("cut on this process's CLOCK_MONOTONIC at the least of the workers' watermarks; each "
                          "host's reports moved onto it by that host's offset, measured from the shortest of "
                          f"{CLOCK_READS} clock reads")
            self._pump = threading.Thread(target=self._carry, args=(ray,), name="tritonsuite-ray-pump", daemon=True)
            self._pump.start()
            wait_ready(self)  # (an actor is alive until the pump tells its death as the worker's error)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _read_clock(self, ray, actor: _Actor) -> None:
        best = math.inf
        for _ in range(CLOCK_READS):
            t0 = time.perf_counter()
            theirs, _host, pid, actor.nice = ray.get(actor.handle.clock.remote(), timeout=READY_S)
            t1 = time.perf_counter()
            if t1 - t0 < best:
                best, actor.offset_s, actor.pid = t1 - t0, theirs - (t0 + t1) / 2, pid
        actor.uncertainty_s = best / 2

    def _carry(self, ray) -> None:
        """The pump: the parent's messages to each actor ("go" moved onto its clock), each actor's reports back
        (their instants moved onto the parent's); an actor that died is told as the worker's error."""
        live = set(range(len(self.procs)))
        while live and not self._stop.is_set():
            asked = {}
            for i in sorted(live):
                actor, end = self.procs[i], self._ends[i]
                with _quiet():
                    while end.poll():
                        message = end.recv()
                        if message[0] == "go":
                            message = ("go", message[1] + actor.offset_s)
                        actor.handle.tell.remote(message)
                asked[i] = actor.handle.drain.remote()
            for i, ref in asked.items():
                actor, end = self.procs[i], self._ends[i]
                try:
                    messages, running = ray.get(ref, timeout=READY_S)
                except Exception as exc:  # noqa: BLE001 - the actor or its node is gone: the worker's error
                    live.discard(i)
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    with _quiet():
                        end.send(("error", f"the Ray actor died: {type(exc).__name__}: {first}"))
                    continue
                for message in messages:
                    if message[0] == "samples":
                        finished, samples, timings, watermark, cpu, responses = message[1:]
                        message = ("samples", finished - actor.offset_s, samples, timings,
                                   watermark - actor.offset_s, cpu, responses)
                    with _quiet():
                        end.send(message)
                if not running and not messages:
                    live.discard(i)
            self._stop.wait(PUMP_S)

    def __exit__(self, *exc) -> None:
        for conn in self.conns:
            with _quiet():
                conn.send(("stop",))
        if self._pump is not None:
            self._pump.join(STOP_GRACE_S)
        self._stop.set()
        if self._pump is not None:
            self._pump.join(STOP_GRACE_S)
        if self.procs:
            import ray

            for actor in self.procs:
                with _quiet():
                    ray.kill(actor.handle)
            for actor in self.procs:  # gone before the next point starts its own (bounded)
                deadline = time.monotonic() + STOP_GRACE_S
                while time.monotonic() < deadline:
                    try:
                        ray.get(actor.handle.clock.remote(), timeout=STOP_GRACE_S)
                    except Exception:  # noqa: BLE001 - dead: what was waited for
                        break
                    time.sleep(0.05)
        for conn in self.conns + self._ends:
            conn.close()


class _quiet:
    """Suppress what a closing pipe or a dead actor raises while cleaning up."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)


class RaySource(WorkerSource):
    """The worker-process source with its workers as Ray actors (module docstring)."""

    kind = RayPool.kind

    def __init__(self, workers: RayWorkers):
        self.workers = workers

    def pool(self, jobs: list[Job]) -> RayPool:
        return RayPool(jobs, self.workers)

    def choose(self, point, server) -> tuple[int, str]:
        ray = connect(self.workers)
        nodes = len(_nodes(ray))
        asked = nodes * self.workers.per_node
        n = min(asked, point.concurrency) if not point.open_loop else asked
        return n, (f"{self.workers}: {self.workers.per_node} on each of {nodes} alive node"
                   f"{'s' if nodes != 1 else ''}" + (f"; {n}: no more than the {point.concurrency} slots"
                                                       if n < asked else ""))

    def unavailable(self) -> str | None:
        """Why these workers cannot run (one line): Ray not installed, or its cluster not reached."""
        try:
            connect(self.workers)
        except MeasurementError as exc:
            return str(exc)
        return None
