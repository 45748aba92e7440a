"""The tritonsuite pytest plugin: command-line options, markers, scenario parametrisation, fixtures and report
hooks. Installed with the package (entry point ``pytest11: tritonsuite``), so any project that installs tritonsuite
gets ``--gpu``, ``--server``, ``--model-spec`` and the rest, the ``triton`` and ``suite`` fixtures, and the scenario
tests it imports from :mod:`tritonsuite.plugin.scenarios`.

It wires; the library does.
"""
from __future__ import annotations

import re

import pytest

from tritonsuite.core.access import redact, secrets_known
from tritonsuite.load.interrupt import end_like_ctrl_c_on_sigterm
from tritonsuite.plugin.fixtures import (OPTIONS_KEY, SERVER_KEY, XdistRunId, session_reports, suite, suite_options,
                                         triton)
from tritonsuite.plugin import progress
from tritonsuite.plugin.flags import MARKERS, add_options
from tritonsuite.plugin.rootdir import correct_rootdir, output_root
from tritonsuite.run.checks import OptionError
from tritonsuite.run.options import SCENARIO_MARKERS, _csv, cases_for, resolve_options
from tritonsuite.run.session import refused_deployments, undrivable_lines

__all__ = ["suite", "suite_options", "triton"]  # fixtures, found by pytest in this module


def pytest_addoption(parser):
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Before conftests load: root the run where its test paths put it, not in a directory an option named
    (``--model-repository DIR`` as two words made DIR pytest's rootdir; tritonsuite.plugin.rootdir)."""
    correct_rootdir(early_config, args)


def pytest_configure(config):
    for marker, description in MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: {description}")
    # SIGTERM ends the run like Ctrl-C: fixtures stop the server and the report is written from what was measured
    end_like_ctrl_c_on_sigterm()
    try:
        config.stash[OPTIONS_KEY] = resolve_options(config.option, output_root(config),
                                                    getattr(config, "workerinput", None))
    except OptionError as exc:  # one line naming the bad value and the valid choices
        raise pytest.UsageError(str(exc)) from None
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistRunId(), "tritonsuite-xdist")
    progress.configure(config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The same list at the end of the run (a -q run prints no header), and why a run collected nothing."""
    for line in undrivable_lines(config.stash.get(OPTIONS_KEY, None)):
        terminalreporter.write_line(line)
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        terminalreporter.write_line(
            "tritonsuite: no test collected: the scenarios run with -m offline, online, accuracy, conformance, tune "
            "or mix (and a model to run: the profile's, --model-spec or --model-repository); the suite's own tests "
            "with plain pytest in a tritonsuite checkout")


def pytest_generate_tests(metafunc):
    if "refused_deployment" in metafunc.fixturenames:  # tritonsuite.plugin.scenarios.test_repository
        refused = refused_deployments(metafunc.config.stash[OPTIONS_KEY], _csv(metafunc.config.getoption("models")))
        metafunc.parametrize("refused_deployment", [line for _, line in refused], ids=[n for n, _ in refused])
    for scenario in SCENARIO_MARKERS:
        argname = f"{scenario}_case"
        if argname in metafunc.fixturenames:
            cases = cases_for(metafunc.config.stash[OPTIONS_KEY], scenario)
            metafunc.parametrize(argname, [pytest.param(c, marks=pytest.mark.search) if c.search else c
                                           for c in cases], ids=[c.id for c in cases])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Plain `pytest` runs the suite's own tests; scenario tests run when a -m expression asks for them, and the
    latency-bound searches (minutes each) when it names `search` or --searches / --latency-bound is given. A run
    that asks for scenarios where no test module collects them (a team's own directory, tritonsuite installed)
    collects them from :mod:`tritonsuite.plugin.scenarios` itself."""
    if not any(_is_scenario(item) for item in items) and _markers_named(config) & set(SCENARIO_MARKERS):
        items.extend(_installed_scenarios(session))
    items[:] = [item for item in items if not _nothing_refused(item)]
    if config.option.markexpr:
        if searches_wanted(config):
            return
        markers = ("search",)
    else:
        markers = SCENARIO_MARKERS
    selected, deselected = [], []
    for item in items:
        (deselected if any(item.get_closest_marker(m) for m in markers) else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def _nothing_refused(item) -> bool:
    """test_repository where no deployment is refused (pytest's placeholder for an empty parameter set): not run."""
    return "refused_deployment" in getattr(item, "fixturenames", ()) and any(
        "empty parameter set" in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skip"))


def _is_scenario(item) -> bool:
    from tritonsuite.plugin import scenarios

    return getattr(getattr(item, "function", None), "__module__", "") == scenarios.__name__


def _installed_scenarios(session) -> list:
    from pathlib import Path

    from tritonsuite.plugin import scenarios

    module = pytest.Module.from_parent(session, path=Path(scenarios.__file__))
    return [item for item in module.collect() if isinstance(item, pytest.Item)]


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
    if secrets_known():  # what pytest prints and JUnit XML keeps: a header's value or a key never in them
        _redact_report(report)
    return report


def _redact_report(report) -> None:
    if report.longrepr is not None and redact(report.longreprtext) != report.longreprtext:
        report.longrepr = redact(report.longreprtext)
    report.sections = [(title, redact(content)) for title, content in report.sections]
    report.user_properties = [(n, redact(v) if isinstance(v, str) else v) for n, v in report.user_properties]


def searches_wanted(config) -> bool:
    return (config.getoption("searches") or config.getoption("latency_bound") is not None
            or "search" in _markers_named(config))


def _markers_named(config) -> set[str]:
    """The names a -m expression mentions."""
    return set(re.findall(r"[\w-]+", config.option.markexpr or ""))


def pytest_report_header(config):
    """Deployments of --model-repository the suite cannot drive (listed with their reasons, not run), and the
    searches an online run leaves out."""
    lines = undrivable_lines(config.stash.get(OPTIONS_KEY, None))
    if config.option.markexpr and not searches_wanted(config) and "online" in config.option.markexpr:
        lines.append("tritonsuite: online latency-bound searches deselected (minutes each); run them with --searches "
                     "or -m search")
    return lines or None


def pytest_sessionfinish(session):
    session_reports(session.config)
