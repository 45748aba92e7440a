"""The HTML presenter without a browser: ``index.html`` of the stored rows in ``fixtures/report`` read back with the
standard library's HTML parser (the browser tests, tests/test_report_browser.py, open it in Chromium)."""
from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tritonsuite.cli import main as cli_main
from tritonsuite.core import access as access_module
from tritonsuite.report import write_reports
from tritonsuite.report.htmlkit import plotly_js
from tritonsuite.report.records import read_run

ROWS = Path(__file__).resolve().parents[2] / "fixtures" / "report" / "rows"


class Page(HTMLParser):
    """Every element's tag and attributes, the text of each <td>, and the script elements' contents."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.cells: list[tuple[dict, str]] = []
        self.headings: list[tuple[dict, str]] = []
        self._in: tuple[str, dict] | None = None
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "td", "h3"):
            self._in, self._text = (tag, dict(attrs)), []

    def handle_endtag(self, tag):
        if self._in and tag == self._in[0]:
            found = {"script": self.scripts, "td": self.cells, "h3": self.headings}[tag]
            found.append((self._in[1], "".join(self._text)))
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._text.append(data)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    reports = tmp_path_factory.mktemp("html") / "reports"
    shutil.copytree(ROWS, reports)
    run_id = next((reports / "raw").glob("manifest-*.json")).stem.split("-", 1)[1]
    paths = write_reports(reports, run_id, presenters=("html",))
    return reports, run_id, paths


def test_one_self_contained_page_with_plotly_inlined_and_nothing_to_fetch(written):
    reports, _, paths = written
    assert paths == [reports / "index.html"]
    text = paths[0].read_text(encoding="utf-8")
    page = Page(text)
    scripts = [attrs for attrs, _ in page.scripts]
    assert scripts == [{"type": "application/json", "id": "figures"}, {}, {}]  # data, Plotly, the page's own
    assert page.scripts[1][1] == plotly_js() and len(page.scripts[2][1]) < 6000
    for tag, attrs in page.elements:
        for name in ("src", "href", "action", "data"):
            assert not str(attrs.get(name, "")).startswith(("http:", "https:", "//")), (tag, attrs)
    assert not any(tag in ("link", "img", "iframe") for tag, _ in page.elements)
    csp = next(a["content"] for t, a in page.elements if t == "meta" and a.get("http-equiv"))
    assert csp.startswith("default-src 'none'")  # the browser itself refuses any fetch


def test_hostile_names_and_reasons_are_text_not_markup(written):
    text = (written[0] / "index.html").read_text(encoding="utf-8")
    page = Page(text)
    assert "<script>alert(1)" not in text and "<img src=x" not in text
    assert not any(tag == "img" for tag, _ in page.elements)
    assert any(c == "<img src=x onerror=alert(2)> & | pipes" for _, c in page.cells)  # shown as written
    figures = json.loads(page.scripts[0][1])
    labels = json.dumps(figures)
    assert "<script" not in labels and "<img" not in labels  # Plotly renders tags in its labels
    assert "<script>alert(1)</script>_onnx" in {h for _, h in page.headings}  # shown as written


def test_every_deployment_has_its_table_and_plots_with_the_runs_numbers(written):
    reports, run_id, _ = written
    page = Page((reports / "index.html").read_text(encoding="utf-8"))
    figures = json.loads(page.scripts[0][1])
    run = read_run(reports, run_id)
    headings = {h for _, h in page.headings}
    assert {p.series for p in run.points} | set(run.conformance) | set(run.tune) <= headings
    values = {float(a["data-value"]) for a, _ in page.cells if "data-value" in a}
    for point in run.points:
        if point.throughput_per_s is not None:
            assert point.throughput_per_s in values, point.label
    plotted = [f for f in figures.values() if "p99 latency against throughput" in f["layout"]["title"]["text"]]
    xs = {x for f in plotted for trace in f["data"] for x in trace["x"]}
    assert {p.throughput_per_s for p in run.points if p.throughput_per_s is not None
            and p.latency_ms["p99 latency"] is not None} == xs
    kinds = {a.get("data-kind") for t, a in page.elements if t == "div" and "plot" in a.get("class", "").split()}
    assert {"throughput-latency", "breakdown", "batch-sweep", "accuracy", "tune", "mix", "crosscheck"} <= kinds
    assert len(figures) == sum(1 for t, a in page.elements if a.get("data-figure"))
    checks = [c for a, c in page.cells if a.get("class") in ("verdict-pass", "verdict-fail", "verdict-skipped")]
    assert len(checks) == sum(len(rows) for rows in run.conformance.values()) > 20
    statuses = [a["data-status"] for t, a in page.elements if t == "tr" and "data-status" in a]
    assert set(statuses) == {r.status for r in run.rows}


def test_the_header_names_the_host_versions_profile_backends_and_command(written):
    reports, run_id, _ = written
    text = (reports / "index.html").read_text(encoding="utf-8")
    manifest = json.loads(next((reports / "raw").glob("manifest-*.json")).read_text())
    page = Page(text)
    filters = {a["data-key"] for t, a in page.elements if t == "select"}
    assert filters == {"scenario", "model", "format", "precision", "status"}
    for needle in (manifest["host"]["cpu"], manifest["profile"]["name"], manifest["server"], "onnxruntime",
                   f"torch {manifest['versions']['torch']}", "--gpu tiny"):
        assert needle in text, needle


def test_secrets_are_redacted_from_the_page(tmp_path):
    shutil.copytree(ROWS, tmp_path / "r")
    before = set(access_module._SECRETS)
    try:
        access_module.remember("ts-secret-token-1234")
        raw = next((tmp_path / "r" / "raw").glob("offline-*.jsonl"))
        raw.write_text(raw.read_text().replace("throughput varied", "ts-secret-token-1234 varied"))
        write_reports(tmp_path / "r", presenters=("html",))
    finally:
        access_module._SECRETS.intersection_update(before)
    text = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "ts-secret-token-1234" not in text and "&lt;redacted&gt; varied" in text


def test_no_rows_no_page(tmp_path):
    (tmp_path / "raw").mkdir()
    assert write_reports(tmp_path) == [] and not (tmp_path / "index.html").exists()


def test_the_report_command_writes_the_page_alone_with_html(tmp_path, capsys):
    shutil.copytree(ROWS, tmp_path / "r")
    assert cli_main(["report", str(tmp_path / "r"), "--html"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "r" / "index.html")]
    assert not (tmp_path / "r" / "summary.md").exists()
    assert cli_main(["report", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed[-1].endswith("index.html") and any(p.endswith("summary.md") for p in printed)
    assert "[index.html](index.html)" in (tmp_path / "r" / "summary.md").read_text()


def test_reduced_precision_is_shown_beside_fp32_with_its_threshold(tmp_path):
    from tritonsuite.core.store import RawWriter, load_rows, raw_path

    shutil.copytree(ROWS, tmp_path / "r")
    run_id = next((tmp_path / "r" / "raw").glob("manifest-*.json")).stem.split("-", 1)[1]
    fp32, fp16 = (next(r for r in load_rows(tmp_path / "r", run_id) if r.scenario == "accuracy" and r.format == "onnx")
                  for _ in range(2))  # the stored fp32 record, and a copy of it made fp16
    fp16.precision, fp16.deployment = "fp16", fp32.deployment.replace("fp32", "fp16")
    fp16.metrics = {**fp32.metrics, "exact_match_vs_reference": 97.5, "f1_vs_reference": 98.25}
    fp16.thresholds = {**fp32.thresholds, "exact_match_vs_reference": ">= 99", "f1_vs_reference": ">= 98"}
    fp16.metric_status = {**fp32.metric_status, "exact_match_vs_reference": "FAILED"}
    fp16.status = "FAILED"
    RawWriter(raw_path(tmp_path / "r", "accuracy", run_id, "fp16")).append(fp16)
    write_reports(tmp_path / "r", run_id, presenters=("html",))
    text = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    table = Page(text[text.index('<table class="sortable reduced">'):])
    cells = [(a, c) for a, c in table.cells]
    rows = [cells[i:i + 10] for i in range(0, len(cells), 10)][:len(fp16.metrics)]
    shown = {row[2][1]: row for row in rows}
    assert set(shown) == set(fp16.metrics) and {row[1][1] for row in rows} == {"fp16"}
    for name, value in fp16.metrics.items():
        row = shown[name]
        assert float(row[3][0]["data-value"]) == fp32.metrics[name] and float(row[4][0]["data-value"]) == value
    em = shown["exact_match_vs_reference"]
    assert em[5][1] == "-2.5" and em[6][1] == ">= 99" and float(em[6][0]["data-value"]) == 99.0
    assert em[7][1] == "FAILED" and em[8][1] == fp16.deployment and em[9][1] == fp32.deployment
    figures = json.loads(Page(text).scripts[0][1])
    plot = next(f for f in figures.values() if "reduced precision against fp32" in f["layout"]["title"]["text"])
    bars = {t["name"]: dict(zip(t["x"], t["y"])) for t in plot["data"]}
    assert set(bars) == {"fp32", "fp16", "fp16 threshold"}
    assert bars["fp16"]["onnx: f1_vs_reference"] == 98.25 and bars["fp32"]["onnx: f1_vs_reference"] == 100.0
    assert bars["fp16 threshold"]["onnx: exact_match_vs_reference"] == 99.0
    assert "onnx: output__0 max rel error" not in bars["fp16"]  # no numeric threshold: in the table, not the plot
    shutil.copytree(ROWS, tmp_path / "fp32")  # a run of fp32 alone has no such section
    write_reports(tmp_path / "fp32", run_id, presenters=("html",))
    assert "reduced precision against fp32" not in (tmp_path / "fp32" / "index.html").read_text(encoding="utf-8")
