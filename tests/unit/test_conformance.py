"""The conformance scenario's plain parts, without a server: results as rows and pages, the cases a profile asks
for, the malformed requests the refusals check sends (the checks themselves run on the real server in
tests/test_conformance_checks.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tritonsuite.core.description import describe
from tritonsuite.core.store import RawWriter, load_rows, raw_path
from tritonsuite.judge.conformance import CHECKS, CheckResult, ConformanceError, Target, parse_checks
from tritonsuite.judge.conformance.refusals import probes
from tritonsuite.judge.conformance.traffic import poll
from tritonsuite.profiles import load_profile
from tritonsuite.report import write_reports
from tritonsuite.report.conformance import render_conformance, summary_lines
from tritonsuite.report.records import Check, group_run
from tritonsuite.judge.conformance import OFFLINE_CHECKS
from tritonsuite.run.cases import profile_cases

CONFIG = {"name": "m", "platform": "onnxruntime_onnx", "max_batch_size": 8,
          "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]},
                    {"name": "y", "data_type": "TYPE_INT64", "dims": [-1]}],
          "output": [{"name": "z", "data_type": "TYPE_FP32", "dims": [4]}],
          "dynamic_batching": {"preferred_batch_size": [4]}}


def results() -> list[CheckResult]:
    return [CheckResult("m", "identity", "declared a", "observed a", "pass"),
            CheckResult("m", "batching", "dynamic", "{1: 30}", "fail", "every execution held one request",
                        {"batch_stats": {1: 30}}),
            CheckResult("m", "cache", "not enabled", "-", "skipped", "the configuration does not enable it")]


def test_results_are_rows_that_round_trip_and_become_a_page_and_a_summary(tmp_path):
    path = raw_path(tmp_path, "conformance", "run1")
    for result in results():
        RawWriter(path).append(result.to_row(model="mymodel", title="My model", run_id="run1"))
    rows = load_rows(tmp_path, "run1")
    assert [r.status for r in rows] == ["OK", "FAILED", "SKIPPED"]
    assert rows[1].extra["check"] == "batching" and rows[1].extra["evidence"] == {"batch_stats": {"1": 30}}
    assert rows[1].reasons == ["every execution held one request"] and rows[1].deployment == "m"
    run = group_run(tmp_path, rows, "run1")
    page = render_conformance("m", run.conformance["m"])
    assert "| batching | dynamic | {1: 30} | **FAIL** | every execution held one request |" in page
    assert "| 1 | 30 |" in page  # the histogram
    assert "1 passed, 1 failed, 1 skipped" in page
    lines = summary_lines(run.conformance)
    assert lines[:3] == ["## Conformance", "", "- m: 1 passed, 1 failed, 1 skipped (conformance/m.md)"]
    assert "  - batching: every execution held one request" in lines
    written = [p for p in write_reports(tmp_path, "run1", presenters=("markdown",)) if "conformance" in p.parts]
    assert written == [tmp_path / "conformance" / "m.md"] and written[0].read_text() == page


def test_the_page_reads_as_a_checklist_of_the_declared_fields_and_the_defaults_judged():
    fields = ["name", "max_batch_size", "input", "input.dims", "optimization.graph.level"]
    rows = [CheckResult("m", "identity", "declared a", "observed a", "pass", fields=fields).to_row(model="m"),
            CheckResult("m", "batching", "no dynamic batching", "one request per execution", "pass",
                        fields=fields).to_row(model="m")]
    page = render_conformance("m", [Check.of(r) for r in rows])
    assert "| `input.dims` | identity | pass |" in page
    assert "| `max_batch_size` | batching | pass |" in page
    assert "| `optimization.graph.level` | - | not checkable |" in page
    assert "| batching | no dynamic batching | pass | - |" not in page  # max_batch_size is batching's field
    rows[1].extra["declared_fields"] = fields = ["name"]
    page = render_conformance("m", [Check.of(rows[1])])
    assert "| batching | no dynamic batching | pass | - |" in page  # the default (no batcher) was judged


def test_a_verdict_outside_the_choices_is_refused():
    with pytest.raises(ValueError, match="valid choices: pass, fail, skipped"):
        CheckResult("m", "identity", "", "", "maybe")


def test_checks_are_chosen_by_name_with_the_choices_named():
    assert parse_checks("") == tuple(c for c in CHECKS if c != "shutdown") and parse_checks("all") == CHECKS
    assert parse_checks("reload, identity") == ("reload", "identity")
    with pytest.raises(ConformanceError, match="'idnetity'; valid choices: all, identity, batching"):
        parse_checks("idnetity")


def test_the_cpu_profile_asks_every_check_of_each_online_deployment_and_some_of_each_offline_one():
    cases = profile_cases(load_profile("cpu"), "conformance", checks=CHECKS)
    models = {c.model for c in cases}
    assert models == {"bert", "wide_deep", "fastpitch", "nnunet", "tft"}  # wide_deep_adult: accuracy only
    bert = [c for c in cases if c.model == "bert"]
    assert [c.check for c in bert if c.serving == "online"] == list(CHECKS)
    assert [c.check for c in bert if c.serving == "offline"] == list(OFFLINE_CHECKS)
    assert {c.format for c in bert} == {"onnx"} and {c.precision for c in bert} == {"fp32"}
    assert bert[0].id == "bert-onnx-fp32-online-identity"
    wide = next(c for c in cases if c.model == "wide_deep" and c.serving == "online")
    assert wide.batch_size == 512  # the profile's online batch
    assert len({c.id for c in cases}) == len(cases)


def test_the_refusals_check_sends_exactly_the_malformed_requests_it_names(tmp_path):
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    directory = tmp_path / CONFIG["name"]  # what the target declares: its config.pbtxt, read as Triton would
    directory.mkdir()
    (directory / "config.pbtxt").write_text(
        text_format.MessageToString(json_format.ParseDict(CONFIG, model_config_pb2.ModelConfig())))
    target = Target(server=None, directory=directory)
    assert target.description == describe(CONFIG)
    sent = {problem: (tensors, outputs) for problem, tensors, outputs in probes(target)}
    assert list(sent) == ["batch above max_batch_size", "wrong dtype", "wrong shape", "other size of a variable dim",
                          "missing input", "unknown output", "truncated body", "oversized body"]
    good = target.request(1)
    assert good["x"].shape == (1, 4) and good["y"].shape == (1, 1) and good["y"].dtype == np.int64
    batch = sent["batch above max_batch_size"][0]
    assert batch[0].shape == [9, 4] and len(batch[0].data) == 9 * 16
    assert sent["wrong dtype"][0][0].datatype == "INT32" and sent["wrong dtype"][0][0].data == good["x"].tobytes()
    shape = sent["wrong shape"][0][0]
    assert shape.shape == [1, 5] and len(shape.data) == 5 * 4
    assert [t.name for t in sent["missing input"][0]] == ["y"]
    assert sent["unknown output"][1] == ["z", "conformance_no_such_output"]
    assert len(sent["truncated body"][0][0].data) == 8 and len(sent["oversized body"][0][0].data) == 32


def test_test01_compares_a_padded_output_over_its_own_extent_only():
    """FastPitch's mel (valid_length): batched with a longer sample, an answer carries zero frames past its own end.
    test01 compares the answer under load over the extent it has alone, when the spec says the axis is padded."""
    from tritonsuite.judge.conformance.system import _difference

    rng = np.random.default_rng(0)
    alone = rng.standard_normal((1, 80, 344)).astype(np.float32)
    under_load = np.concatenate([alone, np.zeros((1, 80, 24), np.float32)], axis=2)
    lengths = {"OUTPUT__1": np.array([344])}
    want, got = [{"OUTPUT__0": alone, **lengths}], [{"OUTPUT__0": under_load, **lengths}]
    assert _difference(got, want, padded={"OUTPUT__0": 2}) == (0.0, "")
    assert _difference(got, want)[1] == "response 0 output OUTPUT__0: shape (1, 80, 368) vs (1, 80, 344)"
    under_load[0, 3, 10] += 1.0  # a frame within its own extent differs: still caught
    worst, why = _difference(got, want, padded={"OUTPUT__0": 2})
    assert worst >= 1.0 and why.startswith("response 0 output OUTPUT__0: 1 of 27520 elements beyond atol"), why
    shorter = [{"OUTPUT__0": alone[:, :, :300], **lengths}]  # shorter than alone: a shape that differs
    assert _difference(shorter, want, padded={"OUTPUT__0": 2})[1].endswith("shape (1, 80, 300) vs (1, 80, 344)")


def test_test01_says_an_infinity_of_the_other_sign_is_infinitely_far():
    """inf under load where the answer alone was -inf (or a NaN against a number): the largest difference is inf,
    not numpy's largest float (nan_to_num turned inf into 1.8e308)."""
    from tritonsuite.judge.conformance.system import _difference

    want = [{"OUT": np.array([[-np.inf, 1.0]], np.float32)}]
    worst, why = _difference([{"OUT": np.array([[np.inf, 1.0]], np.float32)}], want)
    assert worst == math.inf and why.endswith("1 of 2 elements beyond atol 0.0001 + rtol 0.0001, max |diff| inf"), why
    worst, why = _difference([{"OUT": np.array([[np.nan, 1.0]], np.float32)}], want)
    assert worst == math.inf and "1 of 2 elements beyond" in why, why


