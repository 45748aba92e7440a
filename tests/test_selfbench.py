"""The self-benchmark's ceiling part (``tritonsuite selfbench --ceiling-only``, and (c) of the full run) on the real
embedded server, with the identity model, short: two concurrencies, 200 ms windows. It broke unseen once (a
``measure()`` call without the deployment's description, 2026-11); these keep its path run."""
import pytest

from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.run import selfbench

# plumbing, not this host's speed: any spread of the last windows counts as stable, the client never bound
SHORT = MeasurementSettings(window_ms=200, min_requests_per_window=5, stability_percentage=100, max_trials=10,
                            warmup_ms=100, client_bound_percent=1000)


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.setattr(selfbench, "ROOT", tmp_path)  # its server's log under tmp_path/reports/logs
    return tmp_path


def test_ceiling_only_measures_the_identity_model_through_the_engine(here, shared_export_cache, capsys):
    assert selfbench._ceiling_only(shared_export_cache, ("suite",), (1, 4), SHORT) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("concurrency ")]
    assert [line.split(":")[0] for line in lines] == ["concurrency 1", "concurrency 4"], out
    for line in lines:
        assert "FAILED" not in line and line.endswith(", OK"), out
        assert float(line.split(": ")[1].split(" req/s")[0]) > 0, out
    assert list((here / "reports" / "logs").iterdir()), "the embedded server's log"


def test_ceiling_side_by_side_with_perf_analyzer(here, shared_export_cache, pa, capsys):
    assert selfbench._ceiling_only(shared_export_cache, ("suite", "perf_analyzer"), (2,), SHORT) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 1, out
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert float(cells[1]) > 0 and float(cells[2]) > 0, out  # req/s by the engine and by perf_analyzer
    assert cells[-1] == "OK / OK", out
