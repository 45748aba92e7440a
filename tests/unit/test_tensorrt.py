"""TensorRT two ways: onnxruntime's TensorRT execution accelerator (profile key -> model_config -> config.pbtxt)
and the ``trt`` format (ONNX -> plan). The pure parts run everywhere; building and running a plan needs tensorrt and
a CUDA device, and skips with the reason without them."""
import dataclasses

import numpy as np
import pytest

from tritonsuite.deploy.backends import BACKENDS, OnnxRuntimeBackend, TensorRTBackend, backend_for
from tritonsuite.deploy.backends.standin import OnnxRuntimeSession, gpu_execution_accelerators, tensorrt_provider
from tritonsuite.deploy.backends.tensorrt import (SERVER_TENSORRT_ENV, TRITON_TENSORRT, PlanVersionMismatch,
                                          check_plan_version, server_tensorrt_version)
from tritonsuite.deploy.export import ExportUnsupported, cache_key, check_supported, export
from tritonsuite.deploy.formats import get_format, spec_formats
from tritonsuite.deploy.formats.tensorrt import (TENSORRT_INSTALL, optimization_profile, plan_cache_fields,
                                          tensorrt_import_error)
from tritonsuite.models import default_registry
from tritonsuite.profiles import ProfileError, load_profile
from tritonsuite.deploy.repository import build_deployment, model_config, read_config


@pytest.fixture(scope="module")
def registry():
    return default_registry()


def _tensorrt_here() -> str | None:
    """Why plans cannot be built here, or None."""
    import torch

    return tensorrt_import_error() or (None if torch.cuda.is_available() else "no CUDA device")


# ------------------------------------------------------------------------------------------ (b) the trt format
def test_optimization_profile_covers_every_swept_batch_and_each_dynamic_dim_up_to_max_shape(registry):
    bert = registry.get("bert", "tiny")
    profile = optimization_profile(bert, (4, 1, 2))
    assert set(profile) == {t.name for t in bert.inputs}
    for t in bert.inputs:  # fixed dims stay fixed; the batch runs from 1 to the largest swept batch
        assert profile[t.name] == ((1, *t.shape), (4, *t.shape), (4, *t.shape))

    fastpitch = registry.get("fastpitch", "tiny")
    text = fastpitch.inputs[0]
    assert text.shape == (-1,) and text.max_shape is None
    with pytest.raises(ExportUnsupported, match=f"{fastpitch.key} input {text.name} has a dynamic dim 1 and no "
                                                f"max_shape"):
        optimization_profile(fastpitch, (1, 8))
    bounded = dataclasses.replace(fastpitch, inputs=(dataclasses.replace(text, max_shape=(200,)),))
    example = fastpitch.example_inputs(1, 0)[text.name].shape[1]
    assert optimization_profile(bounded, (1, 2, 8)) == {text.name: ((1, 1), (8, example), (8, 200))}
    with pytest.raises(ValueError, match=r"batch sizes \[\]: a TensorRT optimization profile needs batch sizes"):
        optimization_profile(bert, ())


def test_the_plans_cache_key_holds_the_tensorrt_version_the_gpu_and_the_shapes(registry):
    bert = registry.get("bert", "tiny")
    profile = optimization_profile(bert, (1, 8))
    key = cache_key(bert, "trt", "fp16", build=plan_cache_fields("10.5.0.18", "9.0", profile))
    assert key == cache_key(bert, "trt", "fp16", build=plan_cache_fields("10.5.0.18", "9.0", profile))
    others = {cache_key(bert, "trt", "fp16", build=plan_cache_fields("10.7.0.23", "9.0", profile)),
              cache_key(bert, "trt", "fp16", build=plan_cache_fields("10.5.0.18", "8.0", profile)),
              cache_key(bert, "trt", "fp16", build=plan_cache_fields("10.5.0.18", "9.0",
                                                                     optimization_profile(bert, (1, 16))))}
    assert key not in others and len(others) == 3
    # formats with nothing more to key on keep the key they had
    assert cache_key(bert, "onnx", "fp32", build={}) == cache_key(bert, "onnx", "fp32")
    assert get_format("onnx").cache_fields(bert, "fp32", (1, 8)) == {}


