"""perf_analyzer as a load generator, without perf_analyzer: its recorded output parsed into the suite's row schema,
the command line built from the suite's settings, its library directory, the one-line reasons it cannot start, and
stand-in binaries measuring points of the real embedded Triton serving the identity model."""
import base64
import csv
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import leftover_shm
from tritonsuite.core.rows import RESULT_COLUMNS, Row
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.core.spec import TensorSpec
from tritonsuite.judge.crosscheck import cross_points
from tritonsuite.load import perfanalyzer as pa_mod
from tritonsuite.load.engine import LoadPoint, MeasurementError
from tritonsuite.load.perfanalyzer import (
    PerfAnalyzer,
    PerfAnalyzerUnavailable,
    build_command,
    check_starts,
    fetch_binary,
    library_dir,
    output_region_bytes,
    parse_csv,
    parse_export,
    parse_request_count,
    parse_passes,
    unstable_message,
    write_input_data,
)
from tritonsuite.report.pages import render_crosscheck
from tritonsuite.server import EmbeddedServer, ServerDied

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "perf_analyzer"


def _csv_row(name: str) -> dict:
    return next(csv.DictReader(io.StringIO((DATA / name).read_text())))


@pytest.mark.parametrize("name, batch", [("identity_online_c2.csv", 1), ("identity_offline_b2_shm.csv", 2)])
def test_recorded_csv_maps_onto_the_seeds_columns_in_ms(name, batch):
    raw = _csv_row(name)
    result = parse_csv((DATA / name).read_text(), batch)
    assert tuple(result) == RESULT_COLUMNS
    assert result["Batch"] == batch and result["Concurrency"] == int(raw["Concurrency"])
    assert result["Inferences/Second"] == float(raw["Inferences/Second"])  # a rate: not rescaled
    for theirs, ours in pa_mod.CSV_COLUMNS.items():
        if ours != "Inferences/Second":
            assert result[ours] == pytest.approx(float(raw[theirs]) / 1000.0), ours  # usec -> ms
    assert result["p50 latency"] <= result["p90 latency"] <= result["p95 latency"] <= result["p99 latency"]
    # perf_analyzer's parts add up to its average latency, as the suite's do (Network+Server is its residual too)
    parts = sum(result[c] for c in ("Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
                                    "Server Compute Infer", "Server Compute Output", "Client Recv"))
    assert parts == pytest.approx(result["avg latency"], abs=0.01)


def test_csv_without_a_column_names_it():
    text = (DATA / "identity_online_c2.csv").read_text().replace("p99 latency", "p98 latency")
    with pytest.raises(MeasurementError, match="lacks p99 latency"):
        parse_csv(text, 1)
    with pytest.raises(MeasurementError, match="0 result rows"):
        parse_csv(text.splitlines()[0] + "\n", 1)


def test_recorded_verbose_output_gives_every_window():
    log = (DATA / "identity_online_c2.log").read_text()
    passes = parse_passes(log)
    assert len(passes) == log.count("Pass [") == 3
    first = next(line for line in log.splitlines() if "Pass [1]" in line)
    assert f"{passes[0][0]:g}" in first and f"{round(passes[0][1] * 1000)} usec" in first
    assert unstable_message(log) is None


def test_recorded_unstable_output_is_perf_analyzers_own_line():
    log = (DATA / "identity_online_c2_unstable.log").read_text()
    line = unstable_message(log)
    assert line.startswith("Failed to obtain stable measurement within 3 measurement windows for concurrency 2")
    assert len(parse_passes(log)) == 3


def test_recorded_profile_export_gives_request_latencies():
    data = json.loads((DATA / "identity_online_c2_export_first20.json").read_text())
    requests = data["experiments"][0]["requests"]
    exported = parse_export(json.dumps(data))
    latencies = exported.latencies
    assert exported.whole and len(latencies) == len(requests) == 20
    expected = [(r["response_timestamps"][-1] - r["timestamp"]) / 1e9 for r in requests]
    assert np.allclose(latencies, expected) and (latencies > 0).all()


