"""Path-taking options that name the wrong kind of thing end in one usage line naming the file and what was
expected: no INTERNALERROR, no traceback at fixture setup (run as a user would, in a subprocess)."""
import pytest

from tests.helpers import run_pytest


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
