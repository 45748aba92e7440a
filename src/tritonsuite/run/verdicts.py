"""Each scenario case run and judged: a :class:`Verdict` (passed, skipped or failed, with its one-line reason and
the figures to attach) that the plugin's thin test functions map to pytest's outcomes, and a script can read as is.

A failure says why in one message: an invalid row's status and reasons, the metrics that missed their thresholds,
or the server's error. A case that cannot be exported here is skipped with the reason; a point every request of
which was answered but that has no valid figures is skipped as not measured (failed under --strict-stability or a
--perf-gate).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tritonsuite.deploy.export import ExportUnsupported
from tritonsuite.judge.baselines import BaselineError
from tritonsuite.server import ServerError
from tritonsuite.core.reasons import reason

#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("_fail", "_skip", "wrong")


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("not measured: {} (--strict-stability fails such a point)",
           "unit/test_case_verdicts.py::test_a_point_without_valid_figures_is_skipped_as_not_measured_unless_strict",
           "test_gates.py::test_a_point_that_cannot_be_measured_is_reported_and_fails_only_when_strict"),
    reason("{}: perf gate ({}%): {}",
           "unit/test_case_verdicts.py::test_the_perf_gate_fails_a_significant_regression_beyond_it",
           "test_gates.py::test_benchmark_records_manifest_and_comparisons"),
    reason("not measured: {}: {} (--strict-stability fails such a search)",
           "unit/test_case_verdicts.py::test_a_search_whose_answer_did_not_hold_is_not_measured_unless_strict"),
    reason("accuracy under load {}",
           "unit/test_case_verdicts.py::test_wrong_answers_under_load_fail_a_valid_point",
           "test_underload.py::test_pytest_m_online_fails_a_batch_mixing_deployment_at_its_highest_concurrency"),
    reason("{}: accuracy under the mix {}",
           "unit/test_case_verdicts.py::test_a_mix_fails_on_wrong_answers_failed_requests_and_unmeasured_if_strict"),
    reason("{} ({} samples, {}) missed its thresholds:",
           "unit/test_case_verdicts.py::test_an_accuracy_run_that_missed_its_thresholds_fails_naming_each_metric",
           "test_precision.py::test_wrong_fp16_deployments_fail_in_one_line_against_fp32"),
)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # "passed", "skipped" or "failed"
    line: str = ""  # why, for a skip or a failure
    figures: dict = field(default_factory=dict)  # what the result shows (JUnit properties under pytest)
    measured: Any = None  # a valid, right performance point (the plugin's pytest-benchmark record reads it)


PASSED = Verdict("passed")


def _skip(line: str) -> Verdict:
    return Verdict("skipped", line)


def _fail(line: str | None, measured: Any = None) -> Verdict:
    return Verdict("failed", line, measured=measured) if line else PASSED


def judged(case_id: str, run: Callable[[], Any], verdict: Callable[[Any], Verdict],
           figures: Callable[[Any], dict]) -> Verdict:
    """Run a case and judge its result; the figures go with whatever the verdict is."""
    try:
        result = run()
    except ExportUnsupported as exc:
        return _skip(str(exc))
    except (ServerError, BaselineError) as exc:
        return _restricted(case_id, str(exc)) or _fail(f"{case_id}: {exc}")
    except Exception as exc:  # a restricted API met on the way (a measurement's statistics, a probe): skipped
        if (skip := _restricted(case_id, str(exc))) is None:
            raise
        return skip
    found = verdict(result)
    if found.outcome == "failed" and (skip := _restricted(case_id, found.line)) is not None:
        return Verdict("skipped", skip.line, figures(result))
    return Verdict(found.outcome, found.line, figures(result), found.measured)


def _restricted(case_id: str, text: str) -> Verdict | None:
    """A step that needed an API the server restricts (Triton's restricted-API flags) and was refused: skipped with
    which API, which flag and which header (tritonsuite.server.reach), never a failure."""
    from tritonsuite.server.reach import restricted_reason

    why = restricted_reason(text)
    return _skip(f"{case_id}: {why}") if why else None


def performance_verdict(case_id: str, m, strict_stability: bool = False, gate: float | None = None) -> Verdict:
    """A measured point (a :class:`~tritonsuite.load.point.Measurement`): failed when it is invalid, when its answers
    under load were wrong, or when ``gate`` (--perf-gate, percent) finds a significant regression beyond it against
    the compared run; a point every request of which was answered but that has no valid figures is skipped as not
    measured, unless ``strict_stability`` or a gate asks for such points to fail."""
    under_load = m.accuracy_under_load
    wrong = f"accuracy under load {under_load.describe()}" if under_load and not under_load.passed else ""
    if not m.valid:
        found = f"{case_id}: {m.status}: " + "; ".join(m.reasons)
        if m.not_measured and not wrong and not strict_stability and gate is None:
            # every request was answered; the point has no valid figures: reported, not a failure
            return _skip(f"not measured: {found} (--strict-stability fails such a point)")
        return _fail(found + (f"\n{case_id}: {wrong}" if wrong else ""))
    if wrong:
        return _fail(f"{case_id}: {wrong}")
    if gate is not None and m.comparison is not None and m.comparison.regressions_beyond(gate):
        return _fail(f"{case_id}: perf gate ({gate:g}%): {m.comparison.describe()}", measured=m)
    return Verdict("passed", measured=m)


def performance(suite, case, options, progress=None) -> Verdict:
    """An offline or online sweep point (tritonsuite.run.suite.Suite.run_performance)."""
    def verdict(m) -> Verdict:
        return performance_verdict(case.id, m, options.strict_stability, options.perf_gate)

    def figures(m) -> dict:
        # a figure the load generator did not give (perf_analyzer's unstable point: no CSV) is left out
        found = {**{k: round(v, 4) for k, v in m.result.items() if v is not None}, "status": m.status,
                 **({"measured_requests": m.meta["measured_requests"]} if "measured_requests" in m.meta else {})}
        if m.comparison is not None:
            found["comparison"] = m.comparison.describe()
        if m.accuracy_under_load is not None:
            found["accuracy_under_load"] = m.accuracy_under_load.describe()
        return found

    return judged(case.id, lambda: suite.run_performance(case, progress), verdict, figures)


def search_verdict(case_id: str, found, strict_stability: bool = False, gate: float | None = None) -> Verdict:
    """A search's answer (a :class:`~tritonsuite.load.search.SearchResult`): fails when no point was within the
    bound; when points were within it but none stayed so when measured again, the answer could not be measured on
    this host: skipped with the reason, failed under ``strict_stability`` or a ``gate``."""
    if found.found:
        return PASSED
    if found.unstable and not strict_stability and gate is None:
        return _skip(f"not measured: {case_id}: {found.describe()} (--strict-stability fails such a search)")
    return _fail(f"{case_id}: {found.describe()}")


def search(suite, case, options, progress=None) -> Verdict:
    """The most load within the latency bound (tritonsuite.run.suite.Suite.run_search), judged by
    :func:`search_verdict`."""
    def verdict(found) -> Verdict:
        return search_verdict(case.id, found, options.strict_stability, options.perf_gate)

    def figures(found) -> dict:
        best = found.best
        return {"answer": found.describe(), "points": found.points, **({"max": round(best.load, 3)} if best else {})}

    return judged(case.id, lambda: suite.run_search(case, progress), verdict, figures)


def accuracy_verdict(r) -> Verdict:
    """An accuracy run (a :class:`~tritonsuite.judge.accuracy.AccuracyResult`): failed with every metric that missed
    its threshold, one a line under the deployment's."""
    return _fail(None if r.passed else f"{r.deployment} ({r.samples} samples, {r.description}) missed its "
                                       f"thresholds:\n  " + "\n  ".join(r.failures))


def accuracy(suite, case) -> Verdict:
    """The deployment through Triton against its eager reference, with thresholds per precision."""
    return judged(case.id, lambda: suite.run_accuracy(case), accuracy_verdict,
                  lambda r: {**{m.name: round(m.value, 6) for m in r.metrics}, "passed": r.passed})


def conformance(suite, case, options) -> Verdict:
    """One check of a deployment against what its config.pbtxt declares: its one-line reason when it fails, or
    where it does not apply or cannot be shown on this host (skipped)."""
    def verdict(result) -> Verdict:
        if result.verdict == "skipped":
            return _skip(result.line())
        return _fail(None if result.passed else result.line())

    return judged(case.id, lambda: suite.run_conformance(case, options.allow_reload), verdict,
                  lambda r: {"check": r.check, "declared": r.declared, "observed": r.observed, "verdict": r.verdict,
                             "reason": r.reason})


def tune(suite, case, options, progress=None) -> Verdict:
    """The configuration to ship; keeping the profile's is an answer too: fails only when nothing was measured."""
    def figures(result) -> dict:
        best = result.best
        return {"answer": result.describe(), "recommended": result.recommended,
                "configurations": len(result.evaluations), "space": result.space_size,
                "config_pbtxt": str(suite.reports_dir / "tune" / result.deployment / "config.pbtxt"),
                **({"best_inferences_per_second": round(best.score, 3), "best_concurrency": best.load} if best else {})}

    return judged(case.id, lambda: suite.run_tune(case, options.tune_strategy, options.tune_budget, progress),
                  lambda result: _fail(None if result.best is not None else f"{case.id}: {result.describe()}"),
                  figures)


def mix_verdict(case_id: str, result, strict_stability: bool = False) -> Verdict:
    """A set served together (a :class:`~tritonsuite.run.mixcase.MixResult`): fails when a deployment's answers under
    the mix were wrong or one of its requests failed; a point the mix left without valid figures although every
    request was answered fails only under ``strict_stability``."""
    wrong = [f"{d}: accuracy under the mix {r.describe()}" for d, r in result.accuracy.items() if not r.passed]
    failed = [r for r in result.invalid if r.status == "FAILED" or r.measurement.get("server_fail_delta")]
    unmeasured = [r for r in result.invalid if r not in failed]
    lines = wrong + [f"{r.deployment} ({r.extra['mix']['role']}, round {r.extra['mix']['round']}): {r.status}: "
                     + "; ".join(r.reasons) for r in failed + (unmeasured if strict_stability else [])]
    return _fail(f"{case_id}: " + "\n".join(lines) if lines else None)


def mix(suite, case, options, progress=None) -> Verdict:
    """A set of deployments served together; its scale search or its joint configuration search."""
    if case.search == "scale":  # the most mixed load within every bound: fails when no factor stayed within them
        return judged(case.id, lambda: suite.run_mix(case.model, progress, search="scale"),
                      lambda found: _fail(None if found.factor is not None else f"{case.id}: {found.describe()}"),
                      lambda found: {"answer": found.describe(), "points": found.result.points})
    if case.search == "tune":  # the set's configuration search: keeping the profile's is an answer too
        return judged(case.id, lambda: suite.run_mix(case.model, progress, search="tune"),
                      lambda result: _fail(None if result.best is not None else f"{case.id}: {result.describe()}"),
                      lambda result: {"answer": result.describe(), "configurations": len(result.evaluations)})
    return judged(case.id, lambda: suite.run_mix(case.model, progress),
                  lambda result: mix_verdict(case.id, result, options.strict_stability),
                  lambda result: {**{f"ratio {r.deployment}": r.describe() for r in result.ratios},
                                  "rows": len(result.rows)})
