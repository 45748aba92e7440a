"""The scenario tests, for any project to collect: ``from tritonsuite.plugin.scenarios import test_offline,
test_online, test_accuracy, test_conformance, test_repository`` in one of its test modules. Each is parametrised by the plugin from the profile
(``offline_case``, ``online_case``, ``accuracy_case``) and marked, so ``pytest -m offline`` selects it.

A failure says why in one message: an invalid row's status and reasons, the metrics that missed their thresholds,
or the server's error (with its log tail the first time). The message is raised outside the ``except`` block so
pytest shows it alone, not an exception chain.
"""
from __future__ import annotations

import pytest

from tritonsuite.deploy.export import ExportUnsupported
from tritonsuite.judge.baselines import BaselineError
from tritonsuite.plugin.options import OPTIONS_KEY
from tritonsuite.plugin.progress import terminal_progress
from tritonsuite.server import ServerError


def _judge(case_id: str, run, verdict, record_property, figures) -> None:
    """Run a case; skip it with the reason when it cannot be exported here; attach its figures as JUnit properties
    (``--junitxml`` carries them); fail it with ``verdict(result)`` (None when it passed) or the server's error."""
    try:
        result = run()
    except ExportUnsupported as exc:
        pytest.skip(str(exc))
    except (ServerError, BaselineError) as exc:
        failure = f"{case_id}: {exc}"
    else:
        for name, value in figures(result).items():
            record_property(name, value)
        failure = verdict(result)
    if failure:
        pytest.fail(failure, pytrace=False)


def _performance(suite, case, request, record_property) -> None:
    options = request.config.stash[OPTIONS_KEY]
    gate = options.perf_gate

    def verdict(m) -> str | None:
        under_load = m.accuracy_under_load
        wrong = f"accuracy under load {under_load.describe()}" if under_load and not under_load.passed else ""
        if not m.valid:
            found = f"{case.id}: {m.status}: " + "; ".join(m.reasons)
            if m.not_measured and not wrong and not options.strict_stability and gate is None:
                # every request was answered; the point has no valid figures: reported, not a failure
                pytest.skip(f"not measured: {found} (--strict-stability fails such a point)")
            return found + (f"\n{case.id}: {wrong}" if wrong else "")
        if wrong:
            return f"{case.id}: {wrong}"
        _benchmark_record(request, m)
        if gate is not None and m.comparison is not None and m.comparison.regressions_beyond(gate):
            return f"{case.id}: perf gate ({gate:g}%): {m.comparison.describe()}"
        return None

    def figures(m) -> dict:
        # a figure the load generator did not give (perf_analyzer's unstable point: no CSV) is left out
        found = {**{k: round(v, 4) for k, v in m.result.items() if v is not None}, "status": m.status}
        if m.comparison is not None:
            found["comparison"] = m.comparison.describe()
        if m.accuracy_under_load is not None:
            found["accuracy_under_load"] = m.accuracy_under_load.describe()
        return found

    progress = terminal_progress(request.config, case.id)
    _judge(case.id, lambda: suite.run_performance(case, progress), verdict, record_property, figures)


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


@pytest.mark.offline
def test_offline(suite, offline_case, triton, request, record_property):
    """Static batching, one request in flight, system shared memory, a batch-size sweep."""
    _performance(suite, offline_case, request, record_property)


def _search(suite, case, request, record_property) -> None:
    """The most load within the latency bound: fails when no point was within it; when points were within it but
    none stayed so when measured again, the answer could not be measured on this host: skipped with the reason,
    failed under --strict-stability or --perf-gate."""
    options = request.config.stash[OPTIONS_KEY]

    def figures(found) -> dict:
        best = found.best
        return {"answer": found.describe(), "points": found.points,
                **({"max": round(best.load, 3)} if best else {})}

    def verdict(found) -> str | None:
        if found.found:
            return None
        if found.unstable and not options.strict_stability and options.perf_gate is None:
            pytest.skip(f"not measured: {case.id}: {found.describe()} (--strict-stability fails such a search)")
        return f"{case.id}: {found.describe()}"

    progress = terminal_progress(request.config, case.id)
    _judge(case.id, lambda: suite.run_search(case, progress), verdict, record_property, figures)


@pytest.mark.online
def test_online(suite, online_case, triton, request, record_property):
    """Dynamic batching on the server, over HTTP: a concurrency sweep (closed loop), request rates (open loop), and
    with a latency bound, the most load within it. At the highest concurrency a share of the requests carries
    accuracy samples, which must be answered as when sent alone."""
    if online_case.search:
        _search(suite, online_case, request, record_property)
    else:
        _performance(suite, online_case, request, record_property)


