"""Accuracy under load: a deployment must answer a sample the same whatever it was batched with.

While an online point runs, a seeded share of its requests carries the model's accuracy inputs ("probes", each a
request of the point's batch size) instead of the load request (:func:`tritonsuite.load.engine.measure` with
``probes=``). The reference is the same probe requests sent one at a time (concurrency 1) through the same
deployment just before the load. Then:

- every probe response must equal its one-at-a-time response within the model's tolerances over valid frames
  (:func:`tritonsuite.judge.accuracy.compare_outputs`, the comparison the accuracy scenario uses);
- the task metric (``AccuracyData.score``) computed with the probed samples' under-load responses in place of
  their one-at-a-time ones must match the metric of the one-at-a-time responses, within the metric's allowance
  (:func:`tritonsuite.judge.baselines.default_allowance`). The score functions take the whole accuracy set (MAP over
  display groups, AUC), so the under-load responses are scored inside it.

A deployment whose answer for a sample depends on its batch-mates, or that hands one request another request's
output under load, fails, naming the sample, the output and how far off it was.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tritonsuite.core.description import ModelDescription
from tritonsuite.core.spec import AccuracyData, ModelSpec, rule_precision
from tritonsuite.core.tensors import OutputComparison, compare_outputs, pad_to_common_shape
from tritonsuite.judge.baselines import default_allowance

DEFAULT_PROBE_SHARE = 0.1  # of an online point's requests, at its highest concurrency
DEFAULT_PROBE_SEED = 0
MAX_LISTED = 3  # mismatching samples named in the failure lines (all are counted)


@dataclass(frozen=True)
class ProbeSet:
    """The accuracy set cut into requests of the point's batch size: request j holds samples ``samples[j]``
    (consecutive; the last request is filled up from the first samples)."""

    requests: list[dict[str, np.ndarray]]
    samples: list[np.ndarray]
    total: int  # samples in the accuracy set


def probe_set(inputs: Mapping[str, np.ndarray], batch_size: int) -> ProbeSet:
    if batch_size < 1:
        raise ValueError(f"batch size {batch_size}: expected >= 1")
    n = len(next(iter(inputs.values())))
    if n == 0:
        raise ValueError("the accuracy set holds no samples")
    samples = [np.arange(start, start + batch_size) % n for start in range(0, n, batch_size)]
    requests = [{k: np.ascontiguousarray(v[idx]) for k, v in inputs.items()} for idx in samples]
    return ProbeSet(requests, samples, n)


@dataclass(frozen=True)
class MetricMatch:
    """A task metric on the one-at-a-time responses and with the under-load responses in their place."""

    name: str
    alone: float
    under_load: float
    allowance: Mapping[str, float]  # {"absolute": x} or {"relative": r}, as the baselines allow

    @property
    def allowed(self) -> float:
        return self.allowance.get("absolute", 0.0) + self.allowance.get("relative", 0.0) * abs(self.alone)

    @property
    def passed(self) -> bool:
        if not (math.isfinite(self.alone) and math.isfinite(self.under_load)):
            return (math.isnan(self.alone) and math.isnan(self.under_load)) or self.alone == self.under_load
        return abs(self.under_load - self.alone) <= self.allowed + 1e-12

    def describe(self) -> str:
        return (f"{self.name}: {self.under_load:.6g} under load, {self.alone:.6g} one at a time (difference "
                f"{self.under_load - self.alone:+.3g}, allowed {self.allowed:.3g})")


@dataclass
class UnderLoadResult:
    """The verdict of one point's accuracy under load."""

    deployment: str
    batch_size: int
    concurrency: int
    share: float
    seed: int
    samples: int  # in the accuracy set
    probe_requests: int  # requests the set was cut into
    answered: int  # probe responses received under load
    samples_probed: int  # distinct samples answered under load at least once
    mismatched_responses: int
    mismatches: list[str] = field(default_factory=list)  # the first MAX_LISTED, each naming its sample
    metrics: list[MetricMatch] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures

    def describe(self) -> str:
        """One line: the verdict, what was checked, and the first failures."""
        head = (f"{self.answered} probe responses at concurrency {self.concurrency} (share {self.share:g}, seed "
                f"{self.seed}) over {self.samples_probed} of {self.samples} samples")
        if self.passed:
            return f"passed: {head} equal the samples sent one at a time; " + (
                ", ".join(f"{m.name} {m.under_load:.4g}" for m in self.metrics) or "no task metric")
        return f"FAILED: {head}: " + "; ".join(self.failures)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in dataclasses.asdict(self).items() if k != "metrics"}
        data["metrics"] = {m.name: {"alone": m.alone, "under_load": m.under_load, "allowed": m.allowed,
                                    "passed": m.passed} for m in self.metrics}
        data["passed"] = self.passed
        data["verdict"] = self.describe()
        return data


def _named(c: OutputComparison, samples: np.ndarray) -> OutputComparison:
    """The comparison with its worst sample renamed from the row in the request to the index in the accuracy set."""
    worst_index = (int(samples[c.worst_index[0]]),) + tuple(c.worst_index[1:]) if c.worst_index else ()
    return dataclasses.replace(c, worst_index=worst_index, worst_sample=int(samples[c.worst_sample]))


