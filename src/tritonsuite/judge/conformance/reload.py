"""Check 5, reload without loss: under closed-loop load, a new version is added and the model reloaded through the
repository API, then (separately) a changed configuration is loaded. No request may fail, answers must switch from
the old version to the new without an old answer to a request sent after the first new answer came back, and the
latency during the switch is reported against before (p99 and max, with their sample counts). The load is sent as
the deployment's driver sends it (a sequence model's in sequences, a decoupled model's on streams, an ensemble's
through its steps). A sequence live at the switch is cut by it, not failed: the reloaded model's sequence batcher
knows no sequence begun before it and refuses its next requests for want of START (Triton r24.10); the cut
sequences are counted, and any other failure, or one in a sequence begun after the reload returned, fails. The
deployment is restored afterwards (the added version removed, the configuration written back, loaded once more).

A server the suite did not start (``--server remote``) is reloaded only when the target allows it: never reload a
team's server unasked.
"""
from __future__ import annotations

import threading
import time

from tritonsuite.core.stats import percentile_estimate
from tritonsuite.deploy.changes import Changes
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import ask, load, statistics
from tritonsuite.load.exchange import first_line
from tritonsuite.core.reasons import reason

#: functions that return reasons (tritonsuite.core.reasons)
REASON_FUNCTIONS = ("restoring",)
CONCURRENCY = 2
BEFORE_S = 0.6  # load before the reload (the latency "before"): at least this long...
BEFORE_ANSWERS = 8  # ...and this many answers (at most MAX_BEFORE_S)
MAX_BEFORE_S = 5.0
AFTER_S = 0.4  # load after the reload returned
#: a request's bound during a switch (at least): Triton holds the requests that come while a version loads, a wait
#: that is the reload's latency evidence, not a hang (a one-slot sequence model waited over 5 s on a busy host)
SWITCH_BOUND_S = 60.0
MARK = "tritonsuite_conformance_reload"  # the parameter the changed configuration adds


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("loading version {} under load failed: {}",
           "unit/test_judge_reload.py::test_a_refused_version_load_fails_and_no_new_answer_is_then_expected",
           "test_conformance_kinds.py::test_reload_catches_an_ensemble_whose_configuration_does_not_load",
           "test_conformance_checks.py::test_reload_catches_a_model_that_cannot_be_swapped_under_load"),
    reason("{} of {} requests failed while version {} was added ({})",
           "unit/test_judge_reload.py::test_requests_that_failed_while_a_version_was_added_fail",
           "unit/test_judge_reload.py::test_a_sequence_cut_is_forgiven_only_if_begun_before_the_reload_returned",
           "test_conformance_kinds.py::test_reload_catches_an_ensemble_whose_configuration_does_not_load"),
    reason("no answer came from the new version {} after the reload",
           "unit/test_judge_reload.py::test_a_reload_that_returned_without_an_answer_of_the_new_version_fails"),
    reason("{} request(s) sent after the first answer of version {} were answered by version {} "
           "(a mixed switch)",
           "unit/test_judge_reload.py::test_an_old_answer_sent_after_the_first_new_answer_is_a_mixed_switch"),
    reason("loading the changed configuration under load failed: {}",
           "unit/test_judge_reload.py::test_a_refused_changed_configuration_fails_and_is_then_not_expected_served"),
    reason("{} of {} requests failed while a changed configuration was loaded ({})",
           "unit/test_judge_reload.py::test_requests_that_failed_while_a_changed_configuration_was_loaded_fail"),
    reason("the server did not serve the changed configuration after the reload",
           "unit/test_judge_reload.py::test_a_changed_configuration_the_server_does_not_serve_fails"),
    reason("a request sent alone before any reload failed: {}",
           "test_conformance_checks.py::test_reload_fails_at_once_a_deployment_that_does_not_answer_alone"),
    reason("restoring the deployment afterwards failed: {}",
           "unit/test_judge_reload.py::test_a_restore_that_failed_fails"),
)


def _under_load(target: Target, action) -> tuple[list, float, float, object]:
    """Run ``action()`` while the closed loop runs; returns the answers, when the action began and ended, and what
    it returned."""
    stop = threading.Event()
    found: list = []
    baseline = _answered(target)
    bound = max(target.server.request_timeout_s, SWITCH_BOUND_S)  # a switch makes requests wait for the load
    loop = threading.Thread(target=lambda: found.extend(load(target, CONCURRENCY, stop=stop, deadline_s=600.0,
                                                             timeout_s=bound)),
                            daemon=True)
    loop.start()
    started = time.monotonic()
    time.sleep(BEFORE_S)
    while time.monotonic() - started < MAX_BEFORE_S and _answered(target) - baseline < BEFORE_ANSWERS:
        time.sleep(0.05)
    begin = time.monotonic()
    try:
        returned = action()
    except Exception as exc:  # a reload the server refused: the deployment's verdict, not the check's error
        returned = exc
    finally:
        end = time.monotonic()
        time.sleep(AFTER_S)
        stop.set()
        loop.join(120)
    return found, begin, end, returned


