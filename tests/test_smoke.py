"""End to end as a user runs it: tiny BERT exported, served by the embedded Triton, checked, measured, reported."""

import pytest

from tests.helpers import raw_rows, run_leftovers, run_pytest

pytestmark = pytest.mark.smoke


def test_offline_online_accuracy_end_to_end(tmp_path):
    result = run_pytest(["--gpu", "tiny", "-m", "offline or online or accuracy", "-q", "-rs", "-p", "no:warnings",
                         "--formats", "onnx,ts-trace,ts-script", f"--junitxml={tmp_path / 'junit.xml'}"], tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    # ts-script cannot compile transformers' BERT: skipped with the reason, every other case passed
    assert "10 passed, 5 skipped" in out, out
    assert "torch.jit.script cannot compile bert:tiny" in out
    assert " window 1 of " not in result.stdout  # points report their progress at -v only (tests/test_progress.py)

    reports = tmp_path / "reports"
    rows = raw_rows(reports)
    perf = [r for r in rows if r["scenario"] in ("offline", "online")]
    assert len(perf) == 8 and all(r["status"] == "OK" and r["valid"] for r in perf)
    for r in perf:
        m = r["measurement"]
        assert m["requests_sent"] == m["server_success_delta"] > 0
        assert r["result"]["Inferences/Second"] > 0 and r["result"]["p99 latency"] >= r["result"]["p50 latency"]
    assert {r["measurement"]["shared_memory"] for r in perf if r["scenario"] == "offline"} == {"system"}
    accuracy = [r for r in rows if r["scenario"] == "accuracy"]
    assert len(accuracy) == 2 and all(r["metrics"]["f1_vs_reference"] == 100.0 for r in accuracy)

    offline_md = (reports / "offline" / "bert.md").read_text()
    assert "| Parameter Name" in offline_md and "bert_tiny_onnx_fp32_offline" in offline_md
    assert "|   Batch |   Concurrency |   Inferences/Second |   Client Send (ms) |" in offline_md
    for png in ("offline/bert/throughput_vs_batch.png", "offline/bert/latency_vs_batch.png",
                "online/bert/latency_vs_concurrency.png"):
        assert (reports / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert (reports / "accuracy" / "bert.md").is_file()
    assert "## Offline: best throughput per deployment" in (reports / "summary.md").read_text()
    # each scenario test carries its row's figures as JUnit properties, for CI dashboards
    import xml.etree.ElementTree as ET

    cases = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    offline = cases["test_offline[bert-onnx-fp32-batch4]"]
    assert float(offline["Inferences/Second"]) > 0 and offline["status"] == "OK" and offline["Batch"] == "4"
    assert cases["test_accuracy[bert-onnx-fp32]"]["f1_vs_reference"] == "100.0"
    assert list((reports / "logs").glob("tritonserver-*.log"))
    assert not run_leftovers(reports)


def test_two_xdist_workers_one_report(tmp_path):
    """pytest -n 2: each worker its own embedded server (own ports, own regions), one run id, one report."""
    result = run_pytest(["--gpu", "tiny", "-m", "offline or accuracy", "-q", "-p", "no:warnings", "-n", "2",
                         "--formats", "onnx,ts-trace"], tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "6 passed" in out, out
    reports = tmp_path / "reports"
    raw = sorted(f.name for f in (reports / "raw").glob("*.jsonl"))
    workers = {name.rsplit("-", 1)[1].removesuffix(".jsonl") for name in raw}
    assert workers == {"gw0", "gw1"}, raw  # both workers measured
    rows = raw_rows(reports)
    assert len({r["run_id"] for r in rows}) == 1 and len(rows) == 6
    offline_md = (reports / "offline" / "bert.md").read_text()  # one page, written once by the controller
    assert "bert_tiny_onnx_fp32_offline" in offline_md and "bert_tiny_ts_trace_fp32_offline" in offline_md
    assert len(list((reports / "logs").glob("tritonserver-*.log"))) == 2  # two servers
    assert not run_leftovers(reports)
