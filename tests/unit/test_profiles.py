from pathlib import Path

import pytest

from tritonsuite.models import default_registry
from tritonsuite.profiles import ProfileError, available_profiles, check_host, load_profile, narrow
from tritonsuite.suite import profile_cases

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"


def test_cpu_profile():
    assert "cpu" in available_profiles(PROFILES)
    profile = load_profile("cpu", PROFILES)
    bert = profile.models["bert"]
    assert bert.size == "cpu" and bert.precisions == ("fp32",) and "onnx" in bert.formats
    assert max(bert.offline.batch_sizes) <= bert.max_batch_size
    assert profile.measurement.stability_percentage == 10
    online = bert.deployment_config("online")
    assert online.dynamic_batching and online.preferred_batch_sizes == bert.online.preferred_batch_sizes
    assert not bert.deployment_config("offline").dynamic_batching


def test_unknown_profile_names_the_choices():
    with pytest.raises(ProfileError, match=r"unknown profile 'h100'; valid choices: .*cpu"):
        load_profile("h100", PROFILES)


def test_narrowing(tmp_path):
    profile = load_profile("cpu", PROFILES)
    narrowed = narrow(profile, models=["bert"], formats=["onnx"], batch_sizes=[1, 2], concurrency=[3])
    cases = profile_cases(narrowed, "offline")
    assert [c.id for c in cases] == ["bert-onnx-fp32-batch1", "bert-onnx-fp32-batch2"]
    assert [c.id for c in profile_cases(narrowed, "online")] == ["bert-onnx-fp32-concurrency3"]
    assert [c.id for c in profile_cases(narrowed, "accuracy")] == ["bert-onnx-fp32"]
    with pytest.raises(ProfileError, match="not in profile 'cpu'; valid choices: bert"):
        narrow(profile, models=["identity"])
    with pytest.raises(ProfileError, match=r"--batch-sizes \[64\] exceed bert's max batch size 8"):
        narrow(profile, batch_sizes=[64])


def test_bad_profile_content(tmp_path):
    (tmp_path / "bad.yaml").write_text("measurement: {window: 3}\nmodels: {}\n")
    with pytest.raises(ProfileError, match=r"unknown measurement settings \['window'\]; valid choices: .*window_ms"):
        load_profile("bad", tmp_path)
    (tmp_path / "bad2.yaml").write_text("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32]}}\n")
    with pytest.raises(ProfileError, match="missing key 'max_batch_size'"):
        load_profile("bad2", tmp_path)


@pytest.mark.parametrize("name", available_profiles(PROFILES))
def test_every_shipped_profile_names_real_models_within_their_limits(name):
    profile = load_profile(name, PROFILES)
    registry = default_registry()
    assert profile.models
    for model, mp in profile.models.items():
        spec = registry.get(model, mp.size)
        assert set(mp.formats) <= set(spec.formats), (model, mp.formats, spec.formats)
        assert set(mp.precisions) <= set(spec.precisions), (model, mp.precisions, spec.precisions)
        assert all(b <= mp.max_batch_size for b in mp.offline.batch_sizes)  # empty: an accuracy-only entry
        assert mp.online.batch_size <= mp.max_batch_size
        assert max(mp.online.preferred_batch_sizes) <= mp.max_batch_size
        assert mp.instance_kind == ("KIND_GPU" if profile.device == "gpu" else "KIND_CPU")


def test_gpu_profile_needs_cuda_on_the_embedded_server():
    import torch

    profile = load_profile("a100", PROFILES)
    assert profile.device == "gpu" and profile.models["bert"].size == "large"
    check_host(profile, "remote")  # the GPU may be on the remote host
    check_host(load_profile("cpu", PROFILES), "embedded")
    if torch.cuda.is_available():
        check_host(profile, "embedded")
    else:
        with pytest.raises(ProfileError, match="--gpu a100: .*no CUDA device; valid choices here: cpu"):
            check_host(profile, "embedded")


def test_unknown_device(tmp_path):
    (tmp_path / "tpu.yaml").write_text("device: tpu\nmodels: {}\n")
    with pytest.raises(ProfileError, match="unknown device 'tpu'; valid choices: cpu, gpu"):
        load_profile("tpu", tmp_path)
