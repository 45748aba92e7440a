"""nnU-Net for 3D brain-tumour segmentation (the seed's BraTS deployment), as MONAI ``DynUNet``.

The seed serves NVIDIA's nnU-Net (built on MONAI's ``DynUNet``) on 4-channel 128³ volumes (Medical Segmentation
Decathlon Task01, BraTS: four MRI modalities in, background + three tumour labels out) as a TorchScript-scripted
model whose output ``OUTPUT__0`` is the argmax label map. The architecture follows nnU-Net's planning rule for an
isotropic patch: halve every axis (stride 2, kernel 3) while it is at least 8 voxels, at most 5 times, after a first
level of stride 1; filters double from the base up to a cap (32 → 320 for the full size). For 128³ that is the
6-level plan: kernels 3³ everywhere, strides 1, 2, 2, 2, 2, 2; filters 32, 64, 128, 256, 320, 320. Deep
supervision is off (it only adds training heads; at inference DynUNet returns the full-resolution logits).

Sizes:
- ``tiny``: 4×16³, 3 levels (strides 1, 2, 2), filters 4, 8, 16; seeded random weights — smoke tests.
- ``cpu``: 4×32³, 4 levels (strides 1, 2, 2, 2), filters 8, 16, 32, 64; trained by the suite on generated
  phantoms (``train`` hook, cached) — CPU profiles and the ground-truth accuracy check.
- ``large``: the seed's 4×128³ 6-level plan, filters 32 → 320; seeded random weights — GPU profiles.

Serving signature: ``INPUT__0`` float32 [4, D, H, W] → ``OUTPUT__0`` int64 [D, H, W], the argmax over the class
logits. int64 because that is what the seed's model returns (``torch.argmax``) and hence what its Triton
configuration declares (TYPE_INT64); it is also what ONNX ArgMax produces.

Data with known ground truth: :func:`phantoms` generates seeded 4-channel volumes — a "brain" ellipsoid with a
smooth multiplicative bias field and Gaussian noise, holding a nested tumour (edema 1 ⊃ enhancing 3 ⊃ necrotic
core 2, as BraTS nests them) whose classes have their own intensity in each channel. ``--dataset nnunet=PATH`` takes
an ``.npz`` with ``images`` float32 [N, 4, D, H, W] and ``labels`` integer [N, D, H, W] (values 0..3) to evaluate on,
and optionally ``train_images``/``train_labels`` for the suite's own training (else it trains on phantoms).
``--checkpoint nnunet=PATH`` takes a ``torch.save``d ``DynUNet`` state_dict of the profile's size.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import numpy as np

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec
from tritonsuite.models.training import load_weights

CHANNELS = 4  # the four MRI modalities of BraTS
CLASSES = 4  # background, edema (1), non-enhancing/necrotic core (2), enhancing tumour (3)
CLASS_NAMES = {1: "edema", 2: "necrotic core", 3: "enhancing"}
WEIGHTS_SEED = 20261122


def plan(patch: int, max_pools: int = 5, min_size: int = 8) -> tuple[list[list[int]], list[list[int]]]:
    """nnU-Net's plan for an isotropic cubic patch: (kernel sizes, strides) per level, first level stride 1."""
    strides, size = [[1, 1, 1]], patch
    while size >= min_size and len(strides) <= max_pools:
        strides.append([2, 2, 2])
        size //= 2
    return [[3, 3, 3] for _ in strides], strides


def _filters(levels: int, base: int, cap: int) -> list[int]:
    return [min(base * 2 ** i, cap) for i in range(levels)]


def _size(patch: int, base: int, cap: int, trained: bool) -> dict:
    kernels, strides = plan(patch)
    return {"patch": patch, "kernel_size": kernels, "strides": strides,
            "filters": _filters(len(strides), base, cap), "trained": trained}


SIZES = {
    "tiny": _size(16, 4, 16, trained=False),
    "cpu": _size(32, 8, 64, trained=True),
    "large": _size(128, 32, 320, trained=False),
}

