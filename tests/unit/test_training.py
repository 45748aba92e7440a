import dataclasses
import json
import multiprocessing

import pytest

from tritonsuite.models import default_registry
from tritonsuite.models.training import checkpoint_dir, trained_checkpoint, training_stats


def _train(dataset, out):
    """Writes a checkpoint whose content records the dataset it saw, and counts its calls in a side file."""
    calls = out.parent.parent / "calls.txt"
    with open(calls, "a") as f:
        f.write("x")
    out.write_text(f"weights from {dataset.name if dataset else 'built-in data'}")
    return {"final_loss": 0.25}


@pytest.fixture
def spec():
    base = default_registry().get("identity", "tiny")
    return dataclasses.replace(base, train=_train, training={"epochs": 3})


def test_trained_once_then_reused_with_its_statistics(spec, tmp_path):
    first = trained_checkpoint(spec, tmp_path)
    second = trained_checkpoint(spec, tmp_path)
    assert first == second and first.read_text() == "weights from built-in data"
    assert (tmp_path / "calls.txt").read_text() == "x"
    stats = training_stats(first)
    assert stats["final_loss"] == 0.25 and stats["training"] == {"epochs": 3} and stats["seconds"] >= 0
    assert not list(tmp_path.glob("*.tmp-*"))


def test_key_follows_training_parameters_and_dataset(spec, tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    base = checkpoint_dir(spec, tmp_path)
    assert checkpoint_dir(dataclasses.replace(spec, training={"epochs": 4}), tmp_path) != base
    with_data = checkpoint_dir(spec, tmp_path, data)
    assert with_data != base
    data.write_text("a,b\n1,3\n")
    assert checkpoint_dir(spec, tmp_path, data) != with_data
    assert trained_checkpoint(spec, tmp_path, data).read_text() == "weights from data.csv"


def test_a_failed_training_leaves_nothing_behind(spec, tmp_path):
    def broken(dataset, out):
        out.write_text("half")
        raise RuntimeError("diverged")

    with pytest.raises(RuntimeError, match="diverged"):
        trained_checkpoint(dataclasses.replace(spec, train=broken), tmp_path)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_concurrent_processes_train_once(spec, tmp_path):
    def worker(i):
        (tmp_path / f"path{i}").write_text(str(trained_checkpoint(spec, tmp_path)))

    procs = [multiprocessing.get_context("fork").Process(target=worker, args=(i,)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len({(tmp_path / f"path{i}").read_text() for i in range(3)}) == 1
    assert (tmp_path / "calls.txt").read_text() == "x"
    assert json.loads((checkpoint_dir(spec, tmp_path) / "training.json").read_text())["final_loss"] == 0.25


def test_load_weights_takes_a_state_dict_a_trainer_file_or_its_directory(tmp_path):
    import torch

    from tritonsuite.models.training import load_weights

    source = torch.nn.Linear(3, 2)
    torch.save(source.state_dict(), tmp_path / "plain.pt")
    (tmp_path / "run").mkdir()
    torch.save({"state_dict": source.state_dict(), "config": {"width": 3}}, tmp_path / "run" / "checkpoint.pt")
    for path in (tmp_path / "plain.pt", tmp_path / "run"):
        target = torch.nn.Linear(3, 2)
        load_weights(target, path, "linear:tiny")
        assert torch.equal(target.weight, source.weight)
    assert load_weights(torch.nn.Linear(3, 2), tmp_path / "run", "linear:tiny")["config"] == {"width": 3}
    with pytest.raises(ValueError, match=r"--checkpoint linear=.*plain.pt does not fit linear:small: .*size mismatch"):
        load_weights(torch.nn.Linear(4, 2), tmp_path / "plain.pt", "linear:small")


def test_a_corrupted_trained_checkpoint_is_noticed_and_retrained(spec, tmp_path):
    from tritonsuite.core.integrity import CacheHealed

    first = trained_checkpoint(spec, tmp_path)
    first.write_text("weights from")  # truncated on disk
    with pytest.warns(CacheHealed, match=r"trained checkpoint .* holds 12 bytes, 26 recorded; rebuilding it"):
        again = trained_checkpoint(spec, tmp_path)
    assert again == first and again.read_text() == "weights from built-in data"
    assert (tmp_path / "calls.txt").read_text() == "xx"
