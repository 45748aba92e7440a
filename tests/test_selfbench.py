"""The self-benchmark's ceiling part (``tritonsuite selfbench --ceiling-only``, and (c) of the full run) on the real
embedded server, with the identity model, short: two concurrencies, 200 ms windows. It broke unseen once (a
``measure()`` call without the deployment's description, 2026-11); these keep its path run."""
import pytest

from tritonsuite.core.rows import STATUSES
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.run import selfbench

# plumbing, not this host's speed: any spread of the last windows counts as stable, the client never bound
SHORT = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=100, max_trials=10,
                            warmup_ms=100, client_bound_percent=1000)


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.setattr(selfbench, "ROOT", tmp_path)  # its server's log under tmp_path/reports/logs
    return tmp_path


def test_ceiling_only_measures_the_identity_model_through_the_engine(here, shared_export_cache, capsys):
    assert selfbench._ceiling_only(shared_export_cache, ("suite",), (1, 4), SHORT) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("concurrency ")]
    assert [line.split(":")[0] for line in lines] == ["concurrency 1", "concurrency 4"], out
    for line in lines:
        assert "FAILED" not in line and line.endswith(", OK"), out
        assert float(line.split(": ")[1].split(" req/s")[0]) > 0, out
    assert list((here / "reports" / "logs").iterdir()), "the embedded server's log"


def test_ceiling_side_by_side_with_perf_analyzer(here, shared_export_cache, pa, capsys):
    assert selfbench._ceiling_only(shared_export_cache, ("suite", "perf_analyzer"), (2,), SHORT) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 1, out
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1] == "in process" and float(cells[2]) > 0 and float(cells[3]) > 0, out  # req/s: engine, pa
    assert cells[-1] == "OK / OK", out
    # each side's client CPU per request (us) is its CPU share over its request rate
    for side, (cpu, per_request) in enumerate(zip(cells[9].split(" / "), cells[10].split(" / "))):
        assert float(per_request) == pytest.approx(float(cpu) / 100 / float(cells[2 + side]) * 1e6, abs=1), out


def test_ceiling_over_worker_processes_is_a_row_per_number_of_workers(here, shared_export_cache, capsys):
    # 4 workers at concurrency 2 run as 2 (no more than the slots), 2 and 4 at concurrency 1 in process: each once
    assert selfbench._ceiling_only(shared_export_cache, ("suite",), (1, 2), SHORT, workers=(1, 2, 4)) == 0
    out = capsys.readouterr().out
    table = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert [r[1] for r in table if r[0] == "1"] == ["in process"], out
    rows = [r for r in table if r[0] == "2"]
    assert [r[1] for r in rows] == ["in process", "2 worker processes"], out
    for r in rows:
        assert float(r[2]) > 0 and r[3] == "-" and float(r[10].split(" / ")[0]) > 0, out
        assert r[-1] == "OK / -", out


@pytest.mark.parametrize("value,named", [("0", "'0'"), ("auto", "'auto'"), ("1,x", "'x'"), ("", "''")])
def test_selfbench_refuses_a_workers_value_in_one_line(value, named, capsys):
    from tritonsuite.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["selfbench", "--ceiling-only", "--workers", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"--workers {named}: valid choices: " in err and "from 1 to" in err, err


def test_a_ceiling_stopped_by_sigterm_prints_what_it_measured_and_leaves_no_server(tmp_path, shared_export_cache):
    """A step's timeout (examples/gpu/run.sh) stops the command with SIGTERM: it ends like Ctrl-C, its server
    stopped, and the table holds the points measured so far (on the H200 the 110 s step printed none)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    script = ("import sys; from pathlib import Path; from tritonsuite import cli; from tritonsuite.run import selfbench;"
              f"selfbench.ROOT = Path({str(tmp_path)!r}); sys.exit(cli.main(['selfbench', '--ceiling-only', "
              f"'--cache-dir', {str(shared_export_cache)!r}]))")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline, line = time.monotonic() + 240, ""
        while time.monotonic() < deadline and not line.startswith("measured: concurrency 1 "):
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "the command ended before its first point"
        servers = [c for c in psutil.Process(proc.pid).children(recursive=True) if c.name() == "tritonserver"]
        assert servers, "no tritonserver under the command"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 130, err[-2000:]
    assert "stopped after 1 points (interrupted)" in out or "stopped after 2 points (interrupted)" in out, out
    rows = [line for line in out.splitlines() if line.startswith("concurrency 1: ")]
    # the point as measured, with its status: on a busy host (CI's other workers) it may be UNSTABLE, still printed
    assert len(rows) == 1 and rows[0].rsplit(", ", 1)[1] in STATUSES and float(rows[0].split()[2]) > 0, out
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers), "tritonserver outlived it"
