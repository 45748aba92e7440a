"""A trivial model (output = input, float32 [16]): for the suite's own tests and the load generator's ceiling.

It is as cheap as a served model gets, so measuring it shows the overhead of Triton, the python backend and the
load generator rather than of a network.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec

WIDTH = 16


@lru_cache(maxsize=None)
def _module_class():  # defined lazily so importing this module does not import torch
    import torch

    class Identity(torch.nn.Module):
        def forward(self, x):
            return (x.clone(),)

    return Identity


def _example_inputs(batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    return {"INPUT__0": np.random.default_rng(seed).standard_normal((batch_size, WIDTH)).astype(np.float32)}


def _accuracy_data(dataset=None, checkpoint=None) -> AccuracyData:
    inputs = _example_inputs(64, 7)

    def score(served, reference, precision):
        diff = np.abs(served["OUTPUT__0"] - inputs["INPUT__0"])
        worst = int(np.argmax(diff.max(axis=1)))
        return [Metric("max_abs_difference_to_input", float(diff.max()), 0.0, higher_is_better=False,
                       worst=f"sample {worst}")]

    return AccuracyData(inputs=inputs, score=score, description="64 seeded random vectors")


SPECS = [ModelSpec(
    title="Identity",
    name="identity", size="tiny", build=lambda checkpoint=None: _module_class()().eval(),
    inputs=(TensorSpec("INPUT__0", "float32", (WIDTH,)),), outputs=(TensorSpec("OUTPUT__0", "float32", (WIDTH,)),),
    example_inputs=_example_inputs, formats=("ts-trace", "ts-script", "onnx"), precisions=("fp32",),
    tolerances={"fp32": {"OUTPUT__0": (0.0, 0.0)}}, accuracy_data=_accuracy_data, config={"width": WIDTH},
    description=f"identity on float32 [{WIDTH}]",
)]
