"""nnU-Net (MONAI DynUNet): dice, phantoms, the seed's plan, the signature, export, training cache, user files."""
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from tritonsuite.deploy.export import artifact_session, export
from tritonsuite.models import default_registry, nnunet
from tritonsuite.models.training import trained_checkpoint, training_stats


# ----------------------------------------------------------------------------------------------------------- dice
def test_dice_edge_cases():
    a = np.array([[0, 1, 1], [2, 2, 0]])
    assert nnunet.dice(a, a, 1) == 1.0  # perfect
    assert nnunet.dice(a, a, 3) == 1.0  # absent from both prediction and label
    assert nnunet.dice(np.zeros_like(a), a, 1) == 0.0  # absent from the prediction only
    assert nnunet.dice(a, np.zeros_like(a), 2) == 0.0  # absent from the label only
    disjoint = np.array([[1, 0, 0], [0, 0, 1]])
    assert nnunet.dice(disjoint, a, 1) == 0.0  # both present, no overlap
    half = np.array([[0, 1, 0], [0, 0, 0]])
    assert nnunet.dice(half, a, 1) == pytest.approx(2 * 1 / (1 + 2))


def test_absent_class_is_judged_on_itself_not_its_neighbour():
    # The seed's metric checks whether class c is absent but scores class c + 1: here class 1 is present and class 2
    # absent from both, which the seed scores 0 for class 2. It is a perfect prediction: every class scores 1.
    truth = np.zeros((1, 4, 4, 4), np.int64)
    truth[0, :2] = 1
    scores = nnunet.dice_per_class(truth.copy(), truth)
    assert {c: float(v[0]) for c, v in scores.items()} == {1: 1.0, 2: 1.0, 3: 1.0}


# ------------------------------------------------------------------------------------------------------- phantoms
def test_phantoms_are_seeded_and_hold_every_class():
    images, labels = nnunet.phantoms(3, 16, 7)
    again, again_labels = nnunet.phantoms(3, 16, 7)
    assert images.shape == (3, 4, 16, 16, 16) and images.dtype == np.float32
    assert labels.shape == (3, 16, 16, 16) and labels.dtype == np.int64
    np.testing.assert_array_equal(images, again)
    np.testing.assert_array_equal(labels, again_labels)
    other, other_labels = nnunet.phantoms(3, 16, 8)
    assert not np.array_equal(images, other) and not np.array_equal(labels, other_labels)
    np.testing.assert_array_equal(nnunet.phantoms(1, 16, 8)[1][0], labels[1])  # volume i uses seed + i
    for volume in nnunet.phantoms(6, 32, 0)[1]:
        assert set(np.unique(volume)) == {0, 1, 2, 3}


def test_phantom_classes_differ_in_intensity():
    images, labels = nnunet.phantoms(4, 32, 0)
    means = np.array([[images[:, ch][labels == c].mean() for ch in range(4)] for c in (1, 2, 3)])
    np.testing.assert_allclose(means, nnunet.INTENSITIES[1:], atol=0.1)  # noise and bias field average out
    assert np.abs(means[:, None] - means[None, :]).max(axis=2)[~np.eye(3, dtype=bool)].min() > 0.3


# --------------------------------------------------------------------------------------------------------- specs
def test_the_seeds_six_level_plan_for_128():
    kernels, strides = nnunet.plan(128)
    assert strides == [[1, 1, 1]] + [[2, 2, 2]] * 5 and kernels == [[3, 3, 3]] * 6
    large = nnunet.SIZES["large"]
    assert large["filters"] == [32, 64, 128, 256, 320, 320] and large["patch"] == 128
    assert nnunet.plan(32)[1] == [[1, 1, 1]] + [[2, 2, 2]] * 3 and nnunet.plan(16)[1] == [[1, 1, 1]] + [[2, 2, 2]] * 2


