"""tritonsuite fp16-diagnose on the CPU: the module-by-module comparison names the module that overflows in half."""
import dataclasses
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tritonsuite.cli import main
from tritonsuite.core.spec import TensorSpec
from tritonsuite.judge.diagnose import diagnose, emulate_half
from tritonsuite.models import default_registry


def _overflowing_spec():
    import torch

    class Square(torch.nn.Module):
        def forward(self, x):
            return x * x

    def build(checkpoint=None):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), Square(),
                                  torch.nn.Linear(16, 4))
        with torch.no_grad():
            net[2].weight.mul_(2000.0)  # outputs of ~1e3: their squares (~1e6) overflow half's 65504

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = net

            def forward(self, x):
                return (self.net(x),)

        return Wrapped().eval()

    identity = default_registry().get("identity", "tiny")
    return dataclasses.replace(identity, name="overflowing", build=build,
                               outputs=(TensorSpec("OUTPUT__0", "float32", (4,)),))


def test_the_first_divergent_module_is_the_one_that_overflows_in_half():
    found = diagnose(_overflowing_spec(), "cpu-fp16-emulated")
    assert found.first_divergent is not None and found.first_divergent.name == "net.3"
    assert found.first_divergent.kind == "Square" and found.first_divergent.relative_l2 == float("inf")
    assert found.modules == 5 and "net.3 (Square" in found.line()


def test_a_seed_model_in_emulated_half_stays_close_to_fp32():
    found = diagnose(default_registry().get("tft", "tiny"), "cpu-fp16-emulated")
    assert found.first_divergent is None and found.modules > 50
    assert 0 < found.outputs_relative_l2["target__0"] < 0.01  # rounded, so not identical


def test_emulation_rounds_parameters_and_leaf_outputs_and_leaves_the_original_alone():
    import torch

    module = torch.nn.Linear(4, 4)
    original = module.weight.detach().clone()
    emulated = emulate_half(module)
    assert torch.equal(module.weight, original)
    assert torch.equal(emulated.weight, original.half().float())
    out = emulated(torch.randn(3, 4))
    assert out.dtype == torch.float32 and torch.equal(out, out.half().float())


def test_the_command_writes_one_line_per_diagnosis_and_refuses_cuda_without_a_gpu(tmp_path, capsys):
    import torch

    out = tmp_path / "diagnosis.jsonl"
    assert main(["fp16-diagnose", "--models", "bert:tiny", "--comparisons", "cpu-fp16-emulated",
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["model"], r["comparison"]) for r in rows] == [("bert", "cpu-fp16-emulated")]
    assert np.isfinite(rows[0]["outputs_relative_l2"]["output__0"])
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            main(["fp16-diagnose", "--models", "bert:tiny", "--comparisons", "cuda-fp16", "--out", str(out)])
        assert "this host has no CUDA device; valid here: cpu-fp16-emulated" in capsys.readouterr().err


def test_emulated_accuracy_judges_by_the_fp16_rules_against_fp32():
    from tests.precision_faults_spec import SPECS
    from tritonsuite.judge.diagnose import emulated_accuracy

    specs = {s.name: s for s in SPECS}
    good = emulated_accuracy(specs["overflow_island"])
    assert good.passed and good.precision == "fp16" and good.samples == 64
    assert good.deployment == "overflow_island_tiny_eager_fp16-emulated"
    bad = emulated_accuracy(specs["perturbed"])  # its own .half() changes a layer by 1%: emulation goes through it
    assert not bad.passed and bad.failures[0].startswith("output_relative_l2_error = 0.01")


def test_emulated_accuracy_does_not_judge_what_fp32_itself_misses():
    from tritonsuite.judge.diagnose import emulated_accuracy
    from tritonsuite.models import default_registry

    result = emulated_accuracy(default_registry().get("tft", "tiny"))  # seeded weights: no better than naive
    assert result.passed, result.failures
    assert "not judged, the fp32 model itself misses: q_risk_P10, q_risk_P50, q_risk_P90" in result.description
    relative = {m.name: m for m in result.metrics if m.name.endswith("_relative_to_eager")}
    assert len(relative) == 3 and all(m.passed for m in relative.values())


