"""perf_analyzer 2.51 as a second load generator: the same points, the same server, the same row schema.

NVIDIA's own load generator measures a point the suite's engine (:mod:`tritonsuite.load.engine`) measures, so a reader
can check the engine against it. Usable without pytest::

    pa = locate()                                  # the binary, fetched once and checked; its library directory
    m = measure_with_perf_analyzer(server, model, inputs, spec.outputs, LoadPoint(4, 1, shared_memory=True),
                                   settings, pa)   # a tritonsuite.load.engine.Measurement, as measure() returns

- **The binary** is ``tritonclient-2.51.0.data/data/bin/perf_analyzer`` of the Linux x86_64 wheel of
  ``tritonclient==2.51.0`` (later perf_analyzer wheels need glibc 2.38), fetched once with pip, the wheel and the
  member checked against pinned sha256 (:func:`tritonsuite.models.datasets.wheel_member`) and kept in the data cache;
  ``TRITONSUITE_PERF_ANALYZER`` names a binary of your own instead.
- **Its libraries**: it links ``libb64.so.0d`` and ``libcudart.so.12``. The nvidia-pytriton wheel (the embedded
  server's) ships both under ``nvidia_pytriton.libs/`` with hashed names; :func:`library_dir` links them under the
  plain names in a private directory put on ``LD_LIBRARY_PATH``.
- **The command**: ``-m model -u host:port -i http -b B --concurrency-range C:C`` (one point; 2.51's third field is
  an additive step), synchronous calls (one request in flight per concurrent stream: the engine's closed loop),
  ``--shared-memory system`` for offline points, the suite's window, stability percentage and max trials
  (``--measurement-mode time_windows --measurement-interval`` or ``count_windows --measurement-request-count``),
  and ``--input-data`` a JSON file holding the very tensors the engine sends (one step per sample, ``b64``).
  No shell; a bounded wait, with the server's liveness checked every 0.2 s; perf_analyzer runs in its own process
  group, dies with this process, and is killed on any way out.
- **The row**: its CSV (``-f``, values in usec) is the seeds' columns, so it maps one to one onto
  :data:`tritonsuite.core.rows.RESULT_COLUMNS` (ms); its profile export gives the stable windows' request latencies
  (p50/p99 evidence for ``--compare`` and pytest-benchmark) and ``-v`` every window's throughput. The row's
  measurement says ``loadgen: perf_analyzer 2.51``, the command, the window and the stability criterion.
  perf_analyzer's own "Failed to obtain stable measurement" (it then writes no CSV) is UNSTABLE with its message
  and the last windows' throughput and average latency; as the engine does (and as Model Analyzer does with
  perf_analyzer), the window is doubled after such a failure, up to ``max_window_factor``.
- **Cannot start** (no wheel, wrong platform, a library missing, the binary does not run): one line,
  :class:`PerfAnalyzerUnavailable`.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonsuite.core.access import redact
from tritonsuite.core.children import dying_with_parent
from tritonsuite.core.rows import RESULT_COLUMNS
from tritonsuite.core.settings import STABLE_WINDOWS, MeasurementSettings
from tritonsuite.core.spec import TensorSpec
from tritonsuite.load.composing import parse_composing
from tritonsuite.load.perfanalyzer_binary import (  # noqa: F401 - the binary's names, re-exported
    DISTRIBUTION, VERSION, WHEEL_PLATFORM, WHEEL_SHA256, MEMBER, MEMBER_SHA256, LOADGEN, LOADGEN_DESCRIPTION,
    LIBRARIES, BINARY_ENV, PerfAnalyzer, PerfAnalyzerUnavailable, check_starts, default, fetch_binary,
    library_dir, locate, pytriton_libs, unavailable_reason)
from tritonsuite.load.point import LoadPoint, Measurement, MeasurementError
from tritonsuite.load.perfanalyzer_output import (  # noqa: F401 - what it writes, read; re-exported
    CSV_COLUMNS, UNSTABLE_MARK, ExportedLatencies, last_line, parse_csv, parse_export, parse_passes,
    parse_request_count, unstable_message)
from tritonsuite.load.windows import LATENCY_SAMPLES, even_subsample, perf_analyzer_status, spread

POLL_S = 0.2


#: names this module would write failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("reasons",)
#: the failure reasons of a point perf_analyzer measured are written and registered beside the engine's, by
#: :func:`tritonsuite.load.windows.perf_analyzer_status` (tritonsuite.core.reasons); this module writes none
REASONS = ()


# --------------------------------------------------------------------------------------------------- the command
def write_input_data(inputs: Mapping[str, np.ndarray], path: Path) -> Path:
    """perf_analyzer's ``--input-data`` JSON holding exactly ``inputs`` (batch first): one step per sample, each
    tensor's raw bytes as ``b64`` with its per-sample shape. For a request of batch B perf_analyzer takes B
    consecutive steps, so with B steps every request carries the engine's B samples."""
    batch = {len(a) for a in inputs.values()}
    if len(batch) != 1:
        raise ValueError(f"inputs disagree on the batch size: {sorted(batch)}")
    steps = []
    for i in range(batch.pop()):
        step = {}
        for name, array in inputs.items():
            sample = np.ascontiguousarray(array[i])
            if sample.dtype == object:  # BYTES: perf_analyzer's JSON strings
                step[name] = {"content": [v.decode() if isinstance(v, bytes) else str(v) for v in sample.reshape(-1)],
                              "shape": list(sample.shape)}
                continue
            step[name] = {"b64": base64.b64encode(sample.tobytes()).decode("ascii"), "shape": list(sample.shape)}
        steps.append(step)
    path.write_text(json.dumps({"data": steps}), encoding="utf-8")
    return path


