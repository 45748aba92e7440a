"""Deployments as teams ship them, from --model-repository on the real embedded server: a label file and a
``specific`` version policy, ``latest {num_versions: 2}`` driven per version, batchless, BYTES (perf_analyzer's JSON
strings, with validation_data), every numeric dtype and BOOL (BF16 through the pytorch backend is refused at load, as r24.10 refuses it); the ensembles
with their steps; the conformance checks that apply to each (fixtures/kinds_repository/make_repository.py writes
the repository)."""
import json

import pytest

from tests.helpers import kinds_fixture, raw_rows, run_pytest
from tritonsuite.core.spec import path_digest

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
"""
STRINGS = {"data": [{"text": ["ab", "cd"]}, {"text": {"content": ["x", "yz"], "shape": [2]}}],
           "validation_data": [{"shout": ["ab!", "cd!"]}, {"shout": ["x!", "yz!"]}]}


def make_repository(dest):
    return kinds_fixture().make(dest)


def test_versions_and_kinds_are_read_from_the_description(tmp_path):
    from tritonsuite.deploy import userrepo, userserve
    from tritonsuite.profiles import repooptions

    repo = make_repository(tmp_path / "repo")
    found, _ = userrepo.read_repository(repo)
    by_name = {d.name: d for d in found}
    assert by_name["labels_specific"].versions == ("1",)  # specific [1]: version 2 is on disk, not served
    assert by_name["latest_two"].versions == ("2", "3")
    assert by_name["batchless"].max_batch_size == 0
    assert [t.dtype for t in by_name["strings"].inputs] == ["bytes"]
    specs, profiles, _ = repooptions.user_models(repo, {"strings": "zero"}, only=("latest_two:2", "latest_two:3",
                                                                               "batchless"))
    assert sorted(s.name for s in specs) == ["batchless", "latest_two:2", "latest_two:3"]
    assert profiles["batchless"].offline.batch_sizes == (1,) and profiles["batchless"].max_batch_size == 0
    served = userserve.serve(next(s for s in specs if s.name == "latest_two:2"), tmp_path / "served")[
        str(repo / "latest_two")]
    assert sorted(p.name for p in served.iterdir()) == ["2", "3", "config.pbtxt"]  # version 1 left out
    labels = userrepo.read_repository(repo)[0]
    copy = userserve.serve(userrepo.user_spec(next(d for d in labels if d.name == "labels_specific"),
                                              _zero_data(), {}), tmp_path / "served")[str(repo / "labels_specific")]
    assert sorted(p.name for p in copy.iterdir()) == ["1", "config.pbtxt", "labels.txt"]


def _zero_data():
    from tritonsuite.core.inputdata import InputData

    import numpy as np

    return InputData("zero", ({"x": np.zeros(4, np.float32)},))


@pytest.mark.smoke
def test_labels_policies_batchless_strings_and_dtypes_run_offline_online_and_accuracy(tmp_path):
    repo = make_repository(tmp_path / "repo")
    before = path_digest(repo)
    strings = tmp_path / "strings.json"
    strings.write_text(json.dumps(STRINGS))
    # not bf16: pytorch_backend r24.10 refuses BF16 tensors at load, and so does the stand-in (test_stock_strict)
    # a bare name runs every version its policy serves: latest_two is latest_two:2 and latest_two:3
    models = "labels_specific,latest_two,batchless,strings,dtypes,no_config"
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "--input-data", f"strings={strings}",
                         "-m", "offline or online or accuracy", "--models", models, "--batch-sizes", "1,2",
                         "--concurrency", "2", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    # 7 deployments x (offline at 1 and 2, batchless at 1 alone; online at 2; accuracy)
    assert "27 passed" in result.stdout, result.stdout[-3000:]
    assert path_digest(repo) == before  # the user's repository is never written
    assert "skipped ts_no_config" in result.stdout and "does not auto-complete" in result.stdout, result.stdout[-3000:]
    served = tmp_path / "repos"
    assert (served / "labels_specific" / "labels.txt").read_bytes() == (repo / "labels_specific" / "labels.txt"
                                                                          ).read_bytes()
    assert not (served / "labels_specific" / "2").exists() and not (served / "latest_two" / "1").exists()
    rows = raw_rows(tmp_path / "reports")
    assert all(r["status"] == "OK" for r in rows), [(r["deployment"], r["reasons"]) for r in rows if r["status"] != "OK"]
    assert {r["deployment"] for r in rows} == set(models.replace("latest_two", "latest_two:2,latest_two:3").split(","))
    accuracy = {r["deployment"]: r for r in rows if r["scenario"] == "accuracy"}
    # each version answers as its own file: y = 2x and y = 3x, compared with that version's model run in-process
    assert accuracy["latest_two:2"]["metrics"]["y max abs error"] == 0.0
    assert accuracy["strings"]["samples"] == 2
    assert accuracy["strings"]["metrics"]["validation_data shout elements out of tolerance"] == 0.0
    assert {k for k in accuracy["dtypes"]["metrics"] if k.endswith("max abs error")} >= {
        f"out_{d} max abs error" for d in ("int8", "uint64", "float16", "float64", "bool")}
    offline = sorted((r["deployment"], r["batch"]) for r in rows if r["scenario"] == "offline")
    assert ("batchless", 1) in offline and ("batchless", 2) not in offline
    # no config.pbtxt: auto-completed by the server (max batch size 4, dynamic batching), read back and driven
    completed = [r for r in rows if r["deployment"] == "no_config"]
    assert all("auto-completed" in r["parameters"]["Configuration"] for r in completed)
    assert accuracy["no_config"]["metrics"]["y max abs error"] == 0.0
    assert not (repo / "no_config" / "config.pbtxt").exists() and not (served / "no_config" / "config.pbtxt").exists()
    strings_offline = [r for r in rows if r["scenario"] == "offline" and r["deployment"] == "strings"]
    assert all(any("BYTES" in why for why in r["reasons"]) for r in strings_offline), strings_offline


def test_every_numeric_dtype_by_dlpack_as_under_numpy_2(tmp_path, monkeypatch):
    """The hand-over numpy 2 hosts take (nvidia-pytriton's stub returns numpy 2 arrays empty): every tensor but
    BYTES by DLPack, forced here under numpy 1. Each dtype, BOOL, batchless and an input passed straight
    through come back exactly as the model run in-process gives them (BF16: the stock pytorch backend r24.10 and
    the stand-in refuse it at load)."""
    from tritonsuite.deploy.backends.standin import BY_DLPACK_ENV

    monkeypatch.setenv(BY_DLPACK_ENV, "1")
    repo = make_repository(tmp_path / "repo")
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "accuracy", "--models",
                         "dtypes,batchless,no_config", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 0 and "3 passed" in result.stdout, result.stdout[-5000:] + result.stderr[-3000:]
    accuracy = {r["deployment"]: r for r in raw_rows(tmp_path / "reports", "accuracy")}
    errors = {k: v for k, v in accuracy["dtypes"]["metrics"].items() if k.endswith("max abs error")}
    assert {f"out_{d} max abs error" for d in ("int8", "uint64", "float16", "float64", "bool")} <= set(errors)
    assert set(errors.values()) == {0.0}, errors
    assert all(r["samples"] > 0 for r in accuracy.values())


@pytest.mark.smoke
def test_conformance_checks_that_apply_to_each_kind(tmp_path):
    """-m conformance on batchless, ensembles (nested too, judged at their steps), BYTES and an auto-completed
    deployment: no check fails; identity answers each kind; what does not apply is skipped with its reason."""
    repo = make_repository(tmp_path / "repo")
    models = "batchless,pipeline,nested,strings,no_config"
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "conformance", "--models", models,
                         "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    rows = {(r["deployment"], r["check"]): r for r in raw_rows(tmp_path / "reports", "conformance")}
    assert not [k for k, r in rows.items() if r["verdict"] == "fail"]
    assert all(rows[(d, "identity")]["verdict"] == "pass" for d in models.split(","))
    assert rows[("batchless", "batching")]["reasons"] == ["max_batch_size 0: no batch dimension, nothing to batch"]
    assert rows[("batchless", "reload")]["verdict"] == "pass"  # requests of the unbatched shape throughout
    # an ensemble is judged at its steps (the nested pipeline's resolved), each against its own configuration
    nested = rows[("nested", "batching")]
    assert [part.split(":")[0] for part in nested["declared"].split("; ")] == ["scale", "pool"], nested["declared"]
    assert set(nested["evidence"]["models"]) == {"scale", "pool"}
    assert rows[("no_config", "reload")]["evidence"]["changed_config"].startswith("not tried: no config.pbtxt")
    assert not (tmp_path / "repos" / "no_config" / "config.pbtxt").exists()


@pytest.mark.smoke
def test_a_wrong_string_fails_validation_naming_the_output(tmp_path):
    repo = make_repository(tmp_path / "repo")
    doc = json.loads(json.dumps(STRINGS))
    doc["validation_data"][1]["shout"][1] = "yz?"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "--input-data", f"strings={bad}",
                         "-m", "accuracy", "--models", "strings", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode != 0 and "1 failed" in result.stdout, result.stdout[-3000:]
    assert any(x.strip().startswith("validation_data shout elements out of tolerance = 1.0000")
               for x in result.stdout.splitlines()), result.stdout[-3000:]


@pytest.mark.smoke
def test_ensembles_and_a_nested_one_run_with_their_steps(tmp_path):
    repo = make_repository(tmp_path / "repo")
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline or online or accuracy",
                         "--models", "pipeline,nested,mixed", "--batch-sizes", "2", "--concurrency", "2",
                         "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    assert "9 passed" in result.stdout, result.stdout[-3000:]
    rows = raw_rows(tmp_path / "reports")
    assert all(r["status"] == "OK" for r in rows), [(r["deployment"], r["reasons"]) for r in rows]
    steps = {"pipeline": {"scale", "pool"}, "nested": {"pipeline", "scale", "pool"}, "mixed": {"scale", "ts_tail"}}
    for row in (r for r in rows if r["scenario"] in ("offline", "online")):
        found = row["measurement"]["composing"]
        assert set(found) == steps[row["deployment"]], found
        assert all(f["requests"] > 0 and f["Server Compute Infer"] > 0 for f in found.values()), found
        if row["deployment"] == "nested":  # scale runs twice per request: inside pipeline and as a step of its own
            # (the counters are read while requests are in flight: at each of the pool's two edges a request in
            # flight may have run either scale and not yet finished pipeline, so up to 2 x 2 per request in flight)
            assert abs(found["scale"]["requests"] - 2 * found["pipeline"]["requests"]) <= 4 * row["concurrency"], found
    accuracy = {r["deployment"]: r for r in rows if r["scenario"] == "accuracy"}
    # against the steps composed in-process (onnxruntime, step by step through the maps)
    assert accuracy["nested"]["metrics"]["SCORE max abs error"] < 1e-5
    assert accuracy["nested"]["metrics"]["SCALED max abs error"] < 1e-5
    assert accuracy["mixed"]["metrics"]["PAIR max abs error"] < 1e-5  # onnx -> TorchScript, each by its session
    page = (tmp_path / "reports" / "online" / "nested.md").read_text()
    assert "Per composing model" in page and " pool |" in page, page
    assert "(nested/steps.png)" in page and (tmp_path / "reports" / "online" / "nested" / "steps.png").is_file()


@pytest.mark.smoke
def test_perf_analyzer_drives_the_kinds_with_the_same_tensors(tmp_path, pa):
    """perf_analyzer 2.51 (``--loadgen perf_analyzer``) on the same deployments: strings in its JSON, a version
    (``-x``), batchless (``-b 1``), an ensemble whose rows carry perf_analyzer's own per-step figures."""
    repo = make_repository(tmp_path / "repo")
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline or online",
                         "--models", "strings,latest_two:2,batchless,nested", "--loadgen", "perf_analyzer",
                         "--batch-sizes", "1", "--concurrency", "2", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    rows = raw_rows(tmp_path / "reports")
    assert len(rows) == 8 and all(r["status"] == "OK" and r["loadgen"] == "perf_analyzer" for r in rows), \
        [(r["deployment"], r["reasons"]) for r in rows]
    assert all(" -x 2 " in r["measurement"]["loadgen_command"] for r in rows if r["deployment"] == "latest_two:2")
    nested = [r["measurement"]["composing"] for r in rows if r["deployment"] == "nested"]
    assert all(set(c) == {"pipeline", "scale", "pool"} and c["scale"]["requests"] > 0 for c in nested), nested


def test_naming_an_undrivable_deployment_says_why(tmp_path):
    repo = make_repository(tmp_path / "repo")
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m", "offline", "--models",
                         "ts_no_config", "-p", "no:warnings"], tmp_path, profile=PROFILE)
    assert result.returncode != 0
    out = result.stdout + result.stderr  # deploy.repooptions.check_models: before anything starts
    assert f"--models ts_no_config: deployment ts_no_config in {repo} cannot be driven: no config.pbtxt: Triton's " \
           "pytorch backend does not auto-complete" in out, out