def test_a_plan_from_another_tensorrt_version_is_refused_in_one_line():
    check_plan_version("10.5.0.18", "10.5.0.18")
    check_plan_version("10.5.0.18", "10.5.0")  # compared as major.minor.patch
    check_plan_version("10.5.0.18", None)  # the server's version unknown: Triton's own load error tells
    with pytest.raises(PlanVersionMismatch) as error:
        check_plan_version("10.7.0.23", "10.5.0.18", "remote server at gpu:8000")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("model.plan was built with TensorRT 10.7.0.23 but remote server at gpu:8000 runs "
                              "TensorRT 10.5.0.18")
    assert "tensorrt==10.5.0.18" in message
    with pytest.raises(ValueError, match="TensorRT version 'ten': expected <major>.<minor>"):
        check_plan_version("ten", "10.5.0.18")


def test_the_servers_tensorrt_version_follows_its_ngc_release_or_is_stated():
    assert server_tensorrt_version("2.51.0", environ={}) == TRITON_TENSORRT["2.51.0"]
    assert server_tensorrt_version("2.99.0", environ={}) is None
    assert server_tensorrt_version("2.99.0", environ={SERVER_TENSORRT_ENV: "10.9.0.34"}) == "10.9.0.34"


def test_trt_without_tensorrt_or_cuda_skips_with_the_reason(registry):
    bert = registry.get("bert", "tiny")
    assert "trt" in spec_formats(bert) and "trt" not in bert.formats  # chained from the onnx it declares
    assert "trt" not in spec_formats(dataclasses.replace(bert, formats=("ts-trace",)))
    reason = _tensorrt_here()
    if reason is None:
        pytest.skip("tensorrt and a CUDA device are here: trt is supported")
    with pytest.raises(ExportUnsupported) as error:
        check_supported(bert, "trt", "fp32")
    if tensorrt_import_error():
        assert str(error.value) == (f"bert:tiny as trt: tensorrt is not installed (NVIDIA's index: "
                                    f"{TENSORRT_INSTALL})")
    else:
        assert "this host has no CUDA device" in str(error.value)


def test_tensorrt_plan_is_a_stock_backend_the_embedded_server_does_not_have(tmp_path):
    from tritonsuite.server import EmbeddedServer

    backend = backend_for("trt")
    assert isinstance(backend, TensorRTBackend) and BACKENDS["tensorrt_plan"] is backend
    assert backend.file_name == "model.plan" and not backend.standin
    spec = default_registry().get("identity", "tiny")
    cpu, gpu = (model_config("m", spec, "trt", max_batch_size=8, instance_kind=k) for k in ("KIND_CPU", "KIND_GPU"))
    assert backend.refuses(cpu) == "tensorrt_plan runs on GPU instances; this deployment's are KIND_CPU"
    assert backend.refuses(gpu) is None
    server = EmbeddedServer(tmp_path / "repo", tmp_path / "logs")
    reason = server.refuses(backend, gpu)
    assert reason.startswith("the embedded server (the nvidia-pytriton wheel's tritonserver) has no tensorrt backend "
                             "for tensorrt_plan")
    assert server.refuses(backend_for("onnx"), model_config("m", spec, "onnx", max_batch_size=8)) is None


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_plan_is_built_verified_and_cached(registry, tmp_path, precision):
    """Needs tensorrt and CUDA: the plan is verified against eager through the TensorRT runner, records its
    TensorRT version and compute capability beside it, and is reused from the cache."""
    reason = _tensorrt_here()
    if reason:
        pytest.skip(reason)
    import tensorrt

    spec = registry.get("bert", "tiny")
    artifact = export(spec, "trt", precision, tmp_path, batch_sizes=(1, 4))
    assert artifact.path.name == "model.plan" and artifact.versions["tensorrt"] == tensorrt.__version__
    assert (artifact.path.parent / "artifact.json").is_file() and artifact.versions["compute_capability"]
    assert artifact.verified_batch_sizes == (1, 3)
    assert export(spec, "trt", precision, tmp_path, batch_sizes=(1, 4)).cached


