"""Conformance: does a deployment, live on a server, do what its configuration declares?

perf_analyzer and Model Analyzer measure a deployment; Model Navigator validates a model before it is deployed.
These checks take a *running* server and a deployment's repository directory (its ``config.pbtxt``, read with
Triton's protobuf into a :class:`~tritonsuite.core.description.ModelDescription`: what is declared) and compare with what
the server shows (metadata, configuration, the statistics extension, Prometheus metrics, answers):

- ``identity``: platform/backend, tensors, dtypes, dims and max batch size as served; READY versions exactly those
  the version policy selects from the version directories, each answering with the declared outputs;
- ``batching``: with dynamic batching, under closed-loop load of twice the largest preferred batch size, executions
  of more than one request, the preferred sizes reached, none above max_batch_size, queue time within the queue
  delay plus the executions a request waits for (the server's own timing); without it, one execution per request;
- ``instances``: the declared instance count shows as overlapping executions (the server's compute time over the
  wall time it took);
- ``refusals``: malformed requests over HTTP and gRPC get an error naming the problem in bounded time, and the
  deployment stays live, ready and answers a reference request exactly as before;
- ``reload``: a new version and a changed configuration loaded under load: no failed request, no old answer after a
  new one, latency during the switch against before (a remote server only with ``allow_reload``);
- ``counters``: the statistics extension and Prometheus metrics agree with what the client sent and received;
- ``cache``: where the configuration enables the response cache and the server has one: a repeated input is a
  hit with the same answer, a different input a miss, and the cached answer is what the model computes;
- ``decoupled``: each request on a stream ends with exactly one final flag, no response after it, every response
  carrying the declared outputs (a request answered by no response still ends);
- ``ordering``: with preserve_ordering, requests sent apart come back in the order sent (inconclusive where no
  executions overlapped);
- ``ragged``: requests of different shapes share an execution only where allow_ragged_batch allows it;
- ``warmup``: with model_warmup, the first request after a load costs what the steady state costs (the model is
  reloaded as served, then restored).

Each check returns a :class:`CheckResult` (check, declared, observed, verdict pass/fail/skipped with its reason,
evidence), which becomes a :class:`~tritonsuite.core.rows.Row` of scenario ``conformance``. Use it from a script::

    target = Target(server, Path("model_repos/bert_cpu_onnx_fp32_online"))
    for result in run_checks(target):
        print(result.line())
"""
from __future__ import annotations

import time
from typing import Callable

from tritonsuite.judge.conformance.result import (STATUS, VERDICTS, CheckResult, ConformanceError, Target,
                                                  declared_inputs)
from tritonsuite.load.kinds import driver_for

__all__ = ["CHECKS", "STATUS", "VERDICTS", "CheckResult", "ConformanceError", "Target", "declared_inputs",
           "parse_checks", "run_check", "run_checks"]

#: the checks, in the order they run (the cheap, read-only ones first; reload last: it changes the deployment)
CHECKS = ("identity", "batching", "instances", "refusals", "counters", "cache", "decoupled", "ordering", "ragged",
          "warmup", "reload")


def _registry() -> dict[str, Callable[[Target], CheckResult]]:
    from tritonsuite.judge.conformance import (batching, cache, counters, decoupled, identity, ordering, ragged,
                                               refusals, reload, warmup)

    return {"identity": identity.check_identity, "batching": batching.check_batching,
            "instances": batching.check_instances, "refusals": refusals.check_refusals,
            "counters": counters.check_counters, "cache": cache.check_cache,
            "decoupled": decoupled.check_decoupled, "ordering": ordering.check_ordering,
            "ragged": ragged.check_ragged, "warmup": warmup.check_warmup, "reload": reload.check_reload}


def parse_checks(value: str | None) -> tuple[str, ...]:
    """``--checks a,b`` into check names (empty: all), naming the valid choices on a bad one."""
    names = tuple(v.strip() for v in (value or "").split(",") if v.strip())
    bad = [n for n in names if n not in CHECKS]
    if bad:
        raise ConformanceError(f"conformance check {bad[0]!r}; valid choices: {', '.join(CHECKS)}")
    return names or CHECKS


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
        return CheckResult(target.name, check, "-", "-", "skipped", why)
    try:
        result = _registry()[check](target)
    except ServerDied:
        raise
    except Exception as exc:
        if target.server.gone():
            raise target.server.died(f"during the {check} check of {target.name}") from None
        first = (str(exc).strip().splitlines() or [""])[0]
        result = CheckResult(target.name, check, "-", "-", "fail", f"{type(exc).__name__}: {first}")
    result.seconds = time.monotonic() - start
    return result


def run_checks(target: Target, checks=CHECKS) -> list[CheckResult]:
    """Every check asked for, in :data:`CHECKS` order."""
    return [run_check(target, c) for c in CHECKS if c in checks]
