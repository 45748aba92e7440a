"""The measurement engine: closed-loop or open-loop load over HTTP against a Triton model, one point at a time.

Requests are built once per point with tritonclient's own protocol code (binary tensor extension, or system
shared memory references) and sent by an asyncio load generator, in one of two ways:
- closed loop (a concurrency): ``concurrency`` connections, each keeping one request in flight;
- open loop (a request rate): requests are sent on a seeded schedule (Poisson or constant arrivals) whatever the
  responses do, over as many connections as are needed (up to ``max_outstanding`` in flight). Latency is measured
  from the scheduled send time, so a slow server cannot hide its queue (coordinated omission), and a request sent
  more than ``schedule_tolerance_ms`` (or a tenth of the mean gap between arrivals, if longer) after its time is
  late: a point whose late share is significantly above ``max_late_percent`` (a one-sided binomial test on the
  counts over the stable windows, :mod:`tritonsuite.core.stats`) measured the load generator, not the server,
  and is INVALID; a point too short to tell is lengthened (``sample_windows``), not failed. Open-loop windows are judged stable on latency alone: their throughput is the schedule's (a
  Poisson count), not the server's.
After a warm-up, measurement windows (time-based, or count-based) run until the
last three agree within the stability percentage on throughput and average latency, or ``max_trials`` windows
have run (then the point is UNSTABLE). On a busy host the windows lengthen first: after each three that disagree,
they double, up to ``max_window_factor`` times the set length. Each window also records how much CPU other
processes than the server's and the load generator used (``tritonsuite.load.hostload``).

Each point yields the seeds' columns (ms):
- Client Send: handing the prepared request to the socket (open loop: from the scheduled send time); Client Recv: from
  the response headers to the whole response read (inputs are serialised once before measuring, as perf_analyzer
  does; only the accuracy probes' outputs are decoded, as perf_analyzer decodes none);
- Server Queue / Compute Input / Compute Infer / Compute Output: deltas of Triton's statistics extension over the
  stable windows, per request;
- Network+Server Send/Recv: the residual of the average client latency minus all the parts above;
- p50/p90/p95/p99/avg latency: from the raw per-request latencies of the stable windows; each percentile also
  carries its sample count and a distribution-free interval (``measurement.percentiles``), indicative where the
  samples cannot support it.
Where the server runs on this host and NVML answers, GPU utilisation, memory, power and SM clock are sampled during
the point and summarised over the stable windows (``tritonsuite.load.telemetry``).
It also records how it was measured and whether the row is valid: the server's success-count delta over the whole
point must equal the requests the client completed (else someone else used the model), no request may fail, and
the load generator's own CPU use must stay below the client-bound limit.
"""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.core.description import ModelDescription
from tritonsuite.core.settings import STABLE_WINDOWS, MeasurementSettings
from tritonsuite.core.spec import TensorSpec
from tritonsuite.load.client import SharedMemoryRegions
from tritonsuite.load.generator import LoadGenerator, Progress, StopEarly, arrival_gaps, run_together
from tritonsuite.load.exchange import prepare
from tritonsuite.load.interrupt import run_interruptible
from tritonsuite.load.point import LoadPoint, Measurement, MeasurementError
from tritonsuite.load.kinds import Driver, driver_for
from tritonsuite.load.telemetry import GpuSampler
from tritonsuite.load.windows import LATENCY_SAMPLES, schedule_tolerance_ms, summarise
from tritonsuite.server import TritonServer

__all__ = ["LATENCY_SAMPLES", "LoadPoint", "Measurement", "MeasurementError", "MeasurementSettings", "StopEarly",
           "Progress", "Traffic", "arrival_gaps", "measure", "measure_together",
           "schedule_tolerance_ms"]


@dataclass(frozen=True)
class Traffic:
    """One deployment's share of a point measured together with others (:func:`measure_together`): the model, one
    request's tensors, its load point (a concurrency or a request rate), its description (what kind it is, read by
    its driver: :func:`tritonsuite.load.kinds.driver_for`; a sequence model's says how its sequences are sent) and
    optional accuracy probes."""

    model: str
    inputs: Mapping[str, np.ndarray]
    outputs: Sequence[TensorSpec]
    point: LoadPoint
    description: ModelDescription
    probes: Sequence[Mapping[str, np.ndarray]] = ()
    probe_share: float = 0.0
    probe_seed: int = 0

    @property
    def driver(self) -> Driver:
        return driver_for(self.description)


