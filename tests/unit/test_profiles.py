import pytest

from tritonsuite.deploy.formats import spec_formats
from tritonsuite.models import default_registry
from tritonsuite.profiles import ProfileError, available_profiles, check_host, load_profile, narrow
from tritonsuite.run.cases import profile_cases

PROFILES = None  # the profiles shipped in the package


def test_cpu_profile():
    assert "cpu" in available_profiles(PROFILES)
    profile = load_profile("cpu", PROFILES)
    bert = profile.models["bert"]
    assert bert.size == "cpu" and bert.precisions == ("fp32",) and "onnx" in bert.formats
    assert max(bert.offline.batch_sizes) <= bert.max_batch_size
    assert profile.measurement.stability_percentage == 10
    spec = default_registry().get("bert", bert.size)
    online = bert.model_config("online", "b", spec, "onnx")
    assert online["dynamic_batching"]["preferred_batch_size"] == list(bert.online.preferred_batch_sizes)
    assert "dynamic_batching" not in bert.model_config("offline", "b", spec, "onnx")


def test_unknown_profile_names_the_choices():
    with pytest.raises(ProfileError, match=r"unknown profile 'h200'; valid choices: a100, a30, a40, cpu, h100, t4, "
                                           r"v100$"):
        load_profile("h200", PROFILES)


def test_narrowing(tmp_path):
    profile = load_profile("cpu", PROFILES)
    narrowed = narrow(profile, models=["bert"], formats=["onnx"], batch_sizes=[1, 2], concurrency=[3])
    cases = profile_cases(narrowed, "offline")
    assert [c.id for c in cases] == ["bert-onnx-fp32-batch1", "bert-onnx-fp32-batch2"]
    assert [c.id for c in profile_cases(narrowed, "online")] == [
        "bert-onnx-fp32-concurrency3", "bert-onnx-fp32-rate4", "bert-onnx-fp32-rate8",
        "bert-onnx-fp32-maxrate-p99le500ms", "bert-onnx-fp32-maxconcurrency-p99le500ms"]
    assert [c.id for c in profile_cases(narrowed, "accuracy")] == ["bert-onnx-fp32", "bert-onnx-fp16",
                                                                   "bert-onnx-mixed"]
    with pytest.raises(ProfileError, match="not in profile 'cpu'; valid choices: bert"):
        narrow(profile, models=["identity"])
    with pytest.raises(ProfileError, match=r"--batch-sizes \[64\] exceed bert's max batch size 8"):
        narrow(profile, models=["bert"], batch_sizes=[64])
    # a size some chosen model takes runs where it fits: bert (max 8) keeps 4 alone, a larger model both
    both = narrow(profile, models=["bert", "tft"], batch_sizes=[4, 16])
    assert both.models["bert"].offline.batch_sizes == (4,) and both.models["tft"].offline.batch_sizes == (4, 16)


def test_narrowing_leaves_accuracy_only_models_without_performance_points():
    profile = narrow(load_profile("cpu", PROFILES), models=["wide_deep_adult"], batch_sizes=[1], concurrency=[2],
                     request_rates=[5.0])
    assert profile_cases(profile, "offline") == [] and profile_cases(profile, "online") == []
    assert [c.id for c in profile_cases(profile, "accuracy")] == [
        "wide_deep_adult-onnx-fp32", "wide_deep_adult-ts-trace-fp32", "wide_deep_adult-trt-fp32"]


def test_request_rates_and_latency_bound_searches_become_online_cases(tmp_path):
    (tmp_path / "load.yaml").write_text(
        "models: {bert: {size: tiny, formats: [onnx], precisions: [fp32], max_batch_size: 4, online: "
        "{concurrency: [1], request_rates: [5, 12.5], distribution: constant, seed: 3, latency_bound: 'p99 <= 80 ms'}}}\n")
    profile = load_profile("load", tmp_path)
    online = profile.models["bert"].online
    assert (online.request_rates, online.distribution, online.seed) == ((5.0, 12.5), "constant", 3)
    assert str(online.latency_bound) == "p99 <= 80 ms" and online.search == ("request_rate", "concurrency")
    assert [c.id for c in profile_cases(profile, "online")] == [
        "bert-onnx-fp32-concurrency1", "bert-onnx-fp32-rate5", "bert-onnx-fp32-rate12.5",
        "bert-onnx-fp32-maxrate-p99le80ms", "bert-onnx-fp32-maxconcurrency-p99le80ms"]
    from tritonsuite.core.settings import LatencyBound

    narrowed = narrow(profile, request_rates=[7.0], latency_bound=LatencyBound.parse("avg <= 20 ms"),
                      search=["concurrency"])
    assert [c.id for c in profile_cases(narrowed, "online")] == [
        "bert-onnx-fp32-concurrency1", "bert-onnx-fp32-rate7", "bert-onnx-fp32-maxconcurrency-avgle20ms"]


