"""Measurement windows and what a point's row is made of: Triton's statistics deltas per window, the stability of the
last windows, and the summary into the seeds' columns with the row's status and reasons."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tritonsuite.core.rows import LATENCY_PARTS, RESULT_COLUMNS
from tritonsuite.core.settings import STABLE_WINDOWS, MeasurementSettings
from tritonsuite.load.interrupt import event_loop_name
from tritonsuite.load.point import LoadPoint, Measurement
from tritonsuite.load.telemetry import GpuSampler, unavailable_reason
from tritonsuite.core.reasons import reason

SERVER_STATS = ("queue", "compute_input", "compute_infer", "compute_output")
SERVER_COLUMNS = ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")
#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("reasons",)
#: the longest wait for requests already answered to show in Triton's statistics
COUNT_WAIT_S = 5.0


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("throughput varied {}% and latency {}% over the last {} windows (limit {}%) after {} windows, the last "
           "{}; other processes used {}% of a core meanwhile",
           "unit/test_point_verdicts.py::test_windows_that_disagree_beyond_the_limit_are_unstable"),
    reason("server counted {} successful requests, client completed {}: another client used the model during "
           "measurement",
           "unit/test_point_verdicts.py::test_another_clients_requests_and_uncounted_ones_make_the_point_invalid"),
    reason("server counted {} requests, client completed {}: the server's statistics had not counted them {} s "
           "after the last",
           "unit/test_point_verdicts.py::test_another_clients_requests_and_uncounted_ones_make_the_point_invalid"),
    reason("server counted {} failed requests",
           "unit/test_point_verdicts.py::test_failed_requests_make_the_point_invalid_and_keep_an_unstable_ones_status",
           "unit/test_point_verdicts.py::test_perf_analyzers_point_is_judged_on_what_it_tells"),
    reason("client bound: the load generator used {}% of a core (limit {}%)",
           "unit/test_point_verdicts.py::test_a_load_generator_at_its_cpu_limit_is_client_bound"),
    reason("the load generator could not keep the schedule: {}; the cap of {} requests in flight (max_outstanding) "
           "was reached",
           "unit/test_point_verdicts.py::test_sends_significantly_later_than_the_schedule_make_the_point_invalid"),
    reason("stopped early: {}", "test_engine.py::test_a_point_can_be_given_up_early",
           "unit/test_point_verdicts.py::test_a_point_given_up_early_is_stopped_whatever_else_it_shows",
           "test_load.py::test_a_bound_no_load_meets_fails_naming_the_answer"),
    reason("perf_analyzer: {} (last windows {}; throughput varied {}% and latency {}%; other processes used {}% "
           "of a core meanwhile)",
           "unit/test_point_verdicts.py::test_perf_analyzers_point_is_judged_on_what_it_tells",
           "unit/test_perfanalyzer.py::test_perf_analyzers_unstable_point_lengthens_then_is_unstable_with_its_message"),
    reason("client bound: perf_analyzer used {}% of a core (limit {}%)",
           "unit/test_point_verdicts.py::test_perf_analyzers_point_is_judged_on_what_it_tells"),
)


@dataclass
class Window:
    start: float
    end: float
    samples: np.ndarray  # rows: (latency, send, recv, schedule delay) seconds
    server: dict[str, int]  # statistics deltas over the window
    client_cpu: float  # seconds of this process's CPU during the window
    other_cpu: float = 0.0  # % of one core used by other processes than the server's and this one
    factor: int = 1  # how many times the set window length this window lasted
    own_cpu: float = 0.0  # in a mix: seconds of the load generator's CPU this deployment's traffic took
    timings: list | None = None  # a streaming transport's per-request response timings (load.streams.StreamTiming)


def stats_snapshot(stats: dict) -> dict[str, int]:
    s = stats["model_stats"][0]["inference_stats"]
    return {"success_count": s["success"]["count"], "fail_count": s["fail"]["count"],
            **{f"{part}_ns": s[part]["ns"] for part in SERVER_STATS}}


def snapshot(stats: dict, model: str, composing: Sequence[str] = ()) -> dict[str, int]:
    """The counters of ``model`` (``name`` or ``name:version``) and, for an ensemble, of each composing model as
    ``<composing>|<counter>`` (summed over its versions), from one statistics response (``/v2/models/stats`` when
    ``composing`` is given; the model's own otherwise)."""
    if not composing:
        return stats_snapshot(stats)
    name, _, version = model.partition(":")
    entries = stats["model_stats"]
    own = [e for e in entries if e["name"] == name and (not version or e["version"] == version)]
    snap = stats_snapshot({"model_stats": own[-1:]})
    for step in composing:
        for entry in (e for e in entries if e["name"] == step):
            for key, value in stats_snapshot({"model_stats": [entry]}).items():
                snap[f"{step}|{key}"] = snap.get(f"{step}|{key}", 0) + value
    return snap


def composing_columns(server: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per composing model (the ``<model>|<counter>`` sums of the pooled windows): its requests, those per request of
    the deployment ("per request": a BLS model's calls) and its Server Queue and Compute Input/Infer/Output per
    request in ms (Triton's statistics, perf_analyzer's per-composing figures)."""
    found: dict[str, dict[str, float]] = {}
    outer = server.get("success_count", 0)
    for key in server:
        step, sep, counter = key.partition("|")
        if not sep or counter != "success_count":
            continue
        count = server[key]
        found[step] = {"requests": count, "per request": round(count / outer, 3) if outer else None,
                       **{column: server[f"{step}|{part}_ns"] / max(count, 1) / 1e6
                          for part, column in zip(SERVER_STATS, SERVER_COLUMNS)}}
    return found


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def spread(values: Sequence[float]) -> float:
    """Largest deviation from the mean, in percent of the mean."""
    mean = float(np.mean(values))
    if mean <= 0:
        return float("inf")
    return float(np.max(np.abs(np.asarray(values) - mean)) / mean * 100.0)


def stability(windows: Sequence[Window], limit: float, open_loop: bool = False) -> tuple[bool, float, float]:
    """(stable, throughput spread %, latency spread %) over the given windows. Closed loop, both must be within the
    limit; open loop, the latency (the throughput follows the arrival schedule, whatever the server does)."""
    throughput = [len(w.samples) / (w.end - w.start) for w in windows]
    latency = [float(w.samples[:, 0].mean()) if len(w.samples) else 0.0 for w in windows]
    t_spread, l_spread = spread(throughput), spread(latency)
    return (open_loop or t_spread <= limit) and l_spread <= limit, t_spread, l_spread


def progress_line(windows: Sequence[Window], settings: MeasurementSettings, open_loop: bool = False,
                  stopped_early: str | None = None) -> str:
    """One line on a point in progress, after its latest window: how far it is and what it is waiting for, e.g.
    "window 4 of <=10 (x2), 812 requests; last 3: throughput spread 12.3%, latency 4.1%: waiting for the last 3
    windows to agree within 10%". The engine passes it to ``measure(progress=...)``; a terminal shows it."""
    n, limit = len(windows), settings.stability_percentage
    length = f" (x{windows[-1].factor})" if windows and windows[-1].factor > 1 else ""
    line = f"window {n} of <={settings.max_trials}{length}, {sum(len(w.samples) for w in windows)} requests"
    if stopped_early:
        return f"{line}; given up: {stopped_early}"
    if n < STABLE_WINDOWS:
        return f"{line}; waiting for {STABLE_WINDOWS} windows to compare (latency{'' if open_loop else ' and throughput'}" \
               f" within {limit:g}%)"
    stable, t_spread, l_spread = stability(windows[-STABLE_WINDOWS:], limit, open_loop)
    spreads = (f"latency spread {l_spread:.1f}%" if open_loop else
               f"throughput spread {t_spread:.1f}%, latency {l_spread:.1f}%")
    if stable:
        return f"{line}; last {STABLE_WINDOWS}: {spreads}: stable"
    if n >= settings.max_trials:
        return f"{line}; last {STABLE_WINDOWS}: {spreads}: no {STABLE_WINDOWS} windows agreed within {limit:g}% " \
               f"in {settings.max_trials}: UNSTABLE"
    return f"{line}; last {STABLE_WINDOWS}: {spreads}: waiting for the last {STABLE_WINDOWS} windows to agree " \
           f"within {limit:g}%"


def summarise(point: LoadPoint, windows: list[Window], total: dict[str, int], completed: int,
               settings: MeasurementSettings, protocol: str, gpu: GpuSampler | None = None,
               max_outstanding: int | None = None, stopped_early: str | None = None,
               pool: tuple[int, int] | None = None) -> Measurement:
    """The row of a point from its windows: the seeds' columns over the last STABLE_WINDOWS (or the windows
    ``pool`` = (start, stop) indexes, when the generator pooled more for the samples its percentiles need), how it
    was measured, and its status with reasons. ``max_outstanding``/``stopped_early``: what the open-loop generator
    reached, and why the point was given up early, if it was."""
    stable_windows = windows[-STABLE_WINDOWS:] if pool is None else windows[pool[0]:pool[1]]
    stable, t_spread, l_spread = stability(stable_windows, settings.stability_percentage, point.open_loop)
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
    estimates = percentile_estimates(latency_ms, settings)
    for q, estimate in estimates.items():
        result[f"p{q} latency"] = estimate.value
    known = sum(result[p] for p in LATENCY_PARTS if p != "Network+Server Send/Recv")
    result["Network+Server Send/Recv"] = max(0.0, result["avg latency"] - known)
    result = {c: result[c] for c in RESULT_COLUMNS}

    client_cpu = sum(w.client_cpu for w in stable_windows) / duration * 100.0
    steps = composing_columns(server)
    meta = {**({"composing": steps} if steps else {}),
        "loadgen": "tritonsuite engine",
        "client_event_loop": event_loop_name(),
        "protocol": protocol,
        "shared_memory": "system" if point.shared_memory else "none",
        "window": settings.describe_window(stable_windows[-1].factor),
        "windows": len(windows),
        "window_factors": [w.factor for w in windows],
        # how busy the host was: CPU of other processes than the server's and the load generator, % of one core
        "host_other_cpu_percent": round(float(np.mean([w.other_cpu for w in stable_windows])), 1),
        "window_host_other_cpu_percent": [round(w.other_cpu, 1) for w in windows],
        "stable_windows": len(stable_windows),
        # which windows (start, stop) the row is made of: the last STABLE_WINDOWS, or more when the point measured on
        # for its percentiles' samples or an undecided share verdict (settings.sample_windows)
        "pooled_windows": list(pool) if pool is not None else [len(windows) - len(stable_windows), len(windows)],
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
        # the evidence a later run is compared with (tritonsuite.judge.compare): every window's throughput, and the
        # stable windows' request latencies (at most LATENCY_SAMPLES of them, evenly spaced)
        "window_throughputs": [round(len(w.samples) * point.batch_size / (w.end - w.start), 3) for w in windows],
        "window_avg_latency_ms": [round(float(w.samples[:, 0].mean() * 1e3), 4) if len(w.samples) else None
                                  for w in windows],
        "latency_samples_ms": [round(float(v), 4) for v in latency_ms[even_subsample(len(latency_ms))]],
        # every percentile column: the latencies it came from and its distribution-free interval (core.stats)
        "percentiles": {f"p{q}": e.to_json() for q, e in estimates.items()},
        "percentile_rule": percentile_rule(settings),
        "drift": drift(stable_windows, point.batch_size, settings.stability_percentage, point.open_loop),
    }
    late_percent, late = 0.0, None
    if point.open_loop:
        delay_ms = samples[:, 3] * 1e3
        tolerance_ms = schedule_tolerance_ms(point, settings)
        late_percent = float((delay_ms > tolerance_ms).mean() * 100.0)
        late = late_verdict(samples, point, settings)
        meta.update({
            "load": "open loop",
            "offered_rate": point.request_rate,
            "achieved_rate": round(requests_per_s, 3),  # completed requests/s over the stable windows
            "distribution": point.distribution,
            "seed": point.seed,
            "late_percent": round(late_percent, 2),  # sent more than schedule_tolerance_ms after their time
            "schedule_tolerance_ms": round(tolerance_ms, 3),
            "late_verdict": late.to_json(),  # over the limit only when significantly so (one-sided binomial)
            "schedule_delay_p99_ms": round(float(np.percentile(delay_ms, 99)), 3),
            "max_outstanding": max_outstanding,
        })
    else:
        meta["load"] = "closed loop"
    if stopped_early:
        meta["stopped_early"] = stopped_early
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
    if total["success_count"] > completed:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"server counted {total['success_count']} successful requests, client completed {completed}: "
                       f"another client used the model during measurement")
    elif total["success_count"] + total["fail_count"] < completed:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"server counted {total['success_count'] + total['fail_count']} requests, client completed "
                       f"{completed}: the server's statistics had not counted them {COUNT_WAIT_S:g} s after the last")
    if total["fail_count"]:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"server counted {total['fail_count']} failed requests")
    if meta["client_bound"]:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"client bound: the load generator used {client_cpu:.0f}% of a core "
                       f"(limit {settings.client_bound_percent:g}%)")
    if late is not None and late.verdict == "over":
        status = "INVALID" if status in ("OK", "UNSTABLE") else status
        at_cap = max_outstanding is not None and max_outstanding >= settings.max_outstanding
        reasons.append(f"the load generator could not keep the schedule: "
                       f"{late.describe(f'requests sent more than {schedule_tolerance_ms(point, settings):.3g} ms late')}"
                       + (f"; the cap of {settings.max_outstanding} requests in flight (max_outstanding) was reached"
                          if at_cap else ""))
    if meta.get("stopped_early"):
        status = "STOPPED"
        reasons.insert(0, f"stopped early: {meta['stopped_early']}")
    return Measurement(point=point, result=result, meta=meta, status=status, reasons=reasons,
                       latencies_s=samples[:, 0].copy())


