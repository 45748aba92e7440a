"""Progress a person can watch (tritonsuite.plugin.progress): a bar under the running point on a terminal, its
windows' lines at -v, one line per point in a log, nothing under -q; the latency-bound searches are one flag away."""
import os
import re
import select
import subprocess
import sys
import types

import pytest

from tests.helpers import ROOT, SCENARIO_MODULES, TINY_PROFILE, child_env, run_pytest

POINT = "bert-onnx-fp32-concurrency1"


def test_a_point_reports_its_windows_at_verbose(tmp_path):
    result = run_pytest(["--gpu", "tiny", "-m", "online", "-v", "-p", "no:xdist", "--formats", "onnx",
                         "--concurrency", "1", "-k", POINT], tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith(f"  {POINT} [")]
    assert lines, result.stdout
    assert re.fullmatch(rf"  {POINT} \[0 s\] deploying bert as onnx fp32: export \(cached across runs\), verification "
                        rf"against eager, model repository, load on the server", lines[0])
    # concurrency 1 is the highest here, so the point carries accuracy probes: their reference pass comes next
    assert re.fullmatch(rf"  {POINT} \[\d+ s\] accuracy under load: sending \d+ probe requests one at a time first "
                        rf"\(the reference\), then the point with a share of 0.1 of its requests carrying them", lines[1])
    assert re.fullmatch(rf"  {POINT} \[\d+ s\] warming up: 200 ms and a response on each of 1 connection", lines[2])
    windows = [line for line in lines if " window " in line]
    assert windows[0].endswith("; waiting for 3 windows to compare (latency and throughput within 100%)")
    assert re.search(r"\] window 1 of <=8, \d+ requests;", windows[0]), windows[0]
    # the tiny profile counts any spread as stable: the third window ends the point, unless its windows hold too few
    # requests for the percentiles (a busy host: 318 requests in three, 2026-11-30), then it measures on and says so
    assert len(windows) >= 3 and ": stable" in windows[2], "\n".join(lines)
    if len(windows) == 3:
        assert windows[-1].endswith(": stable"), "\n".join(lines)
    else:
        assert windows[2].endswith(": stable; measuring on for the samples its percentiles need"), "\n".join(lines)
        assert windows[-1].endswith(f": stable; {len(windows)} stable windows pooled"), "\n".join(lines)
    assert f"test_online[{POINT}] PASSED" in result.stdout  # pytest's own line still follows
    # and the point's line, from its figures, as a log shows it
    assert re.search(rf"^  \[1/1\] {POINT} passed in \d+\.\d s: [\d.]+ infer/s, p99 [\d.]+ ms, \d+ requests, OK$",
                     result.stdout, re.M), result.stdout


def test_the_latency_bound_searches_run_only_when_asked(tmp_path):
    profile = TINY_PROFILE.replace("max_queue_delay_microseconds: 200}",
                                   "max_queue_delay_microseconds: 200, latency_bound: p99 <= 500 ms, "
                                   "search: [request_rate, concurrency]}")

    def collected(*args):
        result = run_pytest(["--gpu", "tiny", "--collect-only", "-q", "--formats", "onnx", *args], tmp_path,
                            profile=profile, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return [line.split("[")[1].rstrip("]") for line in result.stdout.splitlines() if "::test_online[" in line]

    searches = ["bert-onnx-fp32-maxrate-p99le500ms", "bert-onnx-fp32-maxconcurrency-p99le500ms"]
    by_default = collected("-m", "online")
    assert by_default == ["bert-onnx-fp32-concurrency1", "bert-onnx-fp32-concurrency2"]
    assert collected("-m", "online", "--searches") == by_default + searches
    assert collected("-m", "search") == searches
    assert collected("-m", "online and not search", "--searches") == by_default


def _pty_run(args, tmp_path, columns=120, rows=200, timeout=300) -> tuple[int, bytes]:
    """The suite run as on a person's terminal: stdout and stderr a pseudo-terminal of ``columns`` x ``rows``, not
    CI; every byte the terminal got."""
    import fcntl
    import pty
    import struct
    import termios

    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "tiny.yaml").write_text(TINY_PROFILE)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
               f"--profiles-dir={profiles}", f"--reports-dir={tmp_path / 'reports'}",
               f"--repository-dir={tmp_path / 'repos'}", *args, *SCENARIO_MODULES]
    env = {k: v for k, v in child_env(TERM="xterm").items() if k not in ("CI", "BUILD_NUMBER")}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    child = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                out += data
            elif child.poll() is not None:
                break
        return child.wait(timeout=timeout), out
    finally:
        os.close(master)
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_point_on_a_terminal_shows_a_bar_that_gives_way_to_pytests_line(tmp_path):
    """What a person sees, emulated (pyte): while the point runs, a bar counting its windows on the line under
    pytest's; when it ends, the bar is gone and pytest's dots go on on their own line."""
    pyte = pytest.importorskip("pyte", reason="pyte (the [test] extra) emulates the terminal the bar is drawn on")
    code, out = _pty_run(["--gpu", "tiny", "-m", "online", "-p", "no:xdist", "--formats", "onnx",
                          "--concurrency", "1,2"], tmp_path)
    assert code == 0, out.decode(errors="replace")
    screen = pyte.Screen(120, 200)  # as tall as the terminal was: the whole run stays on it
    stream = pyte.ByteStream(screen)
    bars = []
    for chunk in re.split(rb"(?=\r)", out):  # each redraw of the bar starts with a carriage return
        stream.feed(chunk)
        bars += [line.rstrip() for line in screen.display if line.startswith("bert-onnx-fp32-concurrency")]
    # the bar counted the windows of each point (the tiny profile: stable at the third of at most 8)
    for point in ("bert-onnx-fp32-concurrency1", "bert-onnx-fp32-concurrency2"):
        shown = [b for b in bars if b.startswith(point)]
        third = rf"{point} 3/8 \|█{{7}}[^|]{{13}}\| \d\d:\d\d, window 3 of <=8, \d+ requests; "
        assert any(re.match(third, b) for b in shown), "\n".join(shown)
        assert any(f"{point} 0/8 |" in b and "warming up" in b for b in shown), "\n".join(shown)
        assert all(len(b) <= 120 for b in shown)  # cut to the terminal's width: a wrapped line is never redrawn
    final = [line.rstrip() for line in screen.display if line.strip()]
    files = [line for line in final if line.startswith("tests/test_online.py ")]
    assert len(files) == 1 and re.fullmatch(r"tests/test_online\.py \.\. +\[100%\]", files[0]), "\n".join(final)
    assert not [line for line in final if line.startswith("bert-onnx")], "\n".join(final)  # no bar left behind


