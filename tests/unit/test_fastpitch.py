"""FastPitch: the module, its text front end, its export at several lengths, and the machinery it needs
(valid-frame comparison, shared-memory sizing of dynamic outputs)."""
import dataclasses

import numpy as np
import pytest

from tritonsuite.core.spec import TensorSpec
from tritonsuite.core.tensors import compare_outputs, run_batched
from tritonsuite.deploy.export import ExportMismatch, eager_runner, export
from tritonsuite.models import default_registry
from tritonsuite.models import fastpitch as fp


@pytest.fixture(scope="module")
def spec():
    return default_registry().get("fastpitch", "tiny")


@pytest.fixture(scope="module")
def run(spec):
    return eager_runner(spec.build(None), spec)


def test_symbol_table_round_trip_and_unknown_characters():
    text = "Hello, world! Is it 'quiet' here?"
    ids = fp.text_to_ids(text)
    assert fp.SYMBOLS[0] == "_" and 0 not in ids and fp.ids_to_text(ids) == text
    batch = fp.encode_texts(["ab", "abcd"])
    assert batch.dtype == np.int64 and batch.shape == (2, 4) and batch[0, 2:].tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"characters '7é'.*valid choices"):
        fp.text_to_ids("route 7é")
    with pytest.raises(ValueError, match="outside the symbol table"):
        fp.text_to_ids("pad_symbol")  # the padding symbol is not text


def test_bundled_sentences_are_varied_and_encodable():
    sentences = fp.load_sentences()
    lengths = [len(s) for s in sentences]
    assert len(sentences) >= 30 and min(lengths) < 20 and max(lengths) > 80
    assert fp.encode_texts(sentences).shape == (len(sentences), max(lengths))


def test_shapes_durations_and_plausible_lengths(spec, run):
    out = run(spec.example_inputs(3, 0))
    mel, lengths, durations = out["OUTPUT__0"], out["OUTPUT__1"], out["OUTPUT__2"]
    assert spec.example_inputs(3, 0)["INPUT__0"].shape == (3, fp.PERF_SEQ_LEN)
    assert mel.shape == (3, fp.N_MEL, lengths.max()) and lengths.shape == (3, 1)
    assert durations.dtype == np.int64 and (durations >= 0).all()
    assert (durations.sum(axis=1) == lengths[:, 0]).all()
    assert (lengths >= 128).all() and (lengths <= 128 * fp.SIZES["tiny"]["max_duration"]).all()  # not degenerate
    for i in range(3):
        assert not mel[i, :, lengths[i, 0]:].any()  # padding frames are zero
    assert out["OUTPUT__3"].shape == out["OUTPUT__4"].shape == (3, fp.PERF_SEQ_LEN)


