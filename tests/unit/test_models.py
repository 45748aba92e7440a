import numpy as np
import pytest

from tritonsuite.models import Registry, RegistryError, default_registry
from tritonsuite.models.bert import SIZES


def test_builtin_models_and_sizes():
    registry = default_registry()
    names = registry.names()
    assert names == sorted(names) and {"bert", "fastpitch", "identity"} <= set(names)
    assert registry.sizes("fastpitch") == ["tiny", "cpu", "large"]
    assert registry.sizes("bert") == ["tiny", "cpu", "large"]


def test_unknown_model_and_size_name_the_valid_choices():
    registry = default_registry()
    with pytest.raises(RegistryError, match=r"unknown model 'gpt'; valid choices: bert, .*fastpitch, .*identity"):
        registry.get("gpt", "cpu")
    with pytest.raises(RegistryError, match=r"no size 'huge'; valid choices: tiny, cpu, large"):
        registry.get("bert", "huge")


@pytest.mark.parametrize("size", list(SIZES))
def test_bert_signature_is_the_seeds(size):
    spec = default_registry().get("bert", size)
    seq = SIZES[size]["seq_len"]
    assert [(t.name, t.dtype, t.shape) for t in spec.inputs] == [(f"input__{i}", "int32", (seq,)) for i in range(3)]
    assert [(t.name, t.dtype, t.shape) for t in spec.outputs] == [("output__0", "float32", (seq,)),
                                                                  ("output__1", "float32", (seq,))]
    inputs = spec.example_inputs(3, 0)
    assert all(a.dtype == np.int32 and a.shape == (3, seq) for a in inputs.values())
    mask = inputs["input__2"]
    assert (mask[:, 0] == 1).all() and set(np.unique(mask)) <= {0, 1}
    assert (inputs["input__0"][mask == 0] == 0).all(), "padding positions hold [PAD]"


def test_large_size_is_the_seeds_bert_large():
    cfg = SIZES["large"]
    assert (cfg["seq_len"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (384, 1024, 24, 16)


def test_cpu_size_uses_the_real_minilm_weights_and_is_reproducible():
    import torch

    spec = default_registry().get("bert", "cpu")
    files = spec.weights_files()
    assert files and files[0].name == "model.safetensors" and files[0].stat().st_size > 50_000_000
    a, b = spec.build(None), spec.build(None)
    inputs = spec.example_inputs(2, 0)
    with torch.inference_mode():
        out_a = a(*[torch.from_numpy(inputs[t.name]) for t in spec.inputs])
        out_b = b(*[torch.from_numpy(inputs[t.name]) for t in spec.inputs])
    assert out_a[0].shape == (2, 128)
    torch.testing.assert_close(out_a[0], out_b[0])  # the seeded QA head makes builds identical
    # the encoder is MiniLM's, not random: its word embeddings match the shipped file
    from safetensors.numpy import load_file

    shipped = load_file(str(files[0]))
    key = next(k for k in shipped if k.endswith("word_embeddings.weight"))
    np.testing.assert_array_equal(a.model.bert.embeddings.word_embeddings.weight.detach().numpy(), shipped[key])


def test_user_spec_file_registers_models(tmp_path):
    spec_file = tmp_path / "my_models.py"
    spec_file.write_text(
        "from tritonsuite.models.identity import SPECS as _ID\n"
        "import dataclasses\n"
        "SPECS = [dataclasses.replace(_ID[0], name='mymodel', size='cpu')]\n")
    registry = default_registry([spec_file])
    assert registry.get("mymodel", "cpu").inputs[0].name == "INPUT__0"


def test_bad_spec_files_are_named(tmp_path):
    with pytest.raises(RegistryError, match="no such file"):
        Registry().load_file(tmp_path / "missing.py")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(RegistryError, match="defines no SPECS"):
        Registry().load_file(empty)
    wrong = tmp_path / "wrong.py"
    wrong.write_text("SPECS = [1, 2]\n")
    with pytest.raises(RegistryError, match="must be a list of tritonsuite.core.spec.ModelSpec"):
        Registry().load_file(wrong)