def test_an_export_of_more_windows_than_measured_gives_the_measured_windows_latencies():
    """perf_analyzer 2.51 exports every window's records, its Request count is of the last 3: five windows of four
    records each, the last response of the eighth exactly on the boundary (its window is the earlier one, as
    perf_analyzer counts it). CI's identity test once read 7584 exported against 5863 measured."""
    data = json.loads((DATA / "identity_online_c2_export_first20.json").read_text())
    requests = sorted(data["experiments"][0]["requests"], key=lambda r: r["response_timestamps"][-1])
    ends = [r["response_timestamps"][-1] for r in requests]
    data["experiments"][0].update(requests=requests, window_boundaries=[ends[0] - 1, *ends[3::4]])
    exported = parse_export(json.dumps(data))
    expected = [(r["response_timestamps"][-1] - r["timestamp"]) / 1e9 for r in requests[8:]]
    assert exported.whole and exported.earlier == 8 and np.allclose(exported.latencies, expected)
    data["experiments"][0]["window_boundaries"] = [ends[0] - 1, ends[6], ends[13], ends[19]]  # three: every record
    assert len(parse_export(json.dumps(data)).latencies) == 20


def test_a_cut_export_of_more_windows_than_measured_gives_no_latencies():
    """A cut file ends before its window boundaries: when perf_analyzer ran more windows than the 3 it measured, its
    first records are from a window it did not measure, so none is kept, and the cut says why."""
    text = json.dumps(json.loads((DATA / "identity_online_c2_export_first20.json").read_text()), separators=(",", ":"))
    cut = text[:text.rindex('"response_timestamps"') + 25]  # inside the last record's response times
    assert len(parse_export(cut, 3).latencies) == 19  # three windows: the complete records, as before
    exported = parse_export(cut, 5)
    assert not exported.whole and len(exported.latencies) == 0
    assert exported.cut == (f"its export stops at byte {len(cut)}, mid-record, and perf_analyzer ran 5 windows, so "
                            f"its first records are not of the last 3 it measured")


@pytest.mark.parametrize("records", [0, 1, 7, 19])
def test_a_cut_export_gives_the_latencies_of_its_complete_records(records):
    """perf_analyzer 2.51's writer stops at a value it cannot write (tests/test_perfanalyzer.py makes it happen):
    the file ends anywhere, here inside the record after the last complete one."""
    data = json.loads((DATA / "identity_online_c2_export_first20.json").read_text())
    requests = data["experiments"][0]["requests"]
    requests[3]["request_inputs"] = {"TEXT": 'a BYTES value saying "timestamp":5,"response_timestamps":[9]'}
    text = json.dumps(data, separators=(",", ":"))  # as perf_analyzer writes it: no spaces
    cut = text.index('"response_timestamps"', text.index(f'"timestamp":{requests[records]["timestamp"]}'))
    exported = parse_export(text[:cut + 25])  # mid-way through the next record's response times
    expected = [(r["response_timestamps"][-1] - r["timestamp"]) / 1e9 for r in requests[:records]]
    assert not exported.whole and exported.cut == f"its export stops at byte {cut + 25}, mid-record"
    assert np.allclose(exported.latencies, expected) and len(exported.latencies) == records


def test_the_request_count_is_perf_analyzers_own_summary():
    log = (DATA / "identity_online_c2.log").read_text()
    assert parse_request_count(log) == 6264
    assert parse_request_count(log.replace("Request count", "Requests")) is None


def test_input_data_holds_exactly_the_engines_tensors(tmp_path):
    inputs = {"input__0": np.arange(3 * 5, dtype=np.int32).reshape(3, 5),
              "x": np.random.default_rng(0).standard_normal((3, 2, 2)).astype(np.float32)}
    data = json.loads(write_input_data(inputs, tmp_path / "d.json").read_text())["data"]
    assert len(data) == 3  # one step per sample: a batch-3 request takes 3 consecutive steps
    for i, step in enumerate(data):
        for name, array in inputs.items():
            assert step[name]["shape"] == list(array.shape[1:])
            back = np.frombuffer(base64.b64decode(step[name]["b64"]), dtype=array.dtype).reshape(array.shape[1:])
            assert np.array_equal(back, array[i])
    with pytest.raises(ValueError, match="disagree on the batch size"):
        write_input_data({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))}, tmp_path / "e.json")


def _pa(tmp_path) -> PerfAnalyzer:
    return PerfAnalyzer(tmp_path / "perf_analyzer", tmp_path / "lib")


