"""The streaming example among the suite's own models: FastPitch's mel spectrogram streamed 32 frames a response by a
decoupled python deployment beside the online one (a BLS call, then one response per chunk). Run from a profile's
``online: {stream: [...]}``, its rows carry the stream columns, and before it is measured its streamed responses
are checked against the deployment's unary answer chunked the same way."""
import pytest

from tests.helpers import raw_rows, run_pytest

pytestmark = pytest.mark.smoke

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 6, warmup_ms: 200}
models:
  fastpitch:
    size: tiny
    formats: [onnx]
    precisions: [fp32]
    max_batch_size: 2
    intra_op_threads: 1
    offline: {batch_sizes: [1]}
    online: {batch_size: 1, concurrency: [1], stream: [2]}
"""


@pytest.mark.parametrize("hand_over", ["numpy", "dlpack"])
def test_fastpitch_mel_streamed_in_chunks(tmp_path, monkeypatch, hand_over):
    """Both ways the stand-ins and the streamer hand tensors to the python backend: numpy, and DLPack, which numpy
    2 hosts take (nvidia-pytriton's stub returns numpy 2 arrays empty), forced here under numpy 1."""
    if hand_over == "dlpack":
        monkeypatch.setenv("TRITONSUITE_BY_DLPACK", "1")
    result = run_pytest(["--gpu", "tiny", "-m", "online", "-p", "no:warnings", "-v"], tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_online[fastpitch-onnx-fp32-stream-concurrency2] PASSED" in result.stdout, result.stdout
    rows = {r["deployment"]: r for r in raw_rows(tmp_path / "reports", "online")}
    stream = rows["fastpitch_tiny_onnx_fp32_online_stream"]
    assert stream["status"] == "OK", stream["reasons"]
    assert stream["measurement"]["protocol"] == "grpc (bidirectional stream)"
    # the tiny model's perf-length mel runs to more than one chunk of 32 frames
    assert stream["result"]["Responses/Request"] > 1 and stream["result"]["p50 inter-response latency"] > 0
    assert stream["result"]["avg time to first response"] < stream["result"]["avg latency"]
    assert stream["parameters"]["Deployment kind"] == "python, decoupled"
    assert "Responses/Second" not in rows["fastpitch_tiny_onnx_fp32_online"]["result"]  # the unary one: no streams
    page = (tmp_path / "reports" / "online" / "fastpitch.md").read_text()
    assert "## fastpitch_tiny_onnx_fp32_online_stream" in page and "p99 time to first response (ms)" in page
