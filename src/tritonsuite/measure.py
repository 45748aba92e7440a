"""The measurement engine: closed-loop or open-loop load over HTTP against a Triton model, one point at a time.

Requests are built once per point with tritonclient's own protocol code (binary tensor extension, or system
shared memory references) and sent by an asyncio load generator, in one of two ways:
- closed loop (a concurrency): ``concurrency`` connections, each keeping one request in flight;
- open loop (a request rate): requests are sent on a seeded schedule (Poisson or constant arrivals) whatever the
  responses do, over as many connections as are needed (up to ``max_outstanding`` in flight). Latency is measured
  from the scheduled send time, so a slow server cannot hide its queue (coordinated omission), and a request sent
  more than ``schedule_tolerance_ms`` (or a tenth of the mean gap between arrivals, if longer) after its time is
  late: a point with more than ``max_late_percent`` late requests measured the load generator, not the server,
  and is INVALID. Open-loop windows are judged stable on latency alone: their throughput is the schedule's (a
  Poisson count), not the server's.
After a warm-up, measurement windows (time-based, or count-based) run until the
last three agree within the stability percentage on throughput and average latency, or ``max_trials`` windows
have run (then the point is UNSTABLE). On a busy host the windows lengthen first: after each three that disagree,
they double, up to ``max_window_factor`` times the set length. Each window also records how much CPU other
processes than the server's and the load generator used (``tritonsuite.hostload``).

Each point yields the seeds' columns (ms):
- Client Send: handing the prepared request to the socket (open loop: from the scheduled send time); Client Recv: from the response headers to the outputs
  decoded (inputs are serialised once before measuring, as perf_analyzer does);
- Server Queue / Compute Input / Compute Infer / Compute Output: deltas of Triton's statistics extension over the
  stable windows, per request;
- Network+Server Send/Recv: the residual of the average client latency minus all the parts above;
- p50/p90/p95/p99/avg latency: from the raw per-request latencies of the stable windows.
Where the server runs on this host and NVML answers, GPU utilisation, memory, power and SM clock are sampled during
the point and summarised over the stable windows (``tritonsuite.telemetry``).
It also records how it was measured and whether the row is valid: the server's success-count delta over the whole
point must equal the requests the client completed (else someone else used the model), no request may fail, and
the load generator's own CPU use must stay below the client-bound limit.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from tritonsuite.hostload import HostCpu, other_cpu_percent
from tritonsuite.rows import LATENCY_PARTS, RESULT_COLUMNS, Row
from tritonsuite.settings import DISTRIBUTIONS, STABLE_WINDOWS, MeasurementSettings
from tritonsuite.client import SharedMemoryRegions, infer_tensors
from tritonsuite.server import TritonServer
from tritonsuite.spec import TensorSpec
from tritonsuite.telemetry import GpuSampler, unavailable_reason

SERVER_STATS = ("queue", "compute_input", "compute_infer", "compute_output")


class MeasurementError(RuntimeError):
    """A point could not be measured (request failed, server unreachable); the suite records it as a FAILED row."""


@dataclass(frozen=True)
class LoadPoint:
    """A batch size and either a concurrency (closed loop) or a request rate in requests/s (open loop, arrivals
    ``distribution``-distributed from ``seed``; ``concurrency`` is then unused)."""

    batch_size: int
    concurrency: int = 1
    shared_memory: bool = False
    request_rate: float | None = None
    distribution: str = "poisson"
    seed: int = 0

    def __post_init__(self):
        if self.batch_size < 1 or self.concurrency < 1:
            raise ValueError(f"batch size and concurrency must be >= 1, got {self.batch_size}, {self.concurrency}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise ValueError(f"request rate {self.request_rate!r}: expected a number of requests/s > 0")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution {self.distribution!r}; valid choices: {', '.join(DISTRIBUTIONS)}")

    @property
    def open_loop(self) -> bool:
        return self.request_rate is not None

    def describe(self) -> str:
        load = (f"{self.request_rate:g} requests/s ({self.distribution})" if self.open_loop
                else f"concurrency {self.concurrency}")
        return f"batch {self.batch_size}, {load}"


@dataclass
class Measurement:
    point: LoadPoint
    result: dict[str, float]
    meta: dict
    status: str = "OK"
    reasons: list[str] = field(default_factory=list)
    latencies_s: np.ndarray | None = None  # every request latency of the stable windows (pytest-benchmark's rounds)
    comparison: Any = None  # a tritonsuite.compare.PointComparison when the run compares with a stored one
    accuracy_under_load: Any = None  # a tritonsuite.underload.UnderLoadResult when the point carried probes
    # (probe index, decoded outputs) of every accuracy probe answered during the point (see ``measure(probes=)``)
    probe_responses: list[tuple[int, dict[str, np.ndarray]]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.status == "OK"

    def to_row(self, **identity) -> Row:
        """The measured row; ``identity`` names the point (scenario, model, deployment, format, ...)."""
        point = self.point
        return Row(**identity, batch=point.batch_size, concurrency=None if point.open_loop else point.concurrency,
                   request_rate=point.request_rate, result=self.result, measurement=self.meta, status=self.status,
                   reasons=list(self.reasons))


# --------------------------------------------------------------------------------------------- HTTP transport
async def _read_response(reader: asyncio.StreamReader) -> tuple[int, int | None, bytes, float]:
    """Read one HTTP/1.1 response: (status, inference header length, body, time the headers arrived)."""
    head = await reader.readuntil(b"\r\n\r\n")
    t_head = time.perf_counter()
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, header_length = 0, None
    for line in lines[1:]:
        key, _, value = line.partition(b":")
        key = key.strip().lower()
        if key == b"content-length":
            length = int(value)
        elif key == b"inference-header-content-length":
            header_length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, header_length, body, t_head


def _error_text(body: bytes) -> str:
    try:
        return json.loads(body).get("error", body.decode(errors="replace"))
    except ValueError:
        return body.decode(errors="replace")


class _Connection:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def get_json(self, path: str) -> dict:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        status, _, body, _ = await _read_response(self.reader)
        if status != 200:
            raise MeasurementError(f"GET {path} answered {status}: {_error_text(body)}")
        return json.loads(body)

    def close(self):
        if self.writer is not None:
            self.writer.close()


@dataclass
class _PreparedRequest:
    data: bytes
    decode_outputs: Sequence[str]  # outputs returned in the body (not through shared memory)


def prepare_request(host: str, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str],
                    shm: "SharedMemoryRegions | None" = None) -> _PreparedRequest:
    """Serialise one inference request with tritonclient's protocol code, once, for repeated sending."""
    import tritonclient.http as httpclient

    infer_inputs, infer_outputs = infer_tensors(inputs, outputs, shm)
    body, json_size = httpclient.InferenceServerClient.generate_request_body(infer_inputs, infer_outputs)
    head = f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/octet-stream\r\n"
    if json_size is not None:
        head += f"Inference-Header-Content-Length: {json_size}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return _PreparedRequest(head.encode() + body, [] if shm is not None else list(outputs))


