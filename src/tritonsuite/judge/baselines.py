"""Accuracy baselines: what each deployment scored when the team last accepted it, and the regression it may
take before CI fails.

A baseline file per profile and model (``fixtures/baselines/<profile>/<model>.json``, committed by the team) holds,
per deployment, each metric's value, its direction and its allowance, with the provenance of the run that wrote
it. :func:`compare` judges a new accuracy row against it: a metric worse than its baseline by more than its
allowance is a regression (named with baseline, now, delta and allowance); better is an improvement, reported and
never failed. Allowances default per metric kind (:data:`DEFAULT_ALLOWANCES`) and can be edited in the file.
Triton-vs-eager errors are recorded and their deltas shown, but they are gated by the absolute tolerances of the
accuracy scenario, not here.

A baseline knows what it measured: each deployment's entry records the sha256 of the weights and of the dataset
(:data:`DIGESTS`, from the row's ``extra``). A row measured with other weights or data is not judged against it (its
deltas would say nothing about the deployment): the comparison is *refused* with one line naming both hashes and
the way out, which ``--require-baselines`` turns into a failure.
"""
from __future__ import annotations

import fcntl
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from tritonsuite.core.reasons import reason

# (fragment of the metric name, absolute allowance, relative allowance): the first match wins. Points on a 0-100
# scale (SQuAD F1 and exact match) may drop 0.1 point, dice 0.002, AUC and MAP 0.001, q-risk may grow 1%. These are
# floors (the smallest change worth failing): a committed baseline's allowance is raised above its floor where 5x
# the spread the host's math alone gives that metric is more (examples/accuracy_spread.py, docs/accuracy.md)
DEFAULT_ALLOWANCES: tuple[tuple[str, float | None, float | None], ...] = (
    ("relative_to_eager", 0.001, None),
    ("difference_to_reference", 0.001, None),
    ("q_risk", None, 0.01),
    ("f1", 0.1, None),
    ("exact_match", 0.1, None),
    ("dice", 0.002, None),
    ("auc", 0.001, None),
    ("map", 0.001, None),
    ("share", 0.001, None),
    ("agreement", 0.001, None),
)
#: names this module writes failure reasons to, beside ``problems`` and ``reason`` (tritonsuite.core.reasons)
REASON_NAMES = ("missing",)
#: functions that return failure reasons (tritonsuite.core.reasons)
REASON_FUNCTIONS = ("refusal",)
FALLBACK_ALLOWANCE = (0.001, None)
INFORMATIONAL = ("max abs error", "max rel error")
DIGESTS = (("weights", "weights_sha256"), ("dataset", "dataset_sha256"))  # what a baseline was measured with  # Triton-vs-eager errors: gated by tolerances, not baselines


#: every failure reason this module gives, and the tests that make it happen (tritonsuite.core.reasons)
REASONS = (
    reason("no baseline for {} in {}", "unit/test_baselines.py::test_regressions_improvements_and_informational_errors",
           "test_user_model.py::test_the_accuracy_gate_against_committed_baselines"),
    reason("not judged against its baseline",
           "unit/test_baselines.py::test_a_baseline_measured_with_other_weights_or_data_is_refused_in_one_line_not_judged",
           "test_user_model.py::test_the_accuracy_gate_against_committed_baselines"),
)


def informational(metric: str) -> bool:
    return any(kind in metric for kind in INFORMATIONAL)


class BaselineError(ValueError):
    """A baseline file that cannot be read; the message names the file."""


def default_allowance(metric: str) -> dict[str, float]:
    for fragment, absolute, relative in DEFAULT_ALLOWANCES:
        if fragment in metric:
            break
    else:
        absolute, relative = FALLBACK_ALLOWANCE
    return {k: v for k, v in (("absolute", absolute), ("relative", relative)) if v is not None}


def direction(metric: str, threshold: Any) -> str:
    """"higher" or "lower" is better, from the threshold the row carries (">= x" / "<= x"); errors are lower."""
    if informational(metric) or str(threshold).strip().startswith("<="):
        return "lower"
    return "higher"


@dataclass(frozen=True)
class Verdict:
    """A metric against its baseline."""

    metric: str
    baseline: float
    now: float
    allowed: float | None  # the largest worsening allowed (>= 0), or None when informational
    better: str  # "higher" or "lower"

    @property
    def delta(self) -> float:
        return self.now - self.baseline

    @property
    def worsening(self) -> float:
        return -self.delta if self.better == "higher" else self.delta

    @property
    def kind(self) -> str:
        if self.allowed is None:
            return "informational"
        if self.worsening > self.allowed + 1e-12:
            return "regression"
        return "improvement" if self.worsening < -max(self.allowed, 1e-12) else "same"

    def describe(self) -> str:
        allowed = "-" if self.allowed is None else f"{'-' if self.better == 'higher' else '+'}{self.allowed:.4g}"
        return (f"{self.metric}: baseline {self.baseline:.6g}, now {self.now:.6g}, delta {self.delta:+.4g}, "
                f"allowed {allowed}")


