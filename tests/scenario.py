"""Shared body of the performance tests: measure, record, and fail on an invalid row with its reasons."""
import pytest

from tritonsuite.export import ExportUnsupported


def run_performance(suite, case):
    try:
        measurement = suite.run_performance(case)
    except ExportUnsupported as exc:
        pytest.skip(str(exc))
    if not measurement.valid:
        pytest.fail(f"{case.id}: {measurement.status}: " + "; ".join(measurement.reasons), pytrace=False)
