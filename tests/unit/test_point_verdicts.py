"""The status and reasons of a measured point, from windows built to cause each of them: the engine's
(tritonsuite.load.windows.summarise) and perf_analyzer's (perf_analyzer_status, through the perf_analyzer row
builder). Each threshold is met exactly and missed by a hair (the stability limit, the client-bound limit, the count
in both directions, the schedule tolerance, the cap of requests in flight), so the judging is pinned for mutation
testing as well as for its words."""
from __future__ import annotations

import numpy as np

from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load import perfanalyzer as pa_mod
from tritonsuite.load.point import LoadPoint
from tritonsuite.load.windows import SERVER_STATS, Window, summarise

CLOSED = LoadPoint(1, 1)
#: 10 requests/s: a tenth of the mean gap (10 ms) is longer than the default tolerance (5 ms), so 10 ms is the limit
OPEN = LoadPoint(1, request_rate=10.0)
WINDOW = "the last 1000 ms (min 10 requests)"  # MeasurementSettings().describe_window(1)


def window(requests: int, latency_s: float = 0.5, start: float = 0.0, client_cpu: float = 0.0, other_cpu: float = 0.0,
           delays_s: tuple[float, ...] = ()) -> Window:
    """One second's window of ``requests`` answered in ``latency_s`` each, the first ones sent ``delays_s`` late."""
    samples = np.zeros((requests, 4))
    samples[:, 0] = latency_s
    samples[:len(delays_s), 3] = delays_s
    server = {"success_count": requests, "fail_count": 0, **{f"{p}_ns": 1000 * requests for p in SERVER_STATS}}
    return Window(start, start + 1.0, samples, server, client_cpu, other_cpu=other_cpu)


def steady(n: int = 3, requests: int = 20, **kw) -> list[Window]:
    return [window(requests, start=float(i), **kw) for i in range(n)]


def judged(windows: list[Window], success: int | None = None, fail: int = 0, point: LoadPoint = CLOSED,
           **settings) -> list[str]:
    """[status, *reasons] of the point: by default every request the client completed counted once, none failed."""
    completed = sum(len(w.samples) for w in windows)
    success = completed if success is None else success
    m = summarise(point, windows, {"success_count": success, "fail_count": fail}, completed,
                  MeasurementSettings(**settings), "http")
    return [m.status, *m.reasons]


def test_a_sound_point_is_ok():
    assert judged(steady()) == ["OK"]


def test_windows_that_disagree_beyond_the_limit_are_unstable():
    # throughput 3, 4, 5 requests/s over the last 3 windows: 25% from the mean; the first window is not judged
    windows = [window(40, start=0.0)] + [window(n, start=float(i + 1), other_cpu=7.2) for i, n in enumerate((3, 4, 5))]
    assert judged(windows, stability_percentage=25) == ["OK"]
    assert judged(windows, stability_percentage=24.9) == [
        "UNSTABLE", f"throughput varied 25.0% and latency 0.0% over the last 3 windows (limit 24.9%) after 4 windows, "
                    f"{WINDOW}; other processes used 7% of a core meanwhile"]
    # the same on the latency: 0.375, 0.5 and 0.625 s, 25% from the mean
    windows = [window(20, latency_s=s, start=float(i)) for i, s in enumerate((0.375, 0.5, 0.625))]
    assert judged(windows, stability_percentage=25) == ["OK"]
    assert judged(windows, stability_percentage=24.9) == [
        "UNSTABLE", f"throughput varied 0.0% and latency 25.0% over the last 3 windows (limit 24.9%) after 3 windows, "
                    f"{WINDOW}; other processes used 0% of a core meanwhile"]


def test_open_loop_stability_is_judged_on_the_latency_alone():
    # the throughput of an open loop is the arrival schedule's: 25% apart is no instability there
    windows = [window(n, start=float(i)) for i, n in enumerate((30, 40, 50))]
    assert judged(windows, point=OPEN, stability_percentage=24.9) == ["OK"]
    assert judged(windows, stability_percentage=24.9)[0] == "UNSTABLE"


def test_another_clients_requests_and_uncounted_ones_make_the_point_invalid():
    windows = steady()  # 60 requests completed
    assert judged(windows, success=60) == ["OK"]
    assert judged(windows, success=61) == [
        "INVALID", "server counted 61 successful requests, client completed 60"
                   ": another client used the model during measurement"]
    assert judged(windows, success=59) == [
        "INVALID", "server counted 59 requests, client completed 60: the server's statistics had not counted them 5 s "
                   "after the last"]
    # a failed request is counted too: 59 + 1 is every request, and the failure is the reason
    assert judged(windows, success=59, fail=1) == ["INVALID", "server counted 1 failed requests"]
    assert judged(windows, success=58, fail=1) == [
        "INVALID", "server counted 59 requests, client completed 60: the server's statistics had not counted them 5 s "
                   "after the last", "server counted 1 failed requests"]


def test_failed_requests_make_the_point_invalid_and_keep_an_unstable_ones_status():
    assert judged(steady(), success=58, fail=2) == ["INVALID", "server counted 2 failed requests"]
    unstable = [window(n, start=float(i)) for i, n in enumerate((3, 4, 5))]
    found = judged(unstable, success=10, fail=2, stability_percentage=10)
    assert found[0] == "UNSTABLE" and found[1].startswith("throughput varied 25.0%")
    assert found[2:] == ["server counted 2 failed requests"]


