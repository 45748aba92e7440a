"""How far the accuracy gate's metrics move when only the host's math changes (docs/accuracy.md, "Allowances").

For each model of the cpu profile, with the weights the gate uses (the checkpoints shipped with tritonsuite, or the
seeded/packaged ones), every deployment the gate judges (its formats x precisions) is run in-process exactly as its
stand-in backend serves it, under each math setting: intra-op threads 1 and 2, oneDNN on and off
(``torch.backends.mkldnn.enabled``, TorchScript formats), twice at the default setting (run to run), and the fp32
eager model itself. Each run is scored by the model's own accuracy task against the fp32 eager model, as the gate
scores it. Settings that must be chosen before torch loads (``ATEN_CPU_CAPABILITY=default|avx2|avx512``,
``ONEDNN_MAX_CPU_ISA=SSE41|AVX2``...) are set in the environment of a whole run and named with ``--label``.

    python examples/accuracy_spread.py --out reports/spread.jsonl                       # threads, oneDNN, runtimes
    ATEN_CPU_CAPABILITY=default python examples/accuracy_spread.py --label aten-default --out reports/spread.jsonl
    python examples/accuracy_spread.py --summarize reports/spread.jsonl                 # spread per metric

Each line of ``--out``: {label, model, deployment, precision, setting, metrics}. The summary gives, per metric kind
and precision, the largest spread (max - min) of one deployment over the settings and labels, and the spread across
the runtimes (fp32: eager, onnxruntime, TorchScript), beside the allowance the gate gives that metric.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from tritonsuite.deploy import export as export_mod
from tritonsuite.deploy.repository import DeploymentConfig
from tritonsuite.judge.accuracy import run_batched
from tritonsuite.judge.baselines import default_allowance, informational
from tritonsuite.models import default_registry
from tritonsuite.models.training import trained_checkpoint
from tritonsuite.profiles import load_profile
from tritonsuite.spec import rule_precision


def measure(models: list[str], label: str, out: Path, cache: Path) -> None:
    import torch

    profile, registry = load_profile("cpu"), default_registry()
    with open(out, "a") as sink:
        for model in models:
            mp = profile.models[model]
            spec = registry.get(model, mp.size)
            checkpoint = trained_checkpoint(spec, cache) if spec.train is not None else None
            module = spec.build(checkpoint)
            data = spec.accuracy_data(None, checkpoint)
            torch.set_num_threads(2)
            reference = run_batched(export_mod.eager_runner(module, spec), data.inputs, mp.max_batch_size)

            def record(deployment, precision, setting, outputs):
                metrics = {m.name: m.value for m in data.score(outputs, reference, rule_precision(precision))}
                sink.write(json.dumps({"label": label, "model": model, "deployment": deployment,
                                       "precision": precision, "setting": setting, "metrics": metrics}) + "\n")
                sink.flush()

            for threads in (1, 2):
                for onednn in (True, False):
                    torch.set_num_threads(threads)
                    torch.backends.mkldnn.enabled = onednn
                    outputs = run_batched(export_mod.eager_runner(module, spec), data.inputs, mp.max_batch_size)
                    record(f"{model}-eager-fp32", "fp32", f"threads {threads}, oneDNN {'on' if onednn else 'off'}",
                           outputs)
            torch.backends.mkldnn.enabled = True
            for precision in dict.fromkeys(["fp32", *mp.accuracy_precisions]):
                for fmt in mp.formats:
                    if fmt == "trt" or fmt not in spec.formats:
                        continue
                    start = time.perf_counter()
                    try:
                        art = export_mod.export(spec, fmt, precision, cache, checkpoint=checkpoint,
                                                module=module if precision == "fp32" else None,
                                                batch_sizes=mp.batch_sizes())
                    except Exception as exc:  # the gate skips or fails it too, with this reason
                        print(f"{label}: {model} {fmt} {precision}: not exported: "
                              f"{(str(exc).splitlines() or [''])[0][:200]}", flush=True)
                        continue
                    settings = [(t, d) for t in (1, 2) for d in ((True, False) if fmt != "onnx" else (True,))]
                    for threads, onednn in settings + [(mp.intra_op_threads or 2, True)]:  # the last: run to run
                        torch.backends.mkldnn.enabled = onednn
                        session = export_mod.artifact_session(spec, art.path, fmt, config=DeploymentConfig(
                            max_batch_size=mp.max_batch_size, intra_op_threads=threads))
                        outputs = run_batched(session, data.inputs, mp.max_batch_size)
                        record(f"{model}-{fmt}-{precision}", precision,
                               f"threads {threads}" + ("" if fmt == "onnx" else f", oneDNN {'on' if onednn else 'off'}"),
                               outputs)
                    torch.backends.mkldnn.enabled = True
                    print(f"{label}: {model} {fmt} {precision} in {time.perf_counter() - start:.0f} s", flush=True)


def summarize(path: Path) -> None:
    """Per metric (deployments of one model and precision pooled by metric name): the largest spread of one
    deployment over every setting and label, the spread across runtimes, and the allowance they give."""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    values: dict[tuple, list[float]] = defaultdict(list)
    for r in runs:
        for metric, value in r["metrics"].items():
            values[(r["model"], r["precision"], metric, r["deployment"])].append(value)
    by_metric: dict[tuple, dict] = defaultdict(lambda: {"within": 0.0, "across": [], "n": 0, "value": None})
    for (model, precision, metric, deployment), found in values.items():
        entry = by_metric[(model, precision, metric)]
        entry["within"] = max(entry["within"], max(found) - min(found))
        entry["across"] += found
        entry["n"] += len(found)
        entry["value"] = found[0]
    print("| model | precision | metric | value | runs | spread within a deployment | spread across runtimes "
          "| allowance |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, precision, metric), e in sorted(by_metric.items()):
        if informational(metric):
            continue
        across = max(e["across"]) - min(e["across"])
        allowed = default_allowance(metric)
        allowed = max(allowed.get("absolute", 0.0), allowed.get("relative", 0.0) * abs(e["value"]))
        print(f"| {model} | {precision} | {metric} | {e['value']:.6g} | {e['n']} | {e['within']:.3g} | {across:.3g} | "
              f"{allowed:.3g} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tft,nnunet,wide_deep_adult,bert,wide_deep,fastpitch")
    parser.add_argument("--label", default="default", help="names the environment of this run (ISA settings)")
    parser.add_argument("--out", type=Path, default=Path("reports/spread.jsonl"))
    parser.add_argument("--cache", type=Path, default=Path("model_repos/.cache"))
    parser.add_argument("--summarize", type=Path, default=None, help="print the spread table of a --out file")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    measure([m for m in args.models.split(",") if m], args.label, args.out, args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
