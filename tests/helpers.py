"""Helpers for the suite's own integration tests (not used by the scenario tests)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The end-to-end tests check plumbing (export, repository, server, rows, reports), not this host's noise or speed: any
# spread of the last windows counts as stable (100%), so a busy shared machine does not fail them, and the load
# generator's CPU never makes a point client bound, which a fast server beside a slow client may (test_engine checks
# stability itself).
TINY_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 8, warmup_ms: 200,
              client_bound_percent: 1000}
models:
  bert:
    size: tiny
    formats: [onnx, ts-trace, ts-script]
    precisions: [fp32]
    max_batch_size: 4
    intra_op_threads: 1
    offline: {batch_sizes: [1, 4]}
    online: {batch_size: 1, concurrency: [1, 2], preferred_batch_sizes: [2, 4], max_queue_delay_microseconds: 200}
"""

#: a profile with no model of its own, for runs of a --model-repository: plumbing, not figures (any spread stable)
REPOSITORY_PROFILE = """
device: cpu
gpu: none (CPU only)
measurement: {window_ms: 300, min_requests_per_window: 5, stability_percentage: 100, max_trials: 6, warmup_ms: 200,
              client_bound_percent: 1000}
"""


#: the artifact cache every run_pytest run shares (tests/conftest.py sets it for the session): a run exports what no
#: earlier run of the session exported, as runs pointed at one --cache-dir do; a test that needs a cache of its own
#: passes --cache-dir
SHARED_CACHE: Path | None = None
#: the modules that collect the scenario tests (tritonsuite.plugin.scenarios): what a run of the suite collects
SCENARIO_MODULES = tuple(f"tests/test_{name}.py" for name in ("offline", "online", "accuracy", "conformance", "tune",
                                                              "mix", "repository"))


def run_pytest(args: list[str], tmp_path: Path, profile: str = TINY_PROFILE, timeout: float = 600,
               pythonpath: str = "") -> subprocess.CompletedProcess:
    """Run the suite as a user would, in a subprocess, against a profile and report directory in tmp_path. Unless
    ``args`` name test files, it collects the scenario modules alone (as a team's project does), not this
    repository's own tests: their imports and collection would cost each run seconds, and a defect in one of them
    would fail every run."""
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "tiny.yaml").write_text(profile)
    named = any(re.search(r"(^|/)test_[^/]*\.py(::|$)", str(a)) for a in args)  # a test file or test id
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
               f"--profiles-dir={profiles}", f"--reports-dir={tmp_path / 'reports'}",
               f"--repository-dir={tmp_path / 'repos'}",
               *([f"--cache-dir={SHARED_CACHE}"] if SHARED_CACHE and "--cache-dir" not in args else []),
               *args, *(() if named else SCENARIO_MODULES)]
    env = child_env()
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a run of the suite of its own: not one of this run's xdist workers (their variables would
    make the child's pytest-benchmark think it is one, and write no --benchmark-json)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")} \
        | {"PYTHONDONTWRITEBYTECODE": "1", **extra}


def measure_loaded(server, model: str, *args, **kwargs):
    """The engine's measure() of a model loaded on ``server``, with its description as the server runs it."""
    from tritonsuite.load.engine import measure

    return measure(server, model, *args, description=server.model_description(model), **kwargs)


def raw_rows(reports_dir: Path, scenario: str = "*") -> list[dict]:
    """The rows a run wrote, as the JSON on disk (``reports/raw/<scenario>-<run>-<worker>.jsonl``), file by file."""
    import json

    return [json.loads(line) for f in sorted(Path(reports_dir, "raw").glob(f"{scenario}-*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


def leftover_shm(prefix: str) -> list[str]:
    return [p.name for p in Path("/dev/shm").glob(f"{prefix}*")]


def run_leftovers(reports_dir: Path) -> list[str]:
    """Shared-memory regions left by the run that wrote ``reports_dir`` (its own only: other runs on this host
    may hold theirs). The run's pytest processes are named by its server logs (tritonserver-<stamp>-<pid>-<n>)."""
    from tritonsuite.load.client import CLIENT_SHM_PREFIX
    from tritonsuite.server import SHM_PREFIX

    pids = {log.stem.split("-")[2] for log in Path(reports_dir, "logs").glob("tritonserver-*.log")}
    assert pids, f"no server log in {reports_dir}/logs"
    return [name for pid in pids for prefix in (SHM_PREFIX, CLIENT_SHM_PREFIX) for name in leftover_shm(f"{prefix}{pid}x")]


def kinds_fixture():
    """fixtures/kinds_repository/make_repository.py as a module (``make(dest)`` writes the repository)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_repository",
                                                  ROOT / "fixtures" / "kinds_repository" / "make_repository.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: how far a server-bound point measured two ways may move on a busy host (CI's other xdist worker beside it) before
#: the two rows disagree: the statistics' own verdict asks for a 10% effect, which a busy 2-core host exceeded once
#: (one process against two Ray actors: -10.5% throughput while another test ran)
BUSY_HOST_BAND = 0.25


def same_point(verdict: str, why: str, throughputs) -> bool:
    """Two rows of one point (one process against workers or actors) agree: the comparison statistics find no
    significant change, or the host was busy and the throughput is within BUSY_HOST_BAND of the first."""
    first, second = throughputs
    return verdict == "no significant change" or abs(second / first - 1.0) <= BUSY_HOST_BAND


def assert_same_point(verdict: str, why: str, throughputs) -> None:
    assert same_point(verdict, why, throughputs), (why, throughputs)


def pairs_until_alike(measure_pair, tries: int = 3) -> list:
    """``measure_pair()`` -> (first, second, (verdict, why, throughputs)), measured again only while the pair
    disagrees (a busy spell), at most ``tries`` times: a real gap between the two ways shows in every pair."""
    pairs = []
    for _ in range(tries):
        pairs.append(measure_pair())
        if same_point(*pairs[-1][-1]):
            break
    return pairs


def points_of(rows) -> list:
    """Rows (or their JSON records) as the report's typed points (tritonsuite.report.points.Point), which the
    performance pages and plots take."""
    from tritonsuite.core.rows import Row
    from tritonsuite.report.points import Point

    return [Point.of(r if isinstance(r, Row) else Row.from_dict(r)) for r in rows]


def plugin_options(**given):
    """The values pytest would hand the plugin with only ``given`` on the command line."""
    import argparse
    from types import SimpleNamespace

    from tritonsuite.plugin import flags

    parser = argparse.ArgumentParser()
    group = parser.add_argument_group("tritonsuite")
    group.addoption = group.add_argument
    flags.add_options(SimpleNamespace(getgroup=lambda *a: group, addini=lambda *a, **k: None))
    return SimpleNamespace(**{**vars(parser.parse_args([])), **given})
