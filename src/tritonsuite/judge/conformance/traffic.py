"""What the checks send and read: one request or a closed-loop load, sent through the deployment's driver with every
answer kept (:func:`tritonsuite.load.exchange.exchange`: a sequence model's in sequences, a decoupled model's on
streams), the statistics extension summed over a model's versions, and the Prometheus counters."""
from __future__ import annotations

import re
import threading
import time
import urllib.request
from typing import Mapping

import numpy as np

from tritonsuite.load.client import as_sent, batch_first
from tritonsuite.load.exchange import Answer, exchange
from tritonsuite.load.windows import COUNT_WAIT_S

#: the Prometheus counters the counters check reads (Triton's metric names)
METRICS = ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
           "nv_inference_exec_count", "nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model")


def load(target, concurrency: int, requests: int | None = None, stop: threading.Event | None = None,
         deadline_s: float = 120.0, timeout_s: float | None = None) -> list[Answer]:
    """The check's load: ``concurrency`` connections, each keeping one request of :meth:`Target.load_requests` in
    flight, sent as the deployment's driver sends them (:func:`tritonsuite.load.exchange.exchange`), until
    ``requests`` were sent or ``stop`` is set (or a round of them went unanswered: a hanging deployment's verdict
    needs no more); every answer kept. ``timeout_s``: one request's bound (default: the server's)."""
    return exchange(target.server, target.name, target.description,
                    [batch_first(r, target.description.batching) for r in target.load_requests()], target.output_names,
                    concurrency, count=requests, stop=stop, deadline_s=deadline_s, give_up=concurrency,
                    timeout_s=timeout_s)


def ask(target, request: Mapping[str, np.ndarray], version: str | int = "", options=None) -> Answer:
    """One request (a sequence model's: a sequence of one, START and END on it; a decoupled model's: on a stream,
    every response until the final one), as the driver sends it; the answer, failed or not. ``options``:
    :class:`~tritonsuite.load.http.RequestOptions` it carries (a priority, a timeout, a classification)."""
    model = f"{target.name}:{version}" if version else target.name
    answer = exchange(target.server, model, alone(target.description),
                      [batch_first(request, target.description.batching)], target.output_names, count=1,
                      options=options)[0]
    if answer.ok and not target.description.batching:  # the outputs as the server sent them: no batch dimension
        answer.outputs = [as_sent(r, False) for r in responses(answer)]
    return answer


def alone(description):
    """``description`` with a sequence model's request sent as a sequence of one (START and END on it)."""
    return description.with_sequences(length=1, variation_percent=0.0)


def answered(target, request: Mapping[str, np.ndarray], version: str | int = "",
             options=None) -> dict[str, np.ndarray]:
    """:func:`ask`'s outputs (a decoupled model's: its first response's), raising what failed."""
    answer = ask(target, request, version, options)
    if not answer.ok:
        raise ConformanceFailure(answer.error)
    return responses(answer)[0] if responses(answer) else {}


def responses(answer: Answer) -> list[dict[str, np.ndarray]]:
    """Every response's outputs of one answer (one, but for a decoupled model's)."""
    return list(answer.outputs) if isinstance(answer.outputs, list) else [answer.outputs]


class ConformanceFailure(RuntimeError):
    """A request of a check failed; the message is the server's (or the transport's) one line."""


def same(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
    """Bit for bit the same outputs (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(
        x is not None and y is not None and x.shape == y.shape and x.dtype == y.dtype
        and np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in ((a[k], b[k]) for k in a))


def statistics(server, model: str) -> dict:
    """The statistics extension for ``model``, summed over its versions: success/fail/queue/compute counts and ns,
    cache hits and misses, execution and inference counts, the batch-size histogram {size: executions} and
    ``execution_ns``: the executions' compute time, each execution once (``inference_stats`` count the compute of a
    batched execution once per request in it)."""
    conn = server.client(timeout=30)
    try:
        stats = conn.get_inference_statistics(model)
    finally:
        conn.close()
    return _summed(stats)


def _summed(stats: dict) -> dict:
    """:func:`statistics` of the extension's answer (``model_stats``: one entry per version)."""
    total: dict = {"execution_count": 0, "inference_count": 0, "execution_ns": 0, "batch_stats": {}}
    for entry in stats.get("model_stats", []):
        total["execution_count"] += int(entry.get("execution_count", 0))
        total["inference_count"] += int(entry.get("inference_count", 0))
        for part, value in entry.get("inference_stats", {}).items():
            for key in ("count", "ns"):
                total[f"{part}_{key}"] = total.get(f"{part}_{key}", 0) + int(value.get(key, 0))
        for batch in entry.get("batch_stats", []):
            size = int(batch["batch_size"])
            total["batch_stats"][size] = total["batch_stats"].get(size, 0) + int(batch["compute_infer"]["count"])
            total["execution_ns"] += int(batch["compute_infer"]["ns"])
    return total


