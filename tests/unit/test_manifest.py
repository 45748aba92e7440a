"""The provenance manifest: what a run records about itself, and the header line every report carries."""
from __future__ import annotations

from pathlib import Path

from tritonsuite.core.rows import Row
from tritonsuite.core.store import differences, read_manifest, write_manifest
from tritonsuite.profiles import load_profile
from tritonsuite.report.manifest import build_manifest, header_line

ROOT = Path(__file__).resolve().parents[2]


def test_manifest_records_revision_command_profile_deployments_versions_and_host(tmp_path):
    repo = tmp_path / "repos"
    (repo / "dep_offline").mkdir(parents=True)
    (repo / "dep_offline" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\n')
    rows = [Row(scenario="offline", model="m", deployment="dep_offline", run_id="r1",
                parameters={"Artifact key": "0123456789abcdef", "Platform": "onnxruntime_onnx",
                            "Backend": "onnxruntime (python-based stand-in, embedded)",
                            "Server": "tritonserver 2.51.0 (embedded)"})]
    profile = load_profile("cpu")
    manifest = build_manifest(run_id="r1", profile=profile, rows=rows, repository_dir=repo, source_dir=ROOT,
                              command=["pytest", "-m", "offline", "--models", "bert"])
    assert manifest["command"] == "pytest -m offline --models bert"
    assert len(manifest["suite"]["git_revision"]) == 40 and isinstance(manifest["suite"]["dirty"], bool)
    assert manifest["profile"]["name"] == "cpu" and len(manifest["profile"]["sha256"]) == 64
    dep = manifest["deployments"]["dep_offline"]
    assert dep["artifact_key"] == "0123456789abcdef" and len(dep["config_sha256"]) == 64
    assert manifest["server"] == "tritonserver 2.51.0 (embedded)"
    assert manifest["backends"] == ["onnxruntime (python-based stand-in, embedded)"]
    assert {"torch", "tritonclient", "onnxruntime", "nvidia-pytriton"} <= set(manifest["versions"])
    assert manifest["host"]["cores"] >= 1 and manifest["measurement"]["window_ms"] > 0
    # a different profile hashes differently; the same one the same
    again = build_manifest(run_id="r1", profile=profile, rows=rows, repository_dir=repo, source_dir=ROOT)
    assert again["profile"]["sha256"] == manifest["profile"]["sha256"]
    other = build_manifest(run_id="r1", profile=load_profile("a100"), rows=rows, repository_dir=repo, source_dir=ROOT)
    assert other["profile"]["sha256"] != manifest["profile"]["sha256"]
    assert "profile.sha256" in " ".join(differences(manifest, other))

    reports = tmp_path / "reports"
    paths = write_manifest(reports, manifest)
    assert [p.name for p in paths] == ["manifest-r1.json", "manifest.json"]
    assert read_manifest(reports, "r1") == manifest
    line = header_line(manifest)
    assert line.startswith("Run `r1`: tritonsuite") and "git " in line and "`pytest -m offline --models bert`" in line


def test_outside_a_git_checkout_the_revision_is_unknown(tmp_path):
    manifest = build_manifest(run_id="r", profile=load_profile("cpu"), rows=[], repository_dir=tmp_path,
                              source_dir=tmp_path)
    assert manifest["suite"]["git_revision"] is None and "no git revision" in header_line(manifest)
