"""The corpus (tests/corpus.py: repositories written the way teams and Triton's examples write them, sound and
broken) through every scenario in one invocation on the embedded server: every sound deployment green, every broken
one red with its cause and nothing else red, the server restarted where a deployment took it down, nothing left
behind. In two halves, one per xdist worker: the plain deployments here, the sequence, decoupled and BLS ones in
tests/test_corpus_kinds.py. The conformance checks run but reload and counters, which the kinds' own tests show per
kind (tests/test_conformance_kinds.py, test_kinds_repository.py)."""
import re
import time

import psutil

from tritonsuite.judge.conformance import DEFAULT_CHECKS

from tests.corpus import BROKEN, HALVES, SOUND, write_corpus
from tests.helpers import raw_rows, run_leftovers, run_pytest

PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 150, min_requests_per_window: 5, stability_percentage: 100, max_trials: 4, warmup_ms: 50,
              request_timeout_s: 5}
"""  # plumbing, not figures: short windows, any spread stable, and a hang found in 5 s (the corpus has three)


def _outcomes(out: str) -> dict[str, set[str]]:
    """{deployment: the outcomes of its tests} from -rA's short summary (test ids name the deployment first)."""
    found: dict[str, set[str]] = {}
    for outcome, ident in re.findall(r"^(PASSED|FAILED|SKIPPED|ERROR) \S*?::test_\w+\[([^\]]+)\]", out, re.M):
        name = ident.split("-")[0]
        found.setdefault(name.split(":")[0], set()).add(outcome)
    return found


def _why(names: set[str], out: str, rows: list[dict]) -> str:
    """What turned ``names`` red: their short-summary lines and the reasons of their failed rows."""
    lines = [line for line in out.splitlines() if re.match(r"(FAILED|ERROR) ", line)
             and any(f"[{n}-" in line or f"[{n}:" in line for n in names)]
    reasons = [f"{r['deployment']} {r.get('scenario')} {r.get('check', '')}: {r['reasons']}" for r in rows
               if r["deployment"].split(":")[0] in names and r.get("status") == "FAILED"]
    return "\n".join(lines + reasons)


#: the checks the corpus runs: the default ones but reload and counters (shown per kind elsewhere)
CHECKS = ",".join(c for c in DEFAULT_CHECKS if c not in ("reload", "counters"))


def test_the_halves_are_the_whole_corpus():
    assert HALVES["plain"] | HALVES["kinds"] == set(SOUND) | set(BROKEN) and not HALVES["plain"] & HALVES["kinds"]


def test_the_corpus_plain_half_in_one_run_sound_green_broken_red_with_cause(tmp_path):
    run_half(tmp_path, "plain")


def run_half(tmp_path, half: str) -> None:
    sound, broken = [n for n in SOUND if n in HALVES[half]], {n: c for n, c in BROKEN.items() if n in HALVES[half]}
    repo = write_corpus(tmp_path / "corpus", half)
    before = {p.pid for p in psutil.process_iter()}
    start = time.monotonic()
    result = run_pytest(["--gpu", "tiny", "--model-repository", str(repo), "-m",
                         "offline or online or accuracy or conformance", "--batch-sizes", "1,2", "--concurrency", "2",
                         "--checks", CHECKS, "-p", "no:warnings", "-rA"], tmp_path, profile=PROFILE, timeout=1500)
    took = time.monotonic() - start
    out = result.stdout + result.stderr
    outcomes = _outcomes(out)
    print(f"corpus ({half}): {len(sound)} sound and {len(broken)} broken deployments in {took:.0f} s; "
          + out.strip().splitlines()[-1])
    assert result.returncode == 1, out[-5000:]
    assert "INTERNALERROR" not in out
    red = {name for name, seen in outcomes.items() if "FAILED" in seen or "ERROR" in seen}
    rows = raw_rows(tmp_path / "reports")
    if red - set(broken):  # shown whole under "Captured stdout" (an assertion's message is cut to a few lines)
        print(_why(red - set(broken), out, rows))
    assert red == set(broken), (red ^ set(broken), out[-8000:])
    assert all("PASSED" in outcomes.get(name, ()) for name in sound), {n: outcomes.get(n) for n in sound}
    for name, cause in broken.items():  # each broken deployment's failures carry its cause
        failed = [r for r in rows if r["deployment"].split(":")[0] == name and r.get("status") == "FAILED"]
        reasons = " ".join(r["reasons"][0] for r in failed) + out
        assert cause in reasons, (name, cause, [r["reasons"] for r in failed])
    if "unparsable" in broken:
        assert "tritonsuite: refused unparsable in" in out and "not a ModelConfig" in out
    assert not run_leftovers(tmp_path / "reports")
    stubs = [p for p in psutil.process_iter(["cmdline"]) if p.pid not in before  # this run's: serving from tmp_path
             and "triton_python_backend_stub" in (line := " ".join(p.info["cmdline"] or []))
             and str(tmp_path) in line]  # (the other xdist worker's servers run beside it)
    assert not stubs, stubs
