"""A team's repository with the deployments outside generators and Triton's own examples write, driven from
--model-repository on the embedded server: a batchless python model (no max_batch_size, dims [4]) in every scenario,
accuracy included, and a python model that answers NaN and inf, which fails accuracy in one line naming the output
and the counts while the rows measured before it stay."""
import json

import pytest

from tests.helpers import REPOSITORY_PROFILE as PROFILE
from tests.helpers import raw_rows, run_pytest
from tests.kinds import _write, add_onnx_bytes

pytestmark = pytest.mark.smoke


MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            y = (2 * x).astype(np.float32)
            if {broken}:
                y = np.where(x < 0, np.float32("nan"), y)  # every negative input: NaN
                y = np.where(x > 100, np.float32("inf"), y)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", y)]))
        return responses
'''


def _deployment(repo, name, batchless, broken):
    _write(repo / name, f'''
        name: "{name}"
        backend: "python"
        {"" if batchless else "max_batch_size: 4"}
        input [{{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }}]
        output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
        instance_group [{{ kind: KIND_CPU }}]
    ''', "model.py", MODEL.replace("{broken}", str(broken)))


def test_a_batchless_model_runs_every_scenario_and_a_nan_answer_fails_accuracy_naming_it(tmp_path):
    repo = tmp_path / "team_repo"
    _deployment(repo, "batchless_py", batchless=True, broken=False)
    _deployment(repo, "nan_py", batchless=False, broken=True)
    data = tmp_path / "data.json"
    steps = [[1, 2, 3, 4], [-1, 0.5, 200, 8], [0, -2, -3, 1]]
    data.write_text(json.dumps({"data": [{"INPUT1": s} for s in steps],
                                "validation_data": [{"OUTPUT0": [2 * v for v in s]} for s in steps]}))
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline or online or accuracy",
                         "--batch-sizes", "1", "--concurrency", "1", "--input-data", f"batchless_py={data}",
                         "--input-data", f"nan_py={data}", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 5 passed" in result.stdout, result.stdout
    assert "FAILED" in result.stdout and "test_accuracy[nan_py" in result.stdout, result.stdout
    line = next(x for x in result.stdout.splitlines() if "NaN and" in x)
    assert "OUTPUT0" in line and "3 NaN and 1 inf of 12 served elements the reference does not have" in line, line
    rows = raw_rows(tmp_path / "reports")
    by = {(r["deployment"], r["scenario"]): r for r in rows}
    assert by["batchless_py", "accuracy"]["status"] == "OK" and by["batchless_py", "accuracy"]["samples"] == 3
    assert by["batchless_py", "offline"]["status"] == "OK" and by["batchless_py", "online"]["status"] == "OK"
    assert by["nan_py", "offline"]["status"] == "OK"  # measured before the failure, and kept
    assert by["nan_py", "accuracy"]["status"] != "OK"


def test_a_latin1_comment_loads_a_latin1_value_is_skipped_and_a_corrupt_model_fails_alone(tmp_path):
    """Bad files of a team's repository, each in one line, none costing the others: a config.pbtxt whose only
    non-UTF-8 byte is in a comment loads and runs (Triton skips comments); one with such a byte in a value is
    listed as skipped, naming the file, line and byte; a truncated model.onnx fails its own test with the server's
    reason naming the file, and the deployment beside it passes."""
    repo = tmp_path / "team_repo"
    for name in ("latin1_comment", "latin1_value"):
        _deployment(repo, name, batchless=False, broken=False)
    config = repo / "latin1_comment" / "config.pbtxt"
    config.write_bytes(config.read_bytes().replace(b'backend: "python"', b'# caf\xe9 au lait\nbackend: "python"'))
    config = repo / "latin1_value" / "config.pbtxt"
    text = config.read_bytes().replace(b'dims: [ 4 ] }]\ninstance', b'dims: [ 4 ] label_filename: "caf\xe9.txt" }]\ninstance')
    config.write_bytes(text)
    assert b"\xe9" in text
    (repo / "truncated" / "1").mkdir(parents=True)
    whole = add_onnx_bytes()
    (repo / "truncated" / "1" / "model.onnx").write_bytes(whole[:len(whole) // 2])  # a copy cut off half way
    (repo / "truncated" / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nmax_batch_size: 4\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }]\noutput [{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }]\n')
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline", "--batch-sizes", "1",
                         "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout, result.stdout
    assert "test_offline[latin1_comment" in result.stdout and "test_offline[truncated" in result.stdout
    skipped = next(x for x in result.stdout.splitlines() if x.startswith("tritonsuite: skipped latin1_value"))
    assert "config.pbtxt: line 5: byte 0xE9 is not UTF-8, in a value" in skipped, skipped
    failure = next(x for x in result.stdout.splitlines() if "loading 'truncated'" in x)
    assert "truncated/1/model.onnx failed:Protobuf parsing failed." in failure, failure
    assert "At:" not in result.stdout.split(failure)[1].split("---")[0]  # no backend stack before the log tail
    rows = {r["deployment"]: r for r in raw_rows(tmp_path / "reports")}
    assert rows["latin1_comment"]["status"] == "OK" and rows["truncated"]["status"] == "FAILED"


def test_an_empty_model_repository_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(tmp_path / "empty"), "-m", "offline"], tmp_path,
                        profile=PROFILE)
    assert result.returncode != 0
    lines = [x for x in (result.stdout + result.stderr).splitlines() if "--model-repository" in x]
    assert lines == [f"ERROR: --model-repository {tmp_path / 'empty'}: no deployment directories (<name>/config.pbtxt)"]
