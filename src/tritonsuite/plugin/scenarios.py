"""The scenario tests, for any project to collect: ``from tritonsuite.plugin.scenarios import test_offline,
test_online, test_accuracy, test_conformance, test_repository`` in one of its test modules. Each is parametrised by
the plugin from the profile (``offline_case``, ``online_case``, ``accuracy_case``, ...) and marked, so
``pytest -m offline`` selects it. Each runs its case through :mod:`tritonsuite.run.verdicts` and maps the verdict to
pytest's outcome; the failure message is raised alone, not as an exception chain.
"""
from __future__ import annotations

import pytest

from tritonsuite.plugin.fixtures import OPTIONS_KEY
from tritonsuite.plugin.progress import terminal_progress
from tritonsuite.run import verdicts


def _outcome(verdict, record_property, request=None) -> None:
    """Attach the verdict's figures as JUnit properties (``--junitxml`` carries them), record a measured point for
    pytest-benchmark, then pass, skip or fail with the verdict's line."""
    for name, value in verdict.figures.items():
        record_property(name, value)
    if request is not None and verdict.measured is not None:
        _benchmark_record(request, verdict.measured)
    if verdict.outcome == "skipped":
        pytest.skip(verdict.line)
    if verdict.outcome == "failed":
        pytest.fail(verdict.line, pytrace=False)


def _benchmark_record(request, measurement) -> None:
    """The point as a pytest-benchmark record, in the library's own storage and format: each request latency of
    the stable windows is one round; throughput and the row's columns go into ``extra_info``. Nothing when
    pytest-benchmark is absent or disabled (``--benchmark-disable``, or under xdist)."""
    if not request.config.pluginmanager.hasplugin("benchmark") or measurement.latencies_s is None:
        return
    benchmark = request.getfixturevalue("benchmark")
    if benchmark.disabled:
        benchmark._mode = "tritonsuite"  # recorded elsewhere: no "fixture was not used" warning
        return
    benchmark._mode = "tritonsuite (request latencies measured against Triton)"
    stats = benchmark._make_stats(1)
    for latency in measurement.latencies_s:
        stats.update(float(latency))
    benchmark.extra_info.update({**measurement.result, "status": measurement.status,
                                 "window": measurement.meta.get("window"),
                                 "client_cpu_percent": measurement.meta.get("client_cpu_percent"),
                                 "measured_requests": measurement.meta.get("measured_requests")})


def _options(request):
    return request.config.stash[OPTIONS_KEY]


@pytest.mark.offline
def test_offline(suite, offline_case, triton, request, record_property):
    """Static batching, one request in flight, system shared memory, a batch-size sweep."""
    progress = terminal_progress(request, offline_case.id)
    _outcome(verdicts.performance(suite, offline_case, _options(request), progress), record_property, request)


@pytest.mark.online
def test_online(suite, online_case, triton, request, record_property):
    """Dynamic batching on the server, over HTTP: a concurrency sweep (closed loop), request rates (open loop), and
    with a latency bound, the most load within it. At the highest concurrency a share of the requests carries
    accuracy samples, which must be answered as when sent alone."""
    progress = terminal_progress(request, online_case.id)
    judge = verdicts.search if online_case.search else verdicts.performance
    _outcome(judge(suite, online_case, _options(request), progress), record_property, request)


@pytest.mark.accuracy
def test_accuracy(suite, accuracy_case, triton, record_property):
    """The deployment through Triton against its eager reference, with thresholds per precision."""
    _outcome(verdicts.accuracy(suite, accuracy_case), record_property)


@pytest.mark.conformance
def test_conformance(suite, conformance_case, triton, request, record_property):
    """One check of a deployment, live on the server, against what its config.pbtxt declares
    (:mod:`tritonsuite.judge.conformance`): fails with the check's one-line reason, skips with the reason where the
    check does not apply or cannot be shown on this host."""
    _outcome(verdicts.conformance(suite, conformance_case, _options(request)), record_property)


@pytest.mark.tune
def test_tune(suite, tune_case, triton, request, record_property):
    """The configuration to ship for an online deployment: a search for the most throughput within the latency
    bound, its winner re-measured A B A B against the profile's configuration and checked for accuracy under load.
    Keeping the profile's configuration is an answer too; the test fails only when nothing could be measured."""
    progress = terminal_progress(request, tune_case.id)
    _outcome(verdicts.tune(suite, tune_case, _options(request), progress), record_property)


@pytest.mark.mix
def test_mix(suite, mix_case, triton, request, record_property):
    """Deployments served together on one server: each measured alone and together in interleaved rounds, its
    interference ratio (together ÷ alone) with its interval, and its accuracy probes, travelling in its own traffic,
    answered as when sent alone. Fails on a wrong answer; a measurement that could not be measured is reported (and
    fails under --strict-stability)."""
    progress = terminal_progress(request, mix_case.id)
    _outcome(verdicts.mix(suite, mix_case, _options(request), progress), record_property)


@pytest.mark.offline
@pytest.mark.online
@pytest.mark.accuracy
@pytest.mark.conformance
def test_repository(refused_deployment):
    """A deployment of --model-repository whose configuration Triton itself would refuse (its config.pbtxt does not
    parse, or names another model) fails whichever of these scenarios runs, with the reason; the deployments beside
    it run."""
    pytest.fail(refused_deployment, pytrace=False)
