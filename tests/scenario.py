"""Shared body of the performance tests: measure, record, and fail on an invalid row with its reasons."""
import pytest

from tritonsuite.export import ExportUnsupported
from tritonsuite.server import ServerError


def run_performance(suite, case):
    try:
        measurement = suite.run_performance(case)
    except ExportUnsupported as exc:
        pytest.skip(str(exc))
    except ServerError as exc:  # the message says it all (with the log tail the first time)
        failure = f"{case.id}: {exc}"
    else:
        failure = None
    if failure:  # raised outside the except block, so pytest shows the message alone, not the exception chain
        pytest.fail(failure, pytrace=False)
    if not measurement.valid:
        pytest.fail(f"{case.id}: {measurement.status}: " + "; ".join(measurement.reasons), pytrace=False)