@pytest.mark.parametrize("size,patch", [("tiny", 16), ("cpu", 32), ("large", 128)])
def test_signature_is_the_seeds(size, patch):
    spec = default_registry().get("nnunet", size)
    assert [(t.name, t.dtype, t.shape) for t in spec.inputs] == [("INPUT__0", "float32", (4, patch, patch, patch))]
    assert [(t.name, t.dtype, t.shape) for t in spec.outputs] == [("OUTPUT__0", "int64", (patch, patch, patch))]
    assert (spec.train is not None) == (size == "cpu")
    if size != "large":
        x = spec.example_inputs(2, 0)["INPUT__0"]
        assert x.shape == (2, 4, patch, patch, patch) and x.dtype == np.float32


def test_registry_import_does_not_import_monai():
    code = ("import sys; from tritonsuite.models import default_registry; default_registry(); "
            "assert 'monai' not in sys.modules, 'monai imported at registry import'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_large_size_has_the_seeds_parameter_count():
    import torch

    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        net = nnunet.build_net("large")
    assert 30e6 < sum(p.numel() for p in net.parameters()) < 32e6  # nnU-Net 3D for BraTS: ~31M parameters


# -------------------------------------------------------------------------------------------------------- export
@pytest.fixture(scope="module")
def tiny():
    return default_registry().get("nnunet", "tiny")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("artifacts")


@pytest.mark.parametrize("fmt", ["ts-script", "ts-trace", "onnx"])
def test_every_format_exports_labels_verified_against_eager(tiny, cache, fmt):
    artifact = export(tiny, fmt, "fp32", cache)
    assert artifact.verified_batch_sizes == (1, 3) and set(artifact.max_abs_error) == {"OUTPUT__0"}
    runner = artifact_session(tiny, artifact.path, fmt)
    inputs = tiny.example_inputs(2, 5)
    labels = runner(inputs)["OUTPUT__0"]
    assert labels.dtype == np.int64 and labels.shape == (2, 16, 16, 16)
    import torch

    with torch.inference_mode():
        eager = tiny.build(None)(torch.from_numpy(inputs["INPUT__0"]))[0].numpy()
    assert (labels != eager).mean() <= 1e-3  # the declared share for argmax near-ties
    assert len(np.unique(eager)) > 1  # the seeded weights do not collapse to one class


def test_a_half_precision_module_takes_the_float32_input(tiny):
    """fp16 deployments (GPU profiles) keep INPUT__0 float32: the module casts it to its weights' dtype."""
    import torch

    x = torch.from_numpy(tiny.example_inputs(2, 0)["INPUT__0"])
    module = tiny.build(None)
    with torch.inference_mode():
        full = module(x)[0]
        half = module.half()(x)[0]
    assert half.dtype == torch.int64 and (half == full).float().mean() >= 0.99


# ------------------------------------------------------------------------------------------------ training cache
QUICK = {**nnunet.TRAINING, "steps": 2, "crop": 16, "train_volumes": 2}


def _quick_cpu_spec():
    cpu = default_registry().get("nnunet", "cpu")
    return dataclasses.replace(cpu, train=nnunet.make_train("cpu", QUICK), training=QUICK)


def test_training_hook_writes_a_loadable_checkpoint_once(tmp_path):
    spec = _quick_cpu_spec()
    checkpoint = trained_checkpoint(spec, tmp_path)
    mtime = checkpoint.stat().st_mtime_ns
    assert trained_checkpoint(spec, tmp_path) == checkpoint and checkpoint.stat().st_mtime_ns == mtime
    stats = training_stats(checkpoint)
    assert stats["steps"] == 2 and np.isfinite(stats["final_loss"]) and stats["training"]["crop"] == 16
    import torch

    trained, untrained = spec.build(checkpoint), spec.build(None)
    w = "net.input_block.conv1.conv.weight"
    assert not torch.equal(trained.state_dict()[w], untrained.state_dict()[w])


def test_training_is_seeded(tmp_path):
    import torch

    spec = _quick_cpu_spec()
    a = torch.load(trained_checkpoint(spec, tmp_path / "a"), weights_only=True)
    b = torch.load(trained_checkpoint(spec, tmp_path / "b"), weights_only=True)
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


# ---------------------------------------------------------------------------------------- user checkpoint, data
def test_user_checkpoint_is_loaded_and_a_wrong_one_is_named(tiny, tmp_path):
    import torch

    net = nnunet.build_net("tiny")
    with torch.no_grad():
        net.output_block.conv.conv.bias.copy_(torch.tensor([0.0, 0.0, 0.0, 100.0]))  # everything class 3
    torch.save(net.state_dict(), tmp_path / "mine.pt")
    module = tiny.build(tmp_path / "mine.pt")
    x = torch.from_numpy(tiny.example_inputs(1, 0)["INPUT__0"])
    assert (module(x)[0] == 3).all()
    torch.save(nnunet.build_net("cpu").state_dict(), tmp_path / "cpu.pt")
    with pytest.raises(ValueError, match=r"--checkpoint nnunet=.*cpu.pt does not fit nnunet:tiny: "):
        tiny.build(tmp_path / "cpu.pt")


def test_user_dataset_is_evaluated_and_a_mismatch_names_the_sample(tiny, tmp_path):
    images, labels = nnunet.phantoms(3, 16, 50)
    path = tmp_path / "data.npz"
    np.savez(path, images=images, labels=labels.astype(np.uint8))
    data = tiny.accuracy_data(path, tmp_path / "mine.pt")
    np.testing.assert_array_equal(data.inputs["INPUT__0"], images)
    metrics = {m.name: m for m in data.score({"OUTPUT__0": labels}, {"OUTPUT__0": labels}, "fp32")}
    assert all(m.passed for m in metrics.values()) and metrics["dice_vs_ground_truth_edema"].value == 1.0
    # user data: ground-truth dice is judged against the reference's (MLPerf share), not the phantom thresholds
    assert metrics["dice_vs_ground_truth_edema"].threshold == pytest.approx(0.999)
    wrong = labels.copy()
    wrong[1][wrong[1] == 3] = 1  # sample 1 loses its enhancing tumour
    metrics = {m.name: m for m in data.score({"OUTPUT__0": wrong}, {"OUTPUT__0": labels}, "fp32")}
    assert not metrics["dice_vs_reference_class3"].passed and metrics["dice_vs_reference_class3"].worst.startswith(
        "sample 1 ")
    assert not metrics["dice_vs_ground_truth_enhancing"].passed


def test_bad_datasets_say_what_is_expected(tiny, tmp_path):
    np.savez(tmp_path / "shape.npz", images=np.zeros((2, 4, 8, 8, 8), np.float32), labels=np.zeros((2, 8, 8, 8)))
    with pytest.raises(ValueError, match=r"shape.npz: images \(2, 4, 8, 8, 8\).*needs \[N, 4, 16, 16, 16\]"):
        tiny.accuracy_data(tmp_path / "shape.npz", None)
    np.savez(tmp_path / "keys.npz", volumes=np.zeros(3))
    with pytest.raises(ValueError, match=r"keys.npz: missing array 'images'"):
        tiny.accuracy_data(tmp_path / "keys.npz", None)
    images, labels = nnunet.phantoms(1, 16, 0)
    np.savez(tmp_path / "range.npz", images=images, labels=labels + 4)
    with pytest.raises(ValueError, match=r"labels range 4..7; valid: 0..3"):
        tiny.accuracy_data(tmp_path / "range.npz", None)


def test_training_uses_the_users_train_arrays(tmp_path):
    images, labels = nnunet.phantoms(2, 32, 900)
    np.savez(tmp_path / "train.npz", images=images, labels=labels, train_images=images, train_labels=labels)
    spec = _quick_cpu_spec()
    checkpoint = trained_checkpoint(spec, tmp_path / "cache", tmp_path / "train.npz")
    assert training_stats(checkpoint)["data"].endswith("train.npz")
    np.savez(tmp_path / "eval_only.npz", images=images, labels=labels)
    other = trained_checkpoint(spec, tmp_path / "cache", tmp_path / "eval_only.npz")
    assert training_stats(other)["data"] == "2 phantoms"