# Suite training of the cpu size: Adam, constant lr, 60 steps of 2 random 24^3 crops (mirrored) from 24 phantoms;
# ~40 s on the 2-core machine while other jobs ran (30-160 s as the load varied).
TRAINING = {"steps": 60, "batch_size": 2, "crop": 24, "train_volumes": 24, "learning_rate": 0.01, "seed": 0,
            "threads": 2}
# Per-class mean dice against the phantoms' ground truth on the 8 held-out phantoms that the suite-trained cpu model
# must reach. Measured with this recipe and training seeds 0 / 1 / 2 (the suite uses seed 0):
#   edema 0.824 / 0.734 / 0.836, necrotic core 0.952 / 0.912 / 0.799, enhancing 0.929 / 0.861 / 0.880;
# 40 steps reached as low as 0.60 (core) and 0.69 (edema), hence 60. Thresholds sit below the worst seed:
DICE_THRESHOLDS = {1: 0.65, 2: 0.70, 3: 0.75}
EVAL_VOLUMES = 8
EVAL_SEED = 12345  # held-out phantoms: training draws its volumes from seeds below 10_000
# MLPerf style: the deployment's dice against ground truth must reach this share of the eager reference's
REFERENCE_SHARE = {"fp32": 0.999, "fp16": 0.99}
# Triton's labels against the eager model's labels: dice per class at least this (fp32 0.999, as the issue asks)
AGREEMENT = {"fp32": 0.999, "fp16": 0.98}  # fp16 against fp32 (docs/precision.md)
# reduced precision against fp32: dice against ground truth at most this far below fp32's
GROUND_TRUTH_DROP = 0.01
# (atol, rtol, share): labels must be equal, except for at most this fraction of a sample's voxels (argmax
# near-ties flip between runtimes; the per-class agreement dice above bounds them too and names the sample)
TOLERANCES = {"fp32": {"OUTPUT__0": (0.0, 0.0, 1e-3)}, "fp16": {"OUTPUT__0": (0.0, 0.0, 1e-2)}}


# ----------------------------------------------------------------------------------------------------- phantoms
# mean intensity per class and channel (T1, T1ce, T2, FLAIR-like); row 0 is normal tissue inside the brain
INTENSITIES = np.array([
    [0.60, 0.50, 0.50, 0.50],  # background tissue
    [0.50, 0.50, 1.00, 1.10],  # 1 edema: bright in T2 and FLAIR
    [0.30, 0.30, 1.20, 0.60],  # 2 necrotic core: dark in T1/T1ce, bright in T2
    [0.55, 1.30, 0.80, 0.80],  # 3 enhancing: bright in T1ce
], np.float32)
NOISE = 0.15


