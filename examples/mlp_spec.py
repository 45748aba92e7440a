"""A user model for tritonsuite: a small MLP classifier, registered with ``--model-spec examples/mlp_spec.py``.

Run it (accuracy and offline) with the example profile:

    pytest -m "accuracy or offline" --model-spec examples/mlp_spec.py \
           --profiles-dir examples/profiles --gpu cpu --models mlp

A checkpoint is a ``torch.save``d state dict: ``--checkpoint mlp=weights.pt``. A dataset is a ``.npz`` with an
``INPUT__0`` array [n, 32] and ``labels`` [n]: ``--dataset mlp=data.npz``.
"""
from pathlib import Path

import numpy as np

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec

FEATURES, CLASSES = 32, 10


def build(checkpoint: Path | None = None):
    import torch

    torch.manual_seed(0)  # reproducible weights when no checkpoint is given
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))
    if checkpoint is not None:
        model.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=True))

    class Classifier(torch.nn.Module):  # the serving signature: one input, one output, as a tuple
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x):
            return (self.net(x),)

    return Classifier().eval()


def example_inputs(batch_size: int, seed: int = 0) -> dict:
    return {"INPUT__0": np.random.default_rng(seed).standard_normal((batch_size, FEATURES)).astype(np.float32)}


def accuracy_data(dataset: Path | None = None, checkpoint: Path | None = None) -> AccuracyData:
    if dataset is not None:
        data = np.load(dataset)
        inputs, labels = {"INPUT__0": data["INPUT__0"].astype(np.float32)}, data["labels"]
    else:
        inputs, labels = example_inputs(256, 42), None

    def score(served, reference, precision):
        served_class, reference_class = served["OUTPUT__0"].argmax(1), reference["OUTPUT__0"].argmax(1)
        agree = served_class == reference_class
        metrics = [Metric("top1_agreement_with_reference", 100.0 * agree.mean(), 99.9,
                          worst=f"sample {int(np.argmin(agree))}")]
        if labels is not None:  # with real labels, also hold the served accuracy to 99.9% of the reference's
            reference_accuracy = 100.0 * (reference_class == labels).mean()
            metrics.append(Metric("top1_accuracy", 100.0 * (served_class == labels).mean(), 0.999 * reference_accuracy))
        return metrics

    return AccuracyData(inputs=inputs, score=score, description=f"{len(inputs['INPUT__0'])} samples")


SPECS = [ModelSpec(
    name="mlp", size="cpu", build=build,
    inputs=(TensorSpec("INPUT__0", "float32", (FEATURES,)),),
    outputs=(TensorSpec("OUTPUT__0", "float32", (CLASSES,)),),
    example_inputs=example_inputs, formats=("ts-trace", "ts-script", "onnx"), precisions=("fp32",),
    tolerances={"fp32": {"OUTPUT__0": (1e-5, 1e-5)}}, accuracy_data=accuracy_data,
    config={"features": FEATURES, "classes": CLASSES, "hidden": 64}, description="MLP 32-64-10",
)]
