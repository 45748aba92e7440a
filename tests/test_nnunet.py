"""nnU-Net end to end on the real embedded Triton: tiny size, offline/online/accuracy, with a user checkpoint and data."""
import json

import numpy as np

from tests.helpers import leftover_shm, run_pytest
from tritonsuite.models import nnunet

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 25, max_trials: 8, warmup_ms: 200}
models:
  nnunet:
    size: tiny
    formats: [ts-script, onnx]
    precisions: [fp32]
    max_batch_size: 2
    intra_op_threads: 1
    offline: {batch_sizes: [1, 2]}
    online: {batch_size: 1, concurrency: [1, 2], preferred_batch_sizes: [2], max_queue_delay_microseconds: 1}
"""


def test_nnunet_served_measured_and_checked_with_user_checkpoint_and_dataset(tmp_path):
    import torch

    net = nnunet.build_net("tiny")
    with torch.no_grad():  # a user's weights: not the seeded ones
        for p in net.parameters():
            p.mul_(1.5)
    torch.save(net.state_dict(), tmp_path / "user.pt")
    images, labels = nnunet.phantoms(5, 16, 4242)
    np.savez(tmp_path / "user.npz", images=images, labels=labels)

    result = run_pytest(["-m", "offline or online or accuracy", "-q", "-p", "no:warnings", "--gpu", "tiny",
                         "--checkpoint", f"nnunet={tmp_path / 'user.pt'}", "--dataset", f"nnunet={tmp_path / 'user.npz'}"],
                        tmp_path, profile=PROFILE)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    rows = [json.loads(line) for f in (tmp_path / "reports" / "raw").glob("*.jsonl") for line in f.read_text().splitlines()]
    perf = [r for r in rows if r["scenario"] in ("offline", "online")]
    assert len(perf) == 8 and all(r["status"] == "OK" for r in perf)
    assert {r["measurement"]["shared_memory"] for r in perf if r["scenario"] == "offline"} == {"system"}
    accuracy = [r for r in rows if r["scenario"] == "accuracy"]
    assert len(accuracy) == 2 and all(r["status"] == "OK" for r in accuracy)
    for r in accuracy:
        assert r["samples"] == 5 and "user.npz" in r["description"]
        assert r["parameters"]["Checkpoint"].endswith("user.pt")
        assert all(r["metrics"][f"dice_vs_reference_class{c}"] >= 0.999 for c in range(4))
        assert "dice_vs_ground_truth_edema" in r["metrics"]
    assert (tmp_path / "reports" / "accuracy" / "nnunet.md").is_file()
    assert not leftover_shm("triton_python_backend_shm_region_ts") and not leftover_shm("tritonsuite_shm_")
