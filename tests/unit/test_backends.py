"""Stock backends: pytorch_backend's binding rules, TorchScript signatures for any tensor names, the stand-ins'
sessions honouring the stock parameters, and the format/backend registries."""
import dataclasses

import numpy as np
import pytest

from tritonsuite.core.spec import TensorSpec
from tritonsuite.deploy.backends import BACKENDS, backend_for, torchscript_signature
from tritonsuite.deploy.backends.standin import libtorch_input_binding, libtorch_output_binding
from tritonsuite.deploy.export import artifact_session, export
from tritonsuite.deploy.formats import FORMATS
from tritonsuite.models import Registry
from tests.helpers import ROOT


def test_pytorch_backend_binding_rules():
    # 1. every configured name is a forward argument: by name, whatever the config order
    assert libtorch_input_binding(["meta", "image"], ["image", "meta"]) == {"meta": 1, "image": 0}
    # 2. else every name follows <name>__<index>: by index (parsed after the first "__")
    assert libtorch_input_binding(["INPUT__1", "INPUT__0"], ["x", "y"]) == {"INPUT__1": 1, "INPUT__0": 0}
    # 3. else config order (one name breaking the convention is enough)
    assert libtorch_input_binding(["a__1", "b"], ["x", "y"]) == {"a__1": 0, "b": 1}
    assert libtorch_input_binding(["a__b__1"], ["x"]) == {"a__b__1": 0}  # "b__1" is not an integer
    assert libtorch_output_binding(["OUTPUT__1", "OUTPUT__0"]) == {"OUTPUT__1": 1, "OUTPUT__0": 0}
    assert libtorch_output_binding(["logits", "embedding"]) == {"logits": 0, "embedding": 1}


def test_torchscript_signature_orders_arguments_and_results_as_the_backend_binds_them():
    assert torchscript_signature(["image", "meta"], ["logits", "embedding"]) == (["image", "meta"], [0, 1], [0, 1])
    # non-identifier names following the convention out of order: argument k is the input with index k
    assert torchscript_signature(["in-b__1", "in-a__0"], ["out-b__1", "out-a__0"]) == (
        ["input_0", "input_1"], [1, 0], [1, 0])
    with pytest.raises(ValueError, match=r"binds inputs in-x__0, in-y__0 to positions \[0, 0\]"):
        torchscript_signature(["in-x__0", "in-y__0"], ["out"])


@pytest.fixture(scope="module")
def specs():
    registry = Registry()
    registry.load_file(ROOT / "fixtures" / "specs" / "named_tensors_spec.py")
    named = registry.get("named", "tiny")
    hyphenated = dataclasses.replace(  # not identifiers, <name>__<index> declared out of order
        named, name="hyphenated",
        inputs=(TensorSpec("in-b__1", "int64", (2,)), TensorSpec("in-a__0", "float32", (12,))),
        outputs=(TensorSpec("out-b__1", "float32", (6,)), TensorSpec("out-a__0", "float32", (4,))),
        build=lambda checkpoint=None: _Reordered(named.build(None)),
        example_inputs=lambda b, seed=0: dict(zip(("in-a__0", "in-b__1"), named.example_inputs(b, seed).values())),
        tolerances={"fp32": {"out-b__1": (1e-5, 1e-5), "out-a__0": (1e-5, 1e-5)}})
    return [named, registry.get("swapped", "tiny"), hyphenated]


def _Reordered(inner):  # forward in the hyphenated spec's signature order: (meta, image) -> (embedding, logits)
    import torch

    class Reordered(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, meta, image):
            logits, embedding = self.inner(image, meta)
            return embedding, logits

    return Reordered().eval()


@pytest.mark.parametrize("fmt", ["ts-trace", "ts-script", "onnx"])
def test_any_tensor_names_export_and_run_as_the_stock_backend_binds_them(specs, tmp_path, fmt):
    from tritonsuite.deploy.export import eager_runner

    for spec in specs:
        artifact = export(spec, fmt, "fp32", tmp_path)  # verified through the stand-in's session
        session = artifact_session(spec, artifact.path, fmt)
        inputs = spec.example_inputs(3, 11)
        served, expected = session(inputs), eager_runner(spec.build(None), spec)(inputs)
        assert set(served) == {t.name for t in spec.outputs}
        for t in spec.outputs:
            assert served[t.name].shape == (3,) + t.shape, (spec.name, t.name)
            np.testing.assert_allclose(served[t.name], expected[t.name], rtol=1e-5, atol=1e-5)


