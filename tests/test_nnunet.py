"""nnU-Net end to end on the real embedded Triton: tiny size, offline/online/accuracy, with a user checkpoint and data."""
import json
import os

import numpy as np

from tests.helpers import leftover_shm, raw_rows, run_leftovers, run_pytest
from tritonsuite.models import nnunet

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 12, warmup_ms: 200}
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
    rows = raw_rows(tmp_path / "reports")
    perf = [r for r in rows if r["scenario"] in ("offline", "online")]
    assert len(perf) == 8 and all(r["status"] == "OK" for r in perf)
    assert {r["measurement"]["shared_memory"] for r in perf if r["scenario"] == "offline"} == {"system"}
    accuracy = [r for r in rows if r["scenario"] == "accuracy"]
    assert len(accuracy) == 2 and all(r["status"] == "OK" for r in accuracy)
    for r in accuracy:
        assert r["samples"] == 5 and "user.npz" in r["description"]
        assert r["description"].endswith("; weights: user checkpoint (user.pt)")
        assert r["parameters"]["Checkpoint"].endswith("user.pt")
        assert all(r["metrics"][f"dice_vs_reference_class{c}"] >= 0.999 for c in range(4))
        assert "dice_vs_ground_truth_edema" in r["metrics"]
    assert (tmp_path / "reports" / "accuracy" / "nnunet.md").is_file()
    assert not run_leftovers(tmp_path / "reports")


def test_seed_sized_tensors_go_through_system_shared_memory(tmp_path):
    """The seed's 4x128^3 float32 volumes (32 MiB a sample) and int64 label maps, offline through system shared
    memory at batch 2. The network is the tiny DynUNet (fully convolutional, so it runs on 128^3): this checks the
    data path on a CPU host, not the full-size model's speed."""
    import dataclasses

    from tritonsuite.load.engine import MeasurementSettings
    from tritonsuite.models import Registry, default_registry
    from tritonsuite.profiles import load_profile
    from tritonsuite.server import EmbeddedServer
    from tritonsuite.core.spec import TensorSpec
    from tritonsuite.run.suite import Suite

    tiny = default_registry().get("nnunet", "tiny")
    big = dataclasses.replace(
        tiny, size="tiny128", formats=("onnx",), accuracy_data=None,
        inputs=(TensorSpec("INPUT__0", "float32", (4, 128, 128, 128)),),
        outputs=(TensorSpec("OUTPUT__0", "int64", (128, 128, 128)),),
        example_inputs=lambda b, s=0: {"INPUT__0": np.random.default_rng(s).standard_normal((b, 4, 128, 128, 128),
                                                                                            dtype=np.float32)})
    profile = load_profile("cpu")
    entry = profile.models["nnunet"]
    entry = dataclasses.replace(entry, size="tiny128", formats=("onnx",),
                                offline=dataclasses.replace(entry.offline, batch_sizes=(2,)))
    # the widest stability limit and no client-CPU bound: this checks the data path, not this host's noise
    profile = dataclasses.replace(profile, models={"nnunet": entry}, measurement=MeasurementSettings(
        window_ms=300, min_requests_per_window=2, stability_percentage=100, max_trials=4, warmup_ms=100,
        client_bound_percent=1000))
    with EmbeddedServer(tmp_path / "repo", tmp_path / "logs", auto_complete=False) as server:
        suite = Suite(profile, Registry([big]), server, tmp_path / "repo", tmp_path / "cache", tmp_path / "reports",
                      run_id="large")
        (case,) = suite.cases("offline")
        m = suite.run_performance(case)
    # measured, every request answered through the regions (UNSTABLE: windows that disagreed beyond even 100 % on a
    # host busy with another test run, seen once at 61 % under a 50 % limit; the data path is what is checked)
    assert m.status in ("OK", "UNSTABLE"), m.reasons
    record = json.loads((next((tmp_path / "reports" / "raw").glob("*.jsonl"))).read_text().splitlines()[0])
    assert record["measurement"]["shared_memory"] == "system"
    assert record["measurement"]["requests_sent"] == record["measurement"]["server_success_delta"] > 0
    pid = os.getpid()  # this process's server and regions only: other runs on the host may hold theirs
    assert not leftover_shm(f"triton_python_backend_shm_region_ts{pid}x") and not leftover_shm(f"tritonsuite_shm_{pid}x")
