import dataclasses
import os

import numpy as np
import pytest

from tritonsuite.deploy.export import ExportMismatch, ExportUnsupported, artifact_session, cache_key, check_supported, export
from tritonsuite.models import default_registry


@pytest.fixture(scope="module")
def tiny_bert():
    return default_registry().get("bert", "tiny")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("artifacts")


@pytest.mark.parametrize("fmt", ["onnx", "ts-trace"])
def test_export_is_verified_against_eager_and_cached(tiny_bert, cache, fmt):
    first = export(tiny_bert, fmt, "fp32", cache)
    assert not first.cached and first.path.is_file()
    assert set(first.max_abs_error) == {"output__0", "output__1"}
    assert all(0 <= e < 1e-3 for e in first.max_abs_error.values())
    assert first.verified_batch_sizes == (1, 3)
    mtime = first.path.stat().st_mtime_ns
    second = export(tiny_bert, fmt, "fp32", cache)
    assert second.cached and second.path == first.path and second.path.stat().st_mtime_ns == mtime
    assert second.max_abs_error == first.max_abs_error
    # the artifact runs with the same runtime Triton's runner uses, on a batch size it was not traced with
    runner = artifact_session(tiny_bert, second.path, fmt)
    out = runner(tiny_bert.example_inputs(5, 3))
    assert out["output__0"].shape == (5, 32) and np.isfinite(out["output__0"]).all()


def test_cache_key_depends_on_format_precision_and_spec(tiny_bert):
    keys = {cache_key(tiny_bert, "onnx", "fp32"), cache_key(tiny_bert, "ts-trace", "fp32"),
            cache_key(tiny_bert, "onnx", "fp16"),
            cache_key(dataclasses.replace(tiny_bert, config={**tiny_bert.config, "seq_len": 64}), "onnx", "fp32")}
    assert len(keys) == 4
    assert cache_key(tiny_bert, "onnx", "fp32") == cache_key(tiny_bert, "onnx", "fp32")


def test_bert_cannot_be_scripted_and_says_why(tiny_bert, cache):
    with pytest.raises(ExportUnsupported, match=r"torch.jit.script cannot compile bert:tiny: \S+"):
        export(tiny_bert, "ts-script", "fp32", cache)
    assert not [p for p in os.listdir(cache) if "ts-script" in p], "a failed export leaves nothing in the cache"


def test_identity_scripts(cache):
    identity = default_registry().get("identity", "tiny")
    artifact = export(identity, "ts-script", "fp32", cache)
    assert artifact.max_abs_error == {"OUTPUT__0": 0.0}


def test_unsupported_and_unknown_choices(tiny_bert):

    with pytest.raises(ValueError, match=r"unknown format 'tensorflow'; valid choices: ts-trace, ts-script, onnx, trt"):
        check_supported(tiny_bert, "tensorflow", "fp32")
    with pytest.raises(ValueError, match=r"unknown precision 'int4'; valid choices: fp32, fp16"):
        check_supported(tiny_bert, "onnx", "int4")
    check_supported(tiny_bert, "onnx", "fp16")  # fp16 exports on CPU (torch's fp16 kernels) as on CUDA
    with pytest.raises(ExportUnsupported, match="does not support ts-script"):
        check_supported(dataclasses.replace(tiny_bert, formats=("onnx",)), "ts-script", "fp32")


def test_an_artifact_that_differs_from_eager_is_rejected(tmp_path):
    import torch

    class Noisy(torch.nn.Module):
        def forward(self, x):  # random at every call: the artifact cannot reproduce the eager output
            return (x + torch.rand_like(x),)

    identity = default_registry().get("identity", "tiny")
    noisy = dataclasses.replace(identity, name="noisy", build=lambda checkpoint=None: Noisy().eval())
    with pytest.raises(ExportMismatch, match=r"onnx artifact of noisy:tiny differs from eager at batch 1: OUTPUT__0: "
                                             r"max abs error .* out of tolerance"):
        export(noisy, "onnx", "fp32", tmp_path)
    assert not list(tmp_path.iterdir())


def test_an_input_the_graph_never_reads_stays_an_input_of_the_onnx_graph(tmp_path):
    import torch

    from tritonsuite.core.spec import TensorSpec

    class IgnoresSecond(torch.nn.Module):
        def forward(self, x, placeholder):  # a fixed signature can carry inputs the network does not read
            return (x * 2,)

    identity = default_registry().get("identity", "tiny")
    spec = dataclasses.replace(
        identity, name="ignores", build=lambda checkpoint=None: IgnoresSecond().eval(),
        inputs=identity.inputs + (TensorSpec("PLACEHOLDER__1", "float32", (1,)),),
        example_inputs=lambda b, seed=0: {**identity.example_inputs(b, seed),
                                          "PLACEHOLDER__1": np.zeros((b, 1), np.float32)})
    artifact = export(spec, "onnx", "fp32", tmp_path)  # verification feeds both inputs
    # torch's exporter drops it; the stock onnxruntime backend then refuses the config ("configuration expects 2
    # inputs, model provides 1"): the graph declares the whole signature, in order, batch dimension first
    import onnx

    graph = onnx.load(str(artifact.path)).graph
    assert [i.name for i in graph.input] == ["INPUT__0", "PLACEHOLDER__1"]
    placeholder = graph.input[1].type.tensor_type
    assert placeholder.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in placeholder.shape.dim] == ["batch", 1]
    runner = artifact_session(spec, artifact.path, "onnx")
    x = np.ones((2, 16), np.float32)
    assert (runner({"INPUT__0": x, "PLACEHOLDER__1": np.zeros((2, 1), np.float32)})["OUTPUT__0"] == 2).all()


