"""The README's worked example: a user's own model through the same suite, with a checkpoint and a dataset."""
import json
import re

import numpy as np
import pytest

from tests.helpers import ROOT, raw_rows, run_pytest
from tritonsuite.core.spec import file_digest, path_digest

pytestmark = pytest.mark.smoke


def test_user_model_spec_with_checkpoint_and_dataset(tmp_path):
    import torch

    torch.manual_seed(1)
    state = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).state_dict()
    torch.save(state, tmp_path / "weights.pt")
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "data.npz", INPUT__0=rng.standard_normal((100, 32)).astype(np.float32),
             labels=rng.integers(0, 10, 100))
    # a correctness test: any spread of the windows counts as stable, so a busy host does not fail it
    profile = (ROOT / "examples" / "profiles" / "cpu.yaml").read_text().replace("stability_percentage: 10",
                                                                               "stability_percentage: 100")
    result = run_pytest(["--gpu", "tiny", "-m", "accuracy or offline", "--model-spec", str(ROOT / "examples" / "mlp_spec.py"),
                         "--checkpoint", f"mlp={tmp_path / 'weights.pt'}", "--dataset", f"mlp={tmp_path / 'data.npz'}",
                         "--batch-sizes", "16", "-q", "-p", "no:warnings"], tmp_path, profile=profile)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout, result.stdout
    rows = raw_rows(tmp_path / "reports", "accuracy")
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
    # each point measured and printed (its stability is this host's: the script keeps the cpu profile's 10 %, and a
    # busy host may leave a point UNSTABLE, still measured); accuracy is a verdict of its own and must pass
    for batch in (1, 4):
        assert re.search(rf"^bert-onnx-fp32-batch{batch} (OK|UNSTABLE) \d+\.\d inf/s p99 \d+\.\d\d ms$", result.stdout,
                         re.M), result.stdout
    assert "bert-onnx-fp32 accuracy passed" in result.stdout, result.stdout
    assert (tmp_path / "offline" / "bert.md").is_file() and (tmp_path / "accuracy" / "bert.md").is_file()


NAMED_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
models:
  named:
    size: tiny
    formats: [onnx, ts-trace, ts-script]
    precisions: [fp32]
    max_batch_size: 8
    intra_op_threads: 1
    offline: {batch_sizes: [4]}
    online: {batch_size: 1, concurrency: [2], preferred_batch_sizes: [2], max_queue_delay_microseconds: 500}
  swapped:
    size: tiny
    formats: [onnx, ts-trace]
    precisions: [fp32]
    max_batch_size: 8
    intra_op_threads: 1
    offline: {batch_sizes: [4]}
    online: {batch_size: 1, concurrency: [2], preferred_batch_sizes: [2], max_queue_delay_microseconds: 500}
