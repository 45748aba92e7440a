"""The pytest front door: command-line options, scenario selection, parametrisation and report hooks.

It wires; the library (src/tritonsuite) does. Fixtures live in fixtures/.
"""
from __future__ import annotations

import pytest

from fixtures.options import OPTIONS_KEY, SCENARIO_MARKERS, SERVER_KEY, add_options, cases_for, resolve_options

pytest_plugins = ["fixtures.session"]


def pytest_addoption(parser):
    add_options(parser)


def _terminated(signum, frame):
    raise KeyboardInterrupt(f"terminated by signal {signum}")


def pytest_configure(config):
    # SIGTERM (a CI runner cancelling the job, a timeout) ends the run like Ctrl-C: fixtures stop the server and
    # the report is written from what was measured. Python's default for SIGTERM is to die on the spot.
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    config.stash[OPTIONS_KEY] = resolve_options(config)  # bad input -> pytest.UsageError naming choices
    if config.pluginmanager.hasplugin("xdist"):
        from fixtures.session import XdistRunId

        config.pluginmanager.register(XdistRunId(), "tritonsuite-xdist")


def pytest_generate_tests(metafunc):
    for scenario in SCENARIO_MARKERS:
        argname = f"{scenario}_case"
        if argname in metafunc.fixturenames:
            cases = cases_for(metafunc.config, scenario)
            metafunc.parametrize(argname, cases, ids=[c.id for c in cases])


def pytest_collection_modifyitems(config, items):
    """Plain `pytest` runs the suite's own tests; scenario tests run when a -m expression asks for them."""
    if config.option.markexpr:
        return
    selected, deselected = [], []
    for item in items:
        (deselected if any(item.get_closest_marker(m) for m in SCENARIO_MARKERS) else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        server = item.config.stash.get(SERVER_KEY, None)
        shown = "--- tritonserver log tail" in report.longreprtext or server is None or server.death_reported()
        if not shown and "triton" in getattr(item, "fixturenames", ()):
            tail = server.log_tail()  # once: a death or a failed load carries the tail in its own message
            if tail:
                report.sections.append(("tritonserver log tail", tail))
    return report


def pytest_sessionfinish(session):
    from fixtures.session import write_session_reports

    write_session_reports(session.config)
