"""tritonsuite fp16-diagnose on the CPU: the module-by-module comparison names the module that overflows in half."""
import dataclasses
import json
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