def test_a_padded_sample_gives_the_same_result_as_unpadded(run):
    short, long = "The old mill stood by the river.", "Snow fell softly on the roofs of the sleeping town, again."
    alone = run({"INPUT__0": fp.encode_texts([short])})
    together = run({"INPUT__0": fp.encode_texts([short, long])})
    n, t = len(short), int(alone["OUTPUT__1"][0, 0])
    assert together["OUTPUT__1"][0, 0] == t and together["OUTPUT__0"].shape[2] > t
    np.testing.assert_array_equal(together["OUTPUT__2"][0, :n], alone["OUTPUT__2"][0])
    assert not together["OUTPUT__2"][0, n:].any()
    np.testing.assert_allclose(together["OUTPUT__0"][0, :, :t], alone["OUTPUT__0"][0], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(together["OUTPUT__3"][0, :n], alone["OUTPUT__3"][0], atol=1e-5, rtol=1e-5)


def test_user_checkpoint_is_loaded_and_a_wrong_one_refused(tmp_path):
    import torch

    module = fp.build_module("tiny")
    with torch.no_grad():
        module.projection.bias.fill_(1.5)
    torch.save(module.state_dict(), tmp_path / "fp.pt")
    loaded = fp.build_module("tiny", tmp_path / "fp.pt")
    assert torch.equal(loaded.projection.bias, torch.full((fp.N_MEL,), 1.5))
    torch.save(fp.build_module("cpu").state_dict(), tmp_path / "other.pt")
    with pytest.raises(ValueError, match="does not fit fastpitch:tiny"):
        fp.build_module("tiny", tmp_path / "other.pt")


def test_user_dataset_of_sentences(tmp_path):
    (tmp_path / "lines.txt").write_text("Hello there.\n\nA second, longer line of text.\n")
    data = fp._accuracy_data("tiny", tmp_path / "lines.txt", None)
    assert data.inputs["INPUT__0"].shape == (2, 30) and "lines.txt" in data.description
    (tmp_path / "lines.csv").write_text("x")
    with pytest.raises(ValueError, match="valid choices: .json, .txt"):
        fp.load_sentences(tmp_path / "lines.csv")


@pytest.mark.parametrize("fmt", ["ts-trace", "onnx", "ts-script"])
def test_export_generalises_to_other_lengths_and_batch_sizes(spec, tmp_path, fmt):
    from tritonsuite.deploy.export import artifact_session

    artifact = export(spec, fmt, "fp32", tmp_path)
    assert artifact.max_abs_error["OUTPUT__1"] == 0 and artifact.max_abs_error["OUTPUT__2"] == 0
    runner = artifact_session(spec, artifact.path, fmt)
    reference = eager_runner(spec.build(None), spec)
    for batch in fp._verification_inputs():  # lengths 9..200, batch 1..5, traced at 128 x 2
        served, expected = runner(batch), reference(batch)
        np.testing.assert_array_equal(served["OUTPUT__2"], expected["OUTPUT__2"])
        assert all(c.passed for c in compare_outputs(served, expected, spec, "fp32"))


def test_export_verification_catches_a_length_baked_into_the_trace(tmp_path):
    import torch

    class Baked(torch.nn.Module):  # traces x.size(1) as a Python int: right at the traced length only
        def forward(self, x):
            return (x.float() * int(x.size(1)),)

    base = default_registry().get("identity", "tiny")
    make = lambda n: {"INPUT__0": np.ones((2, n), np.float32)}
    baked = dataclasses.replace(base, name="baked", build=lambda checkpoint=None: Baked(),
                                inputs=(TensorSpec("INPUT__0", "float32", (-1,)),),
                                outputs=(TensorSpec("OUTPUT__0", "float32", (-1,)),),
                                example_inputs=lambda b, seed=0: {"INPUT__0": np.ones((b, 4), np.float32)},
                                verification_inputs=lambda: [make(7)])
    with pytest.raises(ExportMismatch, match=r"verification input 0 \(shapes INPUT__0 \[2, 7\]\)"):
        export(baked, "ts-trace", "fp32", tmp_path)


def test_valid_frames_are_compared_and_batches_of_different_lengths_padded(spec, run):
    inputs = {"INPUT__0": fp.encode_texts(fp.load_sentences()[:5])}
    outputs = run_batched(run, inputs, 2)  # three batches, each padded to its own longest T
    assert outputs["OUTPUT__0"].shape[2] == outputs["OUTPUT__1"].max()
    reference = run(inputs)  # one batch
    assert all(c.passed for c in compare_outputs(outputs, reference, spec, "fp32"))
    broken = dict(outputs, OUTPUT__0=outputs["OUTPUT__0"].copy())
    t = int(outputs["OUTPUT__1"][3, 0])
    broken["OUTPUT__0"][3, 5, t - 1] += 1.0  # last valid frame of sample 3
    mel = next(c for c in compare_outputs(broken, reference, spec, "fp32") if c.name == "OUTPUT__0")
    assert not mel.passed and mel.worst_index[0] == 3 and mel.total == fp.N_MEL * int(reference["OUTPUT__1"].sum())
    padding_only = dict(outputs, OUTPUT__0=outputs["OUTPUT__0"] + (outputs["OUTPUT__0"] == 0) * 9.0)
    assert next(c for c in compare_outputs(padding_only, reference, spec, "fp32") if c.name == "OUTPUT__0").passed


def test_accuracy_score_names_the_sample_that_misses(spec, run):
    data = spec.accuracy_data(None, None)
    reference = run_batched(run, data.inputs, 8)
    assert all(m.passed for m in data.score(reference, reference, "fp32"))
    served = {k: v.copy() for k, v in reference.items()}
    served["OUTPUT__2"][7, 0] += 1
    served["OUTPUT__1"][7, 0] += 1
    metrics = {m.name: m for m in data.score(served, reference, "fp32")}
    miss = metrics["lengths_and_durations_equal_share"]
    assert not miss.passed and "sentence 7" in miss.worst
    assert metrics["mel_in_range_share"].passed and metrics["mel_in_range_share"].threshold == fp.MEL_IN_RANGE_SHARE
    served["OUTPUT__0"][2] = 50.0
    metrics = {m.name: m for m in data.score(served, reference, "fp32")}
    assert not metrics["mel_in_range_share"].passed and "sentence 2" in metrics["mel_in_range_share"].worst


def test_shared_memory_output_regions_are_sized_by_max_shape(spec):
    from tritonsuite.load.client import ClientError, SharedMemoryRegions

    inputs = spec.example_inputs(2, 0)
    regions = SharedMemoryRegions(None, inputs, spec.outputs, 2)
    mel_bound = fp.N_MEL * fp.PERF_SEQ_LEN * fp.SIZES["tiny"]["max_duration"]
    assert regions.output_sizes["OUTPUT__0"] == 2 * mel_bound * 4
    assert regions.output_sizes["OUTPUT__2"] == 2 * fp.PERF_SEQ_LEN * 8
    unbounded = TensorSpec("OUTPUT__0", "float32", (80, -1))
    with pytest.raises(ClientError, match="no max_shape"):
        SharedMemoryRegions(None, inputs, [unbounded], 2)
    with pytest.raises(ValueError, match="max_shape"):
        TensorSpec("x", "float32", (80, -1), max_shape=(81, 10))


def test_reduced_precision_rule_allows_a_duration_one_frame_off_and_fails_many_changed():
    """fp16 against fp32 (docs/precision.md): a duration one frame off in a few symbols passes, the share of changed
    symbols is bounded at 5%, mel is judged on the sentences whose durations all agree."""
    from tritonsuite.models.fastpitch import CHANGED_DURATION_SHARE, _reduced_precision_metrics

    sentences = ["abcdefghij"] * 4
    reference = {"OUTPUT__2": np.full((4, 12), 3, np.int64)}
    served = {"OUTPUT__2": reference["OUTPUT__2"].copy()}
    served["OUTPUT__2"][1, 4] = 4  # one symbol of 40: 2.5%
    exact, mel_ok, errors = [True, False, True, True], [True, False, True, True], [0.01, 9.0, 0.02, 0.01]
    metrics = {m.name: m for m in _reduced_precision_metrics(served, reference, sentences, exact, mel_ok, errors,
                                                             lambda i: f"sentence {i}")}
    assert metrics["durations_changed_share"].value == 1 / 40 and metrics["durations_changed_share"].passed
    assert metrics["mel_where_durations_agree_within_tolerance_share"].value == 1.0  # sentence 1 is judged by durations
    served["OUTPUT__2"][2, :3] = 2  # 4 of 40 changed: 10% > 5%
    changed = _reduced_precision_metrics(served, reference, sentences, exact, mel_ok, errors, str)[0]
    assert changed.value == 0.1 > CHANGED_DURATION_SHARE and not changed.passed
    assert "durations_changed_share = 0.1000 (threshold <= 0.0500)" in changed.describe()
