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
            assert "trained by the suite" in r["parameters"]["Checkpoint"]
    assert np.isfinite([r["result"]["Inferences/Second"] for r in offline]).all()
