"""Deliberately wrong reduced-precision deployments (for tests/test_precision.py), registered with ``--model-spec``.

- ``overflow``: a normalisation whose sum of squares exceeds half's range (65504): in fp16 it is inf and the output
  collapses to 0. ``overflow_island`` is the same model with that reduction in an fp32 island: fp16 passes.
  As ``mixed``, ``overflow`` passes: its reduction is a module (``SumOfSquaresNorm``) the spec declares among its
  fp32 module types, so the mixed recipes keep it in fp32 (ts-trace under autocast and ts-script alike).
- ``perturbed``: converting it to half also scales one layer's weights by 1% (a broken conversion): the artifact
  matches its own fp16 eager model, so only judging against fp32 catches it.

Each is judged against the fp32 eager model by the relative L2 error of its output (at most 0.003; half's rounding
gives ~5e-4 here, a 1% weight change 0.01).
"""
import numpy as np

from tritonsuite.core.spec import FP32_MODULES, AccuracyData, Metric, ModelSpec, TensorSpec

WIDTH = 16
MAX_RELATIVE_L2 = 0.003


def _build(kind: str):
    import torch

    class SumOfSquaresNorm(torch.nn.Module):
        def forward(self, y):
            return torch.sqrt((y * y).sum(-1, keepdim=True))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.fc1, self.fc2 = torch.nn.Linear(WIDTH, WIDTH), torch.nn.Linear(WIDTH, WIDTH)
            self.norm = SumOfSquaresNorm()
            self.overflows = kind == "overflow"  # an attribute, so that torch.jit.script compiles forward

        def forward(self, x):
            y = self.fc1(x) * 300.0
            if self.overflows:  # in half, y * y summed over 16 values of ~300-900 overflows 65504
                norm = self.norm(y)
            else:  # the fp32 island: the reduction in fp32, cast back
                norm = self.norm(y.float()).to(y.dtype)
            return (self.fc2(y / norm * 4.0),)

        def half(self):
            converted = super().half()
            if kind == "perturbed":
                with torch.no_grad():
                    self.fc2.weight.mul_(1.01)
            return converted

    return Net().eval()


def _example_inputs(batch_size: int, seed: int = 0) -> dict:
    return {"INPUT__0": np.random.default_rng(seed).standard_normal((batch_size, WIDTH)).astype(np.float32)}


def _accuracy_data(dataset=None, checkpoint=None) -> AccuracyData:
    def score(served, reference, precision):
        s, r = served["OUTPUT__0"].astype(np.float64), reference["OUTPUT__0"].astype(np.float64)
        error = np.linalg.norm(s - r, axis=1) / np.maximum(np.linalg.norm(r, axis=1), 1e-12)
        return [Metric("output_relative_l2_error", float(error.max()), MAX_RELATIVE_L2, higher_is_better=False,
                       worst=f"sample {int(np.argmax(error))}")]

    return AccuracyData(inputs=_example_inputs(64, 7), score=score, description="64 seeded samples")


SPECS = [ModelSpec(
    name=kind, size="tiny", build=lambda checkpoint=None, kind=kind: _build(kind),
    inputs=(TensorSpec("INPUT__0", "float32", (WIDTH,)),), outputs=(TensorSpec("OUTPUT__0", "float32", (WIDTH,)),),
    example_inputs=_example_inputs, formats=("ts-trace", "ts-script", "onnx"), precisions=("fp32", "fp16"),
    fp32_modules=FP32_MODULES + ("SumOfSquaresNorm",),
    # the element-wise comparison is informational (share 1); the score judges against fp32
    tolerances={"fp32": {"OUTPUT__0": (1e-5, 1e-5)}, "fp16": {"OUTPUT__0": (5e-2, 5e-2, 1.0)}},
    accuracy_data=_accuracy_data, config={"kind": kind}, description=f"{kind} fault model")
    for kind in ("overflow", "overflow_island", "perturbed")]