def test_command_for_an_offline_point(tmp_path):
    settings = MeasurementSettings(window_ms=1500, stability_percentage=7.5, max_trials=12)
    argv = build_command(_pa(tmp_path), "m", "127.0.0.1:8000", LoadPoint(8, 1, shared_memory=True), settings,
                         tmp_path / "in.json", tmp_path / "r.csv", tmp_path / "e.json")
    assert argv[0] == str(tmp_path / "perf_analyzer") and all(isinstance(a, str) for a in argv)

    def value(flag):
        return argv[argv.index(flag) + 1]

    assert (value("-m"), value("-u"), value("-i"), value("-b")) == ("m", "127.0.0.1:8000", "http", "8")
    assert value("--concurrency-range") == "1:1"  # 2.51's third field is a step: start:end pins one point
    assert value("--measurement-mode") == "time_windows" and value("--measurement-interval") == "1500"
    assert value("--stability-percentage") == "7.5" and value("--max-trials") == "12"
    assert value("--shared-memory") == "system" and value("--input-data") == str(tmp_path / "in.json")
    assert value("-f") == str(tmp_path / "r.csv") and "--verbose-csv" in argv and "--sync" in argv
    assert "--help" not in argv  # not a flag in 2.51


def test_command_for_an_online_point_count_windows_and_lengthening(tmp_path):
    settings = MeasurementSettings(window_requests=50)
    argv = build_command(_pa(tmp_path), "m", "h:1", LoadPoint(1, 4), settings, tmp_path / "i", tmp_path / "r",
                         tmp_path / "e", factor=2)
    assert argv[argv.index("--concurrency-range") + 1] == "4:4"
    assert argv[argv.index("--shared-memory") + 1] == "none"
    assert argv[argv.index("--measurement-mode") + 1] == "count_windows"
    assert argv[argv.index("--measurement-request-count") + 1] == "100"
    assert "--output-shared-memory-size" not in argv
    timed = build_command(_pa(tmp_path), "m", "h:1", LoadPoint(1, 4), MeasurementSettings(window_ms=300),
                          tmp_path / "i", tmp_path / "r", tmp_path / "e", factor=4)
    assert timed[timed.index("--measurement-interval") + 1] == "1200"


def test_output_regions_are_sized_for_dynamic_outputs():
    fixed = [TensorSpec("o", "float32", (16,))]
    assert output_region_bytes(fixed) is None
    dynamic = [TensorSpec("mel", "float32", (80, -1), max_shape=(80, 500)), TensorSpec("n", "int64", (1,))]
    assert output_region_bytes(dynamic) == 80 * 500 * 4
    with pytest.raises(MeasurementError, match="no max_shape"):
        output_region_bytes([TensorSpec("mel", "float32", (80, -1))])


def _fake_libs(tmp_path) -> Path:
    libs = tmp_path / "nvidia_pytriton.libs"
    libs.mkdir()
    (libs / "libb64-98cb6333.so.0d").write_bytes(b"b64")
    (libs / "libcudart-09529672.so.12.6.77").write_bytes(b"cudart")
    return libs


def test_library_dir_links_the_hashed_libraries_under_plain_names(tmp_path):
    libs = _fake_libs(tmp_path)
    target = library_dir(tmp_path / "lib", libs)
    assert (target / "libb64.so.0d").resolve() == (libs / "libb64-98cb6333.so.0d").resolve()
    assert (target / "libcudart.so.12").read_bytes() == b"cudart"
    assert library_dir(target, libs) == target  # again: the same links
    env = PerfAnalyzer(tmp_path / "pa", target).environment({"LD_LIBRARY_PATH": "/x"})
    assert env["LD_LIBRARY_PATH"] == f"{target}:/x"


def test_library_dir_names_a_missing_library(tmp_path):
    libs = _fake_libs(tmp_path)
    (libs / "libb64-98cb6333.so.0d").unlink()
    with pytest.raises(PerfAnalyzerUnavailable, match=r"needs libb64\.so\.0d: no libb64-\*\.so\.0d in"):
        library_dir(tmp_path / "lib", libs)


def test_the_pytriton_wheel_ships_both_libraries(tmp_path):
    libs = pa_mod.pytriton_libs()  # the installed nvidia-pytriton: the embedded server's own libraries
    target = library_dir(tmp_path / "lib", libs)
    assert all((target / name).resolve().is_file() for name in pa_mod.LIBRARIES)