def test_the_command_judges_a_users_spec_file_and_fails_when_one_model_does(tmp_path, capsys):
    spec_file = Path(__file__).parent.parent / "precision_faults_spec.py"
    out = tmp_path / "diagnosis.jsonl"
    assert main(["fp16-diagnose", "--model-spec", str(spec_file), "--models", "overflow_island:tiny",
                 "--accuracy", "--out", str(out)]) == 0
    assert "emulated fp16 accuracy: 1 of 1 passed" in capsys.readouterr().out
    assert main(["fp16-diagnose", "--model-spec", str(spec_file), "--models", "overflow_island:tiny,perturbed:tiny",
                 "--accuracy", "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "perturbed:tiny cpu-fp16-emulated accuracy against fp32: FAIL" in printed
    assert "emulated fp16 accuracy: 1 of 2 passed; failed: perturbed:tiny" in printed
    assert len(out.read_text().splitlines()) == 3  # one diagnosis line per model and run


def test_relative_l2_of_equal_shaped_finite_outputs_and_inf_otherwise():
    from tritonsuite.judge.diagnose import relative_l2

    assert relative_l2(np.array([3.0, 4.0]), np.array([0.0, 0.0])) == 5.0 / 1e-30  # a zero reference: the floor
    assert relative_l2(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert relative_l2(np.array([3.0, 5.0]), np.array([3.0, 4.0])) == pytest.approx(1.0 / 5.0)
    assert relative_l2(np.array([1.0]), np.array([1.0, 2.0])) == float("inf")
    assert relative_l2(np.array([np.nan, 1.0]), np.array([1.0, 1.0])) == float("inf")
    assert relative_l2(np.array([-np.inf, 1.0]), np.array([1.0, 1.0])) == float("inf")


def test_compare_modules_pairs_calls_by_name_and_index_and_finds_the_first_and_the_worst():
    from tritonsuite.judge.diagnose import ModuleDivergence, compare_modules

    one = np.array([1.0, 0.0])
    reference = [("a", "Linear", one), ("b", "ReLU", one), ("a", "Linear", one), ("c", "Tanh", one),
                 ("d", "Gone", one)]
    candidate = [("a", "Linear", np.array([1.0, 0.005])), ("b", "ReLU", np.array([1.0, 0.5])),
                 ("a", "Linear", np.array([1.0, 0.02])), ("c", "Tanh", np.array([1.0, 0.0, 0.0]))]
    compared, first, worst = compare_modules(reference, candidate, 0.01)
    assert compared == 4  # d has no candidate output
    assert first == ModuleDivergence("b", "ReLU", 0.5, 0.5)
    assert worst == ModuleDivergence("c", "Tanh", float("inf"), float("inf"))
    compared, first, worst = compare_modules(reference[:1] + reference[2:3], candidate[:1] + candidate[2:3], 0.01)
    assert (compared, first) == (2, ModuleDivergence("a", "Linear", pytest.approx(0.02), pytest.approx(0.02)))
    assert worst == first
    compared, first, worst = compare_modules(reference[:1], candidate[:1], 0.005)
    assert first is None and worst == ModuleDivergence("a", "Linear", pytest.approx(0.005), pytest.approx(0.005))
    compared, first, worst = compare_modules(reference[:1], candidate[:1], 0.00499)
    assert first == worst
    assert compare_modules([], candidate, 0.01) == (0, None, None)
    # the first of two equally bad modules is the worst
    _, _, worst = compare_modules([("x", "A", one), ("y", "B", one)],
                                  [("x", "A", np.array([1.0, 0.5])), ("y", "B", np.array([1.0, 0.5]))], 0.01)
    assert worst.name == "x"


def test_the_diagnosis_line_names_the_first_module_or_none():
    from tritonsuite.judge.diagnose import Diagnosis, ModuleDivergence

    first = ModuleDivergence("net.3", "Square", 0.123456, 1.0)
    found = Diagnosis("m", "tiny", "cpu-fp16-emulated", "CPU (x)", 0.01, 5, {"y": 0.5, "z": 1e-5}, first, first)
    assert found.line() == ("m:tiny cpu-fp16-emulated on CPU (x): outputs rel L2 y 0.5, z 1e-05; first module above "
                            "0.01: net.3 (Square, 0.123) of 5 leaf modules")
    assert found.notes == []
    none = dataclasses.replace(found, first_divergent=None, outputs_relative_l2={})
    assert none.line() == "m:tiny cpu-fp16-emulated on CPU (x): outputs rel L2 ; no module above 0.01 of 5 leaf modules"


def test_floats_are_found_and_mapped_through_tuples_and_lists():
    import torch

    from tritonsuite.judge.diagnose import _first_float, _map_floats

    ints, floats = torch.tensor([1, 2]), torch.tensor([1.5, 2.5])
    assert _first_float(ints) is None and _first_float(floats) is floats
    assert _first_float((ints, [None, floats], torch.tensor([9.0]))) is floats
    assert _first_float(("text", 3)) is None and _first_float(None) is None
    mapped = _map_floats((ints, [floats, "x"]), lambda t: t * 2)
    assert isinstance(mapped, tuple) and isinstance(mapped[1], list)
    assert mapped[0] is ints and torch.equal(mapped[1][0], floats * 2) and mapped[1][1] == "x"


def test_leaf_outputs_are_recorded_in_call_order_and_the_hooks_removed():
    import torch

    from tritonsuite.judge.diagnose import record_leaf_outputs

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.act = torch.nn.Linear(2, 2), torch.nn.ReLU()
            self.inner = torch.nn.Sequential(torch.nn.Identity())

        def forward(self, x):
            return self.act(self.first(self.act(x))), self.inner(x.long())

    net = Net()
    x = torch.tensor([[1.0, -1.0]])
    recorded, outputs = record_leaf_outputs(net, (x,))
    assert [(name, kind) for name, kind, _ in recorded] == [("act", "ReLU"), ("first", "Linear"), ("act", "ReLU")]
    assert all(value.dtype == np.float32 for _, _, value in recorded)  # the long output of inner.0 is no float
    np.testing.assert_array_equal(recorded[0][2], [[1.0, 0.0]])
    assert isinstance(outputs, tuple) and len(outputs) == 2 and outputs[1].dtype == torch.int64
    assert not any(m._forward_hooks for m in net.modules())
    (single,) = record_leaf_outputs(torch.nn.ReLU(), (x,))[1]
    assert torch.equal(single, torch.relu(x))


def test_a_recorded_output_is_a_copy_and_a_measured_one_is_handed_over_and_not_kept():
    """The reference keeps each leaf's output as it was (an in-place module after it changes the tensor itself); a
    candidate measured against it keeps none (nnU-Net large's leaves are 4.4 GiB a volume)."""
    import torch

    from tritonsuite.judge.diagnose import record_leaf_outputs

    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LeakyReLU(0.5, inplace=True))
    with torch.no_grad():
        net[0].weight.copy_(torch.eye(2))
        net[0].bias.zero_()
    x = torch.tensor([[1.0, -2.0]])
    recorded, (out,) = record_leaf_outputs(net, (x,))
    assert [(n, k) for n, k, _ in recorded] == [("0", "Linear"), ("1", "LeakyReLU")]
    np.testing.assert_array_equal(recorded[0][2], [[1.0, -2.0]])  # before the in-place activation
    np.testing.assert_array_equal(recorded[1][2], [[1.0, -1.0]])
    handed = []
    kept, (again,) = record_leaf_outputs(net, (x,), each=lambda n, k, t: handed.append((n, k, t.clone())))
    assert kept == [] and torch.equal(again, out) and [(n, k) for n, k, _ in handed] == [("0", "Linear"),
                                                                                        ("1", "LeakyReLU")]
    assert torch.equal(handed[1][2], out) and not any(m._forward_hooks for m in net.modules())


def test_the_comparisons_and_the_models_diagnosed_by_default():
    from tritonsuite.judge.diagnose import COMPARISONS, DEFAULT_THRESHOLD, DIAGNOSED

    assert DEFAULT_THRESHOLD == 0.01
    assert COMPARISONS == {"cpu-fp16-emulated": ("cpu", "emulated", True), "cuda-fp32-no-tf32": ("cuda", "fp32", True),
                           "cuda-fp16": ("cuda", "fp16", True), "cuda-fp16-no-cudnn": ("cuda", "fp16", False)}
    assert DIAGNOSED == (("bert", "large"), ("wide_deep", "full"), ("fastpitch", "large"), ("nnunet", "large"),
                         ("tft", "large"))


def test_the_whole_diagnosis_of_an_overflowing_model():
    found = diagnose(_overflowing_spec(), "cpu-fp16-emulated", threshold=0.5)
    assert (found.model, found.size, found.comparison, found.threshold, found.modules, found.notes) == (
        "overflowing", "tiny", "cpu-fp16-emulated", 0.5, 5, [])
    assert found.device.startswith("CPU (")
    assert found.first_divergent.name == "net.3" and found.worst.name == "net.3"
    assert list(found.outputs_relative_l2) == ["OUTPUT__0"]


def test_the_commands_options_their_defaults_and_help():
    import argparse

    from tritonsuite.judge.diagnose import add_fp16_diagnose_arguments

    parser = argparse.ArgumentParser(add_help=False)
    add_fp16_diagnose_arguments(parser)
    found = {a.dest: (a.option_strings, a.default, a.type, a.metavar, a.help, type(a).__name__)
             for a in parser._actions}
    assert found == {
        "models": (["--models"], "bert:large,wide_deep:full,fastpitch:large,nnunet:large,tft:large", None, None,
                   "comma-separated model:size (default: the five seed models at the sizes the H100 ran)",
                   "_StoreAction"),
        "comparisons": (["--comparisons"], "", None, None, "comma-separated, of cpu-fp16-emulated, cuda-fp32-no-tf32, "
                        "cuda-fp16, cuda-fp16-no-cudnn (default: all that this host can run)", "_StoreAction"),
        "threshold": (["--threshold"], 0.01, float, None, "relative L2 error above which a module diverges",
                      "_StoreAction"),
        "batch_size": (["--batch-size"], 2, int, None, None, "_StoreAction"),
        "out": (["--out"], "reports/fp16-diagnosis.jsonl", None, None, "one JSON line per diagnosis", "_StoreAction"),
        "accuracy": (["--accuracy"], False, None, None, "also judge each model's fp16 storage, emulated on the CPU, "
                     "against fp32 by its fp16 rules over its accuracy data (one line per model; the exit status is 1 "
                     "when one fails)", "_StoreTrueAction"),
        "model_spec": (["--model-spec"], [], None, "PATH", "a Python file defining SPECS (your own models, as "
                       "pytest's --model-spec); repeatable", "_AppendAction")}


def test_the_commands_whole_output_for_a_model_that_fails_emulated_half(tmp_path, capsys):
    import re

    from tritonsuite.judge.diagnose import emulated_accuracy

    spec = default_registry().get("identity", "tiny")
    out = tmp_path / "new" / "dir" / "diagnosis.jsonl"
    assert main(["fp16-diagnose", "--models", "identity:tiny,,identity:tiny", "--comparisons", "cpu-fp16-emulated",
                 "--threshold", "0.5", "--batch-size", "3", "--accuracy", "--out", str(out)]) == 1
    line = diagnose(spec, "cpu-fp16-emulated", batch_size=3, threshold=0.5).line()
    judged = emulated_accuracy(spec, batch_size=3)
    accuracy = re.escape(f"identity:tiny cpu-fp16-emulated accuracy against fp32: FAIL (64 samples, "
                         f"{judged.description}; ") + r"\d+\.\d s\): " + re.escape("; ".join(judged.failures))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == line and printed[2] == line and re.fullmatch(accuracy, printed[1]) and \
        re.fullmatch(accuracy, printed[3])
    assert printed[4:] == [f"wrote {out}", "emulated fp16 accuracy: 0 of 2 passed; failed: identity:tiny, identity:tiny"]
    rows = [json.loads(r) for r in out.read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["threshold"] == 0.5 and rows[0]["first_divergent"] is None
    assert main(["fp16-diagnose", "--models", "identity:tiny", "--out", str(out)]) == 0  # appended, no --accuracy
    assert len(out.read_text().splitlines()) == 3
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {out}"


@pytest.mark.parametrize("arguments, message", [
    (["--models", "nope:tiny"], "unknown model 'nope'; valid choices: "),
    (["--models", "identity"], "model 'identity' has no size 'cpu'; valid choices: tiny"),
    (["--comparisons", "cpu-fp16-emulated,bad,worse"], "--comparisons bad,worse: valid choices: cpu-fp16-emulated, "
                                                         "cuda-fp32-no-tf32, cuda-fp16, cuda-fp16-no-cudnn"),
    (["--model-spec", "/nonexistent/spec.py"], "--model-spec /nonexistent/spec.py: no such file")])
def test_the_command_refuses_what_it_cannot_run_in_one_line(tmp_path, capsys, arguments, message):
    with pytest.raises(SystemExit) as raised:
        main(["fp16-diagnose", *arguments, "--out", str(tmp_path / "d.jsonl")])
    assert raised.value.code == 2
    assert f"tritonsuite fp16-diagnose: error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "d.jsonl").exists()


def _recording_spec(seen):
    import torch

    class Recording(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(16, 4)

        def forward(self, x):
            seen.append((torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32,
                         torch.backends.cudnn.allow_tf32, x.shape[0]))
            y = self.linear(x)
            return y, (y * 3000).round().long(), torch.zeros(2, dtype=torch.long)

    identity = default_registry().get("identity", "tiny")
    return dataclasses.replace(identity, name="recording", build=lambda checkpoint=None: Recording().eval(),
                               outputs=(TensorSpec("OUTPUT__0", "float32", (4,)), TensorSpec("LABEL", "int64", (4,)),
                                        TensorSpec("FIXED", "int64", (2,))))


def test_the_candidate_runs_without_tf32_and_the_settings_are_restored_after():
    import torch

    seen = []
    spec = _recording_spec(seen)
    before = (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = (
            False, True, True)
        found = diagnose(spec, "cpu-fp16-emulated", batch_size=3)
        after = (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    finally:
        torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    assert seen == [(False, True, True, 3), (True, False, False, 3)]  # the reference as it was; the candidate: no tf32
    assert after == (False, True, True)
    assert list(found.outputs_relative_l2) == ["OUTPUT__0"]  # integer outputs are counted, not measured
    assert len(found.notes) == 2 and found.notes[1] == "FIXED: 1.0000 of integer elements equal"
    share = float(found.notes[0].removeprefix("LABEL: ").removesuffix(" of integer elements equal"))
    assert found.notes[0].startswith("LABEL: ") and 0 < share < 1  # rounded in half, some labels move
    assert found.modules == 1 and found.worst.name == "linear" and found.worst.kind == "Linear"


def test_the_diagnosis_uses_the_module_given_the_batch_asked_and_leaves_the_module_alone():
    import torch

    seen = []
    spec = _recording_spec(seen)
    module = spec.build(None).double()
    weight = module.linear.weight.detach().clone()
    found = diagnose(spec, "cpu-fp16-emulated", batch_size=5, module=module)
    assert torch.equal(module.linear.weight, weight) and module.linear.weight.dtype == torch.float64
    assert found.modules == 1 and found.first_divergent is None and found.threshold == 0.01
    assert [batch for *_, batch in seen] == [5, 5]
    small = diagnose(spec, "cpu-fp16-emulated", batch_size=5, module=module, threshold=1e-9)
    assert small.first_divergent is not None and small.first_divergent.name == "linear"
    assert 0 < small.first_divergent.relative_l2 < 0.01 and small.first_divergent.max_abs > 0


def test_a_real_half_candidate_and_a_cudnn_less_one_on_the_cpu(monkeypatch):
    """The GPU comparisons' path (the candidate moved, cast to half, its inputs cast) run on the CPU's own kernels."""
    from tritonsuite.judge import diagnose as module

    monkeypatch.setitem(module.COMPARISONS, "cpu-fp16", ("cpu", "fp16", True))
    monkeypatch.setitem(module.COMPARISONS, "cpu-fp32-no-cudnn", ("cpu", "fp32", False))
    seen = []
    spec = _recording_spec(seen)
    half = diagnose(spec, "cpu-fp16", batch_size=3)
    assert half.notes[-1] == "FIXED: 1.0000 of integer elements equal" and len(half.notes) == 2
    assert 0 < half.outputs_relative_l2["OUTPUT__0"] < 0.01 and half.worst.name == "linear"
    fp32 = diagnose(spec, "cpu-fp32-no-cudnn", batch_size=3)
    assert fp32.outputs_relative_l2 == {"OUTPUT__0": 0.0} and fp32.worst.relative_l2 == 0.0
    assert fp32.notes == ["cuDNN disabled (torch.backends.cudnn.enabled=False)", "LABEL: 1.0000 of integer elements "
                          "equal", "FIXED: 1.0000 of integer elements equal"]
    assert [s[0] for s in seen] == [seen[0][0], True, seen[0][0], False]  # cuDNN off for that candidate only


def test_a_module_the_candidate_never_called_is_skipped_not_the_end_of_the_comparison():
    from tritonsuite.judge.diagnose import compare_modules

    one = np.array([1.0, 0.0])
    reference = [("a", "A", one), ("gone", "G", one), ("b", "B", one)]
    candidate = [("a", "A", one), ("b", "B", np.array([1.0, 0.5]))]
    compared, first, worst = compare_modules(reference, candidate, 0.01)
    assert compared == 2 and first.name == "b" and worst.name == "b"


def test_the_command_runs_each_models_fp32_reference_once_for_all_its_comparisons(tmp_path, monkeypatch, capsys):
    """A large model's CPU fp32 run is the diagnosis's dearest part on a GPU host: one per model, not per comparison."""
    from tritonsuite.judge import diagnose as module

    monkeypatch.setitem(module.COMPARISONS, "cpu-fp16", ("cpu", "fp16", True))
    monkeypatch.setitem(module.COMPARISONS, "cpu-fp32-no-cudnn", ("cpu", "fp32", False))
    spec_file = tmp_path / "recorded_spec.py"  # the recording model of the tests above, as a user's spec file
    spec_file.write_text("from tests.unit.test_diagnose import _recording_spec\nCALLS = []\n"
                         "SPECS = [_recording_spec(CALLS)]\n")
    out = tmp_path / "d.jsonl"
    comparisons = ["cpu-fp16", "cpu-fp32-no-cudnn", "cpu-fp16-emulated"]
    assert main(["fp16-diagnose", "--model-spec", str(spec_file), "--models", "recording:tiny", "--comparisons",
                 ",".join(comparisons), "--batch-size", "3", "--out", str(out)]) == 0
    recorded = sys.modules["tritonsuite_user_spec_recorded_spec"]
    # the fp32 reference once, as the settings were, then one candidate per comparison (cuDNN off for one, no TF32)
    assert recorded.CALLS[1:] == [(True, False, False, 3), (False, False, False, 3), (True, False, False, 3)]
    assert len(recorded.CALLS) == 4 and recorded.CALLS[0][3] == 3
    rows = [json.loads(r) for r in out.read_text().splitlines()]
    assert [r["comparison"] for r in rows] == comparisons
    alone = [asdict(diagnose(recorded.SPECS[0], c, batch_size=3)) for c in comparisons]  # a reference each
    assert rows == json.loads(json.dumps(alone)) and 0 < rows[0]["outputs_relative_l2"]["OUTPUT__0"] < 0.01
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {out}"
