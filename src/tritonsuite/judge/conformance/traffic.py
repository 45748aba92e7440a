"""What the checks send and read: one request, a closed loop that keeps every answer (its version, timing and
whether it matched), the statistics extension summed over a model's versions, and the Prometheus counters.

The closed loop is not a measurement (that is :func:`tritonsuite.load.engine.measure`): a check needs each answer
and when it came, not windows of stable throughput.
"""
from __future__ import annotations

import re
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from tritonsuite.load.client import infer_tensors

#: the Prometheus counters the counters check reads (Triton's metric names)
METRICS = ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
           "nv_inference_exec_count", "nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model")
TIMEOUT_S = 60.0  # infer()'s deadline on a gRPC connection (an HTTP one has its client's: the server's bound)


@dataclass
class Answer:
    start: float  # monotonic seconds
    end: float
    ok: bool
    version: str = ""  # the model version that answered
    error: str = ""
    matched: bool | None = None  # the outputs equal the reference's (None: not compared)

    @property
    def latency_ms(self) -> float:
        return (self.end - self.start) * 1e3


def client(server, protocol: str = "http", timeout: float | None = None):
    """A client of ``server``; a request unanswered for ``timeout`` (default: the server's request timeout) fails."""
    if protocol == "grpc":
        return server.grpc_client()
    return server.client(timeout=timeout)


def infer(conn, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], version: str = "",
          protocol: str = "http", timeout: float = TIMEOUT_S):
    """One request; returns tritonclient's result (``as_numpy``, ``get_response``)."""
    tensors, requested = infer_tensors(inputs, outputs, protocol=protocol)
    extra = {"client_timeout": timeout} if protocol == "grpc" else {}
    return conn.infer(model, tensors, outputs=requested, model_version=str(version or ""), **extra)


def response_version(result) -> str:
    response = result.get_response()
    return str(response.get("model_version", "") if isinstance(response, dict) else response.model_version)


def outputs_of(result, names: Sequence[str]) -> dict[str, np.ndarray]:
    return {n: result.as_numpy(n) for n in names}


def same(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
    """Bit for bit the same outputs (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(
        x is not None and y is not None and x.shape == y.shape and x.dtype == y.dtype
        and np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in ((a[k], b[k]) for k in a))


def closed_loop(server, model: str, inputs: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]], outputs: Sequence[str], concurrency: int,
                requests: int | None = None, stop: threading.Event | None = None,
                reference: Mapping[str, np.ndarray] | None = None, deadline_s: float = 120.0) -> list[Answer]:
    """``concurrency`` clients, each keeping one request in flight, until ``requests`` were sent or ``stop`` is
    set (or ``deadline_s`` passed); every answer kept, compared with ``reference`` when given. ``inputs``: one
    request's tensors, or several requests sent in turn."""
    cycle = [inputs] if isinstance(inputs, Mapping) else list(inputs)
    answers: list[Answer] = []
    lock = threading.Lock()
    sent = [0]
    end_by = time.monotonic() + deadline_s

    def more() -> bool:
        with lock:
            if (requests is not None and sent[0] >= requests) or (stop is not None and stop.is_set()) \
                    or time.monotonic() > end_by:
                return False
            sent[0] += 1
            return cycle[sent[0] % len(cycle)]

    def worker():
        conn = client(server)
        try:
            while (request := more()) is not False:
                start = time.monotonic()
                try:
                    result = infer(conn, model, request, outputs)
                except Exception as exc:
                    answer = Answer(start, time.monotonic(), False, error=str(exc).strip().splitlines()[0][:300]
                                    if str(exc).strip() else type(exc).__name__)
                else:
                    answer = Answer(start, time.monotonic(), True, response_version(result))
                    if reference is not None:
                        answer.matched = same(outputs_of(result, outputs), reference)
                with lock:
                    answers.append(answer)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(deadline_s + server.request_timeout_s)  # each request's own bound (client(server))
    return sorted(answers, key=lambda a: a.start)


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


def settled_statistics(server, model: str, timeout_s: float = 2.0) -> dict:
    """:func:`statistics` once two reads agree: a response reaches the client a moment before the server counts it."""
    last = statistics(server, model)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.03)
        now = statistics(server, model)
        if now == last:
            break
        last = now
    return last


def stats_delta(after: dict, before: dict) -> dict:
    found = {k: v - before.get(k, 0) for k, v in after.items() if isinstance(v, int)}
    hist = {s: n - before["batch_stats"].get(s, 0) for s, n in after["batch_stats"].items()}
    found["batch_stats"] = {s: n for s, n in sorted(hist.items()) if n}
    return found


_SAMPLE = re.compile(r'^(\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$')


def metrics(server, model: str) -> dict[str, float] | None:
    """Triton's Prometheus counters for ``model`` (summed over versions and failure reasons), or None where the
    server's metrics endpoint is not known."""
    url = getattr(server, "metrics_url", "")
    if not url:
        return None
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8", "replace")
    found = {m: 0.0 for m in METRICS}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) in found and f'model="{model}"' in match.group(2):
            found[match.group(1)] += float(match.group(3))
    return found


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None
