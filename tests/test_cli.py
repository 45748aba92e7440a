"""Bad command-line input gets a one-line usage error naming the bad value and the valid choices."""
import subprocess
import sys

import pytest

from tests.helpers import ROOT, run_pytest


@pytest.mark.parametrize("args, message", [
    (["--gpu", "a999"], "--gpu 'a999': unknown profile; valid choices: a100, a30, a40, cpu, h100, t4, tiny, v100"),
    (["--server", "docker"], "argument --server: invalid choice: 'docker' (choose from 'container', 'embedded', 'remote')"),
    (["--models", "gpt"], "--models gpt: unknown model; valid choices: bert"),
    (["--formats", "onnx,savedmodel"], "--formats savedmodel: unknown format; valid choices: ts-trace, ts-script, onnx, trt"),
    (["--batch-sizes", "1,x"], "--batch-sizes '1,x': expected comma-separated positive integers"),
    (["--batch-sizes", "64"], "--batch-sizes [64] exceed bert's max batch size 4"),
    (["--server", "remote"], "--server remote needs --triton-url host:port"),
    (["--server", "remote", "--triton-url", "grpc://127.0.0.1"], "is not an HTTP host:port"),
    (["--server", "remote", "--triton-url", "127.0.0.1:9", "--triton-grpc-url", "127.0.0.1"],
     "--triton-grpc-url '127.0.0.1' is not a gRPC host:port (e.g. 127.0.0.1:8001)"),
    (["--triton-grpc-url", "127.0.0.1:8001"], "--triton-grpc-url applies to --server remote, not --server embedded"),
    (["--triton-metrics-url", "127.0.0.1:8002"], "--triton-metrics-url applies to --server remote, not --server "
                                                 "embedded"),
    (["--backend-directory", "/nonexistent/backends"], "--backend-directory /nonexistent/backends: no such directory"),
    (["--backend-directory", "/tmp"], "--backend-directory /tmp: holds no backend library; expected "
                                      "<name>/libtriton_<name>.so"),
    (["--server", "remote", "--triton-url", "127.0.0.1:9", "--backend-directory", "/tmp"],
     "--backend-directory applies to --server embedded or container"),
    (["--window-ms", "-5"], "window_ms -5.0: expected a number >= 0"),
    (["--max-trials", "1"], "max_trials 1: expected an integer >= 3"),
    (["--profiles-dir", "/nonexistent/profiles"], "--profiles-dir /nonexistent/profiles: no such directory"),
    (["--checkpoint", "bert"], "--checkpoint 'bert': expected MODEL=PATH"),
    (["--dataset", "gpt=/tmp"], "--dataset gpt=...: unknown model; valid choices: bert, "),
    (["--loadgen", "locust"], "--loadgen 'locust': unknown load generator; valid choices: suite, perf_analyzer"),
])
def test_usage_errors(tmp_path, args, message):
    result = run_pytest(["--gpu", "tiny", "--collect-only", "-q", *args] if "--gpu" not in args
                        else ["--collect-only", "-q", *args], tmp_path, timeout=120)
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage-error exit code
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("gpu, name", [("a100", "NVIDIA A100 80GB"), ("a30", "NVIDIA A30"), ("a40", "NVIDIA A40"),
                                       ("t4", "NVIDIA T4"), ("v100", "NVIDIA V100 32GB"), ("h100", "NVIDIA H100")])
def test_gpu_profile_on_a_host_without_cuda(tmp_path, gpu, name):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA device, so the GPU profile is valid here")
    result = run_pytest(["--gpu", gpu, "--collect-only", "-q"], tmp_path, timeout=120)
    assert result.returncode == 4, result.stdout + result.stderr
    error = [line for line in result.stderr.splitlines() if line.strip()]
    assert error == [f"ERROR: --gpu {gpu}: this profile runs models on a GPU ({name}) and this host has no CUDA "
                     f"device; valid choices here: cpu, or --server remote --triton-url of a GPU host"], result.stderr


def test_plain_pytest_selects_only_the_suites_own_tests_and_markers_select_scenarios(tmp_path):
    plain = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "tests/test_offline.py", "tests/test_online.py"],
                       tmp_path, timeout=120)
    assert "no tests collected (12 deselected)" in plain.stdout, plain.stdout
    offline = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "-m", "offline", "tests/test_offline.py"],
                         tmp_path, timeout=120)
    ids = [line for line in offline.stdout.splitlines() if "::" in line]
    assert ids == [f"tests/test_offline.py::test_offline[bert-{f}-fp32-batch{b}]"
                   for f in ("onnx", "ts-trace", "ts-script") for b in (1, 4)], offline.stdout


def _one_usage_line(result) -> str:
    assert result.returncode == 4, result.stdout + result.stderr  # a usage error, not INTERNALERROR
    assert "Traceback" not in result.stderr and "INTERNALERROR" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_malformed_profile_yaml_names_file_and_line(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "broken.yaml").write_text("models:\n  bert: {size: tiny\n")
    result = run_pytest(["--gpu", "broken", "--collect-only", "-q"], tmp_path, timeout=120)
    assert "broken.yaml:3: malformed YAML" in _one_usage_line(result)


def test_a_profile_with_a_wrong_type(tmp_path):
    profile = "models: {bert: {size: tiny, formats: [onnx], precisions: [fp32], max_batch_size: \"eight\"}}\n"
    result = run_pytest(["--gpu", "tiny", "--collect-only", "-q"], tmp_path, profile=profile, timeout=120)
    assert "tiny.yaml:bert.max_batch_size 'eight': expected an integer >= 1" in _one_usage_line(result)


