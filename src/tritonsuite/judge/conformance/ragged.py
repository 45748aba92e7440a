"""Check ``ragged``: ``input.allow_ragged_batch`` as the live server's dynamic batcher applies it.

Triton's dynamic batcher puts requests in one execution only where every input without ``allow_ragged_batch`` has
the same shape; an input that allows ragged batches lets requests of different shapes share an execution (the
backend gets them unpadded).

What is sent: :func:`_concurrency` connections, each a closed loop of :data:`PER_CLIENT` requests of its own shape
(connection c sets the variable dims of the varied inputs to c + 1; the rest as ``Target.inputs`` gives them), so at
any moment at most one request of each shape is in flight: an execution of more than one request must mix shapes.
The varied inputs: those declaring allow_ragged_batch (with a variable dim); where none does, every input with a
variable dim (together, as a model whose inputs share a sequence length takes them). Judged from the statistics
extension's batch-size histogram over the load (``batch_stats``):

- allow_ragged_batch declared: passes where some execution held more than one request (shapes batched together);
  fails where every execution held one although requests waited for the instances (on average at least one:
  requests per second times the server's queue time, Little's law, as the batching check reads it);
- not declared, variable dims: passes where no execution held more than one request although requests waited (the
  batcher kept shapes apart); fails on an execution that mixed shapes.

Skipped (with the figures) where requests did not wait, so the batcher had nothing to group either way; where there
is no dynamic batcher or no room in max_batch_size for two requests; where no input has a variable dim.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from tritonsuite.judge.conformance.result import CheckResult, Target
from tritonsuite.judge.conformance.traffic import counted, settled_statistics, stats_delta
from tritonsuite.load.client import batch_first
from tritonsuite.load.exchange import exchange
from tritonsuite.core.reasons import reason

PER_CLIENT = 8
MAX_SHAPES = 6


#: every failure reason this check gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("{} of {} requests failed ({})",
           "unit/test_judge_ragged.py::test_failed_requests_fail_with_the_first_error"),
    reason("no allow_ragged_batch on {}, but {} execution(s) held requests of different shapes (batch sizes {}, one "
           "request of each shape in flight)",
           "unit/test_judge_ragged.py::test_an_execution_mixing_shapes_without_allow_ragged_batch_fails",
           "test_conformance_fields.py::test_ragged_default_keeps_shapes_apart_and_catches_a_batcher_that_mixes_them"),
    reason("allow_ragged_batch declared on {}, but every one of {} executions held one request while {} requests of "
           "{} shapes waited on average",
           "unit/test_judge_ragged.py::test_allow_ragged_batch_with_every_execution_alone_while_requests_waited_fails",
           "test_conformance_fields.py::test_ragged_batches_shapes_together_only_where_allowed"),
    reason("the statistics extension reported no batch_stats for the load",
           "unit/test_judge_ragged.py::test_a_load_without_batch_stats_fails"),
)


def _concurrency(target: Target) -> int:
    return max(2, min(MAX_SHAPES, target.description.max_batch_size // max(target.batch_size, 1)))


def _varied(target: Target) -> tuple[list[str], bool]:
    """(the inputs whose variable dims the load varies, whether they declare allow_ragged_batch)."""
    entries = {e["name"]: e for e in target.description.config.get("input", [])}
    variable = [t.name for t in target.description.inputs if any(d < 0 for d in t.shape)]
    ragged = [n for n in variable if entries.get(n, {}).get("allow_ragged_batch")]
    return (ragged, True) if ragged else (variable, False)


def _shaped(target: Target, names: list[str], length: int, seed: int) -> dict[str, np.ndarray]:
    """A request with the variable dims of ``names`` set to ``length`` (values repeated from Target.inputs')."""
    request = dict(target.request(target.batch_size, seed))
    batched = target.description.batching
    for t in target.description.inputs:
        if t.name not in names:
            continue
        value = np.asarray(request[t.name])
        lead = value.shape[:1] if batched else ()
        shape = lead + tuple(length if d < 0 else d for d in t.shape)
        request[t.name] = np.resize(value, shape).astype(value.dtype)
    return request


def _declared(names: list[str], ragged: bool) -> str:
    return (f"allow_ragged_batch on {names}: requests of different shapes batched together" if ragged else
            f"no allow_ragged_batch on {names}: requests of different shapes never in one execution")


def check_ragged(target: Target) -> CheckResult:
    d = target.description
    names, ragged = _varied(target)
    declared = _declared(names, ragged)
    if d.dynamic_batching is None or not d.batching:
        return CheckResult(target.name, "ragged", declared if names else "-", "-", "skipped",
                           "no dynamic batcher: requests never share an execution, whatever their shapes")
    if not names:
        return CheckResult(target.name, "ragged", "no input with a variable dim", "-", "skipped",
                           "no input has a variable dim: every request has the same shape")
    b = target.batch_size
    if d.max_batch_size < 2 * b:
        return CheckResult(target.name, "ragged", declared, "-", "skipped",
                           f"max_batch_size {d.max_batch_size} leaves no room for two requests of batch {b}")
    concurrency = _concurrency(target)
    before = settled_statistics(target.server, target.name)
    answers: list = []
    lock = threading.Lock()

    def client(c: int) -> None:
        request = batch_first(_shaped(target, names, c + 1, c), target.description.batching)
        found = exchange(target.server, target.name, d, [request], target.output_names, count=PER_CLIENT)
        with lock:
            answers.extend(found)

    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    elapsed = time.monotonic() - start
    delta = stats_delta(counted(target.server, target.name, before, sum(a.ok for a in answers)), before)
    return judge_ragged(target.name, names, ragged, b, concurrency, delta, answers, elapsed)


def judge_ragged(name: str, names: list[str], ragged: bool, b: int, concurrency: int, delta: dict, answers: list,
                 elapsed: float) -> CheckResult:
    """The verdict from the load's observations: the varied inputs (``names``) and whether they declare
    allow_ragged_batch, the requests' batch size, the shapes in flight (``concurrency``), the statistics delta over
    the load, its answers and wall time."""
    declared = _declared(names, ragged)
    hist = delta["batch_stats"]
    count = delta.get("success_count", 0)
    queue_ms = delta.get("queue_ns", 0) / max(delta.get("queue_count", 0), 1) / 1e6
    waiting = count * queue_ms / 1e3 / elapsed if elapsed > 0 else 0.0
    mixed = {s: n for s, n in hist.items() if s > b}
    failed = [a for a in answers if not a.ok]
    evidence = {"concurrency": concurrency, "shapes": {n: list(range(1, concurrency + 1)) for n in names},
                "requests": len(answers), "failed": len(failed), "batch_stats": hist,
                "executions": delta.get("execution_count", 0), "queue_ms_per_request": round(queue_ms, 3),
                "waiting_on_average": round(waiting, 3), "seconds": round(elapsed, 3)}
    observed = (f"{len(answers)} requests of {concurrency} shapes (one in flight per shape): "
                f"{delta.get('execution_count', 0)} executions, histogram {hist}, {waiting:.2f} requests waiting on "
                f"average")
    problems = [f"{len(failed)} of {len(answers)} requests failed ({failed[0].error})"] if failed else []
    if not ragged and mixed:
        problems.append(f"no allow_ragged_batch on {names}, but {sum(mixed.values())} execution(s) held requests of "
                        f"different shapes (batch sizes {sorted(mixed)}, one request of each shape in flight)")
    if ragged and not mixed and hist and waiting >= 1:
        problems.append(f"allow_ragged_batch declared on {names}, but every one of {delta.get('execution_count', 0)} "
                        f"executions held one request while {waiting:.2f} requests of {concurrency} shapes waited on "
                        f"average")
    if problems:
        return CheckResult(name, "ragged", declared, observed, "fail", "; ".join(problems), evidence)
    if not hist:
        return CheckResult(name, "ragged", declared, observed, "fail",
                           "the statistics extension reported no batch_stats for the load", evidence)
    if not mixed and waiting < 1:  # one request per execution shows nothing unless requests waited
        return CheckResult(name, "ragged", declared, observed, "skipped",
                           f"{waiting:.2f} requests waited on average ({count} requests x {queue_ms:.2f} ms queue over "
                           f"{elapsed:.3f} s): the instances kept up with {concurrency} clients, so the batcher had "
                           f"nothing to group", evidence)
    return CheckResult(name, "ragged", declared, observed, "pass", "", evidence)
