"""How long reports/index.html takes to write and to open: ``python tests/report_timing.py REPORTS_DIR [--run RUN_ID]
[--times N]``. Writes the page (the HTML presenter alone), then opens it N times in Debian's Chromium (Playwright,
headless, a fresh context each time) and prints its size, the seconds to the load event, to the plots in the first
screen drawn, and to every plot drawn (``tritonsuiteDrawAll``). docs/report.md has the figures it gave."""
from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from tritonsuite.report import write_reports


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("reports_dir")
    parser.add_argument("--run", default=None)
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    page_path = write_reports(args.reports_dir, args.run, presenters=("html",))[0]
    written = time.monotonic() - started
    text = page_path.read_text(encoding="utf-8")
    print(f"{page_path}: {len(text.encode()) / 2**20:.2f} MiB, written in {written:.2f} s; "
          f"{text.count('<tr data-status')} table rows, {text.count('data-figure=')} plots")
    loads, firsts, alls = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        for _ in range(args.times):
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            tab = context.new_page()
            started = time.monotonic()
            tab.goto(Path(page_path).resolve().as_uri(), wait_until="load")
            loads.append(time.monotonic() - started)
            tab.wait_for_function("""() => Array.from(document.querySelectorAll('.plot')).filter(el => {
                const r = el.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0;
            }).every(el => el.querySelector('.main-svg'))""")
            firsts.append(time.monotonic() - started)
            tab.evaluate("window.tritonsuiteDrawAll()")
            tab.wait_for_function("document.querySelectorAll('.plot .main-svg').length > 0 && Array.from("
                                  "document.querySelectorAll('.plot')).every(el => el.querySelector('.main-svg'))")
            alls.append(time.monotonic() - started)
            context.close()
        browser.close()
    for name, values in (("load event", loads), ("first screen drawn", firsts), ("every plot drawn", alls)):
        print(f"{name}: median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