def phantom(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One seeded phantom: image float32 [4, size, size, size], labels int64 [size, size, size] with all classes."""
    rng = np.random.default_rng(seed)
    axis = np.linspace(-1.0, 1.0, size, dtype=np.float32)
    z, y, x = np.meshgrid(axis, axis, axis, indexing="ij")

    def ellipsoid(center, radii):
        return ((z - center[0]) / radii[0]) ** 2 + ((y - center[1]) / radii[1]) ** 2 + \
            ((x - center[2]) / radii[2]) ** 2 <= 1.0

    brain = ellipsoid(rng.uniform(-0.05, 0.05, 3), rng.uniform(0.8, 0.95, 3))
    radii = rng.uniform(0.4, 0.55, 3)
    center = rng.uniform(-0.25, 0.25, 3)
    labels = np.zeros((size,) * 3, np.int64)
    labels[ellipsoid(center, radii) & brain] = 1
    labels[ellipsoid(center + rng.uniform(-0.05, 0.05, 3), radii * rng.uniform(0.65, 0.75)) & brain] = 3
    labels[ellipsoid(center + rng.uniform(-0.05, 0.05, 3), radii * rng.uniform(0.4, 0.48)) & brain] = 2
    image = INTENSITIES[labels].transpose(3, 0, 1, 2) * brain  # [4, D, H, W], zero outside the brain
    for c in range(CHANNELS):  # smooth multiplicative bias field per channel, then noise
        k = rng.uniform(0.5, 1.5, 3) * np.pi
        phase = rng.uniform(0, 2 * np.pi, 3)
        field = 1.0 + 0.15 * np.cos(k[0] * z + phase[0]) * np.cos(k[1] * y + phase[1]) * np.cos(k[2] * x + phase[2])
        image[c] = image[c] * field + rng.normal(0.0, NOISE, labels.shape)
    return image.astype(np.float32), labels


def phantoms(n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` phantoms (images [n, 4, s, s, s] float32, labels [n, s, s, s] int64); volume i uses seed ``seed + i``."""
    pairs = [phantom(size, seed + i) for i in range(n)]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


def load_dataset(path: Path, patch: int, prefix: str = "") -> tuple[np.ndarray, np.ndarray] | None:
    """``images``/``labels`` (or ``train_images``/``train_labels`` with prefix "train_") of a user .npz."""
    path = Path(path)
    try:
        data = np.load(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--dataset nnunet={path}: not a readable .npz ({exc})") from None
    names = (f"{prefix}images", f"{prefix}labels")
    if prefix and not all(n in data for n in names):
        return None
    missing = [n for n in names if n not in data]
    if missing:
        raise ValueError(f"--dataset nnunet={path}: missing array {missing[0]!r}; expected 'images' "
                         f"[N, {CHANNELS}, {patch}, {patch}, {patch}] and 'labels' [N, {patch}, {patch}, {patch}]")
    images, labels = data[names[0]].astype(np.float32), data[names[1]].astype(np.int64)
    expected = (CHANNELS, patch, patch, patch)
    if images.ndim != 5 or images.shape[1:] != expected or labels.shape != (len(images),) + expected[1:]:
        raise ValueError(f"--dataset nnunet={path}: {names[0]} {images.shape} / {names[1]} {labels.shape}; "
                         f"this size needs [N, {', '.join(map(str, expected))}] and [N, {patch}, {patch}, {patch}]")
    if labels.size and (labels.min() < 0 or labels.max() >= CLASSES):
        raise ValueError(f"--dataset nnunet={path}: labels range {labels.min()}..{labels.max()}; valid: 0..{CLASSES - 1}")
    return images, labels


# --------------------------------------------------------------------------------------------------------- dice
def dice(pred: np.ndarray, truth: np.ndarray, cls: int) -> float:
    """Dice of class ``cls`` in one volume; 1.0 when the class is absent from both prediction and label.

    (The seed's metric tests absence of class ``c`` but scores class ``c + 1``: its empty-class check looks at the
    wrong class. Here the same class is checked and scored.)
    """
    p, t = pred == cls, truth == cls
    denom = int(p.sum()) + int(t.sum())
    if denom == 0:
        return 1.0
    return 2.0 * int(np.logical_and(p, t).sum()) / denom


def dice_per_class(pred: np.ndarray, truth: np.ndarray, classes=tuple(CLASS_NAMES)) -> dict[int, np.ndarray]:
    """Per class, the dice of every volume (pred/truth [N, D, H, W])."""
    return {c: np.array([dice(p, t, c) for p, t in zip(pred, truth)]) for c in classes}


# ------------------------------------------------------------------------------------------------------ module
@cache
def _wrapper_class():  # defined lazily so importing this module imports neither torch nor monai
    import torch

    class NNUnetLabels(torch.nn.Module):
        """The seed's serving signature: volumes in, the argmax label map out."""

        def __init__(self, net):
            super().__init__()
            self.net = net
            # follows the weights' dtype through .half(): fp16 deployments take the float32 INPUT__0 and cast it
            self.register_buffer("dtype_probe", torch.zeros(0), persistent=False)

        def forward(self, x):
            return (torch.argmax(self.net(x.to(self.dtype_probe.dtype)), dim=1),)

    return NNUnetLabels


def build_net(size: str):
    """The bare DynUNet (logits out) of a size, seeded."""
    import torch
    from monai.networks.nets import DynUNet

    cfg = SIZES[size]
    torch.manual_seed(WEIGHTS_SEED)
    return DynUNet(spatial_dims=3, in_channels=CHANNELS, out_channels=CLASSES, kernel_size=cfg["kernel_size"],
                   strides=cfg["strides"], upsample_kernel_size=cfg["strides"][1:], filters=cfg["filters"],
                   norm_name=("INSTANCE", {"affine": True}), act_name=("leakyrelu", {"negative_slope": 0.01}),
                   deep_supervision=False, res_block=False)


def _build(size: str, checkpoint: Path | None):
    net = build_net(size)
    if checkpoint is not None:
        load_weights(net, checkpoint, f"nnunet:{size}")
    return _wrapper_class()(net.eval()).eval()


def _example_inputs(patch: int):
    def make(batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
        return {"INPUT__0": phantoms(batch_size, patch, 100_000 + 97 * seed)[0]}

    return make


# ------------------------------------------------------------------------------------------------------ training
def make_train(size: str, training: Mapping):
    """The spec's ``train`` hook: Adam on cross-entropy + soft dice over phantoms (or the user's train arrays)."""

    def train(dataset: Path | None, out: Path) -> dict:
        import torch

        cfg = SIZES[size]
        data = load_dataset(dataset, cfg["patch"], prefix="train_") if dataset is not None else None
        images, labels = data if data is not None else phantoms(training["train_volumes"], cfg["patch"], 0)
        threads = torch.get_num_threads()
        torch.set_num_threads(int(training.get("threads", threads)))
        try:
            net = build_net(size).train()
            gen = torch.Generator().manual_seed(int(training["seed"]))
            opt = torch.optim.Adam(net.parameters(), lr=float(training["learning_rate"]))
            x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels)
            start, losses = time.perf_counter(), []
            for _ in range(int(training["steps"])):
                idx = torch.randint(0, len(x_all), (int(training["batch_size"]),), generator=gen)
                x, y = x_all[idx], y_all[idx]
                crop = int(training.get("crop", 0)) or x.shape[-1]  # nnU-Net trains on patches: cheaper steps
                if crop < x.shape[-1]:
                    o = torch.randint(0, x.shape[-1] - crop + 1, (3,), generator=gen).tolist()
                    x = x[..., o[0]:o[0] + crop, o[1]:o[1] + crop, o[2]:o[2] + crop]
                    y = y[..., o[0]:o[0] + crop, o[1]:o[1] + crop, o[2]:o[2] + crop]
                flips = torch.rand(3, generator=gen) < 0.5  # mirroring, nnU-Net's cheapest augmentation
                dims = [d for d, f in zip((2, 3, 4), flips) if f]
                if dims:
                    x, y = x.flip(dims), y.flip([d - 1 for d in dims])
                logits = net(x)
                probs = logits.softmax(1)
                onehot = torch.nn.functional.one_hot(y, CLASSES).permute(0, 4, 1, 2, 3).float()
                inter = (probs * onehot).sum((0, 2, 3, 4))
                soft_dice = (2 * inter + 1) / (probs.sum((0, 2, 3, 4)) + onehot.sum((0, 2, 3, 4)) + 1)
                loss = torch.nn.functional.cross_entropy(logits, y) + (1 - soft_dice[1:]).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
            torch.save(net.state_dict(), str(out))
        finally:
            torch.set_num_threads(threads)
        return {"final_loss": round(float(np.mean(losses[-5:])), 4), "steps": len(losses),
                "train_seconds": round(time.perf_counter() - start, 1),
                "data": str(dataset) if data is not None else f"{len(images)} phantoms"}

    return train


# ------------------------------------------------------------------------------------------------------ accuracy
def _accuracy_data(size: str, dataset: Path | None, checkpoint: Path | None) -> AccuracyData:
    patch = SIZES[size]["patch"]
    if dataset is not None:
        images, labels = load_dataset(dataset, patch)
        source = f"{len(images)} volumes from {dataset}"
    else:
        images, labels = phantoms(EVAL_VOLUMES, patch, EVAL_SEED)
        source = f"{len(images)} held-out phantoms (seeds {EVAL_SEED}..{EVAL_SEED + len(images) - 1})"
    # absolute thresholds only where they were measured: the built-in phantoms with a trained (or user) checkpoint
    absolute = dataset is None and checkpoint is not None

    def score(served: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], precision: str) -> list[Metric]:
        served_labels, reference_labels = served["OUTPUT__0"], reference["OUTPUT__0"]
        metrics = []
        agreement = dice_per_class(served_labels, reference_labels, range(CLASSES))
        for c, values in agreement.items():
            worst = int(np.argmin(values))
            metrics.append(Metric(f"dice_vs_reference_class{c}", float(values.min()), AGREEMENT.get(precision, 0.99),
                                  worst=f"sample {worst} (dice {values[worst]:.4f})"))
        if checkpoint is None:  # seeded random weights: ground truth says nothing about the deployment
            return metrics
        share = REFERENCE_SHARE.get(precision, 0.99)
        served_gt, reference_gt = dice_per_class(served_labels, labels), dice_per_class(reference_labels, labels)
        for c, values in served_gt.items():
            worst = int(np.argmin(values))
            where = f"sample {worst} (dice {values[worst]:.4f})"
            mean, ref_mean = float(values.mean()), float(reference_gt[c].mean())
            metrics.append(Metric(f"dice_vs_ground_truth_{CLASS_NAMES[c].replace(' ', '_')}", mean,
                                  DICE_THRESHOLDS[c] if absolute else ref_mean * share, worst=where))
            if absolute and precision != "fp32":
                metrics.append(Metric(f"dice_vs_ground_truth_{CLASS_NAMES[c].replace(' ', '_')}_drop_from_fp32",
                                      ref_mean - mean, GROUND_TRUTH_DROP, higher_is_better=False, worst=where))
            elif absolute:
                metrics.append(Metric(f"dice_vs_ground_truth_{CLASS_NAMES[c].replace(' ', '_')}_share_of_reference",
                                      mean / ref_mean if ref_mean else float(mean == ref_mean), share, worst=where))
        return metrics

    return AccuracyData(inputs={"INPUT__0": images}, score=score, description=f"{source}, 4x{patch}^3")


def make_spec(size: str) -> ModelSpec:
    cfg = SIZES[size]
    patch = cfg["patch"]
    training = TRAINING if cfg["trained"] else {}
    return ModelSpec(
        title="nnU-Net",
        name="nnunet",
        size=size,
        build=lambda checkpoint=None: _build(size, checkpoint),
        inputs=(TensorSpec("INPUT__0", "float32", (CHANNELS, patch, patch, patch)),),
        outputs=(TensorSpec("OUTPUT__0", "int64", (patch, patch, patch)),),
        example_inputs=_example_inputs(patch),
        formats=("ts-script", "ts-trace", "onnx"),
        precisions=("fp32", "fp16"),
        tolerances=TOLERANCES,
        accuracy_data=lambda dataset=None, checkpoint=None: _accuracy_data(size, dataset, checkpoint),
        config={**{k: v for k, v in cfg.items() if k != "trained"}, "classes": CLASSES, "weights_seed": WEIGHTS_SEED},
        train=make_train(size, training) if cfg["trained"] else None,
        training=training,
        parameters={"Image resolution": f"{CHANNELS}x{patch}x{patch}x{patch}"},
        description=f"MONAI DynUNet, {len(cfg['strides'])} levels, filters {cfg['filters'][0]}-{cfg['filters'][-1]}",
    )


SPECS = [make_spec(size) for size in SIZES]
