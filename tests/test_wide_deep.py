"""Wide & Deep end to end on the embedded Triton: 29 inputs through system shared memory at a large batch, MAP@12
and the Adult model trained from a user's table (--dataset), with a user checkpoint (--checkpoint)."""

import numpy as np
import pytest

from tests.helpers import raw_rows, run_pytest
from tests.unit.test_wide_deep import _adult_frame

pytestmark = pytest.mark.smoke

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 3, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
models:
  wide_deep:
    size: tiny
    formats: [onnx, ts-trace]
    precisions: [fp32]
    max_batch_size: 8192
    intra_op_threads: 1
    offline: {batch_sizes: [8192]}
    online: {concurrency: []}
  wide_deep_adult:
    size: base
    formats: [onnx]
    precisions: [fp32]
    max_batch_size: 512
    intra_op_threads: 1
    offline: {batch_sizes: []}
    online: {concurrency: []}
"""


def test_wide_deep_through_triton(tmp_path):
    import torch

    from tritonsuite.models import default_registry

    data = tmp_path / "adult.csv"
    _adult_frame(4000, seed=2).to_csv(data, index=False)  # enough rows for the default training to learn its rule
    module = default_registry().get("wide_deep", "tiny").build(None)
    with torch.no_grad():
        module.mlp[-1].bias.fill_(0.5)
    torch.save(module.state_dict(), tmp_path / "user.pt")
    result = run_pytest(["--gpu", "tiny", "-m", "offline or accuracy", "-q", "-p", "no:warnings",
                         "--dataset", f"wide_deep_adult={data}", "--checkpoint", f"wide_deep={tmp_path / 'user.pt'}"],
                        tmp_path, profile=PROFILE)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "5 passed" in out, out

    rows = raw_rows(tmp_path / "reports")
    offline = [r for r in rows if r["scenario"] == "offline"]
    assert len(offline) == 2 and all(r["valid"] and r["measurement"]["shared_memory"] == "system" for r in offline)
    assert all(r["result"]["Batch"] == 8192 and r["parameters"]["Checkpoint"].endswith("user.pt") for r in offline)
    accuracy = {(r["model"], r["deployment"]): r for r in rows if r["scenario"] == "accuracy"}
    assert len(accuracy) == 3 and all(r["valid"] for r in accuracy.values())
    for (model, _), r in accuracy.items():
        if model == "wide_deep":
            assert r["metrics"]["map_at_12_abs_difference_to_reference"] <= 0.001
            assert 0 < r["metrics"]["map_at_12"] <= 1
        else:
            assert str(data) in r["description"] and r["samples"] == 800
            assert r["metrics"]["auc"] >= 0.9 and r["metrics"]["auc_abs_difference_to_reference"] <= 0.001
            assert r["parameters"]["Checkpoint"].startswith("trained here (")  # --dataset: trained on it
    assert np.isfinite([r["result"]["Inferences/Second"] for r in offline]).all()


def test_the_shipped_adult_checkpoint_runs_by_default_and_retrain_trains_here(tmp_path):
    """No --checkpoint: the Adult model's rows come from the checkpoint shipped with tritonsuite (named with its
    sha256, nothing trained); --retrain trains it here (in the --cache-dir given) and the rows say so."""
    from tritonsuite.models.training import manifest
    from tritonsuite.core.spec import file_digest

    record = manifest()["wide_deep_adult:base"]
    for extra, expected in (((), f"shipped with tritonsuite (wide_deep_adult-base.pt, sha256 {record['sha256'][:12]})"),
                            (("--retrain",), "trained here")):
        result = run_pytest(["--gpu", "tiny", "-m", "accuracy", "-q", "-p", "no:warnings", "--models",
                             "wide_deep_adult", "--reports-dir", str(tmp_path / f"reports{len(extra)}"),
                             "--cache-dir", str(tmp_path / "cache"), *extra],
                            tmp_path, profile=PROFILE)
        assert result.returncode == 0, result.stdout + result.stderr
        [row] = raw_rows(tmp_path / f"reports{len(extra)}", "accuracy")
        assert row["weights"] == expected and f"weights: {expected}" in row["description"]
        assert row["metrics"]["auc"] >= 0.9
        trained = list((tmp_path / "cache").glob("wide_deep_adult-base-trained-*/checkpoint.pt"))  # --cache-dir
        assert len(trained) == len(extra)  # nothing trained without --retrain; one checkpoint with it
        # the sha256 a baseline records: of the file that ran (on the host that shipped it, training reproduces it)
        assert row["weights_sha256"] == (file_digest(trained[0]) if extra else record["sha256"])
    assert row["parameters"]["Checkpoint"].startswith("trained here (")
