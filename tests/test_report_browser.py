"""reports/index.html of a real run, opened in a real browser: Debian's Chromium driven by Playwright (pointed at the
system's binary; Playwright's own browser download is not used). The page shows every table and plot with the run's
numbers, its filters and sorting work, it fetches nothing and logs no error, and a screenshot of it is not blank.
Skipped, with one line, where Chromium or Playwright is not installed (.ci/run installs both)."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers import TINY_PROFILE, run_pytest
from tritonsuite.core.store import load_rows

CHROMIUM = os.environ.get("TRITONSUITE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; or set TRITONSUITE_CHROMIUM)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="no Playwright (pip install playwright)")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny-profile run of every scenario that writes rows to a page: offline, online, accuracy (fp32, and fp16
    against it), conformance."""
    tmp = tmp_path_factory.mktemp("browser")
    profile = TINY_PROFILE.replace("    precisions: [fp32]\n",
                                   "    precisions: [fp32]\n    accuracy_precisions: [fp16]\n")
    assert profile != TINY_PROFILE
    result = run_pytest(["--gpu", "tiny", "-m", "offline or online or accuracy or conformance", "--formats", "onnx",
                         "-q", "-p", "no:warnings"], tmp, profile=profile, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    reports = tmp / "reports"
    assert (reports / "index.html").is_file(), result.stdout[-2000:]
    return reports, load_rows(reports)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser, run):
    """The run's page, loaded, with every plot drawn; what it requested and logged."""
    reports, _ = run
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    tab.requests, tab.problems = [], []
    tab.on("request", lambda r: tab.requests.append(r.url))
    tab.on("console", lambda m: tab.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
           else None)
    tab.on("pageerror", lambda e: tab.problems.append(f"page error: {e}"))
    started = time.monotonic()
    tab.goto((reports / "index.html").as_uri(), wait_until="load")
    tab.load_seconds = time.monotonic() - started
    plots = tab.evaluate("window.tritonsuiteDrawAll()")
    tab.wait_for_function(f"document.querySelectorAll('.plot.js-plotly-plot .main-svg').length >= {plots}")
    yield tab
    context.close()


def _tables(tab) -> list[dict]:
    """Each block's heading and its first table: the header cells and each row's cells (text and data-value)."""
    return tab.evaluate("""() => Array.from(document.querySelectorAll('section.block')).map(b => {
        const t = b.querySelector('table');
        return {heading: b.querySelector('h3').textContent, scenario: b.dataset.scenario, hidden: b.hidden,
                head: t ? Array.from(t.tHead.rows[0].cells).map(c => c.textContent) : [],
                rows: t ? Array.from(t.tBodies[0].rows).map(r => ({hidden: r.hidden, status: r.dataset.status,
                    cells: Array.from(r.cells).map(c => [c.textContent, c.dataset.value])})) : []};
    })""")


def test_it_opens_offline_fetches_nothing_and_logs_no_error(page, run):
    reports, _ = run
    assert page.requests == [(reports / "index.html").as_uri()]
    assert page.problems == []
    assert page.load_seconds < 10  # a tiny run's page; the large run's figure is in docs/report.md
    assert page.evaluate("typeof window.Plotly.newPlot") == "function"


def test_every_row_is_in_its_deployments_table_with_its_figures(page, run):
    _, rows = run
    tables = {(t["scenario"], t["heading"]): t for t in _tables(page)}
    performance = [r for r in rows if r.scenario in ("offline", "online")]
    assert len(performance) >= 4
    for row in performance:
        table = tables[row.scenario, row.deployment]
        column = table["head"].index("Inferences/Second")
        shown = [float(cells[column][1]) for cells in (r["cells"] for r in table["rows"]) if cells[column][1]]
        if row.result.get("Inferences/Second") is not None:
            assert any(abs(v - row.result["Inferences/Second"]) < 1e-9 for v in shown), row.deployment
        status = table["head"].index("Status")
        assert row.status in [r["cells"][status][0] for r in table["rows"]]
    for deployment in {r.deployment for r in rows if r.scenario == "conformance"}:
        checks = [r for r in rows if r.scenario == "conformance" and r.deployment == deployment]
        listed = tables["conformance", deployment]["rows"]
        assert len(listed) == len(checks) and {r["cells"][0][0] for r in listed} == {r.extra["check"] for r in checks}
    accuracy = next(t for (scenario, _), t in tables.items() if scenario == "accuracy")
    assert {r.deployment for r in rows if r.scenario == "accuracy"} <= {r["cells"][0][0] for r in accuracy["rows"]}


def test_every_plot_is_drawn_with_the_runs_numbers(page, run):
    _, rows = run
    drawn = page.evaluate("""() => Array.from(document.querySelectorAll('.plot')).map(el => ({
        kind: el.dataset.kind, title: el.layout.title.text, traces: el.data.map(t => ({x: t.x, y: t.y})),
        svg: el.querySelectorAll('.main-svg').length}))""")
    assert drawn and all(p["svg"] > 0 for p in drawn)
    kinds = {p["kind"] for p in drawn}
    assert {"batch-sweep", "throughput-latency", "breakdown", "accuracy"} <= kinds
    for row in rows:
        tput, p99 = row.result.get("Inferences/Second"), row.result.get("p99 latency")
        if row.scenario in ("offline", "online") and tput is not None and p99 is not None:
            mine = [p for p in drawn if p["kind"] == "throughput-latency" and p["title"].startswith(row.deployment)]
            assert any(tput in t["x"] and p99 in t["y"] for p in mine for t in p["traces"]), row.deployment
    tooltip = page.evaluate("""() => { const el = document.querySelector('.plot[data-kind=throughput-latency]');
        return el.data[0].text[0]; }""")
    assert "status " in tooltip and "inf/s" in tooltip  # the row on hover


