"""The load-source seam (tritonsuite.load.sources): one registry names the sources, a bad name is one line with the
valid choices, and a caller learns what a source can do from its capabilities, not from its name."""
from __future__ import annotations

import numpy as np
import pytest

from tritonsuite.core.description import ModelDescription
from tritonsuite.core.spec import TensorSpec
from tritonsuite.load import sources
from tritonsuite.load.engine import LoadPoint, Traffic
from tritonsuite.load.sources.base import LoadSource


IN, OUT = TensorSpec("INPUT__0", "fp32", (4,)), TensorSpec("OUTPUT__0", "fp32", (4,))
PLAIN = ModelDescription("identity", "onnxruntime_onnx", "onnxruntime", 8, (IN,), (OUT,))


def _traffic(point=LoadPoint(1, 2), probes=()):
    return Traffic("identity", {"INPUT__0": np.zeros((1, 4), np.float32)}, [OUT], point, PLAIN, probes=probes,
                   probe_share=0.5 if probes else 0.0)


def test_the_registry_names_each_source_once_by_its_row_name():
    assert sources.names() == ("suite", "perf_analyzer")
    for name, source in sources.SOURCES.items():
        assert isinstance(source, LoadSource) and source.name == name and sources.get(name) is source
    assert sources.get() is sources.get("suite")  # the default: the suite's own engine


@pytest.mark.parametrize("value, chosen", [("suite", ("suite",)), ("perf_analyzer, suite", ("perf_analyzer", "suite")),
                                           ("suite,suite,perf_analyzer", ("suite", "perf_analyzer"))])
def test_loadgen_values_parse_in_order_once_each(value, chosen):
    assert sources.parse(value) == chosen


@pytest.mark.parametrize("value", ["locust", "suite,locust", "", " , "])
def test_a_bad_loadgen_is_one_line_naming_the_value_and_the_valid_choices(value):
    with pytest.raises(sources.UnknownSource) as info:
        sources.parse(value)
    message = str(info.value)
    assert message == (f"--loadgen {value!r}: unknown load generator; valid choices: suite, perf_analyzer "
                       f"(comma-separated for several)")
    assert "\n" not in message and isinstance(info.value, ValueError)


def test_an_unknown_name_asked_of_the_registry_is_one_line_too():
    with pytest.raises(sources.UnknownSource, match=r"^load generator 'ray': valid choices: suite, perf_analyzer$"):
        sources.get("ray")


def test_the_engine_can_everything_and_perf_analyzer_one_closed_loop_point():
    engine, pa = sources.get("suite"), sources.get("perf_analyzer")
    assert all(engine.can(c) for c in sources.CAPABILITIES)
    assert not any(pa.can(c) for c in sources.CAPABILITIES)
    with pytest.raises(ValueError, match="unknown load-source capability 'teleport'"):
        engine.can("teleport")


@pytest.mark.parametrize("traffic, stop, what", [
    (_traffic(probes=[{"INPUT__0": np.ones((1, 4), np.float32)}]), None, "carry accuracy probes in its load"),
    (_traffic(LoadPoint(1, 1, request_rate=50.0)), None, "send a request rate"),
    (_traffic(), lambda windows: None, "give a point up early"),
])
def test_perf_analyzer_refuses_what_it_cannot_do_before_it_starts(traffic, stop, what):
    # refused by its capabilities before any binary is looked for or any server is asked (server None)
    with pytest.raises(sources.Unsupported, match=f"^load generator perf_analyzer cannot {what}"):
        sources.get("perf_analyzer").measure(None, traffic, stop_early=stop)


def test_a_mix_asks_for_measuring_together():
    from tritonsuite.core.settings import MeasurementSettings
    from tritonsuite.load.mix import run_mix

    with pytest.raises(sources.Unsupported, match="perf_analyzer cannot measure several deployments together"):
        run_mix(None, [_traffic(), _traffic()], MeasurementSettings(), source=sources.get("perf_analyzer"))


def test_a_new_source_is_a_subclass_with_its_capabilities():
    class Replay(LoadSource):
        name = "replay"
        capabilities = frozenset({sources.PROGRESS})

    replay = Replay()
    assert replay.can(sources.PROGRESS) and not replay.can(sources.TOGETHER)
    replay.check(_traffic())  # a closed-loop point of one deployment: every source can
    with pytest.raises(sources.Unsupported, match="cannot measure several deployments together"):
        replay.measure_together(None, [_traffic()])
    assert sources.unavailable(("suite",)) is None


def test_each_source_hands_the_point_to_its_generator_as_the_callers_did(monkeypatch):
    # the engine gets every field of the traffic, the stop check and progress; perf_analyzer the point, the settings
    # and its driver's options (a stateless deployment: none), as run/suite.py and selfbench called them before
    from tritonsuite.core.settings import MeasurementSettings
    from tritonsuite.load import engine, perfanalyzer

    calls = {}
    monkeypatch.setattr(engine, "measure", lambda *a, **k: calls.setdefault("engine", (a, k)) and "m")
    monkeypatch.setattr(perfanalyzer, "measure_with_perf_analyzer",
                        lambda *a, **k: calls.setdefault("pa", (a, k)) and "m")
    settings, stop, told = MeasurementSettings(window_ms=300), (lambda windows: None), (lambda line: None)
    t = _traffic(probes=[{"INPUT__0": np.ones((1, 4), np.float32)}])
    sources.get("suite").measure("server", t, settings, stop, told)
    args, kwargs = calls["engine"]
    assert args == ("server", t.model, t.inputs, t.outputs, t.point, settings, stop)
    assert kwargs == dict(description=PLAIN, probes=t.probes, probe_share=0.5, probe_seed=0, progress=told)
    plain = _traffic()
    sources.get("perf_analyzer").measure("server", plain, settings, None, told)
    assert calls["pa"] == (("server", plain.model, plain.inputs, plain.outputs, plain.point, settings), {"extra": []})
