"""What a conformance check takes and gives (tritonsuite.judge.conformance.result): a CheckResult's line and its row
of scenario ``conformance`` whole, the Target a deployment directory makes (read as Triton would, without a
server) and the requests it builds, and its default data: the one input generator's of the declared dtypes and dims
(Target.generated)."""
from __future__ import annotations

import numpy as np
import pytest
import tritonclient.utils  # noqa: F401 (registers bfloat16 with numpy, as in every run: the requests go through it)

from tritonsuite.core.description import describe
from tritonsuite.core.rows import Row
from tritonsuite.core import inputdata
from tritonsuite.judge.conformance.result import _LOAD_SEEDS, CheckResult, Target
from tritonsuite.load.kinds import driver_for

BATCHING = {"name": "m", "platform": "onnxruntime_onnx", "max_batch_size": 8,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]},
                      {"name": "y", "data_type": "TYPE_INT64", "dims": [-1, 3]}],
            "output": [{"name": "z", "data_type": "TYPE_FP32", "dims": [4]},
                       {"name": "w", "data_type": "TYPE_INT64", "dims": [1]}]}


def config(**changes) -> dict:
    return {**BATCHING, **changes}


def deployment(tmp_path, cfg: dict):
    """A repository directory holding ``cfg`` as its config.pbtxt, written as Triton reads it."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    directory = tmp_path / cfg["name"]
    directory.mkdir()
    (directory / "config.pbtxt").write_text(
        text_format.MessageToString(json_format.ParseDict(cfg, model_config_pb2.ModelConfig())))
    return directory


def target(tmp_path, cfg: dict | None = None, **fields) -> Target:
    # no server: its configuration is read from the file alone, as where the check starts its own server
    return Target(server=None, directory=deployment(tmp_path, cfg or BATCHING), **fields)


# ------------------------------------------------------------------------------------------------- CheckResult
def test_a_result_s_line_names_the_deployment_the_check_the_verdict_and_why():
    assert CheckResult("m", "identity", "a", "a", "pass").line() == "m identity: pass"
    assert CheckResult("m", "batching", "a", "b", "fail", "every execution held one").line() == (
        "m batching: fail: every execution held one")


def test_only_a_pass_passed():
    assert CheckResult("m", "identity", "", "", "pass").passed
    assert not CheckResult("m", "identity", "", "", "fail", "x").passed
    assert not CheckResult("m", "identity", "", "", "skipped", "x").passed


def test_a_verdict_outside_the_choices_is_refused_naming_them():
    with pytest.raises(ValueError) as refused:
        CheckResult("m", "identity", "", "", "maybe")
    assert str(refused.value) == "verdict 'maybe'; valid choices: pass, fail, skipped"


@pytest.mark.parametrize("verdict", ["fail", "skipped"])
@pytest.mark.parametrize("reason", ["", "  ", None])
def test_a_failure_or_a_skip_without_its_reason_is_refused(verdict, reason):
    """A check that fails or skips says why (a report line with no reason tells a team nothing): one without is a
    defect of the check, which run_check then reports as that check's failure."""
    with pytest.raises(ValueError) as refused:
        CheckResult("m", "cache", "response_cache", "-", verdict, reason)
    assert str(refused.value) == (f"a {verdict} verdict of the cache check without its reason ({reason!r}): the "
                                  "report would not say why")
    assert CheckResult("m", "cache", "response_cache", "-", "pass").reason == ""


def test_a_failed_result_is_a_failed_row_of_scenario_conformance_with_its_evidence_and_fields():
    result = CheckResult("m_onnx", "batching", "dynamic", "{1: 30}", "fail", "every execution held one request",
                         {"executions": 30}, seconds=1.23456, fields=["max_batch_size", "dynamic_batching"])
    assert result.to_row(model="m", title="M", format="onnx") == Row(
        scenario="conformance", model="m", deployment="m_onnx", status="FAILED",
        reasons=["every execution held one request"], title="M", format="onnx", seconds=1.235,
        extra={"check": "batching", "declared": "dynamic", "observed": "{1: 30}", "verdict": "fail",
               "evidence": {"executions": 30}, "declared_fields": ["max_batch_size", "dynamic_batching"]})


def test_a_passed_or_skipped_result_is_an_ok_or_skipped_row_named_by_its_deployment():
    assert CheckResult("m", "identity", "declared a", "observed a", "pass").to_row() == Row(
        scenario="conformance", model="m", deployment="m", status="OK", reasons=[], seconds=0.0,
        extra={"check": "identity", "declared": "declared a", "observed": "observed a", "verdict": "pass",
               "evidence": {}, "declared_fields": []})
    row = CheckResult("m", "cache", "not enabled", "-", "skipped", "not enabled").to_row()
    assert (row.status, row.reasons) == ("SKIPPED", ["not enabled"])


