"""A team's repository with the deployments outside generators and Triton's own examples write, driven from
--model-repository on the embedded server: a batchless python model (no max_batch_size, dims [4]) in every scenario,
accuracy included, and a python model that answers NaN and inf, which fails accuracy in one line naming the output
and the counts while the rows measured before it stay."""
import json
import textwrap

import pytest

from tests.helpers import raw_rows, run_pytest

pytestmark = pytest.mark.smoke

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 6, warmup_ms: 200,
              client_bound_percent: 1000}
"""

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
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(MODEL.replace("{broken}", str(broken)))
    (repo / name / "config.pbtxt").write_text(textwrap.dedent(f'''
        name: "{name}"
        backend: "python"
        {"" if batchless else "max_batch_size: 4"}
        input [{{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }}]
        output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
        instance_group [{{ kind: KIND_CPU }}]
    '''))


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