def perf_analyzer_status(meta: dict, unstable: str | None, t_spread: float, l_spread: float, client_cpu: float,
                         settings: MeasurementSettings) -> tuple[str, list[str]]:
    """(status, reasons) of a point perf_analyzer measured, by :func:`summarise`'s rules on what it tells: its own
    message that no 3 windows agreed (``unstable``), the server's failed requests and its CPU (the row's ``meta``).
    It counts no requests of its own nor late sends: another client or a missed schedule cannot be told from it."""
    reasons, status = [], "OK"
    if unstable is not None:
        status = "UNSTABLE"
        reasons.append(f"perf_analyzer: {unstable} (last windows {meta['window']}; throughput varied {t_spread:.1f}% "
                       f"and latency {l_spread:.1f}%; other processes used {meta['host_other_cpu_percent']:.0f}% of "
                       f"a core meanwhile)")
    if meta["server_fail_delta"]:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"server counted {meta['server_fail_delta']} failed requests")
    if meta["client_bound"]:
        status = "INVALID" if status == "OK" else status
        reasons.append(f"client bound: perf_analyzer used {client_cpu:.0f}% of a core "
                       f"(limit {settings.client_bound_percent:g}%)")
    return status, reasons


LATENCY_SAMPLES = 2000


def percentile_estimates(latency_ms: np.ndarray, settings: MeasurementSettings) -> dict:
    """{50: PercentileEstimate, 90: ..., 95: ..., 99: ...} of the reported percentiles (core.stats)."""
    from tritonsuite.core.stats import REPORTED_PERCENTILES, percentile_estimate

    return {q: percentile_estimate(latency_ms, q, settings.percentile_confidence / 100.0,
                                   settings.percentile_precision_percent / 100.0) for q in REPORTED_PERCENTILES}


