"""``--formats trt`` on a host without TensorRT or CUDA: every case skips with the reason, through the pytest glue."""
import pytest

from tests.helpers import TINY_PROFILE, run_pytest


def test_trt_cases_skip_with_their_reason_on_a_host_without_tensorrt_or_cuda(tmp_path):
    import torch

    from tritonsuite.deploy.formats.tensorrt import TENSORRT_INSTALL, tensorrt_import_error

    missing = tensorrt_import_error()
    if missing is None and torch.cuda.is_available():
        pytest.skip("tensorrt and a CUDA device are here: trt cases run (and the tiny profile's KIND_CPU refuses them)")
    profile = TINY_PROFILE.replace("formats: [onnx, ts-trace, ts-script]", "formats: [onnx, trt]")
    result = run_pytest(["--gpu", "tiny", "-m", "offline or accuracy", "--formats", "trt", "-rs", "-q",
                         "-p", "no:warnings"], tmp_path, profile=profile, timeout=300)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "3 skipped" in out and "passed" not in out and "failed" not in out, out  # batch 1 and 4, accuracy
    reason = (f"bert:tiny as trt: tensorrt is not installed (NVIDIA's index: {TENSORRT_INSTALL})" if missing
              else "bert:tiny as trt: TensorRT builds and runs plans on a CUDA device; this host has no CUDA device")
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and reason in skipped[0] and skipped[0].startswith("SKIPPED [3]"), out