def judge(spec: ModelSpec, precision: str, data: AccuracyData, probes: ProbeSet,
          alone: Sequence[Mapping[str, np.ndarray]], responses: Sequence[tuple[int, Mapping[str, np.ndarray]]], *,
          deployment: str = "", batch_size: int = 1, concurrency: int = 1, share: float = DEFAULT_PROBE_SHARE,
          seed: int = DEFAULT_PROBE_SEED) -> UnderLoadResult:
    """Judge the probe ``responses`` ((request index, outputs) received under load) against ``alone`` (each probe
    request's outputs when sent one at a time)."""
    start = time.perf_counter()
    mismatches: list[str] = []
    mismatched = 0
    first: dict[int, Mapping[str, np.ndarray]] = {}  # each request's first response under load, for the metric
    for probe, outputs in responses:
        if probe not in first and set(alone[probe]) <= set(outputs):  # one lacking an output: a mismatch below
            first[probe] = outputs
        samples = probes.samples[probe]
        try:
            bad = [_named(c, samples) for c in compare_outputs(outputs, alone[probe], spec, precision)
                   if not c.passed]
            lines = [c.describe() for c in bad]
            named = (bad[0].worst_sample if bad[0].allowed_share else bad[0].worst_index[0]) if bad else None
        except (KeyError, ValueError) as exc:  # a missing output or another shape than alone
            lines, named = [str(exc.args[0] if exc.args else exc)], int(samples[0])  # KeyError's own text unquoted
        if lines:
            mismatched += 1
            if len(mismatches) < MAX_LISTED:
                where = f"sample {named}" + (f" (request of samples {samples[0]}-{samples[-1]})"
                                             if len(samples) > 1 else "")
                mismatches.append(f"{where}: " + "; ".join(lines))
    failures = []
    if not responses:
        failures.append("no probe was answered under load: raise the share (--load-probe-share) or the "
                        "measurement windows")
    if mismatched:
        failures.append(f"{mismatched} of {len(responses)} probe responses differ from the same samples sent one at "
                        f"a time: " + " | ".join(mismatches) + (" | ..." if mismatched > len(mismatches) else ""))
    metrics = _metric_matches(data, probes, alone, first, precision)
    failures += [f"task metric differs: {m.describe()}" for m in metrics if not m.passed]
    probed = {int(s) for probe in first for s in probes.samples[probe]}
    return UnderLoadResult(deployment=deployment, batch_size=batch_size, concurrency=concurrency, share=share,
                           seed=seed, samples=probes.total, probe_requests=len(probes.requests),
                           answered=len(responses), samples_probed=len(probed), mismatched_responses=mismatched,
                           mismatches=mismatches, metrics=metrics, failures=failures,
                           seconds=round(time.perf_counter() - start, 3))


def _stack(parts: Sequence[Mapping[str, np.ndarray]], total: int) -> dict[str, np.ndarray]:
    """Per-request outputs concatenated over the set (padded to a common shape), first ``total`` samples."""
    return {name: np.concatenate(pad_to_common_shape([np.asarray(p[name]) for p in parts]))[:total]
            for name in parts[0]}


def _metric_matches(data: AccuracyData, probes: ProbeSet, alone: Sequence[Mapping[str, np.ndarray]],
                    under_load: Mapping[int, Mapping[str, np.ndarray]], precision: str) -> list[MetricMatch]:
    if not under_load:
        return []
    reference = _stack(alone, probes.total)
    mixed = _stack([under_load.get(j, alone[j]) for j in range(len(alone))], probes.total)
    rules = rule_precision(precision)  # mixed: fp16's rules
    before = {m.name: m.value for m in data.score(reference, reference, rules)}
    after = {m.name: m.value for m in data.score(mixed, reference, rules)}
    return [MetricMatch(name, float(before[name]), float(after.get(name, float("nan"))), default_allowance(name))
            for name in before]


def run_alone(infer, probes: ProbeSet) -> list[dict[str, np.ndarray]]:
    """The reference: each probe request sent one at a time (one request in flight) through ``infer``."""
    return [infer(request) for request in probes.requests]


def accuracy_under_load(server, deployment: str, spec: ModelSpec, precision: str, data: AccuracyData, point,
                        settings, share: float = DEFAULT_PROBE_SHARE, seed: int = DEFAULT_PROBE_SEED,
                        progress: Callable[[str], None] | None = None, *, description: ModelDescription,
                        source=None):
    """Measure ``point`` of ``deployment`` with a ``share`` of its requests carrying ``data``'s samples, and judge
    them against the same requests sent one at a time just before. ``source``: the load source that sends the
    point (:mod:`tritonsuite.load.sources`; the default one when None), which must carry probes. Returns
    (Measurement, UnderLoadResult)."""
    from tritonsuite.load import sources
    from tritonsuite.load.client import served_infer
    from tritonsuite.load.engine import Traffic

    source = sources.get() if source is None else source
    source.require(sources.PROBES, "carry accuracy probes in its load")

    probes = probe_set({t.name: data.inputs[t.name] for t in spec.inputs}, point.batch_size)
    if progress is not None:
        progress(f"accuracy under load: sending {len(probes.requests)} probe requests one at a time first (the "
                 f"reference), then the point with a share of {share:g} of its requests carrying them")
    client = server.grpc_client() if getattr(point, "protocol", "http") == "grpc" else server.client()
    try:
        alone = run_alone(served_infer(client, deployment, spec, batched=description.batching), probes)
    except Exception:
        if server.gone():
            raise server.died(f"while sending the accuracy samples of {deployment} one at a time") from None
        raise
    finally:
        client.close()
    measurement = source.measure(server, Traffic(deployment, spec.example_inputs(point.batch_size, 0), spec.outputs,
                                                 point, description, probes=probes.requests, probe_share=share,
                                                 probe_seed=seed), settings, progress=progress)
    result = judge(spec, precision, data, probes, alone, measurement.probe_responses, deployment=deployment,
                   batch_size=point.batch_size, concurrency=point.concurrency, share=share, seed=seed)
    return measurement, result
