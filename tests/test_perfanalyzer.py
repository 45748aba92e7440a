"""perf_analyzer 2.51 against the real embedded Triton: one identity point measured by it and by the suite's engine,
and a pytest run with both load generators writing the cross-check. Skipped, with the reason, only where
perf_analyzer cannot be obtained or started on this host."""
import contextlib

import numpy as np
import psutil

from tests.helpers import raw_rows, run_leftovers, run_pytest
from tritonsuite.core.rows import RESULT_COLUMNS
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.deploy.export import export
from tritonsuite.deploy.repository import build_deployment, deployment_name, model_config
from tritonsuite.load import perfanalyzer
from tritonsuite.load.engine import LoadPoint, measure
from tritonsuite.models import default_registry
from tritonsuite.server import EmbeddedServer

# plumbing, not this host's noise or speed: any spread of the last windows counts as stable, and no generator's CPU
# makes a point client bound
SETTINGS = MeasurementSettings(window_ms=500, stability_percentage=100, max_trials=6, warmup_ms=200,
                               client_bound_percent=1000)


def _perf_analyzers() -> list[int]:
    found = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # gone, or a zombie another test's orphan left: not perf_analyzer
            if "perf_analyzer" in " ".join(p.cmdline()):
                found.append(p.pid)
    return found


def test_identity_point_by_perf_analyzer_and_by_the_engine(tmp_path, pa):
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path / "cache")
    name = deployment_name(spec, "onnx", "fp32", "offline")
    inputs = spec.example_inputs(4, 0)
    point = LoadPoint(4, 1, shared_memory=True)
    with EmbeddedServer(tmp_path / "repo", tmp_path / "logs", auto_complete=False) as server:
        server.load(build_deployment(tmp_path / "repo", model_config(name, spec, artifact.format, max_batch_size=8,
                                                                     intra_op_threads=1), artifact))
        theirs = perfanalyzer.measure_with_perf_analyzer(server, name, inputs, spec.outputs, point, SETTINGS, pa)
        assert not _perf_analyzers()  # it exited (or was killed) before the measurement returned
        ours = measure(server, name, inputs, spec.outputs, point, SETTINGS, description=server.model_description(name))
        stats = server.client().get_inference_statistics(name)["model_stats"][0]
    assert theirs.status == "OK", theirs.reasons
    r, m = theirs.result, theirs.meta
    assert tuple(r) == RESULT_COLUMNS and r["Batch"] == 4 and r["Concurrency"] == 1
    assert r["Inferences/Second"] > 0 and 0 < r["p50 latency"] <= r["p99 latency"]
    assert m["loadgen"] == "perf_analyzer 2.51" and m["shared_memory"] == "system"
    assert "--shared-memory system" in m["loadgen_command"] and "-b 4" in m["loadgen_command"]
    # the server saw perf_analyzer's requests at batch 4: every measured one and the warm-up windows
    assert m["server_success_delta"] >= m["measured_requests"] > 0 and m["server_fail_delta"] == 0
    assert stats["inference_stats"]["success"]["count"] * 4 == stats["inference_count"]
    # every measured request's latency, but when perf_analyzer cut its export short, as it does now and then with
    # shared memory (the next test makes it happen): then the first ones, and the row says so
    assert (0 if theirs.latencies_s is None else len(theirs.latencies_s)) == m["exported_requests"]
    if "latency_export" in m:
        assert 0 <= m["exported_requests"] < m["measured_requests"]
    else:
        assert m["exported_requests"] == m["measured_requests"]
    # how far the two generators agree is this host's figure, for the report's cross-check page (the next test), not
    # a verdict: both measured the same deployment at the same point
    assert ours.result["Batch"] == 4 and ours.result["Concurrency"] == 1 and ours.result["Inferences/Second"] > 0


def test_a_value_perf_analyzer_cannot_write_cuts_its_export_and_the_row_says_so(tmp_path, pa):
    """perf_analyzer 2.51's export holds each request's input and output values, and its JSON writer stops at the
    first one that is not finite: a NaN in the identity model's input cuts the file before its first record. The
    point keeps perf_analyzer's figures and its own request count; the row says how many latencies it holds."""
    spec = default_registry().get("identity", "tiny")
    artifact = export(spec, "onnx", "fp32", tmp_path / "cache")
    name = deployment_name(spec, "onnx", "fp32", "offline")
    inputs = {k: np.full_like(v, np.nan) for k, v in spec.example_inputs(2, 0).items()}
    with EmbeddedServer(tmp_path / "repo", tmp_path / "logs", auto_complete=False) as server:
        server.load(build_deployment(tmp_path / "repo", model_config(name, spec, artifact.format, max_batch_size=8,
                                                                     intra_op_threads=1), artifact))
        theirs = perfanalyzer.measure_with_perf_analyzer(server, name, inputs, spec.outputs, LoadPoint(2, 1),
                                                         SETTINGS, pa)
    m = theirs.meta
    assert theirs.status == "OK", theirs.reasons
    assert theirs.result["Inferences/Second"] > 0 and m["server_success_delta"] >= m["measured_requests"] > 0
    assert m["exported_requests"] == 0 and theirs.latencies_s is None and "latency_samples_ms" not in m
    assert m["latency_export"] == (f"its export stops at byte 0, mid-record: the latencies of 0 of the "
                                   f"{m['measured_requests']} requests, the first in time (docs/perf-analyzer.md)")


def test_pytest_run_with_both_load_generators_writes_the_crosscheck(tmp_path, pa):
    result = run_pytest(["--gpu", "tiny", "-m", "offline or online", "-q", "-p", "no:warnings", "--formats", "onnx",
                         "--batch-sizes", "4", "--concurrency", "2", "--loadgen", "suite,perf_analyzer"], tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "4 passed" in out, out
    reports = tmp_path / "reports"
    rows = [r for r in raw_rows(reports) if r["scenario"] in ("offline", "online")]
    assert sorted((r["scenario"], r["loadgen"]) for r in rows) == [
        ("offline", "perf_analyzer"), ("offline", "suite"), ("online", "perf_analyzer"), ("online", "suite")]
    for row in rows:
        assert row["status"] == "OK" and row["result"]["Inferences/Second"] > 0
        assert row["measurement"]["loadgen"] == ("perf_analyzer 2.51" if row["loadgen"] == "perf_analyzer"
                                                 else "tritonsuite engine")
    offline_pa = next(r for r in rows if r["scenario"] == "offline" and r["loadgen"] == "perf_analyzer")
    assert offline_pa["measurement"]["shared_memory"] == "system" and offline_pa["batch"] == 4
    page = (reports / "crosscheck.md").read_text()
    assert "2 points measured by both load generators" in page
    assert "bert_tiny_onnx_fp32_offline" in page and "bert_tiny_onnx_fp32_online" in page
    assert "## bert_tiny_onnx_fp32_offline · perf_analyzer 2.51" in (reports / "offline" / "bert.md").read_text()
    assert not run_leftovers(reports)
