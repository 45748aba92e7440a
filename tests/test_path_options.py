"""Path-taking options that name the wrong kind of thing end in one usage line naming the file and what was
expected: no INTERNALERROR, no traceback at fixture setup (run as a user would, in a subprocess)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, raw_rows, run_pytest


def _cases(tmp_path):
    notes = tmp_path / "notes.yaml"
    notes.write_text("models: [bert]\n")
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    weights = tmp_path / "weights.pt"
    weights.write_text("not a checkpoint\n")
    return [
        (["--model-spec", str(notes)], f"--model-spec {notes}: not a Python file; expected a .py file defining SPECS"),
        ([f"--reports-dir={afile}"], f"--reports-dir {afile}: is a file; expected a directory"),
        ([f"--repository-dir={afile / 'repos'}"], f"--repository-dir {afile / 'repos'}: lies under the file {afile}"),
        (["--baselines-dir", str(afile)], f"--baselines-dir {afile}: is a file; expected a directory"),
        (["--profiles-dir", str(afile)], f"--profiles-dir {afile}: no such directory"),  # a later one wins
        (["--checkpoint", f"identity={weights}"], f"--checkpoint identity={weights}: not a checkpoint"),
        (["--dataset", f"identity={tmp_path / 'missing.csv'}"], f"{tmp_path / 'missing.csv'} does not exist"),
        (["--compare", str(afile)], f"--compare {afile}: {afile}:1: not a tritonsuite row"),
    ]


@pytest.mark.parametrize("index", range(8))
def test_a_bad_path_option_is_one_usage_line(tmp_path, index):
    args, expected = _cases(tmp_path)[index]
    result = run_pytest(["-m", "offline", "--collect-only", "-q", *args], tmp_path, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 4, out  # pytest's usage error
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and expected in errors[0], out
    assert "Traceback" not in out and "INTERNALERROR" not in out


# --- nothing lands in a directory handed in, whatever the option syntax (issue 29) ---------------------------------

FIXTURE = ROOT / "fixtures" / "user_repository"
PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200}
"""
PROJECT_INI = '[tool.pytest.ini_options]\ntestpaths = ["checks"]\n'  # a user's own project, its own ini file
PROJECT_TEST = "from tritonsuite.plugin.scenarios import test_accuracy, test_offline, test_online  # noqa: F401\n"


def _snapshot(directory: Path) -> dict:
    """Every entry under ``directory``: a directory's name, a file's bytes (listing and content at once)."""
    return {str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else "<dir>")
            for p in sorted(directory.rglob("*"))}


@pytest.fixture
def apart():
    """A directory for the user's own directories that shares no directory but / with pytest's tmp_path (where
    the project runs from): there, pytest rooted a run at the directory an option named."""
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="tritonsuite-user-", dir="/var/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _user_dirs(tmp_path: Path, apart: Path | None = None) -> tuple[Path, Path, Path]:
    """A hand-made repository (the fixture's, copied) and a profiles directory (in ``apart`` when given), and a
    project that runs the suite (its own ini file and a test module collecting the scenarios)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_models", FIXTURE / "make_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    repo = module.make((apart or tmp_path) / "team_repo")
    profiles = (apart or tmp_path) / "team_profiles"
    profiles.mkdir()
    (profiles / "team.yaml").write_text(PROFILE)
    project = tmp_path / "project"
    (project / "checks").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PROJECT_INI)
    (project / "checks" / "test_deployments.py").write_text(PROJECT_TEST)
    return repo, profiles, project


def _run_in(cwd: Path, args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """pytest as a user types it in ``cwd``: no --rootdir, no --reports-dir, no --repository-dir."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def _repository_args(repo: Path, profiles: Path, words: tuple) -> list[str]:
    """The run's options, those in ``words`` as two words (``--opt value``), the others glued (``--opt=value``)."""
    pairs = [("--gpu", "team"), ("--profiles-dir", str(profiles)), ("--model-repository", str(repo)),
             ("--input-data", f"onnx_scale={FIXTURE / 'onnx_scale.json'}"),
             ("--input-data", f"ts_pool={FIXTURE / 'ts_pool.json'}"), ("--batch-sizes", "1")]
    return [w for option, value in pairs for w in ([option, value] if option in words else [f"{option}={value}"])]