def test_a_load_generator_at_its_cpu_limit_is_client_bound():
    windows = steady(client_cpu=0.5)  # half a second of CPU in each 1 s window: 50% of a core
    assert judged(windows, client_bound_percent=50.5) == ["OK"]
    assert judged(windows, client_bound_percent=50) == [
        "INVALID", "client bound: the load generator used 50% of a core (limit 50%)"]


def late(delay_s: float, cap: int | None = None, point: LoadPoint = OPEN, **settings):
    """An open-loop point of 600 requests, 12 of them (2%, significantly over the 1% limit) sent ``delay_s`` late."""
    windows = [window(200, start=0.0, delays_s=(delay_s,) * 12), window(200, start=1.0), window(200, start=2.0)]
    m = summarise(point, windows, {"success_count": 600, "fail_count": 0}, 600, MeasurementSettings(**settings),
                  "http", max_outstanding=cap)
    return [m.status, *m.reasons]


def test_sends_significantly_later_than_the_schedule_make_the_point_invalid():
    SCHEDULE = ("the load generator could not keep the schedule: 12 of 600 requests sent more than {} ms late (2.0%, "
                "limit 1%; one-sided binomial p=0.02, over at alpha 0.05)")
    assert late(0.010) == ["OK"]  # on the tolerance (a tenth of the 100 ms gap) is in time
    assert late(0.0101) == ["INVALID", SCHEDULE.format(10)]
    # at 1000 requests/s a tenth of the gap is 0.1 ms: the set 5 ms tolerance is the longer one
    assert late(0.0051, point=LoadPoint(1, request_rate=1000.0)) == ["INVALID", SCHEDULE.format(5)]
    assert late(0.005, point=LoadPoint(1, request_rate=1000.0)) == ["OK"]
    # the cap of requests in flight named only when the generator reached it
    assert late(0.02, cap=256) == ["INVALID", SCHEDULE.format(10) + "; the cap of 256 requests in flight "
                                                                     "(max_outstanding) was reached"]
    assert late(0.02, cap=255) == ["INVALID", SCHEDULE.format(10)]
    assert late(0.02, cap=8, max_outstanding=8)[1].endswith("; the cap of 8 requests in flight (max_outstanding) "
                                                            "was reached")
    # 12 late of 600 is not significantly over a 1.5% limit: undecided, not a verdict
    assert late(0.02, max_late_percent=1.5) == ["OK"]


def test_a_late_schedule_outranks_instability():
    windows = [window(n, start=float(i), latency_s=s, delays_s=(0.05,) * 30)
               for i, (n, s) in enumerate(((200, 0.375), (200, 0.5), (200, 0.625)))]
    m = summarise(OPEN, windows, {"success_count": 600, "fail_count": 0}, 600,
                  MeasurementSettings(stability_percentage=10), "http")
    assert m.status == "INVALID" and m.reasons[0].startswith("throughput varied 0.0% and latency 25.0%")
    assert m.reasons[1].startswith("the load generator could not keep the schedule: 90 of 600 requests")


def test_a_point_given_up_early_is_stopped_whatever_else_it_shows():
    windows = [window(n, start=float(i), client_cpu=0.9) for i, n in enumerate((3, 4, 5))]
    m = summarise(CLOSED, windows, {"success_count": 12, "fail_count": 1}, 12, MeasurementSettings(), "http",
                  stopped_early="p99 clearly over the bound")
    assert m.status == "STOPPED" and m.reasons[0] == "stopped early: p99 clearly over the bound"
    assert m.reasons[1].startswith("throughput varied 25.0% and latency 0.0%")
    assert m.reasons[2:] == ["server counted 1 failed requests",
                             "client bound: the load generator used 90% of a core (limit 90%)"]


def perf_analyzer_point(unstable: str | None = None, fail: int = 0, cpu_seconds: float = 0.2,
                        passes=((100.0, 1.0), (125.0, 1.0), (75.0, 1.0)), **settings):
    """A point as perf_analyzer's run leaves it (its windows, its CPU over 2 s, the server's counts) made a row."""
    run = pa_mod._Run(returncode=0 if unstable is None else 2, output="", seconds=2.0, cpu_seconds=cpu_seconds,
                      other_cpu_percent=7.04)
    m = pa_mod._measurement(CLOSED, MeasurementSettings(**settings), None, ["/bin/perf_analyzer", "-m", "identity"],
                            {}, None, list(passes), [1] * len(passes), 1, [run],
                            {"success_count": 100, "fail_count": fail}, unstable)
    return [m.status, *m.reasons]


MESSAGE = "Failed to obtain stable measurement within 3 measurement windows for concurrency 1."


def test_perf_analyzers_point_is_judged_on_what_it_tells():
    assert perf_analyzer_point() == ["OK"]
    assert perf_analyzer_point(MESSAGE) == [
        "UNSTABLE", f"perf_analyzer: {MESSAGE} (last windows 1000 ms; throughput varied 25.0% and latency 0.0%; other "
                    f"processes used 7% of a core meanwhile)"]
    assert perf_analyzer_point(fail=1) == ["INVALID", "server counted 1 failed requests"]
    assert perf_analyzer_point(MESSAGE, fail=3)[0::2] == ["UNSTABLE", "server counted 3 failed requests"]
    # 1 s of CPU over its 2 s run: 50% of a core, client bound at a 50% limit and not above it
    assert perf_analyzer_point(cpu_seconds=1.0, client_bound_percent=50.5) == ["OK"]
    assert perf_analyzer_point(cpu_seconds=1.0, client_bound_percent=50) == [
        "INVALID", "client bound: perf_analyzer used 50% of a core (limit 50%)"]
