"""User specs whose tensor names follow no Triton convention (``image``, ``meta`` -> ``logits``, ``embedding``),
and one whose ``<name>__<index>`` names are declared out of index order: both must serve correctly on
onnxruntime_onnx and pytorch_libtorch (pytorch_backend binds by forward argument names, the naming convention or
config order). Every output depends on every input differently, so a swapped binding changes the numbers."""
from pathlib import Path

import numpy as np

from tritonsuite.spec import AccuracyData, Metric, ModelSpec, TensorSpec


def _module(checkpoint: Path | None = None):
    import torch

    class ImageMeta(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.head = torch.nn.Linear(12 + 2, 4)
            self.embed = torch.nn.Linear(12, 6)

        def forward(self, pixels, numbers):  # argument names differ from the configured input names
            features = torch.cat([pixels, numbers.float()], dim=1)
            return self.head(features), self.embed(pixels) * numbers[:, :1].float()

    return ImageMeta().eval()


def _inputs(batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"image": rng.standard_normal((batch_size, 12)).astype(np.float32),
            "meta": rng.integers(1, 5, (batch_size, 2)).astype(np.int64)}


def _accuracy(dataset=None, checkpoint=None) -> AccuracyData:
    inputs = _inputs(40, 3)

    def score(served, reference, precision):
        agree = served["logits"].argmax(1) == reference["logits"].argmax(1)
        return [Metric("argmax_agreement", float(agree.mean()), 1.0, worst=f"sample {int(np.argmin(agree))}")]

    return AccuracyData(inputs=inputs, score=score, description="40 seeded samples")


NAMED = ModelSpec(
    name="named", size="tiny", build=_module,
    inputs=(TensorSpec("image", "float32", (12,)), TensorSpec("meta", "int64", (2,))),
    outputs=(TensorSpec("logits", "float32", (4,)), TensorSpec("embedding", "float32", (6,))),
    example_inputs=_inputs, formats=("onnx", "ts-trace", "ts-script"), precisions=("fp32",),
    tolerances={"fp32": {"logits": (1e-5, 1e-5), "embedding": (1e-5, 1e-5)}}, accuracy_data=_accuracy,
    description="image + meta -> logits, embedding")


SWAPPED = ModelSpec(
    name="swapped", size="tiny", build=_module,
    # declared out of index order: pytorch_backend binds INPUT__1 to the second forward argument, and the model's
    # second result to OUTPUT__1, whatever the declaration order
    inputs=(TensorSpec("INPUT__1", "float32", (12,)), TensorSpec("INPUT__0", "int64", (2,))),
    outputs=(TensorSpec("OUTPUT__1", "float32", (4,)), TensorSpec("OUTPUT__0", "float32", (6,))),
    example_inputs=lambda b, seed=0: dict(zip(("INPUT__1", "INPUT__0"), _inputs(b, seed).values())),
    formats=("onnx", "ts-trace", "ts-script"), precisions=("fp32",),
    tolerances={"fp32": {"OUTPUT__1": (1e-5, 1e-5), "OUTPUT__0": (1e-5, 1e-5)}},
    accuracy_data=lambda dataset=None, checkpoint=None: AccuracyData(
        inputs=dict(zip(("INPUT__1", "INPUT__0"), _inputs(40, 3).values())),
        score=lambda served, reference, precision: [Metric(
            "argmax_agreement", float((served["OUTPUT__1"].argmax(1) == reference["OUTPUT__1"].argmax(1)).mean()),
            1.0)]),
    description="the same model with <name>__<index> names declared out of order")

SPECS = [NAMED, SWAPPED]
