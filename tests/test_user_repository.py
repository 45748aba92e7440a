"""Bring your own deployment: a hand-written stock repository (ONNX + TorchScript, each with a dynamic dim, an
ensemble and a decoupled model beside them) driven from --model-repository on the real embedded server, with
perf_analyzer's input-data JSON; and two deliberately wrong cases that must fail accuracy in one line."""
import json

import pytest

from tests.helpers import ROOT, raw_rows, run_pytest
from tritonsuite.core.spec import path_digest

pytestmark = pytest.mark.smoke

FIXTURE = ROOT / "fixtures" / "user_repository"
PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
"""


def _make(tmp_path, wrong=False):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_models", FIXTURE / "make_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make(tmp_path / ("wrong_repo" if wrong else "user_repo"), wrong=wrong)


def _args(repo, *extra):
    return ["--gpu", "tiny", "--model-repository", str(repo),
            "--input-data", f"onnx_scale={FIXTURE / 'onnx_scale.json'}",
            "--input-data", f"ts_pool={FIXTURE / 'ts_pool.json'}", "-p", "no:warnings", *extra]


def test_stock_repository_runs_offline_online_and_accuracy_as_given(tmp_path):
    repo = _make(tmp_path)
    before = path_digest(repo)
    result = run_pytest(_args(repo, "-m", "offline or online or accuracy", "--batch-sizes", "1,4",
                              "--concurrency", "2"), tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 passed" in result.stdout, result.stdout  # 2 deployments x (2 offline + 1 online + 1 accuracy)
    # what cannot be driven is listed with its reason
    assert "skipped pipeline" in result.stdout and "ensemble" in result.stdout, result.stdout
    assert "skipped stream" in result.stdout, result.stdout  # decoupled is driven; this one has no model file
    assert path_digest(repo) == before  # the user's repository is never written
    for name, model_file in (("onnx_scale", "1/model.onnx"), ("ts_pool", "1/model.pt")):
        served = tmp_path / "repos" / name  # served byte for byte: config and model file
        assert (served / "config.pbtxt").read_bytes() == (repo / name / "config.pbtxt").read_bytes()
        assert (served / model_file).read_bytes() == (repo / name / model_file).read_bytes()
    rows = raw_rows(tmp_path / "reports")
    assert {r["deployment"] for r in rows} == {"onnx_scale", "ts_pool"}
    assert all(r["status"] == "OK" for r in rows), [r["reasons"] for r in rows]
    accuracy = {r["deployment"]: r for r in rows if r["scenario"] == "accuracy"}
    assert accuracy["onnx_scale"]["samples"] == 3 and accuracy["ts_pool"]["samples"] == 2
    assert accuracy["onnx_scale"]["metrics"]["validation_data y elements out of tolerance"] == 0.0
    served_by = {r["deployment"]: r["parameters"]["Backend"] for r in rows if r["scenario"] == "offline"}
    assert "onnxruntime" in served_by["onnx_scale"] and "pytorch" in served_by["ts_pool"]
    offline = [r for r in rows if r["scenario"] == "offline"]
    assert sorted((r["deployment"], r["batch"]) for r in offline) == [("onnx_scale", 1), ("onnx_scale", 4),
                                                                       ("ts_pool", 1), ("ts_pool", 4)]


def test_a_wrong_served_model_fails_accuracy_against_its_in_process_reference(tmp_path):
    """The served files are wrong (y = 2x + 1.5; max instead of mean) under the same configs; the references are
    the right files run in-process (--reference): each deployment fails in one line naming the output."""
    right, wrong = _make(tmp_path), _make(tmp_path, wrong=True)
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(wrong), "--shape", "x:5", "--shape", "INPUT__0:3,4",
                         "--reference", f"onnx_scale={right / 'onnx_scale' / '1' / 'model.onnx'}",
                         "--reference", f"ts_pool={right / 'ts_pool' / '1' / 'model.pt'}",
                         "-m", "accuracy", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode != 0, result.stdout
    assert "2 failed" in result.stdout, result.stdout
    lines = result.stdout.splitlines()
    assert any(line.strip().startswith("y: max abs error 0.5,") and "out of tolerance" in line for line in lines), \
        result.stdout
    assert any(line.strip().startswith("OUTPUT__0: max abs error") and "out of tolerance" in line for line in lines), \
        result.stdout


def test_a_validation_data_mismatch_fails_naming_the_output(tmp_path):
    repo = _make(tmp_path)
    doc = json.loads((FIXTURE / "onnx_scale.json").read_text())
    doc["validation_data"][1]["y"]["content"][2] += 0.25  # one expected element off
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "--input-data", f"onnx_scale={bad}",
                         "-m", "accuracy", "--models", "onnx_scale", "-p", "no:warnings"],
                        tmp_path, profile=PROFILE)
    assert result.returncode != 0, result.stdout
    assert "1 failed" in result.stdout, result.stdout
    # one line names the output, the count out of tolerance and where: step 1, element 2
    line = next((x.strip() for x in result.stdout.splitlines()
                 if x.strip().startswith("validation_data y elements out of tolerance = 1.0000")), "")
    assert "1/18 elements out of tolerance, worst at sample 1 index (2,)" in line, result.stdout


def test_stock_repository_in_a_container(tmp_path):
    """The same repository and input files through Triton in a Docker container (skipped, with the reason, where no
    engine answers: CI starts one with .ci/docker-up)."""
    import os

    from tritonsuite.server.container import IMAGE_ENV
    from tritonsuite.server.docker import LOCAL_IMAGE, EngineUnavailable, build_local_image, docker_client

    try:
        engine = docker_client(timeout=10)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    try:
        image = os.environ.get(IMAGE_ENV) or LOCAL_IMAGE
        try:
            engine.images.get(image)
        except Exception:
            build_local_image(engine, LOCAL_IMAGE)
    finally:
        engine.close()
    repo = _make(tmp_path)
    result = run_pytest(_args(repo, "-m", "offline or online or accuracy", "--batch-sizes", "1", "--concurrency", "2",
                              "--server", "container", "--image", image, "-q"), tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout, result.stdout
    rows = raw_rows(tmp_path / "reports")
    assert {r["deployment"] for r in rows} == {"onnx_scale", "ts_pool"} and all(r["status"] == "OK" for r in rows)
    assert all("container" in r["parameters"]["Server"] for r in rows), {r["parameters"]["Server"] for r in rows}