def test_cache_key_follows_the_model_code(tmp_path):
    """Editing the file that defines a spec's build function gives new artifact and training keys."""
    import importlib.util

    module_file = tmp_path / "my_model_spec.py"
    base = default_registry().get("identity", "tiny")

    def key_of_current_file():
        loader = importlib.util.spec_from_file_location("my_model_spec", module_file)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        return cache_key(dataclasses.replace(base, build=module.build), "onnx", "fp32")

    module_file.write_text("def build(checkpoint=None):\n    return None\n")
    first = key_of_current_file()
    assert key_of_current_file() == first
    module_file.write_text("def build(checkpoint=None):\n    return None  # changed\n")
    assert key_of_current_file() != first


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_export_works_on_its_own_copy(tmp_path, tiny_bert, precision):
    """export() used to call .to(device) and .half() on the module it was handed, in place: a caller that reused
    that object (the suite's shared fp32 eager reference) got it back in half. It now exports a copy."""
    import torch

    module = tiny_bert.build(None)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    export(tiny_bert, "onnx", precision, tmp_path, module=module)
    after = module.state_dict()
    assert {v.dtype for v in after.values() if v.is_floating_point()} == {torch.float32}
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_half_onnx_takes_and_gives_the_declared_dtypes(tmp_path):
    """An fp16 ONNX serves the configuration's fp32 tensors (Cast nodes at its edges), as the onnxruntime backend
    requires; before, an fp16 module could not even be exported from fp32 example inputs."""
    import onnx

    spec = default_registry().get("tft", "tiny")
    artifact = export(spec, "onnx", "fp16", tmp_path)
    graph = onnx.load(str(artifact.path)).graph
    elem = {t.name: t.type.tensor_type.elem_type for t in list(graph.input) + list(graph.output)}
    for t in spec.inputs + spec.outputs:
        if t.name in elem:
            assert onnx.helper.tensor_dtype_to_np_dtype(elem[t.name]) == np.dtype(t.dtype), t.name
    assert any(init.data_type == onnx.TensorProto.FLOAT16 for init in graph.initializer)  # half weights inside
    # built on the CPU in half: verified against the half eager module at batch 1 only (not the traced batch 2); the
    # same graph in fp32 at 1 and 3 (torch's CPU half kernels have no BLAS: batch 3 on both sides cost the most)
    assert artifact.verified_batch_sizes == (1,) and set(artifact.max_abs_error) == {t.name for t in spec.outputs}
    assert export(spec, "onnx", "fp32", tmp_path).verified_batch_sizes == (1, 3)


@pytest.mark.parametrize("fmt", ["ts-trace", "ts-script"])
def test_half_torchscript_takes_and_gives_the_declared_dtypes(tmp_path, fmt):
    """An fp16 module's TorchScript serves the configuration's dtypes (a stock pytorch_backend checks them): float
    inputs are cast to half inside, float outputs back. Found on an H100, where TFT's fp16 export failed with
    "mat1 and mat2 must have the same dtype" before the wrapper cast."""
    import torch

    from tritonsuite.deploy.export import _to_torch, eager_runner
    from tritonsuite.deploy.formats import get_format

    spec = default_registry().get("tft", "tiny")
    module = spec.build(None).half()
    example = _to_torch(spec, spec.example_inputs(2, 0), "cpu")
    path = tmp_path / "model.pt"
    get_format(fmt).write(module, spec, path, example)
    served = torch.jit.load(str(path))
    sample = spec.example_inputs(3, 1)
    with torch.no_grad():
        out = served(*[torch.from_numpy(sample[t.name]) for t in spec.inputs])[0]
    assert out.dtype == torch.float32 == getattr(torch, np.dtype(spec.outputs[0].dtype).name)
    reference = eager_runner(module, spec)(sample)[spec.outputs[0].name]
    np.testing.assert_allclose(out.numpy(), reference, rtol=0, atol=0)


@pytest.mark.parametrize("model", ["bert", "wide_deep", "fastpitch", "nnunet", "tft"])
def test_a_cpu_traced_export_fixes_no_device_in_its_graph(cache, model):
    """fp32 exports are traced on the CPU and serve on KIND_GPU instances too: a device in the graph (a trace records
    torch.arange(device=...)'s, and any .to()'s, as a constant) fails every request there with "Expected all tensors
    to be on the same device" (FastPitch's positions and BERT's mask from transformers did, on an H200)."""
    import torch

    artifact = export(default_registry().get(model, "tiny"), "ts-trace", "fp32", cache)
    graph = str(torch.jit.load(str(artifact.path), map_location="cpu").inlined_graph)
    fixed = [line.strip() for line in graph.splitlines() if "Device = prim::Constant" in line]
    assert not fixed, f"{model}: {fixed[:3]}"
