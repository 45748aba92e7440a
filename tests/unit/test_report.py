"""Unit tests of tritonsuite.report: raw JSON-lines rows, markdown in the seeds' format, plots."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import points_of
from tritonsuite import report
from tritonsuite.core.rows import LATENCY_PARTS, RESULT_COLUMNS, Row
from tritonsuite.core.store import RawWriter, load_rows, raw_path
from tritonsuite.load.telemetry import GPU_COLUMNS
from tritonsuite.report import plot_offline, plot_online, render_markdown, write_reports
from tritonsuite.report.records import group_run

RUN = "20261122T021500-1234"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The results-table header line of the seeds (004_51fc69e82e8c87ae.txt, BERT offline, A30).
SEED_HEADER = ("|   Batch |   Concurrency |   Inferences/Second |   Client Send (ms) |   Network+Server Send/Recv (ms) "
               "|   Server Queue (ms) |   Server Compute Input (ms) |   Server Compute Infer (ms) "
               "|   Server Compute Output (ms) |   Client Recv (ms) |   p50 latency (ms) |   p90 latency (ms) "
               "|   p95 latency (ms) |   p99 latency (ms) |   avg latency (ms) |")

UNSTABLE_REASON = "throughput varied 14.2% over the last 3 windows (limit 10%)"


def _result(batch: int, concurrency: int, compute_ms: float) -> dict:
    parts = {
        "Client Send": 0.04,
        "Network+Server Send/Recv": 0.3 + 0.02 * batch,
        "Server Queue": 0.05 * concurrency,
        "Server Compute Input": 0.1,
        "Server Compute Infer": compute_ms,
        "Server Compute Output": 0.02,
        "Client Recv": 0.01,
    }
    avg = sum(parts.values())
    return {
        "Batch": batch, "Concurrency": concurrency,
        "Inferences/Second": 1000.0 * batch * concurrency / avg,
        **parts,
        "p50 latency": avg * 0.99, "p90 latency": avg * 1.05, "p95 latency": avg * 1.08,
        "p99 latency": avg * 1.2, "avg latency": avg,
    }


def make_row(scenario: str, deployment: str, batch: int, concurrency: int, *, status: str = "OK",
             reasons=(), run_id: str = RUN, speed: float = 1.0, second: int = 0) -> Row:
    compute = (2.0 + 1.1 * batch * (concurrency if scenario == "online" else 1)) * speed
    return Row.from_dict({
        "run_id": run_id, "scenario": scenario, "model": "bert", "title": "BERT", "deployment": deployment,
        "format": "onnx", "precision": "fp32", "batch": batch, "concurrency": concurrency,
        "parameters": {
            "GPU": "none (CPU: AMD EPYC 7B13)", "Backend": "python backend (onnxruntime)", "Precision": "FP32",
            "Model format": "ONNX", "Max batch size": 8, "Number of model instances": 1, "Export format": "onnx",
            "Device kind": "cpu", "Max Seq Length": 128,
        },
        "result": _result(batch, concurrency, compute),
        "measurement": {
            "protocol": "http", "shared_memory": "system" if scenario == "offline" else "none",
            "window": "1000 ms", "windows": 5, "stable_windows": 3, "stability_percentage": 10.0,
            "client_cpu_percent": 21.5, "client_bound": False, "requests_sent": 812, "server_success_delta": 812,
        },
        "status": status, "valid": status == "OK", "reasons": list(reasons),
        "timestamp": f"2026-11-22T02:15:{second:02d}+00:00",
    })


DEPLOYMENTS = ("bert_cpu_onnx_fp32_{s}", "bert_cpu_torchscript_fp32_{s}")


def offline_rows(run_id: str = RUN) -> list[Row]:
    """2 deployments x 3 batch sizes, written in an unsorted batch order; one UNSTABLE row."""
    rows = []
    second = 0
    for d, dep in enumerate(DEPLOYMENTS):
        for batch in (8, 1, 4):
            unstable = d == 0 and batch == 8
            rows.append(make_row("offline", dep.format(s="offline"), batch, 1, run_id=run_id, speed=1 + 0.4 * d,
                                 status="UNSTABLE" if unstable else "OK",
                                 reasons=[UNSTABLE_REASON] if unstable else [], second=second))
            second += 1
    return rows


def online_rows(run_id: str = RUN) -> list[Row]:
    rows = []
    second = 30
    for d, dep in enumerate(DEPLOYMENTS):
        for conc in (4, 1, 2):
            unstable = d == 1 and conc == 4
            rows.append(make_row("online", dep.format(s="online"), 1, conc, run_id=run_id, speed=1 + 0.4 * d,
                                 status="UNSTABLE" if unstable else "OK",
                                 reasons=[UNSTABLE_REASON] if unstable else [], second=second))
            second += 1
    return rows


def write_rows(reports_dir: Path, rows: list[Row], worker: str = "main") -> None:
    for row in rows:
        RawWriter(raw_path(reports_dir, row.scenario, row.run_id, worker)).append(row)


def split_cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in line.strip("|").split("|")]


def results_tables(md: str) -> list[list[str]]:
    """Every results table (header line starting with '|   Batch |') as its list of lines."""
    lines = md.splitlines()
    tables = []
    for i, line in enumerate(lines):
        if line.startswith("|") and split_cells(line)[0] == "Batch":
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            tables.append(lines[i:j])
    return tables


def assert_png(path: Path, min_bytes: int = 10_000) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert len(data) > min_bytes, f"{path} is suspiciously small ({len(data)} bytes)"
    # IHDR: width and height big-endian at bytes 16..24.
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 400 and height >= 300


# ---------------------------------------------------------------------------------------------------------------
# raw rows
# ---------------------------------------------------------------------------------------------------------------

def test_raw_path_layout(tmp_path):
    assert raw_path(tmp_path, "offline", RUN) == tmp_path / "raw" / f"offline-{RUN}-main.jsonl"
    assert raw_path(tmp_path, "online", RUN, worker="gw3").name == f"online-{RUN}-gw3.jsonl"


def test_append_load_round_trip_and_durable_lines(tmp_path):
    rows = offline_rows()
    path = raw_path(tmp_path / "reports", "offline", RUN)
    writer = RawWriter(path)  # creates parent directories
    assert path.parent.is_dir()
    for i, row in enumerate(rows):
        writer.append(row)
        # every append is a complete line on disk the moment it returns
        text = path.read_text()
        assert text.endswith("\n") and text.count("\n") == i + 1
    assert load_rows(tmp_path / "reports") == rows


def test_append_serialises_numpy_and_non_finite(tmp_path):
    np = pytest.importorskip("numpy")
    path = tmp_path / "raw" / "x.jsonl"
    RawWriter(path).append({"a": np.float32(1.5), "b": np.int64(3), "c": np.arange(3), "d": float("nan"),
                            "p": Path("/x")})
    line = path.read_text().strip()
    assert "NaN" not in line
    assert json.loads(line) == {"a": 1.5, "b": 3, "c": [0, 1, 2], "d": None, "p": "/x",
                                "timestamp": json.loads(line)["timestamp"]}  # stamped when written


def test_truncated_last_line_is_skipped_with_warning(tmp_path):
    rows = offline_rows()
    path = raw_path(tmp_path, "offline", RUN)
    write_rows(tmp_path, rows[:3])
    with open(path, "ab") as f:  # a crash in the middle of writing the 4th line
        f.write(json.dumps(rows[3].to_dict()).encode()[:57])
    with pytest.warns(RuntimeWarning, match="truncated last line"):
        loaded = load_rows(tmp_path)
    assert loaded == rows[:3]

    # a writer resuming the same file starts on a fresh line: the new row survives, the fragment is skipped
    RawWriter(path).append(rows[4])
    with pytest.warns(RuntimeWarning, match="unparsable line"):
        loaded = load_rows(tmp_path)
    assert loaded == rows[:3] + [rows[4]]


def test_run_id_filter(tmp_path):
    old, new = offline_rows("20261121T000000-1"), online_rows("20261122T000000-2")
    write_rows(tmp_path, old)
    write_rows(tmp_path, new)
    assert load_rows(tmp_path, run_id="20261122T000000-2") == new
    assert load_rows(tmp_path, run_id="20261121T000000-1") == old
    assert load_rows(tmp_path, run_id="nope") == []
    assert len(load_rows(tmp_path)) == len(old) + len(new)
    assert load_rows(tmp_path / "missing") == []


def test_load_rows_orders_by_timestamp_across_files(tmp_path):
    rows = offline_rows()
    # odd rows from worker gw1, even from gw0: file order differs from measurement order
    write_rows(tmp_path, rows[1::2], worker="gw1")
    write_rows(tmp_path, rows[0::2], worker="gw0")
    assert load_rows(tmp_path) == rows


def test_two_writers_in_one_dir_do_not_interfere(tmp_path):
    n = 200
    paths = [raw_path(tmp_path, "online", RUN, worker=w) for w in ("gw0", "gw1")]

    def work(i: int) -> None:
        writer = RawWriter(paths[i])
        for k in range(n):
            writer.append({"worker": i, "k": k, "pad": "x" * (50 + k % 300)})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, path in enumerate(paths):
        lines = path.read_text().splitlines()
        assert [json.loads(line)["k"] for line in lines] == list(range(n))
        assert {json.loads(line)["worker"] for line in lines} == {i}


def test_two_processes_append_to_different_files(tmp_path):
    src = Path(report.__file__).resolve().parents[1]
    code = ("import sys; from tritonsuite.core.store import RawWriter, raw_path\n"
            "w = RawWriter(raw_path(sys.argv[1], 'offline', 'r', sys.argv[2]))\n"
            "for k in range(300): w.append({'run_id': 'r', 'worker': sys.argv[2], 'k': k})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), w], env=env) for w in ("gw0", "gw1")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    rows = load_rows(tmp_path, run_id="r")
    for w in ("gw0", "gw1"):
        assert [r.extra["k"] for r in rows if r.extra["worker"] == w] == list(range(300))


def test_module_imports_without_matplotlib_or_pandas():
    src = Path(report.__file__).resolve().parents[1]
    code = ("import sys, tritonsuite.report\n"
            "bad = [m for m in ('matplotlib', 'pandas', 'pytest') if m in sys.modules]\n"
            "assert not bad, bad\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)


# ---------------------------------------------------------------------------------------------------------------
# markdown
# ---------------------------------------------------------------------------------------------------------------

def test_constants_match_the_seed_schema():
    unitless = ("Batch", "Concurrency", "Inferences/Second")
    assert split_cells(SEED_HEADER) == [c if c in unitless else f"{c} (ms)" for c in RESULT_COLUMNS]
    assert set(LATENCY_PARTS) <= set(RESULT_COLUMNS)
    assert [c for c in RESULT_COLUMNS if c in LATENCY_PARTS] == list(LATENCY_PARTS)  # same order


def test_markdown_results_table_matches_seed_header():
    md = render_markdown("bert", "offline", points_of(offline_rows()))
    tables = results_tables(md)
    assert len(tables) == 2  # one per deployment
    expected = split_cells(SEED_HEADER) + ["Status", "Client CPU (%)", "Other CPU (%)", "GPU Utilization (%)",
                                           "GPU Memory Used (MiB)", "GPU Power (W)", "GPU SM Clock (MHz)", "Samples"]
    for table in tables:
        header, separator = table[0], table[1]
        assert split_cells(header) == expected
        assert header.startswith(SEED_HEADER)  # same layout as the seed, not only the same names
        seps = split_cells(separator)
        assert len(seps) == len(expected)
        assert all(s.endswith(":") and set(s[:-1]) == {"-"} for s in seps)  # right-aligned
        assert all(len(split_cells(row)) == len(expected) for row in table[2:])


def test_markdown_sections_parameters_and_description():
    rows = offline_rows()
    md = render_markdown("bert", "offline", points_of(rows))
    assert md.startswith("# BERT offline results\n")
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings == ["bert_cpu_onnx_fp32_offline", "bert_cpu_torchscript_fp32_offline"]  # first-seen order
    assert report.SCENARIO_DESCRIPTIONS["offline"] in md
    assert "protocol http" in md and "1000 ms" in md and "10.0%" in md
    lines = md.splitlines()
    i = lines.index(next(line for line in lines if line.startswith("| Parameter Name")))
    assert split_cells(lines[i]) == ["Parameter Name", "Parameter Value"]
    assert all(c.startswith(":") and set(c[1:]) == {"-"} for c in split_cells(lines[i + 1]))  # left-aligned
    params = dict(split_cells(line) for line in lines[i + 2:i + 11])
    assert params["Max batch size"] == "8"
    assert params["GPU"] == "none (CPU: AMD EPYC 7B13)"
    assert params["Max Seq Length"] == "128"

    online = render_markdown("bert", "online", points_of(online_rows()))
    assert online.startswith("# BERT online results\n")
    assert report.SCENARIO_DESCRIPTIONS["online"] in online


def test_markdown_rows_sorted_and_formatted():
    rows = offline_rows()
    tables = results_tables(render_markdown("bert", "offline", points_of(rows)))
    body = [split_cells(line) for line in tables[0][2:]]
    assert [r[0] for r in body] == ["1", "4", "8"]
    assert [r[1] for r in body] == ["1", "1", "1"]
    src = next(r for r in rows if r.batch == 4 and r.deployment.startswith("bert_cpu_onnx"))
    cells = dict(zip(split_cells(tables[0][0]), body[1]))
    assert cells["Inferences/Second"] == f"{src.result['Inferences/Second']:.1f}"
    assert cells["Server Compute Infer (ms)"] == f"{src.result['Server Compute Infer']:.1f}"  # >= 1 ms
    assert cells["Client Send (ms)"] == "0.04"  # below 1 ms: two decimals, not "0.0"
    assert cells["Client Recv (ms)"] == "0.01"
    assert cells["Status"] == "OK" and cells["Client CPU (%)"] == "21.5"
    assert [cells[c] for c in GPU_COLUMNS] == ["-"] * 4  # not sampled (no GPU)
    assert [r[-8] for r in body] == ["OK", "OK", "UNSTABLE"]

    online = results_tables(render_markdown("bert", "online", points_of(online_rows())))
    assert [split_cells(line)[1] for line in online[1][2:]] == ["1", "2", "4"]


def test_markdown_lists_non_ok_reasons():
    md = render_markdown("bert", "offline", points_of(offline_rows()))
    assert f"- batch 8, concurrency 1: UNSTABLE: {UNSTABLE_REASON}" in md
    bullets = [line for line in md.splitlines() if line.startswith("- batch")]
    assert len(bullets) == 1  # OK rows are not listed


def test_markdown_failed_row_without_result():
    rows = offline_rows()[:3]
    rows.append(Row.failed(reason="MeasurementError: server returned HTTP 500", scenario="offline", model="bert",
                           title="BERT", deployment=rows[0].deployment, batch=16, concurrency=1))
    md = render_markdown("bert", "offline", points_of(rows))
    body = [split_cells(line) for line in results_tables(md)[0][2:]]
    assert body[-1][:3] == ["16", "1", "-"] and body[-1][-8] == "FAILED"
    assert "- batch 16, concurrency 1: FAILED: MeasurementError: server returned HTTP 500" in md


def test_markdown_embeds_plots():
    md = render_markdown("bert", "offline", points_of(offline_rows()))
    assert "(bert/throughput_vs_batch.png)" in md and "(bert/latency_vs_batch.png)" in md
    md = render_markdown("bert", "online", points_of(online_rows()))
    assert "(bert/latency_vs_concurrency.png)" in md
    assert "![" not in render_markdown("bert", "online", points_of(online_rows()), plots=[])


# ---------------------------------------------------------------------------------------------------------------
# plots and write_reports
# ---------------------------------------------------------------------------------------------------------------

def test_plot_offline_writes_pngs(tmp_path):
    paths = plot_offline(points_of(offline_rows()), tmp_path / "plots")
    assert [p.name for p in paths] == ["throughput_vs_batch.png", "latency_vs_batch.png"]
    for p in paths:
        assert_png(p)


def test_plot_online_writes_png(tmp_path):
    paths = plot_online(points_of(online_rows()), tmp_path / "plots")
    assert [p.name for p in paths] == ["latency_vs_concurrency.png", "latency_vs_throughput.png"]
    for path in paths:
        assert_png(path)


def test_plots_with_no_measured_values_still_write_files(tmp_path):
    failed = [Row.failed(reason="it raised", scenario="offline", model="bert", deployment="d", batch=1,
                         concurrency=1)]
    for p in plot_offline(points_of(failed), tmp_path / "off") + plot_online(points_of([]), tmp_path / "on"):
        assert p.read_bytes()[:8] == PNG_SIGNATURE


def test_write_reports(tmp_path):
    write_rows(tmp_path, offline_rows() + online_rows())
    write_rows(tmp_path, offline_rows("20261101T000000-9"))  # another run, filtered out
    accuracy = {
        "run_id": RUN, "scenario": "accuracy", "model": "bert", "deployment": "bert_cpu_onnx_fp32_offline",
        "metrics": {"f1_vs_reference": 99.6, "max_abs_err": {"output__0": 2.5e-5}},
        "thresholds": {"f1_vs_reference": {"min": 99.0}, "max_abs_err": {"output__0": 1e-3}},
        "status": "OK", "valid": True, "reasons": [], "timestamp": "2026-11-22T02:20:00+00:00",
    }
    RawWriter(raw_path(tmp_path, "accuracy", RUN)).append(accuracy)

    written = write_reports(tmp_path, run_id=RUN)
    names = sorted(str(p.relative_to(tmp_path)) for p in written)
    assert names == sorted([
        "offline/bert.md", "offline/bert/throughput_vs_batch.png", "offline/bert/latency_vs_batch.png",
        "online/bert.md", "online/bert/latency_vs_concurrency.png", "online/bert/latency_vs_throughput.png",
        "accuracy/bert.md", "summary.md", "index.html",
    ])
    for p in written:
        if p.suffix == ".png":
            assert_png(p)
    offline_md = (tmp_path / "offline" / "bert.md").read_text()
    # image links resolve relative to the markdown file
    for target in ("bert/throughput_vs_batch.png", "bert/latency_vs_batch.png"):
        assert f"({target})" in offline_md and (tmp_path / "offline" / target).is_file()
    assert "20261101T000000-9" not in offline_md
    assert sum(len(t) - 2 for t in results_tables(offline_md)) == 6

    acc = (tmp_path / "accuracy" / "bert.md").read_text()
    table = [split_cells(line) for line in acc.splitlines() if line.startswith("|")]
    assert table[0] == ["deployment", "metric", "value", "threshold", "status"]
    by_metric = {r[1]: r for r in table[2:]}
    assert by_metric["f1_vs_reference"][2:] == ["99.6", "min 99.0", "OK"]
    assert by_metric["max_abs_err.output__0"][2:4] == ["2.5e-05", "0.001"]


def test_row_round_trip_keeps_unknown_keys_and_reads_old_rows():
    row = make_row("online", "d", 1, 4, status="UNSTABLE", reasons=["spread"])
    assert Row.from_dict(row.to_dict()) == row and row.to_dict()["valid"] is False
    newer = {**row.to_dict(), "gpu_telemetry": {"util": 50}}  # a newer writer's key survives a round trip
    assert Row.from_dict(newer).to_dict()["gpu_telemetry"] == {"util": 50}
    old = {"scenario": "offline", "model": "m", "deployment": "d", "valid": True,
           "result": {"Batch": 4, "Concurrency": 1}}  # before statuses and coordinates had fields
    assert (Row.from_dict(old).status, Row.from_dict(old).batch, Row.from_dict(old).concurrency) == ("OK", 4, 1)
    with pytest.raises(ValueError, match="row status 'MAYBE'; valid choices: OK, UNSTABLE, INVALID, STOPPED, FAILED"):
        Row(scenario="offline", model="m", deployment="d", status="MAYBE")


def test_title_comes_from_the_rows():
    rows = [Row.from_dict({**r.to_dict(), "title": "My Model"}) for r in offline_rows()]
    assert render_markdown("bert", "offline", points_of(rows)).startswith("# My Model offline results\n")
    untitled = [Row.from_dict({**r.to_dict(), "title": ""}) for r in offline_rows()]
    assert render_markdown("bert", "offline", points_of(untitled)).startswith("# bert offline results\n")


def test_summary_for_a_ci_job(tmp_path):
    from tritonsuite.report import render_summary

    accuracy = Row.from_dict({"scenario": "accuracy", "model": "bert", "title": "BERT", "deployment": "bert_acc",
                              "status": "FAILED", "run_id": RUN, "baseline": {
                                  "regressions": ["f1: baseline 88, now 87, delta -1, allowed -0.1"], "compared": 3}})
    md = render_summary(group_run(tmp_path, offline_rows() + [accuracy], RUN))
    assert md.startswith(f"# tritonsuite run {RUN}\n")
    assert "| BERT  | bert_acc   | FAILED | regressed: f1: baseline 88, now 87, delta -1, allowed -0.1 |" in md
    best = max((r for r in offline_rows() if r.deployment.startswith("bert_cpu_onnx") and r.status == "OK"),
               key=lambda r: r.result["Inferences/Second"])
    line = next(l for l in md.splitlines() if l.startswith("| bert_cpu_onnx_fp32_offline"))
    assert f"{best.result['Inferences/Second']:.1f}" in line and "batch 4, concurrency 1" in line and "2/3" in line
    write_rows(tmp_path, offline_rows() + [accuracy])
    assert (tmp_path / "summary.md") in write_reports(tmp_path, RUN)


def test_markdown_gpu_telemetry_cells_read_mean_and_max():
    rows = offline_rows()
    rows[0].measurement["gpu"] = {c: {"mean": 41.26, "max": 97.0} for c in GPU_COLUMNS}
    table = results_tables(render_markdown("bert", "offline", points_of(rows)))[0]
    header = split_cells(table[0])
    cells = next(dict(zip(header, split_cells(line))) for line in table[2:] if split_cells(line)[0] == str(rows[0].batch))
    assert [cells[c] for c in GPU_COLUMNS] == ["41 / 97"] * 4


def load_rows_with_rates_and_a_search() -> list[Row]:
    """The online sweep, two open-loop points, and a request-rate search at p99 <= 30 ms: evidence and answer."""
    dep = DEPLOYMENTS[0].format(s="online")
    rows = [r for r in online_rows() if r.deployment == dep]
    for i, (rate, late) in enumerate(((50.0, 0.1), (200.0, 3.5))):
        row = make_row("online", dep, 1, 1, second=40 + i, status="OK" if late < 1 else "INVALID",
                       reasons=[] if late < 1 else ["the load generator could not keep the schedule: 3.5% ..."])
        row.concurrency, row.request_rate = None, rate
        row.result["Concurrency"] = 0.7
        row.measurement.update(load="open loop", offered_rate=rate, achieved_rate=rate * 0.99, late_percent=late)
        rows.append(row)
    tag = {"kind": "request_rate", "bound": "p99 <= 30 ms"}
    for step, (rate, p99, within) in enumerate(((100.0, 12.0, True), (200.0, 80.0, False), (150.0, 25.0, True)), 1):
        row = make_row("online", dep, 1, 1, second=50 + step, status="OK" if within else "STOPPED")
        row.concurrency, row.request_rate = None, rate
        row.result["p99 latency"] = p99
        row.measurement["search"] = {**tag, "step": step, "role": "evidence", "within": within,
                                     "why": f"p99 {p99:.2f} ms" + ("" if within else " > 30 ms")}
        rows.append(row)
    answer = copy.deepcopy(rows[-1])
    answer.measurement["search"] = {**answer.measurement["search"], "role": "result", "max": 150.0,
                                    "answer": "max req/s at p99 <= 30 ms: 150.0 req/s (p99 25.00 ms; ...)"}
    return rows + [answer]


def test_online_page_has_rate_rows_and_the_search_answer_with_its_evidence(tmp_path):
    rows = load_rows_with_rates_and_a_search()
    md = render_markdown("bert", "online", points_of(rows))
    tables = results_tables(md)
    assert len(tables[0]) - 2 == 3  # the concurrency sweep alone in the seeds' table
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|   Offered (req/s)"))
    rate_lines = [split_cells(line) for line in lines[start:start + 4]]
    assert rate_lines[0][:4] == ["Offered (req/s)", "Achieved (req/s)", "Late (%)", "In flight"]
    assert [r[0] for r in rate_lines[2:]] == ["50.0", "200.0"] and rate_lines[3][2] == "3.50"
    assert rate_lines[3][10] == "INVALID"
    assert "**max req/s at p99 <= 30 ms: 150.0 req/s (p99 25.00 ms; ...)**" in md
    evidence = [split_cells(line) for line in md.splitlines() if line.startswith("| ") and " req/s " in line]
    assert [(e[0], e[1], e[4], e[5]) for e in evidence] == [("1", "100.0 req/s", "OK", "yes"),
                                                            ("2", "200.0 req/s", "STOPPED", "no"),
                                                            ("3", "150.0 req/s", "OK", "yes")]
    from tritonsuite.report import render_summary

    summary = render_summary(group_run(tmp_path, rows, RUN))
    assert "## Most load within the latency bound" in summary
    assert f"- {rows[0].deployment}: max req/s at p99 <= 30 ms: 150.0 req/s" in summary
    paths = plot_online(points_of(rows), tmp_path)
    assert [p.name for p in paths] == ["latency_vs_concurrency.png", "latency_vs_throughput.png"]
    for path in paths:
        assert_png(path)