GOOD_MODEL = "bert: {size: tiny, formats: [onnx], precisions: [fp32], max_batch_size: 4}"


@pytest.mark.parametrize("text, message", [
    ("models: {bert: [unclosed\n", r"bad\.yaml:2: malformed YAML: "),
    ("measurement: {window: 3}\nmodels: {}\n",
     r"bad\.yaml:measurement: unknown key window; valid keys: window_ms, window_requests, .*client_bound_percent"),
    ("model: {}\n", r"bad\.yaml: unknown key model; valid keys: device, gpu, published, measurement, models"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32]}}\n", "missing key 'max_batch_size'"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: eight}}\n",
     r"bad\.yaml:bert\.max_batch_size 'eight': expected an integer >= 1"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, offline: {batch_size: [1]}}}\n",
     r"bad\.yaml:bert\.offline: unknown key batch_size; valid keys: batch_sizes, instance_count"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, online: {concurrency: [0, 2]}}}\n",
     r"bad\.yaml:bert\.online\.concurrency 0: expected an integer >= 1"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, offline: {batch_sizes: [8]}}}\n",
     r"bad\.yaml:bert\.offline\.batch_sizes \[8\]: valid range 1\.\.4 \(max_batch_size\)"),
    ("models: {bert: {size: cpu, formats: [savedmodel], precisions: [fp32], max_batch_size: 4}}\n",
     r"bad\.yaml:bert\.formats \['savedmodel'\]: valid choices: ts-trace, ts-script, onnx, trt"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [int3], max_batch_size: 4}}\n",
     r"bad\.yaml:bert\.precisions \['int3'\]: valid choices: fp32, fp16"),
    ("measurement: {stability_percentage: -1}\nmodels: {" + GOOD_MODEL + "}\n",
     r"bad\.yaml:measurement\.stability_percentage -1: expected a number > 0 and <= 100"),
    ("measurement: {window_ms: fast}\nmodels: {" + GOOD_MODEL + "}\n",
     r"bad\.yaml:measurement\.window_ms 'fast': expected a number >= 0"),
    ("measurement: {max_trials: 2}\nmodels: {" + GOOD_MODEL + "}\n",
     r"bad\.yaml:measurement\.max_trials 2: expected an integer >= 3 and <= 10000"),
    ("models: [bert]\n", r"bad\.yaml:models: expected a mapping of keys, got \['bert'\]"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, online: {request_rates: [10, 0]}}}\n",
     r"bad\.yaml:bert\.online\.request_rates 0: expected request rates in requests/s, numbers > 0"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, online: {distribution: uniform}}}\n",
     r"bad\.yaml:bert\.online\.distribution \['uniform'\]: valid choices: poisson, constant"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, online: {latency_bound: fast}}}\n",
     r"bad\.yaml:bert\.online\.latency_bound: latency bound 'fast': expected '<statistic> <= <ms> ms'"),
    ("models: {bert: {size: cpu, formats: [onnx], precisions: [fp32], max_batch_size: 4, online: {search: [latency]}}}\n",
     r"bad\.yaml:bert\.online\.search \['latency'\]: valid choices: request_rate, concurrency"),
    ("measurement: {max_late_percent: 120}\nmodels: {" + GOOD_MODEL + "}\n",
     r"bad\.yaml:measurement\.max_late_percent 120: expected a number >= 0 and <= 100"),
])
def test_bad_profile_content_is_one_line_naming_the_value_and_the_valid_ones(tmp_path, text, message):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ProfileError, match=message) as error:
        load_profile("bad", tmp_path)
    assert "\n" not in str(error.value)


def test_a_users_profiles_dir_adds_to_and_overrides_the_shipped_ones(tmp_path):
    (tmp_path / "cpu.yaml").write_text("models: {" + GOOD_MODEL + "}\n")
    (tmp_path / "mine.yaml").write_text("models: {" + GOOD_MODEL + "}\n")
    assert {"cpu", "a100", "mine"} <= set(available_profiles(tmp_path))
    assert list(load_profile("cpu", tmp_path).models) == ["bert"]  # the user's cpu wins
    assert "tft" in load_profile("cpu").models  # the shipped one


