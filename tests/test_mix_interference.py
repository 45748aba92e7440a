"""Interference measured on the real embedded Triton: a victim deployment served beside a CPU-hungry companion
must show a throughput ratio (together ÷ alone) significantly below 1, and beside a light companion no significant
effect. The three deployments are python-backend models written here into tmp_path: the victim spends a fixed
amount of CPU per request, the hungry companion burns ~25 ms of CPU per request on three instances at concurrency 3,
the light one echoes its input at a few requests per second. Every instance's stub process is pinned to one CPU, so
the hungry companion's three share the victim's core on any host, however many cores it has.

The verdict is robust on a shared host by design (judge/interference.py): interleaved rounds (alone, together,
alone, together, ...), windows from every round pooled per side, a Mann-Whitney test at alpha 0.01 and a minimum
effect of 10% before anything reads as interference."""
from __future__ import annotations

import os
import textwrap
from dataclasses import replace

import numpy as np
import pytest

from tritonsuite.core.description import describe
from tritonsuite.core.rows import Row
from tritonsuite.core.settings import LatencyBound, MeasurementSettings
from tritonsuite.core.spec import TensorSpec
from tritonsuite.judge.interference import interference
from tritonsuite.load.engine import LoadPoint, Traffic, measure_together
from tritonsuite.load.mix import max_mix, run_mix, scale
from tritonsuite.server import EmbeddedServer

MODEL = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

BURN_S = {burn}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            end = time.thread_time() + BURN_S  # CPU time, not wall time: a busy host makes it last longer
            while time.thread_time() < end:
                sum(i * i for i in range(200))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x.copy())]))
        return responses
'''

CONFIG = '''
backend: "python"
max_batch_size: 8
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
instance_group [{{ kind: KIND_CPU count: {count} }}]
'''

# the test's verdict is about interference, not this shared host's stability: loose windows, several rounds
SETTINGS = MeasurementSettings(window_ms=600, min_requests_per_window=5, stability_percentage=40, max_trials=9,
                               warmup_ms=300)
ROUNDS = 4
OUTPUTS = [TensorSpec("OUTPUT0", "float32", (4,))]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    repo = tmp_path_factory.mktemp("mixrepo")
    for name, burn, count in (("victim", 0.004, 1), ("hungry", 0.025, 3), ("light", 0.0, 1)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(MODEL.format(burn=burn))
        (repo / name / "config.pbtxt").write_text(textwrap.dedent(CONFIG.format(count=count)))
    with EmbeddedServer(repo, tmp_path_factory.mktemp("logs"), auto_complete=False) as server:
        for name in ("victim", "hungry", "light"):
            server.load(repo / name)
        _pin_stubs(server)
        yield server


def _pin_stubs(server) -> None:
    """Every thread of the server's child processes (the model instances' stubs) on one CPU this process may use."""
    import psutil

    cpu = min(os.sched_getaffinity(0))
    stubs = server.process_ids()[1:]
    assert len(stubs) == 5, stubs  # victim 1, hungry 3, light 1
    for pid in stubs:
        for thread in psutil.Process(pid).threads():
            os.sched_setaffinity(thread.id, {cpu})
        assert psutil.Process(pid).cpu_affinity() == [cpu]


def traffic(name: str, point: LoadPoint) -> Traffic:
    description = describe({"name": name, "backend": "python", "max_batch_size": 8,  # CONFIG, as Triton reads it
                            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
                            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]})
    return Traffic(name, {"INPUT0": np.ones((1, 4), np.float32)}, OUTPUTS, point, description)


VICTIM = traffic("victim", LoadPoint(1, 1))


def rows_of(run, index: int, role: str) -> list[Row]:
    return [m.to_row(scenario="mix", model=run.models[index], deployment=run.models[index],
                     extra={"mix": {"round": s.round, "role": role}})
            for s in run.steps if s.role == role and (role == "together" or s.index == index)
            for m in [s.measurements[0 if role == "alone" else index]]]


def test_together_measures_every_deployment_over_the_same_windows(served):
    victim, light = measure_together(served, [VICTIM, traffic("light", LoadPoint(1, request_rate=5.0))], SETTINGS)
    for m in (victim, light):
        assert m.meta["requests_sent"] == m.meta["server_success_delta"] > 0  # each deployment's own counters
        assert m.result["Server Compute Infer"] >= 0 and m.meta["percentiles"]["p99"]["n"] == m.meta["measured_requests"]
        assert 0 <= m.meta["deployment_client_cpu_percent"] <= m.meta["client_cpu_percent"] + 1
    assert victim.meta["windows"] == light.meta["windows"]  # cut at the same instants
    assert [b[0] for b in victim.meta["window_bounds_s"]] == [b[0] for b in light.meta["window_bounds_s"]]
    assert light.meta["load"] == "open loop" and victim.meta["load"] == "closed loop"
    assert victim.result["Server Compute Infer"] >= 3.0  # the victim burns its 4 ms per request


def test_refuses_a_deployment_twice_and_a_mix_of_one(served):
    with pytest.raises(ValueError, match="appears twice"):
        measure_together(served, [VICTIM, VICTIM], SETTINGS)
    with pytest.raises(ValueError, match="at least two"):
        run_mix(served, [VICTIM], SETTINGS)


def test_scale_multiplies_rates_and_concurrencies():
    assert scale(VICTIM, 2.6).point.concurrency == 3
    assert scale(traffic("light", LoadPoint(1, request_rate=5.0)), 1.5).point.request_rate == 7.5


def _judge(served, companion: Traffic):
    run = run_mix(served, [VICTIM, companion], SETTINGS, rounds=ROUNDS)
    assert [s.role for s in run.steps] == ["alone", "alone", "together"] * ROUNDS
    ratio = interference("victim", rows_of(run, 0, "alone"), rows_of(run, 0, "together"))
    print(ratio.describe())  # shown with -s: how the verdict behaved on this host
    return ratio


def test_a_cpu_hungry_companion_slows_the_victim_significantly(served):
    ratio = _judge(served, traffic("hungry", LoadPoint(1, 3)))
    assert ratio.metric == "Inferences/Second" and ratio.rounds >= 2
    assert ratio.verdict == "interference", ratio.describe()
    assert ratio.high < 1.0 and ratio.p_value < 0.01


def test_a_light_companion_has_no_significant_effect(served):
    ratio = _judge(served, traffic("light", LoadPoint(1, request_rate=10.0)))  # 6 requests a window: none lengthens
    assert ratio.verdict in ("no significant effect", "improvement"), ratio.describe()
    assert ratio.low <= 1.1 and ratio.high >= 0.9, ratio.describe()


def test_the_most_mixed_load_names_the_deployment_whose_bound_broke(served):
    """Both deployments' traffic scaled together; only the victim has a bound (its single instance queues: 4 ms of
    CPU per request, so its mean latency grows with its concurrency)."""
    found = max_mix(served, [VICTIM, traffic("light", LoadPoint(1, request_rate=5.0))],
                    [LatencyBound.parse("avg <= 25 ms"), None], replace(SETTINGS, search_resolution_percent=25))
    print(found.describe())
    # the victim's bound breaks on any host (at concurrency 8 its requests queue for at least 8 x 4 ms of CPU); the
    # factor it takes, if any, is this host's answer: one measured within every bound
    assert found.bound_by.startswith("victim not within avg <= 25 ms"), found.bound_by
    assert found.result.steps[0].load == 1.0 and len(found.result.steps) >= 3
    assert all(len(s.measurement) == 2 for s in found.result.steps)  # every point measures both deployments
    assert found.factor is None or found.factor in {s.load for s in found.result.steps if s.within}