def _one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_cannot_fetch_is_one_line_with_the_alternative(tmp_path):
    def download(dest):
        raise RuntimeError("pip download failed (exit 1): No matching distribution found for tritonclient==2.51.0")

    with pytest.raises(PerfAnalyzerUnavailable) as exc:
        fetch_binary(tmp_path, download)
    text = _one_line(exc)
    assert "tritonclient==2.51.0" in text and "No matching distribution" in text
    assert pa_mod.BINARY_ENV in text and "--dataset" not in text


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path):
    wheel = tmp_path / "built" / "tritonclient-2.51.0-py3-none-manylinux1_x86_64.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(pa_mod.MEMBER, b"#!/bin/sh\necho not perf_analyzer\n")

    def download(dest):
        (dest / wheel.name).write_bytes(wheel.read_bytes())

    with pytest.raises(PerfAnalyzerUnavailable) as exc:
        fetch_binary(tmp_path / "cache", download)
    assert f"expected {pa_mod.WHEEL_SHA256}" in _one_line(exc)
    assert not list((tmp_path / "cache").rglob("*perf_analyzer"))  # nothing unchecked is kept


def test_a_binary_that_does_not_start_gives_the_loaders_line(tmp_path):
    binary = tmp_path / "perf_analyzer"
    binary.write_text("#!/bin/sh\necho 'perf_analyzer: error while loading shared libraries: libb64.so.0d: cannot "
                      "open shared object file' >&2\nexit 127\n")
    binary.chmod(0o755)
    with pytest.raises(PerfAnalyzerUnavailable) as exc:
        check_starts(PerfAnalyzer(binary, None))
    text = _one_line(exc)
    assert "exit 127" in text and "libb64.so.0d: cannot open shared object file" in text
    binary.chmod(0o644)
    with pytest.raises(PerfAnalyzerUnavailable, match="cannot start: Permission denied"):
        check_starts(PerfAnalyzer(binary, None))


def test_a_binary_of_ones_own_that_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv(pa_mod.BINARY_ENV, str(tmp_path / "nope"))
    with pytest.raises(PerfAnalyzerUnavailable, match=f"{pa_mod.BINARY_ENV}=.*nope: no such file"):
        pa_mod.locate(tmp_path)


def _row(loadgen, tput, p50, p99, status="OK", **kw):
    result = {c: 1.0 for c in RESULT_COLUMNS} | {"Inferences/Second": tput, "p50 latency": p50, "p99 latency": p99}
    return Row(scenario="online", model="bert", deployment="bert_cpu_onnx_fp32_online", batch=1, concurrency=2,
               loadgen=loadgen, result=result, status=status, parameters={"Host": "h"},
               measurement={"loadgen_command": "perf_analyzer -m x"} if loadgen != "suite" else {}, **kw)


def test_crosscheck_joins_both_generators_point_by_point():
    rows = [_row("suite", 10.0, 5.0, 9.0), _row("perf_analyzer", 15.0, 4.0, 12.0),
            _row("suite", 20.0, 2.0, 3.0)]
    rows[2].batch = 4  # measured by one generator only: not joined
    points = cross_points(rows)
    assert len(points) == 1
    assert points[0].ratio("Inferences/Second") == pytest.approx(15.0 / 10.0)
    assert points[0].ratio("p99 latency") == pytest.approx(12.0 / 9.0)
    page = render_crosscheck(cross_points(rows))
    cells = [c.strip() for c in next(ln for ln in page.splitlines() if "bert_cpu_onnx_fp32_online" in ln).split("|")]
    assert cells[5:14] == ["10.0", "15.0", "1.50", "5.0", "4.0", "0.80", "9.0", "12.0", "1.33"]
    assert "perf_analyzer -m x" in page
    unstable = render_crosscheck(cross_points([rows[0], _row("perf_analyzer", 15.0, 4.0, 12.0, status="UNSTABLE",
                                                reasons=["perf_analyzer: Failed to obtain stable measurement"])]))
    assert "perf_analyzer: UNSTABLE: perf_analyzer: Failed to obtain stable measurement" in unstable
    assert "No point was measured by both" in render_crosscheck(cross_points(rows[:1]))
    probed = _row("suite", 10.0, 5.0, 9.0)
    probed.extra["accuracy_under_load"] = {"share": 0.1}
    assert "Not like for like" not in page
    assert "Not like for like" in render_crosscheck(cross_points([probed, rows[1]]))


