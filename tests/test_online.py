"""Online scenario: dynamic batching on the server, concurrent requests over HTTP, concurrency sweep."""
import pytest

from tests.scenario import run_performance

pytestmark = pytest.mark.online


def test_online(suite, online_case, triton):
    run_performance(suite, online_case)
