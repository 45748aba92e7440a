"""The README's worked example: a user's own model through the same suite, with a checkpoint and a dataset."""
import json

import numpy as np
import pytest

from tests.helpers import ROOT, run_pytest

pytestmark = pytest.mark.smoke


def test_user_model_spec_with_checkpoint_and_dataset(tmp_path):
    import torch

    torch.manual_seed(1)
    state = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).state_dict()
    torch.save(state, tmp_path / "weights.pt")
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "data.npz", INPUT__0=rng.standard_normal((100, 32)).astype(np.float32),
             labels=rng.integers(0, 10, 100))
    profile = (ROOT / "examples" / "profiles" / "cpu.yaml").read_text()
    result = run_pytest(["--gpu", "tiny", "-m", "accuracy or offline", "--model-spec", str(ROOT / "examples" / "mlp_spec.py"),
                         "--checkpoint", f"mlp={tmp_path / 'weights.pt'}", "--dataset", f"mlp={tmp_path / 'data.npz'}",
                         "--batch-sizes", "16", "-q", "-p", "no:warnings"], tmp_path, profile=profile)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout, result.stdout
    rows = [json.loads(l) for f in (tmp_path / "reports" / "raw").glob("accuracy-*.jsonl") for l in f.read_text().splitlines()]
    assert {r["deployment"] for r in rows} == {"mlp_cpu_onnx_fp32_offline", "mlp_cpu_ts_script_fp32_offline"}
    for r in rows:
        assert r["samples"] == 100 and r["metrics"]["top1_agreement_with_reference"] == 100.0
        assert "top1_accuracy" in r["metrics"]  # the user's labels were used


def test_the_library_runs_from_a_plain_script(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(ROOT / "examples" / "script_offline.py"), str(tmp_path)],
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "bert-onnx-fp32-batch4 OK" in result.stdout and "bert-onnx-fp32 accuracy passed" in result.stdout
    assert (tmp_path / "offline" / "bert.md").is_file() and (tmp_path / "accuracy" / "bert.md").is_file()