def test_stand_in_sessions_honour_the_stock_parameters(tmp_path):
    import torch

    from tritonsuite.deploy.repository import model_config

    identity = Registry()
    identity.load_module("tritonsuite.models.identity")
    spec = identity.get("identity", "tiny")
    onnx = export(spec, "onnx", "fp32", tmp_path)
    config = model_config("m", spec, "onnx", max_batch_size=4, intra_op_threads=1)
    session = backend_for("onnx").session(onnx.path, config)
    assert session._session.get_session_options().intra_op_num_threads == 1

    trace = export(spec, "ts-trace", "fp32", tmp_path)
    before = (torch.get_num_threads(), torch._C._jit_texpr_fuser_enabled())
    try:
        torch._C._jit_set_texpr_fuser_enabled(True)
        config = model_config("m", spec, "ts-trace", max_batch_size=4, intra_op_threads=1)
        backend_for("ts-trace").session(trace.path, config)
        assert torch.get_num_threads() == 1 and not torch._C._jit_texpr_fuser_enabled()
    finally:
        torch.set_num_threads(before[0])
        torch._C._jit_set_texpr_fuser_enabled(before[1])


def test_every_format_has_one_backend_and_unknown_names_list_the_choices():
    for name in FORMATS:
        assert backend_for(name).platform in BACKENDS
    assert backend_for("onnx").file_name == "model.onnx" and backend_for("ts-script").file_name == "model.pt"
    assert backend_for("trt").platform == "tensorrt_plan" and backend_for("trt").file_name == "model.plan"
    assert backend_for("python").file_name == "model.py" and not backend_for("python").standin  # a user's model.py
    with pytest.raises(ValueError, match="no backend serves format 'savedmodel'; valid choices: onnx, python, trt, "
                                         "ts-script, ts-trace"):
        backend_for("savedmodel")


def test_a_chained_format_is_built_from_its_source_formats_artifact(tmp_path, monkeypatch):
    """The formats seam: a format whose ``source`` is another format gets that format's (cached, verified)
    artifact, as a TensorRT plan will be built from ONNX. Here a stand-in chained format re-saves the ONNX file."""
    import shutil

    from tritonsuite.deploy import formats
    from tritonsuite.deploy.backends import OnnxRuntimeBackend
    from tritonsuite.deploy.formats.base import Format

    received = []

    class OnnxCopy(Format):
        name, display, source = "onnx-copy", "ONNX (copied)", "onnx"

        def write(self, module, spec, path, example, source=None, batch_sizes=(), precision="fp32"):
            received.append(source)
            shutil.copyfile(source, path)

    monkeypatch.setitem(formats.FORMATS, "onnx-copy", OnnxCopy())
    monkeypatch.setattr(OnnxRuntimeBackend, "formats", ("onnx", "onnx-copy"))
    identity = Registry()
    identity.load_module("tritonsuite.models.identity")
    spec = dataclasses.replace(identity.get("identity", "tiny"), formats=("onnx", "onnx-copy"))
    chained = export(spec, "onnx-copy", "fp32", tmp_path)
    source = export(spec, "onnx", "fp32", tmp_path)
    assert source.cached and received == [source.path]  # the source was exported (and verified) first, once
    assert chained.path.read_bytes() == source.path.read_bytes() and chained.max_abs_error["OUTPUT__0"] == 0


def test_a_backend_directory_serves_the_users_libraries_and_stand_ins_for_the_rest(tmp_path):
    """--backend-directory: each <name>/libtriton_<name>.so DIR holds is linked (its own libraries beside it load
    through $ORIGIN); every other stock backend gets its stand-in and the stock checks beside it."""
    import shutil

    from tritonsuite.deploy.backends import native_backends
    from tritonsuite.server.embedded import backend_directory, library_dirs, pytriton_paths

    user = tmp_path / "backends"
    (user / "onnxruntime").mkdir(parents=True)
    (user / "onnxruntime" / "libtriton_onnxruntime.so").write_bytes(b"")
    (user / "python").mkdir()
    (user / "python" / "libtriton_python.so").write_bytes(b"")  # the wheel's python backend is kept: its stub fits
    (user / "notes").mkdir()
    assert native_backends(user) == ["onnxruntime"] and native_backends(None) == []
    made = backend_directory(pytriton_paths(), user)
    try:
        assert (made / "onnxruntime").is_symlink() and (made / "onnxruntime").resolve() == (user / "onnxruntime")
        assert sorted(p.name for p in (made / "pytorch").iterdir()) == ["model.py", "stockchecks.py"]
        assert not (made / "python").is_symlink() and (made / "python" / "triton_python_backend_stub").is_file()
        # a backend built for a stock server asks for libtritonserver.so: linked to the wheel's renamed core, first
        # on the server's library path (without it: "unable to load shared library: libtritonserver.so")
        core = made / ".core" / "libtritonserver.so"
        assert core.resolve().name.startswith("libtritonserver-") and core.resolve().is_file()
        assert library_dirs(pytriton_paths(), made)[0] == str(core.parent)
    finally:
        shutil.rmtree(made)
    alone = backend_directory(pytriton_paths(), None)  # the stand-ins alone: nothing links against the core
    try:
        assert not (alone / ".core").exists() and library_dirs(pytriton_paths(), alone)[0] == str(
            pytriton_paths()["libs"])
    finally:
        shutil.rmtree(alone)