# --------------------------------------------------------------------------------------------- load generator
@dataclass
class _Window:
    start: float
    end: float
    samples: np.ndarray  # rows: (latency, send, recv, schedule delay) seconds
    server: dict[str, int]  # statistics deltas over the window
    client_cpu: float  # seconds of this process's CPU during the window
    other_cpu: float = 0.0  # % of one core used by other processes than the server's and this one
    factor: int = 1  # how many times the set window length this window lasted


def _stats_snapshot(stats: dict) -> dict[str, int]:
    s = stats["model_stats"][0]["inference_stats"]
    snap = {"success_count": s["success"]["count"], "fail_count": s["fail"]["count"]}
    for part in SERVER_STATS:
        snap[f"{part}_ns"] = s[part]["ns"]
    return snap


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def _spread(values: Sequence[float]) -> float:
    """Largest deviation from the mean, in percent of the mean."""
    mean = float(np.mean(values))
    if mean <= 0:
        return float("inf")
    return float(np.max(np.abs(np.asarray(values) - mean)) / mean * 100.0)


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
StopEarly = Callable[[Sequence["_Window"]], "str | None"]


class _LoadGenerator:
    def __init__(self, server: TritonServer, model: str, request: _PreparedRequest, point: LoadPoint,
                 settings: MeasurementSettings, stop_early: StopEarly | None = None,
                 probes: Sequence[_PreparedRequest] = (), probe_share: float = 0.0, probe_seed: int = 0):
        host, port = server.http_url.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.server, self.model, self.request = server, model, request
        self.point, self.settings, self.stop_early = point, settings, stop_early
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
        self.finished_at: list[float] = []  # perf_counter at each sample's completion
        self.completed = 0
        self.stop = False
        self.progress = asyncio.Event()

    async def _worker(self) -> None:
        conn = await _Connection(self.host, self.port).open()
        try:
            while not self.stop:
                await self._send(conn)
        finally:
            conn.close()

    def _next_request(self) -> tuple[int | None, _PreparedRequest]:
        """The request to send next: (None, the load request), or (probe index, that probe) for a share of them."""
        if self.probe_share <= 0 or self._probe_rng.random() >= self.probe_share:
            return None, self.request
        probe = int(self._probe_order[self._probes_sent % len(self.probes)])
        self._probes_sent += 1
        return probe, self.probes[probe]

    def _completed(self, t_scheduled: float, t_sent: float, t_written: float, t_head: float) -> None:
        t_done = time.perf_counter()
        self.samples.append((t_done - t_scheduled, t_written - t_scheduled, t_done - t_head, t_sent - t_scheduled))
        self.finished_at.append(t_done)
        self.completed += 1
        self.progress.set()

    async def _send(self, conn: _Connection, t_scheduled: float | None = None) -> None:
        """One request on an idle connection: the load request, or an accuracy probe in its place. Closed loop, its
        latency runs from the send; open loop, from ``t_scheduled``."""
        import tritonclient.http as httpclient

        probe, request = self._next_request()
        t_sent = time.perf_counter()
        conn.writer.write(request.data)
        t_written = time.perf_counter()
        status, header_length, body, t_head = await _read_response(conn.reader)
        if status != 200:
            raise MeasurementError(f"inference request failed with HTTP {status}: {_error_text(body)}")
        if request.decode_outputs:
            result = httpclient.InferenceServerClient.parse_response_body(body, header_length=header_length)
            decoded = {name: result.as_numpy(name) for name in request.decode_outputs}
            if probe is not None:
                self.probe_responses.append((probe, decoded))
        self._completed(t_sent if t_scheduled is None else t_scheduled, t_sent, t_written, t_head)

    async def _scheduler(self) -> None:
        """Open loop: send each request at its scheduled time on an idle connection (a new one when none is idle),
        whatever the responses do; at ``max_outstanding`` in flight, the next send waits (and is late)."""
        point, cap = self.point, self.settings.max_outstanding
        idle: list[_Connection] = []
        opened: list[_Connection] = []
        in_flight: set[asyncio.Task] = set()
        slots = asyncio.Semaphore(cap)
        failures: list[BaseException] = []
        outstanding = 0

        async def one(conn: _Connection, t_scheduled: float) -> None:
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
                    conn = await _Connection(self.host, self.port).open()
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

    async def run(self) -> tuple[list[_Window], dict[str, int], int]:
        """Run warm-up and windows; return (windows, statistics delta over the whole point, requests completed)."""
        control = await _Connection(self.host, self.port).open()
        stats_path = f"/v2/models/{self.model}/stats"
        workers: list[asyncio.Task] = []
        try:
            begin = _stats_snapshot(await control.get_json(stats_path))
            workers = ([asyncio.create_task(self._scheduler())] if self.point.open_loop else
                       [asyncio.create_task(self._worker()) for _ in range(self.point.concurrency)])
            watcher = asyncio.gather(*workers)
            windows: list[_Window] = []

            async def guarded(coro):
                done, _ = await asyncio.wait([asyncio.ensure_future(coro), watcher],
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is watcher:
                        watcher.result()  # a worker failed: raise its error
                        raise MeasurementError("all load-generator workers stopped")
                return next(iter(done)).result()

            # warm-up: a time span and at least one completed request per connection
            warmup_end = time.perf_counter() + self.settings.warmup_ms / 1000.0
            while time.perf_counter() < warmup_end or self.completed < self.concurrency:
                await guarded(self._wait_window_until(min(warmup_end, time.perf_counter() + 0.5)))
            previous = _stats_snapshot(await guarded(control.get_json(stats_path)))
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
                current = _stats_snapshot(await guarded(control.get_json(stats_path)))
                host_now = self.host_cpu.read()
                windows.append(_Window(start, end, samples, _delta(current, previous), cpu1 - cpu0,
                                       other_cpu_percent(host, host_now, end - start), factor))
                previous, index, start, host = current, stop, end, host_now
                if len(windows) >= STABLE_WINDOWS and self._stable(windows[-STABLE_WINDOWS:]):
                    break
                self.stopped_early = self.stop_early(windows) if self.stop_early is not None else None
                if self.stopped_early:
                    break
                # a busy host: lengthen the windows before giving up, after each STABLE_WINDOWS that disagreed
                if len(windows) % STABLE_WINDOWS == 0 and factor * 2 <= self.settings.max_window_factor:
                    factor *= 2
            self.stop = True
            await watcher  # each connection finishes its in-flight request
            # Triton updates its counters just after sending a response: give the last ones a moment to land
            for _ in range(20):
                end_stats = _stats_snapshot(await control.get_json(stats_path))
                total = _delta(end_stats, begin)
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

    async def _wait_window_until(self, until: float) -> None:
        self.progress.clear()
        try:
            await asyncio.wait_for(self.progress.wait(), max(0.001, until - time.perf_counter()))
        except asyncio.TimeoutError:
            pass

    def _stable(self, windows: Sequence[_Window]) -> bool:
        return _stability(windows, self.settings.stability_percentage, self.point.open_loop)[0]


def _stability(windows: Sequence[_Window], limit: float, open_loop: bool = False) -> tuple[bool, float, float]:
    """(stable, throughput spread %, latency spread %) over the given windows. Closed loop, both must be within the
    limit; open loop, the latency (the throughput follows the arrival schedule, whatever the server does)."""
    throughput = [len(w.samples) / (w.end - w.start) for w in windows]
    latency = [float(w.samples[:, 0].mean()) if len(w.samples) else 0.0 for w in windows]
    t_spread, l_spread = _spread(throughput), _spread(latency)
    return (open_loop or t_spread <= limit) and l_spread <= limit, t_spread, l_spread


def _summarise(point: LoadPoint, windows: list[_Window], total: dict[str, int], completed: int,
               settings: MeasurementSettings, protocol: str, gpu: GpuSampler | None = None,
               generator: "_LoadGenerator | None" = None) -> Measurement:
    stable_windows = windows[-STABLE_WINDOWS:]
    stable, t_spread, l_spread = _stability(stable_windows, settings.stability_percentage, point.open_loop)
    samples = np.concatenate([w.samples for w in stable_windows])
    duration = sum(w.end - w.start for w in stable_windows)
    server = {k: sum(w.server[k] for w in stable_windows) for k in stable_windows[0].server}
    per_request_ms = {part: server[f"{part}_ns"] / max(server["success_count"], 1) / 1e6 for part in SERVER_STATS}
    latency_ms = samples[:, 0] * 1e3
    requests_per_s = len(samples) / duration
    result = {
        "Batch": point.batch_size,
        # open loop: the requests in flight on average (Little's law: achieved rate x average time from send to
        # response; a request still waiting for its send is not in flight)
        "Concurrency": round(requests_per_s * float((samples[:, 0] - samples[:, 3]).mean()), 2) if point.open_loop
        else point.concurrency,
        "Inferences/Second": len(samples) * point.batch_size / duration,
        "Client Send": float(samples[:, 1].mean() * 1e3),
        "Server Queue": per_request_ms["queue"],
        "Server Compute Input": per_request_ms["compute_input"],
        "Server Compute Infer": per_request_ms["compute_infer"],
        "Server Compute Output": per_request_ms["compute_output"],
        "Client Recv": float(samples[:, 2].mean() * 1e3),
        "avg latency": float(latency_ms.mean()),
    }
    for q in (50, 90, 95, 99):
        result[f"p{q} latency"] = float(np.percentile(latency_ms, q))
    known = sum(result[p] for p in LATENCY_PARTS if p != "Network+Server Send/Recv")
    result["Network+Server Send/Recv"] = max(0.0, result["avg latency"] - known)
    result = {c: result[c] for c in RESULT_COLUMNS}

    client_cpu = sum(w.client_cpu for w in stable_windows) / duration * 100.0
    meta = {
        "loadgen": "tritonsuite engine",
        "protocol": protocol,
        "shared_memory": "system" if point.shared_memory else "none",
        "window": settings.describe_window(stable_windows[-1].factor),
        "windows": len(windows),
        "window_factors": [w.factor for w in windows],
        # how busy the host was: CPU of other processes than the server's and the load generator, % of one core
        "host_other_cpu_percent": round(float(np.mean([w.other_cpu for w in stable_windows])), 1),
        "window_host_other_cpu_percent": [round(w.other_cpu, 1) for w in windows],
        "stable_windows": len(stable_windows),
        "stability_percentage": settings.stability_percentage,
        "throughput_spread_percent": round(t_spread, 2),
        "latency_spread_percent": round(l_spread, 2),
        "measured_requests": int(len(samples)),
        "client_cpu_percent": round(client_cpu, 1),
        "client_bound": client_cpu >= settings.client_bound_percent,
        "requests_sent": completed,
        "server_success_delta": total["success_count"],
        "server_fail_delta": total["fail_count"],
        "gpu": gpu.summary(stable_windows[0].start, stable_windows[-1].end) if gpu is not None else None,
        # the evidence a later run is compared with (tritonsuite.compare): every window's throughput, and the
        # stable windows' request latencies (at most LATENCY_SAMPLES of them, evenly spaced)
        "window_throughputs": [round(len(w.samples) * point.batch_size / (w.end - w.start), 3) for w in windows],
        "latency_samples_ms": [round(float(v), 4) for v in latency_ms[_even_subsample(len(latency_ms))]],
    }
    late_percent = 0.0
    if point.open_loop:
        delay_ms = samples[:, 3] * 1e3
        tolerance_ms = schedule_tolerance_ms(point, settings)
        late_percent = float((delay_ms > tolerance_ms).mean() * 100.0)
        meta.update({
            "load": "open loop",
            "offered_rate": point.request_rate,
            "achieved_rate": round(requests_per_s, 3),  # completed requests/s over the stable windows
            "distribution": point.distribution,
            "seed": point.seed,
            "late_percent": round(late_percent, 2),  # sent more than schedule_tolerance_ms after their time
            "schedule_tolerance_ms": round(tolerance_ms, 3),
            "schedule_delay_p99_ms": round(float(np.percentile(delay_ms, 99)), 3),
            "max_outstanding": generator.max_outstanding if generator is not None else None,
        })
    else:
        meta["load"] = "closed loop"
    if generator is not None and generator.stopped_early:
        meta["stopped_early"] = generator.stopped_early
    if meta["gpu"] is None:
        meta["gpu_telemetry"] = ((gpu.reason or "no sample fell inside the stable windows") if gpu is not None
                                 else unavailable_reason(server_local=False))
    reasons, status = [], "OK"
    if not stable:
        status = "UNSTABLE"
        reasons.append(f"throughput varied {t_spread:.1f}% and latency {l_spread:.1f}% over the last "
                       f"{STABLE_WINDOWS} windows (limit {settings.stability_percentage:g}%) after {len(windows)} windows"
                       f", the last {settings.describe_window(stable_windows[-1].factor)}; other processes used "
                       f"{meta['host_other_cpu_percent']:.0f}% of a core meanwhile")
    if total["success_count"] != completed:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"server counted {total['success_count']} successful requests, client completed {completed}: "
                       f"another client used the model during measurement")
    if total["fail_count"]:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"server counted {total['fail_count']} failed requests")
    if meta["client_bound"]:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"client bound: the load generator used {client_cpu:.0f}% of a core "
                       f"(limit {settings.client_bound_percent:g}%)")
    if late_percent > settings.max_late_percent:
        status = "INVALID" if status in ("OK", "UNSTABLE") else status
        at_cap = generator is not None and generator.max_outstanding >= settings.max_outstanding
        reasons.append(f"the load generator could not keep the schedule: {late_percent:.1f}% of requests were sent "
                       f"more than {schedule_tolerance_ms(point, settings):.3g} ms late (limit {settings.max_late_percent:g}%)"
                       + (f"; the cap of {settings.max_outstanding} requests in flight (max_outstanding) was reached"
                          if at_cap else ""))
    if meta.get("stopped_early"):
        status = "STOPPED"
        reasons.insert(0, f"stopped early: {meta['stopped_early']}")
    return Measurement(point=point, result=result, meta=meta, status=status, reasons=reasons,
                       latencies_s=samples[:, 0].copy())


