"""Conformance: does a deployment, live on a server, do what its configuration declares?

perf_analyzer and Model Analyzer measure a deployment; Model Navigator validates a model before it is deployed.
These checks take a *running* server and a deployment's repository directory (its ``config.pbtxt``, read with
Triton's protobuf into a :class:`~tritonsuite.core.description.ModelDescription`: what is declared) and compare with what
the server shows (metadata, configuration, the statistics extension, Prometheus metrics, answers):

- field checks, each showing fields of the configuration at work (:data:`.fields.FIELDS` ties every field of
  Triton's ``ModelConfig`` to its check, or says why nothing outside the server can show it): ``identity``,
  ``batching``, ``instances``, ``rate_limiter``, ``tensors``, ``classification``, ``steps``, ``sequence``, ``state``,
  ``ordering``, ``ragged``, ``queue_policy``, ``priority``, ``decoupled``, ``warmup``, ``cache``;
- system checks of the deployment as a whole (:data:`.fields.SYSTEM`): ``refusals`` (malformed requests refused
  cleanly and harmlessly), ``counters`` (statistics and metrics agree with the client), ``test01``, ``test04``,
  ``test05`` (MLPerf's compliance tests), ``shutdown`` (requests in flight answered when the server stops) and
  ``reload`` (a new version and a changed configuration under load, without a failed request).

Each module's docstring says what its check sends and judges; docs/conformance.md has the table and the evidence.
Each check returns a :class:`CheckResult` (check, declared, observed, verdict pass/fail/skipped with its reason,
evidence), which becomes a :class:`~tritonsuite.core.rows.Row` of scenario ``conformance``. Use it from a script::

    target = Target(server, Path("model_repos/bert_cpu_onnx_fp32_online"))
    for result in run_checks(target):
        print(result.line())
"""
from __future__ import annotations

import time
from typing import Callable

from tritonsuite.judge.conformance.fields import declared_fields
from tritonsuite.judge.conformance.result import (STATUS, VERDICTS, CheckResult, ConformanceError, Target,
                                                  declared_inputs)
from tritonsuite.load.kinds import driver_for

__all__ = ["CHECKS", "DEFAULT_CHECKS", "STATUS", "VERDICTS", "CheckResult", "ConformanceError", "Target", "declared_inputs",
           "parse_checks", "run_check", "run_checks"]

#: check -> "module:function" of this package, in the order the checks run: the field checks, the system checks,
#: then those that load the deployment again (warmup, shutdown on a twin server) and reload last (it changes it)
_CHECKS = {
    "identity": "identity:check_identity", "batching": "batching:check_batching",
    "instances": "batching:check_instances", "rate_limiter": "ratelimit:check_rate_limiter",
    "tensors": "tensors:check_tensors", "classification": "tensors:check_classification", "steps": "steps:check_steps",
    "sequence": "sequence:check_sequence", "state": "state:check_state", "ordering": "ordering:check_ordering",
    "ragged": "ragged:check_ragged", "queue_policy": "queue:check_queue_policy", "priority": "priority:check_priority",
    "decoupled": "decoupled:check_decoupled", "cache": "cache:check_cache",
    "refusals": "refusals:check_refusals", "counters": "counters:check_counters",
    "test01": "system:check_test01", "test04": "system:check_test04", "test05": "system:check_test05",
    "warmup": "warmup:check_warmup", "shutdown": "shutdown:check_shutdown", "reload": "reload:check_reload",
}
CHECKS = tuple(_CHECKS)
#: checks run only when named (``--checks shutdown`` or ``--checks all``): shutdown starts a second server for each
#: deployment (about 8 s each on the corpus here), a cost a run of every deployment should not pay unasked
OPT_IN = ("shutdown",)
DEFAULT_CHECKS = tuple(c for c in CHECKS if c not in OPT_IN)


def _registry() -> dict[str, Callable[[Target], CheckResult]]:
    import importlib

    found = {}
    for check, where in _CHECKS.items():
        module, function = where.split(":")
        found[check] = getattr(importlib.import_module(f"tritonsuite.judge.conformance.{module}"), function)
    return found


def parse_checks(value: str | None) -> tuple[str, ...]:
    """``--checks a,b`` into check names (empty: :data:`DEFAULT_CHECKS`; ``all``: every one), naming the valid
    choices on a bad one."""
    names = tuple(v.strip() for v in (value or "").split(",") if v.strip())
    if names == ("all",):
        return CHECKS
    bad = [n for n in names if n not in CHECKS]
    if bad:
        raise ConformanceError(f"conformance check {bad[0]!r}; valid choices: all, {', '.join(CHECKS)}")
    return names or DEFAULT_CHECKS


def run_check(target: Target, check: str) -> CheckResult:
    """Run one check on the deployment; a check that raises is a failure with the error as its reason (a server
    that died raises on: nothing after it can be judged)."""
    from tritonsuite.server import ServerDied

    if check not in CHECKS:
        raise ConformanceError(f"conformance check {check!r}; valid choices: {', '.join(CHECKS)}")
    start = time.monotonic()
    target.server.check_alive(f"before the {check} check of {target.name}")
    why = driver_for(target.description).not_applicable(check)
    if why:
        return CheckResult(target.name, check, "-", "-", "skipped", why,
                           fields=declared_fields(target.description.config))
    try:
        result = _registry()[check](target)
    except ServerDied:
        raise
    except Exception as exc:
        if target.server.gone():
            raise target.server.died(f"during the {check} check of {target.name}") from None
        first = (str(exc).strip().splitlines() or [""])[0]
        result = CheckResult(target.name, check, "-", "-", "fail", f"{type(exc).__name__}: {first}")
    if result.check != check:  # its row would land under another check's name in every report
        result = CheckResult(target.name, check, result.declared, result.observed, "fail",
                             f"the {check} check reported its result as {result.check!r}", result.evidence)
    result.seconds = time.monotonic() - start
    result.fields = declared_fields(target.description.config)
    return result


def run_checks(target: Target, checks=DEFAULT_CHECKS) -> list[CheckResult]:
    """Every check asked for (by default all but the opt-in ones), in :data:`CHECKS` order."""
    return [run_check(target, c) for c in CHECKS if c in checks]
