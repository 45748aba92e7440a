"""Check ``steps``: an ensemble runs its declared steps, each once per ensemble request, on the declared version
(a step that is an ensemble: its own steps too).

Under a closed loop of the ensemble's own requests (sent as its driver sends them), the statistics extension of
each step's model, per version, must grow by exactly the answered ensemble requests times the steps that name the
model, on the version each step names (``model_version`` -1: the newest READY one), and on no other version. A
step that is skipped, run twice, or served by another version than declared shows as another count. (That the
answer is the steps' composition, through ``input_map`` and ``output_map``, is what accuracy compares.)
"""
from __future__ import annotations

from collections import Counter

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import load, poll
from tritonsuite.core.reasons import reason

REQUESTS = 16  # ensemble requests sent (two connections)


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} ensemble requests failed ({})",
           "unit/test_judge_steps.py::test_failed_ensemble_requests_fail_with_the_first_error"),
    reason("step model {} version {} ran {} requests for {} answered ensemble requests (declared: {} per request)",
           "unit/test_judge_steps.py::test_a_step_run_twice_skipped_or_on_another_version_fails",
           "test_conformance_tensors.py::test_steps_catches_an_ensemble_served_with_its_step_twice"),
)


def _successes(server, model: str) -> dict[str, int]:
    """{version: requests the model answered successfully}, from the statistics extension."""
    conn = server.client(timeout=30)
    try:
        stats = conn.get_inference_statistics(model)
    finally:
        conn.close()
    return {str(e.get("version", "")): int(e.get("inference_stats", {}).get("success", {}).get("count", 0))
            for e in stats.get("model_stats", [])}


def _ready_versions(server, model: str) -> list[int]:
    conn = server.client(timeout=30)
    try:
        return sorted(int(v) for v in conn.get_model_metadata(model).get("versions", []) if str(v).isdigit())
    finally:
        conn.close()


def check_steps(target: Target) -> CheckResult:
    d = target.description
    if not d.ensemble:
        return CheckResult(target.name, "steps", "no ensemble_scheduling", "-", "skipped",
                           "not an ensemble (a BLS model's calls are its code's, not its configuration's)")
    expected: Counter = Counter()

    def expect(ensemble) -> None:  # a step that is an ensemble runs its own steps too (a nested one)
        composing = {c.name: c for c in ensemble.composing}
        for step in ensemble.steps:
            version = str(step.version) if step.version > 0 else str(max(_ready_versions(target.server, step.model),
                                                                         default=0))
            expected[(step.model, version)] += 1
            if step.model in composing and composing[step.model].ensemble:
                expect(composing[step.model])

    expect(d)
    models = sorted({m for m, _ in expected})
    before = {m: _successes(target.server, m) for m in models}
    answers = load(target, concurrency=2, requests=REQUESTS)
    ok = sum(a.ok for a in answers)
    after = poll(lambda: {m: _successes(target.server, m) for m in models},  # each step counted, and no more
                 lambda now: all(now[m].get(v, 0) - before[m].get(v, 0) >= n * ok for (m, v), n in expected.items()))
    return judge_steps(target.name, expected, before, after, answers)


def judge_steps(name: str, expected: Counter, before: dict, after: dict, answers: list) -> CheckResult:
    """The verdict from the load's observations: the runs each (step model, version) is declared to make per
    ensemble request (``expected``), each step model's successes per version before and after the load, and the
    ensemble's answers."""
    ok = sum(a.ok for a in answers)
    models = sorted({m for m, _ in expected})
    ran = {(m, v): n - before[m].get(v, 0) for m in models for v, n in after[m].items() if n - before[m].get(v, 0)}
    problems = []
    if ok < len(answers):
        first = next(a.error for a in answers if not a.ok)
        problems.append(f"{len(answers) - ok} of {len(answers)} ensemble requests failed ({first[:160]})")
    for key in sorted(set(expected) | set(ran)):
        want, got = expected[key] * ok, ran.get(key, 0)
        if want != got:
            model, version = key
            problems.append(f"step model {model} version {version} ran {got} requests for {ok} answered ensemble "
                            f"requests (declared: {expected[key]} per request)")
    declared = ", ".join(f"{m} v{v}" + (f" x{n}" if n > 1 else "") for (m, v), n in expected.items())
    observed = ", ".join(f"{m} v{v}: {n}" for (m, v), n in sorted(ran.items())) + f" for {ok} ensemble requests"
    return CheckResult(name, "steps", f"steps {declared}", observed, "fail" if problems else "pass",
                       "; ".join(problems), {"ensemble_requests_answered": ok, "sent": len(answers),
                                             "per_step_expected": {f"{m}:{v}": n for (m, v), n in expected.items()},
                                             "per_step_ran": {f"{m}:{v}": n for (m, v), n in ran.items()}})