def _restore(target: Target, changes: Changes) -> str:
    """The deployment as it was (the added version removed, its configuration as written), loaded once more; ""
    when that worked, else the first line of why not."""
    try:
        changes.restore()
    except Exception as exc:
        if not target.server.is_alive():
            raise
        return first_line(exc)[:200]
    return ""


def restoring(restored: str) -> list[str]:
    """The reason restoring the deployment fails: why loading it as it is on disk again did not work ("" it did)."""
    return [f"restoring the deployment afterwards failed: {restored}"] if restored else []


def _answered(target: Target) -> int:
    """Requests answered so far (0 while the model is not available: a failed reload may have taken it down)."""
    try:
        return statistics(target.server, target.name).get("success_count", 0)
    except Exception:
        if not target.server.is_alive():
            raise
        return 0


def _latency(answers, begin: float, end: float) -> dict:
    before = [a.latency_ms for a in answers if a.ok and a.end < begin]
    during = [a.latency_ms for a in answers if a.ok and a.start <= end and a.end >= begin]

    def summary(values):
        p99 = percentile_estimate(values, 99)
        return {"samples": len(values), "p99_ms": _round(p99.value if values else None),
                "p99_indicative": p99.indicative, "max_ms": _round(max(values) if values else None)}

    return {"before": summary(before), "during": summary(during)}


def _failed(answers, end: float) -> tuple[list, list[int]]:
    """The failed requests that fail the check, and the sequences the switch cut: a sequence model's sequence begun
    before the reload returned whose later requests the reloaded model refused for want of START (Triton keeps no
    sequence across a reload: the new model's sequence batcher knows none begun before it; seen on r24.10)."""
    began = {a.sequence[0]: a.start for a in answers if a.sequence is not None and a.sequence[1] == 0}
    cut, failed = set(), []
    for a in answers:
        if a.ok:
            continue
        if a.sequence is not None and began.get(a.sequence[0], end) < end and "START" in a.error:
            cut.add(a.sequence[0])
        else:
            failed.append(a)
    return failed, sorted(cut)


def _round(value):
    return None if value is None else round(value, 2)


def _describe(name: str, answers, latency: dict, failed: list, cut: list[int]) -> str:
    b, d = latency["before"], latency["during"]
    refused = sum(not a.ok for a in answers) - len(failed)
    cut_text = f", {refused} refused in the {len(cut)} sequence(s) live at the switch (cut by it)" if cut else ""
    return (f"{name}: {len(answers)} requests, {len(failed)} failed{cut_text}; latency before p99 {b['p99_ms']} ms / max "
            f"{b['max_ms']} ms ({b['samples']} samples), during p99 {d['p99_ms']} ms / max {d['max_ms']} ms "
            f"({d['samples']} samples)")


def _new_version(target: Target, changes: Changes, evidence: dict) -> list[str]:
    d = target.description
    if d.version_policy.kind == "specific":
        evidence["new_version"] = "not tried: a specific version policy serves no new version"
        return []
    old = str(max(d.version_policy.served(changes.versions_on_disk())))
    new = changes.add_version(old)  # removed by check_reload, which restores the deployment
    evidence["added"] = str(changes.added)
    answers, begin, end, refused = _under_load(target, changes.load)
    latency = _latency(answers, begin, end)
    versions = [a.version for a in answers if a.ok]
    late_old = _switch(answers, old, new)[1]
    failed, cut = _failed(answers, end)
    evidence["new_version"] = {"old": old, "new": new, "answers_by_version": {
        v: versions.count(v) for v in sorted(set(versions))}, "old_after_new": len(late_old),
        "failed": len(failed), "sequences_cut": len(cut), "reload_s": round(end - begin, 3), "latency": latency,
        "errors": sorted({a.error for a in answers if not a.ok})[:3]}
    evidence["observed_new_version"] = _describe(f"version {old} -> {new}", answers, latency, failed, cut)
    return judge_new_version(answers, old, new, end, _refusal(refused))


def _refusal(returned) -> str:
    """Why the reload was refused (the first line of what it raised), or "" when it returned."""
    return first_line(returned)[:200] if isinstance(returned, Exception) else ""