"""


def test_any_tensor_names_pass_offline_online_and_accuracy_on_both_platforms(tmp_path):
    """A user spec named image/meta -> logits/embedding, and one with <name>__<index> names declared out of order,
    through stock onnxruntime_onnx and pytorch_libtorch deployments on the real server."""
    result = run_pytest(["--gpu", "tiny", "-m", "offline or online or accuracy", "-q", "-p", "no:warnings",
                         "--model-spec", str(ROOT / "fixtures" / "specs" / "named_tensors_spec.py")], tmp_path,
                        profile=NAMED_PROFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "15 passed" in result.stdout, result.stdout  # (3 + 2 formats) x (offline, online, accuracy)
    rows = raw_rows(tmp_path / "reports")
    served_by = {r["deployment"]: r["parameters"]["Backend"] for r in rows}
    assert served_by["named_tiny_onnx_fp32_online"] == "onnxruntime (python-based stand-in, embedded)"
    assert served_by["swapped_tiny_ts_trace_fp32_offline"] == "pytorch (python-based stand-in, embedded)"
    for r in rows:
        if r["scenario"] == "accuracy":
            assert r["metrics"]["argmax_agreement"] == 1.0 and r["status"] == "OK", r
    for deployment in (tmp_path / "repos").iterdir():  # every deployment is a stock one
        if deployment.name.startswith("."):
            continue
        files = sorted(str(p.relative_to(deployment)) for p in deployment.rglob("*"))
        assert files in (["1", "1/model.onnx", "config.pbtxt"], ["1", "1/model.pt", "config.pbtxt"]), files
        assert "platform:" in (deployment / "config.pbtxt").read_text()


def test_the_accuracy_gate_against_committed_baselines(tmp_path):
    """CI gating: a deployment of the accepted checkpoint that scores worse than its baseline fails, naming metric,
    baseline, now, delta and allowance; a new checkpoint (other weights) is not judged against a baseline measured
    with the accepted one: one line names both sha256 and the way out, and --require-baselines fails it."""
    import torch

    def mlp(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    accepted, candidate = mlp(1), mlp(2)
    torch.save(accepted.state_dict(), tmp_path / "accepted.pt")
    torch.save(candidate.state_dict(), tmp_path / "candidate.pt")
    x = np.random.default_rng(3).standard_normal((100, 32)).astype(np.float32)
    with torch.no_grad():
        labels = accepted(torch.from_numpy(x)).argmax(1).numpy()  # the accepted model is right on every sample
    np.savez(tmp_path / "data.npz", INPUT__0=x, labels=labels)
    profile = (ROOT / "examples" / "profiles" / "cpu.yaml").read_text()
    baselines = tmp_path / "baselines"

    def accuracy(checkpoint, *extra):
        return run_pytest(["--gpu", "tiny", "-m", "accuracy", "--formats", "onnx", "-q", "-p", "no:warnings",
                           "--model-spec", str(ROOT / "examples" / "mlp_spec.py"), "--models", "mlp",
                           "--checkpoint", f"mlp={tmp_path / checkpoint}", "--dataset", f"mlp={tmp_path / 'data.npz'}",
                           "--baselines-dir", str(baselines), *extra], tmp_path, profile=profile)

    first = accuracy("accepted.pt")  # no baseline yet: passes, and says so
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no baseline: no baseline for mlp_cpu_onnx_fp32_offline" in first.stdout, first.stdout
    required = accuracy("accepted.pt", "--require-baselines")
    assert required.returncode == 1 and "(--require-baselines)" in required.stdout, required.stdout
    written = accuracy("accepted.pt", "--update-baselines")
    assert written.returncode == 0 and "baseline written: mlp_cpu_onnx_fp32_offline" in written.stdout
    stored = json.loads((baselines / "tiny" / "mlp.json").read_text())["deployments"]["mlp_cpu_onnx_fp32_offline"]
    assert stored["metrics"]["top1_accuracy"]["value"] == 100.0 and stored["provenance"]["samples"] == 100
    assert accuracy("accepted.pt").returncode == 0  # the same checkpoint passes against its baseline
    assert stored["weights_sha256"] == file_digest(tmp_path / "accepted.pt")
    assert stored["dataset_sha256"] == path_digest(tmp_path / "data.npz")
    candidate_sha = file_digest(tmp_path / "candidate.pt")
    for extra, code in (((), 0), (("--require-baselines",), 1)):
        other = accuracy("candidate.pt", *extra)  # scores worse, but on other weights: refused, not a regression
        assert other.returncode == code and "regressed against its baseline" not in other.stdout, other.stdout
        line = next(l for l in other.stdout.splitlines() if "not judged against its baseline" in l)
        assert (f"measured with weights sha256 {stored['weights_sha256'][:12]}, this run's weights sha256 "
                f"{candidate_sha[:12]}") in line and "--update-baselines" in line and "accepted.pt" in line
    path = baselines / "tiny" / "mlp.json"
    data = json.loads(path.read_text())
    data["deployments"]["mlp_cpu_onnx_fp32_offline"]["metrics"]["top1_accuracy"]["value"] = 101.0  # as if it scored more
    path.write_text(json.dumps(data))
    regressed = accuracy("accepted.pt")  # the same weights and data, scoring less than its baseline
    assert regressed.returncode == 1, regressed.stdout
    line = next(l for l in regressed.stdout.splitlines() if "regressed against its baseline: top1_accuracy" in l)
    assert "top1_accuracy: baseline 101, now 100, delta -1, allowed -0.001 (" in line and "mlp.json" in line