def output_region_bytes(outputs: Sequence[TensorSpec]) -> int | None:
    """``--output-shared-memory-size`` (bytes per sample and output) where an output's shape is dynamic: the largest
    output at its ``max_shape``; None when every output is fixed (perf_analyzer sizes those itself)."""
    sizes = []
    for t in outputs:
        if all(d >= 0 for d in t.shape):
            continue
        if t.max_shape is None:
            raise MeasurementError(f"output {t.name} has a dynamic shape {t.shape} and no max_shape: perf_analyzer "
                                   f"cannot size its shared-memory region")
        sizes.append(int(np.prod(t.max_shape)) * t.numpy_dtype.itemsize)
    return max(sizes) if sizes else None


def build_command(pa: PerfAnalyzer, model: str, url: str, point: LoadPoint, settings: MeasurementSettings,
                  input_data: Path, csv_file: Path, export_file: Path, factor: int = 1,
                  output_bytes: int | None = None, extra: Sequence[str] = ()) -> list[str]:
    """perf_analyzer's argv for one point (no shell): the suite's window lengthened ``factor`` times; ``extra``: a
    deployment kind's own options (its driver's ``arguments()``: sequences, streaming, BLS composing models)."""
    from tritonsuite.core.description import model_and_version

    c = point.concurrency
    name, version = model_and_version(model)
    argv = [str(pa.binary), "-m", name] + (["-x", version] if version else []) + [
        "-u", url, "-i", point.protocol, "-b", str(point.batch_size), "--concurrency-range", f"{c}:{c}",
        "--async" if "--streaming" in extra else "--sync", *extra]
    if settings.window_requests > 0:
        argv += ["--measurement-mode", "count_windows",
                 "--measurement-request-count", str(settings.window_requests * factor)]
    else:
        argv += ["--measurement-mode", "time_windows",
                 "--measurement-interval", str(max(1, round(settings.window_ms * factor)))]
    argv += ["--stability-percentage", f"{settings.stability_percentage:g}", "--max-trials", str(settings.max_trials),
             "--shared-memory", "system" if point.shared_memory else "none"]
    if point.shared_memory and output_bytes:
        argv += ["--output-shared-memory-size", str(output_bytes)]
    argv += ["--input-data", str(input_data), "-f", str(csv_file), "--verbose-csv",
             "--profile-export-file", str(export_file), "-v"]
    return argv


# ------------------------------------------------------------------------------------------------------ running
def run_timeout_s(settings: MeasurementSettings, factor: int) -> float:
    """The bound on one perf_analyzer run: every window it may take, twice over, plus a request timeout."""
    if settings.window_requests > 0:
        return settings.max_trials * settings.timeout_s
    return 30.0 + 2.0 * settings.max_trials * settings.window_ms * factor / 1000.0 + settings.timeout_s


@dataclass
class _Run:
    returncode: int
    output: str
    seconds: float
    cpu_seconds: float  # perf_analyzer's own CPU (user + system), its last reading
    other_cpu_percent: float