@dataclass
class Comparison:
    """A deployment's accuracy row against its baseline: the verdicts, or why there was nothing to compare."""

    file: Path
    verdicts: list[Verdict] = field(default_factory=list)
    missing: str = ""  # why there is no baseline, when there is none
    refused: str = ""  # why the baseline cannot judge this row (other weights or data), when it cannot

    @property
    def regressions(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind == "regression"]

    @property
    def improvements(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind == "improvement"]

    def to_dict(self) -> dict:
        return {"file": str(self.file), "missing": self.missing, "refused": self.refused,
                "regressions": [v.describe() for v in self.regressions],
                "improvements": [v.describe() for v in self.improvements],
                "compared": len([v for v in self.verdicts if v.kind != "informational"])}


class BaselineStore:
    """``<directory>/<profile>/<model>.json``, read and (under ``--update-baselines``) rewritten."""

    def __init__(self, directory: str | Path, profile: str):
        self.directory, self.profile = Path(directory), profile

    def path(self, model: str) -> Path:
        return self.directory / self.profile / f"{model}.json"

    def read(self, model: str) -> dict:
        path = self.path(model)
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise BaselineError(f"{path}: not a readable baseline file ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("deployments", {}), dict):
            raise BaselineError(f"{path}: not a baseline file (no 'deployments' mapping)")
        return data

    def compare(self, row) -> Comparison:
        """Judge an accuracy row (:class:`tritonsuite.core.rows.Row`) against the stored baseline of its deployment."""
        path = self.path(row.model)
        entry = self.read(row.model).get("deployments", {}).get(row.deployment)
        if entry is None:
            return Comparison(path, missing=f"no baseline for {row.deployment} in {path}")
        refused = refusal(row, entry, path)
        if refused:
            return Comparison(path, refused=refused)
        verdicts = []
        for metric, stored in entry.get("metrics", {}).items():
            if metric not in row.metrics or row.metrics[metric] is None:
                continue
            baseline, now = float(stored["value"]), float(row.metrics[metric])
            allowance = stored.get("allowance") or default_allowance(metric)
            allowed = None if informational(metric) else max(float(allowance.get("absolute", 0.0)),
                                                     float(allowance.get("relative", 0.0)) * abs(baseline))
            verdicts.append(Verdict(metric, baseline, now, allowed, stored.get("better") or direction(
                metric, row.thresholds.get(metric))))
        return Comparison(path, verdicts)

    def update(self, row, provenance: Mapping[str, Any]) -> Path:
        """Write the row's metrics as its deployment's baseline (other deployments of the file kept; edited
        allowances kept). Safe under xdist: the file is rewritten under a lock and swapped in."""
        path = self.path(row.model)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(f".{path.stem}.lock"), "w") as lock:  # kept: removing it would race a waiter
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.read(row.model) or {"profile": self.profile, "model": row.model, "deployments": {}}
            kept = data["deployments"].get(row.deployment, {}).get("metrics", {})
            metrics = {}
            for metric, value in row.metrics.items():
                if value is None:
                    continue
                previous = kept.get(metric, {})
                metrics[metric] = {"value": value,
                                   "better": previous.get("better") or direction(metric, row.thresholds.get(metric)),
                                   "allowance": previous.get("allowance") or (
                                       None if informational(metric) else default_allowance(metric))}
            data["deployments"][row.deployment] = {"metrics": metrics, "provenance": dict(provenance),
                                                   **{k: row.extra[k] for _, k in DIGESTS if row.extra.get(k)}}
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, path)
        return path


def refusal(row, entry: Mapping[str, Any], path: Path) -> str:
    """Why the baseline ``entry`` cannot judge ``row`` ("" when it can): the weights or the dataset it was measured
    with are not this row's, by sha256 (a baseline that recorded none cannot vouch for a row that has one)."""
    for what, key in DIGESTS:
        then, now = entry.get(key) or "", row.extra.get(key) or ""
        if then != now:
            told = entry.get("provenance", {})
            named = (told.get("checkpoint") if told.get("checkpoint", "-") != "-" else told.get("weights", "-")) \
                if what == "weights" else "its dataset"
            return (f"{row.deployment}: not judged against its baseline: measured with {what} sha256 "
                    f"{then[:12] or 'unrecorded'}, this run's {what} sha256 {now[:12] or 'unrecorded'} ({path}); "
                    f"rewrite it with --update-baselines, or run with the {what} it names ({named})")
    return ""


def provenance(row, server_version: str) -> dict:
    """Where a baseline came from: the run, the time, the host, and the versions that produced the metrics."""
    import importlib.metadata

    versions = {}
    for dist in ("tritonsuite", "torch", "onnxruntime", "onnx", "tritonclient", "transformers"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"run_id": row.run_id, "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
            "machine": platform.machine(), "tritonserver": server_version, "versions": versions,
            "checkpoint": row.parameters.get("Checkpoint", "-"), "weights": row.extra.get("weights", "-"),
            "samples": row.samples}