def percentile_rule(settings: MeasurementSettings) -> str:
    """The rule behind the percentile columns, in one line (for rows and table headers)."""
    from tritonsuite.core.stats import min_samples

    c = settings.percentile_confidence
    return (f"each percentile has a distribution-free {c:g}% interval from order statistics; it is indicative when "
            f"the interval has no end in the sample (p90/p95/p99 need "
            f"{'/'.join(str(min_samples(q, c / 100.0)) for q in (90, 95, 99))} latencies) or is wider than "
            f"±{settings.percentile_precision_percent:g}% of the estimate")


def late_verdict(samples: np.ndarray, point: LoadPoint, settings: MeasurementSettings):
    """Open loop: late sends (more than the schedule tolerance after their time) of ``samples`` judged against
    ``max_late_percent`` on counts (a :class:`~tritonsuite.core.stats.ShareVerdict`)."""
    from tritonsuite.core.stats import judge_share

    late = int((samples[:, 3] * 1e3 > schedule_tolerance_ms(point, settings)).sum())
    return judge_share(late, len(samples), settings.max_late_percent / 100.0, settings.verdict_alpha)


def wants_more_samples(windows: Sequence[Window], point: LoadPoint, settings: MeasurementSettings,
                       windows_left: int) -> bool:
    """Whether a stable pool of ``windows`` should be measured longer (by at most ``windows_left`` windows like its
    own): an open-loop late-send verdict still undecided, or a widest percentile (p99) that is indicative and that
    the extra windows would make a measurement (its minimum sample count reached; an interval too wide narrowed,
    as 1/sqrt(n), to the precision). Otherwise the percentile stays indicative and the point costs no more time."""
    from tritonsuite.core.stats import REPORTED_PERCENTILES, min_samples, percentile_estimate

    if windows_left <= 0:
        return False
    samples = np.concatenate([w.samples for w in windows])
    if point.open_loop and late_verdict(samples, point, settings).verdict == "undecided":
        return True
    widest = max(REPORTED_PERCENTILES)
    estimate = percentile_estimate(samples[:, 0], widest, settings.percentile_confidence / 100.0,
                                   settings.percentile_precision_percent / 100.0)
    reachable = len(samples) * (1 + windows_left / len(windows))
    if not estimate.indicative or reachable < min_samples(widest, settings.percentile_confidence / 100.0):
        return False
    if estimate.low is None or estimate.high is None or estimate.value <= 0:
        return True  # the interval's end comes into the sample
    # too wide: worth it only if the interval, narrowing as 1/sqrt(n), would meet the precision within the budget
    half = max(estimate.high - estimate.value, estimate.value - estimate.low) / estimate.value
    return half * math.sqrt(len(samples) / reachable) <= settings.percentile_precision_percent / 100.0