@pytest.mark.accuracy
def test_accuracy(suite, accuracy_case, triton, record_property):
    """The deployment through Triton against its eager reference, with thresholds per precision."""
    _judge(accuracy_case.id, lambda: suite.run_accuracy(accuracy_case),
           lambda r: None if r.passed else (f"{r.deployment} ({r.samples} samples, {r.description}) missed its "
                                            f"thresholds:\n  " + "\n  ".join(r.failures)), record_property,
           lambda r: {**{m.name: round(m.value, 6) for m in r.metrics}, "passed": r.passed})


@pytest.mark.conformance
def test_conformance(suite, conformance_case, triton, request, record_property):
    """One check of a deployment, live on the server, against what its config.pbtxt declares
    (:mod:`tritonsuite.judge.conformance`): fails with the check's one-line reason, skips with the reason where the
    check does not apply or cannot be shown on this host."""
    allow_reload = request.config.stash[OPTIONS_KEY].allow_reload

    def verdict(result) -> str | None:
        if result.verdict == "skipped":
            pytest.skip(result.line())
        return None if result.passed else result.line()

    _judge(conformance_case.id, lambda: suite.run_conformance(conformance_case, allow_reload), verdict,
           record_property, lambda r: {"check": r.check, "declared": r.declared, "observed": r.observed,
                                       "verdict": r.verdict, "reason": r.reason})


@pytest.mark.tune
def test_tune(suite, tune_case, triton, request, record_property):
    """The configuration to ship for an online deployment: a search for the most throughput within the latency
    bound, its winner re-measured A B A B against the profile's configuration and checked for accuracy under load.
    Keeping the profile's configuration is an answer too; the test fails only when nothing could be measured."""
    options = request.config.stash[OPTIONS_KEY]

    def figures(result) -> dict:
        best = result.best
        return {"answer": result.describe(), "recommended": result.recommended,
                "configurations": len(result.evaluations), "space": result.space_size,
                "config_pbtxt": str(suite.reports_dir / "tune" / result.deployment / "config.pbtxt"),
                **({"best_inferences_per_second": round(best.score, 3), "best_concurrency": best.load} if best else {})}

    _judge(tune_case.id, lambda: suite.run_tune(tune_case, options.tune_strategy, options.tune_budget),
           lambda result: None if result.best is not None else f"{tune_case.id}: {result.describe()}",
           record_property, figures)


@pytest.mark.mix
def test_mix(suite, mix_case, triton, request, record_property):
    """Deployments served together on one server: each measured alone and together in interleaved rounds, its
    interference ratio (together ÷ alone) with its interval, and its accuracy probes, travelling in its own traffic,
    answered as when sent alone. Fails on a wrong answer; a measurement that could not be measured is reported (and
    fails under --strict-stability)."""
    options = request.config.stash[OPTIONS_KEY]
    if mix_case.search == "scale":  # the most mixed load within every bound: fails when no factor stayed within them
        progress = terminal_progress(request.config, mix_case.id)
        _judge(mix_case.id, lambda: suite.run_mix(mix_case.model, progress, search="scale"),
               lambda found: None if found.factor is not None else f"{mix_case.id}: {found.describe()}",
               record_property, lambda found: {"answer": found.describe(), "points": found.result.points})
        return
    if mix_case.search == "tune":  # the set's configuration search: keeping the profile's is an answer too
        progress = terminal_progress(request.config, mix_case.id)
        _judge(mix_case.id, lambda: suite.run_mix(mix_case.model, progress, search="tune"),
               lambda result: None if result.best is not None else f"{mix_case.id}: {result.describe()}",
               record_property, lambda result: {"answer": result.describe(), "configurations": len(result.evaluations)})
        return

    def verdict(result) -> str | None:
        wrong = [f"{d}: accuracy under the mix {r.describe()}" for d, r in result.accuracy.items() if not r.passed]
        failed = [r for r in result.invalid if r.status == "FAILED" or r.measurement.get("server_fail_delta")]
        unmeasured = [r for r in result.invalid if r not in failed]
        lines = wrong + [f"{r.deployment} ({r.extra['mix']['role']}, round {r.extra['mix']['round']}): {r.status}: "
                         + "; ".join(r.reasons) for r in failed + (unmeasured if options.strict_stability else [])]
        return f"{mix_case.id}: " + "\n".join(lines) if lines else None

    def figures(result) -> dict:
        return {**{f"ratio {r.deployment}": r.describe() for r in result.ratios}, "rows": len(result.rows)}

    progress = terminal_progress(request.config, mix_case.id)
    _judge(mix_case.id, lambda: suite.run_mix(mix_case.model, progress), verdict, record_property, figures)


@pytest.mark.offline
@pytest.mark.online
@pytest.mark.accuracy
@pytest.mark.conformance
def test_repository(refused_deployment):
    """A deployment of --model-repository whose configuration Triton itself would refuse (its config.pbtxt does not
    parse, or names another model) fails whichever of these scenarios runs, with the reason; the deployments beside
    it run."""
    pytest.fail(refused_deployment, pytrace=False)
