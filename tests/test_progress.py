"""At -v a point in progress shows on the terminal as it goes (and at no other verbosity: the smoke run, -q, shows
none); the latency-bound searches are one flag away."""
import re

from tests.helpers import TINY_PROFILE, run_pytest

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
    # the tiny profile counts any spread as stable: the third window ends the point
    assert len(windows) == 3 and windows[-1].endswith(": stable"), "\n".join(lines)
    assert f"test_online[{POINT}] PASSED" in result.stdout  # pytest's own line still follows


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


class _Config:
    """The three things terminal_progress reads from pytest's config."""

    def __init__(self, verbose: int, worker: bool):
        import types

        self.lines: list[str] = []
        reporter = types.SimpleNamespace(write_line=self.lines.append)
        self.pluginmanager = types.SimpleNamespace(get_plugin=lambda name: reporter if name == "terminalreporter"
                                                   else None)
        self._verbose = verbose
        if worker:
            self.workerinput = {"workerid": "gw0"}

    def getoption(self, name):
        assert name == "verbose"
        return self._verbose


def test_progress_is_written_at_verbose_on_the_controller_only():
    from tritonsuite.plugin.progress import terminal_progress

    shown = _Config(verbose=1, worker=False)
    terminal_progress(shown, "bert-onnx-fp32-concurrency8")("window 1 of <=10, 52 requests")
    assert shown.lines == ["  bert-onnx-fp32-concurrency8 [0 s] window 1 of <=10, 52 requests"]
    assert terminal_progress(_Config(verbose=0, worker=False), "x") is None
    assert terminal_progress(_Config(verbose=2, worker=True), "x") is None  # an xdist worker