# ---------------------------------------------------------------------- (a) onnxruntime's TensorRT accelerator
def test_the_tensorrt_accelerator_is_written_as_the_onnxruntime_backend_reads_it(registry, tmp_path):
    from google.protobuf import text_format

    spec = registry.get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path / "cache")
    settings = dict(max_batch_size=8, instance_kind="KIND_GPU", backend_accelerator="trt", precision_mode="FP16",
                    max_workspace_size_bytes=4294967296)
    gpu = model_config("accelerated", spec, "onnx", **settings)
    cfg = read_config(build_deployment(tmp_path, gpu, artifact))
    assert text_format.MessageToString(cfg.optimization) == (
        'execution_accelerators {\n'
        '  gpu_execution_accelerator {\n'
        '    name: "tensorrt"\n'
        '    parameters {\n'
        '      key: "max_workspace_size_bytes"\n'
        '      value: "4294967296"\n'
        '    }\n'
        '    parameters {\n'
        '      key: "precision_mode"\n'
        '      value: "FP16"\n'
        '    }\n'
        '  }\n'
        '}\n')
    assert backend_for("onnx").accelerator_description(gpu) == "TensorRT (FP16, workspace 4 GiB)"
    default_workspace = {**settings, "precision_mode": "FP32", "max_workspace_size_bytes": 0}
    assert gpu_execution_accelerators(model_config("m", spec, "onnx", **default_workspace)) \
        == {"tensorrt": {"precision_mode": "FP32"}}
    # only for onnxruntime, only when asked
    for config, fmt in ((dict(max_batch_size=8, instance_kind="KIND_GPU"), "onnx"), (settings, "ts-trace")):
        assert "optimization" not in model_config("m", spec, fmt, **config)
    assert backend_for("ts-trace").accelerator_description(model_config("m", spec, "ts-trace", **settings)) == "-"
    # asked for on CPU instances: written as asked, and refused before anything loads, saying why
    on_cpu = model_config("m", spec, "onnx", **{**settings, "instance_kind": "KIND_CPU"})
    assert gpu_execution_accelerators(on_cpu) == {"tensorrt": {"precision_mode": "FP16",
                                                               "max_workspace_size_bytes": "4294967296"}}
    assert OnnxRuntimeBackend().refuses(on_cpu).startswith(
        "the onnxruntime backend's TensorRT accelerator runs on GPU instances; this deployment's are KIND_CPU")
    assert OnnxRuntimeBackend().refuses(gpu) is None


def test_bad_accelerator_settings_name_the_valid_choices():
    with pytest.raises(ValueError, match="backend_accelerator 'tensorrt'; valid choices: none, trt"):
        model_config("m", default_registry().get("identity", "tiny"), "onnx", max_batch_size=8,
                     backend_accelerator="tensorrt")
    with pytest.raises(ValueError, match="precision_mode 'INT8'; valid choices: FP32, FP16"):
        model_config("m", default_registry().get("identity", "tiny"), "onnx", max_batch_size=8,
                     precision_mode="INT8")
    with pytest.raises(ValueError, match="valid choices: FP32, FP16"):
        tensorrt_provider({"precision_mode": "INT8"})


def test_the_stand_in_runs_the_accelerator_through_onnxruntimes_tensorrt_provider_or_fails_the_load(registry,
                                                                                                   tmp_path):
    import onnxruntime as ort

    assert tensorrt_provider({"precision_mode": "FP16", "max_workspace_size_bytes": "1073741824"}) == (
        "TensorrtExecutionProvider", {"trt_fp16_enable": "True", "trt_max_workspace_size": "1073741824"})
    assert tensorrt_provider({}) == ("TensorrtExecutionProvider", {"trt_fp16_enable": "False"})
    spec = registry.get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path)
    config = model_config("m", spec, "onnx", max_batch_size=8, instance_kind="KIND_GPU", backend_accelerator="trt")
    with pytest.raises(ValueError, match="the tensorrt execution accelerator runs on GPU instances"):
        OnnxRuntimeSession(str(artifact.path), config, "cpu")
    reason = OnnxRuntimeBackend().standin_refuses(config)
    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        assert reason.startswith("the embedded server's onnxruntime stand-in runs the TensorRT accelerator through "
                                 "onnxruntime's TensorRT execution provider, which onnxruntime")
        with pytest.raises(RuntimeError, match="needs onnxruntime's TensorRT execution provider"):
            OnnxRuntimeSession(str(artifact.path), config, "cuda")
    elif reason is None:  # a GPU host with TensorRT: the accelerator runs and agrees with the CPU session
        session = OnnxRuntimeSession(str(artifact.path), config, "cuda")
        inputs = spec.example_inputs(3, 0)
        plain = OnnxRuntimeSession(str(artifact.path), model_config("m", spec, "onnx", max_batch_size=8), "cpu")
        np.testing.assert_allclose(session(inputs)["OUTPUT__0"], plain(inputs)["OUTPUT__0"], rtol=1e-3, atol=1e-3)
    assert OnnxRuntimeBackend().standin_refuses(model_config("m", spec, "onnx", max_batch_size=8)) is None


