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
from dataclasses import dataclass
from typing import Callable

from tritonsuite.judge.conformance.fields import declared_fields
from tritonsuite.judge.conformance.result import STATUS, VERDICTS, CheckResult, ConformanceError, Target
from tritonsuite.load.kinds import driver_for

__all__ = ["CHECKS", "DEFAULT_CHECKS", "ENTRIES", "OFFLINE_CHECKS", "Entry", "STATUS", "VERDICTS", "CheckResult", "ConformanceError", "Target",
           "parse_checks", "run_check", "run_checks"]

@dataclass(frozen=True)
class Entry:
    """A check's facts, in one place: where its function is (``module:function`` of this package), what it needs of
    a deployment's kind (capabilities its driver may lack: :meth:`tritonsuite.load.kinds.Driver.lacks`, which says
    why), whether it runs only when named, and whether it also runs on a profile's offline deployment (which differs
    from the online one only by its scheduler). Each check's failure reasons are in its module's ``REASONS``."""

    where: str
    needs: tuple[str, ...] = ()
    opt_in: bool = False
    offline: bool = False


#: every check, in the order they run: the field checks, the system checks, then those that load the deployment
#: again (warmup, shutdown on a twin server) and reload last (it changes it). Shutdown runs only when named
#: (``--checks shutdown`` or ``--checks all``): it starts a second server for each deployment (about 8 s each on the
#: corpus here), a cost a run of every deployment should not pay unasked
ENTRIES = {
    "identity": Entry("identity:check_identity", offline=True),
    "batching": Entry("batching:check_batching", offline=True),
    "instances": Entry("batching:check_instances"), "rate_limiter": Entry("ratelimit:check_rate_limiter"),
    "tensors": Entry("tensors:check_tensors"), "classification": Entry("tensors:check_classification"),
    "steps": Entry("steps:check_steps"), "sequence": Entry("sequence:check_sequence"),
    "state": Entry("state:check_state"), "ordering": Entry("ordering:check_ordering"),
    "ragged": Entry("ragged:check_ragged"), "queue_policy": Entry("queue:check_queue_policy"),
    "priority": Entry("priority:check_priority"), "decoupled": Entry("decoupled:check_decoupled"),
    "cache": Entry("cache:check_cache", needs=("stateless requests", "cached responses")),
    "refusals": Entry("refusals:check_refusals", needs=("stateless requests",), offline=True),
    "counters": Entry("counters:check_counters", needs=("stateless requests",), offline=True),
    "test01": Entry("system:check_test01"), "test04": Entry("system:check_test04"),
    "test05": Entry("system:check_test05"), "warmup": Entry("warmup:check_warmup"),
    "shutdown": Entry("shutdown:check_shutdown", opt_in=True), "reload": Entry("reload:check_reload"),
}
CHECKS = tuple(ENTRIES)
OPT_IN = tuple(c for c, e in ENTRIES.items() if e.opt_in)
DEFAULT_CHECKS = tuple(c for c in CHECKS if c not in OPT_IN)
#: the checks a profile's offline deployment runs too: those that read its scheduler or its requests alone
OFFLINE_CHECKS = tuple(c for c, e in ENTRIES.items() if e.offline)


def _registry() -> dict[str, Callable[[Target], CheckResult]]:
    import importlib

    found = {}
    for check, entry in ENTRIES.items():
        module, function = entry.where.split(":")
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
    driver = driver_for(target.description)
    why = next((f"needs {need}: {why}" for need in ENTRIES[check].needs if (why := driver.lacks(need))), "")
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