LATENCY_SAMPLES = 2000


def schedule_tolerance_ms(point: LoadPoint, settings: MeasurementSettings) -> float:
    """How late an open-loop send may be and still keep the schedule: ``schedule_tolerance_ms``, or a tenth of the
    mean gap between arrivals when that is longer (5 ms late on a 400 ms gap leaves the arrival process as it was)."""
    return max(settings.schedule_tolerance_ms, 100.0 / point.request_rate) if point.open_loop \
        else settings.schedule_tolerance_ms


def _even_subsample(n: int, limit: int = LATENCY_SAMPLES) -> np.ndarray:
    """Indices of at most ``limit`` of ``n`` samples, evenly spaced (all of them when ``n <= limit``)."""
    if n <= limit:
        return np.arange(n)
    return np.linspace(0, n - 1, limit).round().astype(np.int64)


def measure(server: TritonServer, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[TensorSpec],
            point: LoadPoint, settings: MeasurementSettings = MeasurementSettings(),
            stop_early: StopEarly | None = None, probes: Sequence[Mapping[str, np.ndarray]] = (),
            probe_share: float = 0.0, probe_seed: int = 0) -> Measurement:
    """Measure one load point of ``model`` with ``inputs`` (one request's tensors, batch first). ``stop_early``
    is asked after each window whether to give the point up (its row is then STOPPED, with the reason).

    ``probes`` (each one request's tensors, of the point's batch size) are sent in place of a seeded
    ``probe_share`` of the load requests; their decoded outputs come back in ``Measurement.probe_responses``
    (accuracy under load, :mod:`tritonsuite.underload`). They are requests like the others: they count in the
    row's throughput, latencies and success counts.
    """
    batch = {name: np.ascontiguousarray(array[:point.batch_size]) for name, array in inputs.items()}
    if any(len(a) != point.batch_size for a in batch.values()):
        raise ValueError(f"inputs hold fewer than {point.batch_size} samples")
    if not 0.0 <= probe_share <= 1.0:
        raise ValueError(f"probe share {probe_share!r}: expected a share from 0 to 1")
    if probes and point.shared_memory:
        raise ValueError("accuracy probes need outputs in the response body; the point uses shared memory")
    bad = [i for i, p in enumerate(probes) if any(len(a) != point.batch_size for a in p.values())]
    if bad:
        raise ValueError(f"probe {bad[0]} is not a batch of {point.batch_size} (the point's batch size)")
    server.check_alive()
    host = server.http_url.rsplit(":", 1)[0]

    async def run(shm, gpu):
        names = [t.name for t in outputs]
        request = prepare_request(host, model, batch, names, shm)
        prepared = [prepare_request(host, model, {k: np.ascontiguousarray(v) for k, v in p.items()}, names)
                    for p in probes]
        gen = _LoadGenerator(server, model, request, point, settings, stop_early, prepared, probe_share, probe_seed)
        windows, total, completed = await gen.run()
        measurement = _summarise(point, windows, total, completed, settings, "http", gpu, gen)
        if prepared:
            measurement.probe_responses = gen.probe_responses
            measurement.meta["accuracy_probes"] = {
                "share": probe_share, "seed": probe_seed, "probes": len(prepared),
                "answered": len(gen.probe_responses),
                "latencies": "counted: probe requests are in the row's throughput and latency columns"}
        return measurement

    try:
        with GpuSampler() if server.local else contextlib.nullcontext() as gpu:
            if point.shared_memory:
                if not server.local:
                    raise MeasurementError(f"system shared memory needs a server on this host; "
                                           f"{server.describe()} is not")
                with SharedMemoryRegions(server, batch, outputs, point.batch_size) as shm:
                    return asyncio.run(run(shm, gpu))
            return asyncio.run(run(None, gpu))
    except Exception as exc:
        if server.gone():
            raise server.died(f"while measuring {model} at {point.describe()} ({type(exc).__name__}: {exc})") from None
        if isinstance(exc, (OSError, asyncio.IncompleteReadError)):
            raise MeasurementError(f"measuring {model} at {point}: {type(exc).__name__}: {exc}") from None
        raise
