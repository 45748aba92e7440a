"""The progress display's pytest glue (:mod:`tritonsuite.run.progress` decides and draws): a running test's callback,
its bar closed when its call ends (before pytest writes the outcome), a line per point test in a log."""
from __future__ import annotations

import contextlib
import os
import sys
import time

import pytest

from tritonsuite.run.progress import Bar, choose_display, numbered_point_line

TTY_KEY = pytest.StashKey[bool]()


def configure(config) -> None:
    """At ``pytest_configure``, pytest's capture suspended: is stdout a terminal that redraws a line."""
    config.stash[TTY_KEY] = sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"
    config.pluginmanager.register(Display(config), "tritonsuite-progress")


def display(config) -> str:
    here = config.getoption("dist", "no") == "no" and not hasattr(config, "workerinput")
    return choose_display(config.getoption("verbose"), config.stash.get(TTY_KEY, False), here)


def terminal_progress(request, case_id: str):
    """The test's ``progress`` callback, or None (a log at default verbosity, -q, an xdist worker)."""
    config, mode = request.config, display(request.config)
    reporter, capture = (config.pluginmanager.get_plugin(p) for p in ("terminalreporter", "capturemanager"))
    if reporter is None or mode == "none" or hasattr(config, "workerinput") or (
            mode == "lines" and config.getoption("verbose") < 1):
        return None
    uncaptured = (lambda: capture.global_and_fixture_disabled()) if capture else contextlib.nullcontext
    if mode == "bar":
        bar = Bar(case_id, uncaptured, lambda: config.get_terminal_writer().width_of_current_line)
        config.pluginmanager.get_plugin("tritonsuite-progress").bar = bar
        return bar
    started = time.monotonic()

    def write(line: str) -> None:
        with uncaptured():  # out of the test's output capture, as pytest's live logging does
            reporter.write_line(f"  {case_id} [{time.monotonic() - started:.0f} s] {line}")
    return write


class Display:
    def __init__(self, config):
        self.config, self.bar, self.reported, self.collected = config, None, 0, 0

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        try:
            return (yield)
        finally:
            if self.bar is not None:
                self.bar, bar = None, self.bar
                bar.close()

    def pytest_collection_finish(self, session) -> None:  # an xdist controller collects nothing: [k], not [k/N]
        self.collected = sum(1 for item in session.items if numbered_point_line(item.nodeid) is not None)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if report.when != "call" or display(self.config) != "lines" or reporter is None:
            return
        why = report.longrepr[2].removeprefix("Skipped: ") if isinstance(report.longrepr, tuple) else ""  # a skip
        line = numbered_point_line(report.nodeid, report.outcome, report.duration, dict(report.user_properties),
                                   self.reported + 1, self.collected, why)
        if line is not None:
            self.reported += 1
            reporter.write_line(line)