# ------------------------------------------------------------------------------------------------ Target.generated
def generated(cfg: dict, batch_size: int, seed: int = 0) -> dict:
    """A target's default request data without a directory (its description alone)."""
    from types import SimpleNamespace

    return Target.generated(SimpleNamespace(description=describe(cfg)), batch_size, seed)


def test_generated_inputs_are_the_one_generators_random_data_of_the_declared_dims_a_row_per_step():
    found = generated(BATCHING, 2, 5)
    # core.inputdata.generated, a variable dim 1, one step per row drawn one after another from the seed
    data = inputdata.generated("random", describe(BATCHING).inputs, {"x": (4,), "y": (1, 3)}, 5, steps=2)
    assert list(found) == ["x", "y"]
    assert found["x"].dtype == np.float32 and found["x"].shape == (2, 4)
    assert found["y"].dtype == np.int64 and found["y"].shape == (2, 1, 3)
    assert all(np.array_equal(found[k], np.stack([data.steps[0][k], data.steps[1][k]])) for k in found)
    assert not np.array_equal(found["x"][0], found["x"][1])  # the rows of a batch differ
    assert np.array_equal(generated(BATCHING, 1, 5)["x"][0], found["x"][0])  # the first row whatever the batch
    assert not np.array_equal(generated(BATCHING, 2, 6)["x"], found["x"])  # another seed, other data
    assert np.array_equal(generated(BATCHING, 2)["x"], generated(BATCHING, 2, 0)["x"])  # seed 0 by default


def test_generated_values_are_perf_analyzers_floats_in_0_1_and_integers_0_1_valid_as_indices():
    cfg = config(input=[{"name": "y", "data_type": "TYPE_INT32", "dims": [4096]},
                        {"name": "x", "data_type": "TYPE_FP32", "dims": [4096]}])
    found = generated(cfg, 1, 0)
    assert found["y"].dtype == np.int32 and set(np.unique(found["y"])) == {0, 1}
    assert 0.0 <= found["x"].min() and found["x"].max() < 1.0


def test_generated_inputs_of_a_batchless_model_have_no_batch_dim():
    cfg = config(max_batch_size=0, input=[{"name": "x", "data_type": "TYPE_FP16", "dims": [1, -1, 3]}])
    (x,) = generated(cfg, 4, 0).values()
    assert x.shape == (1, 1, 3) and x.dtype == np.float16
    assert np.array_equal(x, inputdata.generated("random", describe(cfg).inputs, {"x": (1, 1, 3)}, 0).steps[0]["x"])


def test_generated_strings_are_perf_analyzers_booleans_seeded_and_bf16_as_tritonclient_takes_it():
    cfg = config(input=[{"name": "s", "data_type": "TYPE_STRING", "dims": [2]},
                        {"name": "b", "data_type": "TYPE_BOOL", "dims": [64]},
                        {"name": "h", "data_type": "TYPE_BF16", "dims": [3]}])
    found = generated(cfg, 3, 7)
    assert found["s"].dtype == object and found["s"].shape == (3, 2)
    assert all(isinstance(v, bytes) and len(v) == inputdata.STRING_LENGTH for v in found["s"].ravel())
    assert found["b"].dtype == np.bool_ and found["b"].shape == (3, 64)
    assert found["b"].any() and not found["b"].all()
    assert found["h"].dtype.name == "bfloat16" and found["h"].shape == (3, 3)


# ------------------------------------------------------------------------------------------------------- Target
def test_a_target_is_what_its_config_pbtxt_declares_read_without_a_server(tmp_path):
    t = target(tmp_path)
    assert t.declared and t.description == describe(BATCHING)
    assert (t.name, t.output_names) == ("m", ["z", "w"])
    assert type(t.driver) is type(driver_for(describe(BATCHING)))  # how its requests are sent


def test_a_bls_target_resolves_its_callees_from_its_repository(tmp_path):
    callee = config(name="callee")
    deployment(tmp_path, callee)
    t = target(tmp_path, config(name="bls", backend="python", platform=""), composing=("callee",))
    assert [m.name for m in t.description.composing] == ["callee"]
    assert t.description.composing[0] == describe(callee)


