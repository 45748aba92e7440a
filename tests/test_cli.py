"""Bad command-line input gets a one-line usage error naming the bad value and the valid choices."""
import pytest

from tests.helpers import ROOT, run_pytest


@pytest.mark.parametrize("args, message", [
    (["--gpu", "a999"], "--gpu 'a999': unknown profile; valid choices: tiny"),
    (["--server", "docker"], "argument --server: invalid choice: 'docker' (choose from 'embedded', 'remote')"),
    (["--models", "gpt"], "--models gpt: unknown model; valid choices: bert"),
    (["--formats", "onnx,savedmodel"], "--formats savedmodel: unknown format; valid choices: ts-trace, ts-script, onnx"),
    (["--batch-sizes", "1,x"], "--batch-sizes '1,x': expected comma-separated positive integers"),
    (["--batch-sizes", "64"], "--batch-sizes [64] exceed bert's max batch size 4"),
    (["--server", "remote"], "--server remote needs --triton-url host:port"),
    (["--checkpoint", "bert"], "--checkpoint 'bert': expected MODEL=PATH"),
    (["--dataset", "gpt=/tmp"], "--dataset gpt=...: unknown model; valid choices: bert, "),
])
def test_usage_errors(tmp_path, args, message):
    result = run_pytest(["--gpu", "tiny", "--collect-only", "-q", *args] if "--gpu" not in args
                        else ["--collect-only", "-q", *args], tmp_path, timeout=120)
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage-error exit code
    assert message in result.stderr, result.stderr


def test_gpu_profile_on_a_host_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA device, so the GPU profile is valid here")
    result = run_pytest(["--gpu", "a100", f"--profiles-dir={ROOT / 'fixtures' / 'profiles'}", "--collect-only", "-q"],
                        tmp_path, timeout=120)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "--gpu a100: this profile runs models on a GPU (NVIDIA A100 80GB) and this host has no CUDA device; " \
           "valid choices here: cpu" in result.stderr, result.stderr


def test_plain_pytest_selects_only_the_suites_own_tests_and_markers_select_scenarios(tmp_path):
    plain = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "tests/test_offline.py", "tests/test_online.py"],
                       tmp_path, timeout=120)
    assert "no tests collected (12 deselected)" in plain.stdout, plain.stdout
    offline = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "-m", "offline", "tests/test_offline.py"],
                         tmp_path, timeout=120)
    ids = [line for line in offline.stdout.splitlines() if "::" in line]
    assert ids == [f"tests/test_offline.py::test_offline[bert-{f}-fp32-batch{b}]"
                   for f in ("onnx", "ts-trace", "ts-script") for b in (1, 4)], offline.stdout
