"""A repository of sequence, decoupled and BLS deployments (written by the test, python backend, run for real by the
wheel's python backend) driven from --model-repository on the embedded server: offline, online and accuracy, with
perf_analyzer's sequence and BLS options; the rows carry the kinds' columns and evidence."""
import json

import pytest

from tests.helpers import REPOSITORY_PROFILE as PROFILE
from tests.helpers import raw_rows, run_pytest
from tests.kinds import all_kinds

pytestmark = pytest.mark.smoke



def _data(tmp_path):
    files = {
        "seq": {"data": [{"INPUT": [v]} for v in (3, 1, 4, 1, 5, 9, 2)]},
        "stream_n": {"data": [{"COUNT": [c], "DATA": [c, 1.5, -2, 0.25]} for c in (3, 5, 1, 4)]},
        "bls_add": {"data": [{"X": [1, 2, 3, 4]}, {"X": [0, -1, 0.5, 8]}],
                    "validation_data": [{"Y": [3, 5, 7, 9]}, {"Y": [1, -1, 2, 17]}]},
    }
    paths = {}
    for name, doc in files.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    paths["stream_reference"] = tmp_path / "stream_reference.py"  # the user's reference of the decoupled model
    paths["stream_reference"].write_text(STREAM_REFERENCE)
    return paths


STREAM_REFERENCE = """
import numpy as np


def reference(inputs):
    return [{"OUT": inputs["DATA"] * (i + 1), "INDEX": np.full((1, 1), i, np.int32)}
            for i in range(int(inputs["COUNT"][0, 0]))]
"""


def test_sequence_decoupled_and_bls_deployments_run_end_to_end(tmp_path):
    repo = all_kinds(tmp_path / "kinds")
    data = _data(tmp_path)
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline or online or accuracy",
                         "--batch-sizes", "1", "--concurrency", "2",
                         "--input-data", f"seq_direct={data['seq']}", "--input-data", f"seq_oldest={data['seq']}",
                         "--input-data", f"stream_n={data['stream_n']}", "--input-data", f"bls_add={data['bls_add']}",
                         "--sequence-length", "5", "--sequence-length-variation", "40", "--sequence-id-range", "10:60",
                         "--bls-composing-models", "bls_add=add_onnx",
                         "--reference", f"stream_n={data['stream_reference']}", "-p", "no:warnings"], tmp_path,
                        profile=PROFILE, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "15 passed" in result.stdout, result.stdout  # 5 deployments x (offline b1, online c2, accuracy)
    rows = raw_rows(tmp_path / "reports")
    assert all(r["status"] == "OK" for r in rows if r["scenario"] == "accuracy"), [r["reasons"] for r in rows]
    perf = {(r["deployment"], r["scenario"]): r for r in rows if r["scenario"] in ("offline", "online")}
    for name in ("seq_direct", "seq_oldest"):
        for scenario in ("offline", "online"):
            seq = perf[name, scenario]["measurement"]["sequences"]
            assert seq["sequence_length"] == 5 and seq["sequence_id_range"] == [10, 60]
            assert seq["sequences_started"] == seq["sequences_ended"] > 0
        assert perf[name, "offline"]["measurement"]["shared_memory"] == "system"  # flags travel beside shm refs
    stream = perf["stream_n", "online"]
    assert stream["measurement"]["protocol"] == "grpc (bidirectional stream)"
    assert stream["result"]["Responses/Request"] == 3.0  # the first step of the data: COUNT 3
    assert stream["result"]["p50 time to first response"] > 0 and stream["measurement"]["stream"]["responses"] > 0
    assert any("not through shared memory" in r for r in perf["stream_n", "offline"]["reasons"])
    accuracy = {r["deployment"]: r for r in rows if r["scenario"] == "accuracy"}
    seq_metric = "sequences whose outputs interleaved under load differ from the sequence sent alone"
    assert accuracy["seq_oldest"]["metrics"][seq_metric] == 0.0 and accuracy["seq_oldest"]["samples"] >= 4
    assert accuracy["stream_n"]["metrics"]["requests whose responses under load differ from the request sent "
                                           "alone"] == 0.0
    assert accuracy["stream_n"]["metrics"]["requests whose responses differ from the reference's"] == 0.0
    assert accuracy["stream_n"]["samples"] == 3 + 5 + 1 + 4  # every response of the 4 requests compared
    assert accuracy["bls_add"]["metrics"]["validation_data Y elements out of tolerance"] == 0.0
    assert accuracy["bls_add"]["reference"] == "validation_data"
    page = (tmp_path / "reports" / "online" / "stream_n.md").read_text()  # the stream columns in the table
    assert "p50 time to first response (ms)" in page and "Responses/Request |" in page, page
    bls = perf["bls_add", "online"]["measurement"]["composing"]["add_onnx"]  # the callee's time, same windows
    assert abs(bls["per request"] - 1.0) < 0.05 and bls["requests"] > 0 and bls["Server Compute Infer"] > 0
    bls_page = (tmp_path / "reports" / "online" / "bls_add.md").read_text()
    assert "| Composing model |" in bls_page.replace("  ", "") or "Composing model" in bls_page
    assert "one live sequence per slot" in (tmp_path / "reports" / "offline" / "seq_direct.md").read_text()
    parameters = {name: {line.split("|")[1].strip(): line.split("|")[2].strip() for line in
                         (tmp_path / "reports" / "online" / f"{name}.md").read_text().splitlines()
                         if line.startswith("| ") and line.count("|") == 3} for name in ("seq_oldest", "bls_add")}
    assert parameters["seq_oldest"]["Deployment kind"] == "sequence (oldest), python"
    assert parameters["bls_add"]["Deployment kind"] == "BLS" and parameters["bls_add"]["Composing models"] == "add_onnx"