def test_the_longest_idle_counts_only_gaps_with_a_request_waiting():
    """queue_policy's DELAY part: r24.10's batcher, under a queue policy, can sit idle with requests queued, longer
    than the timeout (the fresh wave then expires too). A gap where nothing waited is not idleness."""
    from tritonsuite.judge.conformance.queue import _longest_idle_ms
    from tritonsuite.load.exchange import Answer

    busy = [Answer(0.0, 0.025 * (i // 4 + 1), True) for i in range(16)]  # four per 25 ms execution, from one wave
    assert round(_longest_idle_ms(busy)) == 25
    stalled = busy[:4] + [Answer(0.0, 0.7, True), Answer(0.172, 0.725, True)]  # queued from 0, answered at 700 ms
    assert round(_longest_idle_ms(stalled)) == 675
    apart = [Answer(0.0, 0.025, True), Answer(0.5, 0.525, True)]  # the second sent after the first was answered
    assert round(_longest_idle_ms(apart)) == 0


def test_poll_waits_for_the_last_answers_to_be_counted_and_for_two_reads_to_agree():
    reads = iter([14, 15, 15, 16, 16, 17, 17])  # the server counts the last answers a few reads late
    assert poll(lambda: next(reads), lambda now: now >= 16, timeout_s=5) == 16
    never = iter(range(100))  # a count that never settles: the last read at the deadline, not a wait without end
    assert 0 < poll(lambda: next(never), timeout_s=0.2) < 100


def test_checks_named_with_blanks_and_empty_names_are_read_and_all_only_alone_means_every_one():
    from tritonsuite.judge.conformance import DEFAULT_CHECKS, OPT_IN

    assert OPT_IN == ("shutdown",) and DEFAULT_CHECKS == tuple(c for c in CHECKS if c not in OPT_IN)
    assert parse_checks(None) == DEFAULT_CHECKS and parse_checks(" , ,") == DEFAULT_CHECKS
    assert parse_checks(" identity , ,batching ") == ("identity", "batching")
    assert parse_checks(" all ") == CHECKS and parse_checks("shutdown") == ("shutdown",)
    with pytest.raises(ConformanceError) as raised:
        parse_checks("identity,all")
    assert str(raised.value) == f"conformance check 'all'; valid choices: all, {', '.join(CHECKS)}"
    with pytest.raises(ConformanceError) as raised:
        parse_checks("Identity,batchng")
    assert str(raised.value).startswith("conformance check 'Identity'; valid choices: all, identity, batching, ")


def test_every_check_runs_its_own_function_in_the_order_named():
    from tritonsuite.judge.conformance import _registry

    found = {check: f"{function.__module__.rsplit('.', 1)[1]}:{function.__name__}"
             for check, function in _registry().items()}
    assert list(found) == list(CHECKS) == [
        "identity", "batching", "instances", "rate_limiter", "tensors", "classification", "steps", "sequence",
        "state", "ordering", "ragged", "queue_policy", "priority", "decoupled", "cache", "refusals", "counters",
        "test01", "test04", "test05", "warmup", "shutdown", "reload"]
    assert found == {"identity": "identity:check_identity", "batching": "batching:check_batching",
                     "instances": "batching:check_instances", "rate_limiter": "ratelimit:check_rate_limiter",
                     "tensors": "tensors:check_tensors", "classification": "tensors:check_classification",
                     "steps": "steps:check_steps", "sequence": "sequence:check_sequence", "state": "state:check_state",
                     "ordering": "ordering:check_ordering", "ragged": "ragged:check_ragged",
                     "queue_policy": "queue:check_queue_policy", "priority": "priority:check_priority",
                     "decoupled": "decoupled:check_decoupled", "cache": "cache:check_cache",
                     "refusals": "refusals:check_refusals", "counters": "counters:check_counters",
                     "test01": "system:check_test01", "test04": "system:check_test04",
                     "test05": "system:check_test05", "warmup": "warmup:check_warmup",
                     "shutdown": "shutdown:check_shutdown", "reload": "reload:check_reload"}


def test_generated_inputs_of_a_bf16_input_are_bfloat16_whatever_was_imported_first():
    """numpy knows no bfloat16 unless something registered it (tritonclient's import does, through ml_dtypes): in a
    fresh process the conformance data of a BF16 input failed with "data type 'bfloat16' not understood"."""
    import subprocess
    import sys

    script = ("import sys\nfrom types import SimpleNamespace\nfrom tritonsuite.core.description import describe\n"
              "from tritonsuite.judge.conformance.result import Target\n"
              "d = describe({'name': 'm', 'backend': 'python', 'max_batch_size': 2, 'input': [{'name': 'X', "
              "'data_type': 'TYPE_BF16', 'dims': [3]}], 'output': [{'name': 'Y', 'data_type': 'TYPE_FP32', "
              "'dims': [3]}]})\nx = Target.generated(SimpleNamespace(description=d), 2)['X']\n"
              "print(x.dtype, x.shape)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "bfloat16 (2, 3)"