def _switch(answers, old: str, new: str) -> tuple[float | None, list]:
    """When the first answer of version ``new`` came back (None: none did), and the answers of version ``old`` to
    requests sent after that."""
    first_new = min((a.end for a in answers if a.ok and a.version == new), default=None)
    late_old = [a for a in answers if a.ok and a.version == old and first_new is not None and a.start > first_new]
    return first_new, late_old


def judge_new_version(answers, old: str, new: str, end: float, refused: str) -> list[str]:
    """The reasons the switch from version ``old`` to ``new`` fails: the load was ``refused`` (why; "" it returned
    at ``end``), requests failed (not counting the sequences the switch cut), no answer of the new version came,
    or the old version answered a request sent after the first new answer came back."""
    first_new, late_old = _switch(answers, old, new)
    failed, _ = _failed(answers, end)
    problems = [f"loading version {new} under load failed: {refused}"] if refused else []
    if failed:
        problems.append(f"{len(failed)} of {len(answers)} requests failed while version {new} was added "
                        f"({failed[0].error[:120]})")
    if first_new is None and not refused:
        problems.append(f"no answer came from the new version {new} after the reload")
    if late_old:
        problems.append(f"{len(late_old)} request(s) sent after the first answer of version {new} were answered "
                        f"by version {old} (a mixed switch)")
    return problems


def _changed_config(target: Target, changes: Changes, evidence: dict) -> list[str]:
    if not target.declared:
        evidence["changed_config"] = "not tried: no config.pbtxt to change (the server auto-completes it)"
        return []
    changes.mark_config(MARK)
    try:
        answers, begin, end, refused = _under_load(target, changes.load)
        try:
            served = target.server.model_config(target.name).get("parameters", {})
        except Exception:
            served = {}
    finally:
        changes.unmark_config()  # loaded again by check_reload
    latency = _latency(answers, begin, end)
    failed, cut = _failed(answers, end)
    evidence["changed_config"] = {"failed": len(failed), "sequences_cut": len(cut), "requests": len(answers),
                                  "reload_s": round(end - begin, 3), "latency": latency,
                                  "served_change": MARK in served,
                                  "errors": sorted({a.error for a in answers if not a.ok})[:3]}
    evidence["observed_changed_config"] = _describe(f"config with parameter {MARK}", answers, latency, failed, cut)
    return judge_changed_config(answers, MARK in served, end, _refusal(refused))


def judge_changed_config(answers, served_change: bool, end: float, refused: str) -> list[str]:
    """The reasons loading a changed configuration fails: the load was ``refused`` (why; "" it returned at
    ``end``), requests failed (not counting the sequences the switch cut), or the server did not serve the change
    afterwards (``served_change``)."""
    failed, _ = _failed(answers, end)
    problems = [f"loading the changed configuration under load failed: {refused}"] if refused else []
    if failed:
        problems.append(f"{len(failed)} of {len(answers)} requests failed while a changed configuration was loaded "
                        f"({failed[0].error[:120]})")
    if not served_change and not refused:
        problems.append("the server did not serve the changed configuration after the reload")
    return problems


def check_reload(target: Target) -> CheckResult:
    d = target.description
    declared = (f"reloads under load at concurrency {CONCURRENCY}: a new version ({d.version_policy.describe()}) "
                f"and a changed configuration, zero failed requests, no old answer after a new one")
    if getattr(target.server, "name", "") == "remote" and not target.allow_reload:
        return CheckResult(target.name, "reload", declared, "-", "skipped", "a remote server is reloaded only with "
                           "--allow-reload (never a team's server unasked)")
    alone = ask(target, target.request(target.batch_size))  # within the profile's bound, not the switch's 60 s
    if not alone.ok:  # a deployment that does not answer has nothing to keep answering through a reload
        why = alone.error  # one line already (exchange's)
        return CheckResult(target.name, "reload", declared, f"one request sent alone: {why}", "fail",
                           f"a request sent alone before any reload failed: {why[:200]}", {"alone_error": why[:200]})
    evidence: dict = {}
    changes = Changes(target.server, target.directory)
    try:
        problems = _new_version(target, changes, evidence)
        problems += _changed_config(target, changes, evidence)
    finally:  # the deployment as it was: the added version removed, the configuration as written, loaded once
        restored = _restore(target, changes)
    problems += restoring(restored)
    observed = "; ".join(evidence[k] for k in ("observed_new_version", "observed_changed_config") if k in evidence)
    return CheckResult(target.name, "reload", declared, observed, "fail" if problems else "pass",
                       "; ".join(problems), evidence)