def test_rows_before_loadgen_existed_read_as_the_suites():
    record = _row("suite", 1.0, 1.0, 1.0).to_dict()
    del record["loadgen"]
    assert Row.from_dict(record).loadgen == "suite"


@pytest.fixture(scope="module")
def served(identity_repo, tmp_path_factory):
    """The real embedded Triton serving the identity model, for the points a stand-in binary measures."""
    with EmbeddedServer(identity_repo, tmp_path_factory.mktemp("logs")) as server:
        server.load(identity_repo / "identity")
        yield server


def _stand_in(tmp_path, body: str) -> PerfAnalyzer:
    binary = tmp_path / "perf_analyzer"
    binary.write_text("#!/bin/sh\n" + body)
    binary.chmod(0o755)
    return PerfAnalyzer(binary, None)


def _identity_point(tmp_path, pa, server, **settings):
    spec = TensorSpec("OUTPUT__0", "float32", (16,))
    return pa_mod.measure_with_perf_analyzer(server, "identity", {"INPUT__0": np.zeros((1, 16), np.float32)},
                                             [spec], LoadPoint(1, 2), MeasurementSettings(**settings), pa)


def test_perf_analyzers_unstable_point_lengthens_then_is_unstable_with_its_message(tmp_path, served):
    log = DATA / "identity_online_c2_unstable.log"
    pa = _stand_in(tmp_path, f"echo \"$@\" >> {tmp_path / 'argv'}\ncat {log}\nexit 2\n")
    m = _identity_point(tmp_path, pa, served, window_ms=300, max_window_factor=2)
    assert m.status == "UNSTABLE" and not m.valid
    assert m.reasons[0].startswith("perf_analyzer: Failed to obtain stable measurement within 3 measurement windows")
    assert "(last windows 600 ms, lengthened x2 after perf_analyzer found no stable measurement; throughput varied " \
        in m.reasons[0] and m.reasons[0].endswith("% of a core meanwhile)")
    calls = (tmp_path / "argv").read_text().splitlines()
    assert [c.split("--measurement-interval ")[1].split()[0] for c in calls] == ["300", "600"]  # doubled once
    assert m.meta["window_factors"] == [1, 1, 1, 2, 2, 2] and m.meta["window"].startswith("600 ms, lengthened x2")
    passes = parse_passes(log.read_text())
    assert m.result["Inferences/Second"] == pytest.approx(np.mean([t for t, _ in passes]))
    assert m.result["p99 latency"] is None and tuple(m.result) == RESULT_COLUMNS
    assert m.meta["loadgen"] == "perf_analyzer 2.51"
    assert m.meta["server_success_delta"] == m.meta["server_fail_delta"] == 0  # the server's count: the stand-in sent none


def test_perf_analyzer_failing_otherwise_is_one_line(tmp_path, served):
    pa = _stand_in(tmp_path, "echo 'error: failed to get model metadata: model not found' >&2\nexit 99\n")
    with pytest.raises(MeasurementError, match="perf_analyzer exited 99: error: failed to get model metadata"):
        _identity_point(tmp_path, pa, served)


def test_perf_analyzer_that_outlives_its_bound_is_killed(tmp_path, monkeypatch, served):
    import psutil

    monkeypatch.setattr(pa_mod, "run_timeout_s", lambda settings, factor: 1.0)
    pa = _stand_in(tmp_path, "echo started\nexec sleep 300\n")
    with pytest.raises(MeasurementError, match=r"did not finish within 1 s \(its last line: started\)"):
        _identity_point(tmp_path, pa, served)
    assert not [p for p in psutil.Process().children(recursive=True) if "sleep" in p.name()]


def test_a_server_that_dies_during_the_point_stops_perf_analyzer(tmp_path, identity_repo):
    """A real death: the stand-in kills its own server (started for this test alone) and waits."""
    import psutil

    with EmbeddedServer(identity_repo, tmp_path / "logs") as server:
        server.load(identity_repo / "identity")
        pa = _stand_in(tmp_path, f"kill -KILL {server.process.pid}\nexec sleep 300\n")
        with pytest.raises(ServerDied, match="is not running: it died while perf_analyzer measured"):
            _identity_point(tmp_path, pa, server)
        assert not [p for p in psutil.Process().children(recursive=True) if "sleep" in p.name()]
    assert not server.is_alive() and not leftover_shm(server.shm_prefix or "none")


