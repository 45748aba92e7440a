"""Server death in the middle of a sweep: that test fails with the log tail, the rest fail fast, rows stay."""
import json
import time

from tests.helpers import TINY_PROFILE, leftover_shm, run_pytest

KILLER_PLUGIN = '''
import threading
import pytest
from fixtures.options import SERVER_KEY

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.name.endswith("batch2]"):  # kill the server while the second point is being measured
        server = item.config.stash[SERVER_KEY]
        threading.Timer(1.0, server.process.kill).start()
    return (yield)
'''


def test_server_dies_mid_sweep(tmp_path):
    (tmp_path / "killer.py").write_text(KILLER_PLUGIN)
    profile = TINY_PROFILE.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 2, 4, 3]") \
                          .replace("max_trials: 8", "max_trials: 50").replace("window_ms: 300", "window_ms: 500")
    start = time.monotonic()
    result = run_pytest(["--gpu", "tiny", "-m", "offline", "--formats", "onnx", "-p", "killer", "-p", "no:warnings",
                         "-rA"], tmp_path, profile=profile, timeout=300, pythonpath=str(tmp_path))
    out = result.stdout + result.stderr
    assert time.monotonic() - start < 200, "the remaining tests must not hang"
    assert result.returncode == 1, out
    assert "PASSED tests/test_offline.py::test_offline[bert-onnx-fp32-batch1]" in out
    assert "died while measuring bert_tiny_onnx_fp32_offline at batch 2" in out
    assert "tritonserver log tail" in out  # attached to the failing test's report
    for batch in (4, 3):
        assert f"FAILED tests/test_offline.py::test_offline[bert-onnx-fp32-batch{batch}]" in out
    assert out.count("is not running") >= 2, out  # the cases after the crash fail at once, naming the dead server
    rows = [json.loads(l) for f in (tmp_path / "reports" / "raw").glob("offline-*.jsonl") for l in f.read_text().splitlines()]
    assert [r["result"]["Batch"] for r in rows] == [1] and rows[0]["status"] == "OK"
    assert (tmp_path / "reports" / "offline" / "bert.md").is_file(), "the report is written from what was measured"
    assert not leftover_shm("triton_python_backend_shm_region_ts") and not leftover_shm("tritonsuite_shm_")