def measure(server: TritonServer, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[TensorSpec],
            point: LoadPoint, settings: MeasurementSettings = MeasurementSettings(),
            stop_early: StopEarly | None = None, *, description: ModelDescription,
            probes: Sequence[Mapping[str, np.ndarray]] = (), probe_share: float = 0.0, probe_seed: int = 0,
            progress: Progress | None = None) -> Measurement:
    """Measure one load point of ``model`` with ``inputs`` (one request's tensors, batch first). ``stop_early``
    is asked after each window whether to give the point up (its row is then STOPPED, with the reason);
    ``progress`` is told after the warm-up starts and after each window how the point is going and what it waits
    for (:func:`tritonsuite.load.windows.progress_line`).

    ``probes`` (each one request's tensors, of the point's batch size) are sent in place of a seeded
    ``probe_share`` of the load requests; their decoded outputs come back in ``Measurement.probe_responses``
    (accuracy under load, :mod:`tritonsuite.judge.underload`). They are requests like the others: they count in the
    row's throughput, latencies and success counts.

    ``model`` may name a version (``name:version``: requests and statistics go to that version). ``description``
    (:mod:`tritonsuite.core.description`) says what kind of deployment it is, and its driver
    (:func:`tritonsuite.load.kinds.driver_for`) what that changes: a batchless one (``max_batch_size: 0``) is
    sent batch 1 without the batch dimension; for an ensemble (its composing models, nested ones included) or a BLS
    model (the models it calls, as ``--bls-composing-models`` names them) the row's ``measurement["composing"]``
    gives each one's requests, queue and compute per request over the same windows; a decoupled one is driven over
    gRPC bidirectional streams (:mod:`tritonsuite.load.streams`: complete at the final response, the row adds time
    to first response, inter-response latency, responses per request and per second); a sequence model gets the
    request pattern of :mod:`tritonsuite.load.kinds.sequence` (sent as the description's ``sequences`` say:
    perf_analyzer's sequence options, their defaults when None).
    """
    return _measure(server, [Traffic(model, inputs, outputs, point, description, probes, probe_share, probe_seed)],
                    settings, stop_early, progress)[0]


def measure_together(server: TritonServer, traffic: Sequence[Traffic],
                     settings: MeasurementSettings = MeasurementSettings(),
                     progress: Progress | None = None) -> list[Measurement]:
    """Several deployments on one server at once (a mix, :mod:`tritonsuite.load.mix`): each one's load generator
    started together in one event loop, measured over the same windows (time-based) until every deployment's last
    windows agree. One Measurement per deployment, in order, each with its own rows' columns and status; its
    ``client_cpu_percent`` is the whole load generator's (judged against the client-bound limit: on a small host
    the generator competes with the server), ``deployment_client_cpu_percent`` the part this deployment's traffic
    took (thread CPU of its own task steps)."""
    if not traffic:
        raise ValueError("measure_together needs at least one deployment's traffic")
    names = [t.model for t in traffic]
    if len(set(names)) != len(names):
        raise ValueError(f"a deployment appears twice in one mix: {', '.join(names)}")
    if any(t.point.shared_memory for t in traffic):
        raise ValueError("a mix sends its tensors over the network; shared memory is for one offline point")
    return _measure(server, traffic, settings, None, progress)


def request_bound(settings: MeasurementSettings, point: LoadPoint) -> float:
    """One request's bound under load: the hang bound for each request that may be in flight before it (closed
    loop: the concurrency; open loop: one, since late sends are the point's own verdict)."""
    return settings.timeout_s * (1 if point.open_loop else max(1, point.concurrency))


