"""The scenario tests, for any project to collect: ``from tritonsuite.plugin.scenarios import test_offline,
test_online, test_accuracy`` in one of its test modules. Each is parametrised by the plugin from the profile
(``offline_case``, ``online_case``, ``accuracy_case``) and marked, so ``pytest -m offline`` selects it.

A failure says why in one message: an invalid row's status and reasons, the metrics that missed their thresholds,
or the server's error (with its log tail the first time). The message is raised outside the ``except`` block so
pytest shows it alone, not an exception chain.
"""
from __future__ import annotations

import pytest

from tritonsuite.export import ExportUnsupported
from tritonsuite.baselines import BaselineError
from tritonsuite.server import ServerError


def _judge(case_id: str, run, verdict, record_property, figures) -> None:
    """Run a case; skip it with the reason when it cannot be exported here; attach its figures as JUnit properties
    (``--junitxml`` carries them); fail it with ``verdict(result)`` (None when it passed) or the server's error."""
    try:
        result = run()
    except ExportUnsupported as exc:
        pytest.skip(str(exc))
    except (ServerError, BaselineError) as exc:
        failure = f"{case_id}: {exc}"
    else:
        for name, value in figures(result).items():
            record_property(name, value)
        failure = verdict(result)
    if failure:
        pytest.fail(failure, pytrace=False)


def _performance(suite, case, record_property) -> None:
    _judge(case.id, lambda: suite.run_performance(case),
           lambda m: None if m.valid else f"{case.id}: {m.status}: " + "; ".join(m.reasons), record_property,
           lambda m: {**{k: round(v, 4) for k, v in m.result.items()}, "status": m.status})


@pytest.mark.offline
def test_offline(suite, offline_case, triton, record_property):
    """Static batching, one request in flight, system shared memory, a batch-size sweep."""
    _performance(suite, offline_case, record_property)


@pytest.mark.online
def test_online(suite, online_case, triton, record_property):
    """Dynamic batching on the server, concurrent requests over HTTP, a concurrency sweep."""
    _performance(suite, online_case, record_property)


@pytest.mark.accuracy
def test_accuracy(suite, accuracy_case, triton, record_property):
    """The deployment through Triton against its eager reference, with thresholds per precision."""
    _judge(accuracy_case.id, lambda: suite.run_accuracy(accuracy_case),
           lambda r: None if r.passed else (f"{r.deployment} ({r.samples} samples, {r.description}) missed its "
                                            f"thresholds:\n  " + "\n  ".join(r.failures)), record_property,
           lambda r: {**{m.name: round(m.value, 6) for m in r.metrics}, "passed": r.passed})
