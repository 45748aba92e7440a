"""Offline scenario: static batching, one request in flight, system shared memory, batch-size sweep."""
import pytest

from tests.scenario import run_performance

pytestmark = pytest.mark.offline


def test_offline(suite, offline_case, triton):
    run_performance(suite, offline_case)
