"""The accuracy verdict of a deployment against its eager reference: per-output atol/rtol (core.tensors) and the
model's task metrics, as one accuracy row."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from tritonsuite.core.rows import Row
from tritonsuite.core.spec import Metric, ModelSpec, rule_precision
from tritonsuite.core.tensors import OutputComparison, compare_outputs, run_batched


@dataclass
class AccuracyResult:
    """Outcome of one deployment's accuracy run."""

    model: str
    deployment: str
    precision: str
    samples: int
    comparisons: list[OutputComparison]
    metrics: list[Metric]
    seconds: float
    description: str = ""
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_row(self, **identity) -> Row:
        """The accuracy row; ``identity`` names the deployment (model, format, parameters, ...)."""
        metrics, thresholds, status = {}, {}, {}
        for m in self.metrics:
            metrics[m.name] = m.value
            thresholds[m.name] = f"{'>=' if m.higher_is_better else '<='} {m.threshold:.4g}"
            status[m.name] = "OK" if m.passed else "FAILED"
        for c in self.comparisons:
            metrics[f"{c.name} max abs error"] = c.max_abs_error
            thresholds[f"{c.name} max abs error"] = (
                f"each element within atol {c.atol:g} + rtol {c.rtol:g} x |ref|" if not c.allowed_share else
                f"atol {c.atol:g} + rtol {c.rtol:g} x |ref| for all but {c.allowed_share:g} of each sample")
            status[f"{c.name} max abs error"] = ("OK" if c.passed else "FAILED") + \
                (f" ({c.mismatched}/{c.total} out)" if c.mismatched else "")
            metrics[f"{c.name} max rel error"] = c.max_rel_error
        names = {"scenario": "accuracy", "model": self.model, "deployment": self.deployment,
                 "precision": self.precision, **identity}
        return Row(**names, samples=self.samples, description=self.description, metrics=metrics,
                   thresholds=thresholds, metric_status=status, status="OK" if self.passed else "FAILED",
                   reasons=list(self.failures), seconds=round(self.seconds, 3))


def evaluate(spec: ModelSpec, deployment: str, precision: str, data, served_infer, reference_infer,
             batch_size: int) -> AccuracyResult:
    """Run the accuracy data through the served deployment and the eager reference, and judge the result."""
    start = time.perf_counter()
    served = run_batched(served_infer, data.inputs, batch_size)
    reference = run_batched(reference_infer, data.inputs, batch_size)
    comparisons = compare_outputs(served, reference, spec, precision)
    metrics = data.score(served, reference, rule_precision(precision))  # mixed: fp16's rules
    failures = [c.describe() for c in comparisons if not c.passed] + [m.describe() for m in metrics if not m.passed]
    return AccuracyResult(model=spec.name, deployment=deployment, precision=precision,
                          samples=len(next(iter(data.inputs.values()))), comparisons=comparisons, metrics=metrics,
                          seconds=time.perf_counter() - start, description=data.description, failures=failures)