def _measure(server: TritonServer, traffic: Sequence[Traffic], settings: MeasurementSettings,
             stop_early: StopEarly | None, progress: Progress | None) -> list[Measurement]:
    drivers = [t.driver for t in traffic]
    for t, driver in zip(traffic, drivers):
        check_traffic(t, driver)
    server.check_alive()
    host = server.http_url.rsplit(":", 1)[0]
    mixed = len(traffic) > 1

    async def run(shm, gpu):
        generators = []
        for i, t in enumerate(traffic):
            driver, batch = drivers[i], request_tensors(t)
            transport = driver.transport(server, request_bound(settings, t.point), t.point)
            grpc, names = transport is not None, [o.name for o in t.outputs]
            request = prepare(host, t.model, batch, names, grpc, driver.batched, shm, decode=False)
            prepared = [prepare(host, t.model, {k: np.ascontiguousarray(v) for k, v in p.items()}, names, grpc,
                                driver.batched) for p in t.probes]
            generators.append(LoadGenerator(server, t.model, request, t.point, settings, stop_early, prepared,
                                            t.probe_share, t.probe_seed, transport,
                                            on_progress=progress if i == 0 else None,
                                            sequences=driver.pattern(request, transport is not None, t.point),
                                            composing=driver.composing()))
        results = await run_together(generators)
        measurements = []
        for t, driver, gen, (windows, total, completed) in zip(traffic, drivers, generators, results):
            measurement = summarise(t.point, windows, total, completed, settings,
                                    driver.protocol(t.point, gen.transport), gpu, gen.max_outstanding,
                                    gen.stopped_early, gen.pool)
            driver.summarise(measurement, windows, gen)
            if hasattr(gen.transport, "reconnects"):  # HTTP: connections a proxy or the server ended, reopened
                measurement.meta["http_reconnects"] = gen.transport.reconnects
            if mixed:
                stable = windows[-STABLE_WINDOWS:] if gen.pool is None else windows[gen.pool[0]:gen.pool[1]]
                duration = sum(w.end - w.start for w in stable)
                measurement.meta["deployment_client_cpu_percent"] = round(
                    sum(w.own_cpu for w in stable) / duration * 100.0, 1)
                measurement.meta["window_bounds_s"] = [[round(w.start - windows[0].start, 3),
                                                        round(w.end - windows[0].start, 3)] for w in windows]
            if t.probes:
                measurement.probe_responses = gen.probe_responses
                measurement.meta["accuracy_probes"] = {
                    "share": t.probe_share, "seed": t.probe_seed, "probes": len(t.probes),
                    "answered": len(gen.probe_responses),
                    "latencies": "counted: probe requests are in the row's throughput and latency columns"}
            measurements.append(measurement)
        return measurements

    point, names = traffic[0].point, ", ".join(t.model for t in traffic)
    try:
        with GpuSampler() if server.local else contextlib.nullcontext() as gpu:
            if point.shared_memory:
                if not server.local:
                    raise MeasurementError(f"system shared memory needs a server on this host; "
                                           f"{server.describe()} is not")
                with SharedMemoryRegions(server, request_tensors(traffic[0]), traffic[0].outputs,
                                         point.batch_size) as shm:
                    return run_interruptible(run(shm, gpu))
            return run_interruptible(run(None, gpu))
    except Exception as exc:
        if server.gone():
            raise server.died(f"while measuring {names} at {point.describe()} ({type(exc).__name__}: {exc})") from None
        if isinstance(exc, (OSError, asyncio.IncompleteReadError)):
            raise MeasurementError(f"measuring {names} at {point}: {type(exc).__name__}: {exc}") from None
        raise


def request_tensors(t: Traffic) -> dict[str, np.ndarray]:
    return {name: np.ascontiguousarray(array[:t.point.batch_size]) for name, array in t.inputs.items()}


def check_traffic(t: Traffic, driver: Driver) -> None:
    point, probes = t.point, t.probes
    if any(len(a) != point.batch_size for a in request_tensors(t).values()):
        raise ValueError(f"inputs hold fewer than {point.batch_size} samples")
    if not 0.0 <= t.probe_share <= 1.0:
        raise ValueError(f"probe share {t.probe_share!r}: expected a share from 0 to 1")
    if probes and point.shared_memory:
        raise ValueError("accuracy probes need outputs in the response body; the point uses shared memory")
    bad = [i for i, p in enumerate(probes) if any(len(a) != point.batch_size for a in p.values())]
    if bad:
        raise ValueError(f"probe {bad[0]} is not a batch of {point.batch_size} (the point's batch size)")
    driver.check(t.model, point, probes)