@pytest.mark.smoke
@pytest.mark.parametrize("words", [("--model-repository",), ("--profiles-dir",), ()],
                         ids=["model-repository-as-two-words", "profiles-dir-as-two-words", "all-glued"])
def test_a_repository_and_profiles_dir_handed_in_are_left_exactly_as_they_were(tmp_path, apart, words):
    """`--model-repository DIR` (or `--profiles-dir DIR`) as two words made DIR pytest's rootdir, and the suite's
    reports/ and model_repos/ (and pytest's cache) landed inside the team's repository. Each syntax roots the run at
    the user's project (its ini file read) and leaves the user's directories with every byte and no new entry; the
    first, the syntax that went wrong, is a real short run whose outputs go under the project and which runs only
    the repository's deployments (the others collect: where outputs go follows from the rootdir alone)."""
    import os.path

    full = words == ("--model-repository",)
    repo, profiles, project = _user_dirs(tmp_path, apart)
    assert os.path.commonpath([repo, project]) == os.sep  # else pytest's rootdir was a common ancestor, not DIR
    before = {d: _snapshot(d) for d in (repo, profiles)}
    result = _run_in(project, ["-m", "offline or accuracy", "-p", "no:warnings", "-rs",
                               *_repository_args(repo, profiles, words), *(() if full else ("--collect-only",))])
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert ("4 passed" if full else "/ 4 selected") in result.stdout, out  # 2 deployments x (batch 1, accuracy)
    for directory, snapshot in before.items():
        after = _snapshot(directory)
        assert sorted(after) == sorted(snapshot), (directory, sorted(set(after) ^ set(snapshot)))  # no new entry
        assert after == snapshot, directory  # byte for byte
    assert f"rootdir: {project}" in result.stdout and "configfile: pyproject.toml" in result.stdout, out
    if not full:
        return
    assert (project / ".pytest_cache").is_dir()  # pytest's cache under the project's rootdir, not in the repository
    rows = raw_rows(project / "reports")
    assert {r["deployment"] for r in rows} == {"onnx_scale", "ts_pool"}, {r["deployment"] for r in rows}
    assert (project / "model_repos" / "onnx_scale" / "config.pbtxt").read_bytes() == \
        (repo / "onnx_scale" / "config.pbtxt").read_bytes()


