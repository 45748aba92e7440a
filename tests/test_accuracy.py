"""Accuracy scenario: the deployment through Triton against its eager reference, with thresholds per precision."""
import pytest

from tritonsuite.export import ExportUnsupported

pytestmark = pytest.mark.accuracy


def test_accuracy(suite, accuracy_case, triton):
    try:
        result = suite.run_accuracy(accuracy_case)
    except ExportUnsupported as exc:
        pytest.skip(str(exc))
    if not result.passed:
        pytest.fail(f"{result.deployment} ({result.samples} samples, {result.description}) missed its thresholds:\n  "
                    + "\n  ".join(result.failures), pytrace=False)
