"""Check ``shutdown``: when the server is asked to shut down (SIGTERM, as an operator or an orchestrator stops it),
the deployment's requests in flight are answered, what comes after is refused cleanly or answered, none hangs, and
the server exits within Triton's exit timeout.

The run's own server is not stopped: the check starts a twin of it (the same repository, backends and options; the
embedded server only), loads the deployment there, keeps a closed loop of its requests in flight (as its driver
sends them), signals the server once answers are flowing, and sends one more request over each protocol just after.
Requests sent before the signal must all be answered correctly; those after may be refused (on r24.10 the HTTP
endpoint closes at once while gRPC still takes requests until the models unload: both are shown in the evidence).
A request unanswered within its bound, or a server that outlives the bound, fails.
"""
from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from tritonsuite.deploy.changes import Changes
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import alone, load, statistics
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import Answer, exchange
from tritonsuite.core.reasons import reason

#: one request's bound during the shutdown (Triton's --exit-timeout-secs is 30 s by default)
BOUND_S = 35.0
#: the server's bound to exit after the signal
EXIT_S = 45.0


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} requests sent before the shutdown failed ({})",
           "unit/test_judge_shutdown.py::test_a_request_sent_before_the_signal_that_failed_fails",
           "unit/test_judge_shutdown.py::test_a_hang_before_the_signal_is_both_lost_and_unanswered",
           "test_conformance_tensors.py::test_shutdown_catches_requests_cut_by_the_exit_timeout"),
    reason("{} request(s) unanswered within {} s during the shutdown",
           "unit/test_judge_shutdown.py::test_a_request_unanswered_within_its_bound_fails_whether_sent_before_or_after",
           "unit/test_judge_shutdown.py::test_a_hang_before_the_signal_is_both_lost_and_unanswered"),
    reason("the server had not exited {} s after SIGTERM",
           "unit/test_judge_shutdown.py::test_a_server_that_did_not_exit_fails"),
)


def _protocols(target: Target) -> tuple[str, ...]:
    return target.driver.protocols


def check_shutdown(target: Target) -> CheckResult:
    twin_of = getattr(target.server, "twin", None)
    if twin_of is None:
        return CheckResult(target.name, "shutdown", "-", "-", "skipped",
                           f"{target.server.name} server: the check shuts down a twin of a server the suite starts "
                           f"itself (--server embedded)")
    concurrency = max(2, min(8, 2 * target.description.instance_count))
    with tempfile.TemporaryDirectory(prefix="tritonsuite-shutdown-") as logs:
        twin = twin_of(Path(logs))
        try:
            twin.start()
            changes = Changes(target.server, target.directory)
            # a BLS model's callees first (an ensemble's steps load with it), then the deployment
            changes.load_beside(target.driver.loaded_beside(), twin)
            changes.load(twin)
            twin.request_timeout_s = BOUND_S
            other = replace(target, server=twin)
            answers: list[Answer] = []
            started = threading.Event()
            stop = threading.Event()

            def run() -> None:
                started.set()
                answers.extend(load(other, concurrency, requests=40 * concurrency, stop=stop, deadline_s=2 * EXIT_S))

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            started.wait(5)
            deadline = time.monotonic() + 10
            while not twin_stats_moved(twin, target.name) and time.monotonic() < deadline:
                time.sleep(0.02)
            signalled = time.monotonic()
            exited = [False]
            waiter = threading.Thread(target=lambda: exited.__setitem__(0, twin.terminate(EXIT_S)), daemon=True)
            waiter.start()
            time.sleep(0.05)
            late = {p: _late(other, p) for p in _protocols(target)}
            stop.set()
            thread.join(2 * EXIT_S)
            waiter.join(EXIT_S + 15)
            exit_s = time.monotonic() - signalled
        finally:
            twin.stop()
    before, in_flight, lost, hung = split(answers, late, signalled)
    evidence = {"concurrency": concurrency, "sent_before_signal": len(before), "in_flight_at_signal": len(in_flight),
                "failed_before_signal": len(lost), "sent_after_signal": len(answers) - len(before),
                "late": {p: ("answered" if a.ok else f"refused: {a.error[:160]}") for p, a in late.items()},
                "server_exited": exited[0], "exit_s": round(exit_s, 2)}
    observed = (f"{len(in_flight)} of {len(before)} requests in flight at the signal, {len(lost)} failed; after it "
                + ", ".join(f"{p} {v.split(':')[0]}" for p, v in evidence["late"].items())
                + (f"; server exited in {exit_s:.1f} s" if exited[0] else "; server did not exit"))
    callee = _unnamed_callee(target, lost)
    if callee:
        return CheckResult(target.name, "shutdown", "SIGTERM drains the requests in flight", observed, "skipped",
                           f"its requests call {callee}, which the twin server does not serve: a BLS model's callees "
                           f"are its code's; name them with --bls-composing-models", evidence)
    problems = judge_shutdown(answers, late, signalled, exited[0])
    if not problems and not in_flight:
        return CheckResult(target.name, "shutdown", "SIGTERM drains the requests in flight", observed, "skipped",
                           "no request was in flight at the signal (each answered before it came)", evidence)
    return CheckResult(target.name, "shutdown", "SIGTERM drains the requests in flight", observed,
                       "fail" if problems else "pass", "; ".join(problems), evidence)


