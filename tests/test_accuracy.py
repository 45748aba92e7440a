"""Accuracy scenario: the deployment through Triton against its eager reference, with thresholds per precision."""
import pytest

from tritonsuite.export import ExportUnsupported
from tritonsuite.server import ServerError

pytestmark = pytest.mark.accuracy


def test_accuracy(suite, accuracy_case, triton):
    failure = None
    try:
        result = suite.run_accuracy(accuracy_case)
    except ExportUnsupported as exc:
        pytest.skip(str(exc))
    except ServerError as exc:  # the message says it all (with the log tail the first time)
        failure = f"{accuracy_case.id}: {exc}"
    else:
        if not result.passed:
            failure = (f"{result.deployment} ({result.samples} samples, {result.description}) missed its "
                       f"thresholds:\n  " + "\n  ".join(result.failures))
    if failure:  # raised outside the except block, so pytest shows the message alone, not the exception chain
        pytest.fail(failure, pytrace=False)
