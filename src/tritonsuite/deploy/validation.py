"""perf_analyzer's ``validation_data`` as an accuracy metric of a user's deployment: per output, the elements of the
served outputs outside atol + rtol x |expected| (must be 0), with the comparison statistics of
:mod:`tritonsuite.judge.accuracy` (strings compare exactly)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from tritonsuite.core.spec import Metric, TensorSpec


def validation_score(spec_outputs, expected: Mapping[str, np.ndarray], tolerances):
    """Metrics judging the served outputs against perf_analyzer's ``validation_data``: per output, the elements
    outside atol + rtol x |expected| (must be 0), with the comparison statistics of judge.accuracy."""
    def score(served, reference, precision) -> list[Metric]:
        from tritonsuite.core.tensors import compare_outputs

        metrics = []
        for out in spec_outputs:
            if out.name not in expected:
                continue
            name = f"validation_data {out.name} elements out of tolerance"
            probe = _ToleranceView((out,), tolerances)
            if served[out.name].shape != expected[out.name].shape:
                metrics.append(Metric(name, float("inf"), 0.0, higher_is_better=False,
                                      worst=f"served shape {served[out.name].shape}, expected "
                                            f"{expected[out.name].shape}"))
                continue
            c = compare_outputs({out.name: served[out.name]}, {out.name: expected[out.name]}, probe, precision)[0]
            metrics.append(Metric(name, float(c.mismatched), 0.0, higher_is_better=False,
                                  worst=c.describe() if c.mismatched else ""))
        return metrics

    return score


@dataclass(frozen=True)
class _ToleranceView:
    """What judge.accuracy.compare_outputs reads of a spec: outputs and tolerances."""

    outputs: tuple[TensorSpec, ...]
    tolerances: Mapping[str, tuple[float, float]]

    def tolerance(self, precision: str, output: str) -> tuple[float, float]:
        return tuple(self.tolerances.get(output, (1e-4, 1e-4))[:2])

    def mismatch_share(self, precision: str, output: str) -> float:
        return 0.0
