"""Check ``warmup``: ``model_warmup`` (``name``, ``batch_size``, ``inputs``, ``count``) as the live server runs it.

A warm-up runs its samples through each instance while the model loads, so the first request after a load costs what
the steady state costs (a lazily built engine, allocated buffers, a first-call compile paid before the model is
READY). What is done: the model is loaded again exactly as the server serves it (its served configuration, a marker
parameter added so that Triton reloads it rather than keep the loaded model: a load of an unchanged configuration
is a no-op, seen on r24.10), then one request, then :data:`STEADY` more, one at a time, each one's server compute
time read from the statistics extension (``compute_infer`` ns of its own delta). The first request is slow when its
compute time exceeds both :data:`FACTOR` times the steady median and the median plus :data:`SLACK_MS`; a slow first
request is measured again after another load (:data:`ROUNDS` in all), and fails only when it was slow every time.
The deployment is loaded once more as it was served (the marker removed) afterwards.

The warm-up's own executions: on r24.10 the statistics extension counts them (a freshly loaded model reports the
warm-up's executions and successes before any request: ``count`` executions per sample and instance); the check
reports what the reload showed (``warmup_in_statistics``) and reads each request's delta, not totals.

Skipped where no model_warmup is declared (Triton's default: no warm-up, nothing promised about the first request),
and on a server the suite did not start unless the target allows reloads (never reload a team's server unasked).
"""
from __future__ import annotations

import json
import statistics as stats_lib

from tritonsuite.deploy.changes import Changes
from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import ask, counted, settled_statistics, stats_delta
from tritonsuite.load.exchange import first_line
from tritonsuite.core.reasons import reason

STEADY = 8  # requests after the first: the steady state's median
FACTOR = 3.0  # a first request this many times the steady median...
SLACK_MS = 100.0  # ...and this much over it is slow (a busy host's hiccup is not)
ROUNDS = 2
MARK = "tritonsuite_conformance_warmup"


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("restoring the deployment afterwards failed: {}",
           "unit/test_judge_warmup.py::test_a_failed_restore_fails_a_passing_warmup_and_follows_a_slow_one"),
    reason("model_warmup declared, but the first request after each of {} loads took {} ms of compute against a "
           "steady median of {} ms (the server serves no model_warmup)",
           "unit/test_judge_warmup.py::test_a_first_request_slow_after_every_load_fails",
           "unit/test_judge_warmup.py::test_a_slow_first_request_where_the_server_serves_no_warmup_says_so",
           "test_conformance_fields.py::test_warmup_makes_the_first_request_fast_and_its_absence_is_caught",
           "test_conformance_fields.py::test_a_warm_up_served_but_missing_the_requests_path_is_caught"),
)


def _load(target: Target, config: dict) -> None:
    Changes(target.server, target.directory).load_config(target.name, config)


def _compute_ms(target: Target, seed: int) -> float:
    """One request's server compute time (its own statistics delta), raising where it failed."""
    before = settled_statistics(target.server, target.name, 0.5)
    answer = ask(target, target.request(target.batch_size, seed))
    if not answer.ok:
        raise RuntimeError(f"request {seed} after the load failed: {answer.error}")
    delta = stats_delta(counted(target.server, target.name, before, 1), before)
    return delta.get("compute_infer_ns", 0) / 1e6


def slow(first_ms: float, median_ms: float) -> bool:
    """Whether a first request's compute time is slow: over :data:`FACTOR` times the steady median and over the
    median plus :data:`SLACK_MS` (both: a fast model's 3x is a host's hiccup, a slow model's 100 ms is noise)."""
    return first_ms > max(FACTOR * median_ms, median_ms + SLACK_MS)


def judge_warmup(rounds: list[dict], served_warmup: bool, restore_error: str = "") -> list[str]:
    """The reasons the check fails: the first request was slow after every load (``rounds``: each load's
    ``slow``, ``first_ms`` and ``steady_median_ms``), ``served_warmup`` whether the server serves a model_warmup;
    ``restore_error`` why loading the deployment as served afterwards failed ("" it worked)."""
    problems: list[str] = []
    if rounds and all(r["slow"] for r in rounds):
        last = rounds[-1]
        problems.append(f"model_warmup declared, but the first request after each of {len(rounds)} loads took "
                        f"{last['first_ms']:.1f} ms of compute against a steady median of "
                        f"{last['steady_median_ms']:.2f} ms" + ("" if served_warmup else
                                                                " (the server serves no model_warmup)"))
    if restore_error:
        problems.append(f"restoring the deployment afterwards failed: {restore_error}")
    return problems


def _round(target: Target, served: dict, n: int) -> dict:
    marked = json.loads(json.dumps(served))
    marked.setdefault("parameters", {})[MARK] = {"string_value": str(n)}
    _load(target, marked)
    loaded = settled_statistics(target.server, target.name, 0.5)
    first = _compute_ms(target, 0)
    steady = [_compute_ms(target, 1 + i) for i in range(STEADY)]
    median = stats_lib.median(steady)
    return {"first_ms": round(first, 3), "steady_median_ms": round(median, 3),
            "steady_ms": [round(s, 3) for s in steady],
            "slow": slow(first, median),
            "warmup_in_statistics": {"executions": loaded.get("execution_count", 0),
                                     "successes": loaded.get("success_count", 0),
                                     "compute_infer_ms": round(loaded.get("compute_infer_ns", 0) / 1e6, 3)}}


def check_warmup(target: Target) -> CheckResult:
    samples = list(target.description.config.get("model_warmup") or [])
    if not samples:
        return CheckResult(target.name, "warmup", "no model_warmup (Triton's default)", "-", "skipped",
                           "no model_warmup declared: nothing is promised about the first request after a load")
    names = [f"{s.get('name', '?')} (batch {s.get('batch_size', 0)}, count {s.get('count', 0) or 1}, inputs "
             f"{sorted(s.get('inputs', {}))})" for s in samples]
    declared = (f"model_warmup {'; '.join(names)}: the first request after a load within {FACTOR:g}x the steady "
                f"median compute time or {SLACK_MS:g} ms over it")
    if getattr(target.server, "name", "") == "remote" and not target.allow_reload:
        return CheckResult(target.name, "warmup", declared, "-", "skipped", "the check reloads the model: a remote "
                           "server is reloaded only with --allow-reload (never a team's server unasked)")
    served = target.server.model_config(target.name)
    served.get("parameters", {}).pop(MARK, None)
    rounds: list[dict] = []
    restore_error = ""
    try:
        for n in range(ROUNDS):
            rounds.append(_round(target, served, n))
            if not rounds[-1]["slow"]:
                break
    finally:  # the deployment as it was served, loaded once more (the marker parameter gone)
        try:
            _load(target, served)
        except Exception as exc:
            if not target.server.is_alive():
                raise
            restore_error = first_line(exc)[:200]
    evidence = {"rounds": rounds, "steady_requests": STEADY, "factor": FACTOR, "slack_ms": SLACK_MS,
                "served_model_warmup": bool(served.get("model_warmup"))}
    observed = "; ".join(f"load {i + 1}: first request {r['first_ms']:.2f} ms compute, steady median "
                         f"{r['steady_median_ms']:.2f} ms over {STEADY}, warm-up executions in statistics "
                         f"{r['warmup_in_statistics']['executions']}" for i, r in enumerate(rounds))
    problems = judge_warmup(rounds, bool(served.get("model_warmup")), restore_error)
    return CheckResult(target.name, "warmup", declared, observed, "fail" if problems else "pass", "; ".join(problems),
                       evidence)