def test_crosscheck_keeps_the_latest_row_of_closed_loop_performance_points_in_order():
    from tritonsuite.judge.crosscheck import PERFORMANCE_SCENARIOS, CrossPoint, _host

    assert PERFORMANCE_SCENARIOS == ("offline", "online")
    old, new, theirs = _row("suite", 10.0, 5.0, 9.0), _row("suite", 20.0, 5.0, 9.0), _row("perf_analyzer", 30.0, 4, 8)
    (point,) = cross_points([old, theirs, new])
    assert (point.scenario, point.deployment, point.batch, point.concurrency) == (
        "online", "bert_cpu_onnx_fp32_online", 1, 2)
    assert point.suite is new and point.perf_analyzer is theirs  # the latest of each generator
    offline = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    for r in offline:
        r.scenario = "offline"
    other_host = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    other_host[1].parameters = {"Host": "elsewhere"}  # not the same host: not joined
    bigger = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    for r in bigger:
        r.batch = None  # sorts as 0
    rate = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    for r in rate:
        r.request_rate, r.concurrency, r.batch = 5.0, None, 8
    search = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    for r in search:
        r.measurement = {**r.measurement, "search": {"bound": 1}}
        r.batch = 9
    accuracy = [Row(scenario="accuracy", model="m", deployment="m", loadgen=g) for g in ("suite", "perf_analyzer")]
    fewer = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    for r in fewer:
        r.concurrency = None
    points = cross_points([*offline, *other_host, *bigger, *rate, *search, *accuracy, *fewer, old, theirs])
    assert [(p.scenario, p.batch, p.concurrency) for p in points] == [
        ("offline", 1, 2), ("online", None, 2), ("online", 1, None), ("online", 1, 2)]
    assert _host(Row(scenario="online", model="m", deployment="m")) == "unknown host"
    nothing = Row(scenario="online", model="m", deployment="m", result={"Inferences/Second": 0.0, "p99 latency": True,
                                                                         "p50 latency": "3"})
    some = Row(scenario="online", model="m", deployment="m", result={"Inferences/Second": 2, "p99 latency": 4.0,
                                                                      "p50 latency": 1.0})
    assert CrossPoint("online", "m", 1, 1, nothing, some).ratio("Inferences/Second") is None  # ours is 0
    assert CrossPoint("online", "m", 1, 1, some, nothing).ratio("Inferences/Second") == 0.0
    assert CrossPoint("online", "m", 1, 1, some, nothing).ratio("p99 latency") is None  # a bool is no figure
    assert CrossPoint("online", "m", 1, 1, some, nothing).ratio("p50 latency") is None  # nor a string
    assert CrossPoint("online", "m", 1, 1, some, nothing).ratio("missing") is None
    assert CrossPoint("online", "m", 1, 1, some, some).figure(some, "Inferences/Second") == 2.0
    assert CrossPoint("online", "m", 1, 1, nothing, some).ratio("p50 latency") is None


def test_a_ratio_over_a_figure_below_one():
    from tritonsuite.judge.crosscheck import CrossPoint

    ours = Row(scenario="online", model="m", deployment="m", result={"Inferences/Second": 0.5})
    theirs = Row(scenario="online", model="m", deployment="m", result={"Inferences/Second": 2.0})
    assert CrossPoint("online", "m", 1, 1, ours, theirs).ratio("Inferences/Second") == 4.0


def test_crosscheck_joins_one_host_only_and_sorts_an_unset_concurrency_first():
    suite, theirs = _row("suite", 1.0, 1.0, 1.0), _row("perf_analyzer", 1.0, 1.0, 1.0)
    theirs.parameters = {"Host": "b"}
    assert cross_points([suite, theirs]) == []
    one = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    unset = [_row(g, 1.0, 1.0, 1.0) for g in ("suite", "perf_analyzer")]
    for r in one:
        r.concurrency = 1
    for r in unset:
        r.concurrency = None
    assert [p.concurrency for p in cross_points([*one, *unset])] == [None, 1]
