"""Accuracy under mixed load on the real embedded Triton: each deployment's probes travel in its own traffic while
the others' run over the same windows (``measure_together`` with probes, as ``pytest -m mix`` sends them), and are
judged against the same requests sent one at a time. A deployment that mixes a sample with its batch-mates fails,
naming the sample; a correct one beside it passes. The models are test_underload's small ONNX graphs."""
from __future__ import annotations

from tests.test_underload import FAST, _spec, served  # noqa: F401  (served: the module's server fixture)
from tritonsuite.judge.underload import judge, probe_set, run_alone
from tritonsuite.load.client import served_infer
from tritonsuite.load.engine import LoadPoint, Traffic, measure_together


def test_each_deployments_probes_are_judged_in_its_own_traffic(served):  # noqa: F811
    checks = {}
    for kind in ("mixing", "correct"):
        spec = _spec(kind)
        data = spec.accuracy_data()
        probes = probe_set({"INPUT__0": data.inputs["INPUT__0"]}, 1)
        client = served.client()
        try:
            alone = run_alone(served_infer(client, kind, spec, batched=True), probes)
        finally:
            client.close()
        checks[kind] = (spec, data, probes, alone)
    traffic = [Traffic(kind, spec.example_inputs(1, 0), spec.outputs, LoadPoint(1, 4), served.model_description(kind),
                       probes.requests, 0.5, 3)
               for kind, (spec, data, probes, alone) in checks.items()]
    measured = dict(zip(checks, measure_together(served, traffic, FAST)))
    verdicts = {kind: judge(spec, "fp32", data, probes, alone, measured[kind].probe_responses, deployment=kind,
                            concurrency=4, share=0.5, seed=3)
                for kind, (spec, data, probes, alone) in checks.items()}
    for kind, m in measured.items():
        assert m.meta["accuracy_probes"]["answered"] == len(m.probe_responses) > 0  # its own probes only
        assert m.meta["requests_sent"] == m.meta["server_success_delta"]
    assert not verdicts["mixing"].passed and verdicts["mixing"].mismatches[0].startswith("sample ")
    assert verdicts["correct"].passed, verdicts["correct"].failures
