"""Reduced precision judged against fp32 on the real embedded server: deliberately wrong fp16 deployments fail in
one line naming the metric; the same model with its fp32 island passes (tests/precision_faults_spec.py).

The overflow is served as TorchScript (fp16 kernels on the CPU). Its fp16 ONNX, served by onnxruntime's CPU
provider, does not overflow (measured: relative L2 error 0.0005): onnxruntime keeps the square-and-sum out of half,
so it shows half storage, not half arithmetic (docs/precision.md)."""
import re

import pytest

from tests.helpers import ROOT, raw_rows, run_pytest

pytestmark = pytest.mark.smoke

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
models:
""" + "".join(f"""  {name}:
    size: tiny
    formats: [{formats}]
    precisions: [fp32]
    accuracy_precisions: [fp16]
    max_batch_size: 16
    intra_op_threads: 1
    offline: {{batch_sizes: []}}
    online: {{concurrency: []}}
""" for name, formats in (("overflow", "ts-trace"), ("overflow_island", "ts-trace"),
                          ("perturbed", "ts-trace, onnx")))


def test_wrong_fp16_deployments_fail_in_one_line_against_fp32(tmp_path):
    result = run_pytest(["--gpu", "tiny", "-m", "accuracy", "--precisions", "fp16", "--model-spec",
                         str(ROOT / "tests" / "precision_faults_spec.py"), "-q", "-p", "no:warnings"],
                        tmp_path, profile=PROFILE)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "3 failed, 1 passed" in out, out
    # one line each: which deployment, which metric, the value against its threshold
    failed = set(re.findall(r"^(\w+_fp16_offline) \(64 samples, 64 seeded samples\) missed its thresholds:\n"
                            r"  output_relative_l2_error = [0-9.]+ \(threshold <= 0\.0030\); worst example: sample "
                            r"\d+\n-", out, re.MULTILINE))
    assert failed == {"overflow_tiny_ts_trace_fp16_offline", "perturbed_tiny_ts_trace_fp16_offline",
                      "perturbed_tiny_onnx_fp16_offline"}, out
    rows = {r["deployment"]: r for r in raw_rows(tmp_path / "reports", "accuracy")}
    assert rows["overflow_island_tiny_ts_trace_fp16_offline"]["status"] == "OK"
    assert rows["overflow_tiny_ts_trace_fp16_offline"]["metrics"]["output_relative_l2_error"] > 0.5  # collapsed
    perturbed = rows["perturbed_tiny_onnx_fp16_offline"]["metrics"]["output_relative_l2_error"]
    assert 0.005 < perturbed < 0.02  # the 1% weight change, not an overflow
    assert all(r["precision"] == "fp16" and r["weights"] == "seeded random" for r in rows.values())
    assert all(r["description"].endswith("; weights: seeded random (the verdict is agreement with eager, not a "
                                         "trained model's)") for r in rows.values())


MIXED_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
models:
  overflow:
    size: tiny
    formats: [ts-trace, ts-script]
    precisions: [fp32]
    accuracy_precisions: [fp16, mixed]
    max_batch_size: 16
    intra_op_threads: 1
    offline: {batch_sizes: []}
    online: {concurrency: []}
"""


def test_mixed_keeps_the_overflowing_reduction_in_fp32_where_fp16_fails(tmp_path):
    """``mixed`` is what fp32 islands are for: the overflow model's reduction (a module its spec lists among its
    fp32 module types) stays fp32 under both TorchScript recipes (an autocast trace, a scripted .half() with
    islands), served and judged against fp32 on the embedded server; its fp16 deployments collapse."""
    result = run_pytest(["--gpu", "tiny", "-m", "accuracy", "--precisions", "fp16,mixed", "--model-spec",
                         str(ROOT / "tests" / "precision_faults_spec.py"), "-q", "-p", "no:warnings"],
                        tmp_path, profile=MIXED_PROFILE)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "2 failed, 2 passed" in out, out
    rows = {r["deployment"]: r for r in raw_rows(tmp_path / "reports", "accuracy")}
    assert set(rows) == {f"overflow_tiny_{fmt}_{precision}_offline" for fmt in ("ts_trace", "ts_script")
                         for precision in ("fp16", "mixed")}, sorted(rows)
    for fmt in ("ts_trace", "ts_script"):
        fp16, mixed = rows[f"overflow_tiny_{fmt}_fp16_offline"], rows[f"overflow_tiny_{fmt}_mixed_offline"]
        assert fp16["status"] != "OK" and fp16["metrics"]["output_relative_l2_error"] > 0.5  # collapsed
        assert mixed["status"] == "OK" and mixed["precision"] == "mixed"
        assert mixed["metrics"]["output_relative_l2_error"] < 0.003  # fp16's threshold: mixed is held to it
        assert mixed["reference"] == "fp32 eager model on the CPU"
