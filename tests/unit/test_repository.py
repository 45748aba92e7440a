import pytest

from tritonsuite.deploy.export import export
from tritonsuite.models import default_registry
from tritonsuite.deploy.repository import build_deployment, deployment_name, model_config, read_config


@pytest.fixture(scope="module")
def bert_artifact(tmp_path_factory):
    spec = default_registry().get("bert", "tiny")
    return spec, export(spec, "onnx", "fp32", tmp_path_factory.mktemp("cache"))


STOCK_FIELDS = {"name", "platform", "max_batch_size", "input", "output", "instance_group", "dynamic_batching",
                "parameters"}


def test_offline_config_is_a_stock_onnxruntime_deployment(tmp_path, bert_artifact):
    spec, artifact = bert_artifact
    name = deployment_name(spec, "onnx", "fp32", "offline")
    assert name == "bert_tiny_onnx_fp32_offline"
    d = build_deployment(tmp_path, model_config(name, spec, "onnx", max_batch_size=8, instance_count=2,
                                                intra_op_threads=3), artifact)
    cfg = read_config(d)
    assert cfg.name == name and cfg.platform == "onnxruntime_onnx" and not cfg.backend and cfg.max_batch_size == 8
    assert {f.name for f, _ in cfg.ListFields()} <= STOCK_FIELDS
    assert [(i.name, i.data_type, list(i.dims)) for i in cfg.input] == [(f"input__{k}", 8, [32]) for k in range(3)]  # 8 = TYPE_INT32
    assert [(o.name, o.data_type, list(o.dims)) for o in cfg.output] == [("output__0", 11, [32]), ("output__1", 11, [32])]  # 11 = TYPE_FP32
    assert cfg.instance_group[0].count == 2 and cfg.instance_group[0].kind == 2  # KIND_CPU
    assert not cfg.HasField("dynamic_batching")
    # only the onnxruntime backend's own parameters (its README: intra_op_thread_count, inter_op_thread_count)
    assert {k: v.string_value for k, v in cfg.parameters.items()} == {"intra_op_thread_count": "3",
                                                                       "inter_op_thread_count": "1"}
    # the version directory holds the artifact alone, under the platform's default file name
    assert sorted(str(p.relative_to(d)) for p in d.rglob("*")) == ["1", "1/model.onnx", "config.pbtxt"]
    assert (d / "1" / "model.onnx").read_bytes() == artifact.path.read_bytes()


def test_torchscript_deployment_is_a_stock_pytorch_one(tmp_path):
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "ts-trace", "fp32", tmp_path / "cache")
    d = build_deployment(tmp_path, model_config("ident", spec, "ts-trace", max_batch_size=4, intra_op_threads=1),
                         artifact)
    cfg = read_config(d)
    assert cfg.platform == "pytorch_libtorch" and {f.name for f, _ in cfg.ListFields()} <= STOCK_FIELDS
    # pytorch_backend's own parameters: threads, the tensor fuser off on CPU, inference mode; never
    # INTER_OP_THREAD_COUNT (the stock backend aborts the server when a second model sets it)
    assert {k: v.string_value for k, v in cfg.parameters.items()} == {
        "INTRA_OP_THREAD_COUNT": "1", "ENABLE_TENSOR_FUSER": "false",
        "INFERENCE_MODE": "true"}
    assert sorted(str(p.relative_to(d)) for p in d.rglob("*")) == ["1", "1/model.pt", "config.pbtxt"]


def test_online_config_has_dynamic_batching(tmp_path, bert_artifact):
    spec, artifact = bert_artifact
    config = model_config("x_online", spec, "onnx", max_batch_size=8, dynamic_batching=True,
                          preferred_batch_sizes=(4, 8), max_queue_delay_microseconds=500)
    d = build_deployment(tmp_path, config, artifact)
    cfg = read_config(d)
    assert list(cfg.dynamic_batching.preferred_batch_size) == [4, 8]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 500
    # rebuilding replaces the deployment in place
    d2 = build_deployment(tmp_path, model_config("x_online", spec, "onnx", max_batch_size=4), artifact)
    assert d2 == d and read_config(d).max_batch_size == 4 and not read_config(d).HasField("dynamic_batching")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x_online"]


def test_bad_deployment_settings_are_rejected():
    spec = default_registry().get("identity", "tiny")

    def config(**settings):
        return model_config("m", spec, "onnx", **settings)

    with pytest.raises(ValueError, match="preferred batch sizes \\[16\\] exceed max_batch_size 8"):
        config(max_batch_size=8, preferred_batch_sizes=(4, 16))
    with pytest.raises(ValueError, match="valid choices: KIND_CPU, KIND_GPU"):
        config(max_batch_size=8, instance_kind="KIND_TPU")
    with pytest.raises(ValueError, match="max_batch_size must be >= 0"):
        config(max_batch_size=-1)
    assert "max_batch_size" not in config(max_batch_size=0)  # batchless (proto3 leaves 0 out): Triton's default


def test_a_config_pbtxt_not_in_utf8_reads_as_triton_reads_it(tmp_path):
    """Bytes that are not UTF-8 in a comment are skipped as Triton skips them; in a value (even one holding a '#' or
    an escaped quote before them) they are one line naming the file, line and byte."""
    import pytest

    from tritonsuite.deploy.repository import NotUtf8, pbtxt_text

    path = tmp_path / "config.pbtxt"
    path.write_bytes(b'name: "m" # caf\xe9\nmax_batch_size: 4\n')
    assert pbtxt_text(path).splitlines() == ['name: "m" # caf\ufffd', "max_batch_size: 4"]
    for value in (b'label_filename: "caf\xe9.txt"', b'label_filename: "a#b\xe9"', b"label_filename: 'it\\'s # \xe9'"):
        path.write_bytes(b'name: "m"\n' + value + b"\n")
        with pytest.raises(NotUtf8, match=r"config.pbtxt: line 2: byte 0xE9 is not UTF-8, in a value"):
            pbtxt_text(path)
    path.write_bytes('name: "m" # café\n'.encode())
    assert pbtxt_text(path) == 'name: "m" # café\n'