def _run(argv: list[str], env: dict, server, timeout_s: float, log: Path) -> _Run:
    import psutil

    from tritonsuite.load.hostload import HostCpu, other_cpu_percent

    cpu, pa_pid = 0.0, None
    host = HostCpu(lambda: [*server.process_ids(), *([pa_pid] if pa_pid else [])])
    with open(log, "wb") as out:
        start, before = time.perf_counter(), host.read()
        after = before
        proc = subprocess.Popen(dying_with_parent(argv), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        pa_pid = proc.pid
        try:
            handle = psutil.Process(proc.pid)
            while proc.poll() is None:
                with contextlib.suppress(psutil.Error):
                    t = handle.cpu_times()
                    cpu = t.user + t.system
                    after = host.read()  # while perf_analyzer is alive, so its time is its own
                if server.gone():
                    raise server.died(f"while perf_analyzer measured ({shlex.join(argv[1:5])})")
                if time.perf_counter() - start > timeout_s:
                    tail = last_line(log.read_text(encoding="utf-8", errors="replace"))
                    raise MeasurementError(f"perf_analyzer did not finish within {timeout_s:.0f} s (its last line: "
                                           f"{tail})")
                time.sleep(POLL_S)
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    seconds = time.perf_counter() - start
    other = other_cpu_percent(before, after, seconds) if cpu else 0.0
    return _Run(proc.returncode, log.read_text(encoding="utf-8", errors="replace"), seconds, cpu, other)


def _server_counts(server, model: str) -> dict[str, int]:
    from tritonsuite.core.description import model_and_version

    client = server.client(timeout=30.0)
    try:
        name, version = model_and_version(model)
        stats = client.get_inference_statistics(name, version) if version else client.get_inference_statistics(name)
    finally:
        client.close()
    s = stats["model_stats"][0]["inference_stats"]
    return {"success_count": int(s["success"]["count"]), "fail_count": int(s["fail"]["count"])}


def measure_with_perf_analyzer(server, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[TensorSpec],
                               point: LoadPoint, settings: MeasurementSettings | None = None,
                               pa: PerfAnalyzer | None = None, extra: Sequence[str] = ()) -> Measurement:
    """Measure one point of ``model`` with perf_analyzer; the same :class:`Measurement` (and row) as
    :func:`tritonsuite.load.engine.measure`, ``meta["loadgen"]`` saying who measured it."""
    settings = settings or MeasurementSettings()
    batch = {name: np.ascontiguousarray(array[:point.batch_size]) for name, array in inputs.items()}
    if any(len(a) != point.batch_size for a in batch.values()):
        raise ValueError(f"inputs hold fewer than {point.batch_size} samples")
    if point.shared_memory and not server.local:
        raise MeasurementError(f"system shared memory needs a server on this host; {server.describe()} is not")
    pa = pa or default()
    server.check_alive()
    output_bytes = output_region_bytes(outputs) if point.shared_memory else None
    with tempfile.TemporaryDirectory(prefix="tritonsuite-pa-") as tmp:
        work = Path(tmp)
        data = write_input_data(batch, work / "input_data.json")
        begin = _server_counts(server, model)
        passes: list[tuple[float, float]] = []
        factors: list[int] = []
        factor, runs = 1, []
        while True:
            url = server.grpc_url if point.protocol == "grpc" else \
                ("https://" if server.access.https else "") + server.http_url
            argv = build_command(pa, model, url, point, settings, data, work / f"result-{factor}.csv",
                                 work / f"export-{factor}.json", factor, output_bytes,
                                 [*extra, *server.access.perf_analyzer_args(point.protocol)])
            run = _run(argv, pa.environment(), server, run_timeout_s(settings, factor), work / f"log-{factor}.txt")
            runs.append(run)
            these = parse_passes(run.output)
            passes += these
            factors += [factor] * len(these)
            unstable = unstable_message(run.output) if run.returncode != 0 else None
            if run.returncode != 0 and unstable is None:
                raise MeasurementError(f"perf_analyzer exited {run.returncode}: {last_line(run.output)}")
            if unstable is None or factor * 2 > settings.max_window_factor:
                break
            factor *= 2  # as the engine does on a busy host, and Model Analyzer does with perf_analyzer
        end = _server_counts(server, model)
        result_csv = work / f"result-{factor}.csv"
        export = work / f"export-{factor}.json"
        if unstable is None:
            if not result_csv.is_file():
                raise MeasurementError(f"perf_analyzer wrote no CSV: {last_line(run.output)}")
            result = parse_csv(result_csv.read_text(encoding="utf-8"), point.batch_size)
            exported = (parse_export(export.read_text(encoding="utf-8", errors="replace"), len(these))
                        if export.is_file() else
                        ExportedLatencies(np.empty(0), whole=False, cut="perf_analyzer wrote no export file"))
        else:
            result, exported = _unstable_figures(point, passes[-STABLE_WINDOWS:]), None
    return _measurement(point, settings, pa, argv, result, exported, passes, factors, factor, runs,
                        {k: end[k] - begin[k] for k in end}, unstable)


def _unstable_figures(point: LoadPoint, last: Sequence[tuple[float, float]]) -> dict[str, float | None]:
    """What an unstable point still tells: throughput and average latency over its last windows; the rest '-'."""
    result: dict[str, float | None] = {c: None for c in RESULT_COLUMNS}
    result.update({"Batch": point.batch_size, "Concurrency": point.concurrency})
    if last:
        result["Inferences/Second"] = float(np.mean([t for t, _ in last]))
        result["avg latency"] = float(np.mean([lat for _, lat in last]))
    return result


def _measurement(point, settings, pa, argv, result, exported, passes, factors, factor, runs, counts,
                 unstable) -> Measurement:
    stable_passes = passes[-STABLE_WINDOWS:]
    t_spread = spread([t for t, _ in stable_passes]) if stable_passes else float("nan")
    l_spread = spread([lat for _, lat in stable_passes]) if stable_passes else float("nan")
    last = runs[-1]
    client_cpu = last.cpu_seconds / last.seconds * 100.0 if last.seconds > 0 else 0.0
    window = (f"{settings.window_requests * factor} requests" if settings.window_requests > 0
              else f"{settings.window_ms * factor:g} ms")
    if factor > 1:
        window += f", lengthened x{factor} after perf_analyzer found no stable measurement"
    command = [Path(argv[0]).name, *(redact(a) for a in argv[1:])]  # a header's value never in the row
    measured = None if exported is None else parse_request_count(last.output)
    if exported is not None and measured is None:
        measured = len(exported.latencies)
    meta = {
        "loadgen": LOADGEN_DESCRIPTION,
        "loadgen_command": shlex.join(command),
        "protocol": point.protocol,
        "shared_memory": "system" if point.shared_memory else "none",
        "window": window,
        "windows": len(passes),
        "window_factors": factors,
        "stable_windows": STABLE_WINDOWS,
        "stability_percentage": settings.stability_percentage,
        "stability": "perf_analyzer's own: the last 3 windows' throughput and average latency within the "
                     "stability percentage",
        "throughput_spread_percent": round(t_spread, 2),
        "latency_spread_percent": round(l_spread, 2),
        # perf_analyzer's own count; the latency samples are its export's records, all of them unless it was cut
        "measured_requests": measured,
        "exported_requests": len(exported.latencies) if exported is not None else None,
        # perf_analyzer's CPU over its whole run (warm-up and every window), % of one core
        "client_cpu_percent": round(client_cpu, 1),
        "client_bound": client_cpu >= settings.client_bound_percent,
        "host_other_cpu_percent": round(last.other_cpu_percent, 1),
        "server_success_delta": counts["success_count"],
        "server_fail_delta": counts["fail_count"],
        "gpu": None,
        "gpu_telemetry": "not sampled while perf_analyzer measures",
        "window_throughputs": [round(t, 3) for t, _ in passes],
        **({"composing": steps} if (steps := parse_composing(last.output)) else {}),  # an ensemble's steps
    }
    latencies = exported.latencies if exported is not None and len(exported.latencies) else None  # none: no rounds
    if exported is not None and not exported.whole:
        meta["latency_export"] = (f"{exported.cut}: the latencies of {meta['exported_requests']} of the "
                                  f"{meta['measured_requests']} requests, the first in time (docs/perf-analyzer.md)")
    if latencies is not None:
        ms = latencies * 1e3
        meta["latency_samples_ms"] = [round(float(v), 4) for v in ms[even_subsample(len(ms), LATENCY_SAMPLES)]]
    status, reasons = perf_analyzer_status(meta, unstable, t_spread, l_spread, client_cpu, settings)
    return Measurement(point=point, result=result, meta=meta, status=status, reasons=reasons,
                       latencies_s=latencies)