@pytest.mark.parametrize("name", available_profiles(PROFILES))
def test_every_shipped_profile_names_real_models_within_their_limits(name):
    profile = load_profile(name, PROFILES)
    registry = default_registry()
    assert profile.models
    for model, mp in profile.models.items():
        spec = registry.get(model, mp.size)
        assert set(mp.formats) <= set(spec_formats(spec)), (model, mp.formats, spec.formats)
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


SEED_GPUS = ("a100", "a30", "a40", "t4", "v100")


@pytest.mark.parametrize("name", SEED_GPUS + ("h100",))
def test_every_seed_gpu_profile_fails_fast_on_a_cpu_host_in_one_line(name):
    import torch

    profile = load_profile(name, PROFILES)
    assert profile.device == "gpu" and profile.published == ("a100" if name == "h100" else name)
    assert all(mp.instance_kind == "KIND_GPU" for mp in profile.models.values())
    check_host(profile, "remote")
    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA device")
    with pytest.raises(ProfileError) as error:
        check_host(profile, "embedded")
    assert str(error.value).startswith(f"--gpu {name}: this profile runs models on a GPU ({profile.gpu}) and this "
                                       f"host has no CUDA device; valid choices here: cpu")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name", SEED_GPUS)
def test_seed_gpu_profiles_hold_the_seeds_settings_for_every_published_row_they_can_run(name):
    """Every published row whose format this suite builds (trt included) is a case of the GPU's profile with
    the published deployment settings, so a run of the profile joins it; models the seeds publish for another GPU
    only are not in the profile."""
    from tritonsuite.deploy.formats import FORMATS
    from tritonsuite.core.published import available_models, load_table

    profile = load_profile(name, PROFILES)
    published_models = available_models(name)
    assert {m for m in profile.models if m != "wide_deep_adult"} == set(published_models)
    joinable = 0
    for model in published_models:
        mp = profile.models[model]
        for row in load_table(name, model):
            if row.format not in FORMATS or row.accelerator != "none" or row.size != mp.size:
                continue  # savedmodel, ORT + TensorRT (a run of its own); TFT's traffic rows run with size large-traffic
            where = f"{name}:{model} {row.where}"
            assert row.format in mp.formats and row.precision in mp.precisions, where
            assert int(row.labels["Max batch size"]) == mp.max_batch_size, where
            block = mp.offline if row.scenario == "offline" else mp.online
            assert int(row.labels["Number of model instances"]) == block.instance_count, where
            if row.scenario == "offline":
                assert row.batch in mp.offline.batch_sizes and row.concurrency == 1, where
            else:
                assert row.batch == mp.online.batch_size and row.concurrency in mp.online.concurrency, where
            joinable += 1
    assert joinable


def test_h100_has_the_a100_settings_and_compares_with_the_a100_tables():
    a100, h100 = load_profile("a100", PROFILES), load_profile("h100", PROFILES)
    assert h100.models == a100.models and h100.measurement == a100.measurement
    assert (h100.gpu, h100.published) == ("NVIDIA H100", "a100")


@pytest.mark.parametrize("text, message", [
    ("device: gpu\npublished: h100\nmodels: {" + GOOD_MODEL + "}\n",
     r"bad\.yaml:published 'h100': valid choices: a100, a30, a40, t4, v100$"),
    ("device: cpu\npublished: a100\nmodels: {" + GOOD_MODEL + "}\n",
     r"bad\.yaml:published 'a100': the published tables are GPU figures; only a device: gpu profile may name them"),
])
def test_published_key_names_a_seed_gpu_on_a_gpu_profile(tmp_path, text, message):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ProfileError, match=message):
        load_profile("bad", tmp_path)


def test_unknown_device(tmp_path):
    (tmp_path / "tpu.yaml").write_text("device: tpu\nmodels: {}\n")
    with pytest.raises(ProfileError, match="unknown device 'tpu'; valid choices: cpu, gpu"):
        load_profile("tpu", tmp_path)