@pytest.mark.parametrize("glued", [False, True], ids=["option-value", "option=value"])
def test_a_repository_runs_its_own_deployments_and_shipped_models_join_when_named(tmp_path, glued):
    repo, _, project = _user_dirs(tmp_path)
    data = [f"--input-data=onnx_scale={FIXTURE / 'onnx_scale.json'}",
            f"--input-data=ts_pool={FIXTURE / 'ts_pool.json'}"]
    repository = [f"--model-repository={repo}"] if glued else ["--model-repository", str(repo)]

    def collected(*extra):
        result = _run_in(project, ["-m", "offline or accuracy", "--collect-only", "-q", *repository, *data, *extra],
                         timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        return {line.split("[", 1)[1].split("-", 1)[0] for line in result.stdout.splitlines() if "::test_" in line}

    assert collected() == {"onnx_scale", "ts_pool"}  # the shipped cpu profile's five models stay out
    assert collected("--models", "bert,onnx_scale") == {"bert", "onnx_scale"}  # named: they join
    assert not (repo / "reports").exists() and not (repo / "model_repos").exists()


def _bad_values(tmp_path):
    repo = tmp_path / "team_repo"
    model = repo / "onnx_scale" / "1" / "model.onnx"
    shapes = ["--shape", "x:5", "--shape", "INPUT__0:3,4"]
    in_repo = ["--model-repository", str(repo), *shapes]
    return [
        (["--models", "tft", "--shape", "x:a,b"], "--shape 'x:a,b': expected NAME:d1,d2,... with positive dims"),
        (["--models", "tft", "--shape", "x:3"], "--shape x:3: x is not an input of a deployment of the run's "
                                                "repositories; valid choices: none"),
        ([*in_repo, "--shape", "z:3"], "--shape z:3: z is not an input of a deployment of the run's repositories; "
                                       "valid choices: INPUT__0 (dims [-1, 4]), x (dims [-1])"),
        (["--model-repository", str(repo), "--shape", "x:0", "--shape", "INPUT__0:3,4"], "--shape 'x:0': expected"),
        (["--models", "tft", "--tolerance", "y=abc"], "--tolerance 'y=abc': expected OUTPUT=atol,rtol with "
                                                      "non-negative numbers"),
        ([*in_repo, "--tolerance", "y=1e-3,-1"], "--tolerance 'y=1e-3,-1': expected OUTPUT=atol,rtol"),
        ([*in_repo, "--tolerance", "z=1e-3,1e-3"], "--tolerance z=0.001,0.001: z is not an output of a deployment "
                                                   "of the run's repositories; valid choices: OUTPUT__0, y"),
        ([*in_repo, "--input-data", "pipeline=random"], "--input-data pipeline=random: deployment pipeline in "
                                                        f"{repo} cannot be driven: ensemble"),
        ([*in_repo, "--input-data", "nosuch=random"], "--input-data nosuch=random: no such deployment; valid "
                                                      "choices: onnx_scale, ts_pool"),
        # decoupled models are driven (load.streams); the fixture's has no version directory (nor model.py)
        ([*in_repo, "--reference", f"stream={model}"], f"--reference stream={model}: deployment stream in {repo} "
                                                       f"cannot be driven: no version directory the version policy"),
        ([*in_repo, "--reference", f"bert={model}"], f"--reference bert={model}: no such deployment; valid choices: "
                                                     f"onnx_scale, ts_pool"),
        ([*in_repo, "--models", "pipeline"], f"--models pipeline: deployment pipeline in {repo} cannot be driven: "
                                             f"ensemble: no version directory the version policy"),
        ([*in_repo, "--repository-dir", str(repo / "out")], f"--model-repository {repo}: --repository-dir "
                                                             f"{repo / 'out'} would lie inside it"),
    ]


@pytest.mark.parametrize("index", range(13))
def test_a_bad_tensor_deployment_or_number_is_one_usage_line(tmp_path, index):
    """Every value naming a tensor, a deployment or a number is checked before anything starts."""
    repo, _, project = _user_dirs(tmp_path)
    args, expected = _bad_values(tmp_path)[index]
    before = _snapshot(repo)
    result = _run_in(project, ["-m", "offline or accuracy", "--collect-only", "-q", *args], timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and expected in errors[0], out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert _snapshot(repo) == before


def test_a_team_directory_without_test_files_runs_the_scenarios(tmp_path):
    """tritonsuite installed, no test file of the team's own: `pytest -m offline --model-repository DIR` in their
    directory collects the scenarios from the installed package (it used to say "no tests ran", exit 5); a run that
    still collects nothing says in one line how to get them."""
    from tests.helpers import kinds_fixture

    repo = kinds_fixture().make(tmp_path / "team" / "repo")
    team = tmp_path / "team"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings",
               "--model-repository", str(repo), "--models", "scale", "--batch-sizes", "1",
               "--stability-percentage", "100"]  # collection, not this host's noise (CI once: 10.4% > 10%)
    ran = subprocess.run(command + ["-m", "offline"], cwd=team, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert raw_rows(team / "reports")[0]["deployment"] == "scale"
    empty = subprocess.run(command + ["-m", "offline and gpu_only"], cwd=team, env=env, capture_output=True,
                           text=True, timeout=120)
    assert empty.returncode == 5, empty.stdout[-2000:]
    assert "tritonsuite: no test collected: the scenarios run with -m offline" in empty.stdout, empty.stdout[-2000:]