class _Config:
    """What the display reads from pytest's config: verbosity, xdist, whether stdout was a terminal."""

    def __init__(self, verbose: int = 0, worker: bool = False, tty: bool = False, dist: str = "no"):
        from tritonsuite.plugin.progress import TTY_KEY, Display

        self.lines: list[str] = []
        self.stash = {TTY_KEY: tty}
        reporter = types.SimpleNamespace(write_line=self.lines.append)
        plugins = {"terminalreporter": reporter, "tritonsuite-progress": Display(self)}
        self.pluginmanager = types.SimpleNamespace(get_plugin=plugins.get)
        self.options = {"verbose": verbose, "dist": dist}
        if worker:
            self.workerinput = {"workerid": "gw0"}

    def getoption(self, name, default=None):
        return self.options.get(name, default)

    def get_terminal_writer(self):
        return types.SimpleNamespace(width_of_current_line=0)


@pytest.mark.parametrize("config, ci, shown", [
    (dict(verbose=-1, tty=True), False, "none"),                  # -q: nothing, even on a terminal
    (dict(verbose=0, tty=True), False, "bar"),                    # a person's terminal
    (dict(verbose=0, tty=True), True, "lines"),                   # CI's log, though a terminal
    (dict(verbose=0, tty=False), False, "lines"),                 # stdout piped to a file
    (dict(verbose=0, tty=True, dist="load"), False, "lines"),     # xdist: the tests run in workers
    (dict(verbose=1, tty=True), False, "lines"),                  # -v: every window's line instead of a bar
])
def test_how_progress_is_shown(config, ci, shown, monkeypatch):
    from tritonsuite.plugin.progress import display

    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    monkeypatch.setenv("CI", "true") if ci else monkeypatch.delenv("CI", raising=False)
    assert display(_Config(**config)) == shown


def test_window_lines_only_at_verbose_and_only_where_the_test_runs(monkeypatch):
    from tritonsuite.load.point import ProgressLine
    from tritonsuite.plugin.progress import terminal_progress

    monkeypatch.setenv("CI", "true")
    shown = _Config(verbose=1)
    request = types.SimpleNamespace(config=shown)
    terminal_progress(request, "bert-onnx-fp32-concurrency8")(ProgressLine("window 1 of <=10, 52 requests", 1, 10))
    assert shown.lines == ["  bert-onnx-fp32-concurrency8 [0 s] window 1 of <=10, 52 requests"]
    for quiet in (_Config(verbose=0), _Config(verbose=-1), _Config(verbose=2, worker=True)):  # a log, -q, a worker
        assert terminal_progress(types.SimpleNamespace(config=quiet), "x") is None


def _report(name: str, outcome: str = "passed", **figures):
    return types.SimpleNamespace(when="call", nodeid=f"tests/test_online.py::{name}", outcome=outcome, duration=14.25,
                                 longrepr=None, user_properties=list(figures.items()))


def test_one_line_per_point_in_a_log_and_none_under_q(monkeypatch):
    monkeypatch.setenv("CI", "true")
    log, quiet = _Config(verbose=0), _Config(verbose=-1)
    point = _report("test_online[bert-onnx-fp32-concurrency8]", **{"Inferences/Second": 523.14, "p99 latency": 12.34,
                                                                 "status": "UNSTABLE", "measured_requests": 812})
    search = _report("test_online[bert-onnx-fp32-maxrate-p99le500ms]", "failed",
                     answer="no point within p99 <= 500 ms", points=3)
    skipped = _report("test_offline[bert-trt-fp32-batch1]", "skipped")
    skipped.longrepr = ("scenarios.py", 22, "Skipped: bert trt: TensorRT is not installed")
    others = [_report("test_accuracy[bert-onnx-fp16]", passed=True), types.SimpleNamespace(**{
        **vars(point), "when": "setup"})]
    for config in (log, quiet):
        display = config.pluginmanager.get_plugin("tritonsuite-progress")
        display.collected = 4
        for report in (point, *others, search, skipped):
            display.pytest_runtest_logreport(report)
    assert log.lines == [
        "  [1/4] bert-onnx-fp32-concurrency8 passed in 14.2 s: 523.1 infer/s, p99 12.34 ms, 812 requests, UNSTABLE",
        "  [2/4] bert-onnx-fp32-maxrate-p99le500ms failed in 14.2 s: no point within p99 <= 500 ms",
        "  [3/4] bert-trt-fp32-batch1 skipped in 14.2 s: bert trt: TensorRT is not installed"]
    assert quiet.lines == []
