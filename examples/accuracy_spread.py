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
    python examples/accuracy_spread.py --summarize reports/spread.jsonl --write-allowances fixtures/baselines/cpu
    python examples/accuracy_spread.py --against-baselines reports/gate-avx2            # a gate run's deltas

Each line of ``--out``: {label, model, deployment, precision, setting, metrics}. The summary gives, per metric kind
and precision, the largest spread (max - min) of one deployment over the settings and labels, and the spread across
the runtimes (fp32: eager, onnxruntime, TorchScript), and the allowance they give: the default allowance of the
metric's kind (the floor) unless 5x the larger spread is more.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

from tritonsuite.core.spec import rule_precision
from tritonsuite.core.tensors import run_batched
from tritonsuite.deploy import export as export_mod
from tritonsuite.deploy.repository import model_config
from tritonsuite.judge.baselines import default_allowance, informational
from tritonsuite.models import default_registry
from tritonsuite.models.training import trained_checkpoint
from tritonsuite.profiles import load_profile


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
                        session = export_mod.artifact_session(spec, art.path, fmt, config=model_config(
                            spec.name, spec, fmt, max_batch_size=mp.max_batch_size, intra_op_threads=threads))
                        outputs = run_batched(session, data.inputs, mp.max_batch_size)
                        record(f"{model}-{fmt}-{precision}", precision,
                               f"threads {threads}" + ("" if fmt == "onnx" else f", oneDNN {'on' if onednn else 'off'}"),
                               outputs)
                    torch.backends.mkldnn.enabled = True
                    print(f"{label}: {model} {fmt} {precision} in {time.perf_counter() - start:.0f} s", flush=True)


MULTIPLE = 5  # an allowance is at least this many times the largest spread measured for its metric


def spreads(path: Path) -> dict[tuple, dict]:
    """Per (model, precision, metric): the largest spread (max - min) of one deployment over the settings and labels
    ("within"), the spread over every deployment of that precision ("across": eager, onnxruntime, TorchScript), the
    number of runs and a value."""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    values: dict[tuple, list[float]] = defaultdict(list)
    for r in runs:
        for metric, value in r["metrics"].items():
            values[(r["model"], r["precision"], metric, r["deployment"])].append(value)
    found: dict[tuple, dict] = defaultdict(lambda: {"within": 0.0, "all": [], "value": None})
    for (model, precision, metric, _), measured in values.items():
        entry = found[(model, precision, metric)]
        entry["within"] = max(entry["within"], max(measured) - min(measured))
        entry["all"] += measured
        entry["value"] = measured[0]
    return {key: {"within": e["within"], "across": max(e["all"]) - min(e["all"]), "runs": len(e["all"]),
                  "value": e["value"]} for key, e in found.items() if not informational(key[2])}


def allowance(metric: str, value: float, spread: float) -> dict[str, float]:
    """The default allowance (the floor: the smallest change worth failing), unless MULTIPLE x the measured spread
    is larger: then that, as an absolute allowance (two significant digits, rounded up)."""
    floor = default_allowance(metric)
    floor_value = max(floor.get("absolute", 0.0), floor.get("relative", 0.0) * abs(value))
    wanted = MULTIPLE * spread
    if wanted <= floor_value:
        return floor
    digits = 1 - math.floor(math.log10(wanted))
    return {"absolute": math.ceil(wanted * 10 ** digits) / 10 ** digits}


def summarize(path: Path, write: Path | None = None) -> None:
    """Print the spread table; with ``write`` (a baselines directory of the cpu profile), set each baseline metric's
    allowance from it."""
    found = spreads(path)
    print(f"| model | precision | metric | value | runs | spread within a deployment | spread across runtimes "
          f"| allowance (max of the floor and {MULTIPLE}x the larger spread) |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, precision, metric), e in sorted(found.items()):
        given = allowance(metric, e["value"], max(e["within"], e["across"]))
        text = ", ".join(f"{k} {v:g}" for k, v in given.items())
        print(f"| {model} | {precision} | {metric} | {e['value']:.6g} | {e['runs']} | {e['within']:.2g} | "
              f"{e['across']:.2g} | {text} |")
    if write is None:
        return
    for file in sorted(Path(write).glob("*.json")):
        data = json.loads(file.read_text())
        for deployment, entry in data["deployments"].items():
            precision = next(p for p in ("fp32", "fp16", "mixed") if f"_{p}_" in deployment)
            for metric, stored in entry["metrics"].items():
                e = found.get((data["model"], precision, metric))
                if e is not None and stored.get("allowance") is not None:
                    stored["allowance"] = allowance(metric, stored["value"], max(e["within"], e["across"]))
        file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def against_baselines(reports: Path, baselines: Path) -> None:
    """The gate's accuracy rows of a run (``reports/raw``) against the committed cpu baselines: per model and
    precision, the largest |now - baseline| of each metric kind and the share of its allowance that uses."""
    from tritonsuite.judge.baselines import BaselineStore
    from tritonsuite.core.rows import Row

    store = BaselineStore(baselines, "cpu")
    worst: dict[tuple, tuple] = {}
    for f in sorted((reports / "raw").glob("accuracy-*.jsonl")):
        for line in f.read_text().splitlines():
            row = Row.from_dict(json.loads(line))
            comparison = store.compare(row)
            if comparison.refused or comparison.missing:
                print(f"{row.deployment}: {comparison.refused or comparison.missing}")
            for v in comparison.verdicts:
                if v.allowed is None:
                    continue
                key = (row.model, row.precision, v.metric)
                used = abs(v.delta) / v.allowed if v.allowed else 0.0
                if key not in worst or used > worst[key][1]:
                    worst[key] = (abs(v.delta), used, v.kind, row.deployment)
    print("| model | precision | metric | largest abs delta | share of allowance | deployment |")
    print("|---|---|---|---|---|---|")
    for (model, precision, metric), (delta, used, kind, deployment) in sorted(worst.items()):
        print(f"| {model} | {precision} | {metric} | {delta:.3g} | {used:.1%} | {deployment}"
              f"{'' if kind != 'regression' else ' REGRESSION'} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tft,nnunet,wide_deep_adult,bert,wide_deep,fastpitch")
    parser.add_argument("--label", default="default", help="names the environment of this run (ISA settings)")
    parser.add_argument("--out", type=Path, default=Path("reports/spread.jsonl"))
    parser.add_argument("--cache", type=Path, default=Path("model_repos/.cache"))
    parser.add_argument("--summarize", type=Path, default=None, help="print the spread table of a --out file")
    parser.add_argument("--write-allowances", type=Path, default=None, metavar="BASELINES_DIR",
                        help="with --summarize: set each baseline metric's allowance from the spread (fixtures/"
                        "baselines/cpu)")
    parser.add_argument("--against-baselines", type=Path, default=None, metavar="REPORTS_DIR",
                        help="print how far a gate run's accuracy rows moved from the committed cpu baselines")
    args = parser.parse_args(argv)
    if args.against_baselines:
        against_baselines(args.against_baselines, Path("fixtures/baselines"))
        return 0
    if args.summarize:
        summarize(args.summarize, args.write_allowances)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    measure([m for m in args.models.split(",") if m], args.label, args.out, args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