def drift(windows: Sequence[Window], batch_size: int, limit: float, open_loop: bool = False) -> dict:
    """The trend over the stable windows: last against first window's throughput and mean latency (% change),
    flagged when either moved more than the stability ``limit`` (open loop: the latency; its throughput is the
    schedule's)."""
    def rate(w: Window) -> float:
        return len(w.samples) * batch_size / (w.end - w.start)

    def latency(w: Window) -> float:
        return float(w.samples[:, 0].mean() * 1e3) if len(w.samples) else math.nan

    first, last = windows[0], windows[-1]
    t = (rate(last) / rate(first) - 1.0) * 100.0 if rate(first) > 0 else math.nan
    lat = (latency(last) / latency(first) - 1.0) * 100.0 if latency(first) > 0 else math.nan
    return {"throughput_change_percent": round(t, 2), "latency_change_percent": round(lat, 2),
            "between": "first and last stable window", "limit_percent": limit,
            "drifting": bool((not open_loop and abs(t) > limit) or abs(lat) > limit)}


def schedule_tolerance_ms(point: LoadPoint, settings: MeasurementSettings) -> float:
    """How late an open-loop send may be and still keep the schedule: ``schedule_tolerance_ms``, or a tenth of the
    mean gap between arrivals when that is longer (5 ms late on a 400 ms gap leaves the arrival process as it was)."""
    return max(settings.schedule_tolerance_ms, 100.0 / point.request_rate) if point.open_loop \
        else settings.schedule_tolerance_ms


def even_subsample(n: int, limit: int = LATENCY_SAMPLES) -> np.ndarray:
    """Indices of at most ``limit`` of ``n`` samples, evenly spaced (all of them when ``n <= limit``)."""
    if n <= limit:
        return np.arange(n)
    return np.linspace(0, n - 1, limit).round().astype(np.int64)