def test_reduced_precision_is_drawn_beside_fp32_with_its_threshold(page, run):
    _, rows = run
    accuracy = {r.precision: r for r in rows if r.scenario == "accuracy"}
    fp32, fp16 = accuracy["fp32"], accuracy["fp16"]
    table = next(t for t in _tables(page) if t["heading"] == "accuracy: bert, reduced precision against fp32")
    assert table["head"][:8] == ["format", "precision", "metric", "fp32", "value", "change from fp32", "threshold",
                                 "status"]
    shown = {r["cells"][2][0]: r["cells"] for r in table["rows"]}
    assert set(shown) == set(fp16.metrics)
    for name, value in fp16.metrics.items():
        cells = shown[name]
        assert cells[1][0] == "fp16" and float(cells[4][1]) == value
        if name in fp32.metrics:
            assert float(cells[3][1]) == fp32.metrics[name]
        assert cells[7][0] == fp16.metric_status.get(name, "-")
    plot = page.evaluate("""() => { const el = document.querySelector('.plot[data-kind=precision]');
        return {svg: el.querySelectorAll('.main-svg').length, traces: el.data.map(t => [t.name, t.x, t.y])}; }""")
    assert plot["svg"] > 0
    traces = {name: dict(zip(xs, ys)) for name, xs, ys in plot["traces"]}
    assert {"fp32", "fp16", "fp16 threshold"} <= set(traces)
    for label, value in traces["fp16"].items():
        name = label.split(": ", 1)[1]
        assert value == fp16.metrics[name] and traces["fp32"][label] == fp32.metrics[name]
    assert traces["fp16"] and all(v is not None for v in traces["fp16 threshold"].values())


def test_the_axes_fit_the_data_and_the_throughput_axis_has_round_ticks(page):
    import math

    drawn = page.evaluate("""() => Array.from(document.querySelectorAll('.plot')).map(el => ({kind: el.dataset.kind,
        range: el.layout.xaxis.range, xs: el.data.flatMap(t => t.x || []),
        right: Array.from(el.querySelectorAll('.y2tick text')).map(t => t.textContent)}))""")
    latency = [d for d in drawn if d["kind"] == "throughput-latency"]
    assert latency
    for d in latency:  # fitted to the data, not stretched to 0
        low, high = min(d["xs"]), max(d["xs"])
        assert d["range"][0] > low - max(0.15 * (high - low), 0.1 * low) and d["range"][1] >= high, d
    sweeps = [d for d in drawn if d["kind"] == "batch-sweep"]
    assert sweeps
    for d in sweeps:  # ticks a reader can read: 0, 200, 400 inf/s, not the left axis's grid in inf/s
        ticks = [float(t.replace("\u2212", "-").replace(",", "").replace("k", "e3")) for t in d["right"]]
        assert len(ticks) >= 3, d
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5)), ticks
        assert all(math.isclose(b - a, step) for a, b in zip(ticks, ticks[1:])), ticks


def test_the_filters_hide_what_does_not_match(page, run):
    _, rows = run
    page.select_option("#filter-scenario", "conformance")
    visible = [t for t in _tables(page) if not t["hidden"]]
    assert visible and len(visible) == len({r.deployment for r in rows if r.scenario == "conformance"})
    page.select_option("#filter-scenario", "")
    statuses = {r.status for r in rows}
    for status in statuses:
        page.select_option("#filter-status", status)
        shown = [r for t in _tables(page) if not t["hidden"] for r in t["rows"] if not r["hidden"]]
        assert shown and {r["status"] for r in shown} == {status}
        assert page.locator("#shown").inner_text().endswith(f"{len(shown)} rows shown")
    page.select_option("#filter-status", "")
    page.select_option("#filter-precision", "fp32")
    page.select_option("#filter-model", "bert")
    assert all(not t["hidden"] for t in _tables(page))  # every block of this run is bert's, fp32
    page.select_option("#filter-scenario", "offline")
    offline = {r.deployment for r in rows if r.scenario == "offline"}
    assert {t["heading"] for t in _tables(page) if not t["hidden"]} == offline


def test_a_click_on_a_header_sorts_and_the_other_columns_are_a_click_away(page):
    table = page.locator("section.block[data-scenario=online] table.sortable").first
    header = table.locator("th", has_text="Inferences/Second").first
    column = table.locator("th").all_inner_texts().index("Inferences/Second")

    def values():
        return [float(v) for v in table.evaluate(
            f"t => Array.from(t.tBodies[0].rows).map(r => r.cells[{column}].dataset.value).filter(v => v)")]

    assert len(values()) >= 2
    header.click()
    assert values() == sorted(values())
    header.click()
    assert values() == sorted(values(), reverse=True)
    extra = table.locator("th", has_text="Client Send").first
    assert extra.is_hidden()
    page.locator("section.block[data-scenario=online] button.more").first.click()
    assert extra.is_visible()


def test_a_screenshot_is_not_blank(page, tmp_path):
    from matplotlib.image import imread

    path = tmp_path / "index.png"
    page.screenshot(path=str(path), full_page=False)
    pixels = imread(path)[:, :, :3].reshape(-1, 3)
    inked = (pixels.sum(axis=1) < 2.7).mean()  # not white
    colours = len({tuple(p) for p in (pixels[::97] * 255).astype(int)})
    assert inked > 0.03 and colours > 20, (inked, colours)