def test_a_request_is_the_declared_data_of_its_batch_and_seed(tmp_path):
    t = target(tmp_path)
    request = t.request(3, 4)
    expected = generated(BATCHING, 3, 4)
    assert list(request) == ["x", "y"] and all(np.array_equal(request[k], expected[k]) for k in expected)
    assert all(v.flags["C_CONTIGUOUS"] for v in request.values())
    default = t.request()  # batch 1, seed 0
    expected = generated(BATCHING, 1, 0)
    assert all(np.array_equal(default[k], expected[k]) for k in expected)


def test_a_request_of_a_batchless_target_has_no_batch_dim(tmp_path):
    t = target(tmp_path, config(max_batch_size=0))
    request = t.request(2)
    assert request["x"].shape == (4,) and request["y"].shape == (1, 3)


def test_a_request_asks_its_inputs_for_one_at_least_and_keeps_its_own_batch_of_them(tmp_path):
    asked = []

    def inputs(batch: int, seed: int) -> dict[str, np.ndarray]:
        asked.append((batch, seed))
        return {"x": np.arange(16 * 4, dtype=np.float32).reshape(16, 4)[:, ::2]}  # not contiguous

    t = target(tmp_path, inputs=inputs)
    assert t.request(0, 3)["x"].shape == (0, 2)
    assert t.request(1, 3)["x"].tolist() == [[0.0, 2.0]]
    assert t.request(2, 9)["x"].flags["C_CONTIGUOUS"]
    assert asked == [(1, 3), (1, 3), (2, 9)]
    (tmp_path / "b").mkdir()
    batchless = target(tmp_path / "b", config(max_batch_size=0), inputs=inputs)
    assert batchless.request(1)["x"].shape == (16, 2)  # a batchless deployment's inputs are taken whole


def test_the_load_cycles_one_request_or_fresh_ones_where_the_response_cache_would_answer_repeats(tmp_path):
    t = target(tmp_path, batch_size=2)
    (only,) = t.load_requests()
    assert all(np.array_equal(only[k], t.request(2)[k]) for k in only)
    cached = Target(server=None, directory=deployment(tmp_path, config(name="c", response_cache={"enable": True})),
                    batch_size=2)
    assert cached.description.response_cache
    assert len(cached.load_requests()) == 32
    requests = cached.load_requests(3)
    assert len(requests) == 3 and all(r["x"].shape == (2, 4) for r in requests)
    seen = [r["x"].tobytes() for r in requests] + [cached.request(2)["x"].tobytes()]
    assert len(set(seen)) == 4  # each one never sent before, nor the seed-0 request
    seed = next(_LOAD_SEEDS)  # the seeds of fresh requests: 1000 on, one each, never 0
    fresh = cached.fresh_request()
    assert seed >= 1000 and all(np.array_equal(fresh[k], cached.request(1, seed + 1)[k]) for k in fresh)


class _Alive:
    """A server that is alive: all run_check asks of it before and after a check."""

    def check_alive(self, when: str) -> None:
        pass

    def gone(self) -> bool:
        return False


@pytest.mark.parametrize("named", ["CACHE", "batching"])
def test_a_check_that_reports_under_another_name_fails_under_its_own(tmp_path, monkeypatch, named):
    """A result whose check is not the one run would sit under another check's name in every report: run_check
    fails it under its own name, keeping what it declared, observed and measured."""
    import tritonsuite.judge.conformance as conformance

    t = target(tmp_path)
    t.server = _Alive()
    monkeypatch.setattr(conformance, "_registry", lambda: {"cache": lambda _: CheckResult(
        t.name, named, "response_cache", "3 hits", "skipped", "why", {"hits": 3})})
    result = conformance.run_check(t, "cache")
    assert (result.check, result.verdict, result.reason) == (
        "cache", "fail", f"the cache check reported its result as {named!r}")
    assert (result.declared, result.observed, result.evidence) == ("response_cache", "3 hits", {"hits": 3})


@pytest.mark.parametrize("field, value", [("deployment", None), ("check", None), ("declared", None), ("observed", 3)])
def test_a_result_without_what_it_judged_is_refused(field, value):
    """A row names the deployment, the check, what was declared and what was observed ("-" where nothing was):
    a result without one is a defect of its check, refused where it is made (run_check then fails that check)."""
    given = dict(deployment="m", check="batching", declared="dynamic", observed="-", verdict="skipped", reason="why")
    with pytest.raises(ValueError, match=f"without its {field} "):
        CheckResult(**{**given, field: value})
    assert CheckResult(**given).observed == "-"
