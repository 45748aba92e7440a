"""TFT through the real embedded Triton: eight inputs through system shared memory offline, and an accuracy run on a
user dataset (``--dataset tft=CSV``) with the suite-trained tiny model."""

import re

import pytest

from tests.helpers import raw_rows, run_pytest
from tests.unit.test_tft import _write_csv
from tritonsuite.core.rows import not_measured

pytestmark = pytest.mark.smoke

TFT_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
models:
  tft:
    size: tiny
    formats: [onnx, ts-trace]
    precisions: [fp32]
    max_batch_size: 8
    intra_op_threads: 1
    offline: {batch_sizes: [1, 8]}
    online: {batch_size: 1, concurrency: [2], preferred_batch_sizes: [2], max_queue_delay_microseconds: 200}
"""


def test_tft_offline_and_accuracy_on_a_user_csv(tmp_path):
    data = _write_csv(tmp_path / "load.csv")
    result = run_pytest(["--gpu", "tiny", "-m", "accuracy or offline", "--models", "tft",
                         "--dataset", f"tft={data}", "-q", "-p", "no:warnings"], tmp_path, profile=TFT_PROFILE)
    offline = raw_rows(tmp_path / "reports", "offline")
    assert {(r["deployment"], r["result"]["Batch"]) for r in offline} == {
        ("tft_tiny_onnx_fp32_offline", 1), ("tft_tiny_onnx_fp32_offline", 8),
        ("tft_tiny_ts_trace_fp32_offline", 1), ("tft_tiny_ts_trace_fp32_offline", 8)}, result.stdout
    # every request answered: a point is measured (OK) or, where this host could not measure it steadily, reported as
    # not measured (a skip); never a failure
    assert all(r["measurement"]["server_fail_delta"] == 0 and r["measurement"]["requests_sent"] > 0 and
               (r["status"] == "OK" or not_measured(r["status"], r["measurement"])) for r in offline), offline
    accuracy = raw_rows(tmp_path / "reports", "accuracy")
    assert {r["deployment"] for r in accuracy} == {"tft_tiny_onnx_fp32_offline", "tft_tiny_ts_trace_fp32_offline"}
    for r in accuracy:
        assert "load.csv" in r["description"] and r["samples"] == 2 * (14 * 24 - 24 + 1)
        assert r["description"].endswith("; weights: trained here") and r["weights"] == "trained here"
        for q in ("P10", "P50", "P90"):
            assert r["metric_status"][f"q_risk_{q}_relative_to_eager"] == "OK", r
        assert r["metric_status"]["target__0 max abs error"] == "OK", r
        # the tiny model, trained for a few steps, need not beat the naive forecast on this series; Triton must
        # agree with eager, which is all a failure may be about
        failed = [m for m, s in r["metric_status"].items() if s != "OK"]
        assert set(failed) <= {"q_risk_P10", "q_risk_P50", "q_risk_P90"} and (r["status"] == "FAILED") == bool(failed)
    # the run fails exactly for the accuracy tests whose q-risk missed: one test per row
    failing = sum(r["status"] == "FAILED" for r in accuracy)
    skipped = sum(r["status"] != "OK" for r in offline)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", result.stdout.splitlines()[-1])}
    assert counts == {k: n for k, n in (("passed", len(offline) + len(accuracy) - failing - skipped),
                                        ("failed", failing), ("skipped", skipped)) if n}, result.stdout
    assert result.returncode == (1 if failing else 0), result.stdout + result.stderr