def poll(read, done=lambda now: True, timeout_s: float = COUNT_WAIT_S):
    """``read()`` once ``done`` holds of it and the next read agrees, or the last read at the deadline: a response
    reaches the client a moment before the server counts it (on a busy host, more than a moment)."""
    deadline = time.monotonic() + timeout_s
    last = read()
    while time.monotonic() < deadline:  # pragma: no mutate (equivalent: <= differs only at the deadline's instant)
        time.sleep(0.03)
        now = read()
        if now == last and done(now):
            break
        last = now
    return last


def settled_statistics(server, model: str, timeout_s: float = 2.0) -> dict:
    """:func:`statistics` once two reads agree."""
    return poll(lambda: statistics(server, model), timeout_s=timeout_s)


def counted(server, model: str, before: dict, answered: int) -> dict:
    """:func:`statistics` once the ``answered`` requests since ``before`` show in the success count and two reads
    agree, or the last read after :data:`COUNT_WAIT_S`."""
    return poll(lambda: statistics(server, model),
                lambda now: stats_delta(now, before).get("success_count", 0) >= answered)


def stats_delta(after: dict, before: dict) -> dict:
    found = {k: v - before.get(k, 0) for k, v in after.items() if isinstance(v, int)}
    hist = {s: n - before["batch_stats"].get(s, 0) for s, n in after["batch_stats"].items()}
    found["batch_stats"] = {s: n for s, n in sorted(hist.items()) if n}
    return found


def ms_per_execution(delta: dict) -> float:
    """The compute time of one execution (ms) over a :func:`stats_delta` (0 when nothing executed)."""
    return delta.get("execution_ns", 0) / max(delta.get("execution_count", 0), 1) / 1e6


#: a Prometheus text sample: name{labels} value [timestamp] (a value may be NaN or +Inf; a label value may hold "}")
_SAMPLE = re.compile(r'^(\w+)\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}\s+([0-9.eE+-]+|[+-]?Inf|NaN)(?:\s+-?\d+)?\s*$')


def metrics(server, model: str) -> dict[str, float] | None:
    """Triton's Prometheus counters for ``model`` (summed over versions and failure reasons), or None where the
    server's metrics endpoint is not known."""
    url = getattr(server, "metrics_url", "")
    if not url:
        return None
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8", "replace")
    return _counters(text, model)


def _counters(text: str, model: str) -> dict[str, float]:
    """:data:`METRICS` for ``model`` from the Prometheus text (samples of other models and metrics left out)."""
    found = {m: 0.0 for m in METRICS}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) in found and f'model="{model}"' in match.group(2):
            found[match.group(1)] += float(match.group(3))
    return found


def judged_load(target, concurrency: int, requests: int, models: list[str]) -> tuple[dict, list, float]:
    """The check's load through the deployment's driver; each model's statistics delta over it (``models``: the
    ones whose schedulers are judged), the answers and the wall time it took."""
    before = {m: settled_statistics(target.server, m) for m in {target.name, *models}}
    start = time.monotonic()
    answers = load(target, concurrency, requests)
    elapsed = time.monotonic() - start
    own = counted(target.server, target.name, before[target.name], sum(a.ok for a in answers))
    after = {m: own if m == target.name else settled_statistics(target.server, m, 0.5) for m in models}
    return {m: stats_delta(after[m], before[m]) for m in models}, answers, elapsed


def largest_batch(d) -> int:
    """The most requests its batcher puts in one execution: the largest preferred batch size, else max_batch_size
    (1 without a batcher)."""
    return max(d.batcher.preferred_batch_sizes or (d.max_batch_size,)) if d.batcher is not None else 1


def fits_dims(shape, dims, batching: bool) -> bool:
    """Whether an answered output shape fits the declared dims (a batch dim first when the model batches)."""
    expected = ([-1] if batching else []) + list(dims)
    return len(shape) == len(expected) and all(e < 0 or s == e for s, e in zip(shape, expected))
