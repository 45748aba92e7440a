"""--protocol grpc: the scenario tests over gRPC on the real embedded server (the engine's closed loop,
system shared memory offline, accuracy and accuracy under load), and perf_analyzer's -i grpc."""
import pytest

from tests.helpers import raw_rows, run_pytest

pytestmark = pytest.mark.smoke


def test_scenarios_pass_over_grpc(tmp_path):
    result = run_pytest(["--gpu", "tiny", "-m", "offline or online or accuracy", "--formats", "onnx",
                         "--protocol", "grpc", "-q", "-p", "no:warnings"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # offline b1, b4; online c1, c2; accuracy. (Open-loop points run over gRPC too, on one multiplexed channel; on
    # this shared 2-core host their schedule keeping is not reliable enough for a pass/fail test: see the docs.)
    assert "5 passed" in result.stdout, result.stdout
    rows = raw_rows(tmp_path / "reports")
    performance = [r for r in rows if r["scenario"] in ("offline", "online")]
    assert len(performance) == 4 and {r["measurement"]["protocol"] for r in performance} == {"grpc"}
    assert {r["measurement"]["shared_memory"] for r in performance if r["scenario"] == "offline"} == {"system"}
    probed = [r for r in performance if r.get("accuracy_under_load")]
    assert probed and probed[0]["accuracy_under_load"]["answered"] > 0  # probes decoded from gRPC responses
    page = (tmp_path / "reports" / "online" / "bert.md").read_text()
    assert "protocol grpc" in page  # the report says which


def test_perf_analyzer_over_grpc(tmp_path):
    from tritonsuite.load.perfanalyzer import unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(f"perf_analyzer 2.51: {reason}")
    result = run_pytest(["--gpu", "tiny", "-m", "offline", "--formats", "onnx", "--batch-sizes", "1",
                         "--loadgen", "suite,perf_analyzer", "--protocol", "grpc", "-q", "-p", "no:warnings"],
                        tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [r for r in raw_rows(tmp_path / "reports", "offline") if r["loadgen"] == "perf_analyzer"]
    assert len(rows) == 1 and rows[0]["measurement"]["protocol"] == "grpc"
    assert " -i grpc " in rows[0]["measurement"]["loadgen_command"]