def test_cpu_profile_judges_fp16_in_the_accuracy_scenario_only_and_precisions_narrow_it():
    profile = load_profile("cpu")
    models = ("bert", "wide_deep", "fastpitch", "nnunet", "tft")
    assert all(profile.models[m].accuracy_precisions == ("fp16", "mixed") for m in models)
    accuracy = profile_cases(profile, "accuracy")
    assert {c.model for c in accuracy if c.precision == "fp16"} == set(models)
    assert {c.model for c in accuracy if c.precision == "mixed"} == set(models)
    mixed = narrow(profile, precisions=["mixed"])
    assert {c.precision for c in profile_cases(mixed, "accuracy")} == {"mixed"}
    # no accelerator on CPU, whatever the precision (mixed -> FP16 on a GPU profile: test_tensorrt)
    assert "optimization" not in profile.models["bert"].model_config("accuracy", "b", default_registry().get(
        "bert", "tiny"), "onnx", "mixed")
    assert {c.precision for c in profile_cases(profile, "offline")} == {"fp32"}  # performance points stay fp32
    fp16 = narrow(profile, precisions=["fp16"])
    assert {c.precision for c in profile_cases(fp16, "accuracy")} == {"fp16"}
    assert profile_cases(fp16, "offline") == []
    assert {c.precision for c in profile_cases(narrow(profile, precisions=["fp32"]), "accuracy")} == {"fp32"}


def test_unknown_precision_option_is_one_line_naming_the_choices(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--precisions", "fp8",
                             "--co", "-q"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert "--precisions fp8: unknown precision; valid choices: fp32, fp16, mixed" in result.stderr + result.stdout


def test_the_hang_bound_is_derived_from_the_windows_unless_set():
    from tritonsuite.core.settings import COUNT_WINDOW_TIMEOUT_S, MIN_TIMEOUT_S, MeasurementSettings

    assert MeasurementSettings().timeout_s == MIN_TIMEOUT_S  # 2 x (0.5 s + 4 x 1 s) = 9 s: the floor
    assert MeasurementSettings(window_ms=10000, warmup_ms=1000).timeout_s == 2 * (1 + 4 * 10)  # 82 s
    assert MeasurementSettings(window_ms=10000, max_window_factor=1).timeout_s == MIN_TIMEOUT_S  # 21 s: the floor
    assert MeasurementSettings(window_requests=50).timeout_s == COUNT_WINDOW_TIMEOUT_S
    assert MeasurementSettings(request_timeout_s=7).timeout_s == 7  # the profile's own bound wins
    with pytest.raises(ValueError, match="request_timeout_s -1"):
        MeasurementSettings(request_timeout_s=-1)


def test_a_team_profile_names_a_python_deployment_of_its_repository(tmp_path):
    """A deployment of a team's repository is served as given, in its backend's format: a python model's profile
    entry (its bound and tune space) loads, and a format no deployment has names every valid choice."""
    from tests.kinds import sequence_model
    from tritonsuite.profiles.repooptions import add_repositories

    sequence_model(tmp_path / "repo", "seq_direct", "direct")
    entry = ("  seq_direct:\n    size: repository\n    formats: [{fmt}]\n    precisions: [fp32]\n"
             "    max_batch_size: 8\n    online: {{concurrency: [4], latency_bound: p99 <= 200 ms}}\n"
             "    tune: {{instance_count: [1, 2], max_queue_delay_microseconds: [0, 2000]}}\n")
    (tmp_path / "team.yaml").write_text("device: cpu\nmodel_repository: repo\nmodels:\n" + entry.format(fmt="python"))
    registry = default_registry()
    profile, undrivable = add_repositories(registry, load_profile("team", tmp_path), [], only=["seq_direct"],
                                           user_profile=True)
    assert not undrivable and registry.get("seq_direct", "repository").formats == ("python",)
    named = profile.models["seq_direct"]
    assert named.formats == ("python",) and named.tune["instance_count"] == [1, 2]
    assert [c.bound for c in profile_cases(profile, "tune")] == ["p99 <= 200 ms"]
    (tmp_path / "team.yaml").write_text("device: cpu\nmodels:\n" + entry.format(fmt="pyhton"))
    with pytest.raises(ProfileError, match=r"^team.yaml:seq_direct.formats \['pyhton'\]: valid choices: ts-trace, "
                                           r"ts-script, onnx, trt, python$"):
        load_profile("team", tmp_path)
    (tmp_path / "team.yaml").write_text("device: cpu\nmodels:\n" + entry.format(fmt="python").replace(
        "size: repository", "size: tiny"))  # a shipped model's size: exported, so its formats are the exports'
    with pytest.raises(ProfileError, match=r"formats \['python'\]: valid choices: ts-trace, ts-script, onnx, trt$"):
        load_profile("team", tmp_path)