GPU_MODEL = "bert: {size: tiny, formats: [onnx, trt], precisions: [fp32, fp16], max_batch_size: 8, %s}"


def test_the_profile_asks_for_the_accelerator_with_the_backend_s_own_settings(tmp_path):
    (tmp_path / "g.yaml").write_text("device: gpu\nmodels: {" + GPU_MODEL % (
        "backend_accelerator: trt, max_workspace_size_bytes: 2147483648, offline: {batch_sizes: [1, 2]}, "
        "online: {batch_size: 2, preferred_batch_sizes: [4]}") + "}\n")
    bert = load_profile("g", tmp_path).models["bert"]
    assert bert.backend_accelerator == "trt" and bert.batch_sizes() == (1, 2, 4, 8)
    spec = default_registry().get("bert", "tiny")
    fp16 = bert.model_config("online", "b", spec, "onnx", "fp16")
    assert gpu_execution_accelerators(fp16) == {"tensorrt": {"precision_mode": "FP16",
                                                             "max_workspace_size_bytes": "2147483648"}}
    # follows each case's precision (mixed: FP16, the accelerator takes no per-layer pins)
    assert gpu_execution_accelerators(bert.model_config("offline", "b", spec, "onnx", "fp32")) == {
        "tensorrt": {"precision_mode": "FP32", "max_workspace_size_bytes": "2147483648"}}
    assert gpu_execution_accelerators(bert.model_config("accuracy", "b", spec, "onnx", "mixed"))["tensorrt"][
        "precision_mode"] == "FP16"
    (tmp_path / "p.yaml").write_text("device: gpu\nmodels: {" + GPU_MODEL % "backend_accelerator: trt, "
                                     "precision_mode: fp16" + "}\n")
    assert gpu_execution_accelerators(load_profile("p", tmp_path).models["bert"].model_config(
        "offline", "b", spec, "onnx", "fp32"))["tensorrt"]["precision_mode"] == "FP16"
    assert load_profile("cpu").models["bert"].backend_accelerator == "none"


@pytest.mark.parametrize("device, settings, message", [
    ("gpu", "backend_accelerator: tensorrt", r"bad\.yaml:bert\.backend_accelerator \['tensorrt'\]: valid choices: "
                                             r"none, trt"),
    ("cpu", "backend_accelerator: trt", r"bad\.yaml:bert\.backend_accelerator 'trt': onnxruntime's TensorRT "
                                        r"accelerator runs on GPU instances and instance_kind is KIND_CPU; valid "
                                        r"choices here: none"),
    ("gpu", "precision_mode: FP16", r"bad\.yaml:bert\.precision_mode: a setting of the backend accelerator, and "
                                    r"backend_accelerator is none"),
    ("gpu", "backend_accelerator: trt, precision_mode: INT8", r"bad\.yaml:bert\.precision_mode \['INT8'\]: valid "
                                                              r"choices: FP32, FP16"),
    ("gpu", "backend_accelerator: trt, max_workspace_size_bytes: -1",
     r"bad\.yaml:bert\.max_workspace_size_bytes -1: expected an integer >= 0"),
])
def test_bad_accelerator_profile_content_is_one_line(tmp_path, device, settings, message):
    (tmp_path / "bad.yaml").write_text(f"device: {device}\nmodels: {{" + GPU_MODEL % settings + "}\n")
    with pytest.raises(ProfileError, match=message) as error:
        load_profile("bad", tmp_path)
    assert "\n" not in str(error.value)


def test_the_accelerator_needs_onnx_among_the_formats(tmp_path):
    (tmp_path / "bad.yaml").write_text("device: gpu\nmodels: {bert: {size: tiny, formats: [ts-trace], precisions: "
                                       "[fp32], max_batch_size: 8, backend_accelerator: trt}}\n")
    with pytest.raises(ProfileError, match="it accelerates onnx deployments and formats are ts-trace"):
        load_profile("bad", tmp_path)
