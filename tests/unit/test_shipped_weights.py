"""The checkpoints shipped with tritonsuite: used by default (the same bytes on every host), checked against their
manifest's sha256 (a mismatch is one line), and set aside for training here by --retrain, a dataset, or a spec
whose training recipe is no longer the one that made them."""
import dataclasses
import shutil

import pytest

from tritonsuite.core.spec import file_digest
from tritonsuite.models import Registry, default_registry
from tritonsuite.models import training
from tritonsuite.models.training import (ShippedWeightsError, manifest, ship, trained_checkpoint, training_stats,
                                         weights_origin, weights_sha256)


def test_each_shipped_checkpoint_is_used_by_default_and_matches_its_manifest(tmp_path):
    registry = default_registry()
    records = manifest()
    assert set(records) == {"tft:cpu", "nnunet:cpu", "wide_deep_adult:base"}  # the cpu profile's trained sizes
    for key, record in records.items():
        spec = registry.get(*key.split(":"))
        path = trained_checkpoint(spec, tmp_path)
        assert path == training.SHIPPED_DIR / record["file"] and not list(tmp_path.iterdir())  # nothing trained
        assert file_digest(path) == record["sha256"] == weights_sha256(path)
        assert path.stat().st_size == record["size_bytes"] < 2_000_000
        assert record["torch"] and record["trained"] and record["training"] == dict(spec.training)
        assert weights_origin(path) == f"shipped with tritonsuite ({record['file']}, sha256 {record['sha256'][:12]})"
        assert training_stats(path)["training"] == dict(spec.training) and "final_loss" in training_stats(path)
        spec.build(path)  # the bytes load into the spec's module


def test_a_shipped_checkpoint_with_other_bytes_is_refused_in_one_line(tmp_path, monkeypatch):
    shipped = tmp_path / "weights"
    shutil.copytree(training.SHIPPED_DIR, shipped)
    data = bytearray((shipped / "tft-cpu.pt").read_bytes())
    data[-100] ^= 0xFF  # same size, one byte flipped
    (shipped / "tft-cpu.pt").write_bytes(bytes(data))
    monkeypatch.setattr(training, "SHIPPED_DIR", shipped)
    with pytest.raises(ShippedWeightsError) as failure:
        trained_checkpoint(default_registry().get("tft", "cpu"), tmp_path / "cache")
    message = str(failure.value)
    assert "\n" not in message and "shipped checkpoint of tft:cpu" in message and "tft-cpu.pt has sha256" in message
    assert manifest(shipped)["tft:cpu"]["sha256"][:16] in message and "--retrain" in message


def _counting_train(dataset, out):
    calls = out.parent.parent / "calls.txt"
    calls.write_text(calls.read_text() + "x" if calls.is_file() else "x")
    out.write_text(f"weights trained on {dataset.name if dataset else 'built-in data'}")
    return {"final_loss": 0.5}


def test_retrain_a_dataset_or_another_recipe_train_here(tmp_path, monkeypatch):
    spec = dataclasses.replace(default_registry().get("identity", "tiny"), train=_counting_train,
                               training={"epochs": 3})
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    ship([spec], tmp_path / "maintainer", shipped)  # trained once by the maintainer, then shipped
    monkeypatch.setattr(training, "SHIPPED_DIR", shipped)
    cache = tmp_path / "cache"
    assert trained_checkpoint(spec, cache) == shipped / "identity-tiny.pt" and not cache.exists()
    retrained = trained_checkpoint(spec, cache, retrain=True)
    assert retrained.parent.parent == cache and (cache / "calls.txt").read_text() == "x"
    assert weights_origin(retrained) == "trained here"
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n")
    assert trained_checkpoint(spec, cache, data).read_text() == "weights trained on data.csv"
    other = dataclasses.replace(spec, training={"epochs": 4})  # not the recipe that made the shipped bytes
    assert trained_checkpoint(other, cache).parent.parent == cache and (cache / "calls.txt").read_text() == "xxx"


def test_the_suite_uses_the_shipped_checkpoint_unless_retrain(tmp_path):
    from types import SimpleNamespace

    from tritonsuite.profiles import load_profile
    from tritonsuite.run.suite import Suite

    spec = dataclasses.replace(default_registry().get("tft", "cpu"), train=_counting_train)
    common = dict(profile=load_profile("cpu"), registry=Registry([spec]), server=SimpleNamespace(),
                  repository_dir=tmp_path, cache_dir=tmp_path / "cache", reports_dir=tmp_path, run_id="r")
    shipped = Suite(**common)
    assert shipped.checkpoint("tft").parent == training.SHIPPED_DIR
    assert shipped.weights("tft").startswith("shipped with tritonsuite (tft-cpu.pt, sha256 ")
    retrained = Suite(**common, retrain=True)
    assert retrained.checkpoint("tft").read_text() == "weights trained on built-in data"
    assert retrained.weights("tft") == "trained here" and (tmp_path / "cache" / "calls.txt").read_text() == "x"
    user = Suite(**common, checkpoints={"tft": tmp_path / "mine.pt"})
    assert user.weights("tft") == "user checkpoint (mine.pt)"
