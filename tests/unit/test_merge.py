"""Many hosts, one report: two reports directories whose manifests name different hosts merge into one table with
a Host column; a comparison across them names the host difference instead of joining points."""
from __future__ import annotations

import json

from tests.unit.test_report import make_row, split_cells
from tritonsuite.cli import main
from tritonsuite.core.store import RawWriter, load_rows, raw_path
from tritonsuite.judge.compare import compare_runs


def _run(reports_dir, run_id, host, speed):
    rows = [make_row("offline", "bert_cpu_onnx_fp32_offline", b, 1, run_id=run_id, speed=speed, second=i)
            for i, b in enumerate((1, 4))]
    for row in rows:  # both runners report the same CPU model: only the manifests' host names tell them apart
        RawWriter(raw_path(reports_dir, "offline", run_id)).append(row)
    manifest = {"run_id": run_id, "host": {"name": host, "cpu": "AMD EPYC 7B13", "cores": 2, "gpus": "none"},
                "profile": {"name": "cpu", "sha256": "0" * 64}}
    (reports_dir / "raw" / f"manifest-{run_id}.json").write_text(json.dumps(manifest))
    return rows


def test_two_hosts_merge_into_one_table_with_a_host_column(tmp_path, capsys):
    a, b, out = tmp_path / "runner-a", tmp_path / "runner-b", tmp_path / "merged"
    _run(a, "20261124T100000-1", "gpu-runner-a", speed=1.0)
    _run(b, "20261124T100000-2", "gpu-runner-b", speed=2.0)
    assert main(["report", str(a), str(b), "--out", str(out)]) == 0
    assert "merged 4 rows from 2 directories: gpu-runner-a (2 rows), gpu-runner-b (2 rows)" in capsys.readouterr().out
    page = (out / "offline" / "bert.md").read_text()
    assert "## bert_cpu_onnx_fp32_offline @ gpu-runner-a" in page and "## bert_cpu_onnx_fp32_offline @ gpu-runner-b" in page
    table_lines = [split_cells(line) for line in page.splitlines() if line.startswith("|")]
    headers = [cells for cells in table_lines if cells[:2] == ["Host", "Batch"]]
    assert len(headers) == 2  # one results table per host, each with the Host column first
    hosts = [cells[0] for cells in table_lines if cells[0].startswith("gpu-runner")]
    assert hosts == ["gpu-runner-a"] * 2 + ["gpu-runner-b"] * 2
    assert (out / "offline" / "bert" / "throughput_vs_batch.png").is_file()
    assert sorted(p.name for p in (out / "raw").glob("manifest-*.json")) == ["manifest-20261124T100000-1.json",
                                                                            "manifest-20261124T100000-2.json"]
    assert not (a / "offline").exists()  # the inputs are read, never written
    merged = load_rows(out)
    runner_a = [r for r in merged if r.extra["host"] == "gpu-runner-a"]
    runner_b = [r for r in merged if r.extra["host"] == "gpu-runner-b"]
    comparison = compare_runs(runner_a, runner_b, then_label="runner a", now_label="runner b")
    assert not comparison.points  # never joined across hosts
    assert any(d.startswith("host: runner a ran on gpu-runner-a") and "not joined" in d
               for d in comparison.differences), comparison.differences


def test_several_directories_need_out(tmp_path, capsys):
    a = tmp_path / "a"
    _run(a, "r1", "h1", 1.0)
    try:
        main(["report", str(a), str(a)])
    except SystemExit as exc:
        assert exc.code == 2
    assert "give --out DIR" in capsys.readouterr().err
