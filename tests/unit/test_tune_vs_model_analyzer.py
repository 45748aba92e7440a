"""examples/tune_vs_model_analyzer.py's Model Analyzer side: the profile configuration it writes for each search
(docs/tune.md, "Side by side with Model Analyzer"), and its one line where Model Analyzer is not installed."""
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tritonsuite.core.settings import LatencyBound
from tritonsuite.load.perfanalyzer import PerfAnalyzer
from tritonsuite.profiles.tunespace import Budget, TuneSpace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("tune_vs_model_analyzer",
                                                  ROOT / "examples" / "tune_vs_model_analyzer.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _config(script, tool, scheduler, tmp_path):
    space = TuneSpace(instance_count=(1, 2, 3), max_batch_size=(4, 8), preferred_batch_sizes=((), (4,)),
                      max_queue_delay_microseconds=(0, 2000), intra_op_threads=(1,), concurrency=(16, 4),
                      budget=Budget(), scheduler=scheduler)
    deployment = SimpleNamespace(name="m", config={"name": "m", "max_batch_size": 8})
    server = SimpleNamespace(ports={"http": 8000, "grpc": 8001, "metrics": 8002})
    pa = PerfAnalyzer(tmp_path / "perf_analyzer", tmp_path / "lib")
    return script.ma_profile_config(tool, deployment, server, space, LatencyBound.parse("p99 <= 50 ms"),
                                    tmp_path / "in.json", tmp_path, pa)


@pytest.mark.parametrize("scheduler, batcher", [
    ("dynamic", {"dynamic_batching": {"max_queue_delay_microseconds": [0, 2000], "preferred_batch_size": [[], [4]]}}),
    ("oldest", {"sequence_batching": {"oldest": {"max_queue_delay_microseconds": [0, 2000],
                                                 "preferred_batch_size": [[], [4]]}}}),
    ("direct", {"sequence_batching": {"direct": {"max_queue_delay_microseconds": [0, 2000]}}})])
def test_brute_searches_the_suites_space_on_the_deployments_own_batcher(script, tmp_path, scheduler, batcher):
    config = _config(script, "ma-brute", scheduler, tmp_path)
    spec = config["profile_models"]["m"]
    assert config["run_config_search_mode"] == "brute" and config["triton_launch_mode"] == "remote"
    assert config["constraints"] == {"perf_latency_p99": {"max": 50.0}}
    assert spec["model_config_parameters"] == {
        "max_batch_size": [4, 8], "instance_group": [[{"kind": "KIND_CPU", "count": [1, 2, 3]}]], **batcher}
    assert spec["parameters"] == {"concurrency": [4, 16], "batch_sizes": [1]}


def test_quick_is_bounded_by_the_suites_space(script, tmp_path):
    config = _config(script, "ma-quick", "direct", tmp_path)
    assert config["run_config_search_mode"] == "quick" and "model_config_parameters" not in config["profile_models"]["m"]
    assert (config["run_config_search_min_instance_count"], config["run_config_search_max_instance_count"],
            config["run_config_search_max_model_batch_size"], config["run_config_search_max_concurrency"]) == \
        (1, 3, 8, 16)


def test_without_model_analyzer_one_line(script, tmp_path):
    line = script.model_analyzer_unavailable(str(tmp_path / "no-model-analyzer"))
    assert line.startswith(f"Model Analyzer is not installed: no '{tmp_path / 'no-model-analyzer'}' (pip install "
                           f"triton-model-analyzer") and "\n" not in line