def test_a_spec_file_that_fails_to_import(tmp_path):
    (tmp_path / "broken_spec.py").write_text("import numpy\nraise RuntimeError('the weights are elsewhere')\n")
    result = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "--model-spec", str(tmp_path / "broken_spec.py")],
                        tmp_path, timeout=120)
    assert f"--model-spec {tmp_path / 'broken_spec.py'}: RuntimeError: the weights are elsewhere" in \
        _one_usage_line(result)


def test_unreachable_and_non_triton_urls_are_one_line_before_anything_starts(tmp_path):
    import http.server
    import socket
    import threading

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    result = run_pytest(["--gpu", "tiny", "-m", "offline", "--server", "remote", "--triton-url",
                         f"127.0.0.1:{closed}"], tmp_path, timeout=120)
    assert f"--triton-url 127.0.0.1:{closed}: not reachable within 5 s" in _one_usage_line(result)

    class NotTriton(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    web = http.server.HTTPServer(("127.0.0.1", 0), NotTriton)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        url = f"127.0.0.1:{web.server_address[1]}"
        result = run_pytest(["--gpu", "tiny", "-m", "offline", "--server", "remote", "--triton-url", url], tmp_path,
                            timeout=120)
        assert f"--triton-url {url}: answers HTTP but is not a Triton server" in _one_usage_line(result)
    finally:
        web.shutdown()


def test_the_installed_plugin_works_in_a_project_outside_this_repository(tmp_path):
    """A team's repository: no conftest, a test module importing the scenarios, a spec file elsewhere."""
    import subprocess
    import sys

    project, elsewhere = tmp_path / "team-project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    (project / "test_deployments.py").write_text(
        "from tritonsuite.plugin.scenarios import test_accuracy, test_offline  # noqa: F401\n")
    (elsewhere / "my_spec.py").write_text((ROOT / "examples" / "mlp_spec.py").read_text())
    (elsewhere / "cpu.yaml").write_text((ROOT / "examples" / "profiles" / "cpu.yaml").read_text())
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
               "-m", "offline or accuracy", "--model-spec", str(elsewhere / "my_spec.py"),  # space-separated
               "--profiles-dir", str(elsewhere), "--gpu", "cpu"]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    ids = [line.split("/")[-1] for line in result.stdout.splitlines() if "::" in line]
    assert "test_deployments.py::test_offline[mlp-onnx-fp32-batch16]" in ids, result.stdout
    assert "test_deployments.py::test_accuracy[mlp-ts-script-fp32]" in ids, result.stdout
    helped = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"], cwd=project,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Triton benchmark and conformance suite" in helped.stdout and "--triton-url" in helped.stdout


def test_a_checkpoint_that_is_not_tensors_is_refused_before_anything_starts(tmp_path):
    import pickle

    class Payload:  # a pickle that would run code when loaded without weights_only
        def __reduce__(self):
            return (print, ("pwned",))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps(Payload()))
    (tmp_path / "notes.pt").write_text("not a checkpoint at all")
    for name in ("evil.pt", "notes.pt"):
        result = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "--checkpoint", f"bert={tmp_path / name}"],
                            tmp_path, timeout=120)
        line = _one_usage_line(result)
        assert f"--checkpoint bert={tmp_path / name}: not a checkpoint torch.load(weights_only=True) reads" in line
        assert "pwned" not in result.stdout + result.stderr


def test_the_example_ci_workflow_uses_only_real_options():
    """examples/ci/tritonsuite.yml is what teams copy: each pytest option it passes exists."""
    import re

    import yaml

    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "tritonsuite.yml").read_text())
    commands = [step["run"] for step in workflow["jobs"]["gate"]["steps"] if "pytest" in step.get("run", "")]
    used = {m for c in commands for m in re.findall(r"(--[a-z][a-z-]+)", c)}
    assert {"--require-baselines", "--benchmark-json", "--junit-xml", "--compare"} <= used
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=120).stdout
    assert [o for o in sorted(used) if o not in help_text] == []


def _console_script() -> str:
    """The installed `tritonsuite` entry point beside this interpreter (what pip wrote from pyproject's scripts)."""
    from pathlib import Path

    script = Path(sys.executable).parent / "tritonsuite"
    assert script.is_file(), f"{script}: the console script is not installed (pip install -e .)"
    return str(script)


def test_the_one_command_lists_its_subcommands():
    from tritonsuite.cli import SUBCOMMANDS

    result = subprocess.run([_console_script(), "--help"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("usage: tritonsuite"), result.stdout
    listed = {line.split()[0] for line in result.stdout.splitlines() if line[:4] == "    " and line[4:5].isalpha()}
    assert listed == set(SUBCOMMANDS), result.stdout
    assert {"compare", "crosscheck", "report", "selfbench", "busyhost", "fp16-diagnose",
            "build-local-image"} <= listed, result.stdout


@pytest.mark.parametrize("subcommand", ["compare", "crosscheck", "report", "selfbench", "busyhost",
                                        "fp16-diagnose", "build-local-image"])
def test_each_subcommand_has_help(subcommand):
    result = subprocess.run([_console_script(), subcommand, "--help"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"usage: tritonsuite {subcommand}"), result.stdout


def test_no_subcommand_is_a_usage_error_naming_the_choices():
    result = subprocess.run([_console_script()], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the following arguments are required: SUBCOMMAND" in result.stderr, result.stderr
