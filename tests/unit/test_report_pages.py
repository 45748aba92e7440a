"""The markdown pages of stored rows stay what they were: ``fixtures/report/rows`` (a tiny-profile run's rows, trimmed,
with synthetic rate, search, mix, tune, perf_analyzer and hostile-name rows) gives, byte for byte, the pages in
``fixtures/report/pages``, written by the markdown writer before the presenter seam existed (commit "fixtures/report:
today's markdown pages of stored rows"). A page that changes on purpose is rewritten with
``python tests/unit/test_report_pages.py`` and the change shows in the diff of ``fixtures/report/pages``.
"""
from __future__ import annotations

import contextlib
import io
import shutil
import sys
from pathlib import Path

from tritonsuite.cli import main as cli_main
from tritonsuite.core.rows import Row
from tritonsuite.core.store import RawWriter, load_rows, raw_path
from tritonsuite.report import write_reports


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "report"
ROWS, PAGES = FIXTURES / "rows", FIXTURES / "pages"
NOW = "now-run"


def _run_id(reports: Path) -> str:
    return next((reports / "raw").glob("manifest-*.json")).stem.split("-", 1)[1]


def _slower(row: Row) -> Row:
    """The same point measured slower: 30% less throughput, every latency 1.5 times longer."""
    row.run_id = NOW
    if row.result.get("Inferences/Second"):
        row.result["Inferences/Second"] *= 0.7
    if row.measurement.get("latency_samples_ms"):
        row.measurement["latency_samples_ms"] = [x * 1.5 for x in row.measurement["latency_samples_ms"]]
    return row


def pages(tmp: Path) -> dict[str, str]:
    """Every markdown page of the stored rows (relative path -> text), and what ``tritonsuite compare`` and
    ``tritonsuite crosscheck`` print for them."""
    reports = tmp / "reports"
    shutil.copytree(ROWS, reports)
    run = _run_id(reports)
    written = write_reports(reports, run)
    found = {str(p.relative_to(reports)): p.read_text(encoding="utf-8") for p in written if p.suffix == ".md"}
    writer = RawWriter(raw_path(reports, "online", NOW, "main"))  # a later run of the same points, slower
    for row in load_rows(reports, run):
        writer.append(_slower(row))
    for name, argv in (("compare.md", ["compare", run, NOW, "--reports-dir", str(reports), "--perf-gate", "10"]),
                       ("crosscheck-command.md", ["crosscheck", str(reports), "--run", run])):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            cli_main(argv)
        found[name] = out.getvalue()
    return found


def test_the_markdown_pages_of_stored_rows_are_unchanged(tmp_path):
    found = pages(tmp_path)
    expected = {str(p.relative_to(PAGES)): p.read_text(encoding="utf-8") for p in PAGES.rglob("*.md")}
    assert set(found) == set(expected)
    for name, text in expected.items():
        assert found[name] == text, f"{name} differs from fixtures/report/pages/{name}"


def test_the_fixture_holds_every_kind_of_page():
    # a fixture without these rows would let a presenter drop a page unnoticed
    names = {str(p.relative_to(PAGES)) for p in PAGES.rglob("*.md")}
    assert {"summary.md", "crosscheck.md", "compare.md", "mix/m.md", "offline/bert.md", "online/tft.md",
            "accuracy/bert.md", "tune/bert_tiny_onnx_fp32_online/summary.md"} <= names
    assert any(n.startswith("conformance/") for n in names)
    assert "regression" in (PAGES / "compare.md").read_text()


if __name__ == "__main__":  # rewrite the expected pages (a deliberate change of the markdown)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shutil.rmtree(PAGES, ignore_errors=True)
        for name, text in pages(Path(tmp)).items():
            (PAGES / name).parent.mkdir(parents=True, exist_ok=True)
            (PAGES / name).write_text(text, encoding="utf-8")
    sys.exit(0)


def test_the_run_is_read_once_into_typed_points_and_page_groups(tmp_path):
    from tritonsuite.report.records import read_run

    run = read_run(ROWS, _run_id(ROWS))
    assert ("offline", "bert") in run.pages and ("accuracy", "bert") in run.pages
    assert not any(scenario in ("tune", "conformance", "mix") for scenario, _ in run.pages)
    assert set(run.conformance) == {"bert_tiny_onnx_fp32_offline", "bert_tiny_onnx_fp32_online"}
    assert list(run.mixes) == ["m"] and list(run.tune) == ["bert_tiny_onnx_fp32_online"] and len(run.cross) == 1
    assert run.header.startswith(f"Run `{run.run_id}`")
    performance = [r for r in run.rows if r.scenario in ("offline", "online")]
    assert len(run.points) == len(performance) > 20
    for point, row in zip(run.points, performance):
        assert point.row is row and point.throughput_per_s == row.result.get("Inferences/Second")
        assert point.latency_ms["p99 latency"] == row.result.get("p99 latency")
    measured = next(p for p in run.points if p.status == "OK" and p.intervals_ms)
    low, high = measured.intervals_ms["p99 latency"]
    assert low is None or low <= measured.latency_ms["p99 latency"]
    assert sum(v or 0.0 for v in measured.breakdown_ms.values()) > 0
    evil = next(p for p in run.points if p.model == "evil")
    assert evil.status == "FAILED" and evil.throughput_per_s is None and evil.reasons[0].startswith("<img")


def test_presenters_are_named_and_run_in_order(tmp_path):
    import pytest

    shutil.copytree(ROWS, tmp_path / "r")
    with pytest.raises(ValueError, match="presenter 'pdf'; valid choices: markdown"):
        write_reports(tmp_path / "r", presenters=("pdf",))
    assert write_reports(tmp_path / "r", presenters=()) == []
    assert not (tmp_path / "r" / "summary.md").exists()