def split(answers: list[Answer], late: dict[str, Answer], signalled: float) -> tuple[list, list, list, list]:
    """The loop's ``answers`` (and the ``late`` ones sent after the signal, by protocol) as: those sent before the
    signal, those of them still in flight at it, those of them that failed, and every one unanswered within its
    bound."""
    before = [a for a in answers if a.start < signalled]
    in_flight = [a for a in before if a.end >= signalled]
    lost = [a for a in before if not a.ok]
    hung = [a for a in answers + list(late.values()) if not a.ok and a.error.startswith("no answer within")]
    return before, in_flight, lost, hung


def judge_shutdown(answers: list[Answer], late: dict[str, Answer], signalled: float, exited: bool) -> list[str]:
    """The reasons the check fails: a request sent before the signal that failed, any request unanswered within its
    bound, a server that did not exit within :data:`EXIT_S` (``exited``)."""
    before, _, lost, hung = split(answers, late, signalled)
    problems = []
    if lost:
        problems.append(f"{len(lost)} of {len(before)} requests sent before the shutdown failed "
                        f"({lost[0].error[:160]})")
    if hung:
        problems.append(f"{len(hung)} request(s) unanswered within {BOUND_S:g} s during the shutdown")
    if not exited:
        problems.append(f"the server had not exited {EXIT_S:g} s after SIGTERM")
    return problems


def _unnamed_callee(target: Target, failed: list[Answer]) -> str:
    """The model a python deployment's failed requests say it called and found missing on the twin (its callees not
    named), or ""."""
    import re

    if not target.description.python or target.description.composing:
        return ""
    for answer in failed:
        match = re.search(r"[Mm]odel '?([\w.-]+)'? is not ready|unknown model:? '?([\w.-]+)", answer.error)
        if match and (name := match.group(1) or match.group(2)) != target.name:
            return name
    return ""


def twin_stats_moved(server, model: str) -> bool:
    """Whether the server has answered a request of ``model`` yet (answers are flowing)."""
    try:
        return statistics(server, model).get("success_count", 0) > 0
    except Exception:  # noqa: BLE001 - not yet up: not moved
        return False


def _late(target: Target, protocol: str) -> Answer:
    """One request over ``protocol`` just after the signal (its refusal or its answer)."""
    try:
        return exchange(target.server, target.name, alone(target.description),
                        [batch_first(target.request(target.batch_size), target.description.batching)],
                        target.output_names, count=1, protocol=protocol, timeout_s=BOUND_S)[0]
    except Exception as exc:  # noqa: BLE001 - a refused connection is the answer
        now = time.monotonic()
        return Answer(now, now, False, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
